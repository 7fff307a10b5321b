#!/usr/bin/python3
"""headscope's side of tests/llamacpp.sh: numbers from the C library (through the ctypes
package in python/) set against what llama.cpp's tools printed for the same GGUF file.

    llamacpp.py loss GGUF TEXTFILE N PPL TOL
        headscope's mean next-token loss (nats) over the first N tokens of TEXTFILE, against
        ln(PPL), the perplexity llama-perplexity printed for the same N tokens; fails when
        they differ by more than TOL.
    llamacpp.py embed GGUF TEXT JSON MIN_COS
        headscope's final hidden states of TEXT against llama-embedding's (--pooling none
        --embd-normalize -1 --embd-output-format json, in JSON); fails when a token's cosine
        similarity is below MIN_COS.
    llamacpp.py embed-ids GGUF IDS JSON MIN_COS
        the same on the ids llama-tokenize --ids printed (IDS, a file whose last line is a
        Python list), for a family whose special tokens headscope's tokenizer of the file
        does not add (RoBERTa's <s> ... </s>).
    llamacpp.py golden IDS_NPY HIDDEN_NPY IDS JSON MAX_ABS MIN_COS
        a rotary decoder's file in llama.cpp against the float64 goldens of the Hugging Face
        folder it was converted from (fixtures/family-golden/<model>_text.*): llama-tokenize's
        ids (IDS) must be IDS_NPY's, and llama-embedding's final hidden states (JSON) within
        MAX_ABS of HIDDEN_NPY, with every token's cosine at least MIN_COS.
    llamacpp.py vocab-cases HEADSCOPE GGUF INP OUT
        `HEADSCOPE tokenize GGUF` on every text of llama.cpp's own tokenizer test (its
        models/ggml-vocab-*.gguf.inp, texts separated by "__ggml_vocab_test__" lines) against
        the ids llama.cpp recorded (.out, one line of ids per text, added without BOS).
    llamacpp.py ids JSON_A JSON_B
        the ids of `headscope tokenize --json` (JSON_A) against llama-tokenize --ids (JSON_B,
        a Python list); fails when they differ.

    llamacpp.py t5-encoder GGUF_PY SRC DST
        DST: llama.cpp's t5encoder file of the encoder of SRC, a t5 file headscope wrote:
        general.architecture t5encoder, the t5.* keys renamed (the decoder's dropped), the
        tokenizer keys and the token_embd / enc.* tensors as they are, written with llama.cpp's
        gguf-py (GGUF_PY, the folder holding its gguf package). llama-embedding runs such a
        file through the encoder (it refuses an encoder-decoder).
    llamacpp.py t5-enc-embed GGUF TEXT JSON MIN_COS
        the encoder's output (after its final norm) of TEXT, tokenized by headscope from the
        t5 file GGUF (with its </s>), against llama-embedding's rows for the t5encoder file
        (--attention non-causal --pooling none --embd-normalize -1, JSON); fails when a
        token's cosine is below MIN_COS.
    llamacpp.py t5-ids JSON IDS
        `headscope tokenize --json`'s ids (JSON) without the </s> it appends against
        llama-tokenize --ids (IDS), which adds none for t5 (llama-tokenize passes add_special
        only with a BOS to add); fails when they differ.

Each prints one line of numbers; exit status 0 (agreement) or 1.
"""
import ctypes
import json
import math
import os
import re
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import headscope  # noqa: E402
from headscope import _lib  # noqa: E402


def forward(model, enc, logits=False, hidden=False):
    """(logits (n, vocab), hidden (n, d)) of one pass; either may be None."""
    n = len(enc.ids)
    ids = (ctypes.c_int32 * n)(*enc.ids)
    types = (ctypes.c_int32 * n)(*enc.type_ids)
    opts = _lib.HsForwardOpts()
    out_l = np.empty((n, model.config["vocab_size"]), dtype=np.float32) if logits else None
    out_h = np.empty((n, model.config["d_model"]), dtype=np.float32) if hidden else None
    f32p = ctypes.POINTER(ctypes.c_float)
    if logits:
        opts.logits = out_l.ctypes.data_as(f32p)
    if hidden:
        opts.hidden = out_h.ctypes.data_as(f32p)
    err = _lib.HsError()
    st = headscope._LIB.hs_forward(model._handle(), ids, types, n, ctypes.byref(opts), None,
                                   ctypes.byref(err))
    if st != 0:
        raise SystemExit("hs_forward: " + err.msg.decode())
    return out_l, out_h


