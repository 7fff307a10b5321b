"""The patching page (headscope patch's index.html; run by tests/browser_test.py --patch):
every number it shows read against the patching.json beside it. The header's settings and
metric means; the effect grid (each cell's value under its layer and head, at 2 decimals, or
at two significant digits of the largest |effect| when that is under 0.1;
its colour headscope's blue-white-red map at the effect on a scale from -a to +a, a the
largest |effect|); hovering each cell gives its effect, ci95 and per-pair values (and the
attribution's with --method both, whose grid the "show" control switches to); with
--positions each the (layer.head) x position grid, its labels and the readout of focused
cells; the paths list, largest |effect| first; the pairs with their clean and corrupt
metrics. Then a sweep: a number on the page that no check read fails."""
import json
import math
import os

from browser_numbers import DASH, fmt, grab, is_num, js_num, sweep
from browser_util import by_css, check, hover, open_page, page_clean, shot

ENDS = {1: (150, 24, 36), -1: (33, 72, 150)}
# headscope's diverging map, docs/pictures.md's control points at -1, -0.5, 0, 0.5, 1
POINTS = [ENDS[-1], (110, 160, 212), (246, 246, 244), (222, 112, 92), ENDS[1]]


def want_colour(v, a):
    """v's colour on the scale from -a to +a (linear between the control points); grey when
    v is not a number."""
    if not is_num(v):
        return (128, 128, 128)
    t = min(1.0, max(0.0, 0.5 + v / (2 * (a if a > 0 else 1)))) * 4
    i = min(3, int(t))
    f = t - i
    return tuple(int(round(p + f * (q - p) + 1e-9)) for p, q in zip(POINTS[i], POINTS[i + 1]))


def ci(c, d=4):
    return "[%s, %s]" % (fmt(c[0], d), fmt(c[1], d)) if isinstance(c, list) and len(c) == 2 else DASH


def per_pair(v):
    return ", ".join(fmt(x) for x in v) if isinstance(v, list) else DASH


def unit(r):
    return str(r["layer"]) if r.get("head") is None else "%d.%d" % (r["layer"], r["head"])


def describe(r, what):
    s = "%s: effect %s %s (95%% bootstrap interval)\npatched metric per pair: %s" % (
        what, fmt(r.get("effect")), ci(r.get("ci95")), per_pair(r.get("per_pair")))
    if "effect_attribution" in r:
        s += "\nattribution: effect %s %s\nattribution per pair: %s" % (
            fmt(r["effect_attribution"]), ci(r.get("ci95_attribution")), per_pair(r.get("per_pair_attribution")))
    return s


def header_want(p):
    m, bs, cost = p["metric"], p["bootstrap"], p.get("cost") or {}
    want = ["method %s (%s)" % (p["method"], p["architecture"]),
            "site %s (%s)%s" % (p["site"], p["hook"], ", each position" if p["per_position"] else ""),
            "direction " + p["direction"],
            "metric %s: clean mean %s, corrupt mean %s" % (m["name"], fmt(m["clean_mean"]), fmt(m["corrupt_mean"])),
            "pairs %d from %s" % (len(p["pairs"]), p["pairs_file"]),
            "interval %d%% bootstrap, %d resamples, seed %d" % (round(100 * bs["level"]), bs["resamples"], bs["seed"])]
    if is_num(cost.get("forward_passes")):
        want.append("cost %s forward passes (%s a pair)" % (js_num(cost["forward_passes"]), fmt(cost["per_pair"], 1)))
    if p.get("correlation"):
        c = p["correlation"]
        want.append("exact vs attribution r = %s over heads" % fmt(c["heads"], 3) +
                    (", %s over positions" % fmt(c["positions"], 3) if is_num(c.get("positions")) else ""))
    return want


def digits(a):
    """The decimals a grid prints: 2, or two significant digits of a largest |value| under 0.1."""
    return min(6, math.ceil(-math.log10(a)) + 1) if 0 < a < 0.1 else 2


