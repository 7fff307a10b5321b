#!/usr/bin/python3
"""headscope's side of tests/llamacpp.sh's T5 part (llama.cpp's t5 and t5encoder).

    llamacpp_t5.py encoder GGUF_PY SRC DST
        DST: llama.cpp's t5encoder file of the encoder of SRC, a t5 file headscope wrote:
        general.architecture t5encoder, the t5.* keys renamed (the decoder's dropped), the
        tokenizer keys and the token_embd / enc.* tensors as they are. Written with llama.cpp's
        gguf-py (GGUF_PY, the folder holding its gguf package). llama-embedding runs such a
        file through the encoder (it refuses an encoder-decoder).
    llamacpp_t5.py enc-embed GGUF TEXT JSON MIN_COS
        the encoder's output (after its final norm) of TEXT, tokenized by headscope from the t5
        file GGUF (with its </s>), against llama-embedding's rows for the t5encoder file (--pooling
        none --embd-normalize -1, JSON); fails when a token's cosine is below MIN_COS.
    llamacpp_t5.py ids JSON IDS
        `headscope tokenize --json`'s ids (JSON) without the </s> it appends against
        llama-tokenize --ids (IDS), which adds none (llama-tokenize passes add_special only with
        a BOS to add); fails when they differ.

Each prints one line; exit status 0 (agreement) or 1.
"""
import ctypes
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import headscope  # noqa: E402
from headscope import _lib  # noqa: E402
from llamacpp import read_embeddings, read_ids  # noqa: E402


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


def cmd_ids(a, b):
    with open(a, encoding="utf-8") as f:
        mine = json.load(f)["ids"]
    theirs = read_ids(b)
    if mine[:-1] == theirs and mine[-1:] == [1]:
        return 0
    print("headscope %s\nllama.cpp %s" % (mine, theirs))
    return 1


def main(argv):
    cmds = {"encoder": (cmd_encoder, 3), "enc-embed": (cmd_enc_embed, 4), "ids": (cmd_ids, 2)}
    if len(argv) < 2 or argv[1] not in cmds or len(argv) - 2 != cmds[argv[1]][1]:
        sys.stderr.write(__doc__)
        return 2
    return cmds[argv[1]][0](*argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
