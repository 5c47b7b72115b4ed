/* proflake trend page: draws the summary, the table of changes, the diff of the jobs either side of the
   chosen change and each series' chart from D (common.js), which render/report/trend.py built from a
   TrendResult: D.jobs in start order, D.charts (per job: mean own time per step and the steps' standard
   deviation), D.changes, D.diffs (Profiles.diff of the last job before a change and the first after). */
  var J = D.jobs, C = D.changes, R = D.trend, selected = null;

  // Numbers (seconds, percent, count) are common.js's port of proflake.numbers.

  // -- header ----------------------------------------------------------------------------------------
  var span = J.length ? J[0].id + " .. " + J[J.length - 1].id : "no jobs";
  document.title = "proflake trend: " + span;
  $("title").textContent = "proflake trend: " + plural(J.length, "job", "jobs") + " (" + span + ")";
  $("subtitle").textContent = "profiler " + R.profiler + " · " + (R.node || "all nodes") + " · own time per train step" +
    " · generated " + D.meta.generated_at + " by proflake " + D.meta.proflake;

  // -- summary ---------------------------------------------------------------------------------------
  (function () {
    var box = $("summary-body"), cards = el("div", { class: "cards", id: "summary-cards" });
    card(cards, "jobs", int(J.length));
    card(cards, "first started", J.length ? J[0].start : "");
    card(cards, "newest started", J.length ? J[J.length - 1].start : "");
    card(cards, "changes", int(C.length));
    card(cards, "series tested", int(R.tested));
    box.appendChild(cards);
    R.summary.forEach(function (line) { box.appendChild(el("p", { class: "note" }, line)); });
    if (!C.length) {
      box.appendChild(el("p", { class: "nochange", id: "no-changes" }, "No change point: no function's own time per step " +
        "(nor the total) shifted by " + (100 * R.min_change) + "% or more, significantly, across these " + plural(J.length, "job", "jobs") + "."));
    }
    box.appendChild(el("p", { class: "note" }, "A change point is found by binary segmentation on the jobs' mean own time per step and kept when " +
      "Welch's test between the steps either side (corrected for the choice of the split and over the " + int(R.tested) +
      " series tested, alpha " + R.alpha + ") and the minimum change (" + (100 * R.min_change) + "%) agree (docs/trend.md)."));
    var G = D.gate;
    if (G) {
      box.appendChild(el("p", { class: G.failed ? "verdict-fail" : "verdict-pass", id: "gate-line" },
        "gate on the newest job (+" + (100 * G.fail_on) + "%): " + (G.failed ? "FAILED, it starts a significant slowdown over the threshold" : "passed")));
      G.verdict.forEach(function (r) { box.appendChild(el("p", { class: G.failed ? "warn" : "note" }, r)); });
    }
    R.warnings.forEach(function (w) { box.appendChild(el("p", { class: "warn" }, "warning: " + w)); });
  })();

  // -- the table of changes --------------------------------------------------------------------------
  var rowOf = {};
  (function () {
    var box = $("changes-body");
    if (!C.length) { box.appendChild(el("p", { class: "note" }, "No change points, so nothing to list.")); return; }
    box.appendChild(el("p", { class: "note", id: "diffs-note" }, "Click a change (here or its mark on a chart) for the diff of the last job " +
      "before it and the first after. " + (D.diffs_embedded < C.length ?
        "The diffs of the " + int(D.max_diffs) + " largest changes are in this page (" + int(D.diffs_embedded) + " of " + int(C.length) +
        "); for the others, run the proflake diff command shown." : "Every change's diff is in this page.")));
    var cols = ["function", "from job", "last job before", "before", "after", "change", "p", "jobs (steps) before vs after"];
    var table = el("table", { id: "changes-table" }), head = el("thead"), hr = el("tr"), body = el("tbody");
    cols.forEach(function (c, i) { hr.appendChild(el("th", i >= 3 && i <= 6 ? { class: "num" } : {}, c)); });
    head.appendChild(hr); table.appendChild(head); table.appendChild(body);
    C.forEach(function (c) {
      var tr = el("tr", { class: "pick", "data-change": c.id, "data-function": c.label, "data-job": c.job_id });
      [[c.label, "fn"], [c.job_id, ""], [c.base_job, ""], [c.text.before, "num"], [c.text.after, "num"],
       [c.text.change, "num " + (c.change === null || c.change > 0 ? "grow" : "shrink")], [c.text.p, "num"], [c.text.jobs, ""]]
        .forEach(function (v) { tr.appendChild(el("td", v[1] ? { class: v[1] } : {}, v[0])); });
      tr.addEventListener("click", function () { choose(c.id, true); });
      rowOf[c.id] = tr;
      body.appendChild(tr);
    });
    var wrap = el("div", { class: "scroll" }); wrap.appendChild(table); box.appendChild(wrap);
  })();

  // -- the diff of the chosen change -----------------------------------------------------------------
  function showDiff(c) {
    var box = $("diff-body");
    box.textContent = "";
    box.appendChild(el("p", { id: "diff-title" }, c.label + " " + c.text.change + " from " + c.job_id + ": " + c.base_job + " → " + c.job_id));
    var X = c.diff === null ? null : D.diffs[c.diff];
    if (X === null) {
      box.appendChild(el("p", { class: "note", id: "diff-missing" }, "This change is not among the " + int(D.max_diffs) +
        " largest, whose diffs this page holds; the command below draws its diff page."));
    } else {
      box.appendChild(el("p", { class: "note" }, "proflake diff " + X.base + " " + X.head + " (functions matched by file, line and name; " +
        int(X.samples[0]) + " vs " + int(X.samples[1]) + " node steps). Own time per step; the change is tested with Welch's test, Holm-corrected."));
      var cols = ["function", "status", X.base + " own", X.head + " own", "change", "p (Holm)"];
      var table = el("table", { id: "diff-table" }), head = el("thead"), hr = el("tr"), body = el("tbody");
      cols.forEach(function (h, i) { hr.appendChild(el("th", i >= 2 ? { class: "num" } : {}, h)); });
      head.appendChild(hr); table.appendChild(head); table.appendChild(body);
      var rows = [{ function: null, status: X.total.status, text: X.total.text, change_ratio: X.total.change_ratio }].concat(X.functions);
      rows.forEach(function (r) {
        var name = r.function === null ? "(total)" : r.function;
        var tr = el("tr", { class: "status-" + r.status + (name === c.label ? " selected" : ""), "data-function": name });
        [[name, "fn"], [r.status, "st"], [r.text.base, "num"], [r.text.head, "num"],
         [r.text.change, "num " + (r.change_ratio === null || r.change_ratio > 0 ? "grow" : r.change_ratio < 0 ? "shrink" : "same")], [r.text.p, "num"]]
          .forEach(function (v) { tr.appendChild(el("td", { class: v[1] }, v[0])); });
        body.appendChild(tr);
      });
      box.appendChild(table);
      if (X.more) box.appendChild(el("p", { class: "note" }, int(X.more) + " more functions in the full diff."));
      X.warnings.forEach(function (w) { box.appendChild(el("p", { class: "warn" }, "warning: " + w)); });
    }
    box.appendChild(el("p", { class: "note" }, "The full diff page (differential flame graph, every function):"));
    box.appendChild(el("pre", { class: "command", id: "diff-command" }, c.command));
  }
  function choose(id, scroll) {
    selected = id;
    Object.keys(rowOf).forEach(function (k) { rowOf[k].classList.toggle("selected", Number(k) === id); });
    Array.prototype.forEach.call(document.querySelectorAll("g.cp"), function (g) {
      g.classList.toggle("selected", Number(g.getAttribute("data-change")) === id);
    });
    showDiff(C[id]);
    document.body.setAttribute("data-selected", String(id));
    if (scroll) $("diff").scrollIntoView();
  }
  $("diff-body").appendChild(el("p", { class: "note", id: "diff-none" }, C.length ?
    "Click a change in the table or on a chart to see the diff of the jobs either side of it." : "No change points, so no diff to show."));

  // -- the charts ------------------------------------------------------------------------------------
  function nice(top) { // a round step for about four grid lines up to ``top``
    if (!(top > 0)) return 1;
    var raw = top / 4, mag = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / mag;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * mag;
  }
  function chart(parent, S, k) {
    var n = J.length, box = el("div", { class: "trend-chart", id: "chart-" + k, "data-function": S.label });
    box.appendChild(el("h3", {}, S.label));
    parent.appendChild(box);
    var W = Math.max(640, Math.min(1340, parent.clientWidth || 1100)), H = 230, L = 72, Rm = 16, T = 22, B = 78;
    var pw = W - L - Rm, ph = H - T - B, dx = pw / Math.max(n, 1);
    var s = svg("svg", { width: W, height: H, viewBox: "0 0 " + W + " " + H, class: "trend-svg", "data-jobs": n });
    var top = 0;
    for (var i = 0; i < n; i++) top = Math.max(top, S.mean[i] + S.sd[i]);
    var step = nice(top), ymax = Math.max(step * Math.ceil(top / step), step);
    function x(i) { return L + (i + 0.5) * dx; }
    function y(v) { return T + ph - ph * Math.max(0, v) / ymax; }
    for (var g = 0; g <= ymax * 1.0000001; g += step) {
      s.appendChild(svg("line", { class: "grid", x1: L, x2: L + pw, y1: y(g), y2: y(g) }));
      var t = svg("text", { class: "tick", x: L - 6, y: y(g) + 3.5, "text-anchor": "end" }); t.textContent = seconds(g); s.appendChild(t);
    }
    s.appendChild(svg("line", { class: "axis", x1: L, x2: L, y1: T, y2: T + ph }));
    s.appendChild(svg("line", { class: "axis", x1: L, x2: L + pw, y1: T + ph, y2: T + ph }));
    // the steps' spread: mean ± one standard deviation of a step
    var upper = [], lower = [], line = [];
    for (i = 0; i < n; i++) {
      upper.push(x(i).toFixed(1) + "," + y(S.mean[i] + S.sd[i]).toFixed(1));
      lower.unshift(x(i).toFixed(1) + "," + y(S.mean[i] - S.sd[i]).toFixed(1));
      line.push(x(i).toFixed(1) + "," + y(S.mean[i]).toFixed(1));
    }
    s.appendChild(svg("polygon", { class: "band", points: upper.concat(lower).join(" ") }));
    s.appendChild(svg("polyline", { class: "mean", points: line.join(" ") }));
    if (dx >= 4) for (i = 0; i < n; i++) s.appendChild(svg("circle", { class: "dot", cx: x(i), cy: y(S.mean[i]), r: Math.min(3, dx / 3) }));
    // job ids under the axis, as many as fit (every job when there is room), rotated
    var every = Math.max(1, Math.ceil(16 / dx));  // 16 px apart: rotated 45°, 11 px between two lines
    for (i = 0; i < n; i += every) {
      var lab = svg("text", { class: "tick job-label", x: 0, y: 0, "text-anchor": "end", transform: "translate(" + x(i).toFixed(1) + "," + (T + ph + 10) + ") rotate(-45)" });
      lab.textContent = J[i].id.length > 14 ? "…" + J[i].id.slice(-13) : J[i].id;
      s.appendChild(lab);
    }
    // the change points: the level before and after (dashed), a mark between the two jobs, clickable
    S.changes.forEach(function (id) {
      var c = C[id], at = c.job_index - 1, xc = L + at * dx;
      s.appendChild(svg("polyline", { class: "level", points: [L + (at - c.before_jobs) * dx, y(c.before_s), xc, y(c.before_s), xc, y(c.after_s), L + (at + c.after_jobs) * dx, y(c.after_s)].map(function (v) { return v.toFixed(1); }).join(" ") }));
      var mark = svg("g", { class: "cp", "data-change": id, "data-job": c.job_id });
      mark.appendChild(svg("line", { x1: xc, x2: xc, y1: T, y2: T + ph }));
      mark.appendChild(svg("rect", { x: xc - 6, y: T, width: 12, height: ph }));
      var label = svg("text", xc > L + 0.75 * pw ? { x: xc - 3, y: T - 6, "text-anchor": "end" } : { x: xc + 3, y: T - 6 }); label.textContent = c.text.change + " " + c.job_id; mark.appendChild(label);
      mark.addEventListener("click", function (ev) { ev.stopPropagation(); choose(id, true); });
      mark.addEventListener("mousemove", function (ev) { showTip(ev, c.label + "\n" + c.text.change + " from " + c.job_id + " (" + c.text.before + " → " + c.text.after + ", p=" + c.text.p + ")\nclick: the diff of " + c.base_job + " and " + c.job_id); });
      mark.addEventListener("mouseleave", hideTip);
      s.appendChild(mark);
    });
    // hover: the job under the pointer, its mean and spread
    var guide = svg("line", { class: "guide", y1: T, y2: T + ph, x1: -10, x2: -10 });
    var over = svg("rect", { x: L, y: T, width: pw, height: ph, fill: "transparent", class: "hover" });
    s.insertBefore(over, s.firstChild); s.insertBefore(guide, s.firstChild);
    s.addEventListener("mousemove", function (ev) {
      if (ev.target.closest && ev.target.closest("g.cp")) return;
      var r = s.getBoundingClientRect(), i = Math.floor((ev.clientX - r.left - L) / dx);
      if (i < 0 || i >= n) { hideTip(); return; }
      guide.setAttribute("x1", x(i)); guide.setAttribute("x2", x(i));
      s.setAttribute("data-hover", i);
      showTip(ev, J[i].id + " (job " + (i + 1) + " of " + n + ")\nstarted " + J[i].start + "\n" + S.label + ": " + seconds(S.mean[i]) +
        "/step, ± " + seconds(S.sd[i]) + " (one standard deviation of its " + int(J[i].steps) + " steps)");
    });
    s.addEventListener("mouseleave", function () { hideTip(); guide.setAttribute("x1", -10); guide.setAttribute("x2", -10); });
    box.appendChild(s);
  }
  (function () {
    var box = $("series-body");
    box.appendChild(el("p", { class: "note" }, "Per job, in the order the jobs started: the mean own time per train step (line) and " +
      "one standard deviation of the steps either side (band). Red marks: the change points, each between the last job before and the first after; " +
      "the dashed line is the level before and after. Hover for a job's numbers; click a mark for its diff. The total first, then the functions that changed, then the largest" +
      " (" + (D.charts.length - 1) + " functions)."));
    if (J.length < 2) box.appendChild(el("p", { class: "warn" }, "fewer than two jobs: no series to chart"));
    D.charts.forEach(function (S, k) { chart(box, S, k); });
    var uncharted = C.filter(function (c) { return !D.charts.some(function (S) { return S.function === c.function; }); }).length;
    if (uncharted) box.appendChild(el("p", { class: "note" }, int(uncharted) + " changes are in functions not charted here; they are in the table."));
  })();

  document.body.setAttribute("data-ready", "1");
