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
import os
import sys

try:
    import torch
    import transformers
except ImportError as e:
    print("notorch %s" % e)
    sys.exit(0)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_forward import parse_args, time_rows  # noqa: E402


def main(argv=None):
    a = parse_args(argv, __doc__)
    model = transformers.AutoModel.from_pretrained(a.model, attn_implementation="eager",
                                                   dtype=torch.float32)
    model.eval()
    cfg = model.config
    n_ctx = getattr(cfg, "n_positions", None) or cfg.max_position_embeddings
    print("torch %s (transformers %s)" % (torch.__version__, transformers.__version__))
    sys.stdout.flush()

    def run(ids):
        out = model(input_ids=ids[None], output_attentions=True)
        assert out.attentions[-1].shape[-1] == len(ids)

    time_rows(a, cfg.model_type, n_ctx, cfg.vocab_size, run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
