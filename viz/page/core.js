/*
 * headscope report page (vanilla JavaScript, no libraries; compiled into index.html by
 * viz/page/pagegen.c). It reads everything from the page itself: the report from
 * #hs-report, the map index from #hs-maps-info, each head's thumbnail, map and word map
 * from script.hs-thumb / .hs-map / .hs-wmap [data-index=k], and a corpus run's texts
 * from #hs-texts. Columns, scores and pictures come from the report, so a new per-head
 * metric or picture needs no edit here. docs/html.md describes every view.
 *
 * The page's script is base.js (the helpers it shares with the patching page), core.js
 * (helpers, data, columns, header, pictures, table), cards.js (the overview's summary
 * cards), local.js (local layers), views.js (head, model, map and corpus views) and main.js
 * (selection, keys, start), in that order, in one <script> element.
 */
/* readable names and titles of the per-head fields that are not head metrics; the
   metrics' own (and their order among a head's scores) come from the report's "metrics"
   list, which the library writes from its metric table (readMetrics) */
const NAMES = {
  cluster: 'cluster', importance: 'importance', label: 'label',
  kv_head: 'KV head'
};
const TITLES = {
  cluster: 'flat cluster of similar heads', importance: 'corpus importance (Michel et al.)',
  kv_head: 'the key/value head this query head reads (grouped-query attention: shared by consecutive heads)'
};
const GROUP_NAMES = { text_scores: 'text: ', probe_scores: 'probe: ', sinks: 'sinks: ' };
let LABEL_ORDER = ['all', 'no_sinks', 'mass', 'probe_mass'];
/* fields that hold whole numbers (printed without decimals): a head's cluster and key/value
   head, row counts, and each detector's parameter (positional_offset_k), added by readMetrics */
const INT_KEYS = { cluster: true, kv_head: true, rows: true };
/* names, titles and the score order from R.metrics: each metric under its key and under
   the last part of its path (max_weight is max_weight_mean in a single-text report) */
function readMetrics() {
  const order = [];
  (Array.isArray(R.metrics) ? R.metrics : []).forEach(function (m) {
    if (!m || typeof m.key !== 'string') return;
    const leaf = String(typeof m.path === 'string' ? m.path : m.key).split('.').pop();
    [m.key, leaf].forEach(function (k) {
      if (typeof m.name === 'string') NAMES[k] = m.name;
      if (typeof m.description === 'string') TITLES[k] = m.description;
    });
    if (m.kind !== 'value' && order.indexOf(leaf) < 0) order.push(leaf);
    if (typeof m.param === 'string') { /* a detector's parameter (positional_offset_k) */
      const pk = leaf + '_' + m.param;
      INT_KEYS[pk] = true;
      NAMES[pk] = (typeof m.name === 'string' ? m.name : leaf) + ' ' + m.param;
      TITLES[pk] = 'the ' + m.param + ' of ' + (typeof m.name === 'string' ? m.name : leaf);
      if (order.indexOf(pk) < 0) order.push(pk);
    }
  });
  LABEL_ORDER = order.concat(LABEL_ORDER);
}
function labelOrder(a, b) {
  const ia = LABEL_ORDER.indexOf(a), ib = LABEL_ORDER.indexOf(b);
  return (ia < 0 ? 99 : ia) - (ib < 0 ? 99 : ib) || a.localeCompare(b);
}
/* one colour per head index (bertviz-style head view) */
const HEAD_COLOURS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#17becf', '#393b79', '#b5651d'];
const VIRIDIS = [[68, 1, 84], [72, 40, 120], [62, 73, 137], [49, 104, 142], [38, 130, 142], [31, 158, 137], [53, 183, 121], [110, 206, 88], [253, 231, 37]];
const VIEWS = ['overview', 'head', 'model', 'map', 'corpus'];

let R = {}, INFO = {}, HEADS = [], FILES = [], TOKENS = [], TYPES = [], N = 0, CORPUS = null;
let SINKS = {}, WORDS = null, COLS = [], SEL = -1, ORDER = [], VIEW = 'overview';
const REC = { map: {}, wmap: {}, thumb: {} }, CACHE = { map: {}, wmap: {}, thumb: {} };
const SORT = { key: null, dir: -1 };
const HV = { layer: null, on: {}, seg: 'all', dim: true, min: 0.01, focus: null, drawn: [] };
const MV = { sort: 'grid', dir: -1, colour: '', fkey: '', fmin: '', fmax: '', flabel: '' };
const MAPV = { k: -1, words: false, cell: 0, stretch: false, cursor: null };
const CV = { key: '', text: -1 };
let TEXTS = [];

