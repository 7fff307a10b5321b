#!/usr/bin/env bash
# make docs-test: the documentation against what it describes (tests/docs_check.py).
#   - every picture README.md and docs/*.md show exists, and they are exactly the pictures
#     `make docs-images` (docs/img/make_images.sh) draws;
#   - every relative link of README.md and docs/*.md resolves;
#   - the pictures drawn by headscope (all but the page screenshot, which needs Chromium and
#     its fonts) are byte for byte what make_images.sh draws now from the fixtures;
#   - every key of five real reports (a GPT-2 text, a BERT pair with --word-level, a
#     grouped-query Llama with resample ablation and greedy pruning, a corpus run with
#     --corpus-ablation, a T5 text and target) is named in docs/report-schema.md, every key of its report tables
#     occurs in one of them, and its Top level table is exactly their top-level keys.
#
#   HEADSCOPE=build/headscope bash tests/docs_check.sh
set -u
HS=${HEADSCOPE:-build/headscope}
PY=/usr/bin/python3
T=$(mktemp -d /tmp/hs-docs-XXXXXX)
trap 'rm -rf "$T"' EXIT
passed=0 failed=0
step() { # step NAME CMD...: runs CMD, prints its output when it fails
    local name=$1
    shift
    if "$@" >"$T/out" 2>&1; then
        passed=$((passed + 1))
        echo "ok - $name"
    else
        failed=$((failed + 1))
        echo "FAIL: $name" >&2
        cat "$T/out" >&2
    fi
}
# shellcheck disable=SC2046
step "the docs' pictures are make docs-images' outputs" "$PY" tests/docs_check.py images $(bash docs/img/make_images.sh --list)
step "the docs' relative links resolve" "$PY" tests/docs_check.py links .

same() {
    HEADSCOPE=$HS bash docs/img/make_images.sh --no-browser "$T/img" >/dev/null || return 1
    local f bad=0
    for f in $(bash docs/img/make_images.sh --list); do
        [ "$f" = docs/img/page-head-view.png ] && continue
        cmp -s "$f" "$T/img/$f" || { echo "$f differs from what make docs-images draws now (run make docs-images)"; bad=1; }
    done
    return $bad
}
step "the committed pictures are what make docs-images draws" same

reports() {
    local txt="The cat sat on the mat. The cat sat on the mat."
    mkdir -p "$T/r"
    "$HS" analyze fixtures/tiny-gpt2 --text "$txt" --no-images -o "$T/r/gpt2" -q &&
        "$HS" analyze fixtures/tiny-bert --text "the cat sat on the mat" --text-pair "where did the cat sit?" \
            --word-level --no-images -o "$T/r/bert" -q &&
        "$HS" analyze fixtures/family-models/tiny-llama --text "$txt" --ablation resample --prune-method greedy \
            --no-images -o "$T/r/llama" -q &&
        "$HS" analyze fixtures/tiny-gpt2 --corpus fixtures/corpus/mixed.jsonl --corpus-ablation -o "$T/r/corpus" -q &&
        "$HS" analyze fixtures/t5/models/t5-tiny --text "$txt" --target "The cat sat." --no-images -o "$T/r/t5" -q &&
        "$PY" tests/docs_check.py keys "$T"/r/*/report.json
}
step "report-schema.md names every key of real reports, and the reverse" reports
echo "docs: $passed passed, $failed failed"
[ "$failed" = 0 ]
