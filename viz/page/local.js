/* headscope report page: local (sliding-window) layers (after cards.js, before views.js;
 * docs/html.md, Local layers). report.json's model.layers says per layer whether its queries
 * see every earlier key (global) or only the last W, themselves included (local, window W).
 * The page marks the local layers (the header's layers line, the head chips and the heads
 * table's head cells underlined, the head panel's attention line, the model view's layer
 * labels "L3 w4096") and, when the analysed heads lie in both kinds of layer, filters the
 * head types and clusters cards and the model view to the global or the local layers.
 * A report without local layers shows none of it. */
const LK = { kind: 'all' };
function layerOf(l) {
  const ls = R.model && Array.isArray(R.model.layers) ? R.model.layers : null;
  const y = ls ? ls[l] : null;
  return y && typeof y === 'object' ? y : null;
}
function isLocal(l) { const y = layerOf(l); return !!y && y.attention === 'local'; }
function anyLocal() { return HEADS.some(function (h) { return isLocal(h.layer); }); }
/* the analysed heads lie in local and in global layers: the filter is offered */
function bothKinds() { return anyLocal() && HEADS.some(function (h) { return !isLocal(h.layer); }); }
/* "w4096" for a local layer (or "local" without a window), '' for a global one */
function layerTag(l) {
  if (!isLocal(l)) return '';
  const w = layerOf(l).window;
  return isNum(w) ? 'w' + w : 'local';
}
function layerLabel(l) { const t = anyLocal() ? layerTag(l) : ''; return 'L' + l + (t ? ' ' + t : ''); }
/* the head panel's line: null on a page without local layers */
function layerAttention(l) {
  if (!anyLocal()) return null;
  if (!isLocal(l)) return 'global';
  const w = layerOf(l).window;
  return isNum(w) ? 'local, window ' + w : 'local';
}
function layerShown(k) {
  if (LK.kind === 'all' || !bothKinds()) return true;
  return (isLocal(HEADS[k].layer) ? 'local' : 'global') === LK.kind;
}
/* the header's line: "local 0, 1 (window 48); global 2", every layer of the model */
function layersLine() {
  const ls = R.model && Array.isArray(R.model.layers) ? R.model.layers : [];
  const byWin = {}, wins = [], glob = [];
  ls.forEach(function (y, l) {
    if (!isLocal(l)) { glob.push(l); return; }
    const w = isNum(y.window) ? String(y.window) : '';
    if (!(w in byWin)) { byWin[w] = []; wins.push(w); }
    byWin[w].push(l);
  });
  if (!wins.length) return '';
  const parts = wins.map(function (w) { return byWin[w].join(', ') + (w ? ' (window ' + w + ')' : ''); });
  return 'local ' + parts.join(', ') + (glob.length ? '; global ' + glob.join(', ') : '');
}
/* marks head k's chip or table cell e as a local layer's */
function markLocal(e, k) {
  if (!isLocal(HEADS[k].layer)) return;
  e.classList.add('loc');
  e.title = (e.title ? e.title + ' ' : '') + '(' + layerAttention(HEADS[k].layer) + ')';
}
/* the all / global / local control; fn runs after a change. null when not offered */
function layerKindControl(parent, id, fn) {
  if (!bothKinds()) return null;
  const s = control(parent, 'layers', select([['all', 'all'], ['global', 'global only'], ['local', 'local only']], LK.kind,
    function (x) { LK.kind = x; $('hs-summary').replaceChildren(); summary(); fn(); }));
  s.id = id;
  return s;
}
/* the overview's filter, above the summary cards; the cards are drawn again on a change */
function summaryLayerFilter(box) {
  const bar = el('div', 'controls layerkind');
  if (!layerKindControl(bar, 'hs-layer-kind', function () { /* the cards are drawn again */ })) return;
  bar.appendChild(el('span', 'hint', 'which heads the head types and clusters cards list; underlined heads are in local layers'));
  box.appendChild(bar);
}
