"""Finding libheadscope.so and declaring the C functions the package calls (ctypes)."""
import ctypes
import ctypes.util
import os
import warnings

SOVERSION = 3  # the library major version these bindings are written for
PYTHON_VERSION = "3.2.1"  # python/pyproject.toml; the tests check it against hs_version()


class HsError(ctypes.Structure):
    _fields_ = [("msg", ctypes.c_char * 512)]  # HS_ERROR_MSG_MAX


class HsEncoding(ctypes.Structure):
    _fields_ = [
        ("n", ctypes.c_size_t),
        ("ids", ctypes.POINTER(ctypes.c_int32)),
        ("type_ids", ctypes.POINTER(ctypes.c_int32)),
        ("n_text", ctypes.c_size_t),
        ("n_pair", ctypes.c_size_t),
        ("paired", ctypes.c_int),
    ]


class HsModelConfig(ctypes.Structure):
    _fields_ = [
        ("family", ctypes.c_int),
        ("n_layer", ctypes.c_int),
        ("n_head", ctypes.c_int),
        ("d_model", ctypes.c_int),
        ("d_head", ctypes.c_int),
        ("d_ff", ctypes.c_int),
        ("n_ctx", ctypes.c_int),
        ("vocab_size", ctypes.c_int),
        ("type_vocab_size", ctypes.c_int),
        ("ln_eps", ctypes.c_float),
        ("act", ctypes.c_int),
        ("causal", ctypes.c_int),
        ("has_lm_head", ctypes.c_int),
        ("n_kv_head", ctypes.c_int),
        ("arch", ctypes.c_void_p),  # const hs_arch *: not exposed in Model.config
        ("gated", ctypes.c_int),
        ("n_enc_layer", ctypes.c_int),  # encoder-decoder (T5): the encoder's layers, else 0
        ("decoder_start_id", ctypes.c_int),
    ]  # tests/lib.sh checks the size and offsets against the C header


# int (*hs_attn_observer)(void *user, int layer, const float *probs, int n_head, int n)
ATTN_OBSERVER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                                 ctypes.POINTER(ctypes.c_float), ctypes.c_int, ctypes.c_int)


class HsTrace(ctypes.Structure):  # hs_trace: the library's recorder of every layer's maps
    _fields_ = [
        ("n_layer", ctypes.c_int),
        ("n_head", ctypes.c_int),
        ("n", ctypes.c_int),
        ("attn", ctypes.c_void_p),
    ]


class HsForwardOpts(ctypes.Structure):
    _fields_ = [
        ("head_mask", ctypes.POINTER(ctypes.c_float)),
        ("on_attn", ATTN_OBSERVER),
        ("user", ctypes.c_void_p),
        ("logits", ctypes.POINTER(ctypes.c_float)),
        ("logit_rows", ctypes.POINTER(ctypes.c_int32)),
        ("n_logit_rows", ctypes.c_int),
        ("hidden", ctypes.POINTER(ctypes.c_float)),
        ("start_layer", ctypes.c_int),
        ("x_start", ctypes.POINTER(ctypes.c_float)),
        ("x_layers", ctypes.POINTER(ctypes.c_float)),
        ("batch", ctypes.c_int),
        ("allow_nonfinite", ctypes.c_int),
        ("head_replace", ctypes.POINTER(ctypes.c_float)),
        ("hook", ctypes.c_void_p),  # an HOOK_FN
        ("hook_user", ctypes.c_void_p),
        ("hook_sites", ctypes.c_uint),
        ("on_cross", ctypes.c_void_p),  # an encoder-decoder's (hs_forward_encdec): not set
        ("cross_head_mask", ctypes.POINTER(ctypes.c_float)),
        ("enc_hidden", ctypes.POINTER(ctypes.c_float)),
    ]  # tests/lib.sh checks the size and offsets against the C header


class HsHookCall(ctypes.Structure):  # hs_hook_call (headscope/hooks.h)
    _fields_ = [
        ("site", ctypes.c_int),
        ("layer", ctypes.c_int),
        ("copy", ctypes.c_int),
        ("x", ctypes.POINTER(ctypes.c_float)),
        ("rows", ctypes.c_int),
        ("cols", ctypes.c_int),
        ("ld", ctypes.c_int),
        ("heads", ctypes.c_int),
        ("head_width", ctypes.c_int),
        ("n", ctypes.c_int),
    ]  # tests/lib.sh checks the size and offsets against the C header


