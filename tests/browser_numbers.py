"""Every number a page shows, read against report.json (run by tests/browser_test.py).

Each check reads a part of the page (a header item, a card's rows, a table cell, the head
panel of every head, a view's controls and labels), compares its text with what the page
must print for the report's values (formatted here as the page's fmt does: 4 decimals,
3 in the panel and the views, integers as integers), and marks the elements it read. Then
sweep() walks every visible text node of the view: a number in a node that no check read is
a failure, so a number added to the page without a check here fails the test."""
import decimal
import json

from browser_util import by_css, check, view
import browser_local as bl  # model.layers as the page prints it (it imports this module too)

DASH = "\u2014"
INT_LEAVES = {"cluster", "kv_head", "rows"}  # and each detector's parameter, *_k

# ---- the page's number formats ---------------------------------------------------------------


def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) != float("inf")


def to_fixed(v, d):
    """JavaScript's Number.prototype.toFixed: the exact binary value, ties away from zero."""
    q = decimal.Decimal(1).scaleb(-d)
    s = str(decimal.Decimal(v).quantize(q, rounding=decimal.ROUND_HALF_UP))
    return s


def fmt(v, d=4):
    if not is_num(v):
        return DASH
    s = to_fixed(v, 1) if abs(v) >= 1000 else to_fixed(v, d)
    if s.startswith("-") and set(s[1:]) <= set("0."):
        s = s[1:]
    return s


def fmt_signed(v, d=4):
    s = fmt(v, d)
    return "+" + s if is_num(v) and v > 0 and not set(s) <= set("0.") else s


def js_num(v):
    """String(v) of a JavaScript number for the integers and short decimals printed whole."""
    if isinstance(v, int) or (isinstance(v, float) and v == int(v) and abs(v) < 1e15):
        return str(int(v))
    return repr(v)


# ---- reading the page ---------------------------------------------------------------------------
MARK = "arguments[0].forEach(e => { e.dataset.hsChecked = '1'; });"


def grab(drv, css, root="document"):
    """The text of every element matching css, each marked as read."""
    return drv.execute_script(
        "const es = Array.prototype.slice.call(" + root + ".querySelectorAll(arguments[0]));"
        "es.forEach(e => { e.dataset.hsChecked = '1'; }); return es.map(e => e.textContent);", css)


def sweep(drv, name, where, roots):
    """Fails for each visible text node with a digit under roots that no check marked."""
    left = drv.execute_script("""
const out = [];
arguments[0].forEach(sel => document.querySelectorAll(sel).forEach(root => {
  const w = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  let n;
  while ((n = w.nextNode())) {
    if (!/[0-9]/.test(n.nodeValue)) continue;
    let e = n.parentElement;
    if (!e || e.closest('title, script, style')) continue;
    const box = e.closest('select') || e;
    if (box.getClientRects().length === 0 || getComputedStyle(box).visibility === 'hidden') continue;
    if (e.closest('[data-hs-checked]')) continue;
    out.push(n.nodeValue.trim().slice(0, 60));
  }
}));
return out;""", roots)
    check(not left, "%s: %s shows numbers no check read: %s" % (name, where, left[:6]))


def value_at(rep, h, key):
    """A table column's value for head h, read from the report by the column's key."""
    if key == "probe.ablation_delta":
        for e in ((rep.get("probe") or {}).get("ablation") or {}).get("heads", []):
            if e["layer"] == h["layer"] and e["head"] == h["head"]:
                return e["delta"]
        return None
    v = h
    for p in key.split("."):
        v = v.get(p) if isinstance(v, dict) else None
    if isinstance(v, dict) and "mean" in v:
        v = v["mean"]
    return v


def col_kind(heads, rep, key):
    if "ablation_delta" in key:
        return "delta"
    leaf = key.split(".")[-1]
    vals = [value_at(rep, h, key) for h in heads]
    if (leaf in INT_LEAVES or leaf.endswith("_k")) and all(v == int(v) for v in vals if is_num(v)):
        return "int"
    return "num"


def columns(drv):
    """The heads table's columns: [key, label] in order."""
    return drv.execute_script("""return Array.prototype.map.call(document.querySelectorAll('#hs-heads thead th'),
        th => [th.dataset.key, th.firstChild.textContent]);""")


