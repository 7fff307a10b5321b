#!/usr/bin/env bash
# The library as others get it (make lib-test, part of make test): installs into a temporary
# stage with PREFIX=/usr, checks what was installed (exports, soname, versions, man pages),
# builds examples/entropy.c out of tree through pkg-config (shared and static) and runs it,
# compiles every header's usage example, and runs the Python package's tests from a venv
# (Debian's python3 and numpy) into which pip installed ./python offline.
#   HS_BUILD     the build folder (build, or build-san under SANITIZE)
#   HS_SANITIZE  the sanitizers of that build: the Python tests then preload the ASan runtime
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${HS_BUILD:-build}
CC=${CC:-cc}
# programs linking a sanitized library need the sanitizers' runtimes themselves
san=${HS_SANITIZE:+-fsanitize=$HS_SANITIZE}
PY=/usr/bin/python3 # Debian's, with python3-numpy
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
stage=$tmp/stage
fail() { echo "lib.sh: FAIL: $*" >&2; exit 1; }
ok() { echo "ok - $*"; }

make -s --no-print-directory install BUILD="$BUILD" SANITIZE="${HS_SANITIZE:-}" \
    DESTDIR="$stage" PREFIX=/usr >/dev/null
lib=$stage/usr/lib
so=$(readlink -f "$lib/libheadscope.so")
[ -f "$stage/usr/bin/headscope" ] && [ -f "$lib/libheadscope.a" ] &&
    [ -f "$stage/usr/include/headscope.h" ] && [ -f "$stage/usr/include/headscope/model.h" ] &&
    [ -f "$stage/usr/share/doc/headscope/docs/install.md" ] || fail "install left files out"
ok "install into a stage"
"$PY" tests/docs_check.py links "$stage/usr/share/doc/headscope" || fail "the installed docs' links or pictures do not resolve"
ok "the installed README's and docs' links and pictures resolve"

