"""The API people open Python for (docs/python.md): string tokens, logits, losses, top-k,
head masks and knock-outs, activations, analyze(out_dir=...), show() and its inline page.
References: the float64 goldens in fixtures/golden (fixtures/README.md), GPT-2's byte
table and vocab.json, BERT's vocab.txt, and the command line's own files.

HEADSCOPE_ROOT, HEADSCOPE: as in test_headscope.py.
"""
import html.parser
import json
import os
import re
import subprocess
import tempfile
import unittest

import numpy as np

import headscope

ROOT = os.environ.get("HEADSCOPE_ROOT") or os.path.join(os.path.dirname(__file__), "..", "..")
BIN = os.environ.get("HEADSCOPE") or os.path.join(ROOT, "build", "headscope")
GPT2 = os.path.join(ROOT, "fixtures", "tiny-gpt2")
BERT = os.path.join(ROOT, "fixtures", "tiny-bert")
TRAINED = os.path.join(ROOT, "fixtures", "trained-gpt2")
LLAMA = os.path.join(ROOT, "fixtures", "family-models", "tiny-llama")
GOLDEN = os.path.join(ROOT, "fixtures", "golden")
TEXT = "The cat sat on the mat. The cat sat on the mat."


def golden(case):
    """(the case's JSON, its arrays by name) of fixtures/golden/CASE."""
    with open(os.path.join(GOLDEN, case + ".json")) as f:
        meta = json.load(f)
    arrays = {k: np.load(os.path.join(GOLDEN, v)) for k, v in meta["files"].items()}
    return meta, arrays


def gpt2_bytes():
    """GPT-2's byte-to-character table (Radford et al.'s encoder.py, bytes_to_unicode), the
    other way round: character -> byte."""
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


class StrTokens(unittest.TestCase):
    def test_gpt2_tokens_are_their_bytes_as_text(self):
        # the reference: vocab.json's raw strings mapped back to bytes through GPT-2's table
        with open(os.path.join(GPT2, "vocab.json"), encoding="utf-8") as f:
            vocab = {i: s for s, i in json.load(f).items()}
        table = gpt2_bytes()
        text = "Hello world, café\nnaïve  tabs\tand 10,000 <|endoftext|> it's"
        with headscope.load(GPT2) as m:
            ids = m.tokenize(text).ids
            got = m.to_str_tokens(text)
            self.assertEqual(m.to_str_tokens(ids), got)  # ids give the same
        want = [bytes(table[c] for c in vocab[i]).decode("utf-8") if vocab[i] != "<|endoftext|>"
                else vocab[i] for i in ids]
        self.assertEqual(got, want)
        self.assertEqual(got[:5], ["Hello", " world", ",", " café", "\n"])
        self.assertIn("<|endoftext|>", got)

    def test_gpt2_split_character_is_a_replacement_character(self):
        with headscope.load(GPT2) as m:
            # "\U0001F600" is 4 bytes, two tokens in GPT-2: neither is a whole character
            toks = m.to_str_tokens("\U0001F600")
        self.assertGreater(len(toks), 1)
        self.assertTrue(all("\ufffd" in t for t in toks), toks)

    def test_bert_wordpieces_as_they_are(self):
        with open(os.path.join(BERT, "vocab.txt"), encoding="utf-8") as f:
            vocab = f.read().split("\n")
        with headscope.load(BERT) as m:
            ids = m.tokenize("unaffable cats", pair="a dog").ids
            got = m.to_str_tokens("unaffable cats", pair="a dog")
        self.assertEqual(got, [vocab[i] for i in ids])
        self.assertEqual(got[0], "[CLS]")
        self.assertTrue(any(t.startswith("##") for t in got), got)

    def test_llama_metaspace_and_byte_tokens(self):
        with open(os.path.join(LLAMA, "tokenizer.json"), encoding="utf-8") as f:
            vocab = {i: s for s, i in json.load(f)["model"]["vocab"].items()}
        with headscope.load(LLAMA) as m:
            ids = m.tokenize("Hello world\n").ids
            got = m.to_str_tokens(ids)

        def display(s):  # SentencePiece: "▁" is a space, <0xNN> the byte NN
            b = re.fullmatch(r"<0x([0-9A-F]{2})>", s)
            return bytes([int(b.group(1), 16)]).decode("utf-8", "replace") if b else s.replace("\u2581", " ")
        self.assertEqual(got, [display(vocab[i]) for i in ids])
        self.assertIn("\n", got)


