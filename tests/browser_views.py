"""The browser tests' checks of each view of a single-text page (the overview, the head
view, the model view's cards and tiles, the map view), against the report and the maps
headscope attn wrote; run by tests/browser_test.py."""
import re
import time

import numpy as np

from browser_util import QTOL, by_css, check, hover, keys, quant, shot, view


# ---- the overview ----------------------------------------------------------------------------
def column_values(drv, key):
    return drv.execute_script("""
const ths = Array.prototype.slice.call(document.querySelectorAll('#hs-heads thead th'));
const idx = ths.findIndex(th => th.dataset.key === arguments[0]);
return Array.prototype.map.call(document.querySelectorAll('#hs-heads tbody tr'), r => {
  const t = r.cells[idx].title; return t ? parseFloat(t) : null; });""", key)


def prev_score(h):
    """A head's previous-token score: report/3 (text_scores.no_sinks) or older (scores)."""
    v = h.get("text_scores", {}).get("no_sinks", {}).get("previous_token") if "scores" not in h \
        else h["scores"].get("previous_token")
    return v or 0


def sorted_ok(vals, descending):
    nums = [v for v in vals if v is not None]
    first_null = next((i for i, v in enumerate(vals) if v is None), len(vals))
    return all(v is None for v in vals[first_null:]) and nums == sorted(nums, reverse=descending)


def check_overview(drv, name, rep, shots):
    heads = rep["heads"]
    rows = by_css(drv, "#hs-heads tbody tr")
    check(len(rows) == len(heads), "%s: %d table rows, want %d" % (name, len(rows), len(heads)))
    check(len(by_css(drv, "#hs-tokens .tok")) == rep["input"]["n_tokens"], "%s: token chips" % name)
    # every numeric per-head field of the report is a column (a new metric needs no page edit)
    keys_ = drv.execute_script("return Array.prototype.map.call(document.querySelectorAll('#hs-heads thead th'), th => th.dataset.key);")
    want = set()

    def leaves(key, v):  # numbers at any depth of the per-head objects (lists are not columns)
        if isinstance(v, dict):
            for s, x in v.items():
                leaves(key + "." + s, x)
        elif v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)):
            want.add(key)
    for h in heads:
        for k, v in h.items():
            if k not in ("id", "layer", "head", "label", "labels"):
                leaves(k, v)
    check(want <= set(keys_), "%s: report fields without a column: %s" % (name, sorted(want - set(keys_))))
    # sorting
    th = by_css(drv, "#hs-heads th[data-key='entropy_nats']")[0]
    th.click()
    check(sorted_ok(column_values(drv, "entropy_nats"), True), "%s: entropy not descending after a click" % name)
    th.click()
    check(sorted_ok(column_values(drv, "entropy_nats"), False), "%s: entropy not ascending after two clicks" % name)
    by_css(drv, "#hs-heads th[data-key='id']")[0].click()
    ids = [r.get_attribute("data-head") for r in by_css(drv, "#hs-heads tbody tr")]
    check(ids == [h["id"] for h in heads], "%s: head column not in layer.head order" % name)
    # negative ablation deltas read negative, in the table and the summary
    deltas = {h["id"]: h["ablation_delta"] for h in heads if h.get("ablation_delta") is not None}
    texts = drv.execute_script("""
const ths = Array.prototype.slice.call(document.querySelectorAll('#hs-heads thead th'));
const idx = ths.findIndex(th => th.dataset.key === 'ablation_delta');
const o = {}; document.querySelectorAll('#hs-heads tbody tr').forEach(r => { o[r.dataset.head] = r.cells[idx].textContent; }); return o;""")
    wrong = [i for i, d in deltas.items() if (d < -5e-5) != texts[i].startswith("-")]
    check(not wrong, "%s: ablation deltas with the wrong sign shown: %s" % (name, wrong[:3]))
    imp = [c.text for c in by_css(drv, "#hs-important .chip")]
    check(all(deltas[i] > 0 for i in imp), "%s: 'most important' lists a head with delta <= 0: %s" % (name, imp))
    neg = [i for i, d in deltas.items() if d < 0]
    if neg:
        harm = [c.text for c in by_css(drv, "#hs-harmful .chip")]
        check(harm and all(deltas[i] < 0 for i in harm), "%s: negative deltas not listed apart: %s" % (name, harm))
    # sticky head and label columns: still in place after scrolling the table sideways
    pos = drv.execute_script("""
const s = document.getElementById('hs-table-scroll'), c = document.querySelector('#hs-heads tbody tr td.stick1');
s.scrollLeft = 0; const a = c.getBoundingClientRect().left; s.scrollLeft = 400;
const b = c.getBoundingClientRect().left, w = s.scrollWidth > s.clientWidth; s.scrollLeft = 0; return [a, b, w];""")
    check(abs(pos[0] - pos[1]) < 1, "%s: the label column moved when the table scrolled (%s)" % (name, pos))
    # keyboard: Enter on a row opens it, arrow down moves to the next
    r0 = by_css(drv, "#hs-heads tbody tr")[0]
    r0.click()
    from selenium.webdriver.common.keys import Keys
    keys(drv, r0, Keys.ARROW_DOWN)
    check(drv.find_element("id", "hs-selected").get_attribute("data-head") == heads[1]["id"],
          "%s: arrow down in the table did not open the next head" % name)
    # pictures the report lists are shown
    for f in rep.get("files", []):
        if f.endswith(".png") and "/" not in f:
            imgs = [i for i in by_css(drv, "#hs-pictures img") if i.get_attribute("src").endswith("/" + f)]
            if imgs:
                drv.execute_script("arguments[0].scrollIntoView();", imgs[0])
                time.sleep(0.2)
            check(imgs and drv.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0;", imgs[0]),
                  "%s: %s listed in files but not shown" % (name, f))
    drv.execute_script("window.scrollTo(0, 0);")
    shot(drv, shots, name + "-overview", full=True)


