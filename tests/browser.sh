#!/usr/bin/env bash
# Opens the index.html of real `headscope analyze` runs in headless Chromium and clicks
# through every view (tests/browser_test.py): the overview table, the head view (lines
# checked against the float32 maps of `headscope attn`), the model view and the map view,
# and every number each view shows against report.json (tests/browser_numbers.py); a corpus
# run's page; a page without maps; and a GPT-2-small-sized page at 512 tokens (size and time
# to open). The models are the fixtures': tiny-gpt2, tiny-bert, tiny-llama, trained-gpt2
# (README.md), trained-bert (a sentence pair) and a tiny Gemma 3 with local and global layers
# (tests/browser_local.py).
# Needs: apt-get install -y chromium chromium-driver python3-selenium (and python3-numpy).
# Screenshots are kept in $HS_SHOTS (default /tmp/headscope-browser).
#
#   HEADSCOPE=build/headscope bash tests/browser.sh
#
# HEADSCOPE: the binary (its folder holds libheadscope.a, used to build the page
# helper tests/html_page.c); HS_LDFLAGS: extra link flags for the helper (the
# sanitizer flags of a SANITIZE build); PYTHON: a python3 with selenium and numpy.
set -u
HS=${HEADSCOPE:-build/headscope}
PY=${PYTHON:-/usr/bin/python3}
CC=${CC:-cc}
LIB=${HS_LIB:-$(dirname "$HS")/libheadscope.a}
SHOTS=${HS_SHOTS:-/tmp/headscope-browser}
T=$(mktemp -d /tmp/hs-browser-XXXXXX)
trap 'rm -rf "$T"' EXIT

die() {
    echo "FAIL: $*" >&2
    echo "browser: 0 passed, 1 failed"
    exit 1
}

need_pkgs="apt-get install -y chromium chromium-driver python3-selenium python3-numpy"
{ command -v chromium >/dev/null || [ -x /usr/lib/chromium/chromium ]; } ||
    die "chromium is not installed; run: $need_pkgs"
command -v chromedriver >/dev/null || [ -x /usr/bin/chromedriver ] ||
    die "chromedriver is not installed; run: $need_pkgs"
"$PY" -c 'import selenium, numpy' 2>/dev/null || die "$PY has no selenium or numpy; run: $need_pkgs"
[ -x "$HS" ] || die "no headscope binary at '$HS' (run make, or set HEADSCOPE)"
[ -f "$LIB" ] || die "no library at '$LIB' (set HS_LIB)"

# shellcheck disable=SC2086,SC2046
$CC -std=c11 -O1 -g -Iinclude -Isrc -D_POSIX_C_SOURCE=200809L \
    $(pkg-config --cflags libcjson) tests/html_page.c "$LIB" \
    $(pkg-config --libs openblas libpng libcjson libutf8proc) -lm -lpthread ${HS_LDFLAGS:-} \
    -o "$T/html_page" || die "cannot build tests/html_page.c"

# page NAME MODEL TEXT-ARGS... [-- ANALYZE-ARGS...]: analyze into $T/NAME and write the
# float32 maps of the same text to $T/NAME.npy
cases=()
page() {
    local name=$1 model=$2 text=() more=()
    shift 2
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do text+=("$1"); shift; done
    [ $# -gt 0 ] && shift && more=("$@")
    "$HS" analyze "$model" "${text[@]}" "${more[@]}" -o "$T/$name" -q || die "analyze $model failed"
    [ -f "$T/$name/index.html" ] || die "analyze $model wrote no index.html"
    "$HS" attn "$model" "${text[@]}" -o "$T/$name.npy" -q || die "attn $model failed"
    cases+=(--case "$name" "$T/$name/index.html" "$T/$name.npy")
}

TEXT="The cat sat on the mat. The cat sat on the mat."
page tiny-gpt2 fixtures/tiny-gpt2 --text "$TEXT"
page tiny-bert fixtures/tiny-bert --text "the cat sat on the mat" --text-pair "where did the cat sit?"
page tiny-llama fixtures/family-models/tiny-llama --text "$TEXT" -- --no-pruning --probe-ablation resample
page trained-gpt2 fixtures/trained-gpt2 --file README.md --truncate -- --no-pruning
page trained-bert fixtures/trained-bert \
    --text "The cat sat on the mat because it was tired after the long day." \
    --text-pair "Where did the cat sit, and why did it sit there?"
# local (sliding-window) and global layers: a tiny Gemma 3 (layers 0 and 1 see the last 48
# keys, layer 2 every key) with Llama 2's tokenizer, on a text longer than the window
"$PY" fixtures/ref/make_norms_fixtures.py --one tiny-gemma3 --out "$T/gemma3-model" \
    --tokenizer fixtures/tokenizer/families/llama2.tokenizer.json >/dev/null || die "cannot make tiny-gemma3"
"$HS" analyze "$T/gemma3-model" --text "$TEXT $TEXT The dog sat on the log, and the cat sat on the mat again." \
    --no-pruning -o "$T/local" -q || die "analyze tiny-gemma3 failed"
# the same report without maps, beside it so that its pictures resolve
"$T/html_page" "$T/tiny-gpt2/report.json" "$T/tiny-gpt2/index-nomaps.html" || die "html_page without maps failed"
# a corpus run's page
"$HS" analyze fixtures/tiny-gpt2 --corpus fixtures/corpus/mixed.jsonl -o "$T/corpus" -q ||
    die "analyze --corpus failed"
# GPT-2-small's shape at 512 tokens: a synthetic report and maps, built into a page
"$PY" tests/browser_test.py --make-budget "$T/budget" || die "cannot make the budget case"
"$T/html_page" "$T/budget/report.json" "$T/budget/attn.npy" "$T/budget/index.html" ||
    die "html_page for the budget case failed"
rm -f "$T/budget/attn.npy"

# T5: the page of its three kinds of heads, and attn's maps of the same text and target
T5TXT="The license is granted to any person, and the license is not granted to you."
T5TGT="The license is granted, and the license is not granted."
"$HS" analyze fixtures/t5/models/t5-v1_1-tiny --text "$T5TXT" --target "$T5TGT" -o "$T/t5" -q ||
    die "analyze t5 failed"
"$HS" attn fixtures/t5/models/t5-v1_1-tiny --text "$T5TXT" --target "$T5TGT" -o "$T/t5.npy" -q ||
    die "attn t5 failed"

# the patching page (headscope patch's index.html) of two pairs: both methods per position,
# path patching from every sender, and a site without heads
head -2 fixtures/patch/induction.jsonl >"$T/pairs.jsonl"
patches=()
for p in "both:--method both --positions each" "path:--path-senders all --receiver 1.0:k" "resid:--site resid_pre"; do
    # shellcheck disable=SC2086
    "$HS" patch fixtures/tiny-gpt2 --pairs "$T/pairs.jsonl" -o "$T/patch-${p%%:*}" -q ${p#*:} ||
        die "patch ${p%%:*} failed"
    patches+=(--patch "$T/patch-${p%%:*}/index.html")
done

"$PY" tests/browser_test.py --shots "$SHOTS" "${cases[@]}" --t5 "$T/t5/index.html" "$T/t5" \
    --nomaps "$T/tiny-gpt2/index-nomaps.html" --corpus "$T/corpus/index.html" \
    --budget "$T/budget/index.html" --local "$T/local/index.html" "${patches[@]}"
