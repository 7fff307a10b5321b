/* headscope report page of an encoder-decoder (T5): a report with "kinds" shows its three
 * kinds of heads (the encoder's self-attention, the decoder's self-attention, the decoder's
 * cross-attention) in three sections, each with a layer x head grid of its maps, a table of
 * its heads and the map of the head chosen, drawn with its query tokens down and its key
 * tokens across (a cross map: decoder tokens x encoder tokens). Maps come from
 * script.hs-xmap [data-kind][data-index] (viz/html_encdec.c), quantised as the other maps. */
const ED = { info: {}, rec: {}, cache: {}, sel: null, kinds: [], drawn: null };
const ED_TITLES = {
  encoder: 'Encoder self-attention',
  decoder: 'Decoder self-attention',
  cross: 'Cross-attention (decoder \u2192 encoder)'
};
const ED_NOTES = {
  encoder: 'Encoder tokens attend to every encoder token (bidirectional). Rows: encoder queries; columns: encoder keys.',
  decoder: 'Decoder tokens (the start token, then the target but its last) attend to themselves and earlier decoder tokens (causal). Rows and columns: decoder tokens.',
  cross: 'Each decoder token attends to every encoder token (the encoder\u2019s output). Rows: decoder queries; columns: encoder keys. Previous-token, self, duplicate-token and induction scores are not defined here.'
};
const ED_COLS = [
  ['id', 'head', null], ['entropy_nats', 'entropy (nats)', null], ['entropy_norm', 'entropy (norm.)', null],
  ['max_weight_mean', 'max weight', null], ['previous_token', 'previous token', 'scores'],
  ['first_token', 'first token', 'scores'], ['eos', '</s>', 'scores'],
  ['duplicate_token', 'duplicate token', 'scores'], ['induction', 'induction', 'scores'],
  ['same_token', 'same token', 'scores'], ['ablation_delta', 'ablation \u0394', null],
  ['gradient_importance', 'gradient', null]
];

