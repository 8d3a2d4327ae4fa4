/* report.js — draws the ktiming HTML report from the JSON embedded in the page (no network, no libraries).
 * Embedded into libktiming at build time; html.c writes the data into <script type="application/json"> tags:
 * #kt-data = {generator, after: SNAP, before: SNAP|null}, #kt-compare = `ktiming compare` JSON or null.
 * SNAP = {host, taken_ns, t0, entries: [...], sources, threads, queues, devices, spans: flat 11-tuples (see
 * html.c)}; a merged snapshot (several processes / MPI ranks) has sources, entries' by_source [[source, total]],
 * and threads/queues name their source (src): one timeline group and one bar per source.
 * When everything is drawn the root element gets data-kt-status="ok"; script errors are shown on the page
 * and counted in data-kt-errors (the headless-browser test checks both). */
(function () {
  'use strict';
  var root = document.documentElement;
  var SPAN_DEVICE = 1, SPAN_HOST_TIMED = 2, SPAN_ERROR = 4, SPAN_TRIALS = 8;
  var SPAN_FIELDS = 11;

  /* ---------------------------------------------------------------------------------------------
   * Small helpers
   * ------------------------------------------------------------------------------------------- */
  function $(id) { return document.getElementById(id); }
  function h(tag, attrs, kids) {
    var e = document.createElement(tag);
    setAttrs(e, attrs);
    append(e, kids);
    return e;
  }
  var SVGNS = 'http://www.w3.org/2000/svg';
  function s(tag, attrs, kids) {
    var e = document.createElementNS(SVGNS, tag);
    setAttrs(e, attrs);
    append(e, kids);
    return e;
  }
  function setAttrs(e, attrs) {
    if (!attrs) return;
    Object.keys(attrs).forEach(function (k) {
      var v = attrs[k];
      if (v === null || v === undefined || v === false) return;
      if (k === 'text') e.textContent = v;
      else if (k === 'style' && typeof v === 'object') Object.keys(v).forEach(function (p) { e.style[p] = v[p]; });
      else if (k.slice(0, 2) === 'on') e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    });
  }
  function append(e, kids) {
    if (kids === null || kids === undefined) return;
    if (!Array.isArray(kids)) kids = [kids];
    kids.forEach(function (k) {
      if (k === null || k === undefined || k === false) return;
      e.appendChild(typeof k === 'object' ? k : document.createTextNode(String(k)));
    });
  }
  function sig(x) {
    var a = Math.abs(x);
    return x.toFixed(a >= 100 ? 1 : a >= 10 ? 2 : 3);
  }
  function fmtNs(v) {
    if (v === null || v === undefined || !isFinite(v)) return '\u2013';
    var a = Math.abs(v);
    if (a < 1e3) return Math.round(v) + ' ns';
    if (a < 1e6) return sig(v / 1e3) + ' \u00b5s';
    if (a < 1e9) return sig(v / 1e6) + ' ms';
    return sig(v / 1e9) + ' s';
  }
  function fmtInt(v) { return String(Math.round(v)).replace(/\B(?=(\d{3})+(?!\d))/g, ','); }
  function plural(n, word) { return fmtInt(n) + ' ' + word + (n === 1 ? '' : /ch$/.test(word) ? 'es' : 's'); }
  function fmtP(p) { return !isFinite(p) ? '\u2013' : p < 1e-3 ? p.toExponential(1) : p.toPrecision(2); }
  function fmtX(r) { return isFinite(r) ? (r >= 10 ? r.toFixed(1) : r.toFixed(2)) + '\u00d7' : '\u2013'; }
  function key(e) { return JSON.stringify([e.name, e.backend, e.device]); }
  /* A Vulkan submission batch (the layer's vkQueueSubmit entry): its time holds its dispatches', so it is
   * neither a kernel nor part of the device time. */
  function isBatch(e) { return e.backend === 'Vulkan' && e.name === 'vkQueueSubmit'; }
  function kernelsOf(snap) { return snap.entries.filter(function (e) { return !isBatch(e); }); }
  /* text cut with an ellipsis to fit maxW pixels in the canvas context's current font ('' when even the
   * ellipsis does not fit) */
  function fitText(g, text, maxW) {
    if (g.measureText(text).width <= maxW) return text;
    var lo = 0, hi = text.length;
    while (lo < hi) { var m = (lo + hi + 1) >> 1; if (g.measureText(text.slice(0, m) + '\u2026').width <= maxW) lo = m; else hi = m - 1; }
    return lo ? text.slice(0, lo) + '\u2026' : '';
  }
  function sorted(a) { return a.slice().sort(function (x, y) { return x - y; }); }
  function quantile(srt, q) {
    if (!srt.length) return NaN;
    var p = (srt.length - 1) * q, i = Math.floor(p), f = p - i;
    return i + 1 < srt.length ? srt[i] * (1 - f) + srt[i + 1] * f : srt[i];
  }
  function median(e) { return e.samples && e.samples.length ? quantile(sorted(e.samples), 0.5) : e.p50; }

  /* A kernel's colour comes from its name alone (FNV-1a over the UTF-16 code units): the same kernel has the
   * same colour in every report, whatever else the program ran or in what order. The hash picks a hue on a
   * 360-step wheel and one of three lightness/saturation steps, so neighbours in hue still differ. */
  var colorOf = {};
  function nameHash(str) {
    var x = 0x811c9dc5;
    for (var i = 0; i < str.length; i++) { x ^= str.charCodeAt(i); x = Math.imul(x, 0x01000193) >>> 0; }
    return x >>> 0;
  }
  function nameColor(name) {
    var x = nameHash(String(name)), hue = x % 360, step = Math.floor(x / 360) % 3;
    return 'hsl(' + hue + ',' + [62, 52, 70][step] + '%,' + [46, 38, 55][step] + '%)';
  }
  function assignColors(entries) { entries.forEach(function (e) { colorOf[key(e)] = nameColor(e.name); }); }
  function color(e) { return colorOf[key(e)] || '#888'; }

  /* Nice tick values covering [lo, hi] (linear). */
  function ticks(lo, hi, count) {
    if (!(hi > lo)) return [lo];
    var raw = (hi - lo) / Math.max(1, count), mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 5, 10].map(function (m) { return m * mag; }).filter(function (x) { return x >= raw; })[0];
    var out = [];
    for (var v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(v);
    return out;
  }
  function logTicks(lo, hi) {
    var out = [];
    for (var p = Math.floor(Math.log10(lo)); p <= Math.ceil(Math.log10(hi)); p++)
      [1, 2, 5].forEach(function (m) { var v = m * Math.pow(10, p); if (v >= lo && v <= hi) out.push(v); });
    return out;
  }

  /* Width in px of text in the given CSS font (canvas metrics: no layout needed). */
  var measureCtx = null;
  function textWidth(text, font) {
    if (!measureCtx) measureCtx = document.createElement('canvas').getContext('2d');
    measureCtx.font = font;
    return measureCtx.measureText(text).width;
  }
  /* Axis labels that fit: each label is centred on its tick, moved inside [x0, x1] at the ends (so none is
   * clipped), and a label whose box would come within `gap` px of the last one kept is left out. Returns
   * [{v, x, w, anchor}] with anchor 'start' | 'middle' | 'end'. */
  function placeLabels(values, X, fmt, font, x0, x1, gap) {
    var out = [], right = -Infinity;
    values.forEach(function (v) {
      var x = X(v), w = textWidth(fmt(v), font), a = x - w / 2, anchor = 'middle';
      if (a < x0) { a = x0; anchor = 'start'; }
      if (a + w > x1) { a = x1 - w; anchor = 'end'; }
      if (a < right + gap) return;
      out.push({ v: v, x: anchor === 'start' ? a : anchor === 'end' ? a + w : x, w: w, anchor: anchor, left: a });
      right = a + w;
    });
    return out;
  }

  /* ---------------------------------------------------------------------------------------------
   * Data
   * ------------------------------------------------------------------------------------------- */
  function readJson(id) {
    var el = $(id);
    if (!el) return null;
    var t = el.textContent.trim();
    return t && t !== 'null' ? JSON.parse(t) : null;
  }
  var data = readJson('kt-data');
  var after = data.after, before = data.before;
  var cmpDoc = null, cmpNote = null;
  try { cmpDoc = readJson('kt-compare'); } catch (err) { cmpNote = 'The comparison document did not parse (' + err.message + '); speedups below are ratios of medians.'; }
  assignColors(after.entries);
  if (before) assignColors(before.entries);

  /* ---------------------------------------------------------------------------------------------
   * Header and summary cards
   * ------------------------------------------------------------------------------------------- */
  function renderHeader() {
    var hd = $('kt-header');
    append(hd, h('h1', null, ['ktiming report', h('small', { text: before ? 'comparison' : '' })]));
    var meta = 'host ' + (after.host || '?') + ' \u00b7 ' + data.generator + ' \u00b7 times on CLOCK_MONOTONIC_RAW';
    if (before) meta = 'before: host ' + (before.host || '?') + ' \u00b7 after: ' + meta;
    append(hd, h('div', { class: 'meta', text: meta }));
  }
  function renderCards() {
    var E = kernelsOf(after), dispatches = 0, dev = 0, cpu = 0, wait = 0, waits = 0, errs = 0, dropped = 0, spansDropped = 0;
    E.forEach(function (e) {
      if (e.backend === 'host-api') { wait += e.total; waits += e.n; return; } /* overlaps the kernels' time */
      dispatches += e.n; errs += e.errors; dropped += e.dropped; spansDropped += e.spans_dropped;
      if (e.backend === 'CPU') cpu += e.total; else dev += e.total;
    });
    var cards = [['kernels', fmtInt(E.length - (waits ? E.filter(function (e) { return e.backend === 'host-api'; }).length : 0))],
      ['dispatches', fmtInt(dispatches)]];
    if (dev || !cpu) cards.push(['device time', fmtNs(dev)]);
    if (cpu) cards.push(['CPU time', fmtNs(cpu)]);
    if (waits) cards.push(['waited on the GPU (' + plural(waits, 'call') + ')', fmtNs(wait)]);
    cards.push(['spans', fmtInt(after.spans.length / SPAN_FIELDS)]);
    var box = $('kt-cards');
    cards.forEach(function (c) { append(box, h('div', { class: 'card' }, [h('div', { class: 'v', text: c[1] }), h('div', { class: 'k', text: c[0] })])); });
    if (errs) append(box, h('div', { class: 'card bad' }, [h('div', { class: 'v', text: fmtInt(errs) }), h('div', { class: 'k', text: 'failed dispatches' })]));
    if (dropped || spansDropped)
      append(box, h('div', { class: 'card warn' }, [h('div', { class: 'v', text: fmtInt(dropped) + ' / ' + fmtInt(spansDropped) }), h('div', { class: 'k', text: 'dropped dispatches / spans' })]));
  }

  /* ---------------------------------------------------------------------------------------------
   * Kernel table
   * ------------------------------------------------------------------------------------------- */
  var selected = null; /* key of the kernel highlighted everywhere, or null */
  var onSelect = [];
  function select(k) {
    selected = selected === k ? null : k;
    onSelect.forEach(function (f) { f(); });
  }

  function renderTable() {
    var E = kernelsOf(after), B = after.entries.filter(isBatch);
    var maxTotal = Math.max.apply(null, E.map(function (e) { return e.total; }).concat([1]));
    var cols = [
      { t: 'kernel', l: 1, v: function (e) { return e.name; }, f: function (e) { return h('span', { title: e.name }, [h('span', { class: 'swatch', style: { background: color(e) } }), e.name]); }, c: 'name l' },
      { t: 'backend', l: 1, v: function (e) { return e.backend; } },
      { t: 'device', l: 1, v: function (e) { return e.device; }, f: function (e) { return h('span', { title: e.device, text: e.device }); }, c: 'dev l' },
      { t: 'n', v: function (e) { return e.n; }, f: function (e) { return fmtInt(e.n); } },
      /* failures next to the count, never behind a scrollbar */
      { t: 'errors', v: function (e) { return e.errors; }, f: function (e) { return e.errors ? fmtInt(e.errors) : ''; } },
      { t: 'dropped', v: function (e) { return e.dropped + e.spans_dropped; }, f: function (e) { return e.dropped || e.spans_dropped ? fmtInt(e.dropped) + ' / ' + fmtInt(e.spans_dropped) : ''; } },
      { t: 'mean', v: function (e) { return e.mean; }, ns: 1 },
      { t: 'p50', v: function (e) { return e.p50; }, ns: 1 },
      { t: 'p90', v: function (e) { return e.p90; }, ns: 1, w: 1 },
      { t: 'p99', v: function (e) { return e.p99; }, ns: 1 },
      { t: 'min', v: function (e) { return e.min; }, ns: 1, w: 1 },
      { t: 'max', v: function (e) { return e.max; }, ns: 1 },
      { t: 'cv', w: 1, v: function (e) { return e.mean > 0 ? e.stddev / e.mean : 0; }, f: function (e) { return e.mean > 0 ? (100 * e.stddev / e.mean).toFixed(1) + ' %' : '\u2013'; } },
      { t: 'total', v: function (e) { return e.total; }, f: function (e) { return [h('span', { text: fmtNs(e.total) }), h('i', { style: { width: Math.max(1, 60 * e.total / maxTotal) + 'px' } })]; }, c: 'bar l' },
      /* launch configurations: how many (the breakdown on hover and in the table below) */
      { t: 'configs', v: function (e) { return (e.configs || []).length; }, f: function (e) { return e.configs ? h('span', { class: 'cfgs', title: configLines(e), text: String(e.configs.length) }) : ''; } }
    ];
    /* w: a column left out under 1200 px (CSS .wide), so the table fits a 1000 px window */
    var state = { col: cols.map(function (c) { return c.t; }).indexOf('total'), asc: false };
    var table = h('table', { id: 'kt-kernels' }), thead = h('thead'), tbody = h('tbody');
    var hr = h('tr');
    cols.forEach(function (c, i) {
      append(hr, h('th', { class: (c.l ? 'l' : '') + (c.w ? ' wide' : '') + (i === state.col ? ' sorted' : ''), text: c.t, title: 'sort by ' + c.t, onclick: function () {
        state.asc = state.col === i ? !state.asc : !!c.l; state.col = i; fill();
      } }));
    });
    append(thead, hr); append(table, [thead, tbody]);
    function fill() {
      Array.prototype.forEach.call(hr.children, function (th, i) {
        th.className = (cols[i].l ? 'l' : '') + (cols[i].w ? ' wide' : '') + (i === state.col ? ' sorted' + (state.asc ? ' asc' : '') : '');
      });
      var c = cols[state.col];
      var rows = E.slice().sort(function (a, b) {
        var x = c.v(a), y = c.v(b), r = x < y ? -1 : x > y ? 1 : 0;
        return state.asc ? r : -r;
      });
      tbody.textContent = '';
      rows.forEach(function (e) {
        var tr = h('tr', { class: selected === key(e) ? 'sel' : '', title: 'click to highlight in the plots', onclick: function () { select(key(e)); } });
        cols.forEach(function (col) {
          append(tr, h('td', { class: (col.c || (col.l ? 'l' : '')) + (col.w ? ' wide' : '') }, col.f ? col.f(e) : col.ns ? fmtNs(col.v(e)) : col.v(e)));
        });
        append(tbody, tr);
      });
    }
    fill();
    onSelect.push(fill);
    var sec = $('kt-table');
    if (!E.length) append(sec, h('p', { class: 'empty', text: 'No kernels were recorded.' }));
    else append(sec, [h('div', { class: 'scroll' }, table), h('p', { class: 'note', text: 'Percentiles come from a log-linear histogram over every dispatch (within 1 %); cv = stddev / mean. Click a row to highlight its kernel in the plots.' })]);
    renderConfigs(sec, E);
    if (B.length) {
      var bn = 0, bt = 0;
      B.forEach(function (e) { bn += e.n; bt += e.total; });
      append(sec, h('p', { class: 'note', id: 'kt-batches', text: 'Vulkan submission batches (vkQueueSubmit): ' + plural(bn, 'batch') + ', ' + fmtNs(bt) + ' from the first dispatch to the last of each; they hold the dispatches above, so they are not kernels and not part of the device time.' }));
    }
  }

  /* Launch configurations (issue 40.2): entries' configs are [label, n, total, min, max] rows, largest total
   * first ("other": past the cap of 32); the rest of the kernel's dispatches carried none. */
  function configRows(e) {
    var rows = (e.configs || []).map(function (c) { return { label: c[0], n: c[1], total: c[2], min: c[3], max: c[4] }; });
    var n = 0, t = 0;
    rows.forEach(function (r) { n += r.n; t += r.total; });
    if (rows.length && n < e.n) rows.push({ label: 'none', n: e.n - n, total: Math.max(0, e.total - t), min: null, max: null });
    return rows;
  }
  function configLines(e) {
    return configRows(e).map(function (r) { return r.label + ': ' + plural(r.n, 'dispatch') + ', mean ' + fmtNs(r.total / r.n); }).join('\n');
  }
  function renderConfigs(sec, E) {
    var K = E.filter(function (e) { return e.configs && e.configs.length; }).sort(function (a, b) { return b.total - a.total; });
    if (!K.length) return;
    var table = h('table', { id: 'kt-configs' }), tbody = h('tbody');
    append(table, h('thead', null, h('tr', null, ['kernel', 'configuration', 'n', 'mean', 'min', 'max', 'total', '% of kernel'].map(function (t, i) {
      return h('th', { class: i < 2 ? 'l' : '', text: t });
    }))));
    K.forEach(function (e) {
      configRows(e).forEach(function (r, i) {
        append(tbody, h('tr', { 'data-kernel': key(e) }, [
          h('td', { class: 'name l', title: e.name }, i ? '' : [h('span', { class: 'swatch', style: { background: color(e) } }), e.name]),
          h('td', { class: 'l cfg', text: r.label }),
          h('td', { text: fmtInt(r.n) }), h('td', { text: fmtNs(r.total / r.n) }),
          h('td', { text: fmtNs(r.min) }), h('td', { text: fmtNs(r.max) }), h('td', { text: fmtNs(r.total) }),
          h('td', { text: e.total > 0 ? (100 * r.total / e.total).toFixed(1) + ' %' : '\u2013' })
        ]));
      });
    });
    append(table, tbody);
    append(sec, [h('h3', { class: 'sub-h', text: 'Launch configurations' }), h('div', { class: 'scroll' }, table),
      h('p', { class: 'note', text: 'Per kernel, each launch configuration it ran with (OpenCL global/local work sizes, Vulkan group counts, CUDA grid/block; "none": dispatches recorded without one). Percentiles are not kept per configuration.' })]);
  }

  /* ---------------------------------------------------------------------------------------------
   * Duration distributions (histogram + box plot per kernel)
   * ------------------------------------------------------------------------------------------- */
  function histogram(srt, lo, hi, bins, logx) {
    var counts = new Array(bins).fill(0);
    var a = logx ? Math.log(lo) : lo, b = logx ? Math.log(hi) : hi, w = (b - a) / bins || 1;
    srt.forEach(function (v) {
      var x = logx ? Math.log(v) : v, i = Math.floor((x - a) / w);
      counts[Math.max(0, Math.min(bins - 1, i))]++;
    });
    return counts;
  }
  var AXIS_FONT = '11px system-ui, -apple-system, "Segoe UI", "DejaVu Sans", Roboto, sans-serif';
  function distCard(e, prev) {
    var W = 320, H = 150, padL = 34, padR = 22, top = 8, hh = 78;
    var A = sorted(e.samples || []), B = prev ? sorted(prev.samples || []) : [];
    var card = h('div', { class: 'dist', 'data-kernel': key(e) });
    append(card, h('h3', { title: e.name, text: e.name }));
    var sub = e.backend + ' \u00b7 ' + e.device + ' \u00b7 ' + plural(A.length, 'sample') + ' of ' + plural(e.n, 'dispatch');
    append(card, h('div', { class: 'sub', text: sub }));
    if (!A.length) { append(card, h('p', { class: 'empty', text: 'no samples kept' })); return card; }
    var all = sorted(A.concat(B)), lo = all[0], hi = all[all.length - 1];
    if (hi <= lo) { lo = lo * 0.95; hi = hi * 1.05 + 1; }
    var logx = lo > 0 && hi / lo > 20;
    var iqr = quantile(all, 0.75) - quantile(all, 0.25);
    var bw = iqr > 0 ? 2 * iqr / Math.cbrt(all.length) : (hi - lo) / 12;
    var bins = logx ? 32 : Math.max(8, Math.min(48, Math.ceil((hi - lo) / bw)));
    var X = function (v) {
      var t = logx ? (Math.log(v) - Math.log(lo)) / (Math.log(hi) - Math.log(lo)) : (v - lo) / (hi - lo);
      return padL + Math.max(0, Math.min(1, t)) * (W - padL - padR);
    };
    var ca = histogram(A, lo, hi, bins, logx), cb = B.length ? histogram(B, lo, hi, bins, logx) : null;
    var fa = ca.map(function (c) { return c / A.length; }), fb = cb ? cb.map(function (c) { return c / B.length; }) : [];
    var ymax = Math.max.apply(null, fa.concat(fb)) || 1;
    var svg = s('svg', { width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'aria-label': 'duration histogram of ' + e.name });
    var edges = [];
    for (var i = 0; i <= bins; i++) {
      var t = i / bins;
      edges.push(logx ? Math.exp(Math.log(lo) + t * (Math.log(hi) - Math.log(lo))) : lo + t * (hi - lo));
    }
    var Y = function (f) { return top + hh - (f / ymax) * hh; };
    [0.5, 1].forEach(function (g) { append(svg, s('line', { class: 'gridline', x1: padL, x2: W - padR, y1: Y(g * ymax), y2: Y(g * ymax) })); });
    append(svg, s('text', { x: padL - 4, y: Y(ymax) + 4, 'text-anchor': 'end', text: Math.round(100 * ymax) + '%' }));
    var col = color(e);
    fa.forEach(function (f, i) {
      if (!f) return;
      var x0 = X(edges[i]), x1 = X(edges[i + 1]);
      append(svg, s('rect', { x: x0 + 0.5, y: Y(f), width: Math.max(1, x1 - x0 - 1), height: top + hh - Y(f), fill: col, 'fill-opacity': cb ? 0.75 : 0.9 },
        s('title', { text: fmtNs(edges[i]) + ' \u2013 ' + fmtNs(edges[i + 1]) + ': ' + ca[i] + ' samples' })));
    });
    if (cb) {
      var d = 'M' + X(edges[0]) + ',' + Y(0);
      fb.forEach(function (f, i) { d += 'L' + X(edges[i]) + ',' + Y(f) + 'L' + X(edges[i + 1]) + ',' + Y(f); });
      d += 'L' + X(edges[bins]) + ',' + Y(0);
      append(svg, s('path', { d: d, fill: 'none', stroke: '#30384a', 'stroke-width': 1.4, 'stroke-dasharray': '3 2' }, s('title', { text: 'before' })));
    }
    append(svg, s('line', { class: 'axis', x1: padL, x2: W - padR, y1: top + hh, y2: top + hh }));
    /* box plots: q1..q3 box, median bar, whiskers p5..p95, min/max dots */
    function box(srt, y, fill, label) {
      var q = function (p) { return X(quantile(srt, p)); };
      var g = s('g');
      append(g, s('line', { x1: q(0.05), x2: q(0.95), y1: y, y2: y, stroke: '#30384a', 'stroke-width': 1 }));
      append(g, s('rect', { x: q(0.25), y: y - 5, width: Math.max(1, q(0.75) - q(0.25)), height: 10, fill: fill, stroke: '#30384a', 'stroke-width': 0.8 }));
      append(g, s('line', { x1: q(0.5), x2: q(0.5), y1: y - 6, y2: y + 6, stroke: '#111', 'stroke-width': 2 }));
      append(g, s('circle', { cx: X(srt[0]), cy: y, r: 1.8, fill: '#30384a' }));
      append(g, s('circle', { cx: X(srt[srt.length - 1]), cy: y, r: 1.8, fill: '#30384a' }));
      append(g, s('title', { text: label + ': median ' + fmtNs(quantile(srt, 0.5)) + ', IQR ' + fmtNs(quantile(srt, 0.25)) + ' \u2013 ' + fmtNs(quantile(srt, 0.75)) + ', p5\u2013p95 ' + fmtNs(quantile(srt, 0.05)) + ' \u2013 ' + fmtNs(quantile(srt, 0.95)) }));
      append(svg, g);
    }
    var yb = top + hh + 12;
    if (B.length) { box(B, yb, '#e4e7ed', 'before'); yb += 14; }
    box(A, yb, col, B.length ? 'after' : 'samples');
    var tv = logx ? logTicks(lo, hi) : ticks(lo, hi, 4);
    placeLabels(tv, X, fmtNs, AXIS_FONT, 1, W - 1, 8).forEach(function (l) {
      append(svg, s('line', { class: 'axis', x1: X(l.v), x2: X(l.v), y1: top + hh, y2: top + hh + 3 }));
      append(svg, s('text', { class: 'tick', x: l.x, y: H - 4, 'text-anchor': l.anchor, text: fmtNs(l.v) }));
    });
    append(card, svg);
    /* the same p50/p90/p99 as the kernel table (histogram over every dispatch); the box is the kept samples */
    var med = quantile(A, 0.5);
    var line = 'p50 ' + fmtNs(e.p50) + ' \u00b7 p90 ' + fmtNs(e.p90) + ' \u00b7 p99 ' + fmtNs(e.p99) + ' (every dispatch)';
    if (B.length) line += ' \u00b7 sample medians: before ' + fmtNs(quantile(B, 0.5)) + ', after ' + fmtNs(med) + ' (' + fmtX(quantile(B, 0.5) / med) + ')';
    if (logx) line += ' \u00b7 log scale';
    append(card, h('div', { class: 'sub', text: line }));
    return card;
  }
  function renderDists() {
    var sec = $('kt-dists'), grid = h('div', { class: 'grid' });
    var prev = {};
    if (before) before.entries.forEach(function (e) { prev[key(e)] = e; });
    var E = kernelsOf(after).sort(function (a, b) { return b.total - a.total; });
    E.forEach(function (e) { append(grid, distCard(e, prev[key(e)])); });
    if (!E.length) append(sec, h('p', { class: 'empty', text: 'No kernels were recorded.' }));
    else append(sec, grid);
    function mark() {
      Array.prototype.forEach.call(grid.children, function (c) {
        c.style.outline = selected && c.getAttribute('data-kernel') === selected ? '2px solid ' + '#3b6fd8' : '';
        c.style.opacity = selected && c.getAttribute('data-kernel') !== selected ? 0.45 : 1;
      });
    }
    onSelect.push(mark);
  }

  /* ---------------------------------------------------------------------------------------------
   * Load balance across sources (ranks) of a merged snapshot: per kernel a bar per rank
   * ------------------------------------------------------------------------------------------- */
  function renderRanks() {
    var srcs = after.sources || [], sec = $('kt-ranks');
    if (!sec) return;
    if (!srcs.length) { sec.parentNode.removeChild(sec); return; } /* one process: no empty card */
    append(sec, h('h2', { text: 'Load balance across ranks' }, [h('span', { class: 'hint', text: 'per-rank total time of each kernel; imbalance = max / mean; the slowest rank in red' })]));
    var grid = h('div', { class: 'grid' });
    after.entries.slice().sort(function (a, b) { return b.total - a.total; }).forEach(function (e) {
      var tot = srcs.map(function () { return 0; });
      (e.by_source || []).forEach(function (p) { if (p[0] < tot.length) tot[p[0]] += p[1]; });
      var max = Math.max.apply(null, tot), mean = tot.reduce(function (a, b) { return a + b; }, 0) / tot.length;
      var slow = tot.indexOf(max), W = 320, bh = Math.max(3, Math.min(16, Math.floor(160 / tot.length))), H = bh * tot.length + 4;
      var svg = s('svg', { width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, class: 'kt-rank-bars' });
      tot.forEach(function (v, i) {
        var w = max > 0 ? Math.max(1, (W - 90) * v / max) : 1;
        var bar = s('rect', { x: 80, y: 2 + i * bh, width: w, height: Math.max(1, bh - 1), fill: i === slow ? '#d83b3b' : color(e) });
        append(bar, s('title', { text: srcs[i].label + ': ' + fmtNs(v) }));
        append(svg, bar);
        if (bh >= 9) append(svg, s('text', { x: 76, y: 2 + i * bh + bh - 2, 'text-anchor': 'end', 'font-size': Math.min(11, bh - 1), text: srcs[i].label }));
      });
      var card = h('div', { class: 'card', 'data-kernel': key(e) }, [
        h('div', { class: 'title', text: e.name + ' (' + e.backend + ')' }),
        h('div', { class: 'sub', text: 'imbalance ' + (mean > 0 ? (max / mean).toFixed(3) : '\u2013') + ' \u00b7 slowest ' + srcs[slow].label +
          ' \u00b7 min ' + fmtNs(Math.min.apply(null, tot)) + ' mean ' + fmtNs(mean) + ' max ' + fmtNs(max) })]);
      append(card, svg);
      append(grid, card);
    });
    append(sec, grid);
  }

  /* ---------------------------------------------------------------------------------------------
   * Comparison (speedup per kernel)
   * ------------------------------------------------------------------------------------------- */
  function num(o, names) {
    for (var i = 0; i < names.length; i++) {
      var v = o[names[i]];
      if (typeof v === 'number' && isFinite(v)) return v;
    }
    return NaN;
  }
  function compareRows() {
    var rows = [], onlyBefore = [], onlyAfter = [];
    var list = cmpDoc && (cmpDoc.kernels || cmpDoc.rows || cmpDoc.entries || cmpDoc.results);
    if (Array.isArray(list)) {
      list.forEach(function (r) {
        /* the shape of kt_compare_row_t (ktiming/compare.h); a side may be an object or flat fields */
        var B = typeof r.before === 'object' && r.before ? r.before : {}, A = typeof r.after === 'object' && r.after ? r.after : {};
        var bm = num(B, ['median_ns']), am = num(A, ['median_ns']);
        if (!isFinite(bm)) bm = num(r, ['before_median_ns', 'median_before_ns']);
        if (!isFinite(am)) am = num(r, ['after_median_ns', 'median_after_ns']);
        var sp = num(r, ['speedup_median', 'speedup', 'ratio']);
        var ci = Array.isArray(r.ci) ? r.ci : [num(r, ['ci_lo', 'ci_low']), num(r, ['ci_hi', 'ci_high'])];
        var side = String(r.presence || r.only || 'both').toLowerCase();
        var row = { name: r.name, backend: r.backend, device: r.device, before: bm, after: am, speedup: sp,
                    lo: +ci[0], hi: +ci[1], p: num(r, ['p_value', 'p']), verdict: String(r.verdict || 'NA').toUpperCase(),
                    reason: r.reason || '', n: [num(B, ['dispatches']), num(A, ['dispatches'])] };
        if (side.indexOf('before') >= 0) onlyBefore.push(row);
        else if (side.indexOf('after') >= 0) onlyAfter.push(row);
        else rows.push(row);
      });
      var gm = typeof cmpDoc.geomean === 'object' && cmpDoc.geomean ? cmpDoc.geomean : cmpDoc;
      return { rows: rows, onlyBefore: onlyBefore, onlyAfter: onlyAfter, geomean: num(gm, ['geomean_speedup', 'speedup', 'speedup_median', 'geomean']),
               geoLo: num(gm, ['geomean_ci_lo', 'ci_lo']), geoHi: num(gm, ['geomean_ci_hi', 'ci_hi']),
               geoVerdict: String(gm.geomean_verdict || gm.verdict || 'NA').toUpperCase(), verdicts: true };
    }
    var prev = {};
    before.entries.forEach(function (e) { prev[key(e)] = e; });
    after.entries.forEach(function (e) {
      var b = prev[key(e)];
      if (!b) { onlyAfter.push({ name: e.name, backend: e.backend, device: e.device }); return; }
      delete prev[key(e)];
      var bm = median(b), am = median(e);
      rows.push({ name: e.name, backend: e.backend, device: e.device, before: bm, after: am, speedup: bm / am, lo: NaN, hi: NaN, p: NaN, verdict: 'NA', n: [b.n, e.n] });
    });
    Object.keys(prev).forEach(function (k) { onlyBefore.push(prev[k]); });
    var logs = rows.filter(function (r) { return r.speedup > 0 && isFinite(r.speedup); }).map(function (r) { return Math.log(r.speedup); });
    var gmv = logs.length ? Math.exp(logs.reduce(function (a, b) { return a + b; }, 0) / logs.length) : NaN;
    return { rows: rows, onlyBefore: onlyBefore, onlyAfter: onlyAfter, geomean: gmv, verdicts: false };
  }
  function renderCompare() {
    var sec = $('kt-compare-view');
    if (!before) { sec.parentNode.removeChild(sec); return; }
    var C = compareRows();
    append(sec, h('h2', null, ['Speedup per kernel', h('span', { class: 'hint', text: 'before median / after median; > 1\u00d7 is faster' + (C.verdicts ? '; bars coloured by verdict, whiskers are the 95 % confidence interval' : '') })]));
    if (cmpNote) append(sec, h('p', { class: 'note', text: cmpNote }));
    if (!C.verdicts) append(sec, h('p', { class: 'note', text: 'No `ktiming compare` result was given: these are ratios of sample medians without significance tests (run ktiming compare for verdicts).' }));
    var rows = C.rows.slice().sort(function (a, b) { return b.speedup - a.speedup; });
    if (isFinite(C.geomean)) rows.push({ name: 'geometric mean', geo: true, speedup: C.geomean, lo: C.geoLo, hi: C.geoHi, verdict: C.geoVerdict || 'NA' });
    var ext = 1.25;
    rows.forEach(function (r) { [r.speedup, r.lo, r.hi].forEach(function (v) { if (v > 0 && isFinite(v)) ext = Math.max(ext, v, 1 / v); }); });
    ext = Math.min(ext * 1.1, 1000);
    var W = 900, labelW = 260, rowH = 24, H = rows.length * rowH + 30, x0 = labelW + 10, x1 = W - 70;
    var X = function (v) { return x0 + (Math.log(Math.max(1 / ext, Math.min(ext, v))) + Math.log(ext)) / (2 * Math.log(ext)) * (x1 - x0); };
    var svg = s('svg', { width: '100%', viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'aria-label': 'speedup per kernel' });
    var tk = [1 / 8, 1 / 4, 1 / 2, 1 / 1.25, 1, 1.25, 2, 4, 8, 16, 64, 256].filter(function (v) { return v >= 1 / ext && v <= ext; });
    tk.forEach(function (v) { append(svg, s('line', { class: v === 1 ? 'axis' : 'gridline', x1: X(v), x2: X(v), y1: 4, y2: H - 22 })); });
    /* labels that would touch their left neighbour are left out (0.80x 1.00x 1.25x ran together) */
    placeLabels(tk, X, fmtX, AXIS_FONT, x0 - 30, W - 2, 10).forEach(function (l) {
      append(svg, s('text', { x: l.x, y: H - 6, 'text-anchor': l.anchor, class: 'cmp-tick', text: fmtX(l.v) }));
    });
    var VC = { FASTER: '#1f9d55', SLOWER: '#d64545', SAME: '#8a94a6', UNSURE: '#c98a00' };
    rows.forEach(function (r, i) {
      var y = 6 + i * rowH, c = VC[r.verdict] || (r.geo ? '#30384a' : r.speedup >= 1 ? '#7cc49a' : '#ea9a9a');
      append(svg, s('text', { x: labelW, y: y + 15, 'text-anchor': 'end', style: 'font-family: var(--mono); font-size: 12px; fill: #1d2330; font-weight:' + (r.geo ? 700 : 400), text: r.geo ? r.name : r.name + (r.backend ? ' \u00b7 ' + r.backend : '') }));
      if (!(r.speedup > 0)) return;
      var xa = X(Math.min(1, r.speedup)), xb = X(Math.max(1, r.speedup));
      append(svg, s('rect', { x: xa, y: y + 4, width: Math.max(1.5, xb - xa), height: 14, rx: 2, fill: c },
        s('title', { text: r.name + ': ' + fmtX(r.speedup) + (r.geo ? '' : ' (before ' + fmtNs(r.before) + ', after ' + fmtNs(r.after) + ')') + (isFinite(r.p) ? ', p = ' + fmtP(r.p) : '') + (r.reason ? '; ' + r.reason : '') })));
      if (isFinite(r.lo) && isFinite(r.hi)) {
        append(svg, s('line', { x1: X(r.lo), x2: X(r.hi), y1: y + 11, y2: y + 11, stroke: '#111', 'stroke-width': 1.2 }));
        [r.lo, r.hi].forEach(function (v) { append(svg, s('line', { x1: X(v), x2: X(v), y1: y + 7, y2: y + 15, stroke: '#111', 'stroke-width': 1.2 })); });
      }
      append(svg, s('text', { x: x1 + 8, y: y + 15, style: 'fill: #1d2330; font-weight: 600', text: fmtX(r.speedup) }));
    });
    append(sec, svg);
    var t = h('table'), hr = h('tr');
    ['kernel', 'backend', 'device', 'n before / after', 'before', 'after', 'speedup', '95 % CI', 'p', 'verdict'].forEach(function (c, i) { append(hr, h('th', { class: i < 3 ? 'l' : '', text: c })); });
    append(t, h('thead', null, hr));
    var tb = h('tbody');
    C.rows.forEach(function (r) {
      append(tb, h('tr', null, [h('td', { class: 'name l', text: r.name }), h('td', { class: 'l', text: r.backend || '' }), h('td', { class: 'l', text: r.device || '' }),
        h('td', { text: (isFinite(r.n[0]) ? fmtInt(r.n[0]) : '\u2013') + ' / ' + (isFinite(r.n[1]) ? fmtInt(r.n[1]) : '\u2013') }),
        h('td', { text: fmtNs(r.before) }), h('td', { text: fmtNs(r.after) }), h('td', { text: fmtX(r.speedup) }),
        h('td', { text: isFinite(r.lo) ? fmtX(r.lo) + ' \u2013 ' + fmtX(r.hi) : '\u2013' }), h('td', { text: fmtP(r.p) }),
        h('td', { title: r.reason || null }, h('span', { class: 'tag ' + (VC[r.verdict] ? r.verdict : 'NA'), text: VC[r.verdict] ? r.verdict : 'n/a' }))]));
    });
    append(t, tb);
    append(sec, t);
    var names = function (l) { return l.map(function (r) { return r.name + ' (' + r.backend + ')'; }).join(', '); };
    if (C.onlyBefore.length) append(sec, h('p', { class: 'note', text: 'Only in before: ' + names(C.onlyBefore) }));
    if (C.onlyAfter.length) append(sec, h('p', { class: 'note', text: 'Only in after: ' + names(C.onlyAfter) }));
  }

  /* ---------------------------------------------------------------------------------------------
   * Timeline (canvas): one track per host thread, one per device queue; zoom, pan, hover, flows
   * ------------------------------------------------------------------------------------------- */
  function buildTracks(snap) {
    var S = snap.spans, n = S.length / SPAN_FIELDS, hosts = [], queues = [], end = 0, srcs = snap.sources || [];
    function srcLabel(i) { return srcs.length && srcs[i] ? srcs[i].label + ': ' : ''; }
    function srcTitle(i) {
      var so = srcs[i];
      if (!so) return 'unknown source';
      return so.label + ' \u00b7 host ' + so.host + ' pid ' + so.pid +
        (so.bound_ns < 0 ? ' (own clock)' : so.offset_ns || so.bound_ns ? ' (clock ' + fmtNs(so.offset_ns) + ' \u00b1 ' + fmtNs(so.bound_ns) + ')' : '');
    }
    function hostTrack(t) {
      if (!hosts[t]) {
        var ti = snap.threads[t];
        hosts[t] = { title: ti ? (ti.name || 'thread ' + (t + 1)) + ' (tid ' + ti.tid + ')' : 'unknown thread', host: true, items: [], enq: [],
                     src: ti ? ti.src : 0 };
      }
      return hosts[t];
    }
    for (var i = 0; i < n; i++) {
      var k = i * SPAN_FIELDS;
      var sp = { i: i, entry: S[k], q: S[k + 1], th: S[k + 2], fl: S[k + 3], s: S[k + 4], e: Math.max(S[k + 4], S[k + 5]),
                 enq: S[k + 6], queued: S[k + 7], submit: S[k + 8], unc: S[k + 9], dur: S[k + 10] };
      if (sp.s < 0) continue;
      end = Math.max(end, sp.e);
      if (sp.q < 0) hostTrack(sp.th).items.push(sp);
      else {
        if (!queues[sp.q]) {
          var qi = snap.queues[sp.q] || { label: 'unknown queue', backend: '?', device: '?' };
          queues[sp.q] = { title: qi.label, group: srcLabel(qi.src) + qi.backend + ' \u00b7 ' + qi.device, items: [], enq: [] };
        }
        queues[sp.q].items.push(sp);
        if (sp.enq >= 0) hostTrack(sp.th).enq.push(sp);
      }
    }
    var tracks = [];
    var hostList = hosts.filter(Boolean);
    if (srcs.length) { /* one group per source (rank), in source order */
      hostList.sort(function (a, b) { return a.src - b.src; });
      var lastSrc = -1;
      hostList.forEach(function (t) { t.group = t.src !== lastSrc ? srcTitle(t.src) : null; lastSrc = t.src; tracks.push(t); });
    } else {
      hostList.forEach(function (t, i) { t.group = i === 0 ? 'host ' + (snap.host || '') : null; tracks.push(t); });
    }
    var lastGroup = null;
    queues.filter(Boolean).sort(function (a, b) { return a.group < b.group ? -1 : a.group > b.group ? 1 : 0; }).forEach(function (t) {
      var g = t.group; t.group = g !== lastGroup ? g : null; lastGroup = g; tracks.push(t);
    });
    tracks.forEach(function (t) {
      t.items.sort(function (a, b) { return a.s - b.s || b.e - a.e; });
      var lanes = [];
      t.items.forEach(function (sp) {
        var l = 0;
        while (l < lanes.length && lanes[l] > sp.s) l++;
        lanes[l] = sp.e; sp.lane = l;
      });
      t.lanes = [];
      for (var l = 0; l < Math.max(1, lanes.length); l++) t.lanes.push([]);
      t.items.forEach(function (sp) { t.lanes[sp.lane].push(sp); });
      t.lanes.forEach(function (L) { L.maxDur = L.reduce(function (m, sp) { return Math.max(m, sp.e - sp.s); }, 0); });
      t.enq.sort(function (a, b) { return a.enq - b.enq; });
    });
    return { tracks: tracks, end: end };
  }

  function renderTimeline() {
    var sec = $('kt-timeline');
    var E = after.entries, T = buildTracks(after);
    if (!T.tracks.length) {
      append(sec, h('p', { class: 'empty', text: 'No spans were recorded (the span log is off with KTIMING_SPANS=0, or nothing ran).' }));
      return;
    }
    var LABEL = 230, AXIS = 24, ROW = 20, ENQ = 10, GROUP = 20;
    var FLOW_EACH = 300, FLOW_BIN = 24; /* flow arrows drawn one by one up to FLOW_EACH, then bundled */
    var showFlows = true;
    var tools = h('div', { class: 'tl-tools' });
    var reset = h('button', { type: 'button', text: 'reset zoom' });
    var flowBox = h('input', { type: 'checkbox', checked: 'checked', id: 'kt-flows' });
    append(tools, [reset, h('label', null, [flowBox, ' flow arrows (enqueue \u2192 execution)']),
      h('span', { text: 'wheel: zoom \u00b7 drag: pan \u00b7 double-click: reset \u00b7 hover: details' })]);
    var wrap = h('div', { class: 'tl-wrap' }), canvas = h('canvas'), tip = h('div', { class: 'tip' });
    append(wrap, canvas);
    append(sec, [tools, wrap]);
    document.body.appendChild(tip);

    /* vertical layout */
    var y = AXIS;
    T.tracks.forEach(function (t) {
      if (t.group) { t.groupY = y; y += GROUP; }
      t.y = y; t.h = t.lanes.length * ROW + (t.enq.length ? ENQ : 0);
      y += t.h + 4;
    });
    var H = y + 4, span = Math.max(T.end, 1);
    var view = { a: -span * 0.01, b: span * 1.01 };
    var hover = null, W = 0;

    function X(t) { return LABEL + (t - view.a) / (view.b - view.a) * (W - LABEL - 10); }
    function Tm(x) { return view.a + (x - LABEL) / (W - LABEL - 10) * (view.b - view.a); }
    function firstEnding(list, t, maxDur) { /* first index whose span may end at or after t */
      var lo = 0, hi = list.length, from = t - maxDur;
      while (lo < hi) { var m = (lo + hi) >> 1; if (list[m].s < from) lo = m + 1; else hi = m; }
      return lo;
    }
    function entryOf(sp) { return E[sp.entry] || { name: '?', backend: '?', device: '?' }; }
    function laneY(t, l) { return t.y + l * ROW; }
    function draw() {
      var dpr = window.devicePixelRatio || 1;
      W = Math.max(600, wrap.clientWidth);
      canvas.width = W * dpr; canvas.height = H * dpr;
      canvas.style.width = W + 'px'; canvas.style.height = H + 'px';
      var g = canvas.getContext('2d');
      g.setTransform(dpr, 0, 0, dpr, 0, 0);
      g.fillStyle = '#fff'; g.fillRect(0, 0, W, H);
      g.font = '11px system-ui, sans-serif'; g.textBaseline = 'middle';
      /* axis */
      var tv = ticks(view.a, view.b, Math.max(2, Math.floor((W - LABEL) / 110))).filter(function (v) { return X(v) >= LABEL; });
      g.strokeStyle = '#eef0f4'; g.fillStyle = '#667085';
      var axisLabels = placeLabels(tv, X, fmtNs, g.font, LABEL, W - 2, 10), axisMin = Infinity, axisMax = -Infinity;
      axisLabels.forEach(function (l) {
        var x = X(l.v);
        g.beginPath(); g.moveTo(x + 0.5, AXIS - 4); g.lineTo(x + 0.5, H); g.stroke();
        g.textAlign = l.anchor === 'start' ? 'left' : l.anchor === 'end' ? 'right' : 'center';
        g.fillText(fmtNs(l.v), l.x, 10);
        axisMin = Math.min(axisMin, l.left); axisMax = Math.max(axisMax, l.left + l.w);
      });
      canvas.setAttribute('data-kt-axis', axisLabels.length ? axisMin.toFixed(1) + ',' + axisMax.toFixed(1) + ',' + W : '');
      /* tracks; the titles as drawn (cut to the label column) are kept on the canvas for tests and tools */
      var drawn = [];
      T.tracks.forEach(function (t, ti) {
        if (t.group) {
          g.fillStyle = '#1d2330'; g.textAlign = 'left'; g.font = '600 12px system-ui, sans-serif';
          var gt = fitText(g, t.group, LABEL - 14);
          g.fillText(gt, 8, t.groupY + GROUP / 2 + 2);
          drawn.push(gt);
          g.strokeStyle = '#c3c8d2'; g.beginPath(); g.moveTo(0, t.groupY + 0.5); g.lineTo(W, t.groupY + 0.5); g.stroke();
          g.font = '11px system-ui, sans-serif';
        }
        g.fillStyle = ti % 2 ? '#fafbfc' : '#f4f6f9'; g.fillRect(LABEL, t.y, W - LABEL, t.h);
        g.fillStyle = '#30384a'; g.textAlign = 'left';
        g.save(); g.beginPath(); g.rect(0, t.y, LABEL - 6, t.h); g.clip();
        var tt = fitText(g, t.title + (t.lanes.length > 1 && !t.host ? ' \u00b7 ' + t.lanes.length + ' lanes' : ''), LABEL - 22);
        g.fillText(tt, 14, t.y + ROW / 2);
        drawn.push(tt);
        g.restore();
        g.save(); g.beginPath(); g.rect(LABEL, t.y, W - LABEL, t.h); g.clip();
        t.lanes.forEach(function (L, l) {
          var yy = laneY(t, l) + 2, lastX = -1;
          for (var i = firstEnding(L, view.a, L.maxDur); i < L.length; i++) {
            var sp = L[i];
            if (sp.s > view.b) break;
            if (sp.e < view.a) continue;
            var x0 = X(sp.s), x1 = X(sp.e), w = x1 - x0;
            if (w < 1 && Math.floor(x0) === lastX) continue;
            lastX = Math.floor(x0);
            var e = entryOf(sp), dim = selected && key(e) !== selected;
            g.globalAlpha = dim ? 0.18 : (sp.fl & SPAN_TRIALS ? 0.6 : 1);
            g.fillStyle = color(e);
            g.fillRect(x0, yy, Math.max(1, w), ROW - 4);
            if (sp.fl & SPAN_ERROR) { g.strokeStyle = '#d64545'; g.lineWidth = 2; g.strokeRect(x0, yy, Math.max(2, w), ROW - 4); g.lineWidth = 1; }
            if (sp.fl & SPAN_HOST_TIMED) { g.setLineDash([3, 2]); g.strokeStyle = '#1d2330'; g.strokeRect(x0 + 0.5, yy + 0.5, Math.max(1, w - 1), ROW - 5); g.setLineDash([]); }
            if (w > 36) {
              g.fillStyle = '#fff'; g.save(); g.beginPath(); g.rect(x0, yy, w, ROW - 4); g.clip();
              var lx = Math.max(x0, LABEL) + 4, lt = fitText(g, e.name + ' ' + fmtNs(sp.dur), x1 - lx - 3);
              if (lt.length > 2) g.fillText(lt, lx, yy + (ROW - 4) / 2 + 1);
              g.restore();
            }
          }
          g.globalAlpha = 1;
        });
        if (t.enq.length) {
          var ey = t.y + t.lanes.length * ROW + 1;
          for (var i = 0; i < t.enq.length; i++) {
            var sp = t.enq[i];
            if (sp.enq < view.a || sp.enq > view.b) continue;
            var e = entryOf(sp);
            g.globalAlpha = selected && key(e) !== selected ? 0.18 : 1;
            g.fillStyle = color(e);
            var x = X(sp.enq);
            g.beginPath(); g.moveTo(x, ey); g.lineTo(x + 4, ey + ENQ - 2); g.lineTo(x - 4, ey + ENQ - 2); g.closePath(); g.fill();
          }
          g.globalAlpha = 1;
        }
        g.restore();
      });
      canvas.setAttribute('data-kt-titles', drawn.join('|'));
      /* flows: enqueue marker on the host thread → start of the span on its queue */
      var hostOf = {};
      T.tracks.forEach(function (t) { t.enq.forEach(function (sp) { hostOf[sp.i] = t; }); });
      g.save(); g.beginPath(); g.rect(LABEL, AXIS, W - LABEL, H - AXIS); g.clip();
      function flow(sp, t, strong) {
        var ht = hostOf[sp.i];
        if (!ht) return;
        var xa = X(sp.enq), ya = ht.y + ht.lanes.length * ROW + ENQ - 1, xb = X(sp.s), yb = laneY(t, sp.lane) + ROW / 2;
        g.strokeStyle = strong ? '#1d2330' : 'rgba(48,56,74,.35)'; g.lineWidth = strong ? 1.6 : 1;
        g.beginPath(); g.moveTo(xa, ya); g.bezierCurveTo(xa, (ya + yb) / 2, xb, (ya + yb) / 2, xb, yb); g.stroke();
        g.beginPath(); g.arc(xb, yb, strong ? 3 : 2, 0, 7); g.fillStyle = g.strokeStyle; g.fill();
      }
      var flowsDrawn = 0, flowBundles = 0;
      if (showFlows) {
        /* Up to FLOW_EACH visible arrows are drawn one by one; above that they are bundled: arrows between the
         * same host thread and queue whose ends fall in the same FLOW_BIN-px columns become one, drawn from
         * the mean enqueue to the mean start, thicker with the log of its count. */
        var cand = [];
        T.tracks.forEach(function (t) {
          t.items.forEach(function (sp) {
            if (sp.enq < 0 || sp.q < 0 || !hostOf[sp.i]) return;
            if ((sp.s < view.a || sp.enq > view.b) || (selected && key(entryOf(sp)) !== selected)) return;
            cand.push([sp, t]);
          });
        });
        if (cand.length <= FLOW_EACH) {
          cand.forEach(function (c) { flow(c[0], c[1], false); });
          flowsDrawn = cand.length;
        } else {
          var groups = {}, order = [];
          cand.forEach(function (c) {
            var sp = c[0], t = c[1], ht = hostOf[sp.i];
            var k = ht.y + '>' + t.y + '>' + sp.lane + '>' + Math.floor(X(sp.enq) / FLOW_BIN) + '>' + Math.floor(X(sp.s) / FLOW_BIN);
            var gr = groups[k];
            if (!gr) { gr = groups[k] = { n: 0, xa: 0, xb: 0, ht: ht, t: t, lane: sp.lane }; order.push(gr); }
            gr.n++; gr.xa += X(sp.enq); gr.xb += X(sp.s);
          });
          order.forEach(function (gr) {
            var xa = gr.xa / gr.n, xb = gr.xb / gr.n, ya = gr.ht.y + gr.ht.lanes.length * ROW + ENQ - 1, yb = laneY(gr.t, gr.lane) + ROW / 2;
            g.strokeStyle = 'rgba(48,56,74,.45)'; g.lineWidth = Math.min(6, 1 + Math.log2(gr.n));
            g.beginPath(); g.moveTo(xa, ya); g.bezierCurveTo(xa, (ya + yb) / 2, xb, (ya + yb) / 2, xb, yb); g.stroke();
            g.beginPath(); g.arc(xb, yb, 2 + Math.min(3, Math.log2(gr.n) / 2), 0, 7); g.fillStyle = g.strokeStyle; g.fill();
          });
          flowBundles = order.length;
          flowsDrawn = order.length;
        }
      }
      canvas.setAttribute('data-kt-flows', flowsDrawn + ' drawn, ' + flowBundles + ' bundles, ' + (showFlows ? cand.length : 0) + ' flows');
      if (hover && hover.sp.q >= 0 && hover.sp.enq >= 0) flow(hover.sp, hover.t, true);
      g.restore();
      g.lineWidth = 1;
    }

    function hit(mx, my) {
      for (var ti = 0; ti < T.tracks.length; ti++) {
        var t = T.tracks[ti];
        if (my < t.y || my >= t.y + t.h) continue;
        var l = Math.floor((my - t.y) / ROW), tm = Tm(mx), tol = 3 * (view.b - view.a) / (W - LABEL);
        if (l < t.lanes.length) {
          var L = t.lanes[l], best = null;
          for (var i = firstEnding(L, tm - tol, L.maxDur); i < L.length && L[i].s <= tm + tol; i++)
            if (L[i].e >= tm - tol && (!best || Math.abs((L[i].s + L[i].e) / 2 - tm) < Math.abs((best.s + best.e) / 2 - tm))) best = L[i];
          return best ? { sp: best, t: t } : null;
        }
        var hb = null;
        t.enq.forEach(function (sp) { if (Math.abs(sp.enq - tm) <= tol * 1.5 && (!hb || Math.abs(sp.enq - tm) < Math.abs(hb.enq - tm))) hb = sp; });
        if (hb) {
          var qt = T.tracks.filter(function (x) { return x.items.indexOf(hb) >= 0; })[0];
          return qt ? { sp: hb, t: qt, enqueue: true } : null;
        }
        return null;
      }
      return null;
    }
    function showTip(hv, cx, cy) {
      if (!hv) { tip.style.display = 'none'; return; }
      var sp = hv.sp, e = entryOf(sp), rows = [];
      rows.push(['track', hv.t.title]);
      rows.push(['backend \u00b7 device', e.backend + ' \u00b7 ' + e.device]);
      rows.push(['start', '+' + fmtNs(sp.s)]);
      rows.push([sp.fl & SPAN_DEVICE ? 'device duration' : 'duration', fmtNs(sp.dur)]);
      if (sp.fl & SPAN_DEVICE) rows.push(['placement error bound', '\u00b1' + fmtNs(sp.unc)]);
      if (sp.enq >= 0 && sp.queued >= sp.enq) rows.push(['enqueue \u2192 queued', fmtNs(sp.queued - sp.enq)]);
      if (sp.queued >= 0 && sp.submit >= sp.queued) rows.push(['queued \u2192 submit', fmtNs(sp.submit - sp.queued)]);
      if (sp.submit >= 0 && sp.s >= sp.submit) rows.push(['submit \u2192 start', fmtNs(sp.s - sp.submit)]);
      if (sp.enq >= 0) rows.push(['enqueue \u2192 start', fmtNs(sp.s - sp.enq)]);
      var flags = [];
      if (sp.fl & SPAN_ERROR) flags.push('failed');
      if (sp.fl & SPAN_HOST_TIMED) flags.push('host-timed fallback');
      if (sp.fl & SPAN_TRIALS) flags.push('trial dispatch');
      if (flags.length) rows.push(['note', flags.join(', ')]);
      tip.textContent = '';
      append(tip, [h('b', { text: (hv.enqueue ? 'enqueue ' : '') + e.name }),
        h('table', null, rows.map(function (r) { return h('tr', null, [h('td', { text: r[0] }), h('td', { text: r[1] })]); }))]);
      tip.style.display = 'block';
      var tx = cx + 14, ty = cy + 14;
      if (tx + tip.offsetWidth > window.innerWidth - 8) tx = cx - tip.offsetWidth - 14;
      if (ty + tip.offsetHeight > window.innerHeight - 8) ty = cy - tip.offsetHeight - 14;
      tip.style.left = tx + 'px'; tip.style.top = ty + 'px';
    }

    var drag = null;
    canvas.addEventListener('wheel', function (ev) {
      var r = canvas.getBoundingClientRect(), mx = ev.clientX - r.left;
      if (mx < LABEL) return;
      ev.preventDefault();
      var tm = Tm(mx), f = Math.pow(1.0015, ev.deltaY), minW = 50;
      var a = tm - (tm - view.a) * f, b = tm + (view.b - tm) * f;
      if (b - a < minW) return;
      view.a = a; view.b = b; draw();
    }, { passive: false });
    canvas.addEventListener('mousedown', function (ev) { drag = { x: ev.clientX, a: view.a, b: view.b }; canvas.classList.add('drag'); });
    window.addEventListener('mouseup', function () { drag = null; canvas.classList.remove('drag'); });
    canvas.addEventListener('mousemove', function (ev) {
      var r = canvas.getBoundingClientRect(), mx = ev.clientX - r.left, my = ev.clientY - r.top;
      if (drag) {
        var dt = (ev.clientX - drag.x) / (W - LABEL - 10) * (drag.b - drag.a);
        view.a = drag.a - dt; view.b = drag.b - dt; hover = null; showTip(null); draw(); return;
      }
      var hv = mx >= LABEL ? hit(mx, my) : null;
      if ((hv && hv.sp) !== (hover && hover.sp)) { hover = hv; draw(); }
      showTip(hv, ev.clientX, ev.clientY);
    });
    canvas.addEventListener('mouseleave', function () { hover = null; showTip(null); draw(); });
    canvas.addEventListener('dblclick', function () { view.a = -span * 0.01; view.b = span * 1.01; draw(); });
    canvas.addEventListener('click', function () { if (hover) select(key(entryOf(hover.sp))); });
    reset.addEventListener('click', function () { view.a = -span * 0.01; view.b = span * 1.01; draw(); });
    flowBox.addEventListener('change', function () { showFlows = flowBox.checked; draw(); });
    window.addEventListener('resize', draw);
    onSelect.push(draw);
    draw();

    var legend = h('div', { class: 'legend' });
    E.forEach(function (e) {
      var el = h('span', { title: 'highlight ' + e.name, onclick: function () { select(key(e)); } }, [h('i', { class: 'swatch', style: { background: color(e) } }), e.name + ' (' + e.backend + ')']);
      append(legend, el);
      onSelect.push(function () { el.className = selected && selected !== key(e) ? 'dim' : ''; });
    });
    append(sec, legend);
    append(sec, h('p', { class: 'note', text: 'Times are relative to the first span. Device spans are placed on the host timeline through each device\u2019s clock model (hover for the error bound); \u25b2 marks an enqueue on the host thread. Red outline: failed dispatch; dashed: host-timed fallback; faded: trial dispatch. Overlapping spans that do not nest get extra lanes.' }));
  }

  /* ---------------------------------------------------------------------------------------------
   * Devices
   * ------------------------------------------------------------------------------------------- */
  function renderDevices() {
    var sec = $('kt-devices'), D = after.devices;
    if (!D.length) { sec.parentNode.removeChild(sec); return; }
    var t = h('table'), hr = h('tr');
    ['backend', 'device', 'identity', 'host', 'clock domain', 'resolution', 'error bound', 'drift', 'model samples'].forEach(function (c, i) { append(hr, h('th', { class: i < 5 ? 'l' : '', text: c })); });
    append(t, h('thead', null, hr));
    var tb = h('tbody');
    D.forEach(function (d) {
      append(tb, h('tr', null, [h('td', { class: 'l', text: d.backend }), h('td', { class: 'l', text: d.name }),
        h('td', { class: 'l', text: d.id || '\u2013' }), h('td', { class: 'l', text: d.host || '\u2013' }), h('td', { class: 'l', text: d.clock_domain }),
        h('td', { text: d.resolution_ns ? fmtNs(d.resolution_ns) : '\u2013' }), h('td', { text: d.error_bound_ns ? '\u00b1' + fmtNs(d.error_bound_ns) : '\u2013' }),
        h('td', { text: d.model_samples ? d.drift_ppm.toFixed(2) + ' ppm' : '\u2013' }), h('td', { text: d.model_samples ? fmtInt(d.model_samples) : '\u2013' })]));
    });
    append(t, tb);
    append(sec, t);
  }

  renderHeader();
  renderCards();
  renderCompare();
  renderTable();
  renderDists();
  renderRanks();
  renderTimeline();
  renderDevices();
  if (!root.getAttribute('data-kt-errors')) root.setAttribute('data-kt-status', 'ok');
})();
