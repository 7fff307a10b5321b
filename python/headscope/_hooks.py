"""Model's hook calls (docs/python.md, "Hooks"): every named site of one run
(run_with_cache), and functions that read or replace the values at sites (run_with_hooks),
through the library's one hook callback (hs_forward_opts.hook, headscope/hooks.h)."""
import ctypes

from . import _lib
from ._common import LIB, HeadscopeError, check, numpy

SITE_COUNT = 12  # HS_SITE_COUNT
SITE_KEYS = [LIB.hs_site_get(s).contents.key.decode() for s in range(SITE_COUNT)]


def _site_name(site, layer):
    """The site's TransformerLens name: "blocks.3.attn.hook_z", "ln_final.hook_normalized"."""
    info = LIB.hs_site_get(site).contents
    name = info.name.decode()
    return name % layer if info.per_layer else name


def _values(np, call):
    """A writable (rows, cols) view of the pass's own buffer at a hook call (row r at
    x + r * ld): valid during the call only."""
    c = call.contents
    flat = np.ctypeslib.as_array(c.x, shape=((c.rows - 1) * c.ld + c.cols,))
    return np.lib.stride_tricks.as_strided(flat, shape=(c.rows, c.cols), strides=(c.ld * 4, 4))


class Hooks:
    """The methods of Model that run the network with hooks (mixed into Model)."""

    def _shape(self, site, n):
        dims = (ctypes.c_int * 3)()
        rank = LIB.hs_site_shape(LIB.hs_model_config_of(self._handle()), site, n, dims)
        return tuple(dims[:rank])

    def _hooked(self, inp, sites, fn):
        """hs_forward on inp with fn(site, layer, values view, shape) at every site in the
        set sites: fn returns None to go on, or a new (rows, cols) float32 array to write
        back. The logits (n, vocab) are returned (None without a language-model head). An
        exception fn raises stops the pass and is raised again here."""
        np = numpy()
        raised = []

        def call(_user, c):
            try:
                if c.contents.copy != 0:
                    return 0
                v = _values(np, c)
                new = fn(c.contents.site, c.contents.layer, v,
                         self._shape(c.contents.site, c.contents.n))
                if new is not None:
                    v[...] = new
                return 0
            except BaseException as e:  # noqa: B902: raised again after the pass
                raised.append(e)
                return 1
        cb = _lib.HOOK_FN(call)
        opts = _lib.HsForwardOpts()
        opts.hook = ctypes.cast(cb, ctypes.c_void_p)
        opts.hook_sites = sum(1 << s for s in sites)
        logits = None
        if self.config["has_lm_head"]:
            logits = np.empty((inp.n, self.config["vocab_size"]), dtype=np.float32)
            opts.logits = logits.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        err = _lib.HsError()
        st = LIB.hs_forward(self._handle(), inp.ids, inp.type_ids, inp.n, ctypes.byref(opts),
                            None, ctypes.byref(err))
        if raised:
            raise raised[0]
        check(st, err)
        return logits

    def _sites(self, names):
        """Site numbers of short keys (None: every site)."""
        if names is None:
            return list(range(SITE_COUNT))
        out = []
        for k in ([names] if isinstance(names, str) else names):
            if k not in SITE_KEYS:
                raise ValueError("unknown site %r (one of %s)" % (k, ", ".join(SITE_KEYS)))
            out.append(SITE_KEYS.index(k))
        return out

    def run_with_cache(self, x, names=None, pair=None, truncate=False):
        """One run on x (a text or token ids) keeping every hook site's values, as
        TransformerLens's run_with_cache: (logits, cache), logits numpy float32 (n,
        vocab_size) (None for a model without a language-model head), cache a dict from
        the site's name ("blocks.3.attn.hook_z", "ln_final.hook_normalized", "logits") to
        a new numpy float32 array of the site's shape (docs/patching.md lists them: q, k,
        v, z, result (n, heads, d_head or d_model), pattern (n_head, n, n), the stream's
        sites (n, d_model)), no batch axis. names: the short keys to keep ("z",
        "resid_pre", ...; None: all). Keeping result makes each layer's attention output
        the sum of its heads' results: the logits may then differ from logits()'s in the
        last bits."""
        sites = self._sites(names)
        inp = self._input(x, pair, truncate)
        cache = {}

        def keep(site, layer, v, shape):
            cache[_site_name(site, layer)] = v.copy().reshape(shape)
        logits = self._hooked(inp, sites, keep)
        return logits, cache

    def run_with_hooks(self, x, hooks=(), pair=None, truncate=False):
        """One run on x (a text or token ids) with hooks: a list of (site, fn), site a
        name as run_with_cache's keys ("blocks.1.attn.hook_z", "logits"). fn(values, name)
        gets a copy of the site's values (a numpy float32 array shaped as in
        run_with_cache) and returns None to leave them, or an array of that shape that
        replaces them in the pass (patching; values + d steers). Returns the logits (n,
        vocab_size) numpy float32 (None without a language-model head). An exception
        raised in fn ends the pass and is raised here."""
        np = numpy()
        table = {}
        L = self.n_layer
        for site_name, fn in hooks:
            if not callable(fn):
                raise TypeError("run_with_hooks: the hook at %r is not callable" % (site_name,))
            site, layer = ctypes.c_int(), ctypes.c_int()
            err = _lib.HsError()
            name = site_name.encode() if isinstance(site_name, str) else site_name
            check(LIB.hs_site_parse(name, L, ctypes.byref(site), ctypes.byref(layer),
                                    ctypes.byref(err)), err)
            table.setdefault((site.value, layer.value), []).append(fn)
        inp = self._input(x, pair, truncate)

        def run(site, layer, v, shape):
            fns = table.get((site, layer))
            if not fns:
                return None
            name, cur, changed = _site_name(site, layer), v.copy().reshape(shape), False
            for fn in fns:
                new = fn(cur.copy(), name)
                if new is None:
                    continue
                new = np.asarray(new, dtype=np.float32)
                if new.shape != shape:
                    raise HeadscopeError(-9, "the hook at %s returned shape %r, not %r"
                                         % (name, new.shape, shape))
                cur, changed = new, True
            return cur.reshape(v.shape) if changed else None
        return self._hooked(inp, sorted({s for s, _ in table}), run)
