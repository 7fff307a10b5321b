"""Hooks and patching from Python (docs/python.md, "Hooks and patching"): run_with_cache
against `headscope dump`'s files, run_with_hooks against logits() and the head mask, and
Model.patch against fixtures/golden/patching.json (fixtures/ref/patch_ref.py: float64
PyTorch, independent of the library).

HEADSCOPE_ROOT, HEADSCOPE: as in test_headscope.py.
"""
import json
import os
import subprocess
import tempfile
import unittest

import numpy as np

import headscope

ROOT = os.environ.get("HEADSCOPE_ROOT") or os.path.join(os.path.dirname(__file__), "..", "..")
BIN = os.environ.get("HEADSCOPE") or os.path.join(ROOT, "build", "headscope")
FIX = os.path.join(ROOT, "fixtures")
MODELS = {"trained-gpt2": os.path.join(FIX, "trained-gpt2"),
          "tiny-gpt2": os.path.join(FIX, "tiny-gpt2"),
          "tiny-bert": os.path.join(FIX, "tiny-bert")}
LLAMA = os.path.join(FIX, "family-models", "tiny-llama")
TEXT = "The cat sat on the mat. The cat sat on the mat."
DUMPED = ["resid_pre", "q", "k", "v", "pattern", "z", "attn_out", "mlp_out"]

with open(os.path.join(FIX, "golden", "patching.json")) as _f:
    GOLDEN = json.load(_f)


# the golden's cases run here (the C suite, tests/test_patch.c, runs every one): each
# option's every value, heads and no heads, a position sweep, the [MASK] row, both methods
CASES = {("trained-gpt2", "z", "logit-diff", False, False, "exact"),
         ("trained-gpt2", "z", "loss", True, False, "exact"),
         ("trained-gpt2", "attn_out", "logit-diff", False, False, "exact"),
         ("trained-gpt2", "q", "logit-diff", False, False, "attribution"),
         ("trained-gpt2", "z", "prob", True, False, "attribution"),
         ("tiny-gpt2", "k", "prob", False, True, "exact"),
         ("tiny-bert", "z", "logit-diff", False, False, "exact"),
         ("tiny-bert", "k", "prob", False, True, "attribution")}
PATHS = {("trained-gpt2", "prob", "q", True), ("tiny-bert", "logit-diff", "v", False)}


def flat(x, at=""):
    """{path: leaf} of a JSON value."""
    if isinstance(x, dict):
        return {k: v for key, val in x.items() for k, v in flat(val, at + "." + key).items()}
    if isinstance(x, list):
        return {k: v for i, val in enumerate(x) for k, v in flat(val, "%s[%d]" % (at, i)).items()}
    return {at: x}


def golden_pairs(model):
    return [{"clean_ids": p["clean"], "corrupt_ids": p["corrupt"], "answer_id": p["answer"],
             "wrong_id": p["wrong"]} for p in GOLDEN["pairs"][model]]


