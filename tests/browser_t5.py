"""The page of an encoder-decoder's analysis (T5, viz/page/encdec.js), read in headless
Chromium by tests/browser_test.py --t5: its three sections, one per kind of heads, in the
order encoder, decoder, cross; every number of each section's table against report.json (as
the page's fmt prints it); every head's embedded map against `headscope attn`'s float32 maps
of the same text and target, within one quantisation step; and the cross map drawn with the
decoder's tokens down and the encoder's across."""
import numpy as np

from browser_numbers import fmt, fmt_signed
from browser_util import QTOL, check, open_page, page_clean, report, shot

COLS = [("entropy_nats", None), ("entropy_norm", None), ("max_weight_mean", None),
        ("previous_token", "scores"), ("first_token", "scores"), ("eos", "scores"),
        ("duplicate_token", "scores"), ("induction", "scores"), ("same_token", "scores"),
        ("ablation_delta", None), ("gradient_importance", None)]


def run_t5(drv, page, stem, shots):
    name = "t5"
    if not open_page(drv, page):
        return
    rep = report(drv)
    kinds = drv.execute_script("return Array.from(document.querySelectorAll('section.edkind')).map(s => s.dataset.kind);")
    check(kinds == ["encoder", "decoder", "cross"], "%s: sections %s" % (name, kinds))
    titles = drv.execute_script("return Array.from(document.querySelectorAll('section.edkind h2')).map(h => h.textContent);")
    for t, want in zip(titles, ("Encoder self-attention", "Decoder self-attention", "Cross-attention")):
        check(t.startswith(want), "%s: section title %r" % (name, t))
    rows = drv.execute_script(
        "const o = {}; document.querySelectorAll('.edtable tbody tr').forEach(r => {"
        " o[r.dataset.id] = Array.from(r.cells).map(c => c.textContent); }); return o;")
    check(len(rows) == len(rep["heads"]), "%s: %d table rows for %d heads" % (name, len(rows), len(rep["heads"])))
    maps = {k: np.load("%s.%s.npy" % (stem, k)) for k in ("encoder", "decoder", "cross")}
    H = rep["model"]["n_head"]
    for h in rep["heads"]:
        cells = rows.get(h["id"], [])
        want = [h["id"]] + [(fmt_signed if k == "ablation_delta" else fmt)(h[g][k] if g else h[k]) for k, g in COLS]
        check(cells == want, "%s: %s row %s, want %s" % (name, h["id"], cells, want))
        m = drv.execute_script("const m = window.headscope.map(arguments[0]); return m ? [m.rows, m.cols, Array.from(m.v)] : null;", h["id"])
        ref = maps[h["kind"]][h["layer"], h["head"]]
        ok = m is not None and [m[0], m[1]] == list(ref.shape) == h["map_shape"]
        ok = ok and np.abs(np.array(m[2]).reshape(ref.shape) - ref).max() <= QTOL
        check(ok, "%s: %s's map is not attn's %s (shape %s)" % (name, h["id"], h["kind"], h["map_shape"]))
    cross = [h for h in rep["heads"] if h["kind"] == "cross"][-1]
    drv.execute_script("window.headscope.choose(arguments[0]);", cross["id"])
    d = drv.execute_script("return window.headscope.drawn();")
    inp = rep["input"]
    check(d and d["id"] == cross["id"] and d["rows"] == inp["n_target_tokens"] and d["cols"] == inp["n_tokens"]
          and d["row_tokens"] == inp["decoder_display_tokens"] and d["col_tokens"] == inp["display_tokens"],
          "%s: the cross map drawn: %s" % (name, d and {k: d[k] for k in ("id", "rows", "cols")}))
    # the panel of the chosen head, and the header's numbers
    panel = drv.execute_script("return Array.from(document.querySelectorAll('#hs-selected tr')).map(r => r.cells[1].textContent);")
    want = [fmt(cross[g][k] if g else cross[k]) for k, g in COLS]
    check(panel == want, "%s: panel %s, want %s" % (name, panel, want))
    meta = drv.execute_script("return Array.from(document.querySelectorAll('#hs-meta span')).map(s => s.textContent);")
    m = rep["model"]
    want = ["layers: %d encoder + %d decoder" % (m["n_enc_layer"], m["n_dec_layer"]), "heads per layer: %d" % H,
            "encoder tokens: %d" % inp["n_tokens"], "target tokens: %d" % inp["n_target_tokens"],
            "loss (target NLL): %s" % fmt(rep["loss"]["value"])]
    check(meta == want, "%s: header %s, want %s" % (name, meta, want))
    shot(drv, shots, name, full=True)
    page_clean(drv, name)
