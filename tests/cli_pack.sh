#!/usr/bin/env bash
# analyze --corpus --pack-tokens (run by `make test`'s cli-test): the maps of several texts
# recorded in one packed pass give the same texts.jsonl, byte for byte, and the same report
# (timing aside) as one pass a text, on learned positions (GPT-2, BERT with a text pair),
# rotary (Llama; windows, ALiBi and the other families in test_forward_packed); with a
# sample, a shard, bad records among the good, and a run stopped at a checkpoint and
# resumed; --pack-tokens outside its range is a usage error.
set -u
HS=${HEADSCOPE:-build/headscope}
PY=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d /tmp/hs-cli-pack-XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/cli_util.sh"

CP=fixtures/corpus/licenses.txt
MIX=fixtures/corpus/mixed.jsonl
FAM=fixtures/family-models

# same_run NAME DIR_A DIR_B: texts.jsonl byte-identical, report.json (a shard's
# partial.json) equal but for timing
same_run() {
    local rep=report.json
    [ -f "$2/$rep" ] || rep=partial.json
    cmp -s "$2/texts.jsonl" "$3/texts.jsonl" && ok || bad "$1: texts.jsonl differs packed and unpacked"
    "$PY" - "$2/$rep" "$3/$rep" <<'PYEOF' && ok || bad "$1: $rep differs packed and unpacked"
import json, sys
def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items()
                if k not in ("timing", "command_line", "seconds", "created")}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return x
a, b = (json.load(open(p)) for p in sys.argv[1:3])
sys.exit(0 if strip(a) == strip(b) else 1)
PYEOF
}

# pack NAME MODEL CORPUS [options...]: one pass a text, then packs of 96 tokens
pack() {
    local name=$1 model=$2 corpus=$3
    shift 3
    expect 0 "$name, one a pass" -- "$HS" analyze "$model" --corpus "$corpus" --pack-tokens 0 \
        --no-gradient -q -o "$T/$name.1" "$@"
    expect 0 "$name, packed" -- "$HS" analyze "$model" --corpus "$corpus" --pack-tokens 96 \
        --no-gradient -q -o "$T/$name.p" "$@"
    same_run "$name" "$T/$name.1" "$T/$name.p"
}

pack gpt2 fixtures/trained-gpt2 "$CP" --max-texts 8
pack bert-pairs fixtures/trained-bert "$MIX"
pack llama "$FAM/tiny-llama" "$MIX" --max-tokens 40
pack sample-shard fixtures/trained-gpt2 "$CP" --sample 6 --seed 3 --shard 2/2
# the default budget, and the gradient: the loss and gradient passes stay a text's own
expect 0 "gradient, packed by default" -- "$HS" analyze fixtures/trained-gpt2 --corpus "$CP" \
    --max-texts 5 -q -o "$T/grad.p"
expect 0 "gradient, one a pass" -- "$HS" analyze fixtures/trained-gpt2 --corpus "$CP" \
    --max-texts 5 --pack-tokens 0 -q -o "$T/grad.1"
same_run "gradient" "$T/grad.1" "$T/grad.p"

# stopped after 4 texts at a checkpoint (every 2), resumed: the texts of one whole run
HEADSCOPE_TEST_STOP_AFTER=4 "$HS" analyze fixtures/trained-gpt2 --corpus "$CP" --max-texts 9 \
    --pack-tokens 96 --checkpoint-every 2 --no-gradient -q -o "$T/res" >/dev/null 2>&1
[ -s "$T/res/partial.json" ] && ok || bad "resume: no checkpoint after the stop"
expect 0 "resume, packed" -- "$HS" analyze fixtures/trained-gpt2 --corpus "$CP" --max-texts 9 \
    --pack-tokens 96 --checkpoint-every 2 --no-gradient -q --resume -o "$T/res"
expect 0 "resume's reference" -- "$HS" analyze fixtures/trained-gpt2 --corpus "$CP" \
    --max-texts 9 --pack-tokens 0 --no-gradient -q -o "$T/res.1"
same_run "resume" "$T/res.1" "$T/res"

expect 2 "--pack-tokens x" -- "$HS" analyze fixtures/trained-gpt2 --corpus "$CP" --pack-tokens x -o "$T/u"
one_line_error "--pack-tokens x"
stderr_has "--pack-tokens x" "--pack-tokens 'x' is not a number"
expect 2 "--pack-tokens without --corpus" -- "$HS" analyze fixtures/trained-gpt2 --text hi --pack-tokens 64 -o "$T/u"

echo "cli_pack: $pass passed, $fail failed"
[ "$fail" = 0 ]