class Logits(unittest.TestCase):
    def check_case(self, model, case, tol=2e-4):
        meta, a = golden(case)
        hm = a.get("head_mask")
        with headscope.load(model) as m:
            z = m.logits(a["ids"], head_mask=hm)
            nll = m.loss(a["ids"], head_mask=hm, per_token=True)
            loss = m.loss(list(a["ids"]), head_mask=hm)
        self.assertEqual(z.shape, (meta["n"], meta["vocab_size"]))
        self.assertEqual(z.dtype, np.float32)
        if "logits" in a:
            np.testing.assert_allclose(z, a["logits"], atol=tol, rtol=0)
        else:
            np.testing.assert_allclose(z[:, meta["logit_cols"]], a["logits_cols"], atol=tol, rtol=0)
        np.testing.assert_allclose(nll, meta["nll"], atol=tol, rtol=0)
        self.assertAlmostEqual(loss, meta["loss"], delta=tol)

    def test_gpt2_logits_and_losses_as_the_float64_reference(self):
        self.check_case(GPT2, "tiny_gpt2_common")
        self.check_case(TRAINED, "trained_gpt2_common")

    def test_head_mask_as_the_reference(self):
        meta, a = golden("tiny_gpt2_common_hm")
        self.assertTrue(np.any(a["head_mask"] != 1))  # the case masks something
        self.check_case(GPT2, "tiny_gpt2_common_hm")

    def test_knockouts_as_the_reference(self):
        for model, case in ((GPT2, "tiny_gpt2_common"), (TRAINED, "trained_gpt2_common")):
            meta, a = golden(case)
            with headscope.load(model) as m:
                got = m.knockout(a["ids"])
            np.testing.assert_allclose(got, meta["importance"]["ablation"], atol=2e-4, rtol=0)

    def test_head_mask_helper_knocks_out_one_head(self):
        with headscope.load(GPT2) as m:
            hm = m.head_mask([(1, 2)])
            self.assertEqual(hm.shape, (2, 4))
            self.assertEqual(hm.sum(), 7)
            self.assertEqual(hm[1, 2], 0)
            base, off = m.loss(TEXT), m.loss(TEXT, head_mask=hm)
            self.assertAlmostEqual(off - base, m.knockout(TEXT)[1, 2], places=5)
            self.assertEqual(m.loss(TEXT, head_mask=np.ones((2, 4))), base)
            with self.assertRaises(ValueError):
                m.head_mask([(2, 0)])
            with self.assertRaises(ValueError):
                m.logits(TEXT, head_mask=np.ones((4, 2)))

    def test_top_k_as_the_reference_logits(self):
        meta, a = golden("gpt2_bf16")
        model = os.path.join(ROOT, meta["model"])
        with headscope.load(model) as m:
            top = m.top_k(a["ids"], k=3)  # a checkpoint without tokenizer files
        ref = a["logits"].astype(np.float64)
        self.assertEqual(len(top), meta["n"])
        for i, preds in enumerate(top):
            order = np.argsort(-ref[i], kind="stable")[:3]
            p = np.exp(ref[i] - ref[i].max())
            p /= p.sum()
            self.assertEqual([q.id for q in preds], list(order), i)
            self.assertEqual([q.token for q in preds], [None] * 3)
            for q in preds:
                self.assertAlmostEqual(q.prob, p[q.id], delta=1e-5)
                self.assertAlmostEqual(q.logit, ref[i, q.id], delta=2e-4)

    def test_top_k_names_the_tokens(self):
        with headscope.load(TRAINED) as m:
            top = m.top_k("The cat sat on the", k=2)
            self.assertEqual(len(top), 5)
            self.assertEqual(top[0][0].token, m.to_str_tokens([top[0][0].id])[0])
            self.assertGreaterEqual(top[0][0].prob, top[0][1].prob)

    def test_bert_logits_but_no_next_token_loss(self):
        meta, a = golden("bert_bf16")
        with headscope.load(os.path.join(ROOT, meta["model"])) as m:
            z = m.logits(headscope.Tokens(list(a["ids"]), [], list(a["type_ids"])))
            np.testing.assert_allclose(z, a["logits"], atol=2e-4, rtol=0)
            with self.assertRaises(headscope.HeadscopeError) as cm:
                m.loss(a["ids"])
        self.assertIn("causal", str(cm.exception))

    def test_bad_ids(self):
        with headscope.load(GPT2) as m:
            with self.assertRaises(headscope.HeadscopeError) as cm:
                m.logits([1, 2, 50257])
            self.assertIn("id 50257 is outside the vocabulary", str(cm.exception))
            with self.assertRaises(headscope.HeadscopeError):
                m.logits([])
            with self.assertRaises(TypeError):
                m.logits(3.5)
            with self.assertRaises(headscope.HeadscopeError):
                m.loss([5])
            with self.assertRaises(ValueError):
                m.logits(headscope.Tokens([1, 2], [], [0]))
            with self.assertRaises(headscope.HeadscopeError):
                m.logits(headscope.Tokens([1, 2], [], [0, 1]))  # GPT-2: one token type


