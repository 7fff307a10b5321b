#!/usr/bin/env bash
# End-to-end tests of T5, the encoder-decoder, on the command line (run by `make test`'s
# cli-test): `attn` with --ids / --target-ids writes the three kinds of maps and the target's
# NLL, checked against the float64 reference's goldens (fixtures/ref/t5_ref.py,
# fixtures/t5/golden/); `info`; the refusals, each one line, exit 1, nothing left behind.
set -u
HS=${HEADSCOPE:-build/headscope}
PY=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d /tmp/hs-cli-t5-XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/cli_util.sh"

M=fixtures/t5/models
G=fixtures/t5/golden

# attn: OUT.encoder.npy, OUT.decoder.npy, OUT.cross.npy and --nll against the goldens (1e-5)
for c in small:t5-tiny small_v11:t5-v1_1-tiny; do
    cs=${c%%:*} model=${c#*:}
    expect 0 "attn $model" -- "$HS" attn "$M/$model" --ids "$G/$cs.enc_ids.npy" \
        --target-ids "$G/$cs.target.npy" --nll "$T/nll.npy" -o "$T/maps.npy"
    grep -q "^wrote .*maps.cross.npy: [0-9]* layers x 2 heads x [0-9]* x [0-9]* (decoder x encoder tokens)$" "$T/out" &&
        ok || bad "attn $model output lines: $(cat "$T/out")"
    "$PY" - "$T" "$G/$cs" <<'PY' && ok || bad "attn $model maps or nll vs t5_ref.py"
import sys, numpy as np
t, g = sys.argv[1], sys.argv[2]
worst = 0
for kind, gold in [("encoder", "enc_attn"), ("decoder", "dec_attn"), ("cross", "cross_attn")]:
    a, b = np.load("%s/maps.%s.npy" % (t, kind)), np.load("%s.%s.npy" % (g, gold))
    assert a.shape == b.shape, (kind, a.shape, b.shape)
    worst = max(worst, abs(a.astype(float) - b).max())
n, m = np.load(t + "/nll.npy"), np.load(g + ".nll.npy")
assert n.shape == m.shape
worst = max(worst, (abs(n.astype(float) - m) / np.maximum(1, abs(m))).max())
print("t5 attn: largest difference %.2g" % worst)
sys.exit(0 if worst <= 1e-5 else 1)
PY
done

# --ablation: every head of each kind against t5_ref.py's deltas (1e-5)
expect 0 "attn t5 --ablation" -- "$HS" attn "$M/t5-tiny" --ids "$G/small.enc_ids.npy" \
    --target-ids "$G/small.target.npy" --ablation "$T/abl.npy" -o "$T/maps.npy" -q
"$PY" - "$T/abl.npy" "$G/small.ablation.npy" <<'PY' && ok || bad "attn t5 --ablation vs t5_ref.py"
import sys, numpy as np
a, b = np.load(sys.argv[1]).astype(float), np.load(sys.argv[2]).astype(float)
assert a.shape == b.shape and (np.isnan(a) == np.isnan(b)).all(), (a.shape, b.shape)
worst = np.nanmax(abs(a - b))
print("t5 ablation: largest difference %.2g" % worst)
sys.exit(0 if worst <= 1e-5 else 1)
PY
# --gradient: the hand-written backward against t5_ref.py's central differences
expect 0 "attn t5 --gradient" -- "$HS" attn "$M/t5-v1_1-tiny" --ids "$G/small_v11.enc_ids.npy" \
    --target-ids "$G/small_v11.target.npy" --gradient "$T/grad.npy" -o "$T/maps.npy" -q
"$PY" - "$T/grad.npy" "$G/small_v11.gradient.npy" <<'PY' && ok || bad "attn t5 --gradient vs t5_ref.py"
import sys, numpy as np
a, b = np.load(sys.argv[1]).astype(float), np.load(sys.argv[2]).astype(float)
assert a.shape == b.shape and (np.isnan(a) == np.isnan(b)).all(), (a.shape, b.shape)
worst = np.nanmax(abs(a - b)) / np.nanmax(abs(b))
print("t5 gradient: largest difference %.2g of the largest" % worst)
sys.exit(0 if worst <= 1e-5 else 1)
PY
expect 1 "attn --ablation on gpt2" -- "$HS" attn fixtures/tiny-gpt2 --ids "$G/small.enc_ids.npy" --ablation "$T/a2.npy" -o "$T/x.npy"
one_line_error "attn --ablation on gpt2"
no_file "attn --ablation on gpt2" "$T/a2.npy"

expect 0 "info t5" -- "$HS" info "$M/t5-v1_1-tiny"
grep -q '^family: *t5 (encoder-decoder, pre-RMSNorm, gated gelu tanh)$' "$T/out" && ok || bad "info t5 family: $(cat "$T/out")"
grep -q '^layers: *5 (encoder 2, decoder 3 with cross-attention)$' "$T/out" && ok || bad "info t5 layers: $(cat "$T/out")"
grep -q '^cross heads: *2 per decoder layer, 6 in all$' "$T/out" && ok || bad "info t5 cross heads: $(cat "$T/out")"
expect 0 "info t5 v1.0" -- "$HS" info "$M/t5-tiny"
grep -q '^family: *t5 (encoder-decoder, pre-RMSNorm, ReLU)$' "$T/out" && ok || bad "info t5 v1.0: $(cat "$T/out")"

# refusals: one line, exit 1, no output file
expect 1 "attn t5 without a target" -- "$HS" attn "$M/t5-tiny" --ids "$G/small.enc_ids.npy" -o "$T/x.npy"
one_line_error "attn t5 without a target"
stderr_has "attn t5 without a target" "--target TEXT or --target-ids"
no_file "attn t5 without a target" "$T/x.encoder.npy"
expect 1 "attn target on gpt2" -- "$HS" attn fixtures/tiny-gpt2 --ids "$G/small.enc_ids.npy" --target-ids "$G/small.target.npy" -o "$T/x.npy"
one_line_error "attn target on gpt2"
stderr_has "attn target on gpt2" "need an encoder-decoder model"
"$PY" -c "import numpy as np; np.save('$T/big.npy', np.array([5, 300], np.int32))"
expect 1 "attn t5 id outside the vocabulary" -- "$HS" attn "$M/t5-tiny" --ids "$G/small.enc_ids.npy" --target-ids "$T/big.npy" -o "$T/x.npy"
one_line_error "attn t5 id outside the vocabulary"
stderr_has "attn t5 id outside the vocabulary" "outside the vocabulary"
for k in encoder decoder cross; do no_file "attn t5 bad id leaves no $k maps" "$T/x.$k.npy"; done
# convert: t5-tiny to llama.cpp's t5, whose maps equal the folder's; t5-v1_1-tiny's buckets
# reach 64, which llama.cpp's t5 cannot say (its distance is 128): refused by name, no file
expect 0 "convert t5" -- "$HS" convert "$M/t5-tiny" -o "$T/t5.gguf"
expect 0 "attn t5 gguf" -- "$HS" attn "$T/t5.gguf" --ids "$G/small.enc_ids.npy" \
    --target-ids "$G/small.target.npy" -o "$T/g.npy"
expect 0 "attn t5 folder" -- "$HS" attn "$M/t5-tiny" --ids "$G/small.enc_ids.npy" \
    --target-ids "$G/small.target.npy" -o "$T/h.npy"
for k in encoder decoder cross; do
    cmp -s "$T/g.$k.npy" "$T/h.$k.npy" && ok || bad "convert t5: the GGUF file's $k maps differ"
done
expect 1 "convert t5 v1.1 (max distance 64)" -- "$HS" convert "$M/t5-v1_1-tiny" -o "$T/v11.gguf"
one_line_error "convert t5 v1.1 (max distance 64)"
stderr_has "convert t5 v1.1 (max distance 64)" "relative_attention_max_distance is 64, and llama.cpp's t5 fixes it at 128"
no_file "convert t5 v1.1 (max distance 64)" "$T/v11.gguf"

# analyze: the three kinds of heads' metrics, diversity, ablation and gradient against the
# float64 reference's goldens (fixtures/ref/make_t5_report_golden.py), the pictures, the page
TXT=$("$PY" -c "import json; print(json.load(open('$G/analyze_text.json'))['text'])")
TGT=$("$PY" -c "import json; print(json.load(open('$G/analyze_text.json'))['target'])")
for model in t5-tiny t5-v1_1-tiny; do
    expect 0 "analyze $model" -- "$HS" analyze "$M/$model" --text "$TXT" --target "$TGT" -o "$T/an"
    grep -q "^  cross    [23] x 2 heads, maps 13 x 20; most focused cross" "$T/out" &&
        ok || bad "analyze $model summary: $(cat "$T/out")"
    "$PY" fixtures/ref/make_t5_report_golden.py --check "$T/an/report.json" "$model" >"$T/chk" &&
        ok || bad "analyze $model vs make_t5_report_golden.py: $(cat "$T/chk")"
    "$PY" - "$T/an" <<'PY' && ok || bad "analyze $model: files, shapes, ids"
import json, os, sys
d = sys.argv[1]
r = json.load(open(d + "/report.json"))
ids = json.load(open("fixtures/t5/golden/analyze_ids.json"))
assert r["input"]["ids"] == ids["text_ids"] and r["input"]["target_ids"] == ids["target_ids"]
assert r["input"]["decoder_ids"] == [r["model"]["decoder_start_id"]] + ids["target_ids"][:-1]
shapes = {k["kind"]: k["map_shape"] for k in r["kinds"]}
assert shapes == {"encoder": [20, 20], "decoder": [13, 13], "cross": [13, 20]}, shapes
assert all(h["map_shape"] == shapes[h["kind"]] for h in r["heads"])
for f in r["files"]:
    assert os.path.isfile(os.path.join(d, f)), f
pics = [f for f in r["files"] if f.startswith("heads/")]
assert len(pics) == len(r["heads"]) and "heads/cross_L0_H1.png" in pics, pics
page = open(d + "/index.html").read()
assert page.count('class="hs-xmap"') == len(r["heads"]) and 'data-kind="cross"' in page
PY
done
# the page shows the three kinds (tests/browser_numbers.py reads its numbers when Chromium is there)
expect 2 "analyze t5 without a target" -- "$HS" analyze "$M/t5-tiny" --text "a text" -o "$T/an2"
one_line_error "analyze t5 without a target"
stderr_has "analyze t5 without a target" "is an encoder-decoder (t5): give its decoder's target with --target TEXT"
no_file "analyze t5 without a target" "$T/an2"
expect 2 "analyze --target on gpt2" -- "$HS" analyze fixtures/tiny-gpt2 --text "a text" --target "b" -o "$T/an2"
one_line_error "analyze --target on gpt2"
stderr_has "analyze --target on gpt2" "--target is for an encoder-decoder's decoder"
no_file "analyze --target on gpt2" "$T/an2"
expect 1 "analyze t5 --ablation mean" -- "$HS" analyze "$M/t5-tiny" --text "a text" --target "b" --ablation mean -o "$T/an2"
one_line_error "analyze t5 --ablation mean"
stderr_has "analyze t5 --ablation mean" "mean ablation is not implemented for an encoder-decoder"
no_file "analyze t5 --ablation mean" "$T/an2"
printf 'a text\n' >"$T/corpus.txt"
expect 1 "analyze t5 --corpus" -- "$HS" analyze "$M/t5-tiny" --corpus "$T/corpus.txt" -o "$T/an2"
one_line_error "analyze t5 --corpus"
stderr_has "analyze t5 --corpus" "its corpus mode is not implemented"
no_file "analyze t5 --corpus" "$T/an2"

echo "cli_t5: $pass passed, $fail failed"
[ "$fail" = 0 ]
