#!/usr/bin/env bash
# --activations q8 (run by `make test`'s cli-test): on the shipped block-quantised GGUF
# fixtures (Q8_0, Q4_0, Q4_K, Q6_K, a Q4_K/Q6_K/Q8_0 mix, Q4_K_M with Q5_0/Q5_1 fallbacks),
# the maps, logits and loss with 8-bit activations stay within the bounds docs/gguf.md
# states against the exact stored-type path (measured by bench/q8_error.py: the largest
# here 0.11, 0.35 and 0.0054; asserted with about 2x margin), and differ from it (the 8-bit
# products ran); an F16 file keeps the float path's bytes; the maps are the same bytes on 1
# and 2 threads; bad values are usage errors.
set -u
HS=${HEADSCOPE:-build/headscope}
PY=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d /tmp/hs-cli-q8-XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/cli_util.sh"

F=fixtures/gguf/families
TEXT="The old lighthouse keeper climbed the spiral stairs every evening, counting the steps as his father had taught him, and lit the great lamp before the fishing boats came home."

# within NAME FILE [logits]: q8 against stored, each bound (the logits too with a third word)
within() {
    local name=$1 file=$2 logits=${3:-}
    for mode in stored q8; do
        local opt=(--weight-memory stored)
        [ $mode = q8 ] && opt=(--activations q8)
        expect 0 "$name $mode attn" -- "$HS" attn "$file" --text "$TEXT" -q "${opt[@]}" \
            -o "$T/$name.$mode.npy" --nll "$T/$name.$mode.nll.npy"
        [ -n "$logits" ] || continue
        expect 0 "$name $mode dump" -- "$HS" dump "$file" --text "$TEXT" -q "${opt[@]}" \
            --what logits -o "$T/$name.$mode.d"
    done
    "$PY" - "$T/$name" <<'PYEOF' && ok || bad "$name: --activations q8 outside its bounds"
import sys
import numpy as np
p = sys.argv[1]
m0, m1 = np.load(p + ".stored.npy"), np.load(p + ".q8.npy")
n0, n1 = np.load(p + ".stored.nll.npy"), np.load(p + ".q8.nll.npy")
try:
    l0, l1 = np.load(p + ".stored.d/logits.npy"), np.load(p + ".q8.d/logits.npy")
    dl = float(np.max(np.abs(l0 - l1)))
except FileNotFoundError:  # maps and loss only
    dl = 0.5
dm = float(np.max(np.abs(m0 - m1)))
dn = abs(float(np.mean(n1) - np.mean(n0)))
ok = 0 < dm <= 0.25 and 0 < dl <= 0.8 and dn <= 0.012
if not ok:
    print("%s: max |dmap| %.3g (bound 0.25), max |dlogit| %.3g (0.8), |dloss| %.3g (0.012)"
          % (p, dm, dl, dn), file=sys.stderr)
sys.exit(0 if ok else 1)
PYEOF
}

within q8_0 "$F/tiny-llama.q8_0.gguf" logits
within q4_0 "$F/tiny-llama-wide.q4_0.gguf"
within q4_k "$F/tiny-llama-wide.q4_k.gguf" logits
within q6_k "$F/tiny-llama-wide.q6_k.gguf"
within mixed "$F/tiny-llama-wide.mixed.gguf"
within fallback "$F/tiny-qwen2.q4_k_m_fallback.gguf" logits

# F16 layers stay on the float path: the stored path's bytes
expect 0 "f16 stored" -- "$HS" attn "$F/tiny-qwen2.f16.gguf" --text "$TEXT" -q --weight-memory stored -o "$T/f16.s.npy"
expect 0 "f16 q8" -- "$HS" attn "$F/tiny-qwen2.f16.gguf" --text "$TEXT" -q --activations q8 -o "$T/f16.q.npy"
cmp -s "$T/f16.s.npy" "$T/f16.q.npy" && ok || bad "f16: --activations q8 changed the maps"

# the same bytes on 1 and 2 threads, and the option before the command
expect 0 "q8 one thread" -- "$HS" attn "$F/tiny-llama-wide.q4_k.gguf" --text "$TEXT" -q --activations q8 --threads 1 -o "$T/t1.npy"
expect 0 "q8 two threads" -- "$HS" --activations=q8 attn "$F/tiny-llama-wide.q4_k.gguf" --text "$TEXT" -q --threads 2 -o "$T/t2.npy"
cmp -s "$T/t1.npy" "$T/t2.npy" && ok || bad "q8: maps differ on 1 and 2 threads"
cmp -s "$T/t1.npy" "$T/q4_k.q8.npy" && ok || bad "q8: the option before the command is not the same run"
expect 0 "q8 with --weight-memory stored" -- "$HS" attn "$F/tiny-llama-wide.q4_k.gguf" --text "$TEXT" -q \
    --activations q8 --weight-memory stored -o "$T/t3.npy"
cmp -s "$T/t1.npy" "$T/t3.npy" && ok || bad "q8: --weight-memory stored changed a q8 run"
expect 0 "--activations float" -- "$HS" attn "$F/tiny-llama-wide.q4_k.gguf" --text "$TEXT" -q \
    --activations float --weight-memory stored -o "$T/t4.npy"
cmp -s "$T/t4.npy" "$T/q4_k.stored.npy" && ok || bad "--activations float is not the stored path"

# the report says which activations the run used (model.activations)
for mode in float q8; do
    expect 0 "analyze $mode" -- "$HS" --activations $mode analyze "$F/tiny-llama-wide.q4_k.gguf" \
        --text "$TEXT" -q --weight-memory stored --no-gradient --no-ablation -o "$T/an.$mode"
    got=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["model"]["activations"])' \
        "$T/an.$mode/report.json" 2>&1)
    [ "$got" = "$mode" ] && ok || bad "analyze --activations $mode: model.activations is '$got'"
done

# usage errors
expect 2 "--activations x" -- "$HS" attn "$F/tiny-llama.q8_0.gguf" --text hi --activations int4 -o "$T/u.npy"
one_line_error "--activations x"
stderr_has "--activations x" "--activations 'int4' is not float or q8"
expect 2 "q8 with a budget" -- "$HS" attn "$F/tiny-llama.q8_0.gguf" --text hi --activations q8 --weight-memory 2G -o "$T/u.npy"
one_line_error "q8 with a budget"
stderr_has "q8 with a budget" "takes no --weight-memory but 'stored'"
expect 2 "--activations without a value" -- "$HS" attn "$F/tiny-llama.q8_0.gguf" --text hi -o "$T/u.npy" --activations
no_file "usage errors write nothing" "$T/u.npy"

echo "cli_q8: $pass passed, $fail failed"
[ "$fail" = 0 ]
