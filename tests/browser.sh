#!/usr/bin/env bash
# Opens the index.html of real `headscope analyze` runs in headless Chromium and checks
# it (tests/browser_test.py): no console errors, one table row per head, sorting,
# clicking a row shows that head's map, the line view, pictures listed in the report,
# and the page without maps. Needs: apt-get install -y chromium chromium-driver
# python3-selenium. Screenshots are kept in $HS_SHOTS (default /tmp/headscope-browser).
#
#   HEADSCOPE=build/headscope bash tests/browser.sh
#
# HEADSCOPE: the binary (its folder holds libheadscope.a, used to build the page
# helper tests/html_page.c); HS_LDFLAGS: extra link flags for the helper (the
# sanitizer flags of a SANITIZE build); PYTHON: a python3 with selenium.
# When analyze does not write index.html itself, the helper builds it from
# report.json and the maps of `headscope attn`.
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

need_pkgs="apt-get install -y chromium chromium-driver python3-selenium"
{ command -v chromium >/dev/null || [ -x /usr/lib/chromium/chromium ]; } ||
    die "chromium is not installed; run: $need_pkgs"
command -v chromedriver >/dev/null || [ -x /usr/bin/chromedriver ] ||
    die "chromedriver is not installed; run: $need_pkgs"
"$PY" -c 'import selenium' 2>/dev/null || die "$PY has no selenium; run: $need_pkgs"
[ -x "$HS" ] || die "no headscope binary at '$HS' (run make, or set HEADSCOPE)"
[ -f "$LIB" ] || die "no library at '$LIB' (set HS_LIB)"

# shellcheck disable=SC2086,SC2046
$CC -std=c11 -O1 -g -Iinclude -Isrc -D_POSIX_C_SOURCE=200809L \
    $(pkg-config --cflags libcjson) tests/html_page.c "$LIB" \
    $(pkg-config --libs openblas libpng libcjson libutf8proc) -lm -lpthread ${HS_LDFLAGS:-} \
    -o "$T/html_page" || die "cannot build tests/html_page.c"

# page DIR MODEL ARGS...: analyze into DIR; build DIR/index.html when analyze did not
page() {
    local dir=$1 model=$2
    shift 2
    "$HS" analyze "$model" "$@" -o "$dir" -q || die "analyze $model failed"
    [ -f "$dir/report.json" ] || die "analyze $model wrote no report.json"
    if [ ! -f "$dir/index.html" ]; then
        echo "browser: analyze wrote no index.html for $model; building it with tests/html_page.c"
        "$HS" attn "$model" "$@" -o "$T/attn.npy" -q || die "attn $model failed"
        "$T/html_page" "$dir/report.json" "$T/attn.npy" "$dir/index.html" ||
            die "html_page $model failed"
    fi
}

TEXT="The cat sat on the mat. The cat sat on the mat."
page "$T/gpt2" fixtures/tiny-gpt2 --text "$TEXT"
page "$T/bert" fixtures/tiny-bert --text "the cat sat on the mat" --text-pair "where did the cat sit?"
# the same report without maps, beside it so that its pictures resolve
"$T/html_page" "$T/gpt2/report.json" "$T/gpt2/index-nomaps.html" || die "html_page without maps failed"

"$PY" tests/browser_test.py --shots "$SHOTS" \
    --case tiny-gpt2 "$T/gpt2/index.html" 8 1 \
    --case tiny-bert "$T/bert/index.html" 16 1 \
    --case tiny-gpt2-nomaps "$T/gpt2/index-nomaps.html" 8 0