class Cache(unittest.TestCase):
    def test_arrays_equal_the_files_of_headscope_dump(self):
        with headscope.load(MODELS["trained-gpt2"]) as m:
            logits, cache = m.run_with_cache(TEXT, names=DUMPED)
            self.assertTrue(np.array_equal(logits, m.logits(TEXT)))  # reading changes no bit
        with tempfile.TemporaryDirectory() as d:
            subprocess.run([BIN, "dump", MODELS["trained-gpt2"], "--text", TEXT, "--what",
                            ",".join(DUMPED), "-o", d, "-q"], check=True)
            with open(os.path.join(d, "manifest.json")) as f:
                files = {e["hook"]: e["file"] for e in json.load(f)["files"]}
            files.pop("input_ids")
            self.assertEqual(sorted(files), sorted(cache))
            self.assertEqual(len(cache), 4 * len(DUMPED))
            for hook, f in files.items():
                want = np.load(os.path.join(d, f))
                self.assertEqual(cache[hook].shape, want.shape, hook)
                self.assertTrue(np.array_equal(cache[hook], want), hook)

    def test_the_sites_dump_reads_through_the_hooks(self):
        new = ["result", "resid_post", "ln_final", "logits"]
        with headscope.load(MODELS["trained-gpt2"]) as m:
            logits, cache = m.run_with_cache(TEXT, names=new)
            plain = m.logits(TEXT)
        with tempfile.TemporaryDirectory() as d:
            subprocess.run([BIN, "dump", MODELS["trained-gpt2"], "--text", TEXT, "--what",
                            ",".join(new), "-o", d, "-q"], check=True)
            with open(os.path.join(d, "manifest.json")) as f:
                man = json.load(f)["files"]
            files = {e["hook"]: e["file"] for e in man if e["hook"] != "input_ids"}
            self.assertEqual(sorted(files), sorted(cache))
            self.assertEqual(len(files), 2 * 4 + 2)
            self.assertNotIn("layer", [e for e in man if e["hook"] == "logits"][0])
            for hook, f in files.items():
                want = np.load(os.path.join(d, f))
                self.assertTrue(np.array_equal(cache[hook], want), hook)
        self.assertTrue(np.array_equal(cache["logits"], logits))
        np.testing.assert_allclose(logits, plain, atol=1e-4, rtol=0)  # result: summed apart
        # each layer's heads' results add up to its attention output less b_O
        with headscope.load(MODELS["trained-gpt2"]) as m:
            _, ref = m.run_with_cache(TEXT, names=["result", "attn_out"])
        for layer in range(4):
            b = "blocks.%d." % layer
            bias = ref[b + "hook_attn_out"] - ref[b + "attn.hook_result"].sum(axis=1)
            np.testing.assert_allclose(bias, np.broadcast_to(bias[0], bias.shape), atol=1e-4)

    def test_every_site_named_and_shaped(self):
        with headscope.load(LLAMA) as m:  # grouped KV heads
            c = m.config
            logits, cache = m.run_with_cache(TEXT)
            n = len(m.tokenize(TEXT).ids)
        L, H, KV, dh, dm = (c["n_layer"], c["n_head"], c["n_kv_head"], c["d_head"],
                            c["d_model"])
        self.assertLess(KV, H)
        want = {"ln_final.hook_normalized": (n, dm), "logits": (n, c["vocab_size"])}
        for layer in range(L):
            b = "blocks.%d." % layer
            want.update({b + "hook_resid_pre": (n, dm), b + "attn.hook_q": (n, H, dh),
                         b + "attn.hook_k": (n, KV, dh), b + "attn.hook_v": (n, KV, dh),
                         b + "attn.hook_pattern": (H, n, n), b + "attn.hook_z": (n, H, dh),
                         b + "attn.hook_result": (n, H, dm), b + "hook_attn_out": (n, dm),
                         b + "hook_mlp_out": (n, dm), b + "hook_resid_post": (n, dm)})
        self.assertEqual({k: v.shape for k, v in cache.items()}, want)
        self.assertTrue(np.array_equal(cache["logits"], logits))
        for layer in range(L - 1):  # the stream leaving a layer enters the next
            self.assertTrue(np.array_equal(cache["blocks.%d.hook_resid_post" % layer],
                                           cache["blocks.%d.hook_resid_pre" % (layer + 1)]))
        p = cache["blocks.1.attn.hook_pattern"].astype(np.float64)
        np.testing.assert_allclose(p.sum(axis=2), 1, atol=1e-5)
        self.assertTrue(np.all(np.triu(p, 1) == 0))


