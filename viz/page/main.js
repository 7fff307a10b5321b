/* headscope report page: selection, views, keys and start (after core.js, cards.js and views.js). */

/* selects head k everywhere: table row, panel, grid, head view layer, map view */
function choose(k) {
  if (!(k >= 0 && k < HEADS.length)) return;
  const prev = SEL;
  SEL = k;
  Array.prototype.forEach.call($('hs-heads').tBodies[0].rows, function (r) {
    const on = +r.dataset.k === k;
    r.classList.toggle('sel', on);
    if (on) r.setAttribute('aria-selected', 'true'); else r.removeAttribute('aria-selected');
  });
  panel(k);
  if (hasMap(k)) {
    MAPV.k = k;
    if (HV.layer !== HEADS[k].layer || !HV.on[k]) { HV.layer = HEADS[k].layer; HV.on = {}; HV.on[k] = true; HV.focus = null; }
  }
  if (prev !== k) render(VIEW);
  try { history.replaceState(null, '', '#head=' + encodeURIComponent(HEADS[k].id) + (VIEW !== 'overview' ? '&view=' + VIEW : '')); } catch (e) { /* some browsers refuse on file:// */ }
}
function step(d) {
  const order = ORDER.length ? ORDER : HEADS.map(function (x, i) { return i; });
  const at = order.indexOf(SEL);
  choose(order[(at + d + order.length) % order.length]);
}
/* opens head k in a view (the head and map views need its map) */
function openHead(k, view) {
  choose(k);
  if ((view === 'head' || view === 'map') && !hasMap(k)) return;
  show(view);
}
function render(view) {
  if (view === 'head') headView();
  else if (view === 'model') modelView();
  else if (view === 'map') mapView();
  else if (view === 'corpus') corpusView();
}
function show(view) {
  if (VIEWS.indexOf(view) < 0 || $('tab-' + view).hidden) view = 'overview';
  VIEW = view;
  VIEWS.forEach(function (v) {
    const on = v === view;
    $('view-' + v).hidden = !on;
    const t = $('tab-' + v);
    t.setAttribute('aria-selected', on ? 'true' : 'false');
    t.tabIndex = on ? 0 : -1;
  });
  render(view);
  if (SEL >= 0) {
    try { history.replaceState(null, '', '#head=' + encodeURIComponent(HEADS[SEL].id) + (view !== 'overview' ? '&view=' + view : '')); } catch (e) { /* file:// */ }
  }
}
function fromHash() {
  const out = { k: -1, view: null };
  (location.hash || '').replace(/^#/, '').split('&').forEach(function (part) {
    const kv = part.split('=');
    let val;
    try { val = decodeURIComponent(kv[1] || ''); } catch (e) { return; }
    if (kv[0] === 'head') HEADS.forEach(function (h, k) { if (String(h.id) === val) out.k = k; });
    if (kv[0] === 'view') out.view = val;
  });
  return out;
}
function tabs() {
  const bar = $('hs-tabs');
  const list = VIEWS.filter(function (v) { return !$('tab-' + v).hidden; });
  $('hs-keys').textContent = 'keys: 1\u2013' + list.length + ' switch views, \u2190/\u2192 on a tab, [ ] previous / next head';
  bar.addEventListener('click', function (e) { const b = e.target.closest('[data-view]'); if (b) show(b.dataset.view); });
  bar.addEventListener('keydown', function (e) {
    const b = e.target.closest('[data-view]');
    if (!b || (e.key !== 'ArrowRight' && e.key !== 'ArrowLeft')) return;
    const i = list.indexOf(b.dataset.view), to = list[(i + (e.key === 'ArrowRight' ? 1 : list.length - 1)) % list.length];
    e.preventDefault();
    show(to);
    $('tab-' + to).focus();
  });
  document.addEventListener('keydown', function (e) {
    const t = e.target;
    if (e.altKey || e.ctrlKey || e.metaKey || (t && /^(INPUT|SELECT|TEXTAREA)$/.test(t.tagName))) return;
    if (/^[1-9]$/.test(e.key) && list[+e.key - 1]) { show(list[+e.key - 1]); return; }
    if (e.key === '[') step(-1);
    else if (e.key === ']') step(1);
  });
}