# ---- header, footer, keys -----------------------------------------------------------------------
def check_header(drv, name, rep):
    m, inp = rep["model"], rep.get("input", {})
    co = rep.get("corpus")
    info = json.loads(drv.execute_script("return document.getElementById('hs-maps-info').textContent;"))
    want = []
    if m.get("family"):
        fam = m["family"]
        if m.get("format"):
            fam += " (" + m["format"] + (", " + m["storage_dtype"] if m.get("storage_dtype") else "") + ")"
        want.append("model " + fam)
    if is_num(m.get("n_layer")):
        want.append("shape %d layers \u00d7 %d heads, d_model %d" % (m["n_layer"], m["n_head"], m["d_model"]))
    if bl.layers_line(m):
        want.append("layers " + bl.layers_line(m))
    heads = co["heads"] if co else rep["heads"]
    if co:
        src, cl, tk = co["source"], co["loss"], co["tokens"]
        want.append("corpus %s (%s)" % (src["path"], src["format"]))
        want.append("texts %d" % co["n_texts"] + (", %d skipped" % co["n_skipped"] if co.get("n_skipped") else ""))
        want.append("tokens %d (%d\u2013%d per text)" % (tk["total"], tk["min"], tk["max"]))
        want.append("loss %s %s [%s, %s]" % (cl["kind"], fmt(cl["mean"]), fmt(cl["ci_low"]), fmt(cl["ci_high"])))
    else:
        want.append("tokens %d" % inp["n_tokens"] + (" (truncated)" if inp.get("truncated") else ""))
        want.append("loss %s %s" % (rep["loss"]["kind"], fmt(rep["loss"]["value"])))
    want.append("heads analysed %d" % len(heads))
    if co:
        want.append("maps not embedded")
    else:
        n_maps = len([h for h in heads])  # every head of these pages fits the budget
        check(info["count"] == n_maps and info["of"] == len(heads) and info["n"] == inp["n_tokens"],
              "%s: map index %s for %d heads of %d tokens" % (name, info, len(heads), inp["n_tokens"]))
        want.append("maps %d of %d heads (%d\u00b2%s)" % (n_maps, len(heads), inp["n_tokens"], ", words" if info.get("words") else ""))
    got = grab(drv, "#hs-meta > span")
    check(got == want, "%s: header %s, want %s" % (name, got, want))
    grab(drv, "#hs-model")
    check(grab(drv, "#hs-text .text") == [("text" + inp["text"]) if k == 0 else ("text pair" + inp["text_pair"])
                                          for k in range(len([x for x in ("text", "text_pair") if isinstance(inp.get(x), str)]))],
          "%s: the text shown is not input.text / input.text_pair" % name)
    toks = [t for t in grab(drv, "#hs-tokens .tok")]
    disp = inp.get("display_tokens", inp.get("tokens", []))
    check(len(toks) == len(disp), "%s: %d token chips for %d tokens" % (name, len(toks), len(disp)))


def check_footer(drv, name, rep):
    g, tm = rep.get("generator", {}), rep.get("timing", {})
    s = "%s \u00b7 %s %s" % (rep.get("schema", "report"), g.get("name", "headscope"), g.get("version", ""))
    if is_num(tm.get("forward_passes")):
        s += " \u00b7 %d forward passes" % tm["forward_passes"]
    total = tm.get("total_seconds", tm.get("seconds"))
    if is_num(total):
        s += ", " + to_fixed(total, 2) + " s"
    s += " \u00b7 this page is self-contained and loads nothing from the network"
    got = grab(drv, "#hs-footer")[0]
    check(got == s, "%s: footer %r, want %r (timing.total_seconds, not a sum of the phases)" % (name, got, s))


def check_keys(drv, name):
    """The key hint counts the tabs shown, and the last number opens the last tab."""
    from selenium.webdriver.common.keys import Keys
    tabs = drv.execute_script("return Array.prototype.filter.call(document.querySelectorAll('#hs-tabs [role=tab]'), t => !t.hidden).map(t => t.dataset.view);")
    hint = grab(drv, "#hs-keys")[0]
    check(hint.startswith("keys: 1\u2013%d switch views" % len(tabs)), "%s: key hint %r with %d tabs" % (name, hint, len(tabs)))
    body = drv.find_element("tag name", "body")
    drv.execute_script("document.activeElement.blur();")
    body.send_keys(str(len(tabs)))
    sel = drv.execute_script("return document.querySelector('#hs-tabs [aria-selected=true]').dataset.view;")
    check(sel == tabs[-1], "%s: key %d opened %s, want %s" % (name, len(tabs), sel, tabs[-1]))
    body.send_keys("1")
    grab(drv, "#hs-tabs button")  # tab names (no numbers)


