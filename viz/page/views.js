/* headscope report page: the head, model, map and corpus views and the head panel
 * (after core.js and cards.js; docs/html.md). */

/* ---- the selected head's panel -------------------------------------------------------- */
function panel(k) {
  const h = HEADS[k], p = $('hs-selected');
  p.replaceChildren();
  p.dataset.head = String(h.id);
  const top = el('div', 'selhead');
  const title = el('h2', null, 'Head ' + h.id);
  title.id = 'hs-sel-title';
  top.appendChild(title);
  top.appendChild(el('span', labelClass(h.label), prettyKey(h.label)));
  top.appendChild(button('\u25c0', null, 'previous head in table order ([)', function () { step(-1); }));
  top.appendChild(button('\u25b6', null, 'next head in table order (])', function () { step(1); }));
  p.appendChild(top);
  const acts = el('div', 'controls');
  acts.appendChild(button('head view', 'small', 'lines from each token (2)', function () { openHead(k, 'head'); }));
  acts.appendChild(button('map view', 'small', 'the full map (4)', function () { openHead(k, 'map'); }));
  if (!hasMap(k)) acts.appendChild(el('span', 'kv', INFO.embedded ? 'map not embedded (budget): thumbnail only' : 'no map in this page'));
  if (!CORPUS) p.appendChild(acts);
  const m = el('div', CORPUS ? 'metrics one' : 'metrics');
  function metric(label, value) {
    const d = el('div');
    d.appendChild(el('span', 'lab', label));
    d.appendChild(el('span', 'v', value));
    d.title = label + ' ' + value;
    m.appendChild(d);
  }
  metric('layer', String(h.layer));
  metric('head', String(h.head));
  if (layerAttention(h.layer)) metric('attention', layerAttention(h.layer));
  COLS.forEach(function (c) {
    if (c.kind === 'str') return;
    const v = c.get(h);
    let s = c.kind === 'int' ? (isNum(v) ? String(v) : DASH) : c.kind === 'delta' ? fmtSigned(v) : fmt(v, 3);
    if (c.summary && h[c.key] && isNum(h[c.key].ci_low)) s += ' [' + fmt(h[c.key].ci_low, 3) + ', ' + fmt(h[c.key].ci_high, 3) + ']';
    metric(c.label, s);
  });
  p.appendChild(m);
  headPictures(h).forEach(function (f, i) {
    const fig = picture(f, 'picture of head ' + h.id, f);
    if (i === 0) fig.querySelector('img').id = 'hs-sel-img';
    p.appendChild(fig);
  });
}

