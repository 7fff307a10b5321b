/* headscope report page: the overview's summary cards (after core.js, before views.js;
 * docs/html.md, Overview). Each card reads one section of the report: ablation importance,
 * head types, clusters, pruning, layer diversity, key/value groups and the probe's ablation. */

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

/* a card listing heads ks with their delta (delta(k); default the text's ablation_delta) */
function deltaCard(parent, title, hint, ks, maxAbs, delta) {
  const c = card(parent, title);
  c.appendChild(el('p', 'hint', hint));
  c.appendChild(deltaTable(ks, maxAbs, delta));
  return c;
}
function deltaTable(ks, maxAbs, delta) {
  const t = el('table');
  ks.forEach(function (k) {
    const h = HEADS[k], tr = el('tr'), v = delta ? delta(k) : h.ablation_delta;
    let td = el('td');
    td.appendChild(chip(k));
    tr.appendChild(td);
    tr.appendChild(el('td', null, fmtSigned(v)));
    td = el('td');
    td.appendChild(deltaBar(v, maxAbs));
    tr.appendChild(td);
    td = el('td');
    td.appendChild(el('span', labelClass(h.label), prettyKey(h.label)));
    tr.appendChild(td);
    t.appendChild(tr);
  });
  return t;
}

function summary() {
  const box = $('hs-summary');
  summaryLayerFilter(box);
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
    probeCard(box);
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
  c.id = 'hs-types';
  const thr = R.options && isNum(R.options.label_threshold) ? R.options.label_threshold : null;
  const multi = HEADS.some(function (h) { return Array.isArray(h.labels); });
  c.appendChild(el('p', 'hint', multi ? 'every head type whose score on the attention not parked on sinks reaches its threshold (options.label_thresholds); sinks: attention mass on them'
    : 'a head is labelled with its strongest detector' + (thr !== null ? ' scoring at least ' + fmt(thr, 2) : '')));
  const types = {};
  HEADS.forEach(function (h, k) {
    if (!layerShown(k)) return;
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
  c.id = 'hs-clusters';
  const cl = (CORPUS ? CORPUS.clusters : R.clusters) || {};
  const groups = {};
  HEADS.forEach(function (h, k) { if (isNum(h.cluster) && layerShown(k)) (groups[h.cluster] = groups[h.cluster] || []).push(k); });
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
    const how = el('p', 'hint', pruneMethod(pr) + (isNum(pr.stop) ? '; dashed: stop threshold' : ''));
    how.id = 'hs-prune-method';
    c.appendChild(how);
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

/* how the pruning curve chose its heads (pruning.method; a schema 1 report: greedy) */
function pruneMethod(pr) {
  if (pr.method === 'gradient') {
    const r = isNum(pr.round_heads) ? pr.round_heads : null;
    return 'Michel et al.\u2019s rounds: each removes the ' + (r !== null ? r + ' ' : '') + 'remaining head' + (r === 1 ? '' : 's') +
      ' of smallest gradient importance (normalised per layer)';
  }
  if (pr.method === 'greedy' || pr.method === undefined) {
    return 'greedy removal, one head a step: the head whose removal gives the lowest loss' + (isNum(pr.beam) ? ' among the ' + pr.beam + ' least harmful so far' : '');
  }
  return 'method: ' + pr.method;
}

/* grouped-query models: how alike the heads sharing a key/value head are (kv_groups.similarity) */
function kvCard(box) {
  const kv = R.kv_groups, ks = kv && kv.similarity;
  if (!ks || !Array.isArray(ks.within)) return;
  const js = ks.method === 'jensen_shannon';
  const c = card(box, 'Key/value groups');
  c.appendChild(el('p', 'hint', kv.n_kv_head + ' KV head' + (kv.n_kv_head > 1 ? 's' : '') + ' per layer, each read by ' + kv.heads_per_group + ' query heads; mean ' + (js ? 'Jensen\u2013Shannon divergence (smaller: more alike)' : 'Pearson r (larger: more alike)') + ' of heads of one layer that share a KV head (within) and that do not (across); p: share of ' + ks.permutations + ' random groupings at least as alike; Holm p: p adjusted for testing every layer (Holm 1979)'));
  const t = el('table'), hd = el('tr');
  const holm = Array.isArray(ks.p_value_holm) ? ks.p_value_holm : null; /* older reports: none */
  ['', 'within', 'across', 'p'].concat(holm ? ['Holm p'] : []).forEach(function (x) { hd.appendChild(el('th', 'kv', x)); });
  t.appendChild(hd);
  function row(name, w, a, p, ph) {
    const tr = el('tr');
    tr.appendChild(el('td', 'kv', name));
    [fmt(w, 3), fmt(a, 3), fmt(p, 3)].concat(holm ? [fmt(ph, 3)] : []).forEach(function (x) { tr.appendChild(el('td', null, x)); });
    t.appendChild(tr);
  }
  ks.within.forEach(function (w, l) { if (isNum(w)) row('layer ' + l, w, ks.across[l], ks.p_value[l], holm && holm[l]); });
  row('all layers', ks.within_mean, ks.across_mean, null, null);
  c.appendChild(t);
  const cl = ks.clusters || {};
  c.appendChild(el('p', 'hint', 'other layers: ' + fmt(ks.other_layers_mean, 3) + '; clusters against the KV groups: adjusted Rand ' + fmt(cl.adjusted_rand, 3) + ', same cluster within ' + fmt(cl.same_cluster_within, 2) + ', across ' + fmt(cl.same_cluster_across, 2)));
}


/* the seeded induction probe's ablation (probe.ablation): each head's cost on the probe's
   second half, where every token repeats one of the first half */
const PROBE_KINDS = { mean: 'replaced by its mean output over the probe', zero: 'zeroed', resample: 'given its output on the shuffled probe' };
function probeCard(box) {
  const pr = R.probe, ab = pr && pr.ablation;
  if (!ab || typeof ab !== 'object') return;
  const c = card(box, 'Probe ablation');
  c.id = 'hs-probe-ablation';
  if (!ab.available) {
    c.appendChild(el('p', 'note', 'Not computed' + (ab.reason ? ': ' + ab.reason : '') + '.'));
    return;
  }
  const rows = Array.isArray(ab.loss_rows) ? ' (rows ' + ab.loss_rows[0] + '\u2013' + (ab.loss_rows[1] - 1) + ')' : '';
  c.appendChild(el('p', 'hint', 'next-token loss on the seeded probe\u2019s second half' + rows +
    ', where every token repeats one of the first ' + (isNum(pr.half_len) ? pr.half_len + ' ' : '') + 'random tokens, with one head ' +
    (PROBE_KINDS[ab.kind] || ab.kind) + (ab.kind === 'resample' && isNum(ab.resample_seed) ? ' (seed ' + ab.resample_seed + ')' : '') +
    ', minus the loss with every head on: induction heads and the heads that feed them cost the most'));
  const base = el('p', 'kv', 'every head on: loss ' + fmt(ab.loss) + ' on the second half, ' + fmt(ab.first_half_loss) +
    ' on the first (nothing repeats there)');
  base.id = 'hs-probe-loss';
  c.appendChild(base);
  const pd = probeDeltas() || {}, d = {};
  HEADS.forEach(function (h, k) { if (isNum(pd[h.layer + '.' + h.head])) d[k] = pd[h.layer + '.' + h.head]; });
  const ks = Object.keys(d).map(Number), get = function (k) { return d[k]; };
  const maxAbs = Math.max.apply(null, ks.map(function (k) { return Math.abs(d[k]); })) || 1;
  const pos = ks.filter(function (k) { return d[k] > 0; }).sort(function (a, b) { return d[b] - d[a] || a - b; });
  const neg = ks.filter(function (k) { return d[k] < 0; }).sort(function (a, b) { return d[a] - d[b] || a - b; });
  if (pos.length) {
    const t = deltaTable(pos.slice(0, 8), maxAbs, get);
    t.id = 'hs-probe-top';
    c.appendChild(t);
  } else {
    c.appendChild(el('p', 'note', 'Ablating any single head does not raise the probe\u2019s loss.'));
  }
  if (neg.length) {
    c.appendChild(el('p', 'hint', 'heads whose ablation lowers the probe\u2019s loss'));
    const t = deltaTable(neg.slice(0, 4), maxAbs, get);
    t.id = 'hs-probe-neg';
    c.appendChild(t);
  }
}