# ---- overview: cards, table, panel ----------------------------------------------------------------
def card_rows(drv, card_sel):
    """[[cell texts]] of the rows of a card's tables, each cell marked."""
    return drv.execute_script("""
const c = arguments[0] instanceof Element ? arguments[0] : document.querySelector(arguments[0]);
return Array.prototype.map.call(c.querySelectorAll('table tr'), r => Array.prototype.map.call(r.cells, td => { td.dataset.hsChecked = '1'; return td.textContent; }));""", card_sel)


def cards(drv):
    return {c.find_element("css selector", "h3").text: c for c in by_css(drv, "#hs-summary .card")}


def label_of(h):
    return h.get("label")


def check_cards(drv, name, rep):
    co = rep.get("corpus")
    heads = co["heads"] if co else rep["heads"]
    cs = cards(drv)
    for c in cs.values():
        # titles and fixed hints: their only digits are the zero of "Δ > 0" and "Δ < 0"
        drv.execute_script("arguments[0].querySelectorAll('h3, p.hint, p.note').forEach(e => { if (!/[0-9]/.test(e.textContent.replace(/Δ [<>] 0/g, ''))) e.dataset.hsChecked = '1'; });", c)
    if co:
        imp = sorted((h for h in heads if is_num(h.get("importance"))), key=lambda h: -h["importance"])[:8]
        got = card_rows(drv, cs["Most important heads (corpus)"])
        want = [[h["id"], fmt(h["importance"]), ""] for h in imp]
        check(got == want, "%s: corpus importance card %s, want %s" % (name, got, want))
    else:
        d = [h for h in heads if is_num(h.get("ablation_delta"))]
        pos = sorted((h for h in d if h["ablation_delta"] > 0), key=lambda h: -h["ablation_delta"])[:8]
        neg = sorted((h for h in d if h["ablation_delta"] < 0), key=lambda h: h["ablation_delta"])[:8]
        for title, hs in (("Most important heads", pos), ("Heads whose removal lowers the loss", neg)):
            if title not in cs:
                check(not hs, "%s: no %r card" % (name, title))
                continue
            got = card_rows(drv, cs[title])
            want = [[h["id"], fmt_signed(h["ablation_delta"]), ""] for h in hs]
            check([r[:3] for r in got] == want, "%s: %s %s, want %s" % (name, title, got, want))
        if "Probe ablation" in cs:
            card_rows(drv, cs["Probe ablation"])  # read by check_probe_card
            drv.execute_script("arguments[0].querySelectorAll('p').forEach(e => { e.dataset.hsChecked = '1'; });", cs["Probe ablation"])
    check_types_card(drv, name, rep, heads, cs)
    check_cluster_card(drv, name, rep, heads, cs)
    if not co:
        check_pruning_card(drv, name, rep, cs)
        dv = (rep.get("diversity") or {}).get("per_layer") or []
        if any(is_num(v) for v in dv):
            got = card_rows(drv, cs["Layer diversity"])
            want = [["layer %d" % l, fmt(v, 3), ""] for l, v in enumerate(dv) if is_num(v)]
            check(got == want, "%s: layer diversity %s, want %s" % (name, got, want))
        if "Key/value groups" in cs:  # check_kv_card reads its rows
            card_rows(drv, cs["Key/value groups"])
            check_kv_hints(drv, name, rep, cs["Key/value groups"])
    grab(drv, "#hs-summary .chip")  # head names, each checked with its row above
    grab(drv, "#hs-summary .badge")


def check_kv_hints(drv, name, rep, c):
    kv = rep["kv_groups"]
    ks = kv["similarity"]
    cl = ks.get("clusters") or {}
    got = drv.execute_script("return Array.prototype.map.call(arguments[0].querySelectorAll('p.hint'), p => { p.dataset.hsChecked = '1'; return p.textContent; });", c)
    first = "%d KV head%s per layer, each read by %d query heads" % (kv["n_kv_head"], "s" if kv["n_kv_head"] > 1 else "", kv["heads_per_group"])
    last = "other layers: %s; clusters against the KV groups: adjusted Rand %s, same cluster within %s, across %s" % (
        fmt(ks.get("other_layers_mean"), 3), fmt(cl.get("adjusted_rand"), 3), fmt(cl.get("same_cluster_within"), 2), fmt(cl.get("same_cluster_across"), 2))
    ok = len(got) == 2 and got[0].startswith(first) and ("share of %d random groupings" % ks["permutations"]) in got[0] and got[1] == last
    check(ok, "%s: KV card hints %s, want %r ... %r" % (name, got, first, last))