/* ---- head view: lines from query tokens to key tokens, one colour per head ------------- */
function layersOf() {
  const ls = [];
  HEADS.forEach(function (h) { if (ls.indexOf(h.layer) < 0) ls.push(h.layer); });
  return ls.sort(function (a, b) { return a - b; });
}
function headsOfLayer(l) {
  return HEADS.map(function (h, k) { return k; }).filter(function (k) { return HEADS[k].layer === l; });
}
function segOK(i, j) {
  if (HV.seg === 'all' || !TYPES.length) return true;
  const a = TYPES[i] === 1 ? 'B' : 'A', b = TYPES[j] === 1 ? 'B' : 'A';
  return HV.seg === a + b;
}
/* Empties a view's section; false (with a note) when the page has no maps to show in it. */
function mapsView(v) {
  v.replaceChildren();
  if (!CORPUS && INFO.embedded) return true;
  v.appendChild(el('p', 'note panel', CORPUS ? 'A corpus report has no maps: analyze one text (headscope analyze MODEL --text ...) for its head and map views.' : 'No maps are embedded in this page: ' + (INFO.reason || 'no reason given') + '.'));
  return false;
}
function headView() {
  const v = $('view-head');
  if (!mapsView(v)) return;
  if (HV.layer === null) HV.layer = SEL >= 0 ? HEADS[SEL].layer : HEADS[0].layer;
  const box = el('div', 'panel');
  v.appendChild(box);
  box.appendChild(el('h2', null, 'Head view'));
  box.appendChild(el('p', 'hint', 'Lines run from each query token (left) to the key tokens it attends to (right); a line\u2019s opacity is the attention weight. Hover or focus a token to see only its lines (\u2191/\u2193 move, \u2190/\u2192 switch side, Esc shows all).'));
  const ctl = el('div', 'controls');
  box.appendChild(ctl);
  control(ctl, 'layer', select(layersOf().map(function (l) { return [String(l), String(l)]; }), String(HV.layer), function (x) {
    HV.layer = +x;
    HV.on = {};
    const ks = headsOfLayer(HV.layer).filter(hasMap);
    if (ks.length) HV.on[ks[0]] = true;
    const before = SEL;
    if (ks.length) choose(ks[0]); /* the panel describes a head of the layer shown */
    if (SEL === before) headView(); /* else choose drew it */
  }));
  const tog = el('span', 'chips');
  tog.id = 'hs-hv-heads';
  headsOfLayer(HV.layer).forEach(function (k) {
    const c = headColour(k), on = !!HV.on[k];
    const b = button(String(HEADS[k].head), 'headtog', 'head ' + HEADS[k].id + (hasMap(k) ? '' : ' (map not embedded)'), function () {
      if (!hasMap(k)) return;
      const before = SEL;
      if (HV.on[k]) delete HV.on[k]; else { HV.on[k] = true; choose(k); }
      if (SEL === before) headView(); /* else choose drew it */
    });
    b.dataset.k = String(k);
    b.setAttribute('aria-pressed', on ? 'true' : 'false');
    b.style.borderColor = c;
    if (on) b.style.background = c;
    if (!hasMap(k)) { b.disabled = true; b.style.opacity = '0.35'; }
    tog.appendChild(b);
  });
  const lab = el('span', 'kv', 'heads');
  ctl.appendChild(lab);
  ctl.appendChild(tog);
  ctl.appendChild(button('all', 'small', 'every head of the layer', function () { headsOfLayer(HV.layer).filter(hasMap).forEach(function (k) { HV.on[k] = true; }); headView(); }));
  ctl.appendChild(button('none', 'small', 'no head', function () { HV.on = {}; headView(); }));
  if (TYPES.length) {
    const s = control(ctl, 'sentences', select([['all', 'all'], ['AA', 'A \u2192 A'], ['AB', 'A \u2192 B'], ['BA', 'B \u2192 A'], ['BB', 'B \u2192 B']], HV.seg, function (x) { HV.seg = x; draw(); }));
    s.id = 'hs-hv-seg';
  }
  const dim = control(ctl, 'dim sinks', checkbox(HV.dim, function (x) { HV.dim = x; headView(); }));
  dim.id = 'hs-hv-dim';
  const mw = el('input');
  mw.type = 'number';
  mw.min = '0';
  mw.max = '1';
  mw.step = '0.005';
  mw.value = String(HV.min);
  mw.id = 'hs-hv-min';
  mw.addEventListener('change', function () { const x = parseFloat(mw.value); HV.min = x >= 0 ? x : 0; draw(); });
  control(ctl, 'min weight', mw);

  const ks = Object.keys(HV.on).map(Number).filter(function (k) { return HEADS[k] && HEADS[k].layer === HV.layer && hasMap(k); });
  const maps = ks.map(function (k) { return { k: k, m: getMap(k), c: headColour(k) }; }).filter(function (x) { return x.m; });
  const n = INFO.n;
  const rowH = n <= 64 ? 18 : n <= 160 ? 14 : 11;
  const W = 260, H = n * rowH;
  const hv = el('div', 'hv');
  hv.id = 'hs-hv';
  const qc = el('div', 'col q'), kc = el('div', 'col k'), mid = el('div');
  qc.appendChild(el('div', 'colhead', 'query'));
  kc.appendChild(el('div', 'colhead', 'key'));
  mid.appendChild(el('div', 'colhead', 'attends to \u2192'));
  const cv = el('canvas');
  cv.id = 'hs-hv-canvas';
  const ctx = sizeCanvas(cv, W, H);
  cv.dataset.rowH = String(rowH);
  mid.appendChild(cv);
  const qs = [], kk = [];
  const fs = Math.min(12, rowH - 3) + 'px';
  for (let i = 0; i < n; i++) {
    [qc, kc].forEach(function (colEl, side) {
      const d = el('div', 'lt' + (TYPES[i] === 1 ? ' seg1' : '') + (SINKS[i] && HV.dim ? ' sinkdim' : ''), tok(i));
      d.style.height = d.style.lineHeight = rowH + 'px';
      d.style.fontSize = fs;
      d.dataset.side = side ? 'k' : 'q';
      d.dataset.i = String(i);
      d.tabIndex = i === 0 && side === 0 ? 0 : -1;
      d.title = '#' + i + ' ' + tok(i) + (SINKS[i] ? ' (sink)' : '');
      colEl.appendChild(d);
      (side ? kk : qs).push(d);
    });
  }
  hv.appendChild(qc);
  hv.appendChild(mid);
  hv.appendChild(kc);
  if (!maps.length) box.appendChild(el('p', 'note', 'Pick one or more heads above.'));
  box.appendChild(hv);

  function draw() {
    const f = HV.focus;
    ctx.clearRect(0, 0, W, H);
    ctx.lineCap = 'round';
    const drawn = [];
    maps.forEach(function (x) {
      const v = x.m.v;
      for (let i = 0; i < n; i++) {
        if (f && f.side === 'q' && i !== f.i) continue;
        for (let j = 0; j < n; j++) {
          if (f && f.side === 'k' && j !== f.i) continue;
          const w = v[i * n + j];
          if (!(w > 0) || w < HV.min || !segOK(i, j)) continue;
          const a = Math.min(1, w) * (HV.dim && SINKS[j] ? 0.15 : 1);
          ctx.strokeStyle = rgba(x.c, a);
          ctx.lineWidth = f ? 1.5 + 2.5 * w : 1 + 1.5 * w;
          ctx.beginPath();
          ctx.moveTo(2, i * rowH + rowH / 2);
          ctx.lineTo(W - 2, j * rowH + rowH / 2);
          ctx.stroke();
          drawn.push({ head: HEADS[x.k].id, k: x.k, q: i, key: j, w: w, colour: x.c, alpha: a });
        }
      }
    });
    HV.drawn = drawn;
    cv.dataset.lines = String(drawn.length);
    /* isolate: tint the other side by the summed weight of the shown heads */
    const other = f ? (f.side === 'q' ? kk : qs) : null, same = f ? (f.side === 'q' ? qs : kk) : null;
    qs.concat(kk).forEach(function (d) { d.style.background = ''; d.style.color = ''; d.classList.remove('on'); d.classList.remove('off'); });
    if (f) {
      same.forEach(function (d, i) { if (i === f.i) d.classList.add('on'); else d.classList.add('off'); });
      other.forEach(function (d, j) {
        let w = 0;
        maps.forEach(function (x) { const y = f.side === 'q' ? x.m.v[f.i * n + j] : x.m.v[j * n + f.i]; if (y > w) w = y; });
        if (w > 0) d.style.background = 'rgba(47,95,179,' + Math.min(1, w).toFixed(3) + ')';
        if (w > 0.55) d.style.color = '#fff';
        d.dataset.w = w.toFixed(4);
      });
    }
  }
  function focusTok(side, i) {
    HV.focus = i === null ? null : { side: side, i: i };
    draw();
  }
  [qc, kc].forEach(function (c) {
    c.addEventListener('mouseover', function (e) { const d = e.target.closest('.lt'); if (d) focusTok(d.dataset.side, +d.dataset.i); });
    c.addEventListener('focusin', function (e) { const d = e.target.closest('.lt'); if (d) focusTok(d.dataset.side, +d.dataset.i); });
    c.addEventListener('keydown', function (e) {
      const d = e.target.closest('.lt');
      if (!d) return;
      const i = +d.dataset.i, side = d.dataset.side;
      let t = null;
      if (e.key === 'ArrowDown') t = (side === 'q' ? qs : kk)[Math.min(n - 1, i + 1)];
      else if (e.key === 'ArrowUp') t = (side === 'q' ? qs : kk)[Math.max(0, i - 1)];
      else if (e.key === 'ArrowRight' || e.key === 'ArrowLeft') t = (side === 'q' ? kk : qs)[i];
      else if (e.key === 'Escape') { focusTok(null, null); return; }
      if (!t) return;
      e.preventDefault();
      d.tabIndex = -1;
      t.tabIndex = 0;
      t.focus();
    });
  });
  hv.addEventListener('mouseleave', function () { if (!hv.contains(document.activeElement)) focusTok(null, null); });
  headView.draw = draw;
  draw();
}
function draw() { if (headView.draw) headView.draw(); }

