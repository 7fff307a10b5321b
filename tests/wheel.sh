#!/usr/bin/env bash
# The wheel of `make wheel` as a user installs it (make wheel-test, part of make test):
#  - its files: RECORD's hashes and sizes, the tag in WHEEL and the file name, numpy declared,
#    the library inside the package;
#  - pip install --no-index of the wheel into a venv of Debian's python3 made WITHOUT
#    --system-site-packages, numpy given to it by linking Debian's numpy (and its metadata)
#    into the venv, so pip resolves the declared dependency offline; then import headscope
#    finds the library inside the package (no LD_LIBRARY_PATH, no HEADSCOPE_LIB), and maps
#    and tokens of tiny-gpt2 equal `headscope attn`'s and `headscope tokenize`'s;
#  - the same wheel with --no-deps into a venv of every Python in HS_WHEEL_PYTHONS
#    (default: Debian's, python3 on PATH when it is another, and pyenv's 3.9 when there is
#    one), without numpy: import, tokenize, to_str_tokens and analyze work, array calls say
#    numpy is missing;
#  - pip install ./python (the pure package, through python/build_backend.py) works offline
#    without setuptools or the wheel package.
#   HS_BUILD     the build folder (build, or build-san under SANITIZE)
#   HS_SANITIZE  the sanitizers of that build: Python then preloads the ASan runtime
#   HEADSCOPE    the command-line program
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${HS_BUILD:-build}
BIN=${HEADSCOPE:-$BUILD/headscope}
PY=/usr/bin/python3 # Debian's, with python3-numpy and pip
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "wheel.sh: FAIL: $*" >&2; exit 1; }
ok() { echo "ok - $*"; }

