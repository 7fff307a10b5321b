"""Model's forward-pass calls: token strings, attention maps, logits, losses, top-k
predictions, head masks and knock-outs, activations (hs_forward, hs_activations_run)."""
import collections
import ctypes
import operator

from . import _lib
from ._common import LIB, HeadscopeError, Tokens, check, numpy

_TRACE_OBSERVE = _lib.ATTN_OBSERVER(("hs_trace_observe", LIB))

Prediction = collections.namedtuple("Prediction", ["id", "token", "prob", "logit"])
Prediction.__module__ = "headscope"
Prediction.__doc__ = """One of the k likeliest next tokens at a position: id, token (its
readable form, as to_str_tokens; None without tokenizer files), prob (softmax over the vocabulary, float64), logit."""

# activations(): the names of `headscope dump --what`, each what hs_activations_run keeps
_CAPTURE_OF = {"resid_pre": "resid_pre", "q": "qkv", "k": "qkv", "v": "qkv", "z": "z",
               "pattern": "pattern", "attn_out": "attn_out", "mlp_out": "mlp_out"}


class _Input:
    """Token ids and type ids as C arrays, from a text or from ids."""

    def __init__(self, ids, type_ids):
        self.n = len(ids)
        self.ids = (ctypes.c_int32 * self.n)(*ids)
        self.type_ids = (ctypes.c_int32 * self.n)(*type_ids)
        self.list = list(ids)