def check_types_card(drv, name, rep, heads, cs):
    types = {}
    multi = any(isinstance(h.get("labels"), list) for h in heads)
    for h in heads:
        if multi:
            for lab in h.get("labels") or []:
                types.setdefault(lab["type"], []).append(h["id"])
            for t in (h.get("sinks") or {}).get("types", []) if isinstance(h.get("sinks"), dict) else []:
                types.setdefault("sink: " + t, []).append(h["id"])
        elif h.get("label") and h["label"] != "none":
            types.setdefault(h["label"], []).append(h["id"])
    rows = drv.execute_script("""
return Array.prototype.map.call(arguments[0].querySelectorAll('.chips'), r => {
  r.dataset.hsChecked = '1';
  const b = r.querySelector('.badge').textContent.match(/\\((\\d+)\\)$/);
  return [b ? +b[1] : -1, Array.prototype.map.call(r.querySelectorAll('.chip'), c => c.textContent)]; });""", cs["Detected head types"])
    got = sorted((tuple(c), n) for n, c in rows)
    want = sorted((tuple(v), len(v)) for v in types.values())
    check(got == want and all(n == len(c) for n, c in rows), "%s: head types card %s, want %s" % (name, rows, types))


def check_cluster_card(drv, name, rep, heads, cs):
    co = rep.get("corpus")
    cl = (co.get("clusters") if co else rep.get("clusters")) or {}
    groups = {}
    for h in heads:
        if is_num(h.get("cluster")):
            groups.setdefault(h["cluster"], []).append(h["id"])
    c = cs["Clusters"]
    hint = drv.execute_script(
        "const p = arguments[0].querySelector('p.hint'); p.dataset.hsChecked = '1'; return p.textContent;", c)
    want = "%d clusters" % len(groups) + (" at distance %s" % js_num(cl["threshold"]) if is_num(cl.get("threshold")) else "")
    check(hint.startswith(want), "%s: clusters hint %r, want %r..." % (name, hint, want))
    rows = drv.execute_script("""
return Array.prototype.map.call(arguments[0].querySelectorAll('.chips'), r => {
  r.dataset.hsChecked = '1';
  return [r.querySelector('.kv').textContent, Array.prototype.map.call(r.querySelectorAll('.chip'), c => c.textContent)]; });""", c)
    alone = sorted((g[0] for g in groups.values() if len(g) == 1), key=lambda i: [h["id"] for h in heads].index(i))
    want = [["cluster %s (%d):" % (k, len(g)), g] for k, g in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])) if len(g) > 1]
    if alone:
        want.append(["alone (%d):" % len(alone), alone])
    check(rows == want, "%s: clusters card %s, want %s" % (name, rows, want))


def check_pruning_card(drv, name, rep, cs):
    pr = rep.get("pruning") or {}
    c = cs["Pruning"]
    if isinstance(pr.get("candidates"), list):
        row = drv.execute_script("""const r = arguments[0].querySelector('.chips'); r.dataset.hsChecked = '1';
return [r.querySelector('.kv').textContent, Array.prototype.map.call(r.querySelectorAll('.chip'), x => x.textContent)];""", c)
        want = ["candidates" + (" (|\u0394| < %s):" % js_num(pr["tolerance"]) if is_num(pr.get("tolerance")) else ":"), pr["candidates"]]
        check(row == want, "%s: pruning candidates %s, want %s" % (name, row, want))
    curve = pr.get("curve") or []
    if not curve:
        return
    base = rep["loss"]["value"]
    ys = [base] + [e["loss"] for e in curve]
    stop = pr.get("stop")
    stop_y = (base + stop if rep["loss"]["kind"] == "repr" else base * (1 + stop)) if is_num(stop) else None
    lo, hi = min(ys), max(ys)
    if stop_y is not None and stop_y < hi * 1.5:
        lo, hi = min(lo, stop_y), max(hi, stop_y)
    gone = sum(len(e["removed"]) for e in curve)
    texts = drv.execute_script("""const s = arguments[0].querySelector('svg'); s.dataset.hsChecked = '1';
return [Array.prototype.map.call(s.querySelectorAll('text'), t => t.textContent), Array.prototype.map.call(s.querySelectorAll('circle title'), t => t.textContent)];""", c)
    want = [to_fixed(hi, 2), to_fixed(lo, 2), "0", str(gone), "heads removed", "loss"]
    check(texts[0] == want, "%s: pruning axes %s, want %s" % (name, texts[0], want))
    dots = ["all heads: loss " + fmt(base)]
    left = 0
    for e in curve:
        left += len(e["removed"])
        dots.append("removed %s (%d left): loss %s" % (", ".join(e["removed"]), e["heads_left"], fmt(e["loss"])))
    check(texts[1] == dots, "%s: pruning points %s, want %s" % (name, texts[1][:3], dots[:3]))
    how = grab(drv, "#hs-prune-method")[0]
    if pr.get("method") == "gradient":
        ok = how.startswith("Michel et al.\u2019s rounds: each removes the %d remaining head" % pr["round_heads"])
    else:
        ok = how.startswith("greedy removal") and ("among the %d " % pr["beam"] in how if is_num(pr.get("beam")) else True)
    check(ok, "%s: the Pruning card says %r for method %s" % (name, how, pr.get("method")))