class Activations(unittest.TestCase):
    def test_pattern_as_the_reference_and_z_as_pattern_times_v(self):
        meta, a = golden("tiny_gpt2_common")
        with headscope.load(GPT2) as m:
            c = m.activations(a["ids"])
        for layer in range(meta["L"]):
            p = c["blocks.%d.attn.hook_pattern" % layer]
            self.assertEqual(p.shape, (4, 24, 24))
            np.testing.assert_allclose(p, a["attn"][layer], atol=1e-5, rtol=0)
            v = c["blocks.%d.attn.hook_v" % layer].astype(np.float64)  # (n, head, d_head)
            z = np.einsum("hij,jhd->ihd", p.astype(np.float64), v)
            np.testing.assert_allclose(c["blocks.%d.attn.hook_z" % layer], z, atol=1e-5)

    def test_the_files_of_headscope_dump(self):
        with headscope.load(TRAINED) as m:
            c = m.activations(TEXT)
            only = m.activations(TEXT, what=["pattern", "k"])
            with self.assertRaises(ValueError):
                m.activations(TEXT, what=["attn"])
        self.assertEqual(sorted(only), sorted(k for k in c if k.endswith(("pattern", "hook_k"))))
        with tempfile.TemporaryDirectory() as d:
            subprocess.run([BIN, "dump", TRAINED, "--text", TEXT, "--what", "all", "-o", d, "-q"],
                           check=True)
            with open(os.path.join(d, "manifest.json")) as f:
                files = {e["hook"]: e["file"] for e in json.load(f)["files"]}
            files.pop("input_ids")
            files = {h: f for h, f in files.items() if not h.endswith("norm_pattern")}
            self.assertEqual(sorted(files), sorted(c))
            for hook, f in files.items():
                want = np.load(os.path.join(d, f))
                self.assertEqual(c[hook].dtype, want.dtype, hook)
                self.assertTrue(np.array_equal(c[hook], want), hook)


class Files(unittest.TestCase):
    def test_out_dir_holds_what_analyze_o_writes(self):
        opts = ["--no-ablation"]
        with tempfile.TemporaryDirectory() as d:
            cli, py = os.path.join(d, "cli"), os.path.join(d, "py", "new")
            subprocess.run([BIN, "analyze", GPT2, "--text", TEXT, "-o", cli, "-q", *opts],
                           check=True)
            with headscope.load(GPT2) as m:
                r = m.analyze(TEXT, out_dir=py, ablation=False, hash_files=True)
            with open(os.path.join(cli, "report.json")) as f:
                want = json.load(f)
            self.assertEqual(r["files"], want["files"])
            self.assertEqual(r.out_dir, py)
            listed = set(want["files"])
            got = {os.path.relpath(os.path.join(p, f), py) for p, _, fs in os.walk(py) for f in fs}
            self.assertEqual(got, listed)
            with open(os.path.join(py, "report.json")) as f:
                self.assertEqual(json.load(f), dict(r))
            with open(os.path.join(py, "index.html"), encoding="utf-8") as f:
                self.assertEqual(f.read(), r.page)
            for name in ("heads/L1_H2.png", "gallery.png"):
                with open(os.path.join(cli, name), "rb") as f1, open(os.path.join(py, name), "rb") as f2:
                    self.assertEqual(f1.read(), f2.read(), name)
            for k in ("heads", "model", "input", "similarity"):
                self.assertEqual(r[k], want[k], k)
        with headscope.load(GPT2) as m:
            with self.assertRaises(ValueError):
                m.analyze([TEXT, TEXT], out_dir="x")
            with self.assertRaises(headscope.HeadscopeError):  # the library's option check
                m.analyze(TEXT, out_dir=os.path.join(tempfile.gettempdir(), "hs-unused"), nope=1)