# ---- the head view ---------------------------------------------------------------------------
def drawn(drv):
    return drv.execute_script("return window.headscope.drawn().map(d => [d.k, d.q, d.key, d.w, d.alpha, d.colour]);")


def set_min(drv, x):
    drv.execute_script("const m = document.getElementById('hs-hv-min'); m.value = arguments[0]; m.dispatchEvent(new Event('change'));", str(x))


def check_head_view(drv, name, rep, attn, shots):
    from selenium.webdriver.common.keys import Keys
    heads = rep["heads"]
    n = rep["input"]["n_tokens"]
    sinks = set(rep["input"].get("sinks", []))
    # the strongest previous-token head, opened from the table
    target = max(range(len(heads)), key=lambda k: prev_score(heads[k]))
    h = heads[target]
    ref = attn[h["layer"], h["head"]].astype(np.float64)
    view(drv, "overview")
    row = by_css(drv, "#hs-heads tbody tr[data-k='%d']" % target)[0]
    drv.execute_script("arguments[0].scrollIntoView({block: 'center'});", row)
    row.click()
    v = view(drv, "head")
    on = [b.get_attribute("data-k") for b in by_css(drv, "#hs-hv-heads .headtog[aria-pressed='true']")]
    check(on == [str(target)], "%s: head view shows heads %s, want the selected %d" % (name, on, target))
    set_min(drv, 0)
    drv.execute_script("const d = document.getElementById('hs-hv-dim'); if (d.checked) d.click();")
    # hover query token i: one line per key it attends to, weights as in the float32 maps
    i = n // 2 + 1
    q = by_css(drv, "#hs-hv .col.q .lt")
    check(len(q) == n and len(by_css(drv, "#hs-hv .col.k .lt")) == n, "%s: head view has %d tokens, want %d" % (name, len(q), n))
    hover(drv, q[i])
    lines = drawn(drv)
    want = {j for j in range(n) if quant(ref[i, j]) > 0}
    got = {d[2] for d in lines}
    check(all(d[0] == target and d[1] == i for d in lines), "%s: hovering query %d drew lines of other rows" % (name, i))
    check(got == want, "%s: head %s query %d: lines to %s, the maps say %s" % (name, h["id"], i, sorted(got)[:8], sorted(want)[:8]))
    bad = [(d[2], d[3], ref[i, d[2]]) for d in lines if abs(d[3] - ref[i, d[2]]) > QTOL]
    check(not bad, "%s: line weights differ from the maps: %s" % (name, bad[:3]))
    check(all(abs(d[4] - min(1, d[3])) < 1e-9 for d in lines), "%s: line opacity is not the weight" % name)
    # the strongest line is drawn in the head's colour on the canvas
    j = int(np.argmax(ref[i]))
    px = drv.execute_script("""
const cv = document.getElementById('hs-hv-canvas'), rh = +cv.dataset.rowH, W = parseFloat(cv.style.width), s = cv.width / W;
const t = 0.9, x = 2 + t * (W - 4), y = (1 - t) * (arguments[0] * rh + rh / 2) + t * (arguments[1] * rh + rh / 2);
const d = cv.getContext('2d').getImageData(Math.round(x * s), Math.round(y * s), 1, 1).data; return [d[0], d[1], d[2], d[3]];""", i, j)
    colour = lines[0][5] if lines else "#000000"
    rgb = [int(colour[k:k + 2], 16) for k in (1, 3, 5)]
    check(px[3] > 0 and ref[i, j] < 0.2 or all(abs(a - b) < 60 for a, b in zip(px[:3], rgb)),
          "%s: the line %d->%d is not drawn in the head's colour %s (pixel %s)" % (name, i, j, colour, px))
    # key tokens on the other side are tinted by the weight
    kt = by_css(drv, "#hs-hv .col.k .lt")[j]
    check(abs(float(kt.get_attribute("data-w")) - ref[i, j]) <= QTOL, "%s: key %d tint differs from the map" % (name, j))
    shot(drv, shots, name + "-head-view")
    # keyboard: arrow down moves the isolated row
    q[i].click()
    keys(drv, q[i], Keys.ARROW_DOWN)
    rows_ = {d[1] for d in drawn(drv)}
    check(rows_ <= {i + 1} and drv.switch_to.active_element.get_attribute("data-i") == str(i + 1),
          "%s: arrow down did not move the head view to query %d (rows %s)" % (name, i + 1, sorted(rows_)[:4]))
    keys(drv, drv.switch_to.active_element, Keys.ESCAPE)
    # every line of the head at min weight 0.05, with sinks dimmed
    set_min(drv, 0.05)
    drv.execute_script("const d = document.getElementById('hs-hv-dim'); if (!d.checked) d.click();")
    hover(drv, drv.find_element("id", "hs-hv-min"))
    drv.execute_script("document.getElementById('hs-hv').dispatchEvent(new MouseEvent('mouseleave'));")
    lines = drawn(drv)
    qr = quant(ref)
    want = int(((qr >= 0.05) & (qr > 0)).sum())
    check(len(lines) == want, "%s: %d lines at min weight 0.05, the maps have %d" % (name, len(lines), want))
    dim = [d for d in lines if d[2] in sinks]
    check(all(abs(d[4] - 0.15 * min(1, d[3])) < 1e-9 for d in dim) and all(abs(d[4] - min(1, d[3])) < 1e-9 for d in lines if d[2] not in sinks),
          "%s: sink lines not dimmed" % name)
    # several heads at once, one colour each
    drv.execute_script("Array.prototype.forEach.call(document.querySelectorAll('#hs-hv-heads .headtog'), b => { if (b.getAttribute('aria-pressed') !== 'true' && !b.disabled) b.click(); });")
    lines = drawn(drv)
    ks = {d[0] for d in lines}
    cols = {d[0]: d[5] for d in lines}
    layer_heads = [k for k, x in enumerate(heads) if x["layer"] == h["layer"]]
    check(ks == set(layer_heads) and len(set(cols.values())) == len(ks),
          "%s: all heads of layer %d: drew heads %s with colours %s" % (name, h["layer"], sorted(ks), cols))
    shot(drv, shots, name + "-head-view-all")
    # sentence filter for pairs
    types = rep["input"].get("type_ids", [])
    if any(t == 1 for t in types):
        drv.execute_script("const s = document.getElementById('hs-hv-seg'); s.value = 'AB'; s.dispatchEvent(new Event('change'));")
        lines = drawn(drv)
        check(lines and all(types[d[1]] == 0 and types[d[2]] == 1 for d in lines),
              "%s: the A -> B filter drew other lines" % name)
        drv.execute_script("const s = document.getElementById('hs-hv-seg'); s.value = 'all'; s.dispatchEvent(new Event('change'));")
    else:
        check(not by_css(drv, "#hs-hv-seg"), "%s: a sentence filter without a pair" % name)
    set_min(drv, 0.01)