def cell_text(kind, v):
    if kind == "int":
        return str(int(v)) if is_num(v) else DASH
    return fmt_signed(v) if kind == "delta" else fmt(v)


def check_table(drv, name, rep):
    heads = rep["corpus"]["heads"] if rep.get("corpus") else rep["heads"]
    cols = columns(drv)
    grab(drv, "#hs-heads thead th")
    cells = drv.execute_script("""const o = {};
document.querySelectorAll('#hs-heads tbody tr').forEach(r => { o[r.dataset.head] = Array.prototype.map.call(r.cells, td => { td.dataset.hsChecked = '1'; return [td.textContent, td.title]; }); });
return o;""")
    bad = []
    for h in heads:
        row = cells.get(h["id"])
        if row is None or len(row) != len(cols):
            bad.append((h["id"], "row"))
            continue
        for (key, _), (text, title) in zip(cols, row):
            if key == "id":
                ok = text == h["id"]
            elif key == "label":
                ok = text == (h["label"] if h.get("label") is not None else DASH)
            else:
                v = value_at(rep, h, key)
                kind = col_kind(heads, rep, key)
                ok = text == cell_text(kind, v)
                if ok and is_num(v) and kind != "int":  # the title holds the full value
                    ok = float(title.split()[1].rstrip(",") if title.startswith("mean ") else title) == float(v) if title else False
            if not ok:
                bad.append((h["id"], key, text, value_at(rep, h, key) if key not in ("id", "label") else None))
    check(not bad, "%s: table cells differ from the report: %s" % (name, bad[:4]))
    return cols


def check_panel(drv, name, rep, cols):
    """The head panel of every head: layer, head, and each numeric column's value (3
    decimals; Δ signed with 4; integers whole; a corpus mean with its CI), nothing cut off."""
    co = rep.get("corpus")
    heads = co["heads"] if co else rep["heads"]
    bad, cut = [], []
    for k, h in enumerate(heads):
        drv.execute_script("window.headscope.choose(arguments[0]);", k)
        got = drv.execute_script("""const p = document.getElementById('hs-selected');
p.querySelectorAll('h2, .badge, figcaption').forEach(e => { e.dataset.hsChecked = '1'; });
const r = p.getBoundingClientRect();
return [p.querySelector('h2').textContent, Array.prototype.map.call(p.querySelectorAll('.metrics > div'), d => {
  d.dataset.hsChecked = '1'; const v = d.querySelector('.v'), b = v.getBoundingClientRect(), c = d.getBoundingClientRect();
  return [d.querySelector('.lab').textContent, v.textContent, d.scrollWidth <= d.clientWidth + 1 &&
          b.right <= Math.min(r.right, c.right) + 0.5 && b.left >= Math.max(r.left, c.left) - 0.5]; })];""", k)
        want = [["layer", str(h["layer"])], ["head", str(h["head"])]]
        if bl.attention_line(rep, h["layer"]):
            want.append(["attention", bl.attention_line(rep, h["layer"])])
        for key, label in cols:
            if key in ("id", "label"):
                continue
            v = value_at(rep, h, key)
            kind = col_kind(heads, rep, key)
            s = str(int(v)) if kind == "int" and is_num(v) else DASH if kind == "int" else fmt_signed(v) if kind == "delta" else fmt(v, 3)
            o = h.get(key) if co else None
            if isinstance(o, dict) and is_num(o.get("ci_low")):
                s += " [%s, %s]" % (fmt(o["ci_low"], 3), fmt(o["ci_high"], 3))
            want.append([label, s])
        if got[0] != "Head " + h["id"] or [m[:2] for m in got[1]] != want:
            bad.append((h["id"], [m[:2] for m in got[1] if m[:2] not in want][:3], [w for w in want if w not in [m[:2] for m in got[1]]][:3]))
        cut += [(h["id"], m[0], m[1]) for m in got[1] if not m[2]]
    check(not bad, "%s: head panel values differ from the report: %s" % (name, bad[:3]))
    check(not cut, "%s: head panel values cut off: %s" % (name, cut[:4]))


