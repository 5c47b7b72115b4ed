/* proflake report: draws the report's sections from D (common.js); the flame graph is flame.js's. */
  // -- header ----------------------------------------------------------------------------------------
  var M = D.meta, O = D.overview;
  var title = M.title;  // what was selected: "run-7 · node algo-2 · steps 5..9 (train)" (render/titles.py)
  document.title = "proflake report: " + title;
  $("title").textContent = title;
  var args = Object.keys(M.arguments).map(function (k) { return k + "=" + M.arguments[k]; }).join(", ");
  $("subtitle").textContent = "selection: " + M.method.replace(/_/g, "-") + (args ? " (" + args + ")" : "") +
    (M.node ? ", node " + M.node : "") + " · profiler " + M.profiler + " · generated " + M.generated_at + " by proflake " + M.proflake;

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
      var maxCols = 400, bucket = Math.max(1, Math.ceil(steps.length / maxCols));
      var cols = Math.ceil(steps.length / bucket), index = {};
      steps.forEach(function (s, i) { index[s] = Math.floor(i / bucket); });
      // cell = slowest wall time of the node's steps in the bucket (a straggler must stand out)
      var cell = {}, maxWall = 0, minWall = Infinity;
      sel.forEach(function (r) {
        var k = r[0] + "|" + index[r[2]];
        if (!(k in cell) || r[3] > cell[k].w) cell[k] = { w: r[3], s: r[2] };
        maxWall = Math.max(maxWall, r[3]);
      });
      for (var ck in cell) minWall = Math.min(minWall, cell[ck].w);
      var spread = maxWall - minWall;
      if (bucket > 1) area.appendChild(el("p", { class: "note" }, steps.length + " steps: one column per " + bucket + " steps, showing the slowest"));
      // line chart: wall time per step, one line per node
      var W = 1100, H = 220, L = 80, B = 28, T = 10, R = 120;
      var s1 = svg("svg", { viewBox: "0 0 " + W + " " + H, width: "100%", id: "timeline-chart", role: "img" });
      var x = function (i) { return L + (cols > 1 ? i * (W - L - R) / (cols - 1) : (W - L - R) / 2); };
      var y = function (w) { return T + (H - T - B) * (1 - (maxWall ? w / maxWall : 0)); };
      s1.appendChild(svg("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#999" }));
      s1.appendChild(svg("line", { x1: L, y1: T, x2: L, y2: H - B, stroke: "#999" }));
      [0, 0.5, 1].forEach(function (f) {
        var t = svg("text", { x: L - 6, y: y(maxWall * f) + 4, "text-anchor": "end", "font-size": 11 }); t.textContent = short(maxWall * f) + " s"; s1.appendChild(t);
      });
      var tl = svg("text", { x: L, y: H - 8, "font-size": 11 }); tl.textContent = "step " + steps[0]; s1.appendChild(tl);
      var tr = svg("text", { x: W - R, y: H - 8, "font-size": 11, "text-anchor": "end" }); tr.textContent = "step " + steps[steps.length - 1]; s1.appendChild(tr);
      var palette = ["#2f6fdf", "#d6402e", "#2a9d5c", "#9b51e0", "#e08a00", "#008b9a", "#7a5c3e", "#c2185b"];
      nodes.forEach(function (n, ni) {
        var pts = [];
        for (var c = 0; c < cols; c++) { var v = cell[n + "|" + c]; if (v) pts.push(x(c).toFixed(1) + "," + y(v.w).toFixed(1)); }
        s1.appendChild(svg("polyline", { points: pts.join(" "), fill: "none", stroke: palette[ni % palette.length], "stroke-width": 1.5 }));
        var lg = svg("text", { x: W - R + 8, y: T + 12 + 14 * ni, fill: palette[ni % palette.length], "font-size": 12 }); lg.textContent = n; s1.appendChild(lg);
      });
      area.appendChild(el("h3", {}, "Wall time of each step, per node"));
      area.appendChild(s1);
      // heatmap node x step
      area.appendChild(el("h3", {}, "Node × step heatmap (pale: " + short(minWall) + " s, dark red: " + short(maxWall) + " s)"));
      var cw = Math.max(2, Math.min(48, Math.floor((W - L) / cols))), ch = 18;
      var s2 = svg("svg", { width: L + cw * cols + 10, height: ch * nodes.length + 8, id: "timeline-heatmap" });
      nodes.forEach(function (n, ni) {
        var lab = svg("text", { x: L - 6, y: ni * ch + 13, "text-anchor": "end", "font-size": 11 }); lab.textContent = n; s2.appendChild(lab);
        for (var c = 0; c < cols; c++) {
          var v = cell[n + "|" + c]; if (!v) continue;
          var r = svg("rect", { x: L + c * cw, y: ni * ch, width: cw - (cw > 3 ? 1 : 0), height: ch - 2, fill: heat(spread > 0 ? (v.w - minWall) / spread : 0), "data-node": n, "data-step": v.s });
          (function (n, v) { r.addEventListener("mousemove", function (ev) { showTip(ev, n + ", step " + v.s + ": " + sec(v.w) + " s"); }); })(n, v);
          r.addEventListener("mouseleave", hideTip);
          s2.appendChild(r);
        }
      });
      var hm = el("div", { class: "chart" }); hm.appendChild(s2); area.appendChild(hm);
      // skew per step
      var skew = D.steps.skew.filter(function (s) { return s.mode === mode && s.nodes > 1; });
      area.appendChild(el("h3", {}, "Node skew per step (slowest − fastest node)"));
      if (!skew.length) { area.appendChild(el("p", { class: "note" }, "One node only: no skew.")); return; }
      var maxSkew = Math.max.apply(null, skew.map(function (s) { return s.skew; }));
      var s3 = svg("svg", { viewBox: "0 0 " + W + " 120", width: "100%", id: "timeline-skew" }), bw = (W - L - R) / skew.length;
      skew.forEach(function (s, i) {
        var h = maxSkew ? 100 * s.skew / maxSkew : 0;
        var r = svg("rect", { x: L + i * bw, y: 105 - h, width: Math.max(bw - 0.5, 0.5), height: h, fill: "#d6402e" });
        r.addEventListener("mousemove", function (ev) { showTip(ev, "step " + s.step + ": skew " + sec(s.skew) + " s, slowest " + s.slowest_node + " (" + sec(s.slowest) + " s), fastest " + sec(s.fastest) + " s"); });
        r.addEventListener("mouseleave", hideTip);
        s3.appendChild(r);
      });
      var sk = svg("text", { x: L - 6, y: 14, "text-anchor": "end", "font-size": 11 }); sk.textContent = short(maxSkew) + " s"; s3.appendChild(sk);
      area.appendChild(s3);
      var worst = skew.slice().sort(function (a, b) { return b.skew - a.skew || a.step - b.step; }).slice(0, 10);
      area.appendChild(el("h3", {}, "Most skewed steps"));
      area.appendChild(simpleTable(["step", "nodes", "fastest (s)", "median (s)", "slowest (s)", "skew (s)", "slowest node"],
        worst.map(function (s) { return [s.step, s.nodes, sec(s.fastest), sec(s.median), sec(s.slowest), sec(s.skew), s.slowest_node]; }),
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
      (M.profiler === "pyinstrument" ? " pyinstrument counts frames, not calls; total time counts recursion once." : " calls shown as total/primitive when they differ.")));
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
        "Derived from cProfile's caller edges, as snakeviz does: an approximation. cProfile records who called whom, not whole stacks, so a function's time under a caller is split in proportion to that caller's time on the path.",
      legend: "widths are inclusive seconds.",
      fill: function (j) { return F.name[j] === "[other]" ? "#c9ced6" : j === 0 ? "#e8b37a" : hue(F.name[j]); },
      tip: function (j) {
        return F.name[j] + (F.file[j] ? "\n" + F.file[j] : "") + "\n" + sec(F.value[j]) + " s inclusive (" + pct(F.value[j], total) + " of all)" +
          "\n" + sec(F.own[j]) + " s own" + (F.folded[j] ? "\n" + F.folded[j] + " smaller frames folded here" : "");
      },
      status: function (outer) {
        var matched = outer.reduce(function (a, k) { return a + F.value[k]; }, 0);
        return "matched: " + sec(matched) + " s (" + pct(matched, total) + ")";
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
