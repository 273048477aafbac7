// splitbrain timeline: every client op as a bar in its lane, coloured by outcome.
// Data arrives gzipped in the page; only what the window shows is drawn, ops narrower
// than a pixel are merged per pixel (info over fail over ok), so a million ops stay fast.
(function () {
  "use strict";
  var root = document.getElementById("tl");
  if (!root) return;
  var meta = JSON.parse(document.getElementById("tl-meta").textContent);
  var canvas = document.getElementById("tl-canvas");
  var tip = document.getElementById("tl-tip");
  var status = document.getElementById("tl-status");
  var COLOURS = ["#0072b2", "#e69f00", "#cc0055", "#cc0055"];
  var NAMES = ["ok", "fail", "info", "pending"];
  var GUTTER = 64, AXIS = 28;
  var n = meta.n, lanes = Math.max(1, meta.lanes), span = meta.span;
  var unit = meta.unit === "us" ? 1e6 : 1;
  var start, end, lane, proc, index, vid, code, values = [], laneOps, maxDur = 0;
  var view = { t0: 0, t1: span };
  var rowH = Math.max(2, Math.min(14, Math.floor(560 / lanes)));
  var drag = null, pending = false;

  function bytes(b64) {
    var s = atob(b64), u = new Uint8Array(s.length);
    for (var i = 0; i < s.length; i++) u[i] = s.charCodeAt(i);
    return u;
  }
  function gunzip(b64) {
    var stream = new Blob([bytes(b64)]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).arrayBuffer();
  }
  function fmtT(t) {
    if (meta.unit !== "us") return "index " + Math.round(t);
    var s = t / unit;
    return (Math.abs(s) < 10 ? s.toFixed(3) : s.toFixed(2)) + " s";
  }
  function fmtDur(d) {
    if (meta.unit !== "us") return d + " positions";
    return d >= 1000 ? (d / 1000).toFixed(2) + " ms" : d + " µs";
  }

  function unpack(buf) {
    var u32 = new Uint32Array(buf, 0, n * 6);
    start = new Float64Array(n); end = new Float64Array(n);
    lane = u32.subarray(2 * n, 3 * n); proc = u32.subarray(3 * n, 4 * n);
    index = new Float64Array(n); vid = u32.subarray(5 * n, 6 * n);
    code = new Uint8Array(buf, n * 24, n);
    var t = 0, ix = 0, counts = new Uint32Array(lanes);
    for (var i = 0; i < n; i++) {
      t += u32[i]; start[i] = t;
      var d = u32[n + i];
      end[i] = d === 4294967295 ? span : t + d;
      if (end[i] - t > maxDur) maxDur = end[i] - t;
      ix = (ix + u32[4 * n + i]) % 4294967296; index[i] = ix;
      counts[lane[i]]++;
    }
    laneOps = [];
    for (var l = 0; l < lanes; l++) laneOps.push(new Uint32Array(counts[l]));
    var fill = new Uint32Array(lanes);
    for (i = 0; i < n; i++) { var k = lane[i]; laneOps[k][fill[k]++] = i; }
  }

  // First op whose start is >= t (ops are in start order).
  function lowerBound(t) {
    var lo = 0, hi = n;
    while (lo < hi) { var m = (lo + hi) >> 1; if (start[m] < t) lo = m + 1; else hi = m; }
    return lo;
  }

  function size() {
    var w = Math.max(300, root.clientWidth), h = AXIS + lanes * rowH + 4;
    var dpr = window.devicePixelRatio || 1;
    canvas.style.width = w + "px"; canvas.style.height = h + "px";
    canvas.width = Math.round(w * dpr); canvas.height = Math.round(h * dpr);
    return { w: w, h: h, dpr: dpr };
  }

  function ticks(t0, t1, width) {
    var range = (t1 - t0) / unit, target = width / 110;
    var step = Math.pow(10, Math.floor(Math.log10(range / target)));
    [1, 2, 5, 10].some(function (m) { if (range / (step * m) <= target) { step *= m; return true; } return false; });
    var out = [], first = Math.ceil(t0 / unit / step) * step;
    for (var s = first; s <= t1 / unit + 1e-12; s += step) out.push(s * unit);
    return out;
  }

  function draw() {
    pending = false;
    var sz = size(), ctx = canvas.getContext("2d");
    ctx.setTransform(sz.dpr, 0, 0, sz.dpr, 0, 0);
    ctx.clearRect(0, 0, sz.w, sz.h);
    var W = sz.w - GUTTER, t0 = view.t0, t1 = view.t1, k = W / (t1 - t0);
    var x = function (t) { return GUTTER + (t - t0) * k; };
    // fault bands
    meta.faults.forEach(function (f) {
      if (f.end < t0 || f.start > t1) return;
      ctx.globalAlpha = 0.16; ctx.fillStyle = f.colour;
      var a = Math.max(GUTTER, x(f.start)), b = Math.min(sz.w, x(f.end));
      ctx.fillRect(a, AXIS, Math.max(1, b - a), lanes * rowH);
      // and a solid strip under the axis, where hovering names the fault
      ctx.globalAlpha = 0.85;
      ctx.fillRect(a, 18, Math.max(2, b - a), 7);
      ctx.globalAlpha = 1;
    });
    // axis
    ctx.fillStyle = "#333"; ctx.font = "11px sans-serif"; ctx.strokeStyle = "#ddd";
    ticks(t0, t1, W).forEach(function (t) {
      var px = x(t);
      ctx.fillText(fmtT(t), px + 2, 12);
      ctx.beginPath(); ctx.moveTo(px + 0.5, 15); ctx.lineTo(px + 0.5, sz.h); ctx.stroke();
    });
    for (var l = 0; l < lanes; l += Math.max(1, Math.ceil(12 / rowH))) {
      ctx.fillStyle = "#555";
      ctx.fillText("lane " + l, 4, AXIS + l * rowH + Math.min(rowH, 11));
    }
    // ops: wide ones as bars per colour, narrow ones merged per pixel
    var bars = [[], [], []], cells = new Uint8Array(lanes * (W + 1)), h = Math.max(1, rowH - 1);
    var i = lowerBound(t0 - maxDur);
    for (; i < n && start[i] <= t1; i++) {
      if (end[i] < t0) continue;
      var a = x(start[i]), b = x(end[i]), o = code[i] & 3, c = o === 3 ? 2 : o;
      if (b - a >= 1.5) { bars[c].push(Math.max(GUTTER, a), AXIS + lane[i] * rowH, Math.min(sz.w, b) - Math.max(GUTTER, a)); }
      else {
        var cell = lane[i] * (W + 1) + Math.max(0, Math.min(W, Math.floor(a - GUTTER)));
        var rank = c + 1; if (rank > cells[cell]) cells[cell] = rank;
      }
    }
    for (c = 0; c < 3; c++) {
      ctx.fillStyle = COLOURS[c]; ctx.beginPath();
      var bs = bars[c];
      for (var j = 0; j < bs.length; j += 3) ctx.rect(bs[j], bs[j + 1], bs[j + 2], h);
      for (j = 0; j < cells.length; j++) {
        if (cells[j] === c + 1) ctx.rect(GUTTER + (j % (W + 1)), AXIS + Math.floor(j / (W + 1)) * rowH, 1, h);
      }
      ctx.fill();
    }
    if (drag && drag.x1 !== undefined) {
      ctx.fillStyle = "rgba(0,0,0,0.12)";
      ctx.fillRect(Math.min(drag.x0, drag.x1), AXIS, Math.abs(drag.x1 - drag.x0), lanes * rowH);
    }
    status.textContent = n + " ops in " + lanes + " lanes; showing " + fmtT(t0) + " to " + fmtT(t1) +
      (meta.values_cut ? "; values past the first few MB are not embedded" : "");
  }
  function redraw() { if (!pending) { pending = true; requestAnimationFrame(draw); } }

  function timeAt(px) {
    var W = canvas.clientWidth - GUTTER;
    return view.t0 + (px - GUTTER) / W * (view.t1 - view.t0);
  }
  function zoomTo(a, b) {
    var lo = Math.max(0, Math.min(a, b)), hi = Math.min(span, Math.max(a, b));
    if (hi - lo < 2) { var mid = (lo + hi) / 2; lo = Math.max(0, mid - 1); hi = Math.min(span, mid + 1); }
    view.t0 = lo; view.t1 = hi; redraw();
  }
  function opAt(px, py) {
    var l = Math.floor((py - AXIS) / rowH);
    if (l < 0 || l >= lanes || px < GUTTER) return -1;
    var t = timeAt(px), slack = 3 * (view.t1 - view.t0) / (canvas.clientWidth - GUTTER);
    var ops = laneOps[l], lo = 0, hi = ops.length;
    while (lo < hi) { var m = (lo + hi) >> 1; if (start[ops[m]] <= t + slack) lo = m + 1; else hi = m; }
    for (var j = lo - 1; j >= 0 && j >= lo - 3; j--) {
      if (end[ops[j]] >= t - slack) return ops[j];
    }
    return -1;
  }
  function faultAt(px, py) {
    if (py < 16 || py > 27 || px < GUTTER) return null;
    var t = timeAt(px), slack = 2 * (view.t1 - view.t0) / (canvas.clientWidth - GUTTER);
    return meta.faults.filter(function (f) { return f.start - slack <= t && t <= f.end + slack; });
  }
  function place(ev, r, colour) {
    tip.style.borderColor = colour;
    tip.style.display = "block";
    tip.style.left = Math.min(ev.clientX - r.left + 14, r.width - 260) + "px";
    tip.style.top = (ev.clientY - r.top + 14) + "px";
  }
  function showTip(ev) {
    var r = canvas.getBoundingClientRect();
    var faults = faultAt(ev.clientX - r.left, ev.clientY - r.top);
    if (faults && faults.length) {
      tip.textContent = "";
      faults.forEach(function (f) {
        var d = document.createElement("div");
        d.textContent = f.class + ": " + f.label + " (" + fmtT(f.start) + " to " + fmtT(f.end) + ")";
        tip.appendChild(d);
      });
      place(ev, r, faults[0].colour);
      return;
    }
    var i = opAt(ev.clientX - r.left, ev.clientY - r.top);
    if (i < 0) { tip.style.display = "none"; return; }
    var o = code[i] & 3, f = meta.fs[code[i] >> 2] || "?", v = values[vid[i]];
    tip.textContent = "";
    [[f + " " + NAMES[o], true],
     ["value: " + (v === undefined || v === "" ? "(not embedded)" : v)],
     ["process " + proc[i] + ", history index " + index[i]],
     ["invoked " + fmtT(start[i]) + (o === 3 ? ", never completed" : ", latency " + fmtDur(end[i] - start[i]))]]
      .forEach(function (line) {
        var d = document.createElement("div"); d.textContent = line[0];
        if (line[1]) d.style.fontWeight = "bold";
        tip.appendChild(d);
      });
    place(ev, r, COLOURS[o]);
  }

  canvas.addEventListener("wheel", function (ev) {
    ev.preventDefault();
    var r = canvas.getBoundingClientRect(), t = timeAt(ev.clientX - r.left);
    var f = ev.deltaY > 0 ? 1.25 : 0.8;
    zoomTo(t - (t - view.t0) * f, t + (view.t1 - t) * f);
  }, { passive: false });
  canvas.addEventListener("mousedown", function (ev) {
    var r = canvas.getBoundingClientRect(); drag = { x0: ev.clientX - r.left };
  });
  window.addEventListener("mouseup", function () {
    if (drag && drag.x1 !== undefined && Math.abs(drag.x1 - drag.x0) > 4) zoomTo(timeAt(drag.x0), timeAt(drag.x1));
    drag = null; redraw();
  });
  canvas.addEventListener("mousemove", function (ev) {
    var r = canvas.getBoundingClientRect();
    if (drag) { drag.x1 = ev.clientX - r.left; redraw(); return; }
    showTip(ev);
  });
  canvas.addEventListener("mouseleave", function () { tip.style.display = "none"; });
  canvas.addEventListener("dblclick", function () { zoomTo(0, span); });
  document.getElementById("tl-reset").addEventListener("click", function () { zoomTo(0, span); });
  window.addEventListener("resize", redraw);

  if (typeof DecompressionStream === "undefined") {
    status.textContent = "This browser cannot unpack the timeline (no DecompressionStream).";
    return;
  }
  var cols = document.getElementById("tl-cols").textContent.trim();
  var vals = document.getElementById("tl-vals").textContent.trim();
  Promise.all([gunzip(cols), gunzip(vals)]).then(function (bufs) {
    unpack(bufs[0]);
    values = JSON.parse(new TextDecoder().decode(bufs[1]));
    draw();
    root.setAttribute("data-ready", "1");
  }).catch(function (e) {
    status.textContent = "The timeline's data could not be read: " + e;
  });
})();