def check_cards_fit(drv, name):
    """At a 1400 px wide window no summary card scrolls sideways and no chip or label is cut."""
    size = drv.get_window_size()
    drv.set_window_size(1400, size["height"])
    try:
        bad = drv.execute_script("""const out = [];
document.querySelectorAll('#hs-summary .card').forEach(c => {
  const r = c.getBoundingClientRect(), t = c.querySelector('h3').textContent;
  if (c.scrollWidth > c.clientWidth) out.push(t + ': scrolls sideways (' + c.scrollWidth + ' > ' + c.clientWidth + ')');
  c.querySelectorAll('.chip, .badge').forEach(x => { const b = x.getBoundingClientRect();
    if (b.right > r.right + 0.5 || b.left < r.left - 0.5 || x.scrollWidth > x.clientWidth + 1) out.push(t + ': ' + x.textContent + ' cut'); });
});
return [window.innerWidth, out];""")
        check(bad[0] == 1400 and not bad[1], "%s: at %d px: %s" % (name, bad[0], bad[1][:4]))
    finally:
        drv.set_window_size(size["width"], size["height"])


def check_overview_numbers(drv, name, rep):
    view(drv, "overview")
    check_header(drv, name, rep)
    check_footer(drv, name, rep)
    check_cards(drv, name, rep)
    check_cards_fit(drv, name)
    cols = check_table(drv, name, rep)
    check_panel(drv, name, rep, cols)
    files = rep.get("files", [])
    caps = grab(drv, "#hs-pictures figcaption, #hs-pictures h3")
    check(all(c in files or not any(ch.isdigit() for ch in c) for c in caps), "%s: picture captions %s" % (name, caps))
    grab(drv, "#hs-table-wrap h2, #hs-table-wrap p")
    check_keys(drv, name)
    view(drv, "overview")
    sweep(drv, name, "the overview", ["#hs-header", "#hs-tabs", "#view-overview", "#hs-selected", "#hs-footer"])
    return cols


# ---- the head, model, map and corpus views ------------------------------------------------------
def tok_label(s):
    s = "" if s is None else str(s)
    if s == "":
        return "\u2205"
    if set(s) == {" "}:
        return "\u2423" * len(s)
    return s.replace("\n", "\u21b5").replace("\r", "\u240d").replace("\t", "\u2192")


def options(drv, sel):
    return drv.execute_script("""const s = document.querySelector(arguments[0]); s.dataset.hsChecked = '1';
return Array.prototype.map.call(s.options, o => o.textContent);""", sel)


def check_head_view_numbers(drv, name, rep):
    heads = rep["heads"]
    disp = [tok_label(t) for t in rep["input"].get("display_tokens", rep["input"]["tokens"])]
    layers = sorted({h["layer"] for h in heads})
    drv.execute_script("window.headscope.choose(0); window.headscope.show('head');")
    for l in layers[1:2]:
        drv.execute_script("const s = document.querySelector('#view-head select'); s.value = arguments[0]; s.dispatchEvent(new Event('change'));", str(l))
        at = drv.find_element("id", "hs-selected").get_attribute("data-head")
        check(at.split(".")[0] == str(l), "%s: after choosing layer %d in the head view the panel shows head %s" % (name, l, at))
        togs = [b for b in by_css(drv, "#hs-hv-heads .headtog")]
        check([t.text for t in togs] == [str(h["head"]) for h in heads if h["layer"] == l], "%s: layer %d head toggles %s" % (name, l, [t.text for t in togs]))
        togs[-1].click()
        at = drv.find_element("id", "hs-selected").get_attribute("data-head")
        want = [h["id"] for h in heads if h["layer"] == l][-1]
        check(at == want, "%s: turning head %s on left the panel on %s" % (name, want, at))
    check(options(drv, "#view-head select") == [str(l) for l in layers], "%s: head view layers" % name)
    for side in ("q", "k"):
        got = grab(drv, "#hs-hv .col.%s .lt" % side)
        check(got == disp, "%s: head view %s tokens differ from input.display_tokens" % (name, side))
    grab(drv, "#view-head .controls label, #view-head .colhead, #view-head h2, #view-head p")
    grab(drv, "#hs-hv-heads .headtog")
    sweep(drv, name, "the head view", ["#view-head"])