# ---- the model view --------------------------------------------------------------------------
def check_kv_card(drv, name, rep):
    """The overview's Key/value groups card: present exactly for grouped-query reports, with
    each analysed layer's within and across means, p and Holm p as the report has them."""
    ks = (rep.get("kv_groups") or {}).get("similarity")
    cards = [c for c in by_css(drv, "#hs-summary .card") if c.text.startswith("Key/value groups")]
    check(len(cards) == (1 if ks else 0), "%s: %d Key/value groups cards" % (name, len(cards)))
    if ks and cards:
        heads = [th.text for th in cards[0].find_elements("css selector", "th")]
        check(heads[-1] == "Holm p", "%s: KV card columns %s, no Holm p" % (name, heads))
        rows = {tds[0].text: [td.text for td in tds[1:]]
                for tds in (r.find_elements("css selector", "td") for r in cards[0].find_elements("css selector", "tr")[1:])}
        for l, w in enumerate(ks["within"]):
            if w is not None:
                got = rows.get("layer %d" % l)
                want = ["%.3f" % w, "%.3f" % ks["across"][l] if ks["across"][l] is not None else "\u2014"]
                want += ["%.3f" % p if p is not None else "\u2014" for p in (ks["p_value"][l], ks["p_value_holm"][l])]
                check(got == want, "%s: card layer %d %s, report %s" % (name, l, got, want))


