/* proflake report: draws the report's sections from D (common.js); the flame graph is flame.js's. */
  // -- header ----------------------------------------------------------------------------------------
  var M = D.meta, O = D.overview;
  var title = M.title;  // what was selected: "run-7 · node algo-2 · steps 5..9 (train)" (render/titles.py)
  document.title = "proflake report: " + title;
  $("title").textContent = title;
  // The title names the selection; the subtitle says where the numbers come from.
  // The input formats when they are not only the profiler's own (speedscope, py-spy, austin: docs/formats.md).
  const formats = (M.formats || []).filter((f) => f !== M.profiler);
  const unit = M.time_unit === "samples" ? " · times are sample counts" : M.time_unit === "mixed" ? " · seconds and sample counts mixed" : "";
  $("subtitle").textContent = "profiler " + M.profiler + (formats.length ? " (" + (M.formats || []).join(", ") + ")" : "") + unit +
    " · " + plural(O.intervals, "interval", "intervals") +
    " · generated " + M.generated_at + " by proflake " + M.proflake;

  // -- overview --------------------------------------------------------------------------------------
  (function () {
    var box = $("overview-body"), cards = el("div", { class: "cards" });
    card(cards, "job", O.jobs.map(function (j) { return j.job_id; }).join(", ") || "—");
    card(cards, "framework", Array.from(new Set(O.jobs.map(function (j) { return j.framework; }))).join(", ") || "—");
    card(cards, "profiler shown", O.profiler);
    card(cards, "profilers in store", O.profilers.map(function (p) { return p.profiler + " (" + count(p.intervals) + ")"; }).join(", ") || "—");
    card(cards, "nodes", O.nodes.length + ": " + O.nodes.join(", "));
    card(cards, "intervals", count(O.intervals) + (O.empty_intervals ? " (" + count(O.empty_intervals) + " empty)" : ""));
    card(cards, "stats files", bytes(O.bytes));
    card(cards, "time span", seconds(O.span_seconds));
    box.appendChild(cards);
    box.appendChild(el("p", { class: "note" }, "from " + (O.start || "—") + " to " + (O.end || "—")));
    box.appendChild(el("h3", {}, "Steps and modes"));
    box.appendChild(simpleTable(["mode", "profiled steps", "first", "last"],
      O.modes.map(function (m) { return [m.mode, int(m.steps), m.first_step, m.last_step]; }), [0, 1, 1, 1]));
    box.appendChild(el("h3", {}, "What the store does not have"));
    var g = O.gaps, q = O.quarantine;
    box.appendChild(el("p", { class: g.missing_steps ? "warn" : "note", id: "gaps-line" },
      g.missing_steps ? int(g.missing_steps) + " step(s) missing inside the profiled ranges" :
        "no missing steps inside the profiled ranges (a regular stride, e.g. every 10th step, is the profiler's setting)"));
    if (g.listed.length) box.appendChild(simpleTable(["node", "mode", "missing steps", "count"],
      g.listed.map(function (x) { return [x.node_id, x.mode, x.missing_steps, int(x.count)]; }), [0, 0, 0, 1]));
    box.appendChild(el("p", { class: q.files ? "warn" : "note", id: "quarantine-line" },
      q.files ? int(q.files) + " stats file(s) of this job are quarantined (proflake errors)" : "no quarantined stats files for this job"));
    if (q.listed.length) box.appendChild(simpleTable(["file", "kind", "why"],
      q.listed.map(function (x) { return [x.source_uri, x.error_kind, x.message]; }), [0, 0, 0]));
  })();

  // -- step timeline ---------------------------------------------------------------------------------
  // A node x step heatmap (one row per node, one column per step or, past what the width holds, per group of
  // steps showing the slowest), the slowest node-steps outlined and listed, step ticks every 1, 2 or 5 x 10^k
  // steps, and the node skew of each step in bars on the same columns: readable for hundreds of steps and
  // many nodes, where a line per node is not.
  function niceTicks(first, last, most) { // steps to label: multiples of 1, 2 or 5 x 10^k, at most ``most``
    var span = Math.max(1, last - first), unit = Math.pow(10, Math.floor(Math.log10(span / most)));
    var every = [1, 2, 5, 10].map(function (m) { return m * unit; }).filter(function (e) { return span / e <= most; })[0] || span;
    every = Math.max(1, Math.round(every));
    var out = [], t = Math.ceil(first / every) * every;
    for (; t <= last; t += every) out.push(t);
    return out;
  }
  (function () {
    var rows = D.steps.rows, box = $("timeline-body");
    if (!rows.length) { box.appendChild(el("p", { class: "note" }, "No single-step intervals in this selection.")); return; }
    var modes = Array.from(new Set(rows.map(function (r) { return r[1]; })));
    var ctl = el("div", { class: "controls" }), pick = el("select", { id: "timeline-mode" });
    modes.forEach(function (m) { pick.appendChild(el("option", { value: m }, m)); });
    ctl.appendChild(el("span", {}, "mode")); ctl.appendChild(pick); box.appendChild(ctl);
    var area = el("div"); box.appendChild(area);
    function draw() {
      area.textContent = "";
      var mode = pick.value, sel = rows.filter(function (r) { return r[1] === mode; });
      var nodes = Array.from(new Set(sel.map(function (r) { return r[0]; }))).sort();
      var steps = Array.from(new Set(sel.map(function (r) { return r[2]; }))).sort(function (a, b) { return a - b; });
      var W = Math.max(600, Math.min(1340, box.clientWidth || 1100)), L = 90, R = 12;
      var maxCols = Math.floor((W - L - R) / 2), bucket = Math.max(1, Math.ceil(steps.length / maxCols));
      var cols = Math.ceil(steps.length / bucket), index = {}, first = {};
      steps.forEach(function (s, i) { var c = Math.floor(i / bucket); index[s] = c; if (!(c in first)) first[c] = s; });
      // cell = the slowest wall time of the node's steps in the column (a straggler must stand out)
      var cell = {}, maxWall = 0, minWall = Infinity;
      sel.forEach(function (r) {
        var k = r[0] + "|" + index[r[2]];
        if (!(k in cell) || r[3] > cell[k].w) cell[k] = { w: r[3], s: r[2] };
        maxWall = Math.max(maxWall, r[3]);
      });
      for (var ck in cell) minWall = Math.min(minWall, cell[ck].w);
      var spread = maxWall - minWall, cw = (W - L - R) / cols;
      var ch = nodes.length <= 12 ? 18 : Math.max(6, Math.floor(360 / nodes.length)), top = 18, H = top + ch * nodes.length + 34;
      area.appendChild(el("p", { class: "note", id: "timeline-scale" }, int(steps.length) + " steps × " + plural(nodes.length, "node", "nodes") +
        (bucket > 1 ? "; one column per " + bucket + " steps, showing the slowest" : "") +
        ". Colour: the step's wall time, from pale (" + seconds(minWall) + ") to dark red (" + seconds(maxWall) + "); outlined: the " +
        (D.steps.slowest[mode] || []).length + " slowest node-steps."));
      var s2 = svg("svg", { width: W, height: H, id: "timeline-heatmap", role: "img" });
      nodes.forEach(function (n, ni) {
        if (ch >= 9 || ni % Math.ceil(9 / ch) === 0) {
          var lab = svg("text", { x: L - 6, y: top + ni * ch + Math.min(ch, 18) / 2 + 4, "text-anchor": "end", "font-size": 11, class: "node-label" });
          lab.textContent = n; s2.appendChild(lab);
        }
        for (var c = 0; c < cols; c++) {
          var v = cell[n + "|" + c]; if (!v) continue;
          var r = svg("rect", { x: (L + c * cw).toFixed(2), y: top + ni * ch, width: Math.max(cw - (cw > 4 ? 1 : 0), 0.5).toFixed(2), height: ch - (ch > 6 ? 2 : 0),
            fill: heat(spread > 0 ? (v.w - minWall) / spread : 0), "data-node": n, "data-step": v.s });
          (function (n, v) { r.addEventListener("mousemove", function (ev) { showTip(ev, n + ", step " + v.s + ": " + seconds(v.w)); }); })(n, v);
          r.addEventListener("mouseleave", hideTip);
          s2.appendChild(r);
        }
      });
      var marks = svg("g", { id: "timeline-slowest" });
      (D.steps.slowest[mode] || []).forEach(function (m, i) {
        var c = index[m.step], ni = nodes.indexOf(m.node_id);
        var box2 = svg("rect", { x: (L + c * cw - 1).toFixed(2), y: top + ni * ch - 1, width: Math.max(cw, 3).toFixed(2), height: ch, fill: "none",
          stroke: "#1d2330", "stroke-width": 1.5, class: "slow", "data-node": m.node_id, "data-step": m.step });
        marks.appendChild(box2);
        if (i < 3) { // the three slowest get their step above the grid
          var t = svg("text", { x: (L + (c + 0.5) * cw).toFixed(2), y: top - 5, "text-anchor": "middle", "font-size": 10, class: "slow-label" }); t.textContent = "▼" + m.step; marks.appendChild(t);
        }
      });
      s2.appendChild(marks);
      var axisY = top + ch * nodes.length;
      s2.appendChild(svg("line", { x1: L, y1: axisY + 1, x2: W - R, y2: axisY + 1, stroke: "#999" }));
      var ticks = niceTicks(steps[0], steps[steps.length - 1], Math.max(2, Math.floor((W - L - R) / 70)));
      var axis = svg("g", { id: "timeline-ticks" });
      ticks.forEach(function (t) {
        var c = index[t]; if (c === undefined) { // the first profiled step at or after t
          var after = steps.filter(function (s) { return s >= t; })[0]; if (after === undefined) return; c = index[after];
        }
        var x = L + (c + 0.5) * cw;
        axis.appendChild(svg("line", { x1: x.toFixed(2), y1: axisY + 1, x2: x.toFixed(2), y2: axisY + 5, stroke: "#999" }));
        var tx = svg("text", { x: x.toFixed(2), y: axisY + 17, "text-anchor": "middle", "font-size": 11, class: "tick" }); tx.textContent = t; axis.appendChild(tx);
      });
      s2.appendChild(axis);
      var xl = svg("text", { x: L - 6, y: axisY + 17, "text-anchor": "end", "font-size": 11 }); xl.textContent = "step"; s2.appendChild(xl);
      area.appendChild(el("h3", {}, "Wall time of each step, per node"));
      var hm = el("div", { class: "chart" }); hm.appendChild(s2); area.appendChild(hm);
      // the slowest node-steps
      var slow = D.steps.slowest[mode] || [];
      if (slow.length) {
        area.appendChild(el("h3", {}, "Slowest steps"));
        var st = simpleTable(["step", "node", "wall time", "median of the step's nodes", "over the median"],
          slow.map(function (m) { return [m.step, m.node_id, seconds(m.wall), seconds(m.median), m.median > 0 ? percent(m.wall / m.median - 1) : ""]; }), [1, 0, 1, 1, 1]);
        st.setAttribute("id", "timeline-slowest-table"); area.appendChild(st);
      }
      // skew per step, on the heatmap's columns
      var skew = D.steps.skew.filter(function (s) { return s.mode === mode && s.nodes > 1; });
      area.appendChild(el("h3", {}, "Node skew per step (slowest − fastest node)"));
      if (!skew.length) { area.appendChild(el("p", { class: "note" }, "One node only: no skew.")); return; }
      var colSkew = {};
      skew.forEach(function (s) { var c = index[s.step]; if (!(c in colSkew) || s.skew > colSkew[c].skew) colSkew[c] = s; });
      var maxSkew = Math.max.apply(null, skew.map(function (s) { return s.skew; }));
      var s3 = svg("svg", { width: W, height: 120, id: "timeline-skew" });
      Object.keys(colSkew).forEach(function (c) {
        var s = colSkew[c], h = maxSkew ? 100 * s.skew / maxSkew : 0;
        var r = svg("rect", { x: (L + c * cw).toFixed(2), y: 105 - h, width: Math.max(cw - (cw > 4 ? 1 : 0), 0.5).toFixed(2), height: h, fill: "#d6402e", "data-step": s.step });
        r.addEventListener("mousemove", function (ev) { showTip(ev, "step " + s.step + ": skew " + seconds(s.skew) + ", slowest " + s.slowest_node + " (" + seconds(s.slowest) + "), fastest " + seconds(s.fastest)); });
        r.addEventListener("mouseleave", hideTip);
        s3.appendChild(r);
      });
      var sk = svg("text", { x: L - 6, y: 14, "text-anchor": "end", "font-size": 11 }); sk.textContent = seconds(maxSkew); s3.appendChild(sk);
      s3.appendChild(svg("line", { x1: L, y1: 105.5, x2: W - R, y2: 105.5, stroke: "#999" }));
      var sc = el("div", { class: "chart" }); sc.appendChild(s3); area.appendChild(sc);
      var worst = skew.slice().sort(function (a, b) { return b.skew - a.skew || a.step - b.step; }).slice(0, 10);
      area.appendChild(el("h3", {}, "Most skewed steps"));
      area.appendChild(simpleTable(["step", "nodes", "fastest", "median", "slowest", "skew", "slowest node"],
        worst.map(function (s) { return [s.step, s.nodes, seconds(s.fastest), seconds(s.median), seconds(s.slowest), seconds(s.skew), s.slowest_node]; }),
        [1, 1, 1, 1, 1, 1, 0]));
    }
    pick.addEventListener("change", draw);
    draw();
  })();

  // -- phases ----------------------------------------------------------------------------------------
  (function () {
    var box = $("phases-body");
    ["job_phase", "training_phase"].forEach(function (kind) {
      var rows = D.phases.filter(function (p) { return p.kind === kind; });
      box.appendChild(el("h3", {}, kind === "job_phase" ? "Time per job phase, per node" : "Time per training phase (start mode → end mode), per node"));
      if (!rows.length) { box.appendChild(el("p", { class: "note" }, "none")); return; }
      var phases = Array.from(new Set(rows.map(function (r) { return r.phase; })));
      var nodes = Array.from(new Set(rows.map(function (r) { return r.node_id; }))).sort();
      var get = {}; rows.forEach(function (r) { get[r.phase + "|" + r.node_id] = r; });
      var table = simpleTable(["phase"].concat(nodes).concat(["intervals"]),
        phases.map(function (p) {
          var n = 0;
          return [p].concat(nodes.map(function (nd) { var r = get[p + "|" + nd]; if (r) n += r.intervals; return r ? seconds(r.seconds) : "—"; })).concat([count(n)]);
        }), [0].concat(nodes.map(function () { return 1; })).concat([1]));
      table.setAttribute("id", "phases-" + kind);
      box.appendChild(table);
    });
  })();

  // -- top functions and callers/callees -------------------------------------------------------------
  var C = D.columns;
  function functionTable(container, rows, opts) {
    var keys = [["function", "function", 0], ["own", C.own, 1], ["total", C.total, 1], ["calls", C.calls, 1], ["intervals", "intervals", 1]];
    var state = { key: opts.sort || "total", filter: "" }, limit = opts.limit || 100;
    var table = el("table", { id: opts.id }), head = el("thead"), hr = el("tr"), body = el("tbody");
    keys.forEach(function (k) {
      var th = el("th", { class: "sortable" + (k[2] ? " num" : ""), "data-key": k[0] }, k[1]);
      th.addEventListener("click", function () { state.key = k[0]; draw(); });
      hr.appendChild(th);
    });
    head.appendChild(hr); table.appendChild(head); table.appendChild(body);
    var wrap = el("div", { class: "scroll" }); wrap.appendChild(table); container.appendChild(wrap);
    function draw() {
      Array.prototype.forEach.call(hr.children, function (th) { th.classList.toggle("sorted", th.getAttribute("data-key") === state.key); });
      var key = state.key, f = state.filter.toLowerCase();
      var list = rows.filter(function (r) { return !f || r.function.toLowerCase().indexOf(f) >= 0; }).slice();
      list.sort(key === "function" ? function (a, b) { return a.function < b.function ? -1 : a.function > b.function ? 1 : 0; } :
        function (a, b) { return b[key] - a[key] || (a.function < b.function ? -1 : 1); });
      body.textContent = "";
      list.slice(0, limit).forEach(function (r) {
        var tr = el("tr", { class: "pick", "data-function": r.function });
        tr.appendChild(el("td", { class: "fn", title: r.filename + ":" + r.lineno }, r.function));
        tr.appendChild(el("td", { class: "num" }, seconds(r.own)));
        tr.appendChild(el("td", { class: "num" }, seconds(r.total)));
        tr.appendChild(el("td", { class: "num" }, count(r.calls) + (r.primitive_calls !== undefined && r.primitive_calls !== r.calls ? "/" + count(r.primitive_calls) : "")));
        tr.appendChild(el("td", { class: "num" }, count(r.intervals)));
        tr.addEventListener("click", function () { showEdges(r.function); });
        body.appendChild(tr);
      });
    }
    draw();
    return { setFilter: function (f) { state.filter = f; draw(); }, draw: draw };
  }
  (function () {
    var box = $("functions-body"), ctl = el("div", { class: "controls" });
    var pick = el("select", { id: "functions-scope" }), search = el("input", { type: "search", placeholder: "filter functions", id: "functions-filter" });
    pick.appendChild(el("option", { value: "" }, "the whole selection"));
    D.per_phase.forEach(function (p) { pick.appendChild(el("option", { value: p.phase }, "job phase: " + p.phase)); });
    ctl.appendChild(el("span", {}, "functions of")); ctl.appendChild(pick); ctl.appendChild(search);
    box.appendChild(ctl);
    box.appendChild(el("p", { class: "note" }, "Click a column to sort (the top " + 100 + " by own time, by total time and by calls are all here), a row for its callers and callees." +
      (M.profiler === "pyinstrument" ? " call trees count frames, not calls; total time counts recursion once." : " calls shown as total/primitive when they differ.")));
    var area = el("div"); box.appendChild(area);
    var current;
    function draw() {
      area.textContent = "";
      var rows = pick.value ? D.per_phase.filter(function (p) { return p.phase === pick.value; })[0].functions : D.functions;
      current = functionTable(area, rows, { id: "functions-table", limit: 100 });
      current.setFilter(search.value);
    }
    pick.addEventListener("change", draw);
    search.addEventListener("input", function () { current.setFilter(search.value); });
    draw();
    var edges = el("div", { id: "edges" }); box.appendChild(edges);
    edges.appendChild(el("p", { class: "note" }, D.edges ? "Select a function to see its callers and callees." :
      "Callers and callees come from cProfile's caller edges; this report shows pyinstrument data (see its call tree in the flame graph)."));
  })();
  function showEdges(fn) {
    var box = $("edges");
    if (!D.edges) return;
    box.textContent = "";
    Array.prototype.forEach.call(document.querySelectorAll("tr.selected"), function (tr) { tr.classList.remove("selected"); });
    Array.prototype.forEach.call(document.querySelectorAll("tr[data-function]"), function (tr) { if (tr.getAttribute("data-function") === fn) tr.classList.add("selected"); });
    box.appendChild(el("h3", { id: "edges-title" }, "Callers and callees of " + fn));
    var two = el("div", { class: "two" });
    [["callers", "called by"], ["callees", "calls"]].forEach(function (k) {
      var col = el("div"); col.appendChild(el("h3", {}, k[1]));
      var rows = (D.edges[k[0]][fn] || []).map(function (r) { return [r[0], count(r[1]) + (r[2] !== r[1] ? "/" + count(r[2]) : ""), seconds(r[3]), seconds(r[4])]; });
      if (!rows.length) col.appendChild(el("p", { class: "note" }, k[0] === "callers" ? "nothing (a root of the profile)" : "nothing"));
      else { var t = simpleTable(["function", "calls", "tottime", "cumtime"], rows, [0, 1, 1, 1]); t.setAttribute("id", "edges-" + k[0]); col.appendChild(t); }
      two.appendChild(col);
    });
    box.appendChild(two);
  }

  // -- flame graph -----------------------------------------------------------------------------------
  (function () {
    var F = D.flame, total = F.value[0] || 1;
    flameGraph($("flame-body"), F, {
      kind: F.exact ? "pyinstrument call trees of the selection merged exactly by call path." :
        "Derived from cProfile's caller edges, as gprof does: the roots are the functions nothing called, a recursive cycle is drawn once, and a function called from several places has its time shared among its callers by their edges' time (a function with one call path is exact).",
      legend: "widths are inclusive seconds.",
      fill: function (j) { return F.name[j] === "[other]" ? "#c9ced6" : j === 0 ? "#e8b37a" : hue(F.name[j]); },
      tip: function (j) {
        return F.name[j] + (F.file[j] ? "\n" + F.file[j] : "") + "\n" + seconds(F.value[j]) + " inclusive (" + share(F.value[j], total) + " of all)" +
          "\n" + seconds(F.own[j]) + " own" + (F.folded[j] ? "\n" + F.folded[j] + " smaller frames folded here" : "") +
          (F.estimated && F.estimated[j] ? "\nthis path is an estimate (a function on it is called from several places)" : "");
      },
      status: function (outer) {
        var matched = outer.reduce(function (a, k) { return a + F.value[k]; }, 0);
        return "matched: " + seconds(matched) + " (" + share(matched, total) + ")";
      }
    });
  })();

  // -- per-node comparison ---------------------------------------------------------------------------
  (function () {
    var box = $("nodes-body"), P = D.per_node;
    if (!P) { box.appendChild(el("p", { class: "note" }, "The selection holds one node: nothing to compare.")); return; }
    box.appendChild(el("p", { class: "note" }, "The selection's top " + P.functions.length + " functions by " + C.total + ", on each node; the cell's shade is its share of the row's slowest node."));
    var t = el("table", { id: "nodes-table" }), head = el("tr");
    head.appendChild(el("th", {}, "function"));
    P.nodes.forEach(function (nd) { head.appendChild(el("th", { class: "num" }, nd)); });
    head.appendChild(el("th", { class: "num" }, "slowest / fastest"));
    var th = el("thead"); th.appendChild(head); t.appendChild(th);
    var body = el("tbody");
    P.functions.forEach(function (f) {
      var tr = el("tr"), totals = f.cells.map(function (c) { return c[1]; });
      var hi = Math.max.apply(null, totals), lo = Math.min.apply(null, totals);
      tr.appendChild(el("td", { class: "fn" }, f.function));
      f.cells.forEach(function (c, i) {
        var td = el("td", { class: "num", title: P.nodes[i] + ": " + C.own + " " + seconds(c[0]) + ", " + C.calls + " " + count(c[2]) }, seconds(c[1]));
        td.style.background = heat(hi ? 0.6 * c[1] / hi : 0);
        tr.appendChild(td);
      });
      tr.appendChild(el("td", { class: "num" }, lo > 0 ? three(hi / lo) + "×" : "—"));
      body.appendChild(tr);
    });
    t.appendChild(body);
    var wrap = el("div", { class: "scroll" }); wrap.appendChild(t); box.appendChild(wrap);
  })();

  document.body.setAttribute("data-ready", "1");