/* Fills grid with the L x H layout: layers down, heads across, cell(k) for head k. Grouped-query
   models: a row naming the key/value groups over the heads, and a rule before each group. */
function lhGrid(grid, width, cell) {
  const hs = [], at = {};
  HEADS.forEach(function (h, k) { if (hs.indexOf(h.head) < 0) hs.push(h.head); at[h.layer + '.' + h.head] = k; });
  hs.sort(function (a, b) { return a - b; });
  const s = R.kv_groups && R.kv_groups.heads_per_group > 1 ? R.kv_groups.heads_per_group : 0;
  function mark(e, x) { if (s && x > 0 && x % s === 0) e.classList.add('kvstart'); return e; }
  grid.style.gridTemplateColumns = '2.5em repeat(' + hs.length + ', minmax(0, ' + width + 'px))';
  if (s) {
    grid.appendChild(el('span'));
    for (let g = 0; g * s < hs.length; g++) {
      const e = mark(el('span', 'kv kvgroup', 'KV' + g), g * s);
      e.style.gridColumn = 'span ' + s;
      e.title = 'query heads ' + g * s + '\u2013' + (g * s + s - 1) + ' read key/value head ' + g;
      grid.appendChild(e);
    }
  }
  grid.appendChild(el('span'));
  hs.forEach(function (x) { grid.appendChild(mark(el('span', 'kv', 'H' + x), x)); });
  layersOf().forEach(function (l) {
    grid.appendChild(el('span', 'kv', layerLabel(l)));
    hs.forEach(function (x) {
      const k = at[l + '.' + x];
      grid.appendChild(mark(k === undefined ? el('span') : cell(k), x));
    });
  });
}

