#!/usr/bin/python3
"""Clicks through out/index.html pages in headless Chromium (run by tests/browser.sh).

    browser_test.py --shots DIR [--case NAME PAGE ATTN.npy]... [--nomaps PAGE]
                    [--corpus PAGE] [--budget PAGE] [--local PAGE] [--patch PAGE]...
    browser_test.py --make-budget DIR     (writes DIR/report.json and DIR/attn.npy)

Each --case page comes from `headscope analyze`, and ATTN.npy from `headscope attn` on
the same text: the (L, H, n, n) float32 maps, the reference the page's lines and values
are checked against (the page stores them quantised to 1/254). For every case: no
console errors and no request outside file:/data:; the overview table (one row per head,
sorting, sticky head/label columns, negative ablation deltas shown negative, the probe
ablation card and column against the report's probe.ablation); the head
view (the lines drawn for a chosen head and token match the maps, colours, the sentence
filter of pairs, dimmed sinks, keyboard); the model view (one tile per head, sorting and
filtering by a column, a click opens the head); the map view (cells, full labels, the
hover and keyboard readout, the word-level maps). Screenshots of each view are saved in
DIR. Then every number each view shows, read against the report (browser_numbers.py).
The --local page (a model with local and global layers) is read as the cases' overview and
model view are, and its local-layer marks and filters checked (browser_local.py). Each
--patch page (headscope patch's index.html) is read against the patching.json beside
it (browser_patch.py).
Prints one line per failure and ends with "browser: N passed, M failed".
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np

import browser_util
from browser_util import by_css, check, open_page, page_clean, report, shot, start_browser, view
from browser_numbers import (check_corpus_numbers, check_head_view_numbers, check_map_view_numbers,
                             check_model_view_numbers, check_overview_numbers)
from browser_views import (check_head_view, check_kv_card, check_map_view, check_model_view,
                           check_overview, check_probe_card)
from browser_local import check_local
from browser_patch import check_patch_page


def make_budget(out):
    """GPT-2 small's shape (12 x 12 heads) at 512 tokens: a report and causal maps."""
    os.makedirs(out, exist_ok=True)
    L, H, n = 12, 12, 512
    rng = np.random.default_rng(7)
    heads = []
    for k in range(L * H):
        sc = {s: float(rng.random()) for s in ("previous_token", "self", "first_token", "duplicate_token", "induction")}
        heads.append({"id": "%d.%d" % (k // H, k % H), "layer": k // H, "head": k % H,
                      "entropy_nats": float(rng.random() * 4), "entropy_norm": float(rng.random()),
                      "max_weight_mean": float(rng.random()), "ablation_delta": float(rng.normal() * 0.1),
                      "gradient_importance": float(rng.random()), "cluster": int(k % 9),
                      "label": "none", "scores": sc, "text_scores": {"induction": float(rng.random())}})
    words = [i // 2 for i in range(n)]
    toks = ["Ġtok%d" % i if i % 2 == 0 else "en" for i in range(n)]
    rep = {"schema": "headscope.report/2", "model": {"path": "synthetic gpt2-small", "family": "gpt2",
           "n_layer": L, "n_head": H, "d_model": 768, "causal": True},
           "input": {"text": " ".join(toks), "n_tokens": n, "tokens": toks,
                     "display_tokens": [t.replace("Ġ", " ") for t in toks], "ids": list(range(n)),
                     "type_ids": [0] * n, "sinks": [0], "word_ids": words},
           "loss": {"kind": "lm", "value": 3.0}, "heads": heads,
           "similarity": {"matrix": rng.random((L * H, L * H)).round(6).tolist()},
           "diversity": {"per_layer": [1.0] * L, "pairwise_frobenius": rng.random((L * H, L * H)).round(6).tolist()},
           "files": ["report.json", "index.html"]}
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(rep, f)
    a = np.lib.format.open_memmap(os.path.join(out, "attn.npy"), mode="w+", dtype="<f4", shape=(L, H, n, n))
    tri = np.tril(np.ones((n, n), dtype=np.float32))
    for l in range(L):
        x = rng.random((H, n, n), dtype=np.float32) ** 8 * tri
        a[l] = x / x.sum(-1, keepdims=True)
    a.flush()
    del a



def run_case(drv, name, page, npy, shots):
    if not open_page(drv, page):
        return
    rep = report(drv)
    attn = np.load(npy)
    check(attn.shape[2] == rep["input"]["n_tokens"], "%s: maps of %d tokens for %d" % (name, attn.shape[2], rep["input"]["n_tokens"]))
    check_overview(drv, name, rep, shots)
    check_kv_card(drv, name, rep)
    check_probe_card(drv, name, rep)
    check_head_view(drv, name, rep, attn, shots)
    check_model_view(drv, name, rep, shots)
    check_map_view(drv, name, rep, attn, shots)
    # every number of every view against the report
    cols = check_overview_numbers(drv, name, rep)
    check_head_view_numbers(drv, name, rep)
    check_model_view_numbers(drv, name, rep, cols)
    check_map_view_numbers(drv, name, rep)
    check_local(drv, name, rep)
    page_clean(drv, name)


def run_local(drv, page, shots):
    """A model with local and global layers: every number of the overview and the model view
    (the layers line, the panels' attention lines, the "L0 w48" labels), and the local-layer
    marks and filters (browser_local.py); its other views are the other cases' code."""
    name = "local"
    if not open_page(drv, page):
        return
    rep = report(drv)
    cols = check_overview_numbers(drv, name, rep)
    check_model_view_numbers(drv, name, rep, cols)
    check_local(drv, name, rep)
    view(drv, "overview")
    shot(drv, shots, "local-overview", full=True)
    page_clean(drv, name)


def run_nomaps(drv, page, shots):
    name = "nomaps"
    if not open_page(drv, page):
        return
    rep = report(drv)
    check(len(by_css(drv, "#hs-heads tbody tr")) == len(rep["heads"]), "nomaps: table rows")
    check_probe_card(drv, name, rep)
    v = view(drv, "head")
    check("not embedded" in v.text or "No maps" in v.text, "nomaps: head view does not say the maps are absent")
    v = view(drv, "map")
    check(not by_css(drv, "#hs-heatmap"), "nomaps: heatmap drawn without maps")
    page_clean(drv, name)


def run_corpus(drv, page, shots):
    name = "corpus"
    if not open_page(drv, page, "#view=corpus"):
        return
    rep = report(drv)
    co = rep["corpus"]
    heads = co["heads"]
    check(len(by_css(drv, "#hs-heads tbody tr")) == len(heads), "corpus: table rows")
    check_probe_card(drv, name, rep)
    check(drv.find_element("id", "tab-corpus").get_attribute("aria-selected") == "true", "corpus: #view=corpus did not open the corpus view")
    tracks = by_css(drv, "#hs-ci .track")
    check(len(tracks) == len(heads), "corpus: %d CI bars, want %d" % (len(tracks), len(heads)))
    key = drv.execute_script("return document.getElementById('hs-corpus-key').value;")
    means = [heads[int(t.get_attribute("data-head-index"))][key]["mean"] for t in tracks]
    check(means == sorted(means, reverse=True), "corpus: heads not ordered by the mean of %s" % key)
    # each bar's whisker spans its CI: widths in the same ratio as ci_high - ci_low
    spans = drv.execute_script("return Array.prototype.map.call(document.querySelectorAll('#hs-ci .track'), t => { const w = t.querySelector('.w'); return w ? w.getBoundingClientRect().width / t.getBoundingClientRect().width : null; });")
    lo = min(min(h[key]["ci_low"], h[key]["mean"], 0) for h in heads if h[key]["ci_low"] is not None)
    hi = max(max(h[key]["ci_high"], h[key]["mean"], 0) for h in heads if h[key]["ci_high"] is not None)
    bad = [(t.get_attribute("data-head"), s) for t, s in zip(tracks, spans)
           if s is not None and abs(s - (heads[int(t.get_attribute("data-head-index"))][key]["ci_high"] - heads[int(t.get_attribute("data-head-index"))][key]["ci_low"]) / (hi - lo)) > 0.01]
    check(not bad, "corpus: CI bars do not match the report: %s" % bad[:3])
    rows = by_css(drv, "#hs-texts-list tbody tr")
    check(len(rows) == co["n_texts"], "corpus: %d texts listed, want %d" % (len(rows), co["n_texts"]))
    if rows:
        rows[-1].click()
        p = by_css(drv, "#hs-text-panel")
        check(p and len(by_css(drv, "#hs-text-panel .tile")) == len(heads), "corpus: opening a text does not show its heads")
        shot(drv, shots, "corpus", full=True)
    cols = check_overview_numbers(drv, name, rep)
    check_model_view_numbers(drv, name, rep, cols)
    check_corpus_numbers(drv, name, rep, os.path.join(os.path.dirname(page), "texts.jsonl"))
    page_clean(drv, name)


def run_budget(drv, page, shots):
    name = "budget"
    size = os.path.getsize(page)
    check(size < 15e6, "budget: a GPT-2-small page at 512 tokens is %d bytes (over 15 MB)" % size)
    times = []
    for _ in range(2):
        t0 = time.time()
        if not open_page(drv, page):
            return
        times.append(drv.execute_script("return window.headscope.ready;") / 1000.0)
    print("browser: budget: page %.1f MB, opens in %.2f s (the script done, best of 2)" % (size / 1e6, min(times)))
    check(min(times) < 2.0, "budget: the page took %.2f s to open (over 2 s)" % min(times))
    info = drv.execute_script("return JSON.parse(document.getElementById('hs-maps-info').textContent);")
    check(info["count"] < info["of"] and "budget" in info.get("reason", ""), "budget: the page does not say which maps it left out")
    view(drv, "model")
    check(len(by_css(drv, "#hs-grid .tile")) == 144, "budget: model view lacks tiles")
    view(drv, "head")
    check(int(drv.find_element("id", "hs-hv-canvas").get_attribute("data-lines")) > 0, "budget: head view drew nothing")
    view(drv, "map")
    check(by_css(drv, "#hs-heatmap"), "budget: no map view")
    shot(drv, shots, "budget-map-view")
    page_clean(drv, name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--make-budget")
    ap.add_argument("--shots")
    ap.add_argument("--case", nargs=3, action="append", default=[], metavar=("NAME", "PAGE", "NPY"))
    ap.add_argument("--nomaps")
    ap.add_argument("--local", help="the page of a model with local and global layers")
    ap.add_argument("--corpus")
    ap.add_argument("--budget")
    ap.add_argument("--t5", nargs=2, metavar=("PAGE", "NPY_STEM"))
    ap.add_argument("--patch", action="append", default=[], metavar="PAGE", help="a headscope patch index.html")
    args = ap.parse_args()
    if args.make_budget:
        make_budget(args.make_budget)
        return 0
    os.makedirs(args.shots, exist_ok=True)
    profile = tempfile.mkdtemp(prefix="hs-chromium-")
    drv = None
    try:
        drv = start_browser(profile)
        jobs = [(run_case, (name, page, npy, args.shots)) for name, page, npy in args.case]
        if args.local:
            jobs.append((run_local, (args.local, args.shots)))
        if args.nomaps:
            jobs.append((run_nomaps, (args.nomaps, args.shots)))
        if args.corpus:
            jobs.append((run_corpus, (args.corpus, args.shots)))
        if args.budget:
            jobs.append((run_budget, (args.budget, args.shots)))
        if args.t5:  # an encoder-decoder's page: tests/browser_t5.py
            from browser_t5 import run_t5
            jobs.append((run_t5, (args.t5[0], args.t5[1], args.shots)))
        jobs += [(check_patch_page, (page, args.shots)) for page in args.patch]
        for fn, a in jobs:
            try:
                fn(drv, *a)
            except Exception as e:  # a broken page must fail the case, not the run
                check(False, "%s: %s: %s" % (a[0], type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
    except Exception as e:
        check(False, "cannot start headless Chromium: %s" % e)
    finally:
        if drv:
            drv.quit()
        shutil.rmtree(profile, ignore_errors=True)
    print("browser: %d passed, %d failed" % (browser_util.passed, browser_util.failed))
    return 1 if browser_util.failed else 0


if __name__ == "__main__":
    sys.exit(main())