whls=("$BUILD"/headscope-*.whl)
[ ${#whls[@]} = 1 ] && [ -f "${whls[0]}" ] || fail "expected one wheel in $BUILD: ${whls[*]}"
whl=$ROOT/${whls[0]}
pre=
if [[ "${HS_SANITIZE:-}" == *address* ]]; then
    # Python is not built with ASan: the runtime must come first; its leaks are not ours
    pre=$(${CC:-cc} -print-file-name=libasan.so)
    export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1
fi

# the wheel's own files, read with zipfile (what pip checks, and what it would not)
$PY - "$whl" <<'PYEOF' || fail "the wheel's files"
import base64, hashlib, re, sys, sysconfig, zipfile
path = sys.argv[1]
name = path.rsplit("/", 1)[1]
m = re.fullmatch(r"headscope-(\d+\.\d+\.\d+)-py3-none-([a-z0-9_]+)\.whl", name)
assert m, name
version, plat = m.groups()
assert plat == re.sub(r"[^A-Za-z0-9]", "_", sysconfig.get_platform()), plat
z = zipfile.ZipFile(path)
info = "headscope-%s.dist-info/" % version
rows = [r.split(",") for r in z.read(info + "RECORD").decode().splitlines()]
listed = {r[0] for r in rows}
assert listed == set(z.namelist()), (listed ^ set(z.namelist()))
for f, h, size in rows:
    if f == info + "RECORD":
        continue
    data = z.read(f)
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    assert h == "sha256=" + digest and int(size) == len(data), f
wheel = z.read(info + "WHEEL").decode()
assert "Tag: py3-none-%s\n" % plat in wheel and "Root-Is-Purelib: false" in wheel, wheel
meta = z.read(info + "METADATA").decode()
assert "Requires-Dist: numpy\n" in meta and "Requires-Python: >=3.9\n" in meta, meta
assert z.read("headscope/libheadscope.so.3")[:4] == b"\x7fELF"
assert (z.getinfo("headscope/libheadscope.so.3").external_attr >> 16) & 0o111
PYEOF
ok "$(basename "$whl"): RECORD, tag, Requires-Dist numpy, the library inside"

# Debian's Python, a venv without system site-packages; numpy linked into it
$PY -m venv "$tmp/deb"
site=$("$tmp/deb/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
np_dir=$($PY -c 'import numpy, os; print(os.path.dirname(numpy.__file__))')
for f in "$np_dir" "$np_dir"-*.egg-info "$np_dir"-*.dist-info; do
    [ -e "$f" ] && ln -s "$f" "$site/"
done
"$tmp/deb/bin/python" -c 'import headscope' 2>/dev/null && fail "headscope importable before install"
env -u HEADSCOPE_LIB "$tmp/deb/bin/python" -m pip install -q --no-index --disable-pip-version-check \
    "$whl" >"$tmp/pip.log" 2>&1 || { cat "$tmp/pip.log"; fail "pip install the wheel"; }
text="The cat sat on the mat. The cat sat on the mat."
"$BIN" attn fixtures/tiny-gpt2 --text "$text" -o "$tmp/a.npy" -q
"$BIN" tokenize fixtures/tiny-gpt2 --text "$text" --json >"$tmp/tok.json"
(cd "$tmp" && env -u HEADSCOPE_LIB -u LD_LIBRARY_PATH LD_PRELOAD=$pre "$tmp/deb/bin/python" - \
    "$ROOT/fixtures/tiny-gpt2" "$text" "$tmp/a.npy" "$tmp/tok.json" "$tmp/deb" <<'PYEOF') ||
import json, os, sys
import numpy as np
import headscope
model, text, npy, tok, venv = sys.argv[1:]
assert headscope.__file__.startswith(venv + "/"), headscope.__file__
assert headscope.LIBRARY_PATH == os.path.join(os.path.dirname(headscope.__file__),
                                              "libheadscope.so.3"), headscope.LIBRARY_PATH
with headscope.load(model) as m:
    assert np.array_equal(m.attention(text), np.load(npy))
    assert m.tokenize(text).ids == json.load(open(tok))["ids"]
    assert m.to_str_tokens(text)[:3] == ["The", " cat", " sat"]
print(headscope.version(), headscope.LIBRARY_PATH)
PYEOF
    fail "the installed wheel in Debian's Python"
ok "pip install --no-index into a venv without system site-packages (numpy linked in): maps equal attn's"

# other Pythons, without numpy: --no-deps, and what works without it
others=${HS_WHEEL_PYTHONS-}
if [ -z "${HS_WHEEL_PYTHONS+set}" ]; then
    others=$PY # Debian's again, this time without numpy
    p=$(command -v python3 || true)
    [ -n "$p" ] && "$p" -c 'import sys; sys.exit(sys.executable == "/usr/bin/python3")' 2>/dev/null &&
        others="$others $p"
    if command -v pyenv >/dev/null; then
        for p in "$(pyenv root)"/versions/3.9*/bin/python3; do [ -x "$p" ] && others="$others $p" && break; done
    fi
fi
i=0
for p in $others; do
    i=$((i + 1))
    v=$("$p" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    "$p" -m venv --without-pip "$tmp/o$i"
    env -u HEADSCOPE_LIB $PY -m pip --python "$tmp/o$i/bin/python" install -q --no-index --no-deps \
        --disable-pip-version-check "$whl" >"$tmp/pip.log" 2>&1 ||
        { cat "$tmp/pip.log"; fail "pip install the wheel into a venv of $p"; }
    (cd "$tmp" && env -u HEADSCOPE_LIB -u LD_LIBRARY_PATH LD_PRELOAD=$pre "$tmp/o$i/bin/python" - \
        "$ROOT/fixtures/tiny-gpt2" <<'PYEOF') || fail "the wheel in a venv of $p"
import sys
try:
    import numpy
    sys.exit("numpy is there: not the case this checks")
except ImportError:
    pass
import headscope
m = headscope.load(sys.argv[1])
assert m.to_str_tokens("Hello world") == ["Hello", " world"]
assert m.tokenize("Hello world").ids == [15496, 995]
r = m.analyze("Hello world", ablation=False, gradient=False)
assert r["model"]["n_layer"] == 2 and len(r["heads"]) == 8
try:
    m.attention("Hello world")
    sys.exit("attention without numpy")
except ImportError as e:
    assert "numpy" in str(e), e
PYEOF
    ok "Python $v ($p): the wheel with --no-deps in a venv without numpy: import, tokens, analyze"
done
[ $i -gt 0 ] || echo "ok - no Python in HS_WHEEL_PYTHONS: the venvs without numpy skipped"

# pip install ./python: the pure package, built by python/build_backend.py without setuptools
cp -r python "$tmp/src"
env -u HEADSCOPE_LIB $PY -m pip --python "$tmp/deb/bin/python" install -q --no-index --no-deps \
    --force-reinstall --disable-pip-version-check "$tmp/src" >"$tmp/pip.log" 2>&1 ||
    { cat "$tmp/pip.log"; fail "pip install ./python"; }
[ -e "$site/headscope/libheadscope.so.3" ] && fail "pip install ./python left the wheel's library"
out=$(cd "$tmp" && HEADSCOPE_LIB=$tmp/nope.so "$tmp/deb/bin/python" -c 'import headscope' 2>&1) &&
    fail "import without a library succeeded"
[[ "$out" == *"cannot load libheadscope.so.3"*"make wheel"* ]] || fail "import said: $out"
where=$(cd "$tmp" && HEADSCOPE_LIB=$ROOT/$BUILD/libheadscope.so.3 LD_PRELOAD=$pre "$tmp/deb/bin/python" -c \
    'import headscope; print(headscope.LIBRARY_PATH)')
[ "$where" = "$ROOT/$BUILD/libheadscope.so.3" ] || fail "pure package loaded $where"
ok "pip install ./python offline without setuptools: the pure package, the installed library"
