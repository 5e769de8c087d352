// jobq dashboard: live counts, the throughput chart, confirmations and
// the failed list's selection. Loaded as a file (the CSP forbids inline
// script); data only ever reaches the page through textContent.
"use strict";

(function () {
  var SVG = "http://www.w3.org/2000/svg";
  var POLL_MS = 5000;

  function fmt(n) { return Number(n).toLocaleString("en-US"); }

  function ago(seconds) {
    if (seconds < 0) return "—";
    if (seconds < 1) return "now";
    if (seconds < 60) return seconds + "s ago";
    if (seconds < 3600) return Math.floor(seconds / 60) + "m ago";
    if (seconds < 172800) return Math.floor(seconds / 3600) + "h ago";
    return Math.floor(seconds / 86400) + "d ago";
  }

  // setText updates an element's (or its link's) text only when it changed.
  function setText(el, text) {
    if (!el) return;
    var target = el.querySelector("a") || el;
    if (target.textContent !== text) target.textContent = text;
  }

  function el(name, attrs) {
    var e = document.createElementNS(SVG, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    return e;
  }

  // drawChart renders one stacked bar per minute: completed under failed.
  function drawChart(box, history) {
    var w = box.clientWidth || 600, h = box.clientHeight || 170;
    var left = 36, bottom = 18, top = 6;
    var peak = 1;
    history.forEach(function (m) { peak = Math.max(peak, m.completed + m.failed); });
    var svg = el("svg", { viewBox: "0 0 " + w + " " + h, preserveAspectRatio: "none" });
    var plotH = h - bottom - top, slot = (w - left) / history.length, bw = Math.max(1, slot - 2);
    svg.appendChild(el("line", { x1: left, y1: h - bottom, x2: w, y2: h - bottom, "class": "axis" }));
    [peak, Math.round(peak / 2)].forEach(function (v) {
      var y = h - bottom - (v / peak) * plotH;
      svg.appendChild(el("line", { x1: left, y1: y, x2: w, y2: y, "class": "axis" }));
      var t = el("text", { x: left - 6, y: y + 4, "text-anchor": "end" });
      t.textContent = fmt(v);
      svg.appendChild(t);
    });
    history.forEach(function (m, i) {
      var x = left + i * slot + 1;
      var title = el("title", {});
      var at = new Date(m.at * 1000);
      var hhmm = at.toTimeString().slice(0, 5);
      if (!m.known) {
        var r = el("rect", { x: x, y: h - bottom - 3, width: bw, height: 3, "class": "bar-unknown" });
        title.textContent = hhmm + ": no data";
        r.appendChild(title);
        svg.appendChild(r);
        return;
      }
      var hc = (m.completed / peak) * plotH, hf = (m.failed / peak) * plotH;
      var g = el("g", {});
      g.appendChild(el("rect", { x: x, y: h - bottom - hc, width: bw, height: hc, "class": "bar-completed" }));
      g.appendChild(el("rect", { x: x, y: h - bottom - hc - hf, width: bw, height: hf, "class": "bar-failed" }));
      g.appendChild(el("rect", { x: x, y: top, width: bw, height: plotH, "fill-opacity": 0 }));
      title.textContent = hhmm + ": " + fmt(m.completed) + " completed, " + fmt(m.failed) + " failed";
      g.appendChild(title);
      svg.appendChild(g);
    });
    if (!history.some(function (m) { return m.known; })) {
      var note = el("text", { x: left + (w - left) / 2, y: top + plotH / 2, "text-anchor": "middle", "class": "note" });
      note.textContent = history.some(function (m) { return m.unsupported; }) ?
        "Throughput is not available on this backend" :
        "Collecting samples (one every 10 s)";
      svg.appendChild(note);
    }
    [0, 30, 59].forEach(function (i) {
      if (!history[i]) return;
      var t = el("text", { x: left + i * slot + slot / 2, y: h - 4, "text-anchor": i === 0 ? "start" : i === 59 ? "end" : "middle" });
      t.textContent = i === 59 ? "now" : new Date(history[i].at * 1000).toTimeString().slice(0, 5);
      svg.appendChild(t);
    });
    box.replaceChildren(svg);
  }

  function applyCounts(root, data) {
    ["pending", "scheduled", "reserved", "failed"].forEach(function (k) {
      setText(root.querySelector('[data-total="' + k + '"]'), fmt(data.totals[k]));
    });
    var rows = root.querySelectorAll("tr[data-queue]");
    var byName = {};
    data.queues.forEach(function (q) { byName[q.queue] = q; });
    rows.forEach(function (row) {
      var q = byName[row.getAttribute("data-queue")];
      if (!q) return;
      ["pending", "scheduled", "reserved", "failed"].forEach(function (k) {
        setText(row.querySelector('[data-k="' + k + '"]'), fmt(q[k]));
      });
      setText(row.querySelector('[data-k="lag"]'), ago(q.lag_seconds));
      var failed = row.querySelector('[data-k="failed"]');
      if (failed) failed.classList.toggle("bad", q.failed > 0);
    });
    var updated = document.getElementById("updated");
    if (updated) {
      updated.setAttribute("datetime", data.updated);
      updated.textContent = new Date(data.updated).toLocaleTimeString();
    }
  }

  function startOverview(root) {
    var src = root.getAttribute("data-src");
    var chart = document.getElementById("chart");
    var last = null;
    function tick() {
      fetch(src, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (r) { if (!r.ok) throw new Error(r.status); return r.json(); })
        .then(function (data) {
          last = data;
          applyCounts(root, data);
          if (chart) drawChart(chart, data.history);
          root.classList.remove("stale");
        })
        .catch(function () { root.classList.add("stale"); })
        .finally(function () { setTimeout(tick, POLL_MS); });
    }
    tick();
    window.addEventListener("resize", function () { if (last && chart) drawChart(chart, last.history); });
  }

  // Forms with data-confirm (and buttons with it) ask before submitting.
  function confirmations() {
    document.addEventListener("submit", function (e) {
      var btn = e.submitter;
      var msg = (btn && btn.getAttribute("data-confirm")) || e.target.getAttribute("data-confirm");
      if (msg && !window.confirm(msg)) e.preventDefault();
    });
  }

  // The failed list: "this page" ticks every row; "all matching" makes
  // the row ticks moot, so they are shown ticked and disabled.
  function failedSelection() {
    var form = document.getElementById("bulk");
    if (!form) return;
    var page = document.getElementById("pickpage");
    var all = document.getElementById("all");
    var boxes = form.querySelectorAll('input[name="id"]');
    function sync() {
      boxes.forEach(function (b) { b.disabled = all.checked; if (all.checked) b.checked = true; });
      page.disabled = all.checked;
      all.parentElement.classList.toggle("on", all.checked);
    }
    page.addEventListener("change", function () { boxes.forEach(function (b) { b.checked = page.checked; }); });
    all.addEventListener("change", sync);
    sync();
  }

  document.addEventListener("DOMContentLoaded", function () {
    confirmations();
    failedSelection();
    var root = document.getElementById("overview");
    if (root) startOverview(root);
  });
})();