/* ---- small helpers ---------------------------------------------------------------- */
function esc(s) {
  const m = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
  return String(s).replace(/[&<>"']/g, function (c) { return m[c]; });
}
function fmtSigned(v, d) {
  const s = fmt(v, d);
  return isNum(v) && v > 0 && !/^0[.0]*$/.test(s) ? '+' + s : s;
}
function tokLabel(s) {
  s = String(s === undefined || s === null ? '' : s);
  if (s === '') return '\u2205';
  if (/^ +$/.test(s)) return s.replace(/ /g, '\u2423');
  return s.replace(/\n/g, '\u21b5').replace(/\r/g, '\u240d').replace(/\t/g, '\u2192');
}
function tok(i) { return i < TOKENS.length ? tokLabel(TOKENS[i]) : '#' + i; }
function labelClass(v) { return 'badge lab-' + String(v).replace(/[^a-z_]/g, ''); }
function prettyKey(k) { return NAMES[k] || String(k).replace(/_/g, ' '); }
function viridis(t) {
  if (!(t >= 0)) t = 0;
  if (t > 1) t = 1;
  const x = t * (VIRIDIS.length - 1), i = Math.min(VIRIDIS.length - 2, Math.floor(x)), f = x - i;
  const a = VIRIDIS[i], b = VIRIDIS[i + 1];
  return [Math.round(a[0] + f * (b[0] - a[0])), Math.round(a[1] + f * (b[1] - a[1])), Math.round(a[2] + f * (b[2] - a[2]))];
}
const LUT = [];
for (let i = 0; i <= 255; i++) LUT.push(viridis(i / 255));
function colour(t) {
  if (t !== t) return 'rgb(128,128,128)';
  return 'rgb(' + LUT[Math.max(0, Math.min(255, Math.round(t * 255)))].join(',') + ')';
}
function viridisGradient() {
  return 'linear-gradient(90deg,' + VIRIDIS.map(function (c, i) { return 'rgb(' + c.join(',') + ') ' + (100 * i / (VIRIDIS.length - 1)) + '%'; }).join(',') + ')';
}
function headColour(k) { return HEAD_COLOURS[HEADS[k].head % HEAD_COLOURS.length]; }
function rgba(hex, a) {
  return 'rgba(' + parseInt(hex.slice(1, 3), 16) + ',' + parseInt(hex.slice(3, 5), 16) + ',' + parseInt(hex.slice(5, 7), 16) + ',' + a.toFixed(3) + ')';
}
/* Sizes a canvas to W x H CSS pixels at the screen's pixel ratio; returns its context,
 * scaled so that drawing is in CSS pixels. */
function sizeCanvas(cv, W, H) {
  const dpr = window.devicePixelRatio || 1;
  cv.width = Math.round(W * dpr);
  cv.height = Math.round(H * dpr);
  cv.style.width = W + 'px';
  cv.style.height = H + 'px';
  const ctx = cv.getContext('2d');
  ctx.scale(dpr, dpr);
  return ctx;
}
function button(text, cls, title, fn) {
  const b = el('button', cls || 'small', text);
  b.type = 'button';
  if (title) b.title = title;
  if (fn) b.addEventListener('click', fn);
  return b;
}
function chip(k) {
  const b = el('button', 'chip', HEADS[k].id);
  b.type = 'button';
  b.dataset.headIndex = String(k);
  b.title = 'open head ' + HEADS[k].id;
  markLocal(b, k);
  return b;
}
function control(parent, label, input) {
  const l = el('label');
  l.appendChild(document.createTextNode(label + ' '));
  l.appendChild(input);
  parent.appendChild(l);
  return input;
}
function select(options, value, fn) {
  const s = el('select');
  options.forEach(function (o) {
    const op = el('option', null, o[1]);
    op.value = o[0];
    s.appendChild(op);
  });
  s.value = value;
  s.addEventListener('change', function () { fn(s.value); });
  return s;
}
function checkbox(checked, fn) {
  const c = el('input');
  c.type = 'checkbox';
  c.checked = checked;
  c.addEventListener('change', function () { fn(c.checked); });
  return c;
}
function card(parent, title) {
  const c = el('div', 'card');
  c.appendChild(el('h3', null, title));
  parent.appendChild(c);
  return c;
}
function filePath(f) { return String(f).split('/').map(encodeURIComponent).join('/'); }
function picture(f, alt, caption) {
  const fig = el('figure');
  const img = el('img');
  img.alt = alt;
  img.addEventListener('error', function () { fig.replaceChildren(el('p', 'note', f + ' could not be loaded')); });
  img.src = filePath(f);
  fig.appendChild(img);
  if (caption) fig.appendChild(el('figcaption', null, caption));
  return fig;
}

/* ---- the embedded maps -------------------------------------------------------------- */
function bytes(rec) {
  let bin;
  try { bin = atob(rec.textContent.trim()); } catch (e) { return null; }
  const a = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) a[i] = bin.charCodeAt(i);
  return a;
}
function unquant(b) {
  const levels = INFO.levels || 254, nan = isNum(INFO.nan) ? INFO.nan : 255;
  return b === nan ? NaN : b / levels;
}
/* kind: 'map' (n x n) or 'wmap' (words x words), lower triangles when INFO.packing is
 * 'lower'; 'thumb' (thumb x thumb) */
function decoded(kind, k) {
  if (CACHE[kind][k]) return CACHE[kind][k];
  const rec = REC[kind][k];
  if (!rec) return null;
  const raw = bytes(rec);
  if (!raw) return null;
  let n;
  if (kind === 'map') n = INFO.n;
  else if (kind === 'wmap') n = INFO.words;
  else n = INFO.thumb;
  const v = new Float32Array(n * n);
  const lower = kind !== 'thumb' && INFO.packing === 'lower';
  if (raw.length !== (lower ? n * (n + 1) / 2 : n * n)) return null;
  let mx = 0, c = 0;
  for (let i = 0; i < n; i++) {
    const nj = lower ? i + 1 : n;
    for (let j = 0; j < nj; j++) {
      const x = unquant(raw[c++]);
      v[i * n + j] = x;
      if (x > mx) mx = x;
    }
  }
  CACHE[kind][k] = { v: v, n: n, max: mx };
  return CACHE[kind][k];
}
function getMap(k) { return decoded('map', k); }
function hasMap(k) { return !!REC.map[k]; }

/* ---- columns: every per-head field of the report ------------------------------------ */
function columns() {
  const seen = {}, cols = [];
  function add(key, label, get, extra) {
    if (seen[key]) return;
    seen[key] = true;
    const c = { key: key, label: label, title: TITLES[key.split('.').pop()] || key, get: get };
    if (extra) Object.keys(extra).forEach(function (x) { c[x] = extra[x]; });
    cols.push(c);
  }
  add('id', 'head', function (h) { return h.id; }, { kind: 'str', sort: function (h) { return h.layer * 100000 + h.head; }, title: 'layer.head' });
  add('label', 'label', function (h) { return h.label; }, { kind: 'str', title: 'strongest detector above the threshold' });
  const nested = [];
  HEADS.forEach(function (h) {
    Object.keys(h).forEach(function (key) {
      const v = h[key];
      if (key === 'id' || key === 'label' || key === 'layer' || key === 'head') return;
      if (v && typeof v === 'object' && !Array.isArray(v)) {
        if ('mean' in v) add(key, prettyKey(key), function (x) { return x[key] ? x[key].mean : null; }, { summary: true });
        else if (nested.indexOf(key) < 0) nested.push(key);
      } else if (typeof v === 'number' || v === null) {
        add(key, prettyKey(key), function (x) { return x[key]; });
      }
    });
  });
  /* per-head objects, one level (scores.x) or two (text_scores.no_sinks.x); lists are not
     columns (labels, sinks.types) */
  nested.forEach(function (field) {
    const subs = {};
    HEADS.forEach(function (h) {
      const o = h[field];
      if (!o || typeof o !== 'object') return;
      Object.keys(o).forEach(function (s) {
        if (Array.isArray(o[s])) return;
        if (o[s] && typeof o[s] === 'object') Object.keys(o[s]).forEach(function (t) { subs[s + '.' + t] = true; });
        else subs[s] = true;
      });
    });
    Object.keys(subs).sort(function (a, b) {
      const pa = a.split('.'), pb = b.split('.');
      return labelOrder(pa[0], pb[0]) || labelOrder(pa[pa.length - 1], pb[pb.length - 1]);
    }).forEach(function (s) {
      const path = s.split('.'), leaf = path[path.length - 1];
      const label = (GROUP_NAMES[field] || '') + prettyKey(leaf) + (path[0] === 'no_sinks' ? ' (no sinks)' : '');
      add(field + '.' + s, label, function (h) {
        let v = h[field];
        for (let i = 0; i < path.length && v && typeof v === 'object'; i++) v = v[path[i]];
        return typeof v === 'number' ? v : null;
      }, { grp: field === 'scores' ? '' : field.replace(/[^a-z_]/g, ''), title: s + ' (' + field + ')' });
    });
  });
  /* the probe's ablation cost (probe.ablation.heads), a column like the per-head fields */
  const pd = CORPUS ? null : probeDeltas();
  if (pd) {
    add('probe.ablation_delta', 'probe: ablation \u0394', function (h) {
      const v = pd[h.layer + '.' + h.head];
      return isNum(v) ? v : null;
    }, { grp: 'probe_scores', title: 'probe.ablation: loss on the probe\u2019s second half with the head ablated (' + R.probe.ablation.kind + '), minus the loss with every head on' });
  }
  cols.forEach(function (c) {
    if (c.kind) return;
    const vals = HEADS.map(c.get).filter(isNum);
    if (/ablation_delta/.test(c.key)) {
      c.kind = 'delta';
      c.maxAbs = Math.max.apply(null, vals.map(Math.abs).concat([0])) || 1;
    }
    else if (vals.every(function (v) { return v === Math.round(v); }) && INT_KEYS[c.key.split('.').pop()]) c.kind = 'int';
    else if (vals.length && vals.every(function (v) { return v >= 0 && v <= 1; })) c.kind = 'unit';
    else c.kind = 'num';
  });
  COLS = cols;
}
/* probe.ablation's delta of each head by "layer.head"; null when the probe was not ablated */
function probeDeltas() {
  const ab = R.probe && R.probe.ablation, by = {};
  if (!ab || !ab.available || !Array.isArray(ab.heads)) return null;
  ab.heads.forEach(function (e) { if (e && isNum(e.delta)) by[e.layer + '.' + e.head] = e.delta; });
  return by;
}
function col(key) { return COLS.filter(function (c) { return c.key === key; })[0]; }
function numCols() { return COLS.filter(function (c) { return c.kind !== 'str'; }); }

/* ---- header, pictures, footer ------------------------------------------------------ */
function header() {
  const m = R.model || {}, inp = R.input || {}, loss = R.loss || {};
  $('hs-model').textContent = m.path || '';
  document.title = 'headscope ' + DASH + ' ' + (m.path || 'report');
  const meta = $('hs-meta');
  function item(label, value) {
    const s = el('span');
    if (label) { s.appendChild(el('b', null, label)); s.appendChild(document.createTextNode(' ')); }
    s.appendChild(document.createTextNode(value));
    meta.appendChild(s);
  }
  if (m.family) item('model', m.family + (m.format ? ' (' + m.format + (m.storage_dtype ? ', ' + m.storage_dtype : '') + ')' : ''));
  if (isNum(m.n_layer)) item('shape', m.n_layer + ' layers \u00d7 ' + m.n_head + ' heads, d_model ' + m.d_model);
  if (layersLine()) item('layers', layersLine());
  if (CORPUS) {
    const src = CORPUS.source || {}, cl = CORPUS.loss || {};
    item('corpus', (src.path || '') + ' (' + (src.format || '') + ')');
    item('texts', String(CORPUS.n_texts) + (CORPUS.n_skipped ? ', ' + CORPUS.n_skipped + ' skipped' : ''));
    if (CORPUS.tokens) item('tokens', CORPUS.tokens.total + ' (' + CORPUS.tokens.min + '\u2013' + CORPUS.tokens.max + ' per text)');
    item('loss', (cl.kind || '') + ' ' + fmt(cl.mean) + ' [' + fmt(cl.ci_low) + ', ' + fmt(cl.ci_high) + ']');
  } else {
    item('tokens', String(isNum(inp.n_tokens) ? inp.n_tokens : TOKENS.length) + (inp.truncated ? ' (truncated)' : ''));
    item('loss', (loss.kind || '') + ' ' + fmt(loss.value));
  }
  item('heads analysed', String(HEADS.length));
  item('maps', INFO.embedded ? INFO.count + ' of ' + INFO.of + ' heads (' + INFO.n + '\u00b2' + (INFO.words ? ', words' : '') + ')' : 'not embedded');
  const t = $('hs-text');
  function text(label, s) {
    const d = el('div', 'text');
    d.appendChild(el('span', 'lab', label));
    d.appendChild(document.createTextNode(s));
    t.appendChild(d);
  }
  if (typeof inp.text === 'string') text('text', inp.text);
  if (typeof inp.text_pair === 'string') text('text pair', inp.text_pair);
  const tk = $('hs-tokens');
  for (let i = 0; i < TOKENS.length; i++) {
    const s = el('span', 'tok' + (TYPES[i] === 1 ? ' seg1' : '') + (SINKS[i] ? ' sink' : ''), tokLabel(TOKENS[i]));
    s.title = '#' + i + (Array.isArray(inp.ids) ? '  id ' + inp.ids[i] : '') + (Array.isArray(inp.tokens) ? '  ' + inp.tokens[i] : '') + (SINKS[i] ? '  (sink)' : '');
    tk.appendChild(s);
  }
  if (INFO.reason) {
    const d = el('p', 'hint', 'Maps: ' + INFO.reason + '.');
    d.id = 'hs-maps-reason';
    t.appendChild(d);
  }
}

/* per-head pictures: any listed file whose name holds L{l}_H{h} */
function headPictures(h) {
  const re = new RegExp('(^|[^0-9])L' + h.layer + '_H' + h.head + '([^0-9]|$)');
  return FILES.filter(function (f) { return /\.png$/i.test(f) && re.test(f.split('/').pop()); });
}
const PICTURE_NOTES = {
  'gallery.png': ['Gallery', 'every head\u2019s attention map, layers down, heads across'],
  'similarity.png': ['Head similarity', 'similarity of the heads\u2019 maps, in dendrogram order'],
  'importance.png': ['Head importance', 'ablation \u0394 of every head, layers down, heads across'],
  'kv_similarity.png': ['Similarity by KV group', 'the similarity matrix in head order, each key/value group framed']
};
function pictures() {
  const sec = $('hs-pictures');
  const list = FILES.filter(function (f) { return /\.png$/i.test(f) && !/L\d+_H\d+/.test(f.split('/').pop()); });
  list.forEach(function (f) {
    const note = PICTURE_NOTES[f] || [f, ''];
    const c = card(sec, note[0]);
    c.appendChild(picture(f, note[0], note[1] || f));
  });
  if (!list.length) sec.appendChild(el('p', 'note card', 'No pictures are listed in this report (the PNGs the analysis writes appear here, from the report\u2019s files).'));
}

function footer() {
  const f = $('hs-footer'), g = R.generator || {}, tm = R.timing || {};
  let s = (R.schema || 'report') + ' \u00b7 ' + (g.name || 'headscope') + ' ' + (g.version || '');
  if (isNum(tm.forward_passes)) s += ' \u00b7 ' + tm.forward_passes + ' forward passes';
  /* the run's time: timing.total_seconds (a corpus run: timing.seconds); the *_seconds phases
     are parts of it, summed only for an older report without the total */
  const secs = Object.keys(tm).filter(function (k) { return /_seconds$/.test(k) && k !== 'total_seconds'; }).map(function (k) { return tm[k]; }).filter(isNum);
  const total = isNum(tm.total_seconds) ? tm.total_seconds : isNum(tm.seconds) ? tm.seconds : secs.length ? secs.reduce(function (a, b) { return a + b; }, 0) : null;
  if (total !== null) s += ', ' + total.toFixed(2) + ' s';
  s += ' \u00b7 this page is self-contained and loads nothing from the network';
  f.textContent = s;
}

/* ---- heads table ------------------------------------------------------------------ */
function sortValue(c, h) {
  const v = c.sort ? c.sort(h) : c.get(h);
  return v === undefined ? null : v;
}
function sortedBy(c, dir) {
  const idx = HEADS.map(function (h, k) { return k; });
  if (!c) return idx;
  return idx.sort(function (a, b) {
    const va = sortValue(c, HEADS[a]), vb = sortValue(c, HEADS[b]);
    const na = typeof va === 'number' ? !isFinite(va) : va === null, nb = typeof vb === 'number' ? !isFinite(vb) : vb === null;
    if (na || nb) return na === nb ? a - b : na ? 1 : -1;
    const r = typeof va === 'number' && typeof vb === 'number' ? va - vb : String(va).localeCompare(String(vb));
    return r * dir || a - b;
  });
}
function cellFor(c, h) {
  const v = c.get(h);
  let td;
  if (c.kind === 'str') {
    td = el('td', 'str');
    if (c.key === 'label') td.appendChild(el('span', labelClass(v), v === null || v === undefined ? DASH : v));
    else td.textContent = v === null || v === undefined ? DASH : String(v);
  } else if (c.kind === 'int') {
    td = el('td', isNum(v) ? '' : 'null', isNum(v) ? String(v) : DASH);
  } else {
    td = el('td', isNum(v) ? '' : 'null', c.kind === 'delta' ? fmtSigned(v) : fmt(v));
    if (isNum(v)) td.title = String(v);
    if (isNum(v) && c.summary) {
      const s = h[c.key];
      td.title = 'mean ' + v + (isNum(s.ci_low) ? ', 95% CI [' + fmt(s.ci_low) + ', ' + fmt(s.ci_high) + ']' : '') + ', n = ' + s.n;
      td.dataset.value = String(v);
    }
    if (isNum(v) && c.kind === 'unit') {
      const p = Math.max(0, Math.min(100, 100 * v)).toFixed(1);
      td.style.backgroundImage = 'linear-gradient(90deg, var(--bar) ' + p + '%, transparent ' + p + '%)';
    } else if (isNum(v) && c.kind === 'delta') {
      /* a bar from the middle: right (red) for a loss increase, left (blue) for a decrease */
      const p = Math.min(50, 50 * Math.abs(v) / c.maxAbs);
      const a = v >= 0 ? 50 : 50 - p, b = v >= 0 ? 50 + p : 50;
      const tint = v >= 0 ? 'var(--pos)' : 'var(--neg)';
      td.style.backgroundImage = 'linear-gradient(90deg, transparent ' + a.toFixed(1) + '%, ' + tint + ' ' + a.toFixed(1) + '%, ' + tint + ' ' + b.toFixed(1) + '%, transparent ' + b.toFixed(1) + '%)';
      td.classList.add(v < 0 ? 'neg' : 'pos');
    }
  }
  return td;
}
function table() {
  const thead = $('hs-heads').tHead, tr = el('tr');
  COLS.forEach(function (c, i) {
    const th = el('th', (c.kind === 'str' ? 'str' : '') + (c.grp ? ' grp-' + c.grp : '') + (i < 2 ? ' stick' + i : ''), c.label);
    th.title = c.title + ' (click to sort)';
    th.dataset.key = c.key;
    th.scope = 'col';
    th.tabIndex = 0;
    th.addEventListener('click', function () { sortBy(c.key); });
    th.addEventListener('keydown', function (e) { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); sortBy(c.key); } });
    tr.appendChild(th);
  });
  thead.appendChild(tr);
  const tb = $('hs-heads').tBodies[0];
  tb.addEventListener('click', function (e) {
    const row = e.target.closest('tr');
    if (row && row.dataset.k !== undefined) choose(+row.dataset.k);
  });
  tb.addEventListener('keydown', function (e) {
    const row = e.target.closest('tr');
    if (!row) return;
    let next = null;
    if (e.key === 'ArrowDown') next = row.nextElementSibling;
    else if (e.key === 'ArrowUp') next = row.previousElementSibling;
    else if (e.key === 'Enter' || e.key === ' ') next = row;
    if (!next) return;
    e.preventDefault();
    choose(+next.dataset.k);
    next.focus();
  });
  HEADS.forEach(function (h, k) {
    const r = el('tr');
    r.dataset.k = String(k);
    r.dataset.head = String(h.id);
    r.tabIndex = 0;
    COLS.forEach(function (c, i) {
      const td = cellFor(c, h);
      if (i < 2) td.classList.add('stick' + i);
      if (c.key === 'id') markLocal(td, k);
      r.appendChild(td);
    });
    tb.appendChild(r);
  });
}
function sortBy(key) {
  if (SORT.key === key) SORT.dir = -SORT.dir;
  else { SORT.key = key; SORT.dir = key === 'id' || key === 'label' || key === 'cluster' ? 1 : -1; }
  ORDER = sortedBy(col(SORT.key), SORT.dir);
  const tb = $('hs-heads').tBodies[0], rows = {};
  Array.prototype.forEach.call(tb.rows, function (r) { rows[r.dataset.k] = r; });
  ORDER.forEach(function (k) { tb.appendChild(rows[k]); });
  Array.prototype.forEach.call($('hs-heads').tHead.rows[0].cells, function (th) {
    const old = th.querySelector('.arrow');
    if (old) old.remove();
    if (th.dataset.key === key) {
      th.setAttribute('aria-sort', SORT.dir > 0 ? 'ascending' : 'descending');
      th.appendChild(el('span', 'arrow', SORT.dir > 0 ? '\u25b2' : '\u25bc'));
    } else {
      th.removeAttribute('aria-sort');
    }
  });
}
