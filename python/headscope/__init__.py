"""headscope: attention maps and per-head analysis of GPT-2 and BERT models.

ctypes bindings over libheadscope.so (the C library; nothing is compiled at install time):

    import headscope
    m = headscope.load("fixtures/tiny-gpt2")
    tok = m.tokenize("The cat sat on the mat.")      # Tokens(ids, tokens, type_ids)
    maps = m.attention("The cat sat on the mat.")    # numpy float32 (n_layer, n_head, n, n)
    report = m.analyze("The cat sat on the mat.")    # report.json as a dict

    m.to_str_tokens(text), m.logits(text), m.loss(text, per_token=True), m.top_k(text),
    m.knockout(text), m.activations(text), m.analyze(text, out_dir="out"), m.show(text),
    m.run_with_cache(text), m.run_with_hooks(text, hooks=[(site, fn)]), m.patch(pairs)

Errors of the library raise HeadscopeError with its message. docs/python.md has the whole
API and a worked example.
"""
import collections
import ctypes
import json
import operator
import os
import textwrap

from . import _lib
from ._common import LIB as _LIB, LIBRARY_PATH, HeadscopeError, Tokens
from ._common import check as _check, to_bytes as _bytes
from ._forward import Forward as _Forward, Prediction
from ._hooks import Hooks as _Hooks
from ._patch import Patch as _Patch
from ._report import Report

__version__ = _lib.PYTHON_VERSION
__all__ = ["load", "Model", "Tokens", "Prediction", "Report", "HeadscopeError", "version",
           "build_commit", "set_threads", "metrics", "head_values", "LIBRARY_PATH",
           "WEIGHT_MEMORY_ALL"]


def version():
    """The C library's release (hs_version())."""
    return _LIB.hs_version().decode()


def build_commit():
    """The git commit the C library was built from, or ""."""
    return _LIB.hs_build_commit().decode()


def set_threads(n):
    """Threads for every later computation (n < 1: one per core), process-wide."""
    _LIB.hs_set_threads(int(n))


WEIGHT_MEMORY_ALL = _lib.HS_WEIGHT_MEMORY_ALL


def _budget(weight_memory):
    """hs_open_opts.weight_memory for load(weight_memory=...): None is the library's default
    (0: HEADSCOPE_WEIGHT_MEMORY, else the layers in their stored type), 0 one layer at a
    time (1 byte, as the CLI's --weight-memory 0), "all" no bound, "stored" no layer
    converted, the forward pass on the stored types."""
    if weight_memory is None:
        return 0
    if isinstance(weight_memory, str) and weight_memory == "all":
        return _lib.HS_WEIGHT_MEMORY_ALL
    if isinstance(weight_memory, str) and weight_memory == "stored":
        return _lib.HS_WEIGHT_MEMORY_STORED
    if isinstance(weight_memory, (bool, str, bytes)):
        raise TypeError("weight_memory must be None, an int (bytes) or \"all\", not %r"
                        % (weight_memory,))
    try:
        n = operator.index(weight_memory)
    except TypeError:
        raise TypeError("weight_memory must be None, an int (bytes) or \"all\", not %r"
                        % (weight_memory,)) from None
    if not 0 <= n <= _lib.HS_WEIGHT_MEMORY_ALL or n == _lib.HS_WEIGHT_MEMORY_STORED:
        raise ValueError("weight_memory must be between 0 and %d bytes, not %d"
                         % (_lib.HS_WEIGHT_MEMORY_ALL, n))
    return n or 1