class Hooks(unittest.TestCase):
    def test_a_hook_returning_its_input_leaves_logits_bit_identical(self):
        for path in (MODELS["trained-gpt2"], LLAMA):
            with headscope.load(path) as m:
                base = m.logits(TEXT)
                for site in ("blocks.0.hook_resid_pre", "blocks.1.attn.hook_q",
                             "blocks.1.attn.hook_k", "blocks.0.attn.hook_v",
                             "blocks.1.attn.hook_pattern", "blocks.1.attn.hook_z",
                             "blocks.0.hook_mlp_out", "ln_final.hook_normalized", "logits"):
                    got = m.run_with_hooks(TEXT, hooks=[(site, lambda a, name: a)])
                    self.assertTrue(np.array_equal(got, base), (path, site))

    def test_zeroing_z_of_a_head_is_the_head_mask_knock_out(self):
        def zero(a, name):
            self.assertEqual(name, "blocks.2.attn.hook_z")
            a[:, 1] = 0
            return a
        with headscope.load(MODELS["trained-gpt2"]) as m:
            got = m.run_with_hooks(TEXT, hooks=[("blocks.2.attn.hook_z", zero)])
            want = m.logits(TEXT, head_mask=m.head_mask([(2, 1)]))
            self.assertFalse(np.array_equal(got, m.logits(TEXT)))
        self.assertTrue(np.array_equal(got, want))

    def test_a_replaced_site_is_what_the_pass_goes_on_with(self):
        with headscope.load(MODELS["trained-gpt2"]) as m:
            _, clean = m.run_with_cache("Mary and John went out. John gave it to", names=["k"])
            seen = []
            # k of layer 1 taken from the other run, then read back at a later hook
            got = m.run_with_hooks("Anna and Paul went out. Paul gave it to", hooks=[
                ("blocks.1.attn.hook_k", lambda a, n: clean["blocks.1.attn.hook_k"]),
                ("blocks.1.attn.hook_k", lambda a, n: seen.append(a))])
        self.assertTrue(np.array_equal(seen[0], clean["blocks.1.attn.hook_k"]))
        self.assertEqual(got.shape[1], 50257)

    def test_errors(self):
        with headscope.load(MODELS["tiny-gpt2"]) as m:
            with self.assertRaises(headscope.HeadscopeError) as e:
                m.run_with_hooks(TEXT, hooks=[("blocks.9.attn.hook_z", lambda a, n: None)])
            self.assertIn("blocks.9.attn.hook_z", str(e.exception))
            with self.assertRaises(ZeroDivisionError):  # the hook's own error comes back
                m.run_with_hooks(TEXT, hooks=[("blocks.0.attn.hook_z", lambda a, n: 1 / 0)])
            with self.assertRaises(headscope.HeadscopeError) as e:
                m.run_with_hooks(TEXT, hooks=[("blocks.0.attn.hook_z", lambda a, n: a[:1])])
            self.assertIn("returned shape", str(e.exception))
            with self.assertRaises(ValueError):
                m.run_with_cache(TEXT, names=["attn"])
            self.assertEqual(m.logits(TEXT).shape[0], len(m.tokenize(TEXT).ids))  # usable after


