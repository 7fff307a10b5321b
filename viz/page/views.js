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