class Model(_Forward, _Hooks, _Patch):
    """A loaded model; use headscope.load(path). Frees its memory on close() or when
    garbage-collected; usable as a context manager."""

    def __init__(self, path, weight_memory=None, activations="float"):
        if activations not in ("float", "q8"):
            raise ValueError("activations must be \"float\" or \"q8\", not %r" % (activations,))
        if activations == "q8" and weight_memory not in (None, "stored"):
            raise ValueError("activations=\"q8\" multiplies every layer in its stored type: "
                             "weight_memory must be None or \"stored\", not %r" % (weight_memory,))
        flags = _lib.HS_OPEN_Q8_ACTIVATIONS if activations == "q8" else 0
        opts = _lib.HsOpenOpts(flags, _budget(weight_memory))
        err = _lib.HsError()
        handle = ctypes.c_void_p()
        _check(_LIB.hs_model_open2(_bytes(str(path), "path"), ctypes.byref(opts),
                                   ctypes.byref(handle), ctypes.byref(err)), err)
        self._h = handle
        cfg = _LIB.hs_model_config_of(handle).contents
        self.config = {name: getattr(cfg, name) for name, _ in cfg._fields_ if name != "arch"}
        self.family = _LIB.hs_family_name(cfg.family).decode()
        self.config["family"] = self.family
        self.n_layer, self.n_head, self.n_ctx = cfg.n_layer, cfg.n_head, cfg.n_ctx
        self.path = str(path)

    @property
    def weight_memory(self):
        """The weight budget in effect, in bytes (headscope.WEIGHT_MEMORY_ALL: no bound)."""
        return _LIB.hs_model_weight_memory(self._handle())

    @property
    def stored_weights(self):
        """True when the forward pass multiplies by the layers (and the embeddings and LM
        head) in their stored type: the default for a GGUF file or an F16/BF16 folder, and
        weight_memory="stored"; False when they are converted to float32."""
        return bool(_LIB.hs_model_stored_weights(self._handle()))

    @property
    def converted_bytes(self):
        """Bytes of float32 layer weights the model needs converted to keep every layer
        (0 for a float32 checkpoint); above weight_memory, layers are converted again in
        every pass."""
        return _LIB.hs_model_converted_bytes(self._handle())

    def close(self):
        """Frees the model (idempotent)."""
        h, self._h = getattr(self, "_h", None), None
        if h:
            _LIB.hs_model_free(h)

    def __del__(self):
        if _LIB is not None:  # None when the interpreter is tearing the module down
            self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "<headscope.Model %s %s, %d layers x %d heads>" % (
            self.path, self.family, self.n_layer, self.n_head)

    def _handle(self):
        if not self._h:
            raise ValueError("the model is closed")
        return self._h

    def _encode(self, text, pair, truncate):
        h = self._handle()
        tok = _LIB.hs_model_tokenizer(h)
        if not tok:
            raise HeadscopeError(-9, "'%s' has no tokenizer files" % self.path)
        t = _bytes(text, "text")
        p = None if pair is None else _bytes(pair, "pair")
        if not t:
            raise HeadscopeError(-7, "the text is empty")
        enc = _lib.HsEncoding()
        err = _lib.HsError()
        if p is not None:
            _check(_LIB.hs_tokenizer_check_pair(tok, ctypes.byref(err)), err)
        _check(_LIB.hs_tokenizer_encode(tok, t, len(t), p, len(p) if p is not None else 0,
                                        ctypes.byref(enc), ctypes.byref(err)), err)
        if enc.n > self.n_ctx:
            if not truncate:
                n = enc.n
                _LIB.hs_encoding_free(ctypes.byref(enc))
                raise HeadscopeError(-7, "the text is %d tokens, more than the model's context "
                                     "of %d; pass truncate=True to keep the first %d"
                                     % (n, self.n_ctx, self.n_ctx))
            _LIB.hs_encoding_truncate(tok, ctypes.byref(enc), self.n_ctx)
        return enc

    def tokenize(self, text, pair=None, truncate=False):
        """Token ids and strings of text (str, or bytes taken as UTF-8), identical to Hugging
        Face's tokenizer; pair: a second segment (a tokenizer with a pair template: BERT,
        RoBERTa, Llama; others raise HeadscopeError). Returns Tokens(ids, tokens,
        type_ids). Longer than the context: HeadscopeError, or the first n_ctx tokens as
        Hugging Face truncates with truncate=True."""
        enc = self._encode(text, pair, truncate)
        tok = _LIB.hs_model_tokenizer(self._handle())
        try:
            n = enc.n
            return Tokens([enc.ids[i] for i in range(n)],
                          [_LIB.hs_tokenizer_token(tok, enc.ids[i]).decode("utf-8", "surrogateescape")
                           for i in range(n)],
                          [enc.type_ids[i] for i in range(n)])
        finally:
            _LIB.hs_encoding_free(ctypes.byref(enc))

    def analyze(self, texts, out_dir=None, **options):
        """The analysis of `headscope analyze` as a Report: a dict holding report.json
        (schema "headscope.report/3", docs/report-schema.md). texts: one text (str or
        bytes), or a list of texts for corpus statistics (`analyze --corpus`). out_dir (one
        text): also write what `headscope analyze -o out_dir` writes there (the folder is
        created when missing; files of the same names are replaced): heads/L{l}_H{h}.png,
        gallery.png and the other pictures, index.html and report.json; the Report then
        holds the page (.page) too. options: the fields of hs_analyze_opts by name
        (ablation=False, similarity="js", layers=[0, 1], exclude_sinks=True, truncate=True,
        text_pair="...", ...; include/headscope/report.h, hs_analyze_json), listed below.
        NaN is None, as in the file."""
        single = isinstance(texts, (str, bytes))
        if out_dir is not None:
            if not single:
                raise ValueError("analyze: out_dir takes one text; for a corpus folder run "
                                 "`headscope analyze --corpus FILE -o DIR`")
            return self._analyze_files(texts, os.fspath(out_dir), False, options)
        h = self._handle()
        items = [_bytes(t, "text") for t in ([texts] if single else list(texts))]
        if not items:
            raise ValueError("analyze: no texts")
        arr = (ctypes.c_char_p * len(items))(*items)
        lens = (ctypes.c_size_t * len(items))(*[len(t) for t in items])
        out = ctypes.c_void_p()
        err = _lib.HsError()
        opts = json.dumps(options).encode() if options else None
        _check(_LIB.hs_analyze_json(h, arr, lens, len(items), opts, ctypes.byref(out),
                                    ctypes.byref(err)), err)
        try:
            return Report(json.loads(ctypes.string_at(out.value).decode("utf-8")))
        finally:
            _LIB.hs_free(out)

    def show(self, texts, **options):
        """analyze(texts, **options) with the page of `headscope analyze` (index.html) in
        the Report: the last line of a notebook cell, it shows the head view, model view and
        cards inline, offline (docs/python.md). A list of texts: the corpus page, without
        the per-text list. Options as analyze's."""
        if isinstance(texts, (str, bytes)):
            return self._analyze_files(texts, None, True, options)
        r = self.analyze(texts, **options)
        inp = _lib.HsHtmlInput()
        inp.report_json = json.dumps(r).encode("utf-8")
        page, n = ctypes.c_void_p(), ctypes.c_size_t()
        err = _lib.HsError()
        _check(_LIB.hs_html_encode(ctypes.byref(inp), ctypes.byref(page), ctypes.byref(n),
                                   ctypes.byref(err)), err)
        try:
            r.page = ctypes.string_at(page.value, n.value).decode("utf-8")
        finally:
            _LIB.hs_free(page)
        return r

    def _analyze_files(self, text, out_dir, page_only, options):
        """hs_analyze_files: the report and the page, and the files in out_dir."""
        h = self._handle()
        t = _bytes(text, "text")
        if out_dir is not None:
            os.makedirs(out_dir, exist_ok=True)
        report, page, page_len = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_size_t()
        err = _lib.HsError()
        opts = json.dumps(options).encode() if options else None
        _check(_LIB.hs_analyze_files(h, t, len(t), opts, None if out_dir is None else
                                     _bytes(out_dir, "out_dir"), ctypes.byref(report),
                                     ctypes.byref(page), ctypes.byref(page_len),
                                     ctypes.byref(err)), err)
        try:
            r = Report(json.loads(ctypes.string_at(report.value).decode("utf-8")))
            r.page = ctypes.string_at(page.value, page_len.value).decode("utf-8")
        finally:
            _LIB.hs_free(report)
            _LIB.hs_free(page)
        r.out_dir = out_dir
        return r


