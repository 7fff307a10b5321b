#!/usr/bin/python3
"""The error of --activations q8 against the exact stored-type path, per GGUF file.

    /usr/bin/python3 bench/q8_error.py HEADSCOPE [--ids N] FILE.gguf...

For each file, headscope runs the same input twice, `--weight-memory stored` (the float32
activations: the converted layers' bits) and `--activations q8` (8-bit activations for the
block-quantised layers' products), and this prints the largest |difference| of the
attention maps, of the logits, and the mean next-token loss of each (docs/gguf.md, "8-bit
activations"). The input is a fixed English text, or with --ids N the ids i * 7919 % vocab
for i < N (bench/stored.c's). Needs numpy.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

TEXT = ("The old lighthouse keeper climbed the spiral stairs every evening, counting the steps "
        "as his father had taught him, and lit the great lamp before the fishing boats came home.")


def run(hs, path, tmp, tag, extra, ids):
    out = os.path.join(tmp, tag)
    inp = ["--ids", ids] if ids else ["--text", TEXT]
    subprocess.run([hs, "attn", path, *inp, "-q", "-o", out + ".npy", "--nll", out + ".nll.npy",
                    *extra], check=True)
    maps, nll = np.load(out + ".npy"), np.load(out + ".nll.npy")
    logits = None
    if not ids:  # dump takes a text only
        subprocess.run([hs, "dump", path, "--text", TEXT, "-q", "--what", "logits", "-o",
                        out + ".dump", *extra], check=True)
        logits = np.load(os.path.join(out + ".dump", "logits.npy"))
    return maps, nll, logits


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        print(__doc__)
        sys.exit(2)
    hs, ids_n = args[0], None
    files = args[1:]
    if files[0] == "--ids":
        ids_n, files = int(files[1]), files[2:]
    print("%-34s %6s %12s %12s %10s %10s %10s" % ("file", "tokens", "max|dmap|", "max|dlogit|",
                                                  "loss", "loss q8", "dloss"))
    for path in files:
        with tempfile.TemporaryDirectory() as tmp:
            ids = None
            if ids_n:
                info = subprocess.run([hs, "info", path], check=True, capture_output=True, text=True)
                vocab = int([l for l in info.stdout.splitlines() if l.startswith("vocab:")][0].split()[1])
                ids = os.path.join(tmp, "ids.npy")
                np.save(ids, (np.arange(ids_n, dtype=np.int64) * 7919 % vocab).astype("<i4"))
            m0, n0, l0 = run(hs, path, tmp, "s", ["--weight-memory", "stored"], ids)
            m1, n1, l1 = run(hs, path, tmp, "q", ["--activations", "q8"], ids)
            dl = "%12.3g" % np.max(np.abs(l0 - l1)) if l0 is not None else "%12s" % "-"
            print("%-34s %6d %12.3g %s %10.5f %10.5f %10.2e" % (
                os.path.basename(path), m0.shape[-1], np.max(np.abs(m0 - m1)), dl,
                float(np.mean(n0)), float(np.mean(n1)), float(np.mean(n1) - np.mean(n0))))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
