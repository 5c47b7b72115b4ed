  // -- flame graph (the report's and the diff's) -------------------------------------------------------
  /* flameGraph(box, F, opts) draws F, a tree in pre-order: name, label, file, value (the width), own,
     depth, folded arrays; exact (pyinstrument) or derived (cProfile); note (one sentence: how much of the
     time is placed by estimate); nodes. Click zooms, the search box
     highlights (text or /regex/), hover shows opts.tip(j). opts: kind (the sentence saying how the tree was
     made), fill(j) (a frame's colour), tip(j), status(outer) (the search's summary line, given the indexes
     of the matching frames no ancestor of which matches), legend (a sentence after the zoom hint). */
  function flameGraph(box, F, opts) {
    var n = F.name.length;
    if (F.note) box.appendChild(el("p", { class: "note", id: "flame-estimate" }, F.note));
    box.appendChild(el("p", { class: "note", id: "flame-kind" }, opts.kind));
    var ctl = el("div", { class: "controls" });
    var search = el("input", { type: "search", placeholder: "search functions (text or /regex/)", id: "flame-search" });
    var reset = el("button", { id: "flame-reset", type: "button" }, "reset zoom");
    var status = el("span", { id: "flame-status", class: "legend" });
    ctl.appendChild(search); ctl.appendChild(reset); ctl.appendChild(status); box.appendChild(ctl);
    box.appendChild(el("p", { class: "legend" }, "Click a frame to zoom in, hover for numbers. " + int(F.nodes) + " nodes" +
      (F.folded.some(function (f) { return f > 0; }) ? " (the smallest are folded into [other] nodes holding their total)" : "") + "; " + opts.legend));
    // rebuild parents from the pre-order depths
    var parent = new Int32Array(n), x0 = new Float64Array(n), stack = [], maxDepth = 0;
    var next = new Float64Array(n); // the offset where a node's next child starts
    for (var i = 0; i < n; i++) {
      var d = F.depth[i];
      while (stack.length > d) stack.pop();
      parent[i] = stack.length ? stack[stack.length - 1] : -1;
      if (parent[i] >= 0) { x0[i] = next[parent[i]]; next[parent[i]] += F.value[i]; } else x0[i] = 0;
      next[i] = x0[i];
      stack.push(i);
      if (d > maxDepth) maxDepth = d;
    }
    var ROW = 17, W = 1200, H = (maxDepth + 1) * ROW + 4;
    var s = svg("svg", { id: "flame-svg", viewBox: "0 0 " + W + " " + H, width: "100%" });
    var fbox = el("div", { id: "flame-box" }); fbox.appendChild(s); box.appendChild(fbox);
    var rects = [], labels = [], zoom = 0;
    for (var j = 0; j < n; j++) {
      var g = svg("g", {}), r = svg("rect", { height: ROW - 1, fill: opts.fill(j), "data-index": j });
      var t = svg("text", { y: 0 });
      g.appendChild(r); g.appendChild(t); s.appendChild(g);
      rects.push(r); labels.push(t);
      (function (j) {
        r.addEventListener("click", function () { zoomTo(j); });
        r.addEventListener("mousemove", function (ev) { showTip(ev, opts.tip(j)); });
        r.addEventListener("mouseleave", hideTip);
      })(j);
    }
    function isAncestor(a, b) { // a is b or an ancestor of b
      for (var k = b; k >= 0; k = parent[k]) if (k === a) return true;
      return false;
    }
    function layout() {
      var zx = x0[zoom], zw = F.value[zoom] || 1, scale = W / zw, shown = 0;
      for (var k = 0; k < n; k++) {
        var visible, x, w;
        if (isAncestor(k, zoom) && k !== zoom) { visible = true; x = 0; w = W; }
        else {
          visible = k === zoom || isAncestor(zoom, k);
          x = (x0[k] - zx) * scale; w = F.value[k] * scale;
          if (w < 0.3) visible = false;
        }
        var r = rects[k], t = labels[k];
        if (!visible) { r.setAttribute("display", "none"); t.setAttribute("display", "none"); continue; }
        shown++;
        var y = F.depth[k] * ROW;
        r.removeAttribute("display"); r.setAttribute("x", x.toFixed(2)); r.setAttribute("y", y); r.setAttribute("width", Math.max(w, 0.5).toFixed(2));
        r.setAttribute("opacity", isAncestor(k, zoom) && k !== zoom ? 0.6 : 1);
        var chars = Math.floor((w - 6) / 6.2);
        if (chars >= 3) {
          var name = F.label[k];
          t.textContent = name.length > chars ? name.slice(0, chars - 1) + "…" : name;
          t.removeAttribute("display"); t.setAttribute("x", (x + 3).toFixed(2)); t.setAttribute("y", y + ROW - 5);
        } else t.setAttribute("display", "none");
      }
      s.setAttribute("data-zoom", zoom);
      s.setAttribute("data-shown", shown);
    }
    function zoomTo(k) { zoom = k; layout(); }
    reset.addEventListener("click", function () { zoomTo(0); });
    function doSearch() {
      var q = search.value, re = null, outer = [], counted = {};
      if (q.length > 2 && q[0] === "/" && q[q.length - 1] === "/") { try { re = new RegExp(q.slice(1, -1)); } catch (e) { re = null; } }
      for (var k = 0; k < n; k++) {
        var hit = q && (re ? re.test(F.name[k]) : F.name[k].toLowerCase().indexOf(q.toLowerCase()) >= 0);
        rects[k].classList.toggle("match", !!hit);
        if (hit) {
          var first = true; // count a match once when an ancestor also matches
          for (var a = parent[k]; a >= 0; a = parent[a]) if (counted[a]) { first = false; break; }
          counted[k] = true;
          if (first) outer.push(k);
        }
      }
      status.textContent = q ? opts.status(outer) : "";
      s.setAttribute("data-matches", s.querySelectorAll("rect.match").length);
    }
    search.addEventListener("input", doSearch);
    layout();
    return { recolour: function () { for (var k = 0; k < n; k++) rects[k].setAttribute("fill", opts.fill(k)); } };
  }