/* ---- model view: the L x H grid of thumbnails, sortable and filterable ----------------- */
function thumbCanvas(k) {
  const t = decoded('thumb', k);
  const cv = el('canvas');
  const side = t ? t.n : 1;
  cv.width = cv.height = side;
  if (t) {
    const ctx = cv.getContext('2d'), img = ctx.createImageData(side, side), scale = t.max > 0 ? t.max : 1;
    for (let p = 0; p < side * side; p++) {
      const x = t.v[p];
      const rgb = x !== x ? [128, 128, 128] : LUT[Math.max(0, Math.min(255, Math.round(x / scale * 255)))];
      img.data[4 * p] = rgb[0];
      img.data[4 * p + 1] = rgb[1];
      img.data[4 * p + 2] = rgb[2];
      img.data[4 * p + 3] = 255;
    }
    ctx.putImageData(img, 0, 0);
  }
  return cv;
}
function passes(k) {
  const h = HEADS[k];
  if (!layerShown(k)) return false;
  if (MV.flabel && h.label !== MV.flabel) return false;
  const c = col(MV.fkey);
  if (!c) return true;
  const v = c.get(h), lo = parseFloat(MV.fmin), hi = parseFloat(MV.fmax);
  if ((isFinite(lo) || isFinite(hi)) && !isNum(v)) return false;
  return !(isFinite(lo) && v < lo) && !(isFinite(hi) && v > hi);
}
function modelView() {
  const v = $('view-model');
  v.replaceChildren();
  const box = el('div', 'panel');
  v.appendChild(box);
  box.appendChild(el('h2', null, 'Model view'));
  const thumbs = Object.keys(REC.thumb).length > 0;
  box.appendChild(el('p', 'hint', (thumbs ? 'Every head\u2019s map in small (each pixel the largest weight it covers, scaled to the head\u2019s own largest weight)' : 'Every head as a cell coloured by the chosen column') + '. Click a head (or press Enter on it) to open it in the head view. Sort the heads by any column, or filter them.'));
  const ctl = el('div', 'controls');
  box.appendChild(ctl);
  const opts = [['grid', 'layers \u00d7 heads']].concat(numCols().map(function (c) { return [c.key, c.label]; }));
  control(ctl, 'order', select(opts, MV.sort, function (x) { MV.sort = x; modelView(); })).id = 'hs-mv-sort';
  control(ctl, 'descending', checkbox(MV.dir < 0, function (x) { MV.dir = x ? -1 : 1; modelView(); }));
  if (!thumbs) {
    if (!MV.colour) MV.colour = (numCols()[0] || {}).key || '';
    control(ctl, 'colour by', select(numCols().map(function (c) { return [c.key, c.label]; }), MV.colour, function (x) { MV.colour = x; modelView(); }));
  }
  control(ctl, 'filter', select([['', '(none)']].concat(numCols().map(function (c) { return [c.key, c.label]; })), MV.fkey, function (x) { MV.fkey = x; modelView(); })).id = 'hs-mv-fkey';
  ['fmin', 'fmax'].forEach(function (f) {
    const inp = el('input');
    inp.type = 'number';
    inp.step = 'any';
    inp.value = MV[f];
    inp.id = 'hs-mv-' + f;
    inp.addEventListener('change', function () { MV[f] = inp.value; modelView(); });
    control(ctl, f === 'fmin' ? '\u2265' : '\u2264', inp);
  });
  const labels = [];
  HEADS.forEach(function (h) { if (h.label && labels.indexOf(h.label) < 0) labels.push(h.label); });
  layerKindControl(ctl, 'hs-mv-layers', modelView);
  control(ctl, 'label', select([['', '(any)']].concat(labels.sort().map(function (l) { return [l, prettyKey(l)]; })), MV.flabel, function (x) { MV.flabel = x; modelView(); })).id = 'hs-mv-label';

  const grid = el('div', 'grid');
  grid.id = 'hs-grid';
  const show = col(MV.sort) || col(MV.fkey);
  const ccol = col(MV.colour);
  let lo = 0, hi = 1;
  if (ccol) {
    const vals = HEADS.map(ccol.get).filter(isNum);
    lo = Math.min.apply(null, vals.concat([0]));
    hi = Math.max.apply(null, vals.concat([lo + 1e-12]));
  }
  function tile(k) {
    const h = HEADS[k];
    const b = el('button', 'tile' + (k === SEL ? ' sel' : '') + (passes(k) ? '' : ' out') + (hasMap(k) ? '' : ' nomap'));
    b.type = 'button';
    b.dataset.k = String(k);
    b.dataset.head = h.id;
    b.title = 'head ' + h.id + ' (' + prettyKey(h.label) + ')' + (show ? ', ' + show.label + ' ' + fmt(show.get(h), 4) : '') + (hasMap(k) ? '' : '; thumbnail only');
    if (thumbs) b.appendChild(thumbCanvas(k));
    else {
      const c = el('span', 'cell');
      const x = ccol ? ccol.get(h) : null;
      c.style.background = isNum(x) ? colour((x - lo) / (hi - lo)) : '#ccc';
      b.appendChild(c);
    }
    if (MV.sort !== 'grid' || !thumbs) b.appendChild(el('span', null, MV.sort === 'grid' ? h.id : h.id + ' ' + fmt(show ? show.get(h) : null, 3)));
    return b;
  }
  if (MV.sort === 'grid') {
    lhGrid(grid, 72, tile);
  } else {
    grid.style.gridTemplateColumns = 'repeat(auto-fill, minmax(72px, 1fr))';
    sortedBy(col(MV.sort), MV.dir).forEach(function (k) { if (passes(k)) grid.appendChild(tile(k)); });
  }
  grid.addEventListener('click', function (e) { const t = e.target.closest('.tile'); if (t) openHead(+t.dataset.k, 'head'); });
  grid.addEventListener('keydown', function (e) {
    const t = e.target.closest('.tile');
    if (!t) return;
    const tiles = Array.prototype.slice.call(grid.querySelectorAll('.tile'));
    const i = tiles.indexOf(t), perRow = Math.max(1, Math.round(grid.clientWidth / Math.max(1, t.offsetWidth + 4)));
    let to = -1;
    if (e.key === 'ArrowRight') to = i + 1;
    else if (e.key === 'ArrowLeft') to = i - 1;
    else if (e.key === 'ArrowDown') to = i + perRow;
    else if (e.key === 'ArrowUp') to = i - perRow;
    if (to >= 0 && to < tiles.length) { e.preventDefault(); tiles[to].focus(); }
  });
  box.appendChild(grid);
  if (ccol && !thumbs) {
    const cb = el('div', 'cbar');
    cb.appendChild(el('span', null, fmt(lo, 3)));
    const g = el('i');
    g.style.background = viridisGradient();
    cb.appendChild(g);
    cb.appendChild(el('span', null, fmt(hi, 3) + ' (' + ccol.label + ')'));
    box.appendChild(cb);
  }
}

