/*
 * headscope patching page (vanilla JavaScript, no libraries; compiled into patch.html by
 * viz/page/pagegen.c and written by `headscope patch` as OUT/index.html). It reads the
 * patching report (patching.json, schema headscope.patching/1) from #hs-patching and draws:
 * the run's settings and metric means; the L x H grid of effects (path patching: the senders'
 * layers x heads; a site without heads: one column) on a blue-white-red scale centred on 0,
 * each cell printed, hover or focus for its effect, ci95 and the patched metric of each pair;
 * with --positions each, the (layer.head) x position grid; the paths list; the pairs with
 * their clean and corrupt metrics; the pictures the report lists. docs/html.md and
 * docs/patching.md describe it.
 */
/* headscope's diverging map (viz/colormap.c): -1, -0.5, 0, +0.5, +1 */
const DIVERGING = [[33, 72, 150], [110, 160, 212], [246, 246, 244], [222, 112, 92], [150, 24, 36]];
let P = {};
const PT = { which: 'effect' };

function ci(c, d) { return Array.isArray(c) && c.length === 2 ? '[' + fmt(c[0], d) + ', ' + fmt(c[1], d) + ']' : DASH; }
/* the colour of v on -a..+a (0 near white); grey when v is not a number */
function divColour(v, a) {
  if (!isNum(v)) return 'rgb(128,128,128)';
  const t = Math.max(0, Math.min(1, 0.5 + v / (2 * (a > 0 ? a : 1)))), s = t * 4;
  const i = Math.min(3, Math.floor(s)), f = s - i, p = DIVERGING[i], q = DIVERGING[i + 1];
  return 'rgb(' + [0, 1, 2].map(function (c) { return Math.round(p[c] + f * (q[c] - p[c])); }).join(',') + ')';
}
/* the decimals a grid prints: 2, or up to 6 when the largest |value| a is under 0.1, so that
   it shows two significant digits (path patching's effects are often a few thousandths) */
function digits(a) { return a > 0 && a < 0.1 ? Math.min(6, Math.ceil(-Math.log10(a)) + 1) : 2; }
function inkOn(v, a) { return isNum(v) && Math.abs(v) > 0.6 * (a > 0 ? a : 1) ? '#fff' : '#1d2330'; }
function absMax(recs, key) {
  let a = 0;
  recs.forEach(function (r) { if (isNum(r[key]) && Math.abs(r[key]) > a) a = Math.abs(r[key]); });
  return a;
}
/* a record's name: "2.3", or "2" at a site without heads */
function unitName(r) { return r.head === null || r.head === undefined ? String(r.layer) : r.layer + '.' + r.head; }
function perPair(list) { return Array.isArray(list) ? list.map(function (v) { return fmt(v); }).join(', ') : DASH; }
/* the readout of record r (an effect grid's cell) */
function describe(r, what) {
  const both = isNum(r.effect_attribution) || Array.isArray(r.ci95_attribution);
  let s = what + ': effect ' + fmt(r.effect) + ' ' + ci(r.ci95) + ' (95% bootstrap interval)';
  s += '\npatched metric per pair: ' + perPair(r.per_pair);
  if (both) {
    s += '\nattribution: effect ' + fmt(r.effect_attribution) + ' ' + ci(r.ci95_attribution) +
      '\nattribution per pair: ' + perPair(r.per_pair_attribution);
  }
  return s;
}