def cmd_loss(path, textfile, n, ppl, tol):
    n, ppl, tol = int(n), float(ppl), float(tol)
    with open(textfile, "rb") as f:
        text = f.read()
    with headscope.load(path) as m:
        enc = m.tokenize(text, truncate=True)
        if len(enc.ids) < n:
            raise SystemExit("%s: only %d tokens" % (textfile, len(enc.ids)))
        enc = headscope.Tokens(enc.ids[:n], enc.tokens[:n], enc.type_ids[:n])
        logits, _ = forward(m, enc, logits=True)
    z = logits.astype(np.float64)
    z -= z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    ids = np.array(enc.ids)
    hs = float(-logp[np.arange(n - 1), ids[1:]].mean())
    ll = math.log(ppl)
    d = abs(hs - ll)
    print("loss over %d tokens: headscope %.7f, llama.cpp %.7f (ln of PPL %.4f), |d| %.1e"
          % (n - 1, hs, ll, ppl, d))
    return 0 if d <= tol else 1


def read_ids(path):
    """The Python list on the last line of llama-tokenize --ids's output."""
    with open(path, encoding="utf-8") as f:
        text = f.read().strip().splitlines()
    return json.loads(text[-1]) if text else []


def read_embeddings(jsonfile, n):
    """The first n rows of llama-embedding's --embd-output-format json. llama.cpp of 2026 logs
    through a queue that its exit may cut short (its issue 22142): the file's tail can be lost,
    so the rows are taken from the complete "embedding" arrays of what is there (the scripts
    pass the text twice, as two prompts, and compare the first)."""
    with open(jsonfile, encoding="utf-8") as f:
        text = f.read()
    try:
        rows = [row["embedding"] for row in json.loads(text)["data"]]
    except ValueError:
        rows = [json.loads("[" + m.group(1) + "]")
                for m in re.finditer(r'"embedding": \[([^\]]*)\]', text)]
    return np.array(rows[:n], dtype=np.float64)


def cmd_embed(path, text, jsonfile, min_cos, ids_file=None):
    min_cos = float(min_cos)
    with headscope.load(path) as m:
        if ids_file:
            ids = read_ids(ids_file)
            enc = headscope.Tokens(ids, [""] * len(ids), [0] * len(ids))
        else:
            enc = m.tokenize(text)
        _, hid = forward(m, enc, hidden=True)
    ref = read_embeddings(jsonfile, len(hid))
    if ref.shape != hid.shape:
        print("embeddings: llama.cpp %s, headscope %s" % (ref.shape, hid.shape))
        return 1
    h = hid.astype(np.float64)
    cos = (h * ref).sum(axis=1) / (np.linalg.norm(h, axis=1) * np.linalg.norm(ref, axis=1))
    print("hidden states of %d tokens: min cosine %.8f, max |d| %.1e"
          % (len(cos), cos.min(), np.abs(h - ref).max()))
    return 0 if cos.min() >= min_cos else 1


def cmd_golden(ids_npy, hidden_npy, ids_file, jsonfile, max_abs, min_cos):
    want = np.load(ids_npy).tolist()
    got = read_ids(ids_file)
    if got != want:
        print("llama-tokenize %s\ngolden         %s" % (got, want))
        return 1
    gold = np.load(hidden_npy).astype(np.float64)
    ref = read_embeddings(jsonfile, len(gold))
    if ref.shape != gold.shape:
        print("embeddings: llama.cpp %s, golden %s" % (ref.shape, gold.shape))
        return 1
    cos = (gold * ref).sum(axis=1) / (np.linalg.norm(gold, axis=1) * np.linalg.norm(ref, axis=1))
    d = float(np.abs(gold - ref).max())
    print("%d ids as the golden's; hidden states: max |d| %.1e, min cosine %.8f"
          % (len(got), d, cos.min()))
    return 0 if d <= float(max_abs) and cos.min() >= float(min_cos) else 1


def cmd_vocab_cases(hs, gguf, inp, out):
    import subprocess
    with open(inp, encoding="utf-8") as f:
        texts = f.read().split("\n__ggml_vocab_test__\n")
    with open(out, encoding="utf-8") as f:
        wants = f.read().split("\n")
    bad = n = 0
    for text, line in zip(texts, wants):
        want = [int(x) for x in line.split()]
        r = subprocess.run([hs, "tokenize", gguf, "--text", text, "--json"], capture_output=True)
        n += 1
        got = json.loads(r.stdout)["ids"] if r.returncode == 0 else None
        if got and want[:1] != got[:1] and len(got) == len(want) + 1:
            got = got[1:]  # llama.cpp's test tokenizes without the BOS the file adds
        if got != want:
            bad += 1
            if bad <= 5:
                print("text %r: headscope %s, llama.cpp %s" % (text[:40], got, want))
    print("%d texts of llama.cpp's tokenizer test: %d differ" % (n, bad))
    return 0 if bad == 0 and n > 0 else 1