def check_model_view_numbers(drv, name, rep, cols):
    co = rep.get("corpus")
    heads = co["heads"] if co else rep["heads"]
    drv.execute_script("window.headscope.show('model');")
    kv = rep.get("kv_groups") or {}
    want = {bl.layer_label(rep, h["layer"]) for h in heads} | {"H%d" % h["head"] for h in heads}
    if kv.get("heads_per_group", 0) > 1:
        want |= {"KV%d" % g for g in range(kv["n_kv_head"])}
    got = set(t for t in grab(drv, "#hs-grid > span.kv") if t)
    check(got == want, "%s: model view grid labels %s, want %s" % (name, sorted(got), sorted(want)))
    tiles = grab(drv, "#hs-grid .tile > span:last-child")  # named cells when there are no thumbnails
    check(sorted(tiles) == (sorted(h["id"] for h in heads) if co else []), "%s: model view grid tiles %s" % (name, tiles[:4]))
    num = [(k, l) for k, l in cols if k not in ("id", "label")]
    check(options(drv, "#hs-mv-sort") == ["layers \u00d7 heads"] + [l for _, l in num], "%s: model view order options" % name)
    check(options(drv, "#hs-mv-fkey") == ["(none)"] + [l for _, l in num], "%s: model view filter options" % name)
    grab(drv, "#view-model select")
    grab(drv, "#view-model h2, #view-model p, #view-model .controls label")
    if co:  # cells coloured by a column: the colour bar's ends
        key, label = num[0]
        vals = [value_at(rep, h, key) for h in heads]
        vals = [v for v in vals if is_num(v)]
        lo = min(vals + [0])
        hi = max(vals + [lo + 1e-12])
        got = grab(drv, "#view-model .cbar span")
        check(got == [fmt(lo, 3), fmt(hi, 3) + " (" + label + ")"], "%s: model view colour bar %s" % (name, got))
    sweep(drv, name, "the model view", ["#view-model"])
    for key, label in num[:1] + [c for c in num if c[0] == "entropy_nats"][:1]:
        drv.execute_script("const s = document.getElementById('hs-mv-sort'); s.value = arguments[0]; s.dispatchEvent(new Event('change'));", key)
        order = sorted(range(len(heads)), key=lambda k: (value_at(rep, heads[k], key) is None, -(value_at(rep, heads[k], key) or 0), k))
        want = ["%s %s" % (heads[k]["id"], fmt(value_at(rep, heads[k], key), 3)) for k in order]
        got = grab(drv, "#hs-grid .tile > span:last-child")
        check(got == want, "%s: model view ordered by %s: %s, want %s" % (name, key, got[:4], want[:4]))
        grab(drv, "#view-model select, #view-model .cbar span")
        sweep(drv, name, "the model view by " + key, ["#view-model"])
    drv.execute_script("const s = document.getElementById('hs-mv-sort'); s.value = 'grid'; s.dispatchEvent(new Event('change'));")


def check_map_view_numbers(drv, name, rep):
    heads = rep["heads"]
    drv.execute_script("window.headscope.choose(arguments[0]); window.headscope.show('map');", len(heads) - 1)
    h = heads[-1]
    check(grab(drv, "#view-map h2") == ["Map view: head " + h["id"]], "%s: map view title" % name)
    names = {}
    for m in rep.get("metrics") or []:
        names[m["key"]] = names[str(m.get("path", m["key"])).split(".")[-1]] = m["name"]
    check(options(drv, "#hs-map-head") == ["%s %s" % (x["id"], names.get(x["label"], x["label"].replace("_", " "))) for x in heads],
          "%s: map view head list" % name)
    check(options(drv, "#hs-map-cell") == ["fit", "4 px", "8 px", "12 px", "16 px", "22 px"], "%s: map view cell sizes" % name)
    check(grab(drv, "#view-map .cbar span") == ["0", "1.000  (rows: query, columns: key)"], "%s: map view colour bar" % name)
    drv.execute_script("const c = document.getElementById('hs-heatmap'); c.focus(); c.dispatchEvent(new KeyboardEvent('keydown', {key: 'ArrowDown'}));")
    ro = drv.find_element("id", "hs-readout")
    w, i, j = float(ro.get_attribute("data-w")), int(ro.get_attribute("data-i")), int(ro.get_attribute("data-j"))
    disp = [tok_label(t) for t in rep["input"].get("display_tokens", rep["input"]["tokens"])]
    want = "query token %d %s  \u2192  key token %d %s  weight %s" % (i, disp[i], j, disp[j], fmt(w, 3))
    check(grab(drv, "#hs-readout") == [want], "%s: map readout %r, want %r" % (name, ro.text, want))
    grab(drv, "#view-map .controls label, #view-map .controls .kv")
    sweep(drv, name, "the map view", ["#view-map"])