function header() {
  const meta = $('hs-meta'), m = P.metric || {}, bs = P.bootstrap || {}, cost = P.cost || {};
  $('hs-model').textContent = P.model || '';
  document.title = 'headscope patching ' + DASH + ' ' + (P.model || '');
  function item(label, value) {
    const s = el('span');
    s.appendChild(el('b', null, label));
    s.appendChild(document.createTextNode(' ' + value));
    meta.appendChild(s);
  }
  item('method', String(P.method) + (P.architecture ? ' (' + P.architecture + ')' : ''));
  item('site', String(P.site) + ' (' + String(P.hook) + ')' + (P.per_position ? ', each position' : ''));
  item('direction', String(P.direction));
  item('metric', String(m.name) + ': clean mean ' + fmt(m.clean_mean) + ', corrupt mean ' + fmt(m.corrupt_mean));
  item('pairs', String(Array.isArray(P.pairs) ? P.pairs.length : 0) + (P.pairs_file ? ' from ' + P.pairs_file : ''));
  item('interval', (isNum(bs.level) ? Math.round(100 * bs.level) + '%' : '') + ' bootstrap, ' + bs.resamples + ' resamples, seed ' + bs.seed);
  if (isNum(cost.forward_passes)) item('cost', cost.forward_passes + ' forward passes (' + fmt(cost.per_pair, 1) + ' a pair)');
  if (P.correlation) {
    item('exact vs attribution', 'r = ' + fmt(P.correlation.heads, 3) + ' over heads' +
      (isNum(P.correlation.positions) ? ', ' + fmt(P.correlation.positions, 3) + ' over positions' : ''));
  }
  if (P.shard) item('shard', P.shard.index + ' of ' + P.shard.count);
}

/* the colour scale under a grid: -a, 0, +a */
function scale(box, a) {
  const d = el('div', 'pt-scale');
  d.appendChild(el('span', null, fmt(-a, digits(a))));
  const g = el('i');
  g.style.background = 'linear-gradient(90deg,' + DIVERGING.map(function (c) { return 'rgb(' + c.join(',') + ')'; }).join(',') + ')';
  d.appendChild(g);
  d.appendChild(el('span', null, fmt(a, digits(a))));
  d.appendChild(el('span', 'hint', 'red: restores the clean behaviour; blue: works against it'));
  box.appendChild(d);
}
/* a readout line and the hover/focus handlers of a grid's cells */
function readout(box, table, recs, name) {
  const out = el('div', 'pt-readout', 'Hover over a cell (or focus it with Tab) to read its values.');
  out.id = table.id + '-readout';
  function show(e) {
    const td = e.target.closest('td[data-i]');
    if (td) out.textContent = describe(recs[+td.dataset.i], name(recs[+td.dataset.i]));
  }
  table.addEventListener('mouseover', show);
  table.addEventListener('focusin', show);
  box.appendChild(out);
}

/* the L x H grid (rows: layers, columns: heads) of recs, each cell printed */
function effectGrid(box, recs, key, id) {
  const layers = [], heads = [], at = {};
  recs.forEach(function (r, i) {
    if (layers.indexOf(r.layer) < 0) layers.push(r.layer);
    const h = r.head === null || r.head === undefined ? -1 : r.head;
    if (heads.indexOf(h) < 0) heads.push(h);
    at[r.layer + ':' + h] = i;
  });
  layers.sort(function (a, b) { return a - b; });
  heads.sort(function (a, b) { return a - b; });
  const a = absMax(recs, key), t = el('table', 'pt-grid');
  t.id = id;
  const hr = el('tr');
  hr.appendChild(el('th'));
  heads.forEach(function (h) { hr.appendChild(el('th', null, h < 0 ? 'layer' : 'H' + h)); });
  t.appendChild(hr);
  layers.forEach(function (l) {
    const tr = el('tr');
    tr.appendChild(el('th', null, 'L' + l));
    heads.forEach(function (h) {
      const i = at[l + ':' + h];
      if (i === undefined) { tr.appendChild(el('td')); return; }
      const v = recs[i][key], td = el('td', isNum(v) ? '' : 'nan', fmt(v, digits(a)));
      td.dataset.i = String(i);
      td.tabIndex = 0;
      td.style.background = divColour(v, a);
      td.style.color = inkOn(v, a);
      tr.appendChild(td);
    });
    t.appendChild(tr);
  });
  box.appendChild(t);
  scale(box, a);
  return t;
}