# exports: hs_* only, and a soname with the major version
bad=$(nm -D --defined-only "$so" | awk '$2 ~ /^[TDBRVW]$/ && $3 !~ /^hs_/ {print $3}')
[ -z "$bad" ] || fail "libheadscope.so exports non-hs_ symbols: $bad"
soname=$(readelf -d "$so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
version=$(sed -n 's/^#define HS_VERSION "\([0-9.]*\)".*/\1/p' include/headscope/version.h)
[ "$soname" = "libheadscope.so.${version%%.*}" ] || fail "soname '$soname'"
[ -L "$lib/$soname" ] || fail "no $soname link"
# and only the API: each one declared in an installed header
for s in $(nm -D --defined-only "$so" | awk '{print $3}'); do
    grep -qw "$s" "$stage"/usr/include/headscope/*.h || fail "$s is exported but not public"
done
n=$(nm -D --defined-only "$so" | grep -c ' T hs_')
ok "nm -D: only hs_* symbols, the $n functions of the headers; soname $soname"

# one version everywhere: --version, the .pc, hs_version() (the example prints it), report,
# the Python package
export PKG_CONFIG_PATH=$lib/pkgconfig
PC=pkg-config # the .pc is relocatable: PKG_CONFIG_PATH alone finds the stage
[ "$($PC --modversion headscope)" = "$version" ] || fail ".pc version"
# (grep without -q reads to the end: -q would close the pipe at the first match, and the
# writer's SIGPIPE fails the pipeline under pipefail)
"$stage/usr/bin/headscope" --version | grep "^headscope $version\\b" >/dev/null || fail "--version"
grep -q "^version = \"$version\"" python/pyproject.toml || fail "python/pyproject.toml version"
grep -q "^PYTHON_VERSION = \"$version\"" python/headscope/_lib.py || fail "_lib.py version"
ok "version $version in --version, headscope.pc and the Python package"

# man pages: one per command of --help, each the command's --help
for c in $("$stage/usr/bin/headscope" --help | sed -n 's/^  \([a-z]\+\)  .*/\1/p'); do
    page=$stage/usr/share/man/man1/headscope-$c.1
    [ -f "$page" ] || fail "no man page for '$c'"
    # sed reads the whole help (head -1 would close the pipe early: SIGPIPE under pipefail)
    first=$("$stage/usr/bin/headscope" "$c" --help | sed -n 1p)
    grep -qF -- "$first" "$page" || fail "$page does not hold '$first'"
done
[ -f "$stage/usr/share/man/man1/headscope.1" ] || fail "no headscope.1"
ok "man pages match --help"

# examples/entropy.c out of tree, shared and static
cp examples/entropy.c "$tmp/"
(cd "$tmp" && $CC $san -std=c11 -Wall -Wextra -Werror entropy.c $($PC --cflags --libs headscope) \
    -o entropy-shared) || fail "examples/entropy.c does not build against the stage"
libs=$($PC --static --libs headscope)
(cd "$tmp" && $CC $san -std=c11 entropy.c $($PC --cflags headscope) ${libs/-lheadscope/-l:libheadscope.a} \
    -o entropy-static) || fail "examples/entropy.c does not link statically"
text="The cat sat on the mat. The cat sat on the mat."
export ASAN_OPTIONS=detect_leaks=0
shared=$(LD_LIBRARY_PATH=$lib "$tmp/entropy-shared" fixtures/trained-gpt2 "$text" 3 0)
static=$("$tmp/entropy-static" fixtures/trained-gpt2 "$text" 3 0)
ldd "$tmp/entropy-static" | grep libheadscope >/dev/null && fail "entropy-static uses the .so"
LD_LIBRARY_PATH=$lib ldd "$tmp/entropy-shared" | grep "$lib/$soname" >/dev/null || fail "entropy-shared"
[ "$shared" = "$static" ] || fail "shared and static disagree: '$shared' / '$static'"
echo "$shared" | grep -q "^headscope $version: head 3.0, 14 tokens: entropy [0-9.]* nats$" ||
    fail "entropy printed '$shared'"
ok "examples/entropy.c out of tree: $shared"
"$tmp/entropy-static" fixtures/nope "$text" 0 0 2>"$tmp/err" && fail "a missing model succeeded"
grep -q "^entropy: cannot open 'fixtures/nope'" "$tmp/err" || fail "message: $(cat "$tmp/err")"

# every header's usage example
$PY tests/header_examples.py "$stage/usr/include" "$tmp/examples.c" -- $CC $san -std=c11 -Wall \
    $($PC --cflags headscope) -- $($PC --libs headscope) || fail "header examples"
LD_LIBRARY_PATH=$lib "$tmp/examples" || fail "header examples' main"
ok "header usage examples compile and link"

# the Python package: pip install ./python offline (python/build_backend.py, no setuptools)
# into a venv that sees Debian's numpy; the wheel of make wheel: tests/wheel.sh
$PY -m venv --system-site-packages "$tmp/venv"
cp -r python "$tmp/python" # pip builds in the source folder: not in the checkout
rm -rf "$tmp/python/build" "$tmp/python/"*.egg-info # a stale in-tree build would be reused
"$tmp/venv/bin/python" -m pip install -q --no-build-isolation --no-index --no-deps \
    --disable-pip-version-check "$tmp/python" >"$tmp/pip.log" 2>&1 ||
    { cat "$tmp/pip.log"; fail "pip install ./python"; }
pre=
if [[ "${HS_SANITIZE:-}" == *address* ]]; then
    # Python is not built with ASan: the runtime must come first; its leaks are not ours
    pre=$($CC -print-file-name=libasan.so)
    export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
fi
# the ctypes mirrors of hs_forward_opts, hs_hook_call, hs_site_info, hs_patch_*, hs_open_opts, hs_trace, hs_model_config, hs_activations,
# hs_html_input and hs_encoding
# have the C structs' sizes and offsets
cat >"$tmp/layout.c" <<'CEOF'
#include <stddef.h>
#include <stdio.h>
#include <headscope.h>
#define F(s, f) printf("%s.%s %zu\n", #s, #f, offsetof(s, f))
int main(void)
{
    printf("hs_forward_opts %zu\n", sizeof(hs_forward_opts));
    F(hs_forward_opts, head_mask); F(hs_forward_opts, on_attn); F(hs_forward_opts, user);
    F(hs_forward_opts, logits); F(hs_forward_opts, logit_rows); F(hs_forward_opts, n_logit_rows);
    F(hs_forward_opts, hidden); F(hs_forward_opts, start_layer); F(hs_forward_opts, x_start);
    F(hs_forward_opts, x_layers); F(hs_forward_opts, batch); F(hs_forward_opts, allow_nonfinite);
    F(hs_forward_opts, head_replace); F(hs_forward_opts, hook); F(hs_forward_opts, hook_user);
    F(hs_forward_opts, hook_sites); F(hs_forward_opts, on_cross);
    F(hs_forward_opts, cross_head_mask); F(hs_forward_opts, enc_hidden);
    printf("hs_hook_call %zu\n", sizeof(hs_hook_call));
    F(hs_hook_call, site); F(hs_hook_call, layer); F(hs_hook_call, copy); F(hs_hook_call, x);
    F(hs_hook_call, rows); F(hs_hook_call, cols); F(hs_hook_call, ld); F(hs_hook_call, heads);
    F(hs_hook_call, head_width); F(hs_hook_call, n);
    printf("hs_site_info %zu\n", sizeof(hs_site_info));
    F(hs_site_info, site); F(hs_site_info, name); F(hs_site_info, key);
    F(hs_site_info, per_layer); F(hs_site_info, heads); F(hs_site_info, shape);
    printf("hs_patch_pair %zu\n", sizeof(hs_patch_pair));
    F(hs_patch_pair, clean); F(hs_patch_pair, corrupt); F(hs_patch_pair, n);
    F(hs_patch_pair, answer); F(hs_patch_pair, wrong); F(hs_patch_pair, pos);
    printf("hs_patch_opts %zu\n", sizeof(hs_patch_opts));
    F(hs_patch_opts, metric); F(hs_patch_opts, site); F(hs_patch_opts, each_position);
    F(hs_patch_opts, noise); F(hs_patch_opts, method); F(hs_patch_opts, resamples);
    F(hs_patch_opts, seed); F(hs_patch_opts, progress); F(hs_patch_opts, progress_user);
    printf("hs_patch_result %zu\n", sizeof(hs_patch_result));
    F(hs_patch_result, n_layer); F(hs_patch_result, n_units); F(hs_patch_result, n_pos);
    F(hs_patch_result, n_pairs); F(hs_patch_result, passes); F(hs_patch_result, clean);
    F(hs_patch_result, corrupt); F(hs_patch_result, patched); F(hs_patch_result, effect);
    F(hs_patch_result, ci_lo); F(hs_patch_result, ci_hi); F(hs_patch_result, patched_attr);
    F(hs_patch_result, effect_attr); F(hs_patch_result, ci_lo_attr);
    F(hs_patch_result, ci_hi_attr); F(hs_patch_result, correlation);
    printf("hs_patch_path %zu\n", sizeof(hs_patch_path));
    F(hs_patch_path, receiver_layer); F(hs_patch_path, receiver_head); F(hs_patch_path, input);
    F(hs_patch_path, sender_layer); F(hs_patch_path, sender_head);
    printf("hs_open_opts %zu\n", sizeof(hs_open_opts));
    F(hs_open_opts, flags); F(hs_open_opts, weight_memory);
    printf("hs_trace %zu\n", sizeof(hs_trace));
    F(hs_trace, n_layer); F(hs_trace, n_head); F(hs_trace, n); F(hs_trace, attn);
    printf("hs_model_config %zu\n", sizeof(hs_model_config));
    F(hs_model_config, family); F(hs_model_config, n_layer); F(hs_model_config, n_head);
    F(hs_model_config, d_model); F(hs_model_config, d_head); F(hs_model_config, d_ff);
    F(hs_model_config, n_ctx); F(hs_model_config, vocab_size); F(hs_model_config, type_vocab_size);
    F(hs_model_config, ln_eps); F(hs_model_config, act); F(hs_model_config, causal);
    F(hs_model_config, has_lm_head); F(hs_model_config, n_kv_head); F(hs_model_config, arch);
    F(hs_model_config, gated); F(hs_model_config, n_enc_layer);
    F(hs_model_config, decoder_start_id);
    printf("hs_activations %zu\n", sizeof(hs_activations));
    F(hs_activations, n_layer); F(hs_activations, n_head); F(hs_activations, n);
    F(hs_activations, d_model); F(hs_activations, d_head); F(hs_activations, what);
    F(hs_activations, n_kv_head); F(hs_activations, qkv_width); F(hs_activations, resid_pre);
    F(hs_activations, qkv); F(hs_activations, pattern); F(hs_activations, z);
    F(hs_activations, attn_out); F(hs_activations, mlp_out); F(hs_activations, resid_final);
    F(hs_activations, final_rstd);
    printf("hs_html_input %zu\n", sizeof(hs_html_input));
    F(hs_html_input, report_json); F(hs_html_input, attn); F(hs_html_input, map_fn);
    F(hs_html_input, map_user); F(hs_html_input, n_maps); F(hs_html_input, n);
    F(hs_html_input, texts_jsonl);
    printf("hs_encoding %zu\n", sizeof(hs_encoding));
    F(hs_encoding, n); F(hs_encoding, ids); F(hs_encoding, type_ids); F(hs_encoding, n_text);
    F(hs_encoding, n_pair); F(hs_encoding, paired);
    return 0;
}
CEOF
$CC -std=c11 $($PC --cflags headscope) "$tmp/layout.c" -o "$tmp/layout" || fail "layout program"
want=$("$tmp/layout")
got=$(cd "$tmp" && HEADSCOPE_LIB=$lib/$soname LD_PRELOAD=$pre "$tmp/venv/bin/python" -c '
import ctypes
from headscope import _lib
for c, t in (("hs_forward_opts", _lib.HsForwardOpts), ("hs_hook_call", _lib.HsHookCall),
             ("hs_site_info", _lib.HsSiteInfo), ("hs_patch_pair", _lib.HsPatchPair),
             ("hs_patch_opts", _lib.HsPatchOpts), ("hs_patch_result", _lib.HsPatchResult),
             ("hs_patch_path", _lib.HsPatchPath), ("hs_open_opts", _lib.HsOpenOpts),
             ("hs_trace", _lib.HsTrace), ("hs_model_config", _lib.HsModelConfig),
             ("hs_activations", _lib.HsActivations), ("hs_html_input", _lib.HsHtmlInput),
             ("hs_encoding", _lib.HsEncoding)):
    print(c, ctypes.sizeof(t))
    for name, _ in t._fields_:
        print("%s.%s" % (c, name), getattr(t, name).offset)')
[ "$want" = "$got" ] &&
    ok "the Python package's hs_forward_opts, hs_hook_call, hs_site_info, the hs_patch_* structs, hs_open_opts, hs_trace, hs_model_config, hs_activations, hs_html_input and hs_encoding match the header" ||
    fail "struct layouts: C says $(echo $want), Python $(echo $got)"
cp -r python/tests "$tmp/pytests" # run outside the tree: the installed package, not python/
(cd "$tmp" && HEADSCOPE_LIB=$lib/$soname HEADSCOPE_ROOT=$ROOT HEADSCOPE=$stage/usr/bin/headscope \
    LD_PRELOAD=$pre "$tmp/venv/bin/python" -m unittest discover -s pytests 2>&1) |
    tail -n 4 | tee "$tmp/py.log"
grep -q "^OK" "$tmp/py.log" || fail "Python tests"
where=$(cd "$tmp" && LD_LIBRARY_PATH=$lib LD_PRELOAD=$pre "$tmp/venv/bin/python" -c \
    'import headscope; print(headscope.__file__, headscope.LIBRARY_PATH)')
[[ "$where" == "$tmp/venv/"*" libheadscope.so.${version%%.*}" ]] || fail "import found: $where"
ok "Python package: pip install into a venv, tests pass${pre:+ (ASan runtime preloaded)}"
# the example's entropy from the Python package's maps, computed by numpy
want=$(cd "$tmp" && HEADSCOPE_LIB=$lib/$soname LD_PRELOAD=$pre "$tmp/venv/bin/python" -c '
import sys, numpy as np, headscope
p = headscope.load(sys.argv[1]).attention(sys.argv[2])[3, 0].astype(np.float64)
print("%.4f" % np.mean(-np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1)), 0), axis=1)))
' "$ROOT/fixtures/trained-gpt2" "$text")
[[ "$shared" == *"entropy $want nats" ]] || fail "example says '$shared', numpy $want"
ok "the example's entropy agrees with numpy on the Python maps ($want)"

make -s --no-print-directory uninstall BUILD="$BUILD" DESTDIR="$stage" PREFIX=/usr >/dev/null
left=$(find "$stage" -type f -o -type l)
[ -z "$left" ] || fail "uninstall left: $left"
ok "uninstall removes everything"
