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