def metrics(report):
    """The per-head metrics of a report (m.analyze's dict or a loaded report.json), by key:
    the library's metric table as the report lists it ("metrics", docs/report-schema.md),
    each entry a dict with "name", "description", "measured_on" ("text", "probe" or
    "loss"), "attention" ("no_sinks", "all" or None), "kind" ("head_type", "sink",
    "score" or "value"), "threshold" (None when the metric is not a type), "corpus"
    (whether corpus mode aggregates it), "path" (its field in a head object, dotted) and,
    for a detector with a parameter, "param" and "param_path". A report without the list
    (an older headscope) gives {}."""
    return collections.OrderedDict((m["key"], m) for m in report.get("metrics") or [])


def head_values(report, key, param=False):
    """{(layer, head): value} of metric `key` for every head of a report, read at the path
    the report's "metrics" list gives (its parameter's path with param=True); a corpus
    report gives each head's mean over the texts. NaN is None, as in the file. KeyError
    when the report lists no such metric (or no parameter for it)."""
    m = metrics(report)[key]
    path = (m["param_path"] if param else m["path"]).split(".")
    corpus = isinstance(report.get("corpus"), dict)
    out = {}
    for h in (report["corpus"] if corpus else report)["heads"]:
        v = h
        for part in path:
            v = v.get(part) if isinstance(v, dict) else None
        if corpus and isinstance(v, dict):
            v = v.get("mean")
        out[(h["layer"], h["head"])] = v
    return out


