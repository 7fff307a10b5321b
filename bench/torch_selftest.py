#!/usr/bin/python3
"""Checks bench/torch_forward.py's forward passes against the independent float64 goldens in
fixtures/family-golden/ and fixtures/golden/ (maps within 1e-5), so the PyTorch side of
`make bench` is known to compute the same model as headscope before its time is compared.

    torch_selftest.py        # exit 0: every case within 1e-5; 1: a case differs

Cases with a head mask are skipped (the bench runs without one), as are Llama-3 rope scaling
cases (the bench's models have none), families the bench has no PyTorch forward
for, and texts longer than a sliding window. Without torch it prints why and exits 0."""
import csv
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
sys.path.insert(0, HERE)
import torch_forward as tf  # noqa: E402

try:
    import torch
except ImportError as e:
    print("torch_selftest.py: skipped (%s)" % e)
    sys.exit(0)

TOL = 1e-5


def cases():
    """(name, model folder, golden prefix) of every family case without a head mask, and the
    shipped GPT-2 / BERT cases."""
    with open(os.path.join(ROOT, "fixtures/family-golden/cases.tsv")) as f:
        for r in csv.DictReader(f, delimiter="\t"):
            if r["head_mask"] == "no":
                yield r["case"], r["model"], "fixtures/family-golden/" + r["case"]
    yield "tiny_gpt2_common", "fixtures/tiny-gpt2", "fixtures/golden/tiny_gpt2_common"
    yield "tiny_bert_sentence", "fixtures/tiny-bert", "fixtures/golden/tiny_bert_sentence"


def main():
    bad = 0
    for name, model, golden in cases():
        with open(os.path.join(ROOT, model, "config.json")) as f:
            if json.load(f).get("model_type", "gpt2") not in tf.FAMILIES:
                continue  # a family the bench has no PyTorch forward for (Phi-3)
        family, fwd, cfg, w, _, _ = tf.load(os.path.join(ROOT, model))
        if cfg.get("rope_scaling"):
            continue
        ids = torch.from_numpy(np.load(os.path.join(ROOT, golden + ".ids.npy")).astype(np.int64))
        if cfg.get("sliding_window") and ids.shape[0] > cfg["sliding_window"]:
            continue  # the bench's texts stay within a window; so does its forward
        types = os.path.join(ROOT, golden + ".type_ids.npy")
        extra = {"type_ids": torch.from_numpy(np.load(types).astype(np.int64))} \
            if family == "bert" and os.path.exists(types) else {}
        with torch.no_grad():
            _, maps = fwd(w, cfg, ids, **extra)
        ref = np.load(os.path.join(ROOT, golden + ".attn.npy"))
        got = np.stack([m.numpy() for m in maps]).astype(np.float64)
        err = np.abs(ref - got).max() if ref.shape == got.shape else float("inf")
        ok = err <= TOL
        bad += not ok
        print("%-4s %-28s %-10s max|d| %.2e" % ("ok" if ok else "FAIL", name, family, err))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
