"""Writes a GGUF file of Llama-3-8B's shape (32 layers, d 4096, 32 query / 8 KV heads, d_ff
14336, a vocabulary of 128,256, rope base 500,000) in the storage types llama-quantize's
Q4_K_M gives it (bench/q4_k_m_layout.py's rule: Q4_K, Q6_K for output.weight and for attn_v
and ffn_down in the layers given more bits), random blocks with small scales, about 4.9 GB,
written a tensor at a time (no F16 file first, no whole model in memory). The tokenizer is
the donor file's (make bench's TinyLlama F16 GGUF), its vocabulary padded with unused
tokens to 128,256: the row is run on token ids (make bench-8b).

    /usr/bin/python3 bench/llama3_8b_layout.py DONOR.gguf OUT.gguf
"""
import os
import struct
import sys

import numpy as np

from q4_k_m_layout import BLOCK, GGML_Q4_K, read_string, skip_value, target_type, random_blocks

N_LAYER, D, N_HEAD, N_KV, D_FF, VOCAB = 32, 4096, 32, 8, 14336, 128256
GGML_F32, ALIGN = 0, 32


def kv_string(key, value):
    k, v = key.encode(), value.encode()
    return struct.pack("<Q", len(k)) + k + struct.pack("<IQ", 8, len(v)) + v


def kv_u32(key, value):
    k = key.encode()
    return struct.pack("<Q", len(k)) + k + struct.pack("<II", 4, value)


def kv_f32(key, value):
    k = key.encode()
    return struct.pack("<Q", len(k)) + k + struct.pack("<If", 6, value)


def donor_tokenizer(path):
    """The donor's tokenizer.* pairs, the three vocabulary arrays padded to VOCAB."""
    buf = memoryview(open(path, "rb").read(16 << 20))
    _, _, _, n_kv = struct.unpack_from("<4sIQQ", buf, 0)
    pos, out = 24, []
    for _ in range(n_kv):
        start = pos
        key, pos = read_string(buf, pos)
        (vtype,) = struct.unpack_from("<I", buf, pos)
        end = skip_value(buf, pos + 4, vtype)
        if key in ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"):
            et, count = struct.unpack_from("<IQ", buf, pos + 4)
            body = bytes(buf[pos + 16:end])
            extra = VOCAB - count
            if et == 8:
                body += b"".join(struct.pack("<Q", len(s)) + s for s in
                                 (f"<unused_{i}>".encode() for i in range(extra)))
            elif et == 6:
                body += struct.pack(f"<{extra}f", *([0.0] * extra))
            else:  # token types: 5, unused
                body += struct.pack(f"<{extra}i", *([5] * extra))
            k = key.encode()
            out.append(struct.pack("<Q", len(k)) + k + struct.pack("<IIQ", 9, et, VOCAB) + body)
        elif key.startswith("tokenizer."):
            out.append(bytes(buf[start:end]))
        pos = end
    return out


def tensors():
    """(name, dims as GGUF lists them: inner first, type) in llama.cpp's order."""
    t = [("token_embd.weight", (D, VOCAB), GGML_Q4_K)]
    for layer in range(N_LAYER):
        p = f"blk.{layer}."
        t.append((p + "attn_norm.weight", (D,), GGML_F32))
        for name, dims in (("attn_q", (D, D)), ("attn_k", (D, N_KV * D // N_HEAD)),
                           ("attn_v", (D, N_KV * D // N_HEAD)), ("attn_output", (D, D))):
            t.append((p + name + ".weight", dims, target_type(p + name + ".weight", N_LAYER)))
        t.append((p + "ffn_norm.weight", (D,), GGML_F32))
        for name, dims in (("ffn_gate", (D, D_FF)), ("ffn_up", (D, D_FF)), ("ffn_down", (D_FF, D))):
            t.append((p + name + ".weight", dims, target_type(p + name + ".weight", N_LAYER)))
    t.append(("output_norm.weight", (D,), GGML_F32))
    t.append(("output.weight", (D, VOCAB), target_type("output.weight", N_LAYER)))
    return t


def nbytes(dims, ttype):
    count = int(np.prod(dims))
    if ttype == GGML_F32:
        return 4 * count
    elems, size = BLOCK[ttype]
    return count // elems * size


def main():
    donor, dst = sys.argv[1], sys.argv[2]
    kvs = [kv_string("general.architecture", "llama"), kv_string("general.name", "llama-3-8b-layout"),
           kv_u32("general.file_type", 15),  # MOSTLY_Q4_K_M
           kv_u32("llama.context_length", 8192), kv_u32("llama.embedding_length", D),
           kv_u32("llama.block_count", N_LAYER), kv_u32("llama.feed_forward_length", D_FF),
           kv_u32("llama.attention.head_count", N_HEAD), kv_u32("llama.attention.head_count_kv", N_KV),
           kv_u32("llama.rope.dimension_count", D // N_HEAD), kv_f32("llama.rope.freq_base", 500000.0),
           kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5), kv_u32("llama.vocab_size", VOCAB)]
    kvs += donor_tokenizer(donor) + [kv_u32("general.quantization_version", 2)]
    infos, offset = [], 0
    for name, dims, ttype in tensors():
        n = name.encode()
        infos.append(struct.pack("<Q", len(n)) + n + struct.pack("<I", len(dims)) +
                     struct.pack(f"<{len(dims)}Q", *dims) + struct.pack("<IQ", ttype, offset))
        offset += (nbytes(dims, ttype) + ALIGN - 1) // ALIGN * ALIGN
    head = struct.pack("<4sIQQ", b"GGUF", 3, len(infos), len(kvs)) + b"".join(kvs) + b"".join(infos)
    head += b"\0" * ((-len(head)) % ALIGN)
    rng = np.random.default_rng(2025)
    tmp = dst + ".tmp"
    with open(tmp, "wb") as f:
        f.write(head)
        for name, dims, ttype in tensors():
            count = int(np.prod(dims))
            data = np.ones(count, np.float32).tobytes() if ttype == GGML_F32 else \
                random_blocks(rng, ttype, count)
            f.write(data + b"\0" * ((-len(data)) % ALIGN))
    os.replace(tmp, dst)


if __name__ == "__main__":
    main()
