#!/usr/bin/python3
"""The PyTorch side of `make bench`: the same forward pass as headscope's, eager, float32.

    torch_forward.py MODEL_DIR [--sizes 128,512,1024] [--threads 1,2] [--reps 5]

Reads MODEL_DIR/config.json and MODEL_DIR/model.safetensors or its shards (a GPT-2, BERT,
RoBERTa, DistilBERT, GPT-NeoX, Llama, Qwen2, Mistral (texts within its window), Falcon-7B-shaped or GPT-BigCode checkpoint as
fixtures/ref/make_checkpoint.py or families_mqa.py writes them), runs a forward pass that keeps every layer's
attention probabilities (L tensors of (H, n, n), returned), no LM/MLM head, under
torch.no_grad(), and prints one line per size and thread count:

    row FAMILY N THREADS MEDIAN_SECONDS

Written from the published architectures, not from headscope or transformers: GPT-2
(Radford et al. 2019) is pre-LayerNorm, causal, tanh-approximated GELU, Conv1D weights
stored (in, out), final ln_f; BERT (Devlin et al. 2019) is post-LayerNorm, bidirectional,
erf GELU, word + position + token-type embeddings, Linear weights stored (out, in).
RoBERTa (Liu et al. 2019) is BERT with position rows offset by padding_idx + 1; DistilBERT
(Sanh et al. 2019) is BERT without token types, its own tensor names. GPT-NeoX (Black et al.
2022; Pythia, Biderman et al. 2023): pre-LayerNorm, rotary position embeddings (Su et al.
2021, rotate-half form) on the first rotary_pct of each head's dimensions, QKV fused per head,
attention and MLP in parallel from the same input when use_parallel_residual. Llama (Touvron
et al. 2023) and Qwen2: RMSNorm, rotary on every dimension (base rope_theta), grouped-query
attention (num_key_value_heads, each shared by a group of consecutive query heads), SiLU-gated
MLP, no biases except Qwen2's Q/K/V. Falcon-7B (Almazrouei et al. 2023): one LayerNorm feeding
attention and MLP in parallel, rotary on every dimension, multi-query attention (Shazeer 2019:
one K/V head, query_key_value rows [Q | K | V]), exact GELU, no biases; GPT-BigCode
(StarCoder, Allal et al. 2023): GPT-2's block with Linear weights and one K/V head.
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
from write_gguf import read_folder_weights  # noqa: E402  (numpy only)


def read_weights(model_dir):
    """{name: float32 torch.Tensor} from model.safetensors or the shards its index names."""
    return {k: torch.from_numpy(v) for k, v in read_folder_weights(model_dir).items()}


def strip_prefix(w, prefixes):
    for p in prefixes:
        if any(k.startswith(p) for k in w):
            return {k[len(p):]: v for k, v in w.items() if k.startswith(p)}
    return w


def rotate(x, rot, base):
    """Rotary embedding (rotate-half form) on the first rot dimensions of x: (heads, n, dh)."""
    n = x.shape[1]
    inv = 1.0 / (base ** (torch.arange(0, rot, 2, dtype=torch.float32) / rot))
    ang = torch.outer(torch.arange(n, dtype=torch.float32), inv)
    cos, sin = torch.cat((ang, ang), -1).cos(), torch.cat((ang, ang), -1).sin()
    r, keep = x[..., :rot], x[..., rot:]
    half = torch.cat((-r[..., rot // 2:], r[..., :rot // 2]), -1)
    return torch.cat((r * cos + half * sin, keep), -1)


def attention(q, k, v, n_head, causal, n_kv=None, rot=0, base=10000.0):
    """q: (n, n_head dh), k, v: (n, n_kv dh) -> context (n, n_head dh) and probs (n_head, n, n);
    query head h reads key/value head h // (n_head / n_kv)."""
    n = q.shape[0]
    dh = q.shape[1] // n_head
    d = n_head * dh
    n_kv = n_kv or n_head
    q = q.view(n, n_head, dh).transpose(0, 1)
    k = k.view(n, n_kv, dh).transpose(0, 1)
    v = v.view(n, n_kv, dh).transpose(0, 1)
    if rot:
        q, k = rotate(q, rot, base), rotate(k, rot, base)
    if n_kv != n_head:
        k = k.repeat_interleave(n_head // n_kv, dim=0)
        v = v.repeat_interleave(n_head // n_kv, dim=0)
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


def roberta_forward(w, cfg, ids):
    """BERT whose token i reads position row i + padding_idx + 1."""
    off = cfg["pad_token_id"] + 1
    w = dict(w)
    w["embeddings.position_embeddings.weight"] = w["embeddings.position_embeddings.weight"][off:]
    return bert_forward(w, cfg, ids)


def distilbert_forward(w, cfg, ids):
    d, H = cfg["dim"], cfg["n_heads"]
    n = ids.shape[0]
    e = "embeddings."
    x = w[e + "word_embeddings.weight"][ids] + w[e + "position_embeddings.weight"][:n]
    x = F.layer_norm(x, (d,), w[e + "LayerNorm.weight"], w[e + "LayerNorm.bias"], 1e-12)
    lin = (lambda t, s: F.linear(t, w[s + ".weight"], w[s + ".bias"]))
    maps = []
    for l in range(cfg["n_layers"]):
        p = "transformer.layer.%d." % l
        a = p + "attention."
        ctx, probs = attention(lin(x, a + "q_lin"), lin(x, a + "k_lin"), lin(x, a + "v_lin"), H, causal=False)
        maps.append(probs)
        x = F.layer_norm(x + lin(ctx, a + "out_lin"), (d,), w[p + "sa_layer_norm.weight"],
                         w[p + "sa_layer_norm.bias"], 1e-12)
        h = lin(F.gelu(lin(x, p + "ffn.lin1")), p + "ffn.lin2")
        x = F.layer_norm(x + h, (d,), w[p + "output_layer_norm.weight"], w[p + "output_layer_norm.bias"], 1e-12)
    return x, maps


def neox_forward(w, cfg, ids):
    d, H = cfg["hidden_size"], cfg["num_attention_heads"]
    dh, eps = d // H, cfg.get("layer_norm_eps", 1e-5)
    rot = int(dh * cfg.get("rotary_pct", 1.0))
    base = cfg.get("rotary_emb_base", 10000.0)
    n = ids.shape[0]
    lin = (lambda t, s: F.linear(t, w[s + ".weight"], w[s + ".bias"]))
    ln = (lambda t, s: F.layer_norm(t, (d,), w[s + ".weight"], w[s + ".bias"], eps))
    x = w["embed_in.weight"][ids]
    maps = []
    for l in range(cfg["num_hidden_layers"]):
        p = "layers.%d." % l
        qkv = lin(ln(x, p + "input_layernorm"), p + "attention.query_key_value").view(n, H, 3, dh)
        q, k, v = (qkv[:, :, i].reshape(n, d) for i in range(3))
        ctx, probs = attention(q, k, v, H, causal=True, rot=rot, base=base)
        maps.append(probs)
        a = lin(ctx, p + "attention.dense")
        # parallel: x + attn(ln1 x) + mlp(ln2 x); sequential: the MLP reads x + attn(ln1 x)
        mlp_in = ln(x if cfg.get("use_parallel_residual", True) else x + a, p + "post_attention_layernorm")
        x = x + a + lin(F.gelu(lin(mlp_in, p + "mlp.dense_h_to_4h")), p + "mlp.dense_4h_to_h")
    return ln(x, "final_layer_norm"), maps


def llama_forward(w, cfg, ids):
    """Llama and Qwen2 (Q/K/V biases when stored)."""
    d, H = cfg["hidden_size"], cfg["num_attention_heads"]
    kv, eps = cfg.get("num_key_value_heads", H), cfg["rms_norm_eps"]
    dh = cfg.get("head_dim") or d // H
    if cfg.get("rope_scaling"):
        raise SystemExit("torch_forward.py: rope_scaling is not benchmarked")
    if cfg.get("sliding_window") and len(ids) > cfg["sliding_window"]:
        raise SystemExit("torch_forward.py: a text longer than the sliding window is not benchmarked")
    rms = (lambda t, s: t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + eps) * w[s + ".weight"])
    lin = (lambda t, s: F.linear(t, w[s + ".weight"], w.get(s + ".bias")))
    x = w["embed_tokens.weight"][ids]
    maps = []
    for l in range(cfg["num_hidden_layers"]):
        p = "layers.%d." % l
        h = rms(x, p + "input_layernorm")
        a = p + "self_attn."
        ctx, probs = attention(lin(h, a + "q_proj"), lin(h, a + "k_proj"), lin(h, a + "v_proj"), H,
                               causal=True, n_kv=kv, rot=dh, base=cfg.get("rope_theta", 10000.0))
        maps.append(probs)
        x = x + lin(ctx, a + "o_proj")
        h = rms(x, p + "post_attention_layernorm")
        x = x + lin(F.silu(lin(h, p + "mlp.gate_proj")) * lin(h, p + "mlp.up_proj"), p + "mlp.down_proj")
    return rms(x, "norm"), maps


def falcon_forward(w, cfg, ids):
    """Falcon-7B's layout: one norm feeding the parallel attention and MLP, rotary positions,
    one K/V head (multi_query); rows of query_key_value [q .. q k v]."""
    d, H = cfg["hidden_size"], cfg["num_attention_heads"]
    dh, eps = d // H, cfg.get("layer_norm_epsilon", 1e-5)
    if cfg.get("alibi") or cfg.get("new_decoder_architecture") or not cfg.get("parallel_attn", True) \
            or not cfg.get("multi_query", True):
        raise SystemExit("torch_forward.py: only Falcon-7B's layout is benchmarked")
    lin = (lambda t, s: F.linear(t, w[s + ".weight"], w.get(s + ".bias")))
    x = w["word_embeddings.weight"][ids]
    maps = []
    for l in range(cfg["num_hidden_layers"]):
        p = "h.%d." % l
        h = F.layer_norm(x, (d,), w[p + "input_layernorm.weight"], w[p + "input_layernorm.bias"], eps)
        q, k, v = lin(h, p + "self_attention.query_key_value").split((d, dh, dh), dim=1)
        ctx, probs = attention(q, k, v, H, causal=True, n_kv=1, rot=dh, base=cfg.get("rope_theta", 10000.0))
        maps.append(probs)
        x = x + lin(ctx, p + "self_attention.dense") + \
            lin(F.gelu(lin(h, p + "mlp.dense_h_to_4h")), p + "mlp.dense_4h_to_h")
    return F.layer_norm(x, (d,), w["ln_f.weight"], w["ln_f.bias"], eps), maps


def bigcode_forward(w, cfg, ids):
    """GPT-BigCode (StarCoder): GPT-2's block with nn.Linear weights and one K/V head."""
    d, H = cfg["n_embd"], cfg["n_head"]
    dh, eps = d // H, cfg.get("layer_norm_epsilon", 1e-5)
    if not cfg.get("multi_query", True):
        raise SystemExit("torch_forward.py: only multi-query GPT-BigCode is benchmarked")
    lin = (lambda t, s: F.linear(t, w[s + ".weight"], w[s + ".bias"]))
    ln = (lambda t, s: F.layer_norm(t, (d,), w[s + ".weight"], w[s + ".bias"], eps))
    n = ids.shape[0]
    x = w["wte.weight"][ids] + w["wpe.weight"][:n]
    maps = []
    for l in range(cfg["n_layer"]):
        p = "h.%d." % l
        q, k, v = lin(ln(x, p + "ln_1"), p + "attn.c_attn").split((d, dh, dh), dim=1)
        ctx, probs = attention(q, k, v, H, causal=True, n_kv=1)
        maps.append(probs)
        x = x + lin(ctx, p + "attn.c_proj")
        x = x + lin(F.gelu(lin(ln(x, p + "ln_2"), p + "mlp.c_fc"), approximate="tanh"), p + "mlp.c_proj")
    return ln(x, "ln_f"), maps


# model_type: (forward, weight-name prefix, config key of the layer count, of the positions)
FAMILIES = {
    "gpt2": (gpt2_forward, "transformer.", "n_layer", "n_positions"),
    "bert": (bert_forward, "bert.", "num_hidden_layers", "max_position_embeddings"),
    "roberta": (roberta_forward, "roberta.", "num_hidden_layers", "max_position_embeddings"),
    "distilbert": (distilbert_forward, "distilbert.", "n_layers", "max_position_embeddings"),
    "gpt_neox": (neox_forward, "gpt_neox.", "num_hidden_layers", "max_position_embeddings"),
    "llama": (llama_forward, "model.", "num_hidden_layers", "max_position_embeddings"),
    "qwen2": (llama_forward, "model.", "num_hidden_layers", "max_position_embeddings"),
    "falcon": (falcon_forward, "transformer.", "num_hidden_layers", "max_position_embeddings"),
    "gpt_bigcode": (bigcode_forward, "transformer.", "n_layer", "n_positions"),
    # Mistral: Llama's block; its sliding window (4096) is longer than the sizes benchmarked
    "mistral": (llama_forward, "model.", "num_hidden_layers", "max_position_embeddings"),
}


def load(model_dir):
    """(family, forward, config, weights without the family's prefix, positions, vocabulary)."""
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    family = cfg.get("model_type", "gpt2")
    if family not in FAMILIES:
        raise SystemExit("torch_forward.py: model_type %r is not benchmarked" % family)
    fwd, prefix, _, pos_key = FAMILIES[family]
    n_ctx = cfg[pos_key] - (cfg["pad_token_id"] + 1 if family == "roberta" else 0)
    return family, fwd, cfg, strip_prefix(read_weights(model_dir), (prefix,)), n_ctx, cfg["vocab_size"]


def parse_args(argv=None, doc=__doc__):
    """MODEL_DIR [--sizes 128,512,1024] [--threads 1,ALL] [--reps 5], as hs-bench passes them."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--sizes", default="128,512,1024")
    ap.add_argument("--threads", default="1,%d" % (os.cpu_count() or 1))
    ap.add_argument("--reps", type=int, default=5)
    return ap.parse_args(argv)


def time_rows(a, family, n_ctx, vocab, run):
    """Prints `row FAMILY N THREADS MEDIAN` for each size up to n_ctx and thread count of a:
    the median of a.reps calls of run(ids) after a warm-up, ids (n,) fixed token ids."""
    with torch.no_grad():
        for n in (int(s) for s in a.sizes.split(",")):
            if n > n_ctx:
                continue
            ids = torch.tensor([(i * 7919) % vocab for i in range(n)], dtype=torch.long)
            for t in (int(s) for s in a.threads.split(",")):
                torch.set_num_threads(t)
                run(ids)  # warm-up
                times = []
                for _ in range(a.reps):
                    t0 = time.perf_counter()
                    run(ids)
                    times.append(time.perf_counter() - t0)
                print("row %s %d %d %.6f" % (family, n, t, statistics.median(times)))
                sys.stdout.flush()


def main(argv=None):
    a = parse_args(argv)
    family, fwd, cfg, w, n_ctx, vocab = load(a.model)
    n_layer = cfg[FAMILIES[family][2]]
    n_head = cfg.get("n_head", cfg.get("num_attention_heads", cfg.get("n_heads")))
    print("torch %s" % torch.__version__)
    sys.stdout.flush()

    def run(ids):
        out, maps = fwd(w, cfg, ids)
        assert len(maps) == n_layer and maps[-1].shape == (n_head, len(ids), len(ids))

    time_rows(a, family, n_ctx, vocab, run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
