/* proflake pages (the report, the diff): what every page's script shares. page.py wraps the page's
   scripts (common.js, flame.js, then report.js or diff.js) in one function, in strict mode.
   Plain DOM and SVG, no library, no network: every number comes from the JSON document embedded in the
   page (#proflake-data), which proflake computed with SQL. Text from the data is only ever set with
   textContent. */
  var D = JSON.parse(document.getElementById("proflake-data").textContent);
  var SVG = "http://www.w3.org/2000/svg";

  // -- helpers ---------------------------------------------------------------------------------------
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function svg(tag, attrs) {
    var e = document.createElementNS(SVG, tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    return e;
  }
  function $(id) { return document.getElementById(id); }
  function sec(x) {
    if (x === null || x === undefined) return "";
    var a = Math.abs(x);
    if (a === 0) return "0";
    if (a >= 100) return x.toFixed(1);
    if (a >= 1) return x.toFixed(3);
    return x.toFixed(6);
  }
  // Numbers as proflake.numbers writes them: a duration with a unit and three significant digits
  // (1.04 s, 3.73 ms, 12.0 µs), a signed percentage (+36.1%, +19,352%), a grouped count (33,825; a mean
  // count keeps three digits), a p-value with two. tests/test_page_numbers_browser.py holds them equal.
  function g(v, digits) { // Python's format(v, ".<digits>g"): 0.25, 0.0041, 7.4e-06
    if (v === 0) return "0";
    var parts = v.toExponential(digits - 1).split("e"), exp = parseInt(parts[1], 10);
    if (exp >= -4 && exp < digits) return Number(v.toPrecision(digits)).toString();
    var mantissa = parts[0].indexOf(".") >= 0 ? parts[0].replace(/0+$/, "").replace(/\.$/, "") : parts[0];
    return mantissa + "e" + (exp < 0 ? "-" : "+") + (Math.abs(exp) < 10 ? "0" : "") + Math.abs(exp);
  }
  function three(v) {
    var m = Math.abs(v);
    if (m >= 99.95) return v.toFixed(0);
    if (m >= 9.995) return v.toFixed(1);
    if (m >= 0.9995) return v.toFixed(2);
    return g(v, 3);
  }
  function grouped(v) { return Number(v.toFixed(0)).toLocaleString("en-US", { maximumFractionDigits: 0 }); }
  function seconds(v) {
    if (v === null || v === undefined) return "";
    if (!isFinite(v)) return String(v);
    if (v === 0) return "0";
    var m = Math.abs(v), units = [["s", 1], ["ms", 1e-3], ["µs", 1e-6]];
    if (m >= 100) return grouped(v) + " s";
    for (var i = 0; i < units.length; i++) if (m >= units[i][1] * 0.9995) return three(v / units[i][1]) + " " + units[i][0];
    return three(v / 1e-9) + " ns";
  }
  function signedSeconds(v) { return v === null || v === undefined ? "" : (v > 0 ? "+" : "") + seconds(v); }
  function percent(ratio, unsigned) {
    if (ratio === null || ratio === undefined) return "";
    if (!isFinite(ratio)) return "new";
    var v = ratio * 100;
    if (v === 0) return "0%";
    return (!unsigned && v > 0 ? "+" : "") + (Math.abs(v) >= 99.95 ? grouped(v) : three(v)) + "%";
  }
  function count(v) {
    if (v === null || v === undefined) return "";
    if (Number.isInteger(v)) return v.toLocaleString("en-US");
    return Math.abs(v) >= 999.5 ? grouped(v) : g(v, 3);
  }
  function pval(p) { return p === null || p === undefined || isNaN(p) ? "" : g(p, 2); }
  function short(x) { return x === 0 ? "0" : Number(x.toPrecision(3)).toString(); }
  function int(x) { return x === null || x === undefined ? "" : Number(x).toLocaleString("en-US"); }
  function pct(x, t) { return t > 0 ? (100 * x / t).toFixed(1) + "%" : ""; }
  function share(x, t) { return t > 0 ? percent(x / t, true) : ""; }  // x's share of t: 36.1%
  function bytes(n) {
    var u = ["B", "KB", "MB", "GB", "TB"], i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return n.toFixed(i ? 1 : 0) + " " + u[i];
  }
  function tail(path, room) { // the end of a path in ``room`` characters at most: "…/nn/modules/module.py"
    var packages = path.lastIndexOf("-packages/"); // site-packages/, dist-packages/: from the package's name on
    if (packages >= 0) path = path.slice(packages + 10);
    if (path.length <= room) return path;
    var parts = path.split("/"), out = parts.pop();
    while (parts.length && out.length + parts[parts.length - 1].length + 5 <= room) out = parts.pop() + "/" + out;
    return "…/" + out;
  }
  function plural(n, one, many) { return int(n) + " " + (n === 1 ? one : many); }
  function card(parent, k, v) {
    var c = el("div", { class: "card" });
    c.appendChild(el("div", { class: "k" }, k));
    c.appendChild(el("div", { class: "v" }, v));
    parent.appendChild(c);
  }
  var tip = el("div", { class: "tip", id: "tip" });
  document.body.appendChild(tip);
  function showTip(ev, text) {
    tip.textContent = text; tip.style.display = "block";
    var x = Math.min(ev.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
    tip.style.left = x + "px"; tip.style.top = (ev.clientY + 14) + "px";
  }
  function hideTip() { tip.style.display = "none"; }
  function hue(text) { // stable warm colour per name, flame-graph style
    var h = 0;
    for (var i = 0; i < text.length; i++) h = (h * 31 + text.charCodeAt(i)) | 0;
    var r = Math.abs(h);
    return "hsl(" + (10 + r % 40) + "," + (65 + (r >> 8) % 25) + "%," + (58 + (r >> 16) % 14) + "%)";
  }
  function heat(t) { // 0..1 -> pale yellow .. red
    var r = 255, g = Math.round(245 - 190 * t), b = Math.round(200 - 180 * t);
    return "rgb(" + r + "," + g + "," + b + ")";
  }
  function simpleTable(columns, rows, numeric) {
    var t = el("table"), tr = el("tr");
    columns.forEach(function (c, i) { tr.appendChild(el("th", numeric[i] ? { class: "num" } : {}, c)); });
    var head = el("thead"); head.appendChild(tr); t.appendChild(head);
    var body = el("tbody");
    rows.forEach(function (r) {
      var row = el("tr");
      r.forEach(function (v, i) { row.appendChild(el("td", numeric[i] ? { class: "num" } : {}, v)); });
      body.appendChild(row);
    });
    t.appendChild(body);
    return t;
  }