def cmd_ids(a, b):
    with open(a, encoding="utf-8") as f:
        mine = json.load(f)["ids"]
    theirs = read_ids(b)
    if mine == theirs:
        return 0
    print("headscope %s\nllama.cpp %s" % (mine, theirs))
    return 1


# ---- T5 --------------------------------------------------------------------------------

def cmd_encoder(gguf_py, src, dst):
    sys.path.insert(0, gguf_py)
    import gguf
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst, "t5encoder")
    skip = {"general.architecture", "t5.decoder_block_count", "t5.decoder_start_token_id"}
    for name, f in r.fields.items():
        if name in skip or name.startswith("GGUF."):
            continue
        key = "t5encoder." + name[3:] if name.startswith("t5.") else name
        t = f.types[0]
        if t == gguf.GGUFValueType.ARRAY:
            sub = f.types[-1]
            val = f.contents()
            if sub == gguf.GGUFValueType.UINT8:
                val = bytes(f.parts[f.data[0]]) if len(f.data) == 1 else bytes(
                    int(f.parts[i][0]) for i in f.data)
                w.add_key_value(key, list(val), t, sub)
            else:
                w.add_key_value(key, val, t, sub)
        else:
            w.add_key_value(key, f.contents(), t)
    for t in r.tensors:
        if t.name == "token_embd.weight" or t.name.startswith("enc."):
            w.add_tensor(t.name, np.array(t.data), raw_shape=list(reversed(t.shape.tolist())),
                         raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return 0


def encoder_states(path, text):
    with headscope.load(path) as m:
        enc = m.tokenize(text)
        n, d = len(enc.ids), m.config["d_model"]
        ids = (ctypes.c_int32 * n)(*enc.ids)
        dec = (ctypes.c_int32 * 1)(0)
        out = np.empty((n, d), dtype=np.float32)
        opts = _lib.HsForwardOpts()
        opts.enc_hidden = out.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        err = _lib.HsError()
        st = headscope._LIB.hs_forward_encdec(m._handle(), ids, n, dec, 1, ctypes.byref(opts),
                                              None, ctypes.byref(err))
        if st != 0:
            raise SystemExit("hs_forward_encdec: " + err.msg.decode())
    return out


def cmd_enc_embed(path, text, jsonfile, min_cos):
    h = encoder_states(path, text).astype(np.float64)
    ref = read_embeddings(jsonfile, len(h))
    if ref.shape != h.shape:
        print("encoder states: llama.cpp %s, headscope %s" % (ref.shape, h.shape))
        return 1
    cos = (h * ref).sum(axis=1) / (np.linalg.norm(h, axis=1) * np.linalg.norm(ref, axis=1))
    print("encoder output of %d tokens: min cosine %.8f, max |d| %.1e"
          % (len(cos), cos.min(), np.abs(h - ref).max()))
    return 0 if cos.min() >= float(min_cos) else 1


def cmd_t5_ids(a, b):
    with open(a, encoding="utf-8") as f:
        mine = json.load(f)["ids"]
    theirs = read_ids(b)
    if mine[:-1] == theirs and mine[-1:] == [1]:
        return 0
    print("headscope %s\nllama.cpp %s" % (mine, theirs))
    return 1


def main(argv):
    cmds = {"loss": (cmd_loss, 5), "embed": (cmd_embed, 4), "ids": (cmd_ids, 2),
            "golden": (cmd_golden, 6), "vocab-cases": (cmd_vocab_cases, 4),
            "embed-ids": (lambda g, i, j, c: cmd_embed(g, None, j, c, i), 4),
            "t5-encoder": (cmd_encoder, 3), "t5-enc-embed": (cmd_enc_embed, 4),
            "t5-ids": (cmd_t5_ids, 2)}
    if len(argv) < 2 or argv[1] not in cmds or len(argv) - 2 != cmds[argv[1]][1]:
        sys.stderr.write(__doc__)
        return 2
    return cmds[argv[1]][0](*argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