# int (*hs_hook_fn)(void *user, const hs_hook_call *call)
HOOK_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(HsHookCall))


class HsSiteInfo(ctypes.Structure):  # hs_site_info
    _fields_ = [
        ("site", ctypes.c_int),
        ("name", ctypes.c_char_p),
        ("key", ctypes.c_char_p),
        ("per_layer", ctypes.c_int),
        ("heads", ctypes.c_int),
        ("shape", ctypes.c_char_p),
    ]


class HsPatchPair(ctypes.Structure):  # hs_patch_pair (headscope/patch.h)
    _fields_ = [
        ("clean", ctypes.POINTER(ctypes.c_int32)),
        ("corrupt", ctypes.POINTER(ctypes.c_int32)),
        ("n", ctypes.c_int),
        ("answer", ctypes.c_int32),
        ("wrong", ctypes.c_int32),
        ("pos", ctypes.c_int),
    ]  # tests/lib.sh checks the size and offsets against the C header


class HsPatchOpts(ctypes.Structure):  # hs_patch_opts
    _fields_ = [
        ("metric", ctypes.c_int),
        ("site", ctypes.c_int),
        ("each_position", ctypes.c_int),
        ("noise", ctypes.c_int),
        ("method", ctypes.c_int),
        ("resamples", ctypes.c_int),
        ("seed", ctypes.c_uint64),
        ("progress", ctypes.c_void_p),
        ("progress_user", ctypes.c_void_p),
    ]  # tests/lib.sh checks the size and offsets against the C header


_D = ctypes.POINTER(ctypes.c_double)


class HsPatchResult(ctypes.Structure):  # hs_patch_result
    _fields_ = [
        ("n_layer", ctypes.c_int),
        ("n_units", ctypes.c_int),
        ("n_pos", ctypes.c_int),
        ("n_pairs", ctypes.c_int),
        ("passes", ctypes.c_double),
        ("clean", _D), ("corrupt", _D), ("patched", _D), ("effect", _D),
        ("ci_lo", _D), ("ci_hi", _D),
        ("patched_attr", _D), ("effect_attr", _D), ("ci_lo_attr", _D), ("ci_hi_attr", _D),
        ("correlation", ctypes.c_double),
    ]  # tests/lib.sh checks the size and offsets against the C header


class HsPatchPath(ctypes.Structure):  # hs_patch_path
    _fields_ = [
        ("receiver_layer", ctypes.c_int),
        ("receiver_head", ctypes.c_int),
        ("input", ctypes.c_int),
        ("sender_layer", ctypes.c_int),
        ("sender_head", ctypes.c_int),
    ]  # tests/lib.sh checks the size and offsets against the C header


class HsActivations(ctypes.Structure):  # hs_activations (headscope/activations.h)
    _fields_ = [
        ("n_layer", ctypes.c_int),
        ("n_head", ctypes.c_int),
        ("n", ctypes.c_int),
        ("d_model", ctypes.c_int),
        ("d_head", ctypes.c_int),
        ("what", ctypes.c_uint),
        ("n_kv_head", ctypes.c_int),
        ("qkv_width", ctypes.c_int),
        ("resid_pre", ctypes.POINTER(ctypes.c_float)),
        ("qkv", ctypes.POINTER(ctypes.c_float)),
        ("pattern", ctypes.POINTER(ctypes.c_float)),
        ("z", ctypes.POINTER(ctypes.c_float)),
        ("attn_out", ctypes.POINTER(ctypes.c_float)),
        ("mlp_out", ctypes.POINTER(ctypes.c_float)),
        ("resid_final", ctypes.POINTER(ctypes.c_float)),
        ("final_rstd", ctypes.POINTER(ctypes.c_float)),
    ]  # tests/lib.sh checks the size and offsets against the C header


# HS_CAPTURE_*: what hs_activations_run keeps
CAPTURE = {"resid_pre": 1, "qkv": 2, "pattern": 4, "z": 8, "attn_out": 16, "mlp_out": 32}


class HsHtmlInput(ctypes.Structure):  # hs_html_input (headscope/html.h)
    _fields_ = [
        ("report_json", ctypes.c_char_p),
        ("attn", ctypes.c_void_p),
        ("map_fn", ctypes.c_void_p),
        ("map_user", ctypes.c_void_p),
        ("n_maps", ctypes.c_int),
        ("n", ctypes.c_int),
        ("texts_jsonl", ctypes.c_char_p),
    ]  # tests/lib.sh checks the size and offsets against the C header