def fmt_signed(v):
    """The page's fmtSigned: 4 decimals (1 from 1000 up), no "-0", a "+" on a positive value."""
    s = ("%.1f" if abs(v) >= 1000 else "%.4f") % v
    if re.match(r"^-0[.0]*$", s):
        s = s[1:]
    return "+" + s if v > 0 and not re.match(r"^0[.0]*$", s) else s


def check_probe_card(drv, name, rep):
    """The overview's Probe ablation card and the table's probe column against the report's
    probe.ablation: absent without one (a corpus run), a note with the reason when it was not
    computed, else the base losses, the 8 heads of largest positive delta and the 4 most
    negative, in order, with their deltas, and one column value per head."""
    ab = (rep.get("probe") or {}).get("ablation")
    cards = by_css(drv, "#hs-probe-ablation")
    check(len(cards) == (1 if ab else 0), "%s: %d probe ablation cards, report has %s" % (name, len(cards), "one" if ab else "none"))
    col = drv.execute_script("""
const ths = Array.prototype.slice.call(document.querySelectorAll('#hs-heads thead th'));
const idx = ths.findIndex(th => th.dataset.key === 'probe.ablation_delta');
if (idx < 0) return null;
const o = {}; document.querySelectorAll('#hs-heads tbody tr').forEach(r => { o[r.dataset.head] = r.cells[idx].textContent; }); return o;""")
    if not ab or not cards:
        check(col is None, "%s: a probe ablation column without probe.ablation" % name)
        return
    text = cards[0].text
    if not ab["available"]:
        check("Not computed: " + ab["reason"] in text, "%s: probe card does not give the reason %r: %r" % (name, ab["reason"], text))
        check(col is None, "%s: a probe ablation column while probe.ablation is not available" % name)
        return
    loss = drv.find_element("id", "hs-probe-loss").text
    check("loss %.4f on the second half, %.4f on the first" % (ab["loss"], ab["first_half_loss"]) in loss,
          "%s: probe losses %r, report %.4f / %.4f" % (name, loss, ab["loss"], ab["first_half_loss"]))
    rows = ab["loss_rows"]
    check("rows %d\u2013%d" % (rows[0], rows[1] - 1) in text, "%s: probe card does not name rows %s" % (name, rows))
    delta = {"%d.%d" % (e["layer"], e["head"]): e["delta"] for e in ab["heads"]}
    order = {h["id"]: k for k, h in enumerate(rep["heads"])}
    pos = sorted((i for i in delta if delta[i] > 0), key=lambda i: (-delta[i], order[i]))[:8]
    neg = sorted((i for i in delta if delta[i] < 0), key=lambda i: (delta[i], order[i]))[:4]
    for sel, want in (("#hs-probe-top", pos), ("#hs-probe-neg", neg)):
        got = [[td.text for td in r.find_elements("css selector", "td")[:2]] for r in by_css(drv, sel + " tr")]
        check(got == [[i, fmt_signed(delta[i])] for i in want],
              "%s: %s lists %s, want %s" % (name, sel, got, [[i, fmt_signed(delta[i])] for i in want]))
    check(col == {i: fmt_signed(d) for i, d in delta.items()},
          "%s: probe ablation column %s, report %s" % (name, col, delta))