class _Tags(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.open = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        self.open.append(tag)


class Notebook(unittest.TestCase):
    """The fragment a notebook shows, checked as HTML (the page itself is run in a browser
    by tests/browser.sh); and, where Debian's python3-nbclient, python3-nbformat and
    python3-ipykernel are installed, a notebook executed headlessly."""

    def test_a_notebook_executed_headlessly_shows_the_page(self):
        try:
            import nbclient
            import nbformat
            import ipykernel  # the kernel nbclient starts
        except ImportError:
            self.skipTest("nbclient, nbformat or ipykernel is not installed")
        self.assertTrue(ipykernel.__version__)
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(
            "import sys\nsys.path.insert(0, %r)\nimport headscope\n"
            "m = headscope.load(%r)\nm.show(%r, ablation=False)"
            % (os.path.dirname(os.path.dirname(headscope.__file__)), GPT2, TEXT))]
        old = os.environ.get("PYDEVD_DISABLE_FILE_VALIDATION")
        os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"  # ipykernel's debugger: no notes
        try:
            nbclient.NotebookClient(nb, timeout=120, kernel_name="python3").execute()
        finally:
            if old is None:
                del os.environ["PYDEVD_DISABLE_FILE_VALIDATION"]
            else:
                os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = old
        html_out = [o["data"]["text/html"] for o in nb.cells[0].outputs
                    if o.get("output_type") == "execute_result"]
        self.assertEqual(len(html_out), 1, nb.cells[0].outputs)
        self.assertTrue(html_out[0].startswith("<iframe"), html_out[0][:200])
        self.assertIn("srcdoc=\"&lt;!DOCTYPE html&gt;", html_out[0])

    def test_repr_html_is_the_whole_page_offline_in_one_frame(self):
        with headscope.load(GPT2) as m:
            r = m.show(TEXT, ablation=False)
            plain = m.analyze(TEXT, ablation=False)
        self.assertIsInstance(r, dict)
        self.assertIsNone(plain._repr_html_())  # no page: the notebook shows the dict
        frag = r._repr_html_()
        p = _Tags()
        p.feed(frag)
        p.close()
        self.assertEqual([t for t, _ in p.tags], ["iframe"])
        self.assertEqual(p.open, ["iframe"])
        page = p.tags[0][1]["srcdoc"]  # unescaped by the parser: the page itself
        self.assertEqual(page, r.page)
        self.assertTrue(page.lstrip().lower().startswith("<!doctype html>"))
        self.assertTrue(page.rstrip().endswith("</html>"))
        # every script and style inline, nothing fetched from the network
        inner = _Tags()
        inner.feed(page)
        for tag, attrs in inner.tags:
            self.assertFalse(tag == "script" and "src" in attrs, attrs)
            self.assertFalse(tag == "link" and "stylesheet" in attrs.get("rel", ""), attrs)
        self.assertIsNone(re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", page))
        self.assertNotIn("@import", page)
        # the report is in the page: its heads' labels and the text's tokens
        self.assertIn(json.dumps(r["heads"][0]["label"]), page)
        self.assertIn('"schema":"headscope.report/3"', page.replace(" ", ""))
        with tempfile.TemporaryDirectory() as d:
            r.save_page(os.path.join(d, "p.html"))
            with open(os.path.join(d, "p.html"), encoding="utf-8") as f:
                self.assertEqual(f.read(), r.page)
        with self.assertRaises(ValueError):
            plain.save_page("x.html")

    def test_corpus_page(self):
        with headscope.load(GPT2) as m:
            r = m.show([TEXT, "A dog ran home."], ablation=False, gradient=False)
        self.assertEqual(r["corpus"]["n_texts"], 2)
        self.assertTrue(r.page.lstrip().lower().startswith("<!doctype html>"))
        self.assertIn('"n_texts":2', r.page.replace(" ", ""))
        self.assertIn("<iframe", r._repr_html_())
        with headscope.load(GPT2) as m:
            with self.assertRaises(TypeError):
                m.show(3)


if __name__ == "__main__":
    unittest.main()
