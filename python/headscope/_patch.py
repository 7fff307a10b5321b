"""Model.patch: activation, attribution and path patching over pairs of prompts
(hs_patch_run, hs_patch_path_run; docs/patching.md), returning what `headscope patch`
writes to patching.json."""
import ctypes
import json
import math
import os

from . import _lib
from ._common import LIB, HeadscopeError, check, to_bytes
from ._hooks import SITE_KEYS

METRICS = ["logit-diff", "prob", "loss"]
METHODS = ["exact", "attribution", "both"]
POSITIONS = ["all", "each"]
DIRECTIONS = ["denoise", "noise"]
PATCH_SITES = ["resid_pre", "q", "k", "v", "pattern", "z", "attn_out", "mlp_out"]


def _choice(what, value, names):
    if value not in names:
        raise ValueError("patch: %s %r is not one of %s" % (what, value, ", ".join(names)))
    return names.index(value)


def _head(text, what):
    """"L.H" into (L, H)."""
    try:
        layer, head = text.split(".")
        return int(layer), int(head)
    except ValueError:
        raise ValueError("patch: path's %s %r is not LAYER.HEAD" % (what, text)) from None


def _path(text):
    """"S:R:I" (S a head "2.3", or "all" for every head before the receiver) into an
    HsPatchPath."""
    parts = text.split(":") if isinstance(text, str) else []
    if len(parts) != 3 or parts[2] not in ("q", "k", "v"):
        raise ValueError("patch: path %r is not SENDER:RECEIVER:q|k|v (e.g. \"2.3:3.0:k\", "
                         "\"all:3.0:k\")" % (text,))
    s = (-1, -1) if parts[0] == "all" else _head(parts[0], "sender")
    r = _head(parts[1], "receiver")
    return _lib.HsPatchPath(r[0], r[1], SITE_KEYS.index(parts[2]), s[0], s[1])


def _num(v):
    return v if math.isfinite(v) else None


class Patch:
    """Model.patch (mixed into Model)."""

    def _pair_prompt(self, i, d, key):
        if key + "_ids" in d:
            return list(self._input(d[key + "_ids"]).list)
        if not isinstance(d.get(key), (str, bytes)):
            raise HeadscopeError(-7, "pair %d: no \"%s\" string (or \"%s_ids\")" % (i, key, key))
        return self._input(d[key]).list

    def _pair_answer(self, i, d, key, required):
        if key + "_id" in d:
            return self._input([d[key + "_id"]]).list[0]
        if d.get(key) is None and not required:
            return -1
        if not isinstance(d.get(key), (str, bytes)):
            raise HeadscopeError(-7, "pair %d: no \"%s\" (a string of one token) or \"%s_id\""
                                 % (i, key, key))
        tok, count = ctypes.c_int32(), ctypes.c_int()
        err = _lib.HsError()
        st = LIB.hs_patch_answer_id(self._handle(), to_bytes(d[key], key), ctypes.byref(tok),
                                    ctypes.byref(count), ctypes.byref(err))
        if st:
            raise HeadscopeError(st, "pair %d: %s%s%s" % (i, key, ": " if count.value < 0
                                                            else " ", err.msg.decode()))
        return tok.value

    def _pairs(self, pairs, need_wrong):
        """pairs (a list of dicts as the lines of a pairs file, or a JSONL file's path)
        into the C pairs, their ids kept alive in keep."""
        if isinstance(pairs, (str, os.PathLike)):
            with open(pairs, encoding="utf-8") as f:
                pairs = [json.loads(line) for line in f if line.strip()]
        pairs = list(pairs)
        if not pairs:
            raise HeadscopeError(-7, "patch: no pairs")
        arr = (_lib.HsPatchPair * len(pairs))()
        keep, info = [], []
        for i, d in enumerate(pairs):
            if not isinstance(d, dict):
                raise TypeError("patch: pair %d is not a dict" % i)
            clean, corrupt = self._pair_prompt(i, d, "clean"), self._pair_prompt(i, d, "corrupt")
            c = (ctypes.c_int32 * len(clean))(*clean)
            k = (ctypes.c_int32 * len(corrupt))(*corrupt)
            keep += [c, k]
            err = _lib.HsError()
            st = LIB.hs_patch_lengths_check(self._handle(), c, len(clean), k, len(corrupt),
                                            ctypes.byref(err))
            if st:
                raise HeadscopeError(st, "pair %d: %s" % (i, err.msg.decode()))
            p = arr[i]
            p.clean, p.corrupt, p.n = c, k, len(clean)
            p.answer = self._pair_answer(i, d, "answer", True)
            p.wrong = self._pair_answer(i, d, "wrong", need_wrong)
            st = LIB.hs_patch_pair_pos(self._handle(), ctypes.byref(p), ctypes.byref(err))
            if st:
                raise HeadscopeError(st, "pair %d: %s" % (i, err.msg.decode()))
            info.append({"line": i + 1, "n_tokens": p.n, "position": p.pos,
                         "answer_id": p.answer, "wrong_id": p.wrong if p.wrong >= 0 else None})
        return arr, keep, info

    def patch(self, pairs, metric="logit-diff", site="z", positions="all",
              direction="denoise", method="exact", path=None, resamples=1000, seed=24301):
        """Activation patching over pairs of prompts, as `headscope patch` (docs/patching.md):
        a dict of what patching.json holds (schema "headscope.patching/1": "metric" with the
        clean and corrupt values per pair, "heads" one record per layer and head with
        "effect", "ci95", "per_pair", "positions" with positions="each", "paths" with a
        path), its pictures' names and "pairs_file" left out. pairs: a list of dicts as the
        pairs file's lines ({"clean": ..., "corrupt": ..., "answer": " Mary", "wrong":
        " John"}, or clean_ids, corrupt_ids, answer_id, wrong_id), or the file's path.
        metric: "logit-diff", "prob", "loss"; site: "resid_pre", "q", "k", "v", "pattern",
        "z", "attn_out", "mlp_out"; positions: "all" or "each"; direction: "denoise" or
        "noise"; method: "exact", "attribution" or "both"; path: "S:R:I" path patching from
        sender head S ("2.3", or "all" for every head before the receiver) into receiver
        R's input I (q, k or v), e.g. "all:3.0:k" (site, positions and method then unused);
        resamples and seed: the bootstrap's for ci95."""
        if not self.config["has_lm_head"]:
            raise HeadscopeError(-8, "patch: '%s' has no language-model head, which the "
                                 "metric reads" % self.path)
        o = LIB.hs_patch_opts_default()
        o.metric = _choice("metric", metric, METRICS)
        o.site = SITE_KEYS.index(PATCH_SITES[_choice("site", site, PATCH_SITES)])
        o.each_position = _choice("positions", positions, POSITIONS)
        o.noise = _choice("direction", direction, DIRECTIONS)
        o.method = _choice("method", method, METHODS)
        o.resamples, o.seed = int(resamples), int(seed)
        pp = _path(path) if path is not None else None
        arr, keep, info = self._pairs(pairs, o.metric == 0)
        results = []
        try:
            for each in range(1 if pp else o.each_position + 1):
                o.each_position = each
                r = ctypes.POINTER(_lib.HsPatchResult)()
                err = _lib.HsError()
                if pp:
                    st = LIB.hs_patch_path_run(self._handle(), arr, len(arr), ctypes.byref(o),
                                               ctypes.byref(pp), ctypes.byref(r),
                                               ctypes.byref(err))
                else:
                    st = LIB.hs_patch_run(self._handle(), arr, len(arr), ctypes.byref(o),
                                          ctypes.byref(r), ctypes.byref(err))
                if r:
                    results.append(r)
                check(st, err)
            del keep
            return _report(self, results, o, pp, info, {
                "metric": metric, "site": site, "direction": direction,
                "method": "path" if pp else method})
        finally:
            for r in results:
                LIB.hs_patch_result_free(r)