function headsView() {
  const box = $('pt-heads');
  box.replaceChildren();
  const path = P.method === 'path', recs = path ? pathRecords() : (Array.isArray(P.heads) ? P.heads : []);
  box.appendChild(el('h2', null, path ? 'Path patching: effect of each sender' : 'Effect of patching each ' + (P.n_heads ? 'head' : 'layer')));
  const both = P.method === 'both';
  box.appendChild(el('p', 'hint', path ? 'rows: the sender\u2019s layer, columns: its head; the sender\u2019s clean output reaches only ' + receiverText() + '; 0: no change, 1: the clean metric restored'
    : 'rows: layers, columns: heads; the effect normalised on the means over the pairs (0: the ' + (P.direction === 'noise' ? 'clean' : 'corrupt') + ' run\u2019s metric, 1: the ' + (P.direction === 'noise' ? 'corrupt' : 'clean') + ' run\u2019s)'));
  if (both) {
    const l = el('label', null, 'show ');
    const s = el('select');
    [['effect', 'exact patching'], ['effect_attribution', 'attribution patching']].forEach(function (o) {
      const op = el('option', null, o[1]);
      op.value = o[0];
      s.appendChild(op);
    });
    s.value = PT.which;
    s.id = 'pt-which';
    s.addEventListener('change', function () { PT.which = s.value; headsView(); positionsView(); });
    l.appendChild(s);
    const c = el('div', 'controls');
    c.appendChild(l);
    box.appendChild(c);
  }
  if (!recs.length) { box.appendChild(el('p', 'note', 'No per-head effects in this report.')); return; }
  const t = effectGrid(box, recs, both ? PT.which : 'effect', 'pt-grid');
  readout(box, t, recs, function (r) { return path ? r.sender + ' \u2192 ' + r.receiver + ' ' + r.input : unitName(r); });
}

/* path records as grid records: the sender's layer and head */
function pathRecords() {
  return (Array.isArray(P.paths) ? P.paths : []).map(function (p) {
    const s = String(p.sender).split('.');
    return Object.assign({ layer: +s[0], head: +s[1] }, p);
  });
}
function receiverText() {
  const p = Array.isArray(P.paths) && P.paths[0];
  return p ? p.receiver + '\u2019s ' + p.input : 'the receiver';
}

/* --positions each: one row a layer.head, one column a position */
function positionsView() {
  const box = $('pt-positions'), recs = Array.isArray(P.positions) ? P.positions : [];
  box.hidden = !recs.length;
  box.replaceChildren();
  if (!recs.length) return;
  const key = P.method === 'both' ? PT.which : 'effect';
  box.appendChild(el('h2', null, 'Effect per position'));
  box.appendChild(el('p', 'hint', 'rows: ' + (P.n_heads ? 'layer.head' : 'layer') + ', columns: positions; the same effect, patching one position at a time'));
  const rows = [], pos = [], at = {};
  recs.forEach(function (r, i) {
    const u = unitName(r);
    if (rows.indexOf(u) < 0) rows.push(u);
    if (pos.indexOf(r.position) < 0) pos.push(r.position);
    at[u + '@' + r.position] = i;
  });
  pos.sort(function (a, b) { return a - b; });
  const a = absMax(recs, key), t = el('table', 'pt-grid pos');
  t.id = 'pt-pos-grid';
  const hr = el('tr');
  hr.appendChild(el('th'));
  pos.forEach(function (p) { hr.appendChild(el('th', null, String(p))); });
  t.appendChild(hr);
  rows.forEach(function (u) {
    const tr = el('tr');
    tr.appendChild(el('th', null, u));
    pos.forEach(function (p) {
      const i = at[u + '@' + p], td = el('td');
      if (i !== undefined) {
        td.dataset.i = String(i);
        td.tabIndex = 0;
        td.style.background = divColour(recs[i][key], a);
      }
      tr.appendChild(td);
    });
    t.appendChild(tr);
  });
  box.appendChild(t);
  scale(box, a);
  readout(box, t, recs, function (r) { return unitName(r) + ' at position ' + r.position; });
}