function isEncdec() {
  try {
    const r = JSON.parse($('hs-report').textContent);
    return !!r && Array.isArray(r.kinds) && Array.isArray(r.heads);
  } catch (e) { return false; }
}
function edValue(h, c) { return c[2] ? (h[c[2]] || {})[c[0]] : h[c[0]]; }
function edTokens(kind, axis) {
  const inp = R.input || {};
  const enc = inp.display_tokens || inp.tokens || [], dec = inp.decoder_display_tokens || inp.decoder_tokens || [];
  if (axis === 'rows') return kind === 'encoder' ? enc : dec;
  return kind === 'decoder' ? dec : enc;
}
/* head's map: { v, rows, cols } or null when the page has none */
function edMap(h) {
  const key = h.kind + ':' + h.index;
  if (ED.cache[key]) return ED.cache[key];
  const rec = ED.rec[key];
  if (!rec) return null;
  const raw = bytes(rec), rows = h.map_shape[0], cols = h.map_shape[1];
  if (!raw || raw.length !== rows * cols) return null;
  const lv = ED.info.levels || 254, nan = isNum(ED.info.nan) ? ED.info.nan : 255, v = new Float32Array(rows * cols);
  for (let i = 0; i < raw.length; i++) v[i] = raw[i] === nan ? NaN : raw[i] / lv;
  ED.cache[key] = { v: v, rows: rows, cols: cols };
  return ED.cache[key];
}
function edThumb(h, px) {
  const m = edMap(h), cv = el('canvas', 'thumb');
  const ctx = sizeCanvas(cv, px * (m ? m.cols / Math.max(m.rows, m.cols) : 1), px * (m ? m.rows / Math.max(m.rows, m.cols) : 1));
  cv.title = h.id;
  if (!m) return cv;
  const sx = cv.width / (window.devicePixelRatio || 1) / m.cols, sy = cv.height / (window.devicePixelRatio || 1) / m.rows;
  for (let i = 0; i < m.rows; i++)
    for (let j = 0; j < m.cols; j++) { ctx.fillStyle = colour(m.v[i * m.cols + j]); ctx.fillRect(j * sx, i * sy, sx + 0.5, sy + 0.5); }
  return cv;
}
/* the full map of head h with its tokens on both axes, and a readout of the cell under the pointer */
function edDraw(box, h) {
  box.replaceChildren();
  box.appendChild(el('h3', null, h.id + ' \u2014 ' + ED_TITLES[h.kind] + ', layer ' + h.layer + ' of its stack (model layer ' + h.model_layer + '), head ' + h.head));
  const m = edMap(h);
  if (!m) { box.appendChild(el('p', 'note', 'This head\u2019s map is not in the page (its byte budget).')); return; }
  const rt = edTokens(h.kind, 'rows'), ct = edTokens(h.kind, 'cols');
  const cell = Math.max(4, Math.min(22, Math.floor(560 / Math.max(m.rows, m.cols)))), lab = 90;
  const cv = el('canvas', 'edmap'), W = lab + m.cols * cell + 4, Hh = lab + m.rows * cell + 20;
  const ctx = sizeCanvas(cv, W, Hh);
  ctx.font = '10px ui-monospace, Menlo, Consolas, monospace';
  for (let i = 0; i < m.rows; i++) {
    for (let j = 0; j < m.cols; j++) { ctx.fillStyle = colour(m.v[i * m.cols + j]); ctx.fillRect(lab + j * cell, i * cell, cell, cell); }
    if (cell >= 9) { ctx.fillStyle = '#222'; ctx.textAlign = 'right'; ctx.fillText(tokLabel(rt[i]).slice(0, 14), lab - 3, i * cell + cell * 0.75); }
  }
  if (cell >= 9) {
    for (let j = 0; j < m.cols; j++) {
      ctx.save(); ctx.translate(lab + j * cell + cell * 0.7, m.rows * cell + 3); ctx.rotate(Math.PI / 2);
      ctx.textAlign = 'left'; ctx.fillStyle = '#222'; ctx.fillText(tokLabel(ct[j]).slice(0, 14), 0, 0); ctx.restore();
    }
  }
  const q = h.kind === 'encoder' ? 'encoder' : 'decoder', k = h.kind === 'decoder' ? 'decoder' : 'encoder';
  box.appendChild(el('p', 'hint', 'rows: ' + q + ' tokens (queries), ' + m.rows + '; columns: ' + k + ' tokens (keys), ' + m.cols));
  box.appendChild(cv);
  const out = el('p', 'kv edreadout', '\u00a0');
  box.appendChild(out);
  cv.addEventListener('mousemove', function (e) {
    const r = cv.getBoundingClientRect(), j = Math.floor((e.clientX - r.left - lab) / cell), i = Math.floor((e.clientY - r.top) / cell);
    out.textContent = i >= 0 && i < m.rows && j >= 0 && j < m.cols
      ? q + ' ' + i + ' ' + tokLabel(rt[i]) + ' \u2192 ' + k + ' ' + j + ' ' + tokLabel(ct[j]) + ': ' + fmt(m.v[i * m.cols + j], 3) : '\u00a0';
  });
  ED.drawn = { id: h.id, rows: m.rows, cols: m.cols, row_tokens: rt.slice(), col_tokens: ct.slice() };
}
function edSection(parent, kd) {
  const heads = HEADS.filter(function (h) { return h.kind === kd.kind; });
  const sec = el('section', 'card edkind');
  sec.id = 'ed-' + kd.kind;
  sec.dataset.kind = kd.kind;
  sec.appendChild(el('h2', null, ED_TITLES[kd.kind] + ' \u2014 ' + kd.n_layer + ' layers \u00d7 ' + (heads.length / Math.max(1, kd.n_layer)) + ' heads, maps ' + kd.map_shape[0] + ' \u00d7 ' + kd.map_shape[1]));
  sec.appendChild(el('p', 'hint', ED_NOTES[kd.kind] + ' Heads are named ' + kd.id_prefix + 'L.H, L counted in the ' + (kd.kind === 'encoder' ? 'encoder' : 'decoder') + '\u2019s own layers.'));
  const grid = el('div', 'edgrid');
  grid.style.display = 'grid';
  grid.style.gridTemplateColumns = 'max-content repeat(' + (heads.length / Math.max(1, kd.n_layer)) + ', max-content)';
  grid.style.gap = '4px';
  grid.style.justifyContent = 'start';
  grid.style.alignItems = 'center';
  for (let l = 0; l < kd.n_layer; l++) {
    grid.appendChild(el('span', 'kv', 'layer ' + l + (isNum((kd.diversity || [])[l]) ? ' (diversity ' + fmt(kd.diversity[l], 3) + ')' : '')));
    heads.filter(function (h) { return h.layer === l; }).forEach(function (h) {
      const b = el('button', 'edhead');
      b.type = 'button';
      b.dataset.id = h.id;
      b.appendChild(edThumb(h, 64));
      b.appendChild(el('div', 'kv', h.id));
      b.addEventListener('click', function () { edChoose(h); });
      grid.appendChild(b);
    });
  }
  sec.appendChild(grid);
  const tbl = el('table', 'edtable'), tr = el('tr');
  ED_COLS.forEach(function (c) { tr.appendChild(el('th', null, c[1])); });
  tbl.appendChild(el('thead')).appendChild(tr);
  const body = el('tbody');
  heads.forEach(function (h) {
    const row = el('tr');
    row.dataset.id = h.id;
    ED_COLS.forEach(function (c) {
      const v = edValue(h, c);
      row.appendChild(el('td', isNum(v) || c[0] === 'id' ? null : 'null', c[0] === 'id' ? v : c[0] === 'ablation_delta' ? fmtSigned(v) : fmt(v)));
    });
    row.addEventListener('click', function () { edChoose(h); });
    body.appendChild(row);
  });
  tbl.appendChild(body);
  const wrap = el('div', 'scroll');
  wrap.appendChild(tbl);
  sec.appendChild(wrap);
  const cand = ((R.pruning || {}).candidates || {})[kd.kind];
  if (Array.isArray(cand))
    sec.appendChild(el('p', 'kv', 'pruning candidates (|ablation \u0394| < ' + fmt((R.pruning || {}).tolerance, 3) + '): ' + (cand.length ? cand.map(function (c) { return c.id; }).join(', ') : 'none')));
  const mapBox = el('div', 'panel edmapbox');
  mapBox.appendChild(el('p', 'hint', 'Click a head to see its map.'));
  sec.appendChild(mapBox);
  parent.appendChild(sec);
}
function edChoose(h) {
  ED.sel = h.id;
  document.querySelectorAll('.edhead, .edtable tbody tr').forEach(function (b) { b.classList.toggle('sel', b.dataset.id === h.id); });
  edDraw(document.querySelector('#ed-' + h.kind + ' .edmapbox'), h);
  edPanel(h);
}
function edPanel(h) {
  const p = $('hs-selected');
  p.replaceChildren(el('h3', null, h.id + ' (' + ED_TITLES[h.kind] + ')'));
  const t = el('table');
  ED_COLS.slice(1).forEach(function (c) {
    const r = el('tr');
    r.appendChild(el('td', null, c[1]));
    r.appendChild(el('td', null, fmt(edValue(h, c))));
    t.appendChild(r);
  });
  p.appendChild(t);
  p.appendChild(el('p', 'kv', 'gradient (raw): ' + fmt(h.gradient_raw)));
}
function edHeader() {
  const m = R.model || {}, inp = R.input || {};
  $('hs-model').textContent = String(m.path || '') + ' (' + String(m.family || '') + ', encoder-decoder)';
  const meta = $('hs-meta');
  meta.replaceChildren();
  [['layers', m.n_enc_layer + ' encoder + ' + m.n_dec_layer + ' decoder'], ['heads per layer', m.n_head],
   ['encoder tokens', inp.n_tokens], ['target tokens', inp.n_target_tokens],
   ['loss (target NLL)', fmt((R.loss || {}).value)]].forEach(function (x) {
    const s = el('span');
    s.appendChild(el('b', null, x[0] + ': '));
    s.appendChild(document.createTextNode(String(x[1])));
    meta.appendChild(s);
  });
  const tx = $('hs-text');
  tx.replaceChildren();
  [['text (encoder)', inp.text], ['target (decoder)', inp.target]].forEach(function (x) {
    const d = el('div', 'text');
    d.appendChild(el('span', 'lab', x[0]));
    d.appendChild(document.createTextNode(x[1] === null || x[1] === undefined ? DASH : String(x[1])));
    tx.appendChild(d);
  });
  const toks = $('hs-tokens');
  toks.replaceChildren();
  [['encoder', edTokens('encoder', 'rows')], ['decoder', edTokens('decoder', 'rows')]].forEach(function (x) {
    toks.appendChild(el('span', 'kv', x[0] + ':'));
    x[1].forEach(function (s) { toks.appendChild(el('span', 'tok', tokLabel(s))); });
  });
}
function encdecInit() {
  R = JSON.parse($('hs-report').textContent);
  try { ED.info = JSON.parse($('hs-encdec-info').textContent) || {}; } catch (e) { ED.info = {}; }
  HEADS = R.heads.filter(function (h) { return h && typeof h === 'object'; });
  HEADS.forEach(function (h) { h.index = h.layer * R.model.n_head + h.head; });
  document.querySelectorAll('script.hs-xmap').forEach(function (s) { ED.rec[s.dataset.kind + ':' + s.dataset.index] = s; });
  ['head', 'model', 'map', 'corpus'].forEach(function (v) { $('tab-' + v).hidden = true; $('view-' + v).hidden = true; });
  $('tab-overview').setAttribute('aria-selected', 'true');
  $('tab-overview').textContent = 'Three kinds of heads';
  edHeader();
  const ov = $('view-overview');
  ov.replaceChildren();
  const nav = el('nav', 'chips');
  nav.appendChild(el('span', 'kv', 'kind:'));
  R.kinds.forEach(function (kd) {
    const a = el('a', 'chip', ED_TITLES[kd.kind] || kd.kind);
    a.href = '#ed-' + kd.kind;
    nav.appendChild(a);
  });
  ov.appendChild(nav);
  if (ED.info.count < ED.info.of)
    ov.appendChild(el('p', 'note', 'The maps of ' + ED.info.count + ' of ' + ED.info.of + ' heads fit the page\u2019s budget; the others show only their numbers.'));
  R.kinds.forEach(function (kd) { if (ED_TITLES[kd.kind]) edSection(ov, kd); });
  const pics = (Array.isArray(R.files) ? R.files : []).filter(function (f) { return /^heads\/.*\.png$/.test(f); });
  if (pics.length) {
    const c = card(ov, 'Pictures');
    pics.forEach(function (f) { const a = el('a', 'chip', f); a.href = filePath(f); c.appendChild(a); });
  }
  $('hs-footer').textContent = 'headscope ' + String((R.generator || {}).version || '') + ' \u2014 report.json beside this page has every number (docs/report-schema.md \u00a7 Encoder-decoders).';
  if (HEADS.length) edChoose(HEADS[0]);
  window.headscope = { encdec: true, heads: HEADS, choose: function (id) { HEADS.forEach(function (h) { if (h.id === id) edChoose(h); }); },
    map: function (id) { const h = HEADS.filter(function (x) { return x.id === id; })[0]; return h ? edMap(h) : null; },
    drawn: function () { return ED.drawn; }, ready: performance.now() };
}