/* ---- map view: one head's full map with labels and a value readout ------------------- */
function mapView() {
  const v = $('view-map');
  if (!mapsView(v)) return;
  if (!(MAPV.k >= 0 && hasMap(MAPV.k))) MAPV.k = SEL >= 0 && hasMap(SEL) ? SEL : +Object.keys(REC.map)[0];
  const k = MAPV.k, h = HEADS[k];
  const words = INFO.words > 0 && !!REC.wmap[k];
  if (!words) MAPV.words = false;
  const map = MAPV.words ? decoded('wmap', k) : getMap(k);
  const labels = MAPV.words ? WORDS.labels : TOKENS.map(function (t, i) { return tok(i); });
  const box = el('div', 'panel');
  v.appendChild(box);
  box.appendChild(el('h2', null, 'Map view: head ' + h.id));
  const ctl = el('div', 'controls');
  box.appendChild(ctl);
  const heads = HEADS.map(function (x, i) { return i; }).filter(hasMap).map(function (i) { return [String(i), HEADS[i].id + ' ' + prettyKey(HEADS[i].label)]; });
  control(ctl, 'head', select(heads, String(k), function (x) { choose(+x); })).id = 'hs-map-head';
  if (words) control(ctl, 'words', checkbox(MAPV.words, function (x) { MAPV.words = x; mapView(); })).id = 'hs-map-words';
  else if (INFO.words > 0) ctl.appendChild(el('span', 'kv', 'no word-level map for this head'));
  const zoom = [['0', 'fit'], ['4', '4 px'], ['8', '8 px'], ['12', '12 px'], ['16', '16 px'], ['22', '22 px']];
  control(ctl, 'cell', select(zoom, String(MAPV.cell), function (x) { MAPV.cell = +x; mapView(); })).id = 'hs-map-cell';
  control(ctl, 'stretch colours', checkbox(MAPV.stretch, function (x) { MAPV.stretch = x; mapView(); }));
  const ro = el('div', 'readout', 'hover a cell (or focus the map and use the arrow keys) to read its weight');
  ro.id = 'hs-readout';
  box.appendChild(ro);
  if (!map) { box.appendChild(el('p', 'note', 'The map of this head could not be read from the page.')); return; }
  const n = map.n, vals = map.v;
  const cell = MAPV.cell > 0 ? MAPV.cell : Math.max(1, Math.min(22, Math.floor(640 / n)));
  const font = Math.min(12, Math.max(7, cell)) + 'px ui-monospace, Menlo, Consolas, monospace';
  const wrap = el('div', 'heat'), scroll = el('div', 'heatscroll');
  const cv = el('canvas');
  cv.id = 'hs-heatmap';
  cv.tabIndex = 0;
  cv.setAttribute('aria-label', 'attention map of head ' + h.id + '; arrow keys move the readout');
  const ctx0 = cv.getContext('2d');
  ctx0.font = font;
  let lw = 0;
  const showLabels = cell >= 7;
  if (showLabels) for (let i = 0; i < n; i++) lw = Math.max(lw, ctx0.measureText(labels[i]).width);
  lw = showLabels ? Math.ceil(lw) + 8 : 0;
  const W = lw + n * cell + 1, H = lw + n * cell + 1;
  const ctx = sizeCanvas(cv, W, H);
  cv.dataset.cell = String(cell);
  cv.dataset.offset = String(lw);
  cv.dataset.level = MAPV.words ? 'words' : 'tokens';
  ctx.fillStyle = '#ffffff';
  ctx.fillRect(0, 0, W, H);
  const vmax = MAPV.stretch && map.max > 0 ? map.max : 1;
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < n; j++) {
      ctx.fillStyle = colour(vals[i * n + j] / vmax);
      ctx.fillRect(lw + j * cell, lw + i * cell, cell, cell);
    }
  }
  if (showLabels) {
    ctx.font = font;
    ctx.fillStyle = '#1d2330';
    ctx.textBaseline = 'middle';
    ctx.textAlign = 'right';
    for (let i = 0; i < n; i++) ctx.fillText(labels[i], lw - 4, lw + i * cell + cell / 2);
    ctx.save();
    ctx.rotate(-Math.PI / 2);
    ctx.textAlign = 'left';
    for (let j = 0; j < n; j++) ctx.fillText(labels[j], -lw + 4, lw + j * cell + cell / 2);
    ctx.restore();
  }
  const tip = el('div', 'tip');
  tip.hidden = true;
  function readout(i, j) {
    const x = vals[i * n + j];
    const what = MAPV.words ? 'word' : 'token';
    ro.textContent = 'query ' + what + ' ' + i + ' ' + labels[i] + '  \u2192  key ' + what + ' ' + j + ' ' + labels[j] + '  weight ' + (x !== x ? 'NaN' : fmt(x, 3));
    ro.dataset.i = String(i);
    ro.dataset.j = String(j);
    ro.dataset.w = String(x);
    return ro.textContent;
  }
  cv.addEventListener('mousemove', function (e) {
    const r = cv.getBoundingClientRect();
    const j = Math.floor((e.clientX - r.left - lw) / cell), i = Math.floor((e.clientY - r.top - lw) / cell);
    if (i < 0 || j < 0 || i >= n || j >= n) { tip.hidden = true; return; }
    MAPV.cursor = [i, j];
    tip.textContent = readout(i, j).replace('  \u2192  ', '\n').replace('  weight', '\nweight');
    tip.hidden = false;
    tip.style.left = (e.clientX + 12) + 'px';
    tip.style.top = (e.clientY + 12) + 'px';
  });
  cv.addEventListener('mouseleave', function () { tip.hidden = true; });
  cv.addEventListener('keydown', function (e) {
    const c = MAPV.cursor || [0, 0];
    let i = c[0], j = c[1];
    if (e.key === 'ArrowDown') i++;
    else if (e.key === 'ArrowUp') i--;
    else if (e.key === 'ArrowRight') j++;
    else if (e.key === 'ArrowLeft') j--;
    else return;
    e.preventDefault();
    i = Math.max(0, Math.min(n - 1, i));
    j = Math.max(0, Math.min(n - 1, j));
    MAPV.cursor = [i, j];
    readout(i, j);
  });
  wrap.appendChild(cv);
  wrap.appendChild(tip);
  scroll.appendChild(wrap);
  box.appendChild(scroll);
  const cb = el('div', 'cbar');
  cb.appendChild(el('span', null, '0'));
  const g = el('i');
  g.style.background = viridisGradient();
  cb.appendChild(g);
  cb.appendChild(el('span', null, fmt(vmax, 3) + '  (rows: query, columns: key' + (MAPV.words ? '; words: keys summed, queries averaged' : '') + ')'));
  box.appendChild(cb);
}

