#!/usr/bin/python3
"""The engine issue's reference row: Hugging Face transformers' own model, eager attention,
output_attentions=True, float32, torch.no_grad(), no LM/MLM head.

    hf_forward.py MODEL_DIR [--sizes 128,512,1024] [--threads 1,16] [--reps 5]

MODEL_DIR is a checkpoint fixtures/ref/make_checkpoint.py wrote (or any Hugging Face folder
that AutoModel opens). Prints the same lines as torch_forward.py, so hs-bench can run it in
its place (--torch bench/hf_forward.py):

    torch VERSION (transformers VERSION)
    row FAMILY N THREADS MEDIAN_SECONDS

Only used where transformers is installed (the lent many-core machine of docs/bench.md);
without it prints `notorch REASON` and exits 0.
"""
import argparse
import os
import statistics
import sys
import time

try:
    import torch
    import transformers
except ImportError as e:
    print("notorch %s" % e)
    sys.exit(0)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--sizes", default="128,512,1024")
    ap.add_argument("--threads", default="1,%d" % (os.cpu_count() or 1))
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args(argv)
    model = transformers.AutoModel.from_pretrained(a.model, attn_implementation="eager",
                                                   torch_dtype=torch.float32)
    model.eval()
    cfg = model.config
    family = cfg.model_type
    n_ctx = getattr(cfg, "n_positions", None) or cfg.max_position_embeddings
    print("torch %s (transformers %s)" % (torch.__version__, transformers.__version__))
    sys.stdout.flush()
    with torch.no_grad():
        for n in (int(s) for s in a.sizes.split(",")):
            if n > n_ctx:
                continue
            ids = torch.tensor([[(i * 7919) % cfg.vocab_size for i in range(n)]])
            for t in (int(s) for s in a.threads.split(",")):
                torch.set_num_threads(t)
                model(input_ids=ids, output_attentions=True)  # warm-up
                times = []
                for _ in range(a.reps):
                    t0 = time.perf_counter()
                    out = model(input_ids=ids, output_attentions=True)
                    times.append(time.perf_counter() - t0)
                    assert out.attentions[-1].shape[-1] == n
                    del out
                print("row %s %d %d %.6f" % (family, n, t, statistics.median(times)))
                sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
