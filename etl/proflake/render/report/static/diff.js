/* proflake diff page: draws the summary, the differential flame graph (flame.js) and the table from D
   (common.js): D.diff is DiffResult.to_dict(), D.flame the two sides' call trees merged by call path. */
  var X = D.diff, T = X.total, U = D.flame.unit;
  function signedPct(r) { return r === null || r === undefined ? "new" : (r >= 0 ? "+" : "") + (100 * r).toFixed(1) + "%"; }
  function ciPct(lo, hi, base) { return lo === null || !base ? "" : signedPct(lo / base) + " … " + signedPct(hi / base); }
  var PER = U === "s/step" ? "/step" : "/s";  // each side's seconds per sample, or per wall second
  function perUnit(x) { return x === null || x === undefined ? "" : seconds(x) + PER; }
  function ratioCi(lo, hi, base) { return lo === null || !base ? "" : percent(lo / base) + " … " + percent(hi / base); }
  function side(s) { // "run-7 algo-2 steps 0..99 (train)": the job, the node and what the side selected
    var a = s.arguments, what = s.method.replace(/_/g, "-");
    if (s.method === "by_step") what = "steps " + (a.start_step === a.end_step ? a.start_step : a.start_step + ".." + a.end_step) + " (" + a.mode + ")";
    else if (s.method === "by_time") what = "time " + a.start_time_s + ".." + a.end_time_s;
    else if (s.method === "between_modes") what = "modes " + a.start_mode + "→" + a.end_mode;
    else if (s.method === "pre_step_zero") what = "initialization";
    else if (s.method === "post_hook_close") what = "finalization";
    return s.job + (s.node ? " " + s.node : "") + " " + what;
  }

  // -- header ----------------------------------------------------------------------------------------
  var title = side(X.base) + " → " + side(X.head);
  document.title = "proflake diff: " + title;
  $("title").textContent = title;
  $("subtitle").textContent = "profiler " + X.profiler + " · per " + X.per + " · functions matched by " + X.match +
    " · generated " + D.meta.generated_at + " by proflake " + D.meta.proflake;

  // -- summary ---------------------------------------------------------------------------------------
  (function () {
    var box = $("summary-body"), cards = el("div", { class: "cards", id: "summary-cards" });
    card(cards, "total own time, base", perUnit(T.base));
    card(cards, "total own time, head", perUnit(T.head));
    card(cards, "change", percent(T.change_ratio) + " (" + signedSeconds(T.change) + PER + ")");
    card(cards, (100 * X.test.confidence).toFixed(0) + "% interval", ratioCi(T.ci_low, T.ci_high, T.base) || "not tested");
    card(cards, "verdict", T.status + (T.p_value !== null ? " (p=" + pval(T.p_value) + ")" : ""));
    box.appendChild(cards);
    box.appendChild(simpleTable(["side", "selection", "intervals", "samples (node steps)", "wall time"],
      [["base", X.base.selection, count(X.base.intervals), count(X.base.samples), seconds(X.base.wall_seconds)],
       ["head", X.head.selection, count(X.head.intervals), count(X.head.samples), seconds(X.head.wall_seconds)]], [0, 0, 1, 1, 1]));
    box.appendChild(el("p", { class: "note" }, "Each node's step is a sample; a change is tested against the step-to-step noise with Welch's t-test, " +
      "Holm-corrected over the total and the functions holding " + (100 * X.test.min_share).toFixed(1) + "% of a side's total own time, at alpha " + X.test.alpha + " (docs/diff.md)."));
    var G = X.gate;
    if (G.fail_on_total !== null || G.fail_on_function !== null) {
      var what = [];
      if (G.fail_on_total !== null) what.push("total +" + (100 * G.fail_on_total) + "%");
      if (G.fail_on_function !== null) what.push("function +" + (100 * G.fail_on_function) + "%");
      box.appendChild(el("p", { class: G.failed ? "verdict-fail" : "verdict-pass", id: "gate-line" },
        "gate (" + what.join(", ") + "): " + (G.failed ? "FAILED, a significant regression over the threshold" : "passed")));
      G.reasons.forEach(function (r) { box.appendChild(el("p", { class: "warn" }, r)); });
    }
    X.warnings.forEach(function (w) { box.appendChild(el("p", { class: "warn" }, "warning: " + w)); });
  })();

  // -- differential flame graph ----------------------------------------------------------------------
  (function () {
    var F = D.flame, box = $("flame-body"), by = "value";
    var ctl = el("div", { class: "controls" }), pick = el("select", { id: "flame-colour" });
    pick.appendChild(el("option", { value: "value" }, "inclusive time"));
    pick.appendChild(el("option", { value: "own" }, "own time"));
    ctl.appendChild(el("span", {}, "colour by the change of")); ctl.appendChild(pick);
    var legend = el("span", { class: "legend" }), swatch = el("span", { class: "swatch" });
    swatch.style.background = "linear-gradient(to right, rgb(47,111,223), rgb(232,232,232), rgb(214,64,46))";
    legend.appendChild(el("span", {}, " −50% or less ")); legend.appendChild(swatch); legend.appendChild(el("span", {}, " +50% or more (new: red, gone: blue)"));
    ctl.appendChild(legend);
    box.appendChild(ctl);
    function change(j) { // relative change of the chosen measure, +Infinity for a new frame
      var b = by === "own" ? F.base_own[j] : F.base[j], h = by === "own" ? F.head_own[j] : F.head[j];
      if (b > 0) return (h - b) / b;
      return h > 0 ? Infinity : 0;
    }
    function mix(to, t) {
      var from = [232, 232, 232];
      return "rgb(" + from.map(function (c, i) { return Math.round(c + (to[i] - c) * t); }).join(",") + ")";
    }
    var graph = flameGraph(box, F, {
      kind: (F.exact ? "pyinstrument call trees of both sides merged exactly by call path." :
        "Derived from cProfile's caller edges, as the report's flame graph (roots are the functions nothing called, a recursive cycle is drawn once, a function called from several places is shared among its callers), then the two sides' trees merged by call path.") +
        " Seconds are " + U + " (" + (U === "s/step" ? "each side's seconds over its samples" : "each side's seconds over its wall seconds") + ").",
      legend: "a frame's width is its inclusive time on both sides together, so what vanished or appeared still shows; red grew, blue shrank, the deeper the larger the relative change.",
      fill: function (j) {
        if (F.name[j] === "[other]") return "#c9ced6";
        var r = change(j), t = Math.min(1, Math.abs(r) / 0.5);
        return r >= 0 ? mix([214, 64, 46], t) : mix([47, 111, 223], t);
      },
      tip: function (j) {
        var lines = [F.name[j] + (F.file[j] ? "\n" + F.file[j] : "")];
        lines.push("base: " + seconds(F.base[j]) + PER + " inclusive, " + seconds(F.base_own[j]) + PER + " own");
        lines.push("head: " + seconds(F.head[j]) + PER + " inclusive, " + seconds(F.head_own[j]) + PER + " own");
        lines.push("change: " + signedSeconds(F.head[j] - F.base[j]) + PER + " inclusive (" + (F.base[j] > 0 ? signedPct((F.head[j] - F.base[j]) / F.base[j]) : "new") + "), " +
          signedSeconds(F.head_own[j] - F.base_own[j]) + PER + " own");
        if (F.folded[j]) lines.push(F.folded[j] + " smaller frames folded here");
        if (F.estimated && F.estimated[j]) lines.push("this path is an estimate (a function on it is called from several places)");
        return lines.join("\n");
      },
      status: function (outer) {
        var b = 0, h = 0;
        outer.forEach(function (k) { b += F.base[k]; h += F.head[k]; });
        return "matched: base " + seconds(b) + PER + " → head " + seconds(h) + PER + " (" + (b > 0 ? signedPct((h - b) / b) : "new") + ")";
      }
    });
    pick.addEventListener("change", function () { by = pick.value; graph.recolour(); });
  })();

  // -- the table -------------------------------------------------------------------------------------
  (function () {
    var rows = X.functions, box = $("table-body"), LIMIT = 500;
    var cols = [ // key, header, kind: t text, s seconds, r ratio, p p-value, n number, c change (sorted by size)
      ["function", "function", "t"], ["status", "status", "t"], ["base_self", "base own" + PER, "s"], ["head_self", "head own" + PER, "s"],
      ["self_change", "change" + PER, "c"], ["self_change_ratio", "change", "r"], ["ci", (100 * X.test.confidence).toFixed(0) + "% CI", "x"],
      ["p_adjusted", "p (Holm)", "p"], ["share_of_change", "share of change", "r"], ["base_cum", "base incl.", "s"], ["head_cum", "head incl.", "s"],
      ["base_calls", "base calls", "n"], ["head_calls", "head calls", "n"]];
    var ctl = el("div", { class: "controls" });
    var search = el("input", { type: "search", placeholder: "filter functions", id: "table-filter" });
    var which = el("select", { id: "table-status" });
    [["", "every status"], ["sig", "significant (slower, faster)"], ["slower", "slower"], ["faster", "faster"], ["added", "added"], ["removed", "removed"], ["noise", "noise"], ["minor", "minor"]]
      .forEach(function (o) { which.appendChild(el("option", { value: o[0] }, o[1])); });
    ctl.appendChild(search); ctl.appendChild(which);
    var shown = el("span", { class: "legend", id: "table-count" }); ctl.appendChild(shown);
    box.appendChild(ctl);
    box.appendChild(el("p", { class: "note" }, "Sorted by impact (the size of the own-time change) until a column is clicked; click again to reverse. " +
      "Times are seconds" + PER + " (" + (U === "s/step" ? "each side's seconds over its samples" : "each side's seconds over its wall seconds") +
      "); the interval is of the change, as a share of the base. A function's file and line are under its name; hover for the whole path."));
    var table = el("table", { id: "diff-table" }), head = el("thead"), hr = el("tr"), body = el("tbody");
    var state = { key: null, dir: 1 };
    cols.forEach(function (c) {
      var th = el("th", { class: (c[2] === "x" ? "" : "sortable") + (c[2] === "t" ? "" : " num"), "data-key": c[0] }, c[1]);
      if (c[2] !== "x") th.addEventListener("click", function () {
        state.dir = state.key === c[0] ? -state.dir : 1; state.key = c[0]; draw();
      });
      hr.appendChild(th);
    });
    head.appendChild(hr); table.appendChild(head); table.appendChild(body);
    var wrap = el("div", { class: "scroll" }); wrap.appendChild(table); box.appendChild(wrap);
    function cell(r, c) {
      var v = r[c[0]];
      if (c[0] === "ci") return ratioCi(r.self_ci_low, r.self_ci_high, r.base_self);
      if (c[2] === "s") return seconds(v);
      if (c[2] === "c") return signedSeconds(v);
      if (c[2] === "r") return v === null ? (c[0] === "self_change_ratio" && r.status === "added" ? "new" : "") : percent(v);
      if (c[2] === "p") return pval(v);
      if (c[2] === "n") return count(v);
      return v;
    }
    // The function in two lines that do not wrap: its name, then where it is (the path's end when long);
    // the whole name is the tooltip. So the column stays readable and a row is at most two lines high.
    function functionCell(r) {
      var td = el("td", { class: "fn2", title: r.function });
      var builtin = !r.filename || r.filename === "~";
      // a built-in's name ("<method 'run_backward' of ...>") is the whole text: it may take both lines
      td.appendChild(el("div", { class: builtin || !r.function_name ? "name whole" : "name" }, builtin || !r.function_name ? r.function : r.function_name));
      if (!builtin && r.function_name) td.appendChild(el("div", { class: "where" }, tail(r.filename, 48) + (r.lineno !== null && r.lineno !== undefined ? ":" + r.lineno : "")));
      return td;
    }
    function sortValue(r, c) {
      var v = r[c[0]];
      if (c[2] === "c") return Math.abs(v);
      if (v === null || v === undefined) return -Infinity;
      return v;
    }
    function draw() {
      Array.prototype.forEach.call(hr.children, function (th) { th.classList.toggle("sorted", th.getAttribute("data-key") === state.key); });
      var f = search.value.toLowerCase(), st = which.value;
      var list = rows.filter(function (r) {
        if (f && r.function.toLowerCase().indexOf(f) < 0) return false;
        if (st === "sig") return r.status === "slower" || r.status === "faster";
        return !st || r.status === st;
      });
      if (state.key) {
        var c = cols.filter(function (k) { return k[0] === state.key; })[0], d = state.dir;
        list = list.slice().sort(c[2] === "t" ?
          function (a, b) { return d * (a[c[0]] < b[c[0]] ? -1 : a[c[0]] > b[c[0]] ? 1 : 0); } :
          function (a, b) { return d * (sortValue(b, c) - sortValue(a, c)) || (a.function < b.function ? -1 : 1); });
      }
      body.textContent = "";
      list.slice(0, LIMIT).forEach(function (r) {
        var tr = el("tr", { class: "status-" + r.status, "data-function": r.function });
        cols.forEach(function (c) {
          var td = c[0] === "function" ? functionCell(r) : el("td", { class: c[0] === "status" ? "st" : "num" }, cell(r, c));
          if (c[2] === "c" || c[0] === "self_change_ratio") td.classList.add(r.self_change > 0 ? "grow" : r.self_change < 0 ? "shrink" : "same");
          tr.appendChild(td);
        });
        body.appendChild(tr);
      });
      shown.textContent = list.length > LIMIT ? "the first " + LIMIT + " of " + int(list.length) + " functions" : int(list.length) + " of " + int(rows.length) + " functions";
    }
    search.addEventListener("input", draw);
    which.addEventListener("change", draw);
    draw();
  })();

  document.body.setAttribute("data-ready", "1");