def check_model_view(drv, name, rep, shots):
    heads = rep["heads"]
    view(drv, "model")
    tiles = by_css(drv, "#hs-grid .tile")
    check(len(tiles) == len(heads), "%s: %d tiles, want %d" % (name, len(tiles), len(heads)))
    check(all(drv.execute_script("return arguments[0].querySelector('canvas').width > 0;", t) for t in tiles[:4]),
          "%s: tiles have no thumbnail" % name)
    shot(drv, shots, name + "-model-view")
    kv = rep.get("kv_groups")
    if kv:  # grouped-query: the KV groups named over the heads, a rule before each group
        groups = [e.text for e in by_css(drv, "#hs-grid .kvgroup")]
        want = ["KV%d" % g for g in range(kv["n_kv_head"])]
        check(groups == want, "%s: KV group names %s, want %s" % (name, groups, want))
        ruled = by_css(drv, "#hs-grid .tile.kvstart")
        n_layers = len({h["layer"] for h in heads})
        check(len(ruled) == n_layers * (kv["n_kv_head"] - 1),
              "%s: %d tiles start a KV group, want %d" % (name, len(ruled), n_layers * (kv["n_kv_head"] - 1)))
    # sort by entropy: tiles in that order
    drv.execute_script("const s = document.getElementById('hs-mv-sort'); s.value = 'entropy_nats'; s.dispatchEvent(new Event('change'));")
    got = [t.get_attribute("data-head") for t in by_css(drv, "#hs-grid .tile")]
    want = [h["id"] for h in sorted(heads, key=lambda h: (-h["entropy_nats"], heads.index(h)))]
    check(got == want, "%s: model view sorted by entropy: %s, want %s" % (name, got[:5], want[:5]))
    # filter: entropy >= the median keeps those heads only
    med = float(np.median([h["entropy_nats"] for h in heads]))
    drv.execute_script("""const f = document.getElementById('hs-mv-fkey'); f.value = 'entropy_nats'; f.dispatchEvent(new Event('change'));
const m = document.getElementById('hs-mv-fmin'); m.value = arguments[0]; m.dispatchEvent(new Event('change'));""", repr(med))
    got = {t.get_attribute("data-head") for t in by_css(drv, "#hs-grid .tile")}
    want = {h["id"] for h in heads if h["entropy_nats"] >= med}
    check(got == want, "%s: filter entropy >= %.4f kept %d heads, want %d" % (name, med, len(got), len(want)))
    drv.execute_script("""const f = document.getElementById('hs-mv-fkey'); f.value = ''; f.dispatchEvent(new Event('change'));
const s = document.getElementById('hs-mv-sort'); s.value = 'grid'; s.dispatchEvent(new Event('change'));""")
    # a click opens the head in the head view (head 0 chosen first, so that the head view's
    # layer is not already k's with every head on, as the head view's checks may leave it)
    k = len(heads) - 1
    drv.execute_script("window.headscope.choose(0);")
    t = by_css(drv, "#hs-grid .tile[data-k='%d']" % k)[0]
    drv.execute_script("arguments[0].scrollIntoView({block: 'center'});", t)
    t.click()
    ok = drv.find_element("id", "hs-selected").get_attribute("data-head") == heads[k]["id"]
    ok = ok and drv.find_element("id", "tab-head").get_attribute("aria-selected") == "true"
    on = [b.get_attribute("data-k") for b in by_css(drv, "#hs-hv-heads .headtog[aria-pressed='true']")]
    check(ok and on == [str(k)], "%s: clicking tile %s did not open it in the head view" % (name, heads[k]["id"]))


# ---- the map view ----------------------------------------------------------------------------
def readout(drv):
    ro = drv.find_element("id", "hs-readout")
    return int(ro.get_attribute("data-i") or -1), int(ro.get_attribute("data-j") or -1), float(ro.get_attribute("data-w") or "nan"), ro.text


def hover_cell(drv, i, j):
    """Moves the mouse over cell (i, j), scrolling the map's box so that it is in view."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.actions.action_builder import ActionBuilder
    where = """
const cv = document.getElementById('hs-heatmap'), sc = cv.closest('.heatscroll');
const off = +cv.dataset.offset, cell = +cv.dataset.cell;
const cx = off + arguments[1] * cell + cell / 2, cy = off + arguments[0] * cell + cell / 2;
"""
    drv.execute_script(where + """
sc.scrollTop = cy - sc.clientHeight / 2; sc.scrollLeft = cx - sc.clientWidth / 2;
const r = cv.getBoundingClientRect(); window.scrollBy(0, r.top + cy - window.innerHeight / 2);""", i, j)
    x, y = drv.execute_script(where + """
