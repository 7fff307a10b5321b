#!/usr/bin/python3
"""The PyTorch side of `make bench`: the same forward pass as headscope's, eager, float32.

    torch_forward.py MODEL_DIR [--sizes 128,512,1024] [--threads 1,2] [--reps 5]

Reads MODEL_DIR/config.json and MODEL_DIR/model.safetensors (a GPT-2 or BERT checkpoint as
fixtures/ref/make_checkpoint.py writes them), runs a forward pass that keeps every layer's
attention probabilities (L tensors of (H, n, n), returned), no LM/MLM head, under
torch.no_grad(), and prints one line per size and thread count:

    row FAMILY N THREADS MEDIAN_SECONDS

Written from the published architectures, not from headscope or transformers: GPT-2
(Radford et al. 2019) is pre-LayerNorm, causal, tanh-approximated GELU, Conv1D weights
stored (in, out), final ln_f; BERT (Devlin et al. 2019) is post-LayerNorm, bidirectional,
erf GELU, word + position + token-type embeddings, Linear weights stored (out, in).
Without torch it prints `notorch REASON` and exits 0, so the bench can go on.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # python3-torch is optional for the bench
    print("notorch %s" % e)
    sys.exit(0)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "gguf"))
from write_gguf import read_safetensors  # noqa: E402  (numpy only)


def read_weights(path):
    """{name: float32 torch.Tensor} from a safetensors file (fixtures/gguf's numpy reader)."""
    return {k: torch.from_numpy(v) for k, v in read_safetensors(path).items()}


def strip_prefix(w, prefixes):
    for p in prefixes:
        if any(k.startswith(p) for k in w):
            return {k[len(p):]: v for k, v in w.items() if k.startswith(p)}
    return w


def attention(q, k, v, n_head, causal):
    """q, k, v: (n, d) -> context (n, d) and probs (n_head, n, n)."""
    n, d = q.shape
    dh = d // n_head
    q = q.view(n, n_head, dh).transpose(0, 1)
    k = k.view(n, n_head, dh).transpose(0, 1)
    v = v.view(n, n_head, dh).transpose(0, 1)
    scores = torch.matmul(q, k.transpose(1, 2)) / math.sqrt(dh)
    if causal:
        mask = torch.ones(n, n, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    ctx = torch.matmul(probs, v).transpose(0, 1).reshape(n, d)
    return ctx, probs


def gpt2_forward(w, cfg, ids):
    L, H = cfg["n_layer"], cfg["n_head"]
    eps = cfg.get("layer_norm_epsilon", 1e-5)
    d = cfg["n_embd"]
    n = ids.shape[0]
    x = w["wte.weight"][ids] + w["wpe.weight"][:n]
    maps = []
    for l in range(L):
        p = "h.%d." % l
        h = F.layer_norm(x, (d,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        qkv = torch.addmm(w[p + "attn.c_attn.bias"], h, w[p + "attn.c_attn.weight"])
        q, k, v = qkv.split(d, dim=1)
        ctx, probs = attention(q, k, v, H, causal=True)
        maps.append(probs)
        x = x + torch.addmm(w[p + "attn.c_proj.bias"], ctx, w[p + "attn.c_proj.weight"])
        h = F.layer_norm(x, (d,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        h = F.gelu(torch.addmm(w[p + "mlp.c_fc.bias"], h, w[p + "mlp.c_fc.weight"]), approximate="tanh")
        x = x + torch.addmm(w[p + "mlp.c_proj.bias"], h, w[p + "mlp.c_proj.weight"])
    x = F.layer_norm(x, (d,), w["ln_f.weight"], w["ln_f.bias"], eps)
    return x, maps


def bert_forward(w, cfg, ids, type_ids=None):
    L, H = cfg["num_hidden_layers"], cfg["num_attention_heads"]
    eps = cfg.get("layer_norm_eps", 1e-12)
    d = cfg["hidden_size"]
    n = ids.shape[0]
    if type_ids is None:
        type_ids = torch.zeros(n, dtype=torch.long)
    e = "embeddings."
    x = w[e + "word_embeddings.weight"][ids] + w[e + "position_embeddings.weight"][:n] \
        + w[e + "token_type_embeddings.weight"][type_ids]
    lw = (lambda s: w[s + ".weight"] if s + ".weight" in w else w[s + ".gamma"])
    lb = (lambda s: w[s + ".bias"] if s + ".bias" in w else w[s + ".beta"])
    x = F.layer_norm(x, (d,), lw(e + "LayerNorm"), lb(e + "LayerNorm"), eps)
    maps = []
    for l in range(L):
        p = "encoder.layer.%d." % l
        s = p + "attention.self."
        q = F.linear(x, w[s + "query.weight"], w[s + "query.bias"])
        k = F.linear(x, w[s + "key.weight"], w[s + "key.bias"])
        v = F.linear(x, w[s + "value.weight"], w[s + "value.bias"])
        ctx, probs = attention(q, k, v, H, causal=False)
        maps.append(probs)
        o = p + "attention.output."
        a = F.linear(ctx, w[o + "dense.weight"], w[o + "dense.bias"])
        x = F.layer_norm(x + a, (d,), lw(o + "LayerNorm"), lb(o + "LayerNorm"), eps)
        h = F.gelu(F.linear(x, w[p + "intermediate.dense.weight"], w[p + "intermediate.dense.bias"]))
        h = F.linear(h, w[p + "output.dense.weight"], w[p + "output.dense.bias"])
        x = F.layer_norm(x + h, (d,), lw(p + "output.LayerNorm"), lb(p + "output.LayerNorm"), eps)
    return x, maps


def load(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    w = read_weights(os.path.join(model_dir, "model.safetensors"))
    if cfg.get("model_type") == "bert":
        return "bert", cfg, strip_prefix(w, ("bert.",)), cfg["max_position_embeddings"], cfg["vocab_size"]
    return "gpt2", cfg, strip_prefix(w, ("transformer.",)), cfg["n_positions"], cfg["vocab_size"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--sizes", default="128,512,1024")
    ap.add_argument("--threads", default="1,%d" % (os.cpu_count() or 1))
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args(argv)
    family, cfg, w, n_ctx, vocab = load(a.model)
    fwd = bert_forward if family == "bert" else gpt2_forward
    n_layer = cfg.get("n_layer", cfg.get("num_hidden_layers"))
    n_head = cfg.get("n_head", cfg.get("num_attention_heads"))
    print("torch %s" % torch.__version__)
    sys.stdout.flush()
    with torch.no_grad():
        for n in (int(s) for s in a.sizes.split(",")):
            if n > n_ctx:
                continue
            ids = torch.tensor([(i * 7919) % vocab for i in range(n)], dtype=torch.long)
            for t in (int(s) for s in a.threads.split(",")):
                torch.set_num_threads(t)
                fwd(w, cfg, ids)  # warm-up
                times = []
                for _ in range(a.reps):
                    t0 = time.perf_counter()
                    out, maps = fwd(w, cfg, ids)
                    times.append(time.perf_counter() - t0)
                    assert len(maps) == n_layer and maps[-1].shape == (n_head, n, n)
                    del out, maps
                print("row %s %d %d %.6f" % (family, n, t, statistics.median(times)))
                sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