def rgb(s):
    return tuple(int(x) for x in s[s.index("(") + 1:s.index(")")].split(","))


def check_cells(drv, name, grid, recs, key, printed):
    """Each cell of grid (a table id): under its record's labels, its value printed (when
    printed), its colour's side of 0, the largest |value| at the scale's end."""
    cells = drv.execute_script("""
return Array.prototype.map.call(document.querySelectorAll('#' + arguments[0] + ' td[data-i]'), td => {
  td.dataset.hsChecked = '1';
  const tr = td.parentElement, t = tr.closest('table');
  return [+td.dataset.i, td.textContent, tr.cells[0].textContent,
          t.rows[0].cells[td.cellIndex].textContent, getComputedStyle(td).backgroundColor]; });""", grid)
    check(sorted(c[0] for c in cells) == list(range(len(recs))), "%s: %s has cells %s for %d records" % (name, grid, [c[0] for c in cells][:6], len(recs)))
    a = max([abs(r[key]) for r in recs if is_num(r.get(key))] + [0])
    bad = []
    for i, text, row, colh, colour in cells:
        r, v = recs[i], recs[i].get(key)
        if grid == "pt-pos-grid":
            where = (row, colh) == (unit(r), str(r["position"]))
        else:
            where = row == "L%d" % r["layer"] and colh == ("layer" if r.get("head") is None else "H%d" % r["head"])
        c = rgb(colour)
        side = c == want_colour(v, a)
        end = not (is_num(v) and a > 0 and abs(v) == a) or c == ENDS[1 if v > 0 else -1]
        if not where or (printed and text != fmt(v, digits(a))) or not side or not end:
            bad.append((unit(r), text, row, colh, c, v))
    check(not bad, "%s: %s cells differ from the report (unit, text, row, column, colour, value): %s" % (name, grid, bad[:3]))
    scale = grab(drv, "#%s ~ .pt-scale > span:not(.hint)" % grid)
    check(scale == [fmt(-a, digits(a)), fmt(a, digits(a))], "%s: %s scale %s, want +-%s" % (name, grid, scale, fmt(a, digits(a))))


def check_readout(drv, name, grid, recs, what, how):
    """The readout after hovering (how 'hover') or focusing (how 'focus') each cell."""
    bad = []
    for td in by_css(drv, "#%s td[data-i]" % grid):
        i = int(td.get_attribute("data-i"))
        if how == "hover":
            hover(drv, td)
        else:
            drv.execute_script("arguments[0].focus();", td)
        got = drv.execute_script("const o = document.getElementById(arguments[0] + '-readout'); o.dataset.hsChecked = '1'; return o.textContent;", grid)
        if got != describe(recs[i], what(recs[i])):
            bad.append((unit(recs[i]), got, describe(recs[i], what(recs[i]))))
    check(not bad, "%s: %s readout differs from the report: %s" % (name, grid, bad[:2]))