class Patch(unittest.TestCase):
    def check(self, got, case, key, each):
        L, U, P = (len(case["effect"]), len(case["effect"][0]), len(case["effect"][0][0]))
        recs = got[key]
        self.assertEqual(len(recs), L * U * P)
        np.testing.assert_allclose(got["metric"]["clean"], case["clean"], atol=1e-4, rtol=0)
        np.testing.assert_allclose(got["metric"]["corrupt"], case["corrupt"], atol=1e-4, rtol=0)
        for i, rec in enumerate(recs):
            layer, u, p = i // (U * P), i // P % U, i % P
            if key == "paths":
                self.assertEqual(rec["sender"], "%d.%d" % (layer, u))
            else:
                self.assertEqual((rec["layer"], rec.get("position", 0)), (layer, p))
            for k, want in (("effect", case["effect"]), ("ci95", None),
                            ("per_pair", case["patched"])):
                if k == "ci95":
                    g, w = rec["ci95"], [case["ci_lo"][layer][u][p], case["ci_hi"][layer][u][p]]
                else:
                    g, w = rec[k], want[layer][u][p]
                np.testing.assert_allclose(np.array(g, dtype=float), np.array(w, dtype=float),
                                           atol=1e-4, rtol=0, err_msg=str((case.get("site"), k, i)))

    def test_cases_of_the_golden(self):
        seen = 0
        for model, path in MODELS.items():
            pairs = golden_pairs(model)
            with headscope.load(path) as m:
                for case in GOLDEN["cases"]:
                    if (case["model"] != model or (model, case["site"], case["metric"],
                                                   case["noise"], case["each"], case["method"])
                            not in CASES):
                        continue
                    got = m.patch(pairs, metric=case["metric"], site=case["site"],
                                  positions="each" if case["each"] else "all",
                                  direction="noise" if case["noise"] else "denoise",
                                  method=case["method"], resamples=GOLDEN["resamples"],
                                  seed=GOLDEN["seed"])
                    self.assertEqual(got["schema"], "headscope.patching/1")
                    self.assertEqual([p["position"] for p in got["pairs"]],
                                     [p["pos"] for p in GOLDEN["pairs"][model]])
                    self.check(got, case, "positions" if case["each"] else "heads", case["each"])
                    seen += 1
                for case in GOLDEN["paths"]:
                    if (case["model"] != model or
                            (model, case["metric"], case["input"], case["noise"]) not in PATHS):
                        continue
                    r = case["receiver"]
                    got = m.patch(pairs, metric=case["metric"],
                                  direction="noise" if case["noise"] else "denoise",
                                  path="all:%d.%d:%s" % (r[0], r[1], case["input"]),
                                  resamples=GOLDEN["resamples"], seed=GOLDEN["seed"])
                    self.assertEqual({p["receiver"] for p in got["paths"]}, {"%d.%d" % tuple(r)})
                    self.check(got, case, "paths", False)
                    seen += 1
        self.assertEqual(seen, len(CASES) + len(PATHS))

    def test_the_same_report_as_headscope_patch(self):
        with tempfile.TemporaryDirectory() as d:
            pairs = os.path.join(d, "pairs.jsonl")
            with open(pairs, "w") as f:
                f.writelines(json.dumps(p) + "\n" for p in golden_pairs("trained-gpt2"))
            with headscope.load(MODELS["trained-gpt2"]) as m:
                both = m.patch(pairs, method="both", positions="each", site="attn_out")
                one = m.patch(pairs, path="2.3:3.0:k", metric="prob")
            for args, mine in ((["--method", "both", "--positions", "each", "--site", "attn_out"],
                                both),
                               (["--path", "2.3:3.0:k", "--metric", "prob"], one)):
                subprocess.run([BIN, "patch", MODELS["trained-gpt2"], "--pairs", pairs,
                                "-o", d, "-q", "--no-images"] + args, check=True)
                with open(os.path.join(d, "patching.json")) as f:
                    want = json.load(f)
                for k in ("pairs_file", "files"):
                    want.pop(k)
                mine = {k: v for k, v in mine.items() if k != "files"}
                self.assertEqual(flat(mine).keys(), flat(want).keys())
                for k, v in flat(want).items():  # cJSON prints 15 digits where they read
                    if isinstance(v, float):    # back within its epsilon
                        self.assertAlmostEqual(flat(mine)[k], v, delta=1e-13 * max(1, abs(v)),
                                               msg=k)
                    else:
                        self.assertEqual(flat(mine)[k], v, k)

    def test_bad_pairs_say_what_the_command_line_says(self):
        with headscope.load(MODELS["trained-gpt2"]) as m:
            with self.assertRaises(headscope.HeadscopeError) as e:
                m.patch([{"clean": "a b", "corrupt": "c d", "answer": " Mary Ann",
                          "wrong": " x"}])
            self.assertEqual(str(e.exception), "pair 0: answer ' Mary Ann' is 2 tokens "
                                               "('ĠMary', 'ĠAnn'), not one")
            with self.assertRaises(headscope.HeadscopeError) as e:
                m.patch([{"clean": "a b", "corrupt": "c d e", "answer": " x", "wrong": " y"}])
            self.assertEqual(str(e.exception), "pair 0: clean is 2 tokens ('a', 'Ġb'), corrupt "
                                               "3 ('c', 'Ġd', 'Ġe'): they must be as many")
            with self.assertRaises(ValueError):
                m.patch(golden_pairs("trained-gpt2"), site="result")
        with headscope.load(MODELS["tiny-bert"]) as m:
            with self.assertRaises(headscope.HeadscopeError) as e:
                m.patch([{"clean": "a cat", "corrupt": "a dog", "answer": "cat", "wrong": "dog"}])
            self.assertEqual(str(e.exception), "pair 0: the clean prompt has no [MASK] token, "
                                               "where the answer is read")


if __name__ == "__main__":
    unittest.main()