/* ---- corpus view: per-head means with CI bars and the per-text list ------------------ */
function corpusView() {
  const v = $('view-corpus');
  v.replaceChildren();
  if (!CORPUS) return;
  const sums = COLS.filter(function (c) { return c.summary; });
  if (!CV.key) CV.key = (sums[0] || {}).key || '';
  const c = col(CV.key);
  const box = el('div', 'panel');
  v.appendChild(box);
  box.appendChild(el('h2', null, 'Corpus: per-head means'));
  const iv = CORPUS.interval || {};
  box.appendChild(el('p', 'hint', 'Mean over ' + CORPUS.n_texts + ' texts, with its ' + (isNum(iv.level) ? Math.round(iv.level * 100) + '% ' : '') + 'confidence interval (' + (iv.method || '') + '); heads ordered by the mean. Click a head to open it.'));
  const ctl = el('div', 'controls');
  box.appendChild(ctl);
  control(ctl, 'quantity', select(sums.map(function (x) { return [x.key, x.label]; }), CV.key, function (x) { CV.key = x; corpusView(); })).id = 'hs-corpus-key';
  if (c) {
    const ks = sortedBy(c, -1);
    let lo = 0, hi = 0;
    ks.forEach(function (k) {
      const s = HEADS[k][c.key];
      if (!s) return;
      [s.mean, s.ci_low, s.ci_high].filter(isNum).forEach(function (x) { lo = Math.min(lo, x); hi = Math.max(hi, x); });
    });
    if (hi - lo < 1e-12) hi = lo + 1;
    const X = function (x) { return (100 * (x - lo) / (hi - lo)).toFixed(2) + '%'; };
    const chart = el('div', 'ci');
    chart.id = 'hs-ci';
    ['head', 'label', c.label, 'mean [95% CI]'].forEach(function (t) { chart.appendChild(el('span', 'kv', t)); });
    ks.forEach(function (k) {
      const h = HEADS[k], s = h[c.key] || {};
      chart.appendChild(chip(k));
      chart.appendChild(el('span', labelClass(h.label), prettyKey(h.label)));
      const tr = el('div', 'track');
      tr.dataset.headIndex = String(k);
      tr.dataset.head = h.id;
      const z = el('span', 'z');
      z.style.left = X(0);
      tr.appendChild(z);
      if (isNum(s.mean)) {
        const m = el('span', 'm');
        m.style.left = X(Math.min(0, s.mean));
        m.style.width = 'calc(' + X(Math.max(0, s.mean)) + ' - ' + X(Math.min(0, s.mean)) + ')';
        tr.appendChild(m);
      }
      if (isNum(s.ci_low) && isNum(s.ci_high)) {
        const w = el('span', 'w');
        w.style.left = X(s.ci_low);
        w.style.width = 'calc(' + X(s.ci_high) + ' - ' + X(s.ci_low) + ')';
        tr.appendChild(w);
      }
      tr.title = h.id + ': mean ' + fmt(s.mean) + (isNum(s.ci_low) ? ', CI [' + fmt(s.ci_low) + ', ' + fmt(s.ci_high) + ']' : '') + ', n = ' + s.n;
      chart.appendChild(tr);
      chart.appendChild(el('span', 'num', fmt(s.mean, 3) + (isNum(s.ci_low) ? ' [' + fmt(s.ci_low, 3) + ', ' + fmt(s.ci_high, 3) + ']' : '')));
    });
    box.appendChild(chart);
  }
  textList(v);
}
/* the per-text list: one row per text of texts.jsonl; a click shows that text's heads */
function textList(v) {
  const box = el('div', 'panel');
  box.style.marginTop = '12px';
  v.appendChild(box);
  box.appendChild(el('h2', null, 'Texts'));
  const ti = INFO.texts || {};
  if (!TEXTS.length) {
    box.appendChild(el('p', 'note', 'texts.jsonl is not embedded in this page.'));
    return;
  }
  const qkey = CV.key.split('.')[0];
  const sel = SEL >= 0 ? SEL : 0;
  const total = isNum(CORPUS.n_texts) ? CORPUS.n_texts : ti.total;
  box.appendChild(el('p', 'hint', TEXTS.length + ' texts' + (total > TEXTS.length ? ' (the first ' + TEXTS.length + ' of ' + total + '; the rest are in texts.jsonl)' : '') + '. The last column is ' + prettyKey(qkey) + ' of head ' + HEADS[sel].id + '. Click a text (or press Enter) to see every head on it.'));
  const scroll = el('div', 'scroll');
  scroll.style.maxHeight = '40vh';
  const t = el('table', 'list');
  t.id = 'hs-texts-list';
  const hr = el('tr');
  ['text', 'line', 'tokens', 'loss', prettyKey(qkey) + ' ' + HEADS[sel].id].forEach(function (x) { hr.appendChild(el('th', null, x)); });
  t.appendChild(el('thead')).appendChild(hr);
  const tb = el('tbody');
  TEXTS.forEach(function (x, i) {
    const r = el('tr', i === CV.text ? 'sel' : '');
    r.tabIndex = 0;
    r.dataset.t = String(i);
    const per = x.heads && Array.isArray(x.heads[qkey]) ? x.heads[qkey][sel] : null;
    [x.index, x.line, x.n_tokens, fmt(x.loss), fmt(per)].forEach(function (y) { r.appendChild(el('td', null, y)); });
    tb.appendChild(r);
  });
  t.appendChild(tb);
  function openText(i) { CV.text = i; corpusView(); const r = $('hs-text-panel'); if (r) r.scrollIntoView({ block: 'nearest' }); }
  tb.addEventListener('click', function (e) { const r = e.target.closest('tr'); if (r) openText(+r.dataset.t); });
  tb.addEventListener('keydown', function (e) { const r = e.target.closest('tr'); if (r && (e.key === 'Enter' || e.key === ' ')) { e.preventDefault(); openText(+r.dataset.t); } });
  scroll.appendChild(t);
  box.appendChild(scroll);
  if (CV.text >= 0 && TEXTS[CV.text]) box.appendChild(textPanel(TEXTS[CV.text], qkey));
}
function textPanel(x, qkey) {
  const p = el('div', 'card');
  p.id = 'hs-text-panel';
  p.style.marginTop = '10px';
  p.appendChild(el('h3', null, 'Text ' + x.index + ' (line ' + x.line + ', ' + x.n_tokens + ' tokens' + (x.truncated ? ', truncated' : '') + ', loss ' + fmt(x.loss) + ')'));
  const vals = x.heads && Array.isArray(x.heads[qkey]) ? x.heads[qkey] : [];
  p.appendChild(el('p', 'hint', prettyKey(qkey) + ' of every head on this text, layers down, heads across (colour: low to high on this text). Its maps are not in a corpus page; analyze the text alone for its head and map views.'));
  const nums = vals.filter(isNum);
  const lo = Math.min.apply(null, nums.concat([0])), hi = Math.max.apply(null, nums.concat([lo + 1e-12]));
  const grid = el('div', 'grid');
  lhGrid(grid, 64, function (k) {
    const b = el('button', 'tile');
    b.type = 'button';
    b.dataset.headIndex = String(k);
    const c = el('span', 'cell');
    c.style.background = isNum(vals[k]) ? colour((vals[k] - lo) / (hi - lo)) : '#ccc';
    b.appendChild(c);
    b.appendChild(el('span', null, fmt(vals[k], 3)));
    b.title = HEADS[k].id + ': ' + fmt(vals[k]);
    return b;
  });
  p.appendChild(grid);
  if (Array.isArray(x.ids)) p.appendChild(el('p', 'kv', 'ids: ' + x.ids.join(' ')));
  return p;
}