def _record(r, k, layer, unit, pos, headed, each):
    n = r.n_pairs
    e = {"layer": layer, "head": unit if headed else None}
    if each:
        e["position"] = pos
    e["effect"] = _num(r.effect[k])
    e["ci95"] = [_num(r.ci_lo[k]), _num(r.ci_hi[k])]
    e["per_pair"] = [_num(r.patched[k * n + i]) for i in range(n)]
    if r.effect_attr:
        e["effect_attribution"] = _num(r.effect_attr[k])
        e["ci95_attribution"] = [_num(r.ci_lo_attr[k]), _num(r.ci_hi_attr[k])]
        e["per_pair_attribution"] = [_num(r.patched_attr[k * n + i]) for i in range(n)]
    return e


def _cells(r, headed, each):
    out = []
    for layer in range(r.n_layer):
        for u in range(r.n_units):
            for p in range(r.n_pos):
                k = (layer * r.n_units + u) * r.n_pos + p
                out.append((k, layer, u, p))
    return out


def _report(m, results, o, pp, info, names):
    """The dict cli/patch_out.c writes as patching.json."""
    r = results[0].contents
    re = results[1].contents if len(results) > 1 else None
    info_site = LIB.hs_site_get(o.site).contents
    headed = info_site.heads != 0
    n = r.n_pairs
    clean = [_num(r.clean[i]) for i in range(n)]
    corrupt = [_num(r.corrupt[i]) for i in range(n)]
    pat = info_site.name.decode()
    j = {"schema": "headscope.patching/1", "model": m.path, "architecture": m.family,
         "method": names["method"]}
    if r.effect_attr:
        j["correlation"] = {"heads": _num(r.correlation)}
        if re:
            j["correlation"]["positions"] = _num(re.correlation)
    j.update({"site": names["site"], "hook": pat.replace("%d", "L"),
              "per_position": re is not None, "direction": names["direction"],
              "n_layer": r.n_layer, "n_heads": r.n_units if headed else 0,
              "metric": {"name": names["metric"], "clean": clean, "corrupt": corrupt,
                         "clean_mean": _num(sum(r.clean[i] for i in range(n)) / n),
                         "corrupt_mean": _num(sum(r.corrupt[i] for i in range(n)) / n)},
              "bootstrap": {"resamples": o.resamples, "seed": o.seed, "level": 0.95}})
    passes = r.passes + (re.passes if re else 0)
    j["cost"] = {"forward_passes": passes, "per_pair": passes / n}
    j["pairs"] = info
    if pp:
        rec = "%d.%d" % (pp.receiver_layer, pp.receiver_head)
        j["paths"] = [dict({"sender": "%d.%d" % (layer, u), "receiver": rec,
                            "input": SITE_KEYS[pp.input]},
                           **{k: v for k, v in _record(r, k_, layer, u, 0, True, False).items()
                              if k in ("effect", "ci95", "per_pair")})
                      for k_, layer, u, _p in _cells(r, True, False)
                      if pp.sender_layer < 0 or (layer, u) == (pp.sender_layer, pp.sender_head)]
    else:
        j["heads"] = [_record(r, k, layer, u, p, headed, False)
                      for k, layer, u, p in _cells(r, headed, False)]
    if re:
        j["positions"] = [_record(re, k, layer, u, p, headed, True)
                          for k, layer, u, p in _cells(re, headed, True)]
    return j