def check_corpus_numbers(drv, name, rep, texts_path):
    co = rep["corpus"]
    heads = co["heads"]
    drv.execute_script("window.headscope.show('corpus');")
    by_css(drv, "#hs-texts-list tbody tr")[-1].click()  # the last text's panel open below the list
    iv = co.get("interval") or {}
    hint = grab(drv, "#view-corpus .panel > p.hint")[0]
    want = "Mean over %d texts, with its %s%% confidence interval (%s)" % (co["n_texts"], int(round(iv["level"] * 100)), iv["method"])
    check(hint.startswith(want), "%s: corpus hint %r, want %r..." % (name, hint, want))
    key = drv.execute_script("return document.getElementById('hs-corpus-key').value;")
    label = drv.execute_script("return document.getElementById('hs-corpus-key').selectedOptions[0].textContent;")
    grab(drv, "#hs-corpus-key")
    ks = sorted(range(len(heads)), key=lambda k: (not is_num((heads[k].get(key) or {}).get("mean")), -((heads[k].get(key) or {}).get("mean") or 0), k))
    rows = drv.execute_script("""const c = document.getElementById('hs-ci'); c.dataset.hsChecked = '1';
return Array.prototype.map.call(c.querySelectorAll('.num'), e => e.textContent);""")
    want = []
    for k in ks:
        s = heads[k].get(key) or {}
        want.append(fmt(s.get("mean"), 3) + (" [%s, %s]" % (fmt(s["ci_low"], 3), fmt(s["ci_high"], 3)) if is_num(s.get("ci_low")) else ""))
    check(rows == want, "%s: corpus means of %s %s, want %s" % (name, key, rows[:3], want[:3]))
    heads_row = grab(drv, "#hs-ci > span.kv")
    check(heads_row == ["head", "label", label, "mean [95% CI]"], "%s: corpus chart heads %s" % (name, heads_row))
    with open(texts_path) as f:
        texts = [json.loads(x) for x in f if x.strip()]
    at_id = drv.find_element("id", "hs-selected").get_attribute("data-head")
    sel = [h["id"] for h in heads].index(at_id)
    q = key.split(".")[0]
    got = drv.execute_script("""return Array.prototype.map.call(document.querySelectorAll('#hs-texts-list tr'), r => { r.dataset.hsChecked = '1'; return Array.prototype.map.call(r.cells, c => c.textContent); });""")
    want = [["text", "line", "tokens", "loss", label + " " + heads[sel]["id"]]]
    for x in texts:
        per = (x.get("heads") or {}).get(q)
        want.append([str(x["index"]), str(x["line"]), str(x["n_tokens"]), fmt(x["loss"]), fmt(per[sel] if isinstance(per, list) else None)])
    check(got == want, "%s: texts list %s, want %s" % (name, got[:3], want[:3]))
    hint = grab(drv, "#view-corpus .panel:last-child > p.hint")[0]
    check(hint.startswith("%d texts. The last column is %s of head %s." % (len(texts), label, heads[sel]["id"])), "%s: texts hint %r" % (name, hint))
    grab(drv, "#view-corpus h2, #view-corpus .controls label")
    x = texts[-1]
    title = grab(drv, "#hs-text-panel h3")[0]
    check(title == "Text %d (line %d, %d tokens%s, loss %s)" % (x["index"], x["line"], x["n_tokens"], ", truncated" if x.get("truncated") else "", fmt(x["loss"])),
          "%s: text panel title %r" % (name, title))
    vals = (x.get("heads") or {}).get(q) or []
    got = grab(drv, "#hs-text-panel .tile > span:last-child")
    at = {"%d.%d" % (h["layer"], h["head"]): k for k, h in enumerate(heads)}
    order = [at["%d.%d" % (l, hh)] for l in sorted({h["layer"] for h in heads}) for hh in sorted({h["head"] for h in heads}) if "%d.%d" % (l, hh) in at]
    check(got == [fmt(vals[k] if k < len(vals) else None, 3) for k in order], "%s: text panel values %s" % (name, got[:4]))
    ids = grab(drv, "#hs-text-panel p.kv")
    check(ids == (["ids: " + " ".join(str(i) for i in x["ids"])] if isinstance(x.get("ids"), list) else []), "%s: text panel ids" % name)
    grab(drv, "#hs-text-panel .grid > span.kv, #hs-text-panel p.hint")
    sweep(drv, name, "the corpus view", ["#view-corpus"])