class Forward:
    """The methods of Model that run the network (mixed into Model)."""

    def _input(self, x, pair=None, truncate=False):
        """x: a text (str, or bytes as UTF-8), Tokens, or a sequence of token ids (used as
        they are: no special tokens added, as TransformerLens' tokens)."""
        if isinstance(x, (str, bytes)):
            t = self.tokenize(x, pair, truncate)
            return _Input(t.ids, t.type_ids)
        if pair is not None:
            raise TypeError("pair needs a text, not token ids")
        if isinstance(x, Tokens):
            ids, type_ids = list(x.ids), list(x.type_ids)
            if len(type_ids) != len(ids):
                raise ValueError("Tokens has %d ids and %d type ids" % (len(ids), len(type_ids)))
            types = max(1, self.config["type_vocab_size"])
            if any(not 0 <= t < types for t in type_ids):
                raise HeadscopeError(-7, "a type id outside 0..%d" % (types - 1))
        else:
            try:
                ids = [operator.index(i) for i in x]
            except TypeError:
                raise TypeError("expected a text (str or bytes) or a sequence of token ids, "
                                "not %s" % type(x).__name__) from None
            type_ids = [0] * len(ids)
        if not ids:
            raise HeadscopeError(-7, "no tokens")
        if len(ids) > self.n_ctx:
            if not truncate:
                raise HeadscopeError(-7, "%d tokens, more than the model's context of %d; "
                                         "pass truncate=True to keep the first %d"
                                     % (len(ids), self.n_ctx, self.n_ctx))
            ids, type_ids = ids[:self.n_ctx], type_ids[:self.n_ctx]
        vocab = self.config["vocab_size"]
        for i, t in enumerate(ids):
            if not 0 <= t < vocab:
                raise HeadscopeError(-7, "token %d: id %d is outside the vocabulary (0..%d)"
                                     % (i, t, vocab - 1))
        return _Input(ids, type_ids)

    def _head_mask(self, head_mask):
        """A (n_layer, n_head) float32 C-ordered copy of head_mask, or None."""
        if head_mask is None:
            return None
        np = numpy()
        hm = np.ascontiguousarray(head_mask, dtype=np.float32)
        if hm.shape != (self.n_layer, self.n_head):
            raise ValueError("head_mask must have shape (n_layer, n_head) = (%d, %d), not %r"
                             % (self.n_layer, self.n_head, hm.shape))
        if not np.all(np.isfinite(hm)):
            raise ValueError("head_mask holds a NaN or an infinity")
        return hm

    def head_mask(self, off=()):
        """A (n_layer, n_head) float32 mask of ones with 0 at each (layer, head) of off: the
        head_mask of logits, loss and top_k that knocks those heads out (zero ablation)."""
        np = numpy()
        hm = np.ones((self.n_layer, self.n_head), dtype=np.float32)
        for layer, head in off:
            if not (0 <= layer < self.n_layer and 0 <= head < self.n_head):
                raise ValueError("no head %d.%d in a model of %d layers x %d heads"
                                 % (layer, head, self.n_layer, self.n_head))
            hm[layer, head] = 0
        return hm

    def _forward(self, inp, head_mask=None, logits=False, trace=None):
        np = numpy()
        opts = _lib.HsForwardOpts()
        hm = self._head_mask(head_mask)
        if hm is not None:
            opts.head_mask = hm.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        out = None
        if logits:
            out = np.empty((inp.n, self.config["vocab_size"]), dtype=np.float32)
            opts.logits = out.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        if trace is not None:
            opts.on_attn = _TRACE_OBSERVE
            opts.user = ctypes.addressof(trace)
        err = _lib.HsError()
        check(LIB.hs_forward(self._handle(), inp.ids, inp.type_ids, inp.n, ctypes.byref(opts),
                             None, ctypes.byref(err)), err)
        return out

    def to_str_tokens(self, x, pair=None, truncate=False):
        """The readable form of each token of x (a text or token ids), as TransformerLens'
        to_str_tokens: GPT-2's "Ġworld" as " world", SentencePiece's "▁" as a space, bytes
        that are not whole UTF-8 characters as U+FFFD, WordPiece tokens as they are
        ("##s", "[CLS]")."""
        inp = self._input(x, pair, truncate)
        tok = LIB.hs_model_tokenizer(self._handle())
        if not tok:
            raise HeadscopeError(-9, "'%s' has no tokenizer files" % self.path)
        out = []
        buf = ctypes.create_string_buffer(1024)
        for t in inp.list:
            n = LIB.hs_tokenizer_display(tok, t, buf, len(buf))
            if n >= len(buf):  # a longer token: ask again with room for it
                buf = ctypes.create_string_buffer(n + 1)
                n = LIB.hs_tokenizer_display(tok, t, buf, len(buf))
            out.append(buf.raw[:n].decode("utf-8", "replace"))
        return out

    def attention(self, x, pair=None, truncate=False):
        """Every head's attention probabilities on x (a text or token ids): a new numpy
        float32 array of shape (n_layer, n_head, n, n), row = query token, column = key
        token, as `headscope attn` writes them. The forward pass writes each layer's maps
        straight into the array (the library's own recorder, hs_trace_observe, over the
        array's memory): no copy, and no buffer of a layer's maps beside it."""
        np = numpy()
        inp = self._input(x, pair, truncate)
        out = np.empty((self.n_layer, self.n_head, inp.n, inp.n), dtype=np.float32)
        trace = _lib.HsTrace(self.n_layer, self.n_head, inp.n, out.ctypes.data)
        self._forward(inp, trace=trace)
        return out

    def logits(self, x, head_mask=None, pair=None, truncate=False):
        """The language-model head's logits on x (a text or token ids): numpy float32
        (n, vocab_size), row i the prediction at position i (decoders: of token i + 1;
        BERT-like encoders: their masked-LM head at i). head_mask: (n_layer, n_head), each
        head's attention probabilities multiplied by its entry (0 knocks the head out), as
        transformers' head_mask; see head_mask()."""
        return self._forward(self._input(x, pair, truncate), head_mask, logits=True)

    def _nll(self, inp, head_mask):
        if not self.config["causal"]:
            raise HeadscopeError(-8, "loss: the next-token loss needs a causal (decoder) "
                                     "model; '%s' is %s (its masked-LM logits: logits())"
                                 % (self.path, self.family))
        if inp.n < 2:
            raise HeadscopeError(-7, "loss: needs at least 2 tokens")
        np = numpy()
        z = self._forward(inp, head_mask, logits=True)[:-1].astype(np.float64)
        top = z.max(axis=1)
        lse = top + np.log(np.exp(z - top[:, None]).sum(axis=1))
        return lse - z[np.arange(inp.n - 1), inp.list[1:]]

    def loss(self, x, head_mask=None, per_token=False, truncate=False):
        """The next-token loss on x (a text or token ids) of a decoder, in nats: the mean
        over positions 0..n-2 of -log softmax(logits[i])[x[i + 1]] (float64 from the float32
        logits), or with per_token=True the (n - 1,) array of those losses, as
        TransformerLens' loss_per_token. head_mask as in logits()."""
        nll = self._nll(self._input(x, None, truncate), head_mask)
        return nll if per_token else float(nll.mean())

    def knockout(self, x, truncate=False):
        """Single-head knock-outs: a float64 (n_layer, n_head) array, entry [l, h] the mean
        next-token loss on x with head l.h zeroed (head_mask 0) minus the loss with every
        head on: the report's ablation_delta with ablation_kind "zero" (a decoder only)."""
        np = numpy()
        inp = self._input(x, None, truncate)
        base = self._nll(inp, None).mean()
        out = np.empty((self.n_layer, self.n_head))
        for layer in range(self.n_layer):
            for head in range(self.n_head):
                hm = self.head_mask([(layer, head)])
                out[layer, head] = self._nll(inp, hm).mean() - base
        return out

    def top_k(self, x, k=5, head_mask=None, pair=None, truncate=False):
        """The k likeliest tokens at every position of x: a list (one per position) of lists
        of Prediction(id, token, prob, logit), likeliest first (equal logits: smaller id
        first). Decoders: the next token's; encoders: the masked-LM head's at that position.
        token is None for a model without tokenizer files."""
        np = numpy()
        inp = self._input(x, pair, truncate)
        z = self._forward(inp, head_mask, logits=True)
        k = max(1, min(int(k), z.shape[1]))
        tokenizer = LIB.hs_model_tokenizer(self._handle())
        out = []
        for row in z:
            r = row.astype(np.float64)
            p = np.exp(r - r.max())
            p /= p.sum()
            best = np.lexsort((np.arange(len(r)), -r))[:k]
            names = (self.to_str_tokens([int(i) for i in best]) if tokenizer
                     else [None] * len(best))
            out.append([Prediction(int(i), s, float(p[i]), float(row[i]))
                        for i, s in zip(best, names)])
        return out

    def activations(self, x, what="all", pair=None, truncate=False):
        """Every activation of one run on x (hs_activations_run), as TransformerLens'
        run_with_cache names them and `headscope dump` writes them: a dict of numpy float32
        arrays, "blocks.L.hook_resid_pre" (n, d_model), "blocks.L.attn.hook_q" / "hook_z"
        (n, n_head, d_head), "hook_k" / "hook_v" (n, n_kv_head, d_head), "hook_pattern"
        (n_head, n, n), "blocks.L.hook_attn_out" / "hook_mlp_out" (n, d_model), no batch
        axis. what: "all" or a list of "resid_pre", "q", "k", "v", "z", "pattern",
        "attn_out", "mlp_out" (docs/dump.md)."""
        np = numpy()
        names = list(_CAPTURE_OF) if what == "all" else (
            [what] if isinstance(what, str) else list(what))
        for w in names:
            if w not in _CAPTURE_OF:
                raise ValueError("activations: unknown name %r (one of %s, or \"all\")"
                                 % (w, ", ".join(_CAPTURE_OF)))
        mask = 0
        for w in names:
            mask |= _lib.CAPTURE[_CAPTURE_OF[w]]
        inp = self._input(x, pair, truncate)
        act = ctypes.POINTER(_lib.HsActivations)()
        err = _lib.HsError()
        check(LIB.hs_activations_run(self._handle(), inp.ids, inp.type_ids, inp.n, mask,
                                     ctypes.byref(act), ctypes.byref(err)), err)
        try:
            return _cache(np, act.contents, names)
        finally:
            LIB.hs_activations_free(act)