/* the paths, largest |effect| first */
function pathsView() {
  const box = $('pt-paths'), list = Array.isArray(P.paths) ? P.paths.slice() : [];
  box.hidden = !list.length;
  if (!list.length) return;
  box.appendChild(el('h2', null, 'Paths'));
  box.appendChild(el('p', 'hint', 'largest |effect| first'));
  list.sort(function (x, y) { return (isNum(y.effect) ? Math.abs(y.effect) : -1) - (isNum(x.effect) ? Math.abs(x.effect) : -1); });
  const t = el('table', 'pt-list');
  t.id = 'pt-path-list';
  const hr = el('tr');
  ['sender', 'receiver', 'input', 'effect', '95% interval'].forEach(function (h) { hr.appendChild(el('th', null, h)); });
  t.appendChild(hr);
  list.forEach(function (p) {
    const tr = el('tr');
    [p.sender, p.receiver, p.input, fmt(p.effect), ci(p.ci95)].forEach(function (x) { tr.appendChild(el('td', null, x)); });
    tr.title = 'patched metric per pair: ' + perPair(p.per_pair);
    t.appendChild(tr);
  });
  box.appendChild(t);
}

function pairsView() {
  const box = $('pt-pairs'), pairs = Array.isArray(P.pairs) ? P.pairs : [], m = P.metric || {};
  box.appendChild(el('h2', null, 'Pairs'));
  box.appendChild(el('p', 'hint', 'each pair\u2019s line of the pairs file, its tokens, the position the metric reads, the answer and wrong token ids, and the metric (' + m.name + ') on the clean and on the corrupt prompt'));
  const t = el('table', 'pt-list');
  t.id = 'pt-pair-list';
  const hr = el('tr');
  ['line', 'tokens', 'position', 'answer id', 'wrong id', 'clean', 'corrupt'].forEach(function (h) { hr.appendChild(el('th', null, h)); });
  t.appendChild(hr);
  pairs.forEach(function (p, i) {
    const tr = el('tr');
    [p.line, p.n_tokens, p.position, p.answer_id, p.wrong_id].forEach(function (x) { tr.appendChild(el('td', null, isNum(x) ? String(x) : DASH)); });
    [Array.isArray(m.clean) ? m.clean[i] : null, Array.isArray(m.corrupt) ? m.corrupt[i] : null].forEach(function (x) { tr.appendChild(el('td', null, fmt(x))); });
    t.appendChild(tr);
  });
  box.appendChild(t);
}

function pictures() {
  const box = $('pt-pictures');
  (Array.isArray(P.files) ? P.files : []).filter(function (f) { return /\.png$/i.test(f); }).forEach(function (f) {
    const fig = el('figure'), img = el('img');
    img.alt = f;
    img.addEventListener('error', function () { fig.replaceChildren(el('p', 'note', f + ' could not be loaded')); });
    img.src = String(f).split('/').map(encodeURIComponent).join('/');
    fig.appendChild(img);
    fig.appendChild(el('figcaption', null, f));
    box.appendChild(fig);
  });
}

function init() {
  P = JSON.parse($('hs-patching').textContent);
  if (!P || typeof P !== 'object') throw new Error('the embedded report is not an object');
  header();
  headsView();
  positionsView();
  pathsView();
  pairsView();
  pictures();
  const g = P.generator || {};
  $('hs-footer').textContent = (P.schema || 'patching') + (g.version ? ' \u00b7 headscope ' + g.version : '') + ' \u00b7 this page is self-contained and loads nothing from the network';
  window.headscope = { report: P, ready: performance.now() };
}

try {
  init();
} catch (e) {
  const box = $('hs-error');
  box.hidden = false;
  box.textContent = 'headscope: this page could not show the patching report: ' + (e && e.message ? e.message : e);
  console.error(e);
}