def _options_doc():
    """The options of Model.analyze as the library's option table states them
    (hs_analyze_options_json): the one table the command line reads too, so the names,
    ranges and defaults here are the library's. "" with a library that lacks it."""
    f = getattr(_LIB, "hs_analyze_options_json", None)
    if f is None:
        return ""
    f.restype, f.argtypes = ctypes.c_void_p, []
    p = f()
    if not p:
        return ""
    try:
        rows = json.loads(ctypes.string_at(p).decode("utf-8"))
    finally:
        _LIB.hs_free(p)
    lines = ["", "Options (the command line's option of the same meaning in brackets; a value",
             "outside its range raises HeadscopeError):", ""]
    for r in rows:
        flag = " [--%s]" % r["option"] if r["option"] else " [Python only]"
        if r["type"] == "bool":
            text = "%s=True or False (default %s)%s: %s" % (
                r["key"], r["default"].capitalize(), flag, r["help"])
        else:
            kind = "list of layer numbers" if r["type"] == "list" else r["type"]
            text = "%s (%s)%s: %s" % (r["key"], kind, flag, r["help"])
        lines += textwrap.wrap(text, 84, initial_indent="    ", subsequent_indent="        ")
    # indented as the docstring it ends (inspect.cleandoc and help() strip the common indent)
    return "\n" + "\n".join(("        " + x) if x else x for x in lines) + "\n"


Model.analyze.__doc__ += _options_doc()


def load(path, weight_memory=None, activations="float"):
    """Loads a model: a Hugging Face folder (config.json, model.safetensors or
    pytorch_model.bin, tokenizer files) or a GGUF file. Raises HeadscopeError.

    weight_memory: bytes of float32 layer weights an F16, BF16 or quantised checkpoint keeps
    converted at once (hs_model_open2, docs/architecture.md "Memory"): None for the
    library's default (HEADSCOPE_WEIGHT_MEMORY, else "stored": none converted, the layers
    multiplied in their stored type), an int (0: one layer at a time), "all" (no bound) or
    "stored". The results do not depend on it.

    activations: "float" (the default), or "q8": the block-quantised layers' products with
    the activations quantised to 8 bits, as llama.cpp computes them (the CLI's
    --activations q8; every layer in its stored type): faster, not the float32 results
    (docs/gguf.md, "8-bit activations")."""
    return Model(path, weight_memory, activations)
