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
  function short(x) { return x === 0 ? "0" : Number(x.toPrecision(3)).toString(); }
  function int(x) { return x === null || x === undefined ? "" : Number(x).toLocaleString("en-US"); }
  function pct(x, t) { return t > 0 ? (100 * x / t).toFixed(1) + "%" : ""; }
  function bytes(n) {
    var u = ["B", "KB", "MB", "GB", "TB"], i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return n.toFixed(i ? 1 : 0) + " " + u[i];
  }
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
