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
expect 1 "convert t5" -- "$HS" convert "$M/t5-tiny" -o "$T/t5.gguf"
one_line_error "convert t5"
stderr_has "convert t5" "no encoder-decoder GGUF file yet"
no_file "convert t5" "$T/t5.gguf"

expect 1 "analyze t5" -- "$HS" analyze "$M/t5-tiny" --text "a text" -o "$T/an"
one_line_error "analyze t5"
stderr_has "analyze t5" "is an encoder-decoder (t5): its analysis is not implemented yet"
no_file "analyze t5" "$T/an"

echo "cli_t5: $pass passed, $fail failed"
[ "$fail" = 0 ]