class HsOpenOpts(ctypes.Structure):
    _fields_ = [
        ("flags", ctypes.c_uint),
        ("weight_memory", ctypes.c_size_t),
    ]  # tests/lib.sh checks the size and offsets against the C header


HS_WEIGHT_MEMORY_ALL = ctypes.c_size_t(-1).value  # (size_t)-1: no bound
HS_WEIGHT_MEMORY_STORED = ctypes.c_size_t(-2).value  # no layer converted: stored types
HS_OPEN_Q8_ACTIVATIONS = 16  # include/headscope/model.h: 8-bit activations (--activations q8)


def _candidates():
    """Where the library may be, in the order tried."""
    env = os.environ.get("HEADSCOPE_LIB")
    if env:
        return [env]  # asked for exactly this one: no fallback
    names = []
    # a wheel (make wheel) carries the library in the package's own folder
    own = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libheadscope.so.%d" % SOVERSION)
    if os.path.exists(own):
        names.append(own)
    # in-tree: python/headscope/ -> build/ (make builds it there)
    here = os.path.dirname(os.path.abspath(__file__))
    tree = os.path.join(here, os.pardir, os.pardir, "build", "libheadscope.so.%d" % SOVERSION)
    if os.path.exists(tree):
        names.append(os.path.normpath(tree))
    found = ctypes.util.find_library("headscope")
    if found:
        names.append(found)
    # the dynamic linker's own search (LD_LIBRARY_PATH, ld.so.cache, /usr/lib, ...), then
    # the default install prefix, which ld.so.cache may not know yet before ldconfig
    names += ["libheadscope.so.%d" % SOVERSION, "/usr/local/lib/libheadscope.so.%d" % SOVERSION]
    return names