/* the per-text list of a corpus page: texts.jsonl, one JSON object a line */
function readTexts() {
  const s = $('hs-texts');
  if (!s) return [];
  const out = [];
  s.textContent.split('\n').forEach(function (line) {
    if (!line.trim()) return;
    try { out.push(JSON.parse(line)); } catch (e) { /* a bad line is left out */ }
  });
  return out;
}

/* word labels: the display tokens of each word joined */
function words(ids) {
  if (!Array.isArray(ids) || ids.length !== TOKENS.length || !INFO.words) return null;
  const labels = [];
  ids.forEach(function (w, i) { labels[w] = (labels[w] || '') + String(TOKENS[i]); });
  return { ids: ids, labels: labels.map(function (s) { return tokLabel(String(s).replace(/^\s+/, ' ')); }) };
}

function init() {
  R = JSON.parse($('hs-report').textContent);
  if (!R || typeof R !== 'object') throw new Error('the embedded report is not an object');
  readMetrics();
  try { INFO = JSON.parse($('hs-maps-info').textContent) || {}; } catch (e) { INFO = { embedded: false, reason: 'the map index could not be read' }; }
  CORPUS = R.corpus && typeof R.corpus === 'object' ? R.corpus : null;
  const list = CORPUS ? CORPUS.heads : R.heads;
  HEADS = Array.isArray(list) ? list.filter(function (h) { return h && typeof h === 'object'; }) : [];
  FILES = (Array.isArray(R.files) ? R.files : []).filter(function (f) { return typeof f === 'string'; });
  const inp = R.input || {};
  TOKENS = Array.isArray(inp.display_tokens) ? inp.display_tokens : Array.isArray(inp.tokens) ? inp.tokens : [];
  TYPES = Array.isArray(inp.type_ids) && inp.type_ids.some(function (t) { return t === 1; }) ? inp.type_ids : [];
  (Array.isArray(inp.sinks) ? inp.sinks : []).forEach(function (i) { SINKS[i] = true; });
  WORDS = words(inp.word_ids);
  N = INFO.embedded ? INFO.n : TOKENS.length;
  ['map', 'wmap', 'thumb'].forEach(function (kind) {
    document.querySelectorAll('script.hs-' + kind).forEach(function (s) { REC[kind][s.dataset.index] = s; });
  });
  TEXTS = CORPUS ? readTexts() : [];
  if (CORPUS) { $('tab-corpus').hidden = false; $('tab-head').hidden = true; $('tab-map').hidden = true; }
  columns();
  header();
  summary();
  table();
  pictures();
  footer();
  tabs();
  document.addEventListener('click', function (e) {
    const b = e.target.closest('[data-head-index]');
    if (!b) return;
    choose(+b.dataset.headIndex);
    const row = $('hs-heads').querySelector('tr[data-k="' + b.dataset.headIndex + '"]');
    if (row && VIEW === 'overview') row.scrollIntoView({ block: 'nearest' });
  });
  window.addEventListener('hashchange', function () { const h = fromHash(); if (h.k >= 0 && h.k !== SEL) choose(h.k); if (h.view && h.view !== VIEW) show(h.view); });
  const h = fromHash();
  let k = h.k;
  if (k < 0 && HEADS.length) {
    k = 0;
    const key = CORPUS ? 'importance' : 'ablation_delta';
    HEADS.forEach(function (x, i) { if (isNum(x[key]) && !(HEADS[k][key] >= x[key])) k = i; });
    if (!hasMap(k) && INFO.embedded) k = +Object.keys(REC.map)[0];
  }
  if (HEADS.length) choose(k);
  else $('hs-selected').replaceChildren(el('p', 'note', 'The report has no heads.'));
  show(h.view || 'overview');
  /* for tests and the console: what the head view drew last, and the decoded maps */
  window.headscope = { drawn: function () { return HV.drawn; }, map: getMap, word: function (k) { return decoded('wmap', k); }, heads: HEADS, choose: choose, show: show, ready: performance.now() };
}

try {
  if (isEncdec()) encdecInit(); /* T5's three kinds of heads: encdec.js */
  else init();
} catch (e) {
  const box = $('hs-error');
  box.hidden = false;
  box.textContent = 'headscope: this page could not show the report: ' + (e && e.message ? e.message : e);
  console.error(e);
}