def _cache(np, a, names):
    """Copies the arrays of hs_activations a into a dict named as `headscope dump` names."""
    L, H, n, dm, dh, kv = a.n_layer, a.n_head, a.n, a.d_model, a.d_head, a.n_kv_head
    A, W = H * dh, a.qkv_width

    def arr(ptr, shape):  # a view of the library's memory: each layer is copied from it
        return np.ctypeslib.as_array(ptr, shape=shape)
    out = {}
    for layer in range(L):
        b = "blocks.%d." % layer
        for w in names:
            if w in ("resid_pre", "attn_out", "mlp_out"):
                out[b + "hook_" + w] = arr(getattr(a, w), (L, n, dm))[layer].copy()
            elif w == "pattern":
                out[b + "attn.hook_pattern"] = arr(a.pattern, (L, H, n, n))[layer].copy()
            elif w == "z":
                out[b + "attn.hook_z"] = arr(a.z, (L, n, A))[layer].reshape(n, H, dh).copy()
            else:
                qkv = arr(a.qkv, (L, n, W))[layer]
                start, heads = {"q": (0, H), "k": (A, kv), "v": (A + kv * dh, kv)}[w]
                out[b + "attn.hook_" + w] = np.ascontiguousarray(
                    qkv[:, start:start + heads * dh]).reshape(n, heads, dh)
    return out