def _declare(lib):
    c = ctypes
    err = c.POINTER(HsError)
    sigs = {
        "hs_version": (c.c_char_p, []),
        "hs_build_commit": (c.c_char_p, []),
        "hs_status_str": (c.c_char_p, [c.c_int]),
        "hs_blas_corename": (c.c_char_p, []),
        "hs_blas_better_core": (c.c_char_p, []),
        "hs_set_threads": (None, [c.c_int]),
        "hs_threads": (c.c_int, []),
        "hs_model_open2": (c.c_int, [c.c_char_p, c.POINTER(HsOpenOpts), c.POINTER(c.c_void_p),
                                     err]),
        "hs_model_weight_memory": (c.c_size_t, [c.c_void_p]),
        "hs_model_converted_bytes": (c.c_size_t, [c.c_void_p]),
        "hs_model_stored_weights": (c.c_int, [c.c_void_p]),
        "hs_model_free": (None, [c.c_void_p]),
        "hs_model_config_of": (c.POINTER(HsModelConfig), [c.c_void_p]),
        "hs_model_tokenizer": (c.c_void_p, [c.c_void_p]),
        "hs_model_path": (c.c_char_p, [c.c_void_p]),
        "hs_family_name": (c.c_char_p, [c.c_int]),
        "hs_tokenizer_encode": (c.c_int, [c.c_void_p, c.c_char_p, c.c_size_t, c.c_char_p,
                                          c.c_size_t, c.POINTER(HsEncoding), err]),
        "hs_encoding_truncate": (None, [c.c_void_p, c.POINTER(HsEncoding), c.c_size_t]),
        "hs_tokenizer_check_pair": (c.c_int, [c.c_void_p, c.POINTER(HsError)]),
        "hs_encoding_free": (None, [c.POINTER(HsEncoding)]),
        "hs_tokenizer_display": (c.c_size_t, [c.c_void_p, c.c_int32, c.c_char_p, c.c_size_t]),
        "hs_tokenizer_token": (c.c_char_p, [c.c_void_p, c.c_int32]),
        "hs_forward": (c.c_int, [c.c_void_p, c.POINTER(c.c_int32), c.POINTER(c.c_int32), c.c_int,
                                 c.POINTER(HsForwardOpts), c.c_void_p, err]),
        "hs_analyze_json": (c.c_int, [c.c_void_p, c.POINTER(c.c_char_p), c.POINTER(c.c_size_t),
                                      c.c_int, c.c_char_p, c.POINTER(c.c_void_p), err]),
        "hs_analyze_files": (c.c_int, [c.c_void_p, c.c_char_p, c.c_size_t, c.c_char_p,
                                       c.c_char_p, c.POINTER(c.c_void_p), c.POINTER(c.c_void_p),
                                       c.POINTER(c.c_size_t), err]),
        "hs_activations_run": (c.c_int, [c.c_void_p, c.POINTER(c.c_int32), c.POINTER(c.c_int32),
                                         c.c_int, c.c_uint, c.POINTER(c.POINTER(HsActivations)),
                                         err]),
        "hs_activations_free": (None, [c.POINTER(HsActivations)]),
        "hs_html_encode": (c.c_int, [c.POINTER(HsHtmlInput), c.POINTER(c.c_void_p),
                                     c.POINTER(c.c_size_t), err]),
        "hs_free": (None, [c.c_void_p]),
        "hs_site_get": (c.POINTER(HsSiteInfo), [c.c_int]),
        "hs_site_parse": (c.c_int, [c.c_char_p, c.c_int, c.POINTER(c.c_int),
                                    c.POINTER(c.c_int), err]),
        "hs_site_from_key": (c.c_int, [c.c_char_p]),
        "hs_site_shape": (c.c_int, [c.POINTER(HsModelConfig), c.c_int, c.c_int,
                                    c.POINTER(c.c_int)]),
        "hs_patch_opts_default": (HsPatchOpts, []),
        "hs_patch_answer_id": (c.c_int, [c.c_void_p, c.c_char_p, c.POINTER(c.c_int32),
                                         c.POINTER(c.c_int), err]),
        "hs_patch_pair_pos": (c.c_int, [c.c_void_p, c.POINTER(HsPatchPair), err]),
        "hs_patch_lengths_check": (c.c_int, [c.c_void_p, c.POINTER(c.c_int32), c.c_int,
                                             c.POINTER(c.c_int32), c.c_int, err]),
        "hs_patch_run": (c.c_int, [c.c_void_p, c.POINTER(HsPatchPair), c.c_int,
                                   c.POINTER(HsPatchOpts), c.POINTER(c.POINTER(HsPatchResult)),
                                   err]),
        "hs_patch_path_run": (c.c_int, [c.c_void_p, c.POINTER(HsPatchPair), c.c_int,
                                        c.POINTER(HsPatchOpts), c.POINTER(HsPatchPath),
                                        c.POINTER(c.POINTER(HsPatchResult)), err]),
        "hs_patch_result_free": (None, [c.POINTER(HsPatchResult)]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args
    return lib


def _warn_about_kernels(lib):
    """OpenBLAS picks its kernels when it loads, before headscope can: where it chose a family
    older than the CPU runs (a CPU it does not know, as in some virtual machines), say how to
    choose (the command-line program does this itself by running itself again)."""
    better = lib.hs_blas_better_core()
    if better and not os.environ.get("OPENBLAS_CORETYPE"):
        chosen = os.environ.get("HEADSCOPE_TEST_BLAS_CORE") or lib.hs_blas_corename().decode()
        warnings.warn("headscope: OpenBLAS chose its %s kernels on a CPU that runs its %s ones "
                      "(several times faster matrix products): start Python with "
                      "OPENBLAS_CORETYPE=%s in the environment"
                      % (chosen, better.decode(), better.decode()), RuntimeWarning, stacklevel=3)


def load_library():
    """Opens libheadscope.so.SOVERSION (see _candidates) and checks its major version."""
    tried = []
    for name in _candidates():
        try:
            lib = ctypes.CDLL(name)
        except OSError as e:
            tried.append("%s (%s)" % (name, e))
            continue
        lib = _declare(lib)
        version = lib.hs_version().decode()
        if int(version.split(".")[0]) != SOVERSION:
            raise ImportError("headscope: %s is version %s; these bindings need %d.x"
                              % (name, version, SOVERSION))
        _warn_about_kernels(lib)
        return lib, name
    raise ImportError("headscope: cannot load libheadscope.so.%d; tried: %s. Install the "
                      "wheel `make wheel` builds (it carries the library), install the C "
                      "library (make install), or set HEADSCOPE_LIB to its path"
                      % (SOVERSION, "; ".join(tried)))