const r = cv.getBoundingClientRect(); return [Math.round(r.left + cx), Math.round(r.top + cy)];""", i, j)
    ab = ActionBuilder(drv)
    ab.pointer_action.move_to_location(x, y)
    ab.perform()


def check_map_view(drv, name, rep, attn, shots):
    from selenium.webdriver.common.keys import Keys
    heads = rep["heads"]
    k = max(range(len(heads)), key=lambda x: prev_score(heads[x]))
    drv.execute_script("window.headscope.choose(arguments[0]); window.headscope.show('map');", k)
    h = heads[k]
    ref = attn[h["layer"], h["head"]].astype(np.float64)
    n = ref.shape[0]
    drv.execute_script("const s = document.getElementById('hs-map-cell'); s.value = '12'; s.dispatchEvent(new Event('change'));")
    cv = drv.find_element("id", "hs-heatmap")
    # full labels: the label margin holds the longest token label at the label font
    full = drv.execute_script("""
const cv = document.getElementById('hs-heatmap'), c = document.createElement('canvas').getContext('2d');
c.font = '12px ui-monospace, Menlo, Consolas, monospace';
const labels = Array.prototype.map.call(document.querySelectorAll('#hs-tokens .tok'), t => t.textContent);
return [+cv.dataset.offset, Math.max.apply(null, labels.map(s => c.measureText(s).width))];""")
    check(full[0] >= full[1], "%s: map labels cut: margin %s < longest label %s" % (name, full[0], full[1]))
    # cells at weight 0 and 1 have viridis's end colours; the readout gives the weight
    for (i, j) in [(n - 1, 0), (n - 1, n - 2), (n // 2, n // 2 - 1), (1, 0)]:
        hover_cell(drv, i, j)
        ri, rj, w, text = readout(drv)
        check((ri, rj) == (i, j) and abs(w - ref[i, j]) <= QTOL,
              "%s: map readout at (%d, %d): %s, the map has %.4f" % (name, i, j, text, ref[i, j]))
    colours = drv.execute_script("""
const cv = document.getElementById('hs-heatmap'), off = +cv.dataset.offset, cell = +cv.dataset.cell, s = cv.width / parseFloat(cv.style.width);
const out = []; for (const [i, j] of arguments[0]) { const d = cv.getContext('2d').getImageData(Math.floor((off + j * cell + cell / 2) * s), Math.floor((off + i * cell + cell / 2) * s), 1, 1).data; out.push([d[0], d[1], d[2]]); } return out;""",
                                 [[0, n - 1], [int(np.argmax(ref[-1])) * 0 + n - 1, int(np.argmax(ref[-1]))]])
    check(all(abs(a - b) <= 12 for a, b in zip(colours[0], (68, 1, 84))), "%s: a zero cell is not dark (%s)" % (name, colours[0]))
    top = quant(ref[-1].max())
    if top >= 0.999:
        check(all(abs(a - b) <= 12 for a, b in zip(colours[1], (253, 231, 37))), "%s: a weight-1 cell is not yellow (%s)" % (name, colours[1]))
    # keyboard readout
    hover_cell(drv, 2, 0)
    keys(drv, cv, Keys.ARROW_RIGHT)
    ri, rj, w, _ = readout(drv)
    check((ri, rj) == (2, 1) and abs(w - ref[2, 1]) <= QTOL, "%s: arrow right gave readout (%d, %d)" % (name, ri, rj))
    shot(drv, shots, name + "-map-view")
    # word level: keys summed, queries averaged (Clark et al.), from the float32 map
    words = rep["input"].get("word_ids")
    box = by_css(drv, "#hs-map-words")
    if words and max(words) + 1 < n:
        if check(box, "%s: no word-level toggle though the report has words" % name):
            box[0].click()
            W = max(words) + 1
            wm = np.zeros((W, W))
            cnt = np.zeros(W)
            for i in range(n):
                cnt[words[i]] += 1
                for j in range(n):
                    wm[words[i], words[j]] += ref[i, j]
            wm /= cnt[:, None]
            check(drv.find_element("id", "hs-heatmap").get_attribute("data-level") == "words", "%s: word map not shown" % name)
            for (u, x) in [(W - 1, W - 2), (W // 2, 0), (1, 1)]:
                hover_cell(drv, u, x)
                ri, rj, w, text = readout(drv)
                check((ri, rj) == (u, x) and abs(w - wm[u, x]) <= QTOL,
                      "%s: word readout (%d, %d): %s, want %.4f" % (name, u, x, text, wm[u, x]))
            shot(drv, shots, name + "-map-view-words")
            drv.find_element("id", "hs-map-words").click()
