/*
 * headscope report page (vanilla JavaScript, no libraries; compiled into index.html by
 * tools/pagegen.c). It reads everything from the page itself: the report from
 * #hs-report, the map index from #hs-maps-info, each head's thumbnail, map and word map
 * from script.hs-thumb / .hs-map / .hs-wmap [data-index=k], and a corpus run's texts
 * from #hs-texts. Columns, scores and pictures come from the report, so a new per-head
 * metric or picture needs no edit here. docs/html.md describes every view.
 *
 * The page's script is core.js (helpers, data, header, summary, table), views.js (head,
 * model, map and corpus views) and main.js (selection, keys, start), in that order, in
 * one <script> element.
 */
'use strict';
const DASH = '\u2014';
/* readable names of known fields; any other field shows under its own key */
const NAMES = {
  previous_token: 'prev. token', self: 'self', first_token: 'first token', sep: '[SEP]',
  duplicate_token: 'duplicate', induction: 'induction', entropy_nats: 'entropy',
  entropy_bits: 'entropy (bits)', entropy_norm: 'entropy norm.', max_weight_mean: 'max weight',
  max_weight: 'max weight', ablation_delta: 'ablation \u0394', gradient_importance: 'gradient',
  gradient_raw: 'gradient (raw)', cluster: 'cluster', importance: 'importance', label: 'label',
  kv_head: 'KV head'
};
const TITLES = {
  entropy_nats: 'mean row entropy, nats', entropy_norm: 'entropy over its maximum (0..1)',
  max_weight_mean: 'mean over rows of the largest weight (0..1)',
  ablation_delta: 'loss increase when the head is zeroed (negative: the loss falls)',
  gradient_importance: '|dL/d\u03be| at \u03be = 1, normalised per layer (Michel et al. 2019)',
  cluster: 'flat cluster of similar heads', importance: 'corpus importance (Michel et al.)',
  kv_head: 'the key/value head this query head reads (grouped-query attention: shared by consecutive heads)'
};
const GROUP_NAMES = { text_scores: 'text: ', probe_scores: 'probe: ', sinks: 'sinks: ' };
const LABEL_ORDER = ['previous_token', 'next_token', 'self', 'broad', 'other_segment', 'first_token', 'cls', 'sep', 'punctuation', 'duplicate_token', 'induction', 'all', 'no_sinks', 'mass', 'probe_mass'];
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
function $(id) { return document.getElementById(id); }
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}
function esc(s) {
  const m = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
  return String(s).replace(/[&<>"']/g, function (c) { return m[c]; });
}
function isNum(v) { return typeof v === 'number' && isFinite(v); }
function fmt(v, d) {
  if (!isNum(v)) return DASH;
  let s = Math.abs(v) >= 1000 ? v.toFixed(1) : v.toFixed(d === undefined ? 4 : d);
  if (/^-0[.0]*$/.test(s)) s = s.slice(1);
  return s;
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
  cols.forEach(function (c) {
    if (c.kind) return;
    const vals = HEADS.map(c.get).filter(isNum);
    if (/ablation_delta/.test(c.key)) c.kind = 'delta';
    else if (vals.length && vals.every(function (v) { return v === Math.round(v); }) && /cluster|rows/.test(c.key)) c.kind = 'int';
    else if (vals.length && vals.every(function (v) { return v >= 0 && v <= 1; })) c.kind = 'unit';
    else c.kind = 'num';
  });
  COLS = cols;
}
function col(key) { return COLS.filter(function (c) { return c.key === key; })[0]; }
function numCols() { return COLS.filter(function (c) { return c.kind !== 'str'; }); }

/* ---- header, summary, pictures, footer ---------------------------------------------- */
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

function curveSvg(base, curve, kind, stop) {
  const pts = [{ x: 0, y: base, t: 'all heads: loss ' + fmt(base) }];
  let gone = 0;
  curve.forEach(function (c) {
    const rm = Array.isArray(c.removed) ? c.removed : [c.removed];
    gone += rm.length;
    pts.push({ x: gone, y: c.loss, t: 'removed ' + rm.join(', ') + ' (' + c.heads_left + ' left): loss ' + fmt(c.loss) });
  });
  const ok = pts.filter(function (p) { return isNum(p.y); });
  if (ok.length < 2) return '';
  let stopY = NaN;
  if (isNum(base) && isNum(stop)) stopY = kind === 'repr' ? base + stop : base * (1 + stop);
  let lo = Math.min.apply(null, ok.map(function (p) { return p.y; }));
  let hi = Math.max.apply(null, ok.map(function (p) { return p.y; }));
  if (isNum(stopY) && stopY < hi * 1.5) { lo = Math.min(lo, stopY); hi = Math.max(hi, stopY); }
  if (hi - lo < 1e-9) { hi += 0.5; lo -= 0.5; }
  const W = 300, H = 150, L = 46, RM = 10, T = 8, B = 30;
  const maxX = Math.max(1, pts[pts.length - 1].x);
  function X(x) { return L + (W - L - RM) * x / maxX; }
  function Y(y) { return T + (H - T - B) * (hi - y) / (hi - lo); }
  function line(cls, x1, y1, x2, y2) { return '<line class="' + cls + '" x1="' + x1 + '" y1="' + y1 + '" x2="' + x2 + '" y2="' + y2 + '"/>'; }
  function text(x, y, anchor, s, extra) { return '<text x="' + x + '" y="' + y + '" text-anchor="' + anchor + '"' + (extra || '') + '>' + esc(s) + '</text>'; }
  let s = '<svg viewBox="0 0 ' + W + ' ' + H + '" width="' + W + '" height="' + H + '" role="img" aria-label="pruning curve">';
  s += line('axis', L, H - B, W - RM, H - B) + line('axis', L, T, L, H - B);
  s += text(L - 4, T + 8, 'end', hi.toFixed(2)) + text(L - 4, H - B, 'end', lo.toFixed(2));
  s += text(L, H - B + 12, 'middle', '0') + text(X(maxX), H - B + 12, 'middle', String(maxX));
  s += text((L + W - RM) / 2, H - 4, 'middle', 'heads removed');
  s += text(10, (T + H - B) / 2, 'middle', 'loss', ' transform="rotate(-90 10 ' + ((T + H - B) / 2) + ')"');
  if (isNum(stopY) && stopY >= lo && stopY <= hi) s += line('stop', L, Y(stopY), W - RM, Y(stopY));
  s += '<polyline class="curve" points="' + ok.map(function (p) { return X(p.x).toFixed(1) + ',' + Y(p.y).toFixed(1); }).join(' ') + '"/>';
  ok.forEach(function (p) { s += '<circle class="dot" r="3" cx="' + X(p.x).toFixed(1) + '" cy="' + Y(p.y).toFixed(1) + '"><title>' + esc(p.t) + '</title></circle>'; });
  return s + '</svg>';
}

/* a bar from a zero line: right and red for v > 0, left and blue for v < 0 */
function deltaBar(v, maxAbs) {
  const d = el('span', 'dbar');
  if (!isNum(v)) return d;
  const s = el('span');
  const w = Math.max(1, 50 * Math.abs(v) / (maxAbs || 1));
  s.style.width = w + '%';
  s.style.left = (v >= 0 ? 50 : 50 - w) + '%';
  s.style.background = v >= 0 ? '#c0392b' : '#3a6fc4';
  d.appendChild(s);
  return d;
}

function deltaCard(parent, title, hint, ks, maxAbs) {
  const c = card(parent, title);
  c.appendChild(el('p', 'hint', hint));
  const t = el('table');
  ks.forEach(function (k) {
    const h = HEADS[k], tr = el('tr');
    let td = el('td');
    td.appendChild(chip(k));
    tr.appendChild(td);
    tr.appendChild(el('td', null, fmtSigned(h.ablation_delta)));
    td = el('td');
    td.appendChild(deltaBar(h.ablation_delta, maxAbs));
    tr.appendChild(td);
    td = el('td');
    td.appendChild(el('span', labelClass(h.label), prettyKey(h.label)));
    tr.appendChild(td);
    t.appendChild(tr);
  });
  c.appendChild(t);
  return c;
}

function summary() {
  const box = $('hs-summary');
  const byId = {};
  HEADS.forEach(function (h, k) { byId[h.id] = k; });
  const withDelta = HEADS.map(function (h, k) { return k; }).filter(function (k) { return isNum(HEADS[k].ablation_delta); });
  if (!CORPUS) {
    if (withDelta.length) {
      const maxAbs = Math.max.apply(null, withDelta.map(function (k) { return Math.abs(HEADS[k].ablation_delta); })) || 1;
      const pos = withDelta.filter(function (k) { return HEADS[k].ablation_delta > 0; }).sort(function (a, b) { return HEADS[b].ablation_delta - HEADS[a].ablation_delta; });
      const neg = withDelta.filter(function (k) { return HEADS[k].ablation_delta < 0; }).sort(function (a, b) { return HEADS[a].ablation_delta - HEADS[b].ablation_delta; });
      const c = deltaCard(box, 'Most important heads', 'loss increase when the head is zeroed (ablation \u0394 > 0)', pos.slice(0, 8), maxAbs);
      c.id = 'hs-important';
      if (!pos.length) c.appendChild(el('p', 'note', 'Zeroing any single head does not raise the loss.'));
      if (neg.length) {
        const d = deltaCard(box, 'Heads whose removal lowers the loss', 'ablation \u0394 < 0: the loss falls when the head is zeroed', neg.slice(0, 8), maxAbs);
        d.id = 'hs-harmful';
      }
    } else {
      card(box, 'Most important heads').appendChild(el('p', 'note', 'The ablation sweep was not run, so there is no importance.'));
    }
  } else {
    const imp = HEADS.map(function (h, k) { return k; }).filter(function (k) { return isNum(HEADS[k].importance); }).sort(function (a, b) { return HEADS[b].importance - HEADS[a].importance; });
    const c = card(box, 'Most important heads (corpus)');
    if (!imp.length) c.appendChild(el('p', 'note', 'No corpus importance (run without --no-gradient).'));
    const t = el('table');
    imp.slice(0, 8).forEach(function (k) {
      const tr = el('tr'), td = el('td');
      td.appendChild(chip(k));
      tr.appendChild(td);
      tr.appendChild(el('td', null, fmt(HEADS[k].importance)));
      const b = el('td'), bar = el('span', 'bar');
      bar.style.width = Math.max(1, Math.round(80 * HEADS[k].importance)) + 'px';
      b.appendChild(bar);
      tr.appendChild(b);
      t.appendChild(tr);
    });
    c.appendChild(t);
  }
  /* head types */
  let c = card(box, 'Detected head types');
  const thr = R.options && isNum(R.options.label_threshold) ? R.options.label_threshold : null;
  const multi = HEADS.some(function (h) { return Array.isArray(h.labels); });
  c.appendChild(el('p', 'hint', multi ? 'every head type whose score on the attention not parked on sinks reaches its threshold (options.label_thresholds); sinks: attention mass on them'
    : 'a head is labelled with its strongest detector' + (thr !== null ? ' scoring at least ' + fmt(thr, 2) : '')));
  const types = {};
  HEADS.forEach(function (h, k) {
    const add = function (t) { (types[t] = types[t] || []).push(k); };
    if (multi) {
      (Array.isArray(h.labels) ? h.labels : []).forEach(function (l) { add(l.type); });
      (h.sinks && Array.isArray(h.sinks.types) ? h.sinks.types : []).forEach(function (t) { add('sink: ' + t); });
    } else if (h.label && h.label !== 'none') add(h.label);
  });
  const names = Object.keys(types).sort(labelOrder);
  if (!names.length) c.appendChild(el('p', 'note', 'No head reached the threshold.'));
  names.forEach(function (name) {
    const row = el('div', 'chips');
    row.appendChild(el('span', labelClass(name), prettyKey(name) + ' (' + types[name].length + ')'));
    types[name].forEach(function (k) { row.appendChild(chip(k)); });
    c.appendChild(row);
  });
  /* clusters */
  c = card(box, 'Clusters');
  const cl = (CORPUS ? CORPUS.clusters : R.clusters) || {};
  const groups = {};
  HEADS.forEach(function (h, k) { if (isNum(h.cluster)) (groups[h.cluster] = groups[h.cluster] || []).push(k); });
  const gids = Object.keys(groups).sort(function (a, b) { return groups[b].length - groups[a].length || a - b; });
  c.appendChild(el('p', 'hint', gids.length + ' clusters' + (isNum(cl.threshold) ? ' at distance ' + cl.threshold : '') + (cl.distance ? ' (' + cl.distance + ', ' + (cl.linkage || '') + ' linkage)' : '')));
  const single = [];
  gids.forEach(function (g) {
    if (groups[g].length === 1) { single.push(groups[g][0]); return; }
    const row = el('div', 'chips');
    row.appendChild(el('span', 'kv', 'cluster ' + g + ' (' + groups[g].length + '):'));
    groups[g].forEach(function (k) { row.appendChild(chip(k)); });
    c.appendChild(row);
  });
  if (single.length) {
    const row = el('div', 'chips');
    row.appendChild(el('span', 'kv', 'alone (' + single.length + '):'));
    single.sort(function (a, b) { return a - b; }).forEach(function (k) { row.appendChild(chip(k)); });
    c.appendChild(row);
  }
  if (CORPUS) return;
  /* pruning */
  c = card(box, 'Pruning');
  const pr = R.pruning, loss = R.loss || {};
  if (pr && Array.isArray(pr.candidates)) {
    const row = el('div', 'chips');
    row.appendChild(el('span', 'kv', 'candidates' + (isNum(pr.tolerance) ? ' (|\u0394| < ' + pr.tolerance + ')' : '') + ':'));
    pr.candidates.forEach(function (id) { row.appendChild(id in byId ? chip(byId[id]) : el('span', 'kv', id)); });
    if (!pr.candidates.length) row.appendChild(el('span', 'note', 'none'));
    c.appendChild(row);
  }
  const svg = pr && Array.isArray(pr.curve) ? curveSvg(loss.value, pr.curve, loss.kind, pr.stop) : '';
  if (svg) {
    const d = el('div');
    d.innerHTML = svg;
    c.appendChild(d);
    c.appendChild(el('p', 'hint', 'greedy removal, least harmful head first' + (isNum(pr.stop) ? '; dashed: stop threshold' : '')));
  } else {
    c.appendChild(el('p', 'note', 'No pruning curve (run without --no-ablation / --no-pruning).'));
  }
  /* layer diversity */
  const dv = R.diversity && Array.isArray(R.diversity.per_layer) ? R.diversity.per_layer : [];
  if (dv.some(isNum)) {
    c = card(box, 'Layer diversity');
    c.appendChild(el('p', 'hint', 'mean pairwise Frobenius distance between the maps of a layer\u2019s heads'));
    const mx = Math.max.apply(null, dv.filter(isNum)) || 1;
    const t = el('table');
    dv.forEach(function (v, l) {
      if (!isNum(v)) return;
      const tr = el('tr'), td = el('td'), bar = el('span', 'bar');
      tr.appendChild(el('td', 'kv', 'layer ' + l));
      tr.appendChild(el('td', null, fmt(v, 3)));
      bar.style.width = Math.max(1, Math.round(120 * v / mx)) + 'px';
      td.appendChild(bar);
      tr.appendChild(td);
      t.appendChild(tr);
    });
    c.appendChild(t);
  }
  kvCard(box);
}

/* grouped-query models: how alike the heads sharing a key/value head are (kv_groups.similarity) */
function kvCard(box) {
  const kv = R.kv_groups, ks = kv && kv.similarity;
  if (!ks || !Array.isArray(ks.within)) return;
  const js = ks.method === 'jensen_shannon';
  const c = card(box, 'Key/value groups');
  c.appendChild(el('p', 'hint', kv.n_kv_head + ' KV head' + (kv.n_kv_head > 1 ? 's' : '') + ' per layer, each read by ' + kv.heads_per_group + ' query heads; mean ' + (js ? 'Jensen\u2013Shannon divergence (smaller: more alike)' : 'Pearson r (larger: more alike)') + ' of heads of one layer that share a KV head (within) and that do not (across); p: share of ' + ks.permutations + ' random groupings at least as alike'));
  const t = el('table'), hd = el('tr');
  ['', 'within', 'across', 'p'].forEach(function (x) { hd.appendChild(el('th', 'kv', x)); });
  t.appendChild(hd);
  function row(name, w, a, p) {
    const tr = el('tr');
    tr.appendChild(el('td', 'kv', name));
    [fmt(w, 3), fmt(a, 3), isNum(p) ? fmt(p, 3) : DASH].forEach(function (x) { tr.appendChild(el('td', null, x)); });
    t.appendChild(tr);
  }
  ks.within.forEach(function (w, l) { if (isNum(w)) row('layer ' + l, w, ks.across[l], ks.p_value[l]); });
  row('all layers', ks.within_mean, ks.across_mean, null);
  c.appendChild(t);
  const cl = ks.clusters || {};
  c.appendChild(el('p', 'hint', 'other layers: ' + fmt(ks.other_layers_mean, 3) + '; clusters against the KV groups: adjusted Rand ' + fmt(cl.adjusted_rand, 3) + ', same cluster within ' + fmt(cl.same_cluster_within, 2) + ', across ' + fmt(cl.same_cluster_across, 2)));
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
  const secs = Object.keys(tm).filter(function (k) { return /seconds$/.test(k); }).map(function (k) { return tm[k]; }).filter(isNum);
  if (secs.length) s += ', ' + secs.reduce(function (a, b) { return a + b; }, 0).toFixed(2) + ' s';
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
function cellFor(c, h, maxDelta) {
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
      const p = Math.min(50, 50 * Math.abs(v) / (maxDelta || 1));
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
  const maxDelta = Math.max.apply(null, HEADS.map(function (h) { return isNum(h.ablation_delta) ? Math.abs(h.ablation_delta) : 0; })) || 1;
  HEADS.forEach(function (h, k) {
    const r = el('tr');
    r.dataset.k = String(k);
    r.dataset.head = String(h.id);
    r.tabIndex = 0;
    COLS.forEach(function (c, i) {
      const td = cellFor(c, h, maxDelta);
      if (i < 2) td.classList.add('stick' + i);
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
