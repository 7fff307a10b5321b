#!/usr/bin/env bash
# make docs-images: draws again every picture that README.md and docs/*.md show, from files
# in the clone, so that they are what a fresh run draws:
#   fixtures/render/sample_{head,gallery,similarity,importance}.png   synthetic maps
#       (fixtures/render/make_samples.c, docs/pictures.md)
#   docs/img/trained-gpt2-gallery.png, trained-gpt2-L3_H0.png   `headscope analyze
#       fixtures/trained-gpt2` on the README's repeated sentence (gallery.png, heads/L3_H0.png)
#   docs/img/patching-induction.png, patching-path.png   docs/patching.md's worked example:
#       `headscope patch fixtures/trained-gpt2` on fixtures/patch/induction.jsonl (patching.png)
#   docs/img/t5-cross.png   docs/analyze.md's T5 example: `headscope analyze
#       fixtures/t5/models/t5-tiny --text ... --target ...` (heads/cross_L1_H1.png)
#   docs/img/page-head-view.png   that run's index.html for fixtures/trained-bert on a
#       sentence pair, head view, layer 2, every head (headless Chromium, 1500 px wide)
#
#   bash docs/img/make_images.sh [--list] [--no-browser] [OUT]
#
# OUT (default: the repository) receives the pictures at the same relative paths; --list
# prints those paths and stops; --no-browser skips the screenshot. HEADSCOPE (default
# build/headscope; its folder holds libheadscope.a), PYTHON (a python3 with selenium), CC,
# HS_LDFLAGS (the flags the library was built with that a program linking it needs: sanitizers).
set -eu
list=0 browser=1
while [ $# -gt 0 ]; do
    case $1 in
    --list) list=1 ;;
    --no-browser) browser=0 ;;
    *) break ;;
    esac
    shift
done
OUT=${1:-.}
PICS="fixtures/render/sample_head.png fixtures/render/sample_gallery.png
fixtures/render/sample_similarity.png fixtures/render/sample_importance.png
docs/img/trained-gpt2-gallery.png docs/img/trained-gpt2-L3_H0.png docs/img/page-head-view.png
docs/img/patching-induction.png docs/img/patching-path.png docs/img/t5-cross.png"
if [ $list = 1 ]; then
    printf '%s\n' $PICS
    exit 0
fi
HS=${HEADSCOPE:-build/headscope}
LIB=$(dirname "$HS")/libheadscope.a
PY=${PYTHON:-/usr/bin/python3}
CC=${CC:-cc}
# the README's example sentence, the one its gallery and L3.H0 pictures show
TEXT="Permission is hereby granted, free of charge, to any person obtaining a copy of this software. Permission is hereby granted, free of charge, to any person obtaining a copy of this software."
grep -qF -- "--text \"$TEXT\"" README.md || { echo "make_images: README.md no longer analyses the sentence the pictures show" >&2; exit 1; }
PAIR_A="The cat sat on the mat because it was tired after the long day."
PAIR_B="Where did the cat sit, and why did it sit there?"
[ -x "$HS" ] && [ -f "$LIB" ] || { echo "make_images: no $HS and $LIB (run make)" >&2; exit 1; }
T=$(mktemp -d /tmp/hs-docimg-XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir -p "$OUT/fixtures/render" "$OUT/docs/img"

# shellcheck disable=SC2046
# shellcheck disable=SC2086
$CC -std=c11 $HS_LDFLAGS -Iinclude fixtures/render/make_samples.c "$LIB" \
    $(pkg-config --libs libpng libcjson libutf8proc) -lm -fopenmp -o "$T/make_samples"
"$T/make_samples" "$OUT/fixtures/render" >/dev/null

"$HS" analyze fixtures/trained-gpt2 --text "$TEXT" -o "$T/gpt2" -q
cp "$T/gpt2/gallery.png" "$OUT/docs/img/trained-gpt2-gallery.png"
cp "$T/gpt2/heads/L3_H0.png" "$OUT/docs/img/trained-gpt2-L3_H0.png"

# docs/patching.md's two commands
"$HS" patch fixtures/trained-gpt2 --pairs fixtures/patch/induction.jsonl -o "$T/patch" \
    --method both -q
cp "$T/patch/patching.png" "$OUT/docs/img/patching-induction.png"
"$HS" patch fixtures/trained-gpt2 --pairs fixtures/patch/induction.jsonl -o "$T/path" \
    --path-senders all --receiver 3.0:k -q
cp "$T/path/patching.png" "$OUT/docs/img/patching-path.png"

# docs/analyze.md's T5 example: a cross-attention head, decoder tokens x encoder tokens
T5_TEXT="The license is granted to any person, and the license is not granted to you."
T5_TARGET="The license is granted, and the license is not granted."
grep -qF -- "--text \"$T5_TEXT\"" docs/analyze.md || { echo "make_images: docs/analyze.md no longer analyses the T5 text the picture shows" >&2; exit 1; }
"$HS" analyze fixtures/t5/models/t5-tiny --text "$T5_TEXT" --target "$T5_TARGET" -o "$T/t5" -q
cp "$T/t5/heads/cross_L1_H1.png" "$OUT/docs/img/t5-cross.png"

if [ $browser = 1 ]; then
    "$HS" analyze fixtures/trained-bert --text "$PAIR_A" --text-pair "$PAIR_B" -o "$T/bert" -q
    "$PY" docs/img/head_view_shot.py "$T/bert/index.html" 2 "$OUT/docs/img/page-head-view.png"
fi
printf 'wrote %s\n' $PICS | { [ $browser = 1 ] && cat || grep -v page-head-view; }