def check_patch_page(drv, page, shots):
    name = "patch-" + os.path.basename(os.path.dirname(page))
    if not open_page(drv, page):
        return
    with open(os.path.join(os.path.dirname(page), "patching.json")) as f:
        p = json.load(f)
    check(drv.execute_script("return document.getElementById('hs-error').hidden;"), "%s: the page shows an error" % name)
    got = grab(drv, "#hs-meta > span")
    check(got == header_want(p), "%s: header %s, want %s" % (name, got, header_want(p)))
    grab(drv, "#hs-model, #hs-footer, #pt-main h2, #pt-main p.hint, #pt-main figcaption")
    path = p["method"] == "path"
    if path:
        recs = [dict(x, layer=int(x["sender"].split(".")[0]), head=int(x["sender"].split(".")[1])) for x in p["paths"]]
        what = lambda r: "%s \u2192 %s %s" % (r["sender"], r["receiver"], r["input"])
    else:
        recs, what = p["heads"], unit
    check_cells(drv, name, "pt-grid", recs, "effect", True)
    check_readout(drv, name, "pt-grid", recs, what, "hover")
    heads = sorted({-1 if r.get("head") is None else r["head"] for r in recs})
    want = [""] + ["layer" if h < 0 else "H%d" % h for h in heads] + ["L%d" % l for l in sorted({r["layer"] for r in recs})]
    got = grab(drv, "#pt-grid th")
    check(got == want, "%s: effect grid labels %s, want %s" % (name, got, want))
    if p["method"] == "both":
        drv.execute_script("const s = document.getElementById('pt-which'); s.value = 'effect_attribution'; s.dispatchEvent(new Event('change'));")
        check_cells(drv, name + " (attribution)", "pt-grid", recs, "effect_attribution", True)
        if p.get("positions"):
            check_cells(drv, name + " (attribution)", "pt-pos-grid", p["positions"], "effect_attribution", False)
        drv.execute_script("const s = document.getElementById('pt-which'); s.value = 'effect'; s.dispatchEvent(new Event('change'));")
        check_cells(drv, name, "pt-grid", recs, "effect", True)
        # the view is drawn again (the readout under the mouse, read by check_readout)
        grab(drv, "#pt-grid th, #pt-main h2, #pt-main p.hint, #pt-grid-readout")
    has_pos = bool(p.get("positions"))
    check(bool(by_css(drv, "#pt-positions:not([hidden])")) == has_pos, "%s: the positions view is %s" % (name, "missing" if has_pos else "shown without positions"))
    if has_pos:
        pos = p["positions"]
        check_cells(drv, name, "pt-pos-grid", pos, "effect", False)
        labels = grab(drv, "#pt-pos-grid th")
        units = list(dict.fromkeys(unit(r) for r in pos))
        cols = [str(x) for x in sorted({r["position"] for r in pos})]
        check(labels == [""] + cols + units, "%s: positions grid labels %s" % (name, labels[:8]))
        check_readout(drv, name, "pt-pos-grid", pos, lambda r: "%s at position %d" % (unit(r), r["position"]), "focus")
    if p.get("paths"):
        rows = grab(drv, "#pt-path-list tr")
        order = sorted(p["paths"], key=lambda x: -abs(x["effect"]) if is_num(x["effect"]) else 1)
        want = ["senderreceiverinputeffect95% interval"] + [x["sender"] + x["receiver"] + x["input"] + fmt(x["effect"]) + ci(x["ci95"]) for x in order]
        check(rows == want, "%s: paths list %s, want %s" % (name, rows[:3], want[:3]))
    m = p["metric"]
    rows = drv.execute_script("""return Array.prototype.map.call(document.querySelectorAll('#pt-pair-list tr'),
        r => { r.dataset.hsChecked = '1'; return Array.prototype.map.call(r.cells, c => c.textContent); });""")
    want = [["line", "tokens", "position", "answer id", "wrong id", "clean", "corrupt"]] + [
        [str(x["line"]), str(x["n_tokens"]), str(x["position"]), str(x["answer_id"]), str(x["wrong_id"]),
         fmt(m["clean"][i]), fmt(m["corrupt"][i])] for i, x in enumerate(p["pairs"])]
    check(rows == want, "%s: pairs list %s, want %s" % (name, rows[:2], want[:2]))
    pics = [f for f in p["files"] if f.endswith(".png")]
    loaded = drv.execute_script("return Array.prototype.map.call(document.querySelectorAll('#pt-pictures img'), i => i.complete && i.naturalWidth > 0);")
    check(len(loaded) == len(pics) and all(loaded), "%s: pictures %s loaded %s" % (name, pics, loaded))
    shot(drv, shots, name, full=True)
    sweep(drv, name, "the patching page", ["#hs-header", "#pt-main", "#hs-footer"])
    page_clean(drv, name)
