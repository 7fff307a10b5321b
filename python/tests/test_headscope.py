"""Tests of the Python package (unittest; run by tests/lib.sh from `make test`).

HEADSCOPE_ROOT: the repository (fixtures/, python/pyproject.toml); default: two folders up.
HEADSCOPE: the command-line program whose `attn` output the maps must equal.
"""
import os
import re
import subprocess
import sys
import tempfile
import unittest

import numpy as np

import headscope

ROOT = os.environ.get("HEADSCOPE_ROOT") or os.path.join(os.path.dirname(__file__), "..", "..")
BIN = os.environ.get("HEADSCOPE") or os.path.join(ROOT, "build", "headscope")
GPT2 = os.path.join(ROOT, "fixtures", "tiny-gpt2")
BERT = os.path.join(ROOT, "fixtures", "tiny-bert")
TRAINED = os.path.join(ROOT, "fixtures", "trained-gpt2")
LLAMA = os.path.join(ROOT, "fixtures", "family-models", "tiny-llama")  # BF16, 2 shards
TEXT = "The cat sat on the mat. The cat sat on the mat."


def cli_attn(model, text, pair=None, extra=()):
    """The maps `headscope attn` writes, read back with numpy."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "a.npy")
        cmd = [BIN, "attn", model, "--text", text, "-o", out, "-q", *extra]
        if pair:
            cmd += ["--text-pair", pair]
        subprocess.run(cmd, check=True)
        return np.load(out)


class Kernels(unittest.TestCase):
    def run_import(self, **env):
        e = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
        e.update(env)
        return subprocess.run([sys.executable, "-W", "always", "-c", "import headscope"],
                              env=e, capture_output=True, text=True, check=True).stderr

    def test_kernels_older_than_the_cpu_are_named_with_the_fix(self):
        # as if OpenBLAS had chosen SSE3 Prescott kernels (every x86-64 CPU with AVX runs better)
        with open("/proc/cpuinfo") as f:
            if " avx " not in f.read():
                self.skipTest("a CPU without AVX")
        err = self.run_import(HEADSCOPE_TEST_BLAS_CORE="Prescott")
        self.assertRegex(err, r"OpenBLAS chose its Prescott kernels on a CPU that runs its "
                              r"(Sandybridge|Haswell|SkylakeX) ones .* OPENBLAS_CORETYPE=")
        self.assertNotIn("OpenBLAS chose", self.run_import(
            HEADSCOPE_TEST_BLAS_CORE="Prescott", OPENBLAS_CORETYPE="Prescott"))


class Versions(unittest.TestCase):
    def test_library_package_and_pyproject_agree(self):
        with open(os.path.join(ROOT, "python", "pyproject.toml")) as f:
            pyproject = re.search(r'^version = "([^"]+)"', f.read(), re.M).group(1)
        self.assertEqual(headscope.version(), headscope.__version__)
        self.assertEqual(pyproject, headscope.__version__)
        self.assertRegex(headscope.version(), r"^\d+\.\d+\.\d+$")

    def test_report_carries_the_library_version(self):
        with headscope.load(GPT2) as m:
            r = m.analyze(TEXT, ablation=False, gradient=False)
        self.assertEqual(r["generator"]["version"], headscope.version())


class Metrics(unittest.TestCase):
    def test_metrics_list_names_what_the_report_holds(self):
        with headscope.load(BERT) as m:
            r = m.analyze("The cat sat on the mat.", ablation=False, gradient=False,
                          label_thresholds="induction=0.2")
        ms = headscope.metrics(r)
        self.assertEqual(list(ms)[:3], ["entropy_nats", "entropy_bits", "entropy_norm"])
        self.assertEqual(ms["induction"]["threshold"], 0.2)  # the run's, not the default
        self.assertEqual(ms["previous_token"]["threshold"], 0.3)
        self.assertEqual(ms["induction"]["measured_on"], "probe")
        self.assertEqual(ms["next_token"]["kind"], "head_type")  # BERT: bidirectional
        self.assertEqual(ms["ablation_delta"]["measured_on"], "loss")
        self.assertIsNone(ms["entropy_nats"]["threshold"])
        self.assertEqual(ms["induction"]["attention"], "no_sinks")
        self.assertEqual(ms["sep"]["attention"], "all")
        self.assertEqual(ms["positional_offset"]["param"], "k")
        ks = headscope.head_values(r, "positional_offset", param=True)
        self.assertTrue(all(v is None or (v == int(v) and 1 <= abs(v) <= 8) for v in ks.values()))
        h = r["heads"][3]
        self.assertEqual(headscope.head_values(r, "sep")[(h["layer"], h["head"])],
                         h["sinks"]["sep"])
        with headscope.load(GPT2) as m:
            self.assertNotIn("next_token", headscope.metrics(m.analyze(TEXT, ablation=False)))
        self.assertEqual(headscope.metrics({}), {})

    def test_previous_token_values_against_numpy(self):
        # the score without sinks (GPT-2: position 0), from the maps: rows i >= 2, key 0
        # dropped, each row renormalised over keys 1..i (docs/metrics.md)
        with headscope.load(GPT2) as m:
            r = m.analyze(TEXT, ablation=False, gradient=False)
            maps = m.attention(TEXT).astype(np.float64)
        got = headscope.head_values(r, "previous_token")
        n = maps.shape[-1]
        for (l, h), v in got.items():
            a = maps[l, h]
            rows = [a[i, i - 1] / a[i, 1:i + 1].sum() for i in range(2, n)
                    if a[i, 1:i + 1].sum() >= 1e-3]
            self.assertAlmostEqual(v, float(np.mean(rows)), delta=1e-5, msg=f"{l}.{h}")

    def test_corpus_values_are_the_means(self):
        with headscope.load(GPT2) as m:
            r = m.analyze([TEXT, "A dog ran home."], gradient=False, ablation=False)
        self.assertNotIn("next_token", headscope.metrics(r))  # not aggregated
        e = headscope.head_values(r, "max_weight")
        h = r["corpus"]["heads"][5]
        self.assertEqual(e[(h["layer"], h["head"])], h["max_weight"]["mean"])
        with self.assertRaises(KeyError):
            headscope.head_values(r, "no_such_metric")


class Tokenize(unittest.TestCase):
    def test_gpt2_ids_as_hugging_face(self):
        with headscope.load(GPT2) as m:
            t = m.tokenize("Hello world")
        self.assertEqual(t.ids, [15496, 995])  # GPT2Tokenizer
        self.assertEqual(t.tokens, ["Hello", "\u0120world"])
        self.assertEqual(t.type_ids, [0, 0])

    def test_bert_pair_has_type_ids(self):
        with headscope.load(BERT) as m:
            t = m.tokenize("the cat", pair="a dog")
        self.assertEqual(t.tokens[0], "[CLS]")
        self.assertEqual(t.tokens[-1], "[SEP]")
        self.assertEqual(t.type_ids.count(1), 3)  # a dog [SEP]

    def test_pair_needs_a_pair_template(self):
        with headscope.load(GPT2) as m:
            with self.assertRaises(headscope.HeadscopeError) as cm:
                m.tokenize("the cat", pair="a dog")
        self.assertIn("this model's byte-level BPE tokenizer", str(cm.exception))
        self.assertIn("takes a single text", str(cm.exception))

    def test_longer_than_context_is_refused_or_truncated(self):
        with headscope.load(GPT2) as m:
            long = "word " * (m.n_ctx + 10)
            with self.assertRaises(headscope.HeadscopeError) as cm:
                m.tokenize(long)
            self.assertEqual(cm.exception.status, -7)
            self.assertIn("more than the model's context", str(cm.exception))
            self.assertEqual(len(m.tokenize(long, truncate=True).ids), m.n_ctx)

    def test_invalid_utf8_is_an_error_with_the_message(self):
        with headscope.load(GPT2) as m:
            with self.assertRaises(headscope.HeadscopeError) as cm:
                m.tokenize(b"abc\xff")
        self.assertEqual(cm.exception.status_name, headscope.HeadscopeError(-7, "").status_name)
        self.assertIn("not valid utf-8", str(cm.exception))


class Attention(unittest.TestCase):
    def test_gpt2_maps_equal_the_cli_npy(self):
        with headscope.load(TRAINED) as m:
            a = m.attention(TEXT)
        b = cli_attn(TRAINED, TEXT)
        self.assertEqual(a.dtype, np.float32)
        self.assertEqual(a.shape, b.shape)
        np.testing.assert_array_equal(a, b)  # the same code: bit for bit

    def test_bert_pair_maps_equal_the_cli_npy(self):
        with headscope.load(BERT) as m:
            a = m.attention("the cat sat", pair="on the mat")
        np.testing.assert_array_equal(a, cli_attn(BERT, "the cat sat", "on the mat"))

    def test_rows_are_distributions_and_causal(self):
        with headscope.load(GPT2) as m:
            a = m.attention(TEXT)
        np.testing.assert_allclose(a.sum(-1), 1.0, atol=1e-5)
        self.assertEqual(np.triu(a[0, 0], 1).max(), 0.0)

    def test_array_owns_its_memory(self):
        with headscope.load(GPT2) as m:
            a = m.attention(TEXT)
        self.assertTrue(a.flags.owndata and a.flags.c_contiguous and a.flags.writeable)
        self.assertAlmostEqual(float(a[1, 2].sum()), a.shape[2], places=3)  # after close


class Analyze(unittest.TestCase):
    def test_single_text_report(self):
        with headscope.load(GPT2) as m:
            r = m.analyze(TEXT, ablation=False, similarity="js", layers=[1])
        self.assertEqual(r["schema"], "headscope.report/3")
        self.assertEqual(len(r["heads"]), m.n_head)  # layer 1 only
        self.assertEqual(r["options"]["layers"], [1])
        self.assertFalse(r["options"]["ablation"])

    def test_list_of_texts_is_a_corpus_report(self):
        with headscope.load(GPT2) as m:
            r = m.analyze([TEXT, "A dog ran home.", b"Birds fly south."], gradient=False)
        self.assertEqual(r["corpus"]["n_texts"], 3)
        self.assertEqual(len(r["corpus"]["heads"]), m.n_layer * m.n_head)

    def test_bad_options_raise_with_the_library_message(self):
        with headscope.load(GPT2) as m:
            with self.assertRaises(headscope.HeadscopeError) as cm:
                m.analyze(TEXT, no_such_option=1)
            self.assertEqual(cm.exception.status, -9)
            self.assertEqual(str(cm.exception), "unknown option 'no_such_option'")
            with self.assertRaises(headscope.HeadscopeError) as cm:
                m.analyze(TEXT, similarity="cosine")
            self.assertIn("'similarity'", str(cm.exception))
            with self.assertRaises(headscope.HeadscopeError):
                m.analyze("", ablation=False)
            # the command line's range and message (--cluster-threshold)
            with self.assertRaises(headscope.HeadscopeError) as cm:
                m.analyze(TEXT, cluster_threshold=3)
            self.assertEqual(str(cm.exception),
                             "option 'cluster_threshold': '3' is not a number in [0, 2]")

    def test_analyze_docstring_lists_the_options_of_the_table(self):
        doc = headscope.Model.analyze.__doc__
        keys = re.findall(r"^ {12}([a-z_]+)[ =]", doc, re.M)
        for k in ["ablation", "ablation_kind", "cluster_threshold", "layers", "probe",
                  "probe_half_len", "hash_files", "text_pair", "truncate"]:
            self.assertIn(k, keys)
        self.assertEqual(len(keys), len(set(keys)))
        entry = re.search(r"^ {12}cluster_threshold (.*?)^ {12}\S", doc, re.M | re.S)
        line = " ".join(entry.group(1).split())
        self.assertIn("[--cluster-threshold]", line)
        self.assertIn("default 0.5, in [0, 2]", line)
        self.assertIn("hash_files=True or False (default False)", " ".join(doc.split()))


# tiny-llama: d_model 64, 8 heads of 8, 2 KV heads, d_ff 160 (gated), 3 layers; a layer's
# float32 matrices: QKV 64 x 96, O 64 x 64, [gate | up] 64 x 320, down 160 x 64
LLAMA_CONVERTED = 3 * 4 * (64 * 96 + 64 * 64 + 64 * 320 + 160 * 64)


class WeightMemory(unittest.TestCase):
    def test_the_budget_asked_for_is_in_effect(self):
        for wm, want in ((0, 1), (5000, 5000), (np.int64(70000), 70000),
                         ("all", headscope.WEIGHT_MEMORY_ALL)):
            with headscope.load(LLAMA, weight_memory=wm) as m:
                self.assertEqual(m.weight_memory, want, wm)
                self.assertEqual(m.converted_bytes, LLAMA_CONVERTED)
        self.assertEqual(headscope.WEIGHT_MEMORY_ALL, 2 ** 64 - 1)

    def test_default_is_stored(self):
        # no budget given: the BF16 layers multiplied as stored, as weight_memory="stored"
        saved = os.environ.pop("HEADSCOPE_WEIGHT_MEMORY", None)
        try:
            with headscope.load(LLAMA) as m:
                self.assertTrue(m.stored_weights)
                self.assertEqual(m.weight_memory, 1)
                got = m.attention(TEXT)
            with headscope.load(LLAMA, weight_memory="all") as m:
                self.assertFalse(m.stored_weights)
                np.testing.assert_array_equal(got, m.attention(TEXT))
        finally:
            if saved is not None:
                os.environ["HEADSCOPE_WEIGHT_MEMORY"] = saved

    def test_default_is_the_environment(self):
        saved = os.environ.pop("HEADSCOPE_WEIGHT_MEMORY", None)
        try:
            os.environ["HEADSCOPE_WEIGHT_MEMORY"] = "3M"
            with headscope.load(LLAMA) as m:
                self.assertEqual(m.weight_memory, 3 << 20)
            with headscope.load(LLAMA, weight_memory=4096) as m:  # an explicit budget wins
                self.assertEqual(m.weight_memory, 4096)
            os.environ["HEADSCOPE_WEIGHT_MEMORY"] = "lots"
            with self.assertRaises(headscope.HeadscopeError) as cm:
                headscope.load(LLAMA)
            self.assertEqual(str(cm.exception),
                             "HEADSCOPE_WEIGHT_MEMORY='lots' is not a size (e.g. 512M, 4G or all)")
        finally:
            os.environ.pop("HEADSCOPE_WEIGHT_MEMORY", None)
            if saved is not None:
                os.environ["HEADSCOPE_WEIGHT_MEMORY"] = saved

    def test_bad_budgets_are_refused_before_opening(self):
        for wm, exc in ((-1, ValueError), (2 ** 64, ValueError), ("512M", TypeError),
                        (1.5, TypeError), (True, TypeError)):
            with self.assertRaises(exc, msg=repr(wm)):
                headscope.load(LLAMA, weight_memory=wm)

    def test_stored_layers_give_the_same_maps(self):
        # "stored": no layer converted, the forward pass multiplying by the BF16 layers as
        # stored (hs_open_opts.weight_memory = 2^64 - 2, which an int may not ask for)
        with headscope.load(LLAMA, weight_memory="stored") as m:
            self.assertEqual(m.weight_memory, 1)
            got = m.attention(TEXT)
        with headscope.load(LLAMA, weight_memory="all") as m:
            np.testing.assert_array_equal(got, m.attention(TEXT))
        with self.assertRaises(ValueError):
            headscope.load(LLAMA, weight_memory=2 ** 64 - 2)

    def test_q8_activations_are_the_cli_s(self):
        # activations="q8": the block-quantised layers' products by 8-bit activations, the
        # CLI's --activations q8 bit for bit; BF16 layers keep the float path
        q8 = os.path.join(ROOT, "fixtures", "gguf", "families", "tiny-llama.q8_0.gguf")
        with headscope.load(q8, activations="q8") as m:
            got = m.attention(TEXT)
        np.testing.assert_array_equal(got, cli_attn(q8, TEXT, extra=("--activations", "q8")))
        with headscope.load(q8, weight_memory="stored") as m:
            self.assertGreater(np.max(np.abs(got - m.attention(TEXT))), 0)
        with headscope.load(LLAMA, activations="q8") as m:
            bf16 = m.attention(TEXT)
        with headscope.load(LLAMA, weight_memory="stored") as m:
            np.testing.assert_array_equal(bf16, m.attention(TEXT))
        for kw in (dict(activations="int8"), dict(activations="q8", weight_memory="all")):
            with self.assertRaises(ValueError, msg=repr(kw)):
                headscope.load(q8, **kw)

    def test_results_do_not_depend_on_the_budget(self):
        # every layer converted once at load, or one layer at a time in every pass: the same
        # maps as `headscope attn --weight-memory 0`, the same report (composition, DLA and
        # norm-based values read every layer's weights; gradient and ablation rerun passes)
        opts = dict(composition=True, dla=True, norm_based=True, hash_files=False)
        got = {}
        for wm in ("all", 0):
            with headscope.load(LLAMA, weight_memory=wm) as m:
                r = m.analyze(TEXT, **opts)
                got[wm] = (m.attention(TEXT), r)
        np.testing.assert_array_equal(got[0][0], got["all"][0])
        np.testing.assert_array_equal(got[0][0], cli_attn(LLAMA, TEXT,
                                                          extra=("--weight-memory", "0")))
        r0, ra = got[0][1], got["all"][1]
        self.assertTrue(r0["composition"]["available"])
        self.assertTrue(r0["direct_logit_attribution"]["available"])
        self.assertIsNotNone(r0["heads"][0]["norm_based"]["value_norm"])
        for key in ("loss", "heads", "composition", "direct_logit_attribution", "pruning"):
            self.assertEqual(r0[key], ra[key], key)


class Errors(unittest.TestCase):
    def test_missing_model_raises_with_the_path(self):
        with self.assertRaises(headscope.HeadscopeError) as cm:
            headscope.load(os.path.join(ROOT, "no-such-model"))
        self.assertIn("no-such-model", str(cm.exception))
        self.assertEqual(cm.exception.status_name, "i/o error")

    def test_closed_model_is_refused(self):
        m = headscope.load(GPT2)
        m.close()
        m.close()
        with self.assertRaises(ValueError):
            m.attention(TEXT)


if __name__ == "__main__":
    unittest.main()
