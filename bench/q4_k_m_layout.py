"""Rewrites a Llama GGUF file (headscope convert's F16) with the storage types llama-quantize's
Q4_K_M gives a 22-layer Llama: Q4_K for every matrix, Q6_K for output.weight and for attn_v
and ffn_down in the layers llama.cpp gives more bits (the first and last eighth, every third
between). The blocks are random bytes with small f16 scales: a file of Q4_K_M's layout, size
and decoding cost for the benchmark (make bench's tinyllama rows), not a quantisation of the
input's values. Every key and every other tensor is copied as it is.

    /usr/bin/python3 bench/q4_k_m_layout.py IN.gguf OUT.gguf
"""
import struct
import sys

import numpy as np

GGML_Q4_K, GGML_Q6_K = 12, 14
BLOCK = {GGML_Q4_K: (256, 144), GGML_Q6_K: (256, 210)}
SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def skip_value(buf, pos, vtype):
    if vtype in SCALAR:
        return pos + SCALAR[vtype]
    if vtype == 8:  # string
        (n,) = struct.unpack_from("<Q", buf, pos)
        return pos + 8 + n
    if vtype == 9:  # array: element type, count, elements
        et, count = struct.unpack_from("<IQ", buf, pos)
        pos += 12
        if et in SCALAR:
            return pos + SCALAR[et] * count
        for _ in range(count):
            pos = skip_value(buf, pos, et)
        return pos
    raise ValueError(f"GGUF value type {vtype}")


def read_string(buf, pos):
    (n,) = struct.unpack_from("<Q", buf, pos)
    return bytes(buf[pos + 8:pos + 8 + n]).decode(), pos + 8 + n


def more_bits(layer, n_layer):
    return layer < n_layer // 8 or layer >= 7 * n_layer // 8 or (layer - n_layer // 8) % 3 == 2


def target_type(name, n_layer):
    if name == "output.weight":
        return GGML_Q6_K
    if not name.endswith(".weight") or "norm" in name:
        return None
    if name.startswith("blk."):
        layer = int(name.split(".")[1])
        if (".attn_v." in name or ".ffn_down." in name) and more_bits(layer, n_layer):
            return GGML_Q6_K
    return GGML_Q4_K


def random_blocks(rng, ttype, count):
    elems, size = BLOCK[ttype]
    blocks = rng.integers(0, 256, size=(count // elems, size), dtype=np.uint8)
    if ttype == GGML_Q4_K:  # f16 d, f16 dmin first: x = d sc q - dmin m, |x| below ~0.06
        blocks[:, 0:2] = np.frombuffer(np.float16(6e-5).tobytes(), np.uint8)
        blocks[:, 2:4] = np.frombuffer(np.float16(4e-4).tobytes(), np.uint8)
    else:  # Q6_K: f16 d last: x = d scale (q - 32), scale int8
        blocks[:, 208:210] = np.frombuffer(np.float16(1.5e-5).tobytes(), np.uint8)
    return blocks.tobytes()


def main():
    src, dst = sys.argv[1], sys.argv[2]
    buf = memoryview(open(src, "rb").read())
    magic, version, n_tensors, n_kv = struct.unpack_from("<4sIQQ", buf, 0)
    assert magic == b"GGUF" and version == 3, "a GGUF v3 file"
    pos, align, n_layer = 24, 32, 0
    for _ in range(n_kv):
        key, pos = read_string(buf, pos)
        (vtype,) = struct.unpack_from("<I", buf, pos)
        if key == "general.alignment":
            (align,) = struct.unpack_from("<I", buf, pos + 4)
        if key.endswith(".block_count"):
            (n_layer,) = struct.unpack_from("<I", buf, pos + 4)
        pos = skip_value(buf, pos + 4, vtype)
    kv_bytes = bytes(buf[24:pos])
    tensors = []
    for _ in range(n_tensors):
        name, pos = read_string(buf, pos)
        (nd,) = struct.unpack_from("<I", buf, pos)
        dims = struct.unpack_from(f"<{nd}Q", buf, pos + 4)
        ttype, off = struct.unpack_from("<IQ", buf, pos + 4 + 8 * nd)
        pos += 4 + 8 * nd + 12
        tensors.append([name, dims, ttype, off])
    data0 = (pos + align - 1) // align * align
    ends = sorted(t[3] for t in tensors) + [len(buf) - data0]
    rng = np.random.default_rng(2024)
    out_data, infos, offset = [], [], 0
    for name, dims, ttype, off in tensors:
        count = int(np.prod(dims))
        new = target_type(name, n_layer) if len(dims) == 2 and dims[0] % 256 == 0 else None
        if new is None:
            end = min(e for e in ends if e > off)
            data = bytes(buf[data0 + off:data0 + end])
        else:
            ttype, data = new, random_blocks(rng, new, count)
        pad = (-len(data)) % align
        infos.append(struct.pack("<Q", len(name)) + name.encode() + struct.pack("<I", len(dims)) +
                     struct.pack(f"<{len(dims)}Q", *dims) + struct.pack("<IQ", ttype, offset))
        out_data.append(data + b"\0" * pad)
        offset += len(data) + pad
    head = struct.pack("<4sIQQ", b"GGUF", 3, n_tensors, n_kv) + kv_bytes + b"".join(infos)
    head += b"\0" * ((-len(head)) % align)
    with open(dst, "wb") as f:
        f.write(head)
        for d in out_data:
            f.write(d)


if __name__ == "__main__":
    main()
