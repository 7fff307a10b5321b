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
