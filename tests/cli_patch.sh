#!/usr/bin/env bash
# headscope patch from the command line (part of `make cli-test`): its usage errors (exit
# 2), bad pairs files (exit 1, one line naming the line and the tokens, no folder left), and
# a run whose patching.json agrees with the library's checked numbers (tests/test_patch.c)
# and with itself: schema, records, the picture, both methods.
set -u
HS=${HEADSCOPE:-build/headscope}
PY=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d /tmp/hs-patch-XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/cli_util.sh"

G=fixtures/tiny-gpt2
TG=fixtures/trained-gpt2
B=fixtures/tiny-bert
P="$T/pairs.jsonl"
cat >"$P" <<'EOF'
{"clean": "When Mary and John went to the store, John gave a drink to", "corrupt": "When Mary and John went to the store, Mary gave a drink to", "answer": " Mary", "wrong": " John"}

{"clean": "When Tom and James went to the park, James gave a ball to", "corrupt": "When Tom and James went to the park, Tom gave a ball to", "answer_id": 4186, "wrong": " James"}
EOF

# ---- usage errors --------------------------------------------------------------------------
expect 0 "patch --help" -- "$HS" patch --help
grep -q "^usage: headscope patch MODEL --pairs" "$T/out" && ok || bad "patch --help text"
grep -q -- "--site S" "$T/out" && ok || bad "patch --help lists --site"
expect 2 "patch without --pairs" -- "$HS" patch "$G" -o "$T/o"
stderr_has "patch without --pairs" "headscope: patch: no pairs (use --pairs PAIRS.jsonl)"
expect 2 "patch without -o" -- "$HS" patch "$G" --pairs "$P"
expect 2 "patch without MODEL" -- "$HS" patch --pairs "$P" -o "$T/o"
expect 2 "patch bad --site" -- "$HS" patch "$G" --pairs "$P" -o "$T/o" --site result
stderr_has "patch bad --site" "--site 'result' is not one of z, q, k, v, pattern, resid_pre, attn_out, mlp_out"
expect 2 "patch bad --metric" -- "$HS" patch "$G" --pairs "$P" -o "$T/o" --metric kl
expect 2 "patch bad --resamples" -- "$HS" patch "$G" --pairs "$P" -o "$T/o" --resamples -1
stderr_has "patch bad --resamples" "--resamples '-1' is not a number in [0, 100000]"
expect 2 "patch unknown option" -- "$HS" patch "$G" --pairs "$P" -o "$T/o" --bogus
[ ! -e "$T/o" ] && ok || bad "a usage error made the folder"

# ---- bad pairs: one line naming the line, no folder left -----------------------------------
bad_pairs() { # DESCRIPTION LINE MESSAGE [MODEL]
    printf '%s\n' "$2" >"$T/bad.jsonl"
    expect 1 "$1" -- "$HS" patch "${4:-$G}" --pairs "$T/bad.jsonl" -o "$T/ob"
    one_line_error "$1"
    stderr_has "$1" "$3"
    [ ! -e "$T/ob" ] && ok || bad "$1: left '$T/ob'"
}
bad_pairs "two-token answer" '{"clean": "a b", "corrupt": "c d", "answer": " headscope", "wrong": " x"}' \
    "line 1: answer ' headscope' is 2 tokens ('Ġhead', 'scope'), not one"
bad_pairs "unequal prompts" '{"clean": "a b", "corrupt": "c d e", "answer": " x", "wrong": " y"}' \
    "line 1: clean is 2 tokens ('a', 'Ġb'), corrupt 3 ('c', 'Ġd', 'Ġe'): they must be as many"
bad_pairs "not JSON" '{"clean": "a b",' "line 1 is not valid JSON"
bad_pairs "no corrupt" '{"clean": "a b", "answer": " x", "wrong": " y"}' 'line 1: no "corrupt" string (or "corrupt_ids")'
bad_pairs "no wrong for logit-diff" '{"clean": "a b", "corrupt": "c d", "answer": " x"}' \
    'line 1: no "wrong" (a string of one token) or "wrong_id"'
bad_pairs "id out of range" '{"clean": "a b", "corrupt": "c d", "answer_id": 50257, "wrong": " y"}' \
    "line 1: answer_id is not a token id in [0, 50257)"
bad_pairs "BERT without [MASK]" '{"clean": "a b", "corrupt": "c d", "answer": "x", "wrong": "y"}' \
    "line 1: the clean prompt has no [MASK] token" "$B"
printf '\n\n' >"$T/empty.jsonl"
expect 1 "no pairs" -- "$HS" patch "$G" --pairs "$T/empty.jsonl" -o "$T/ob"
stderr_has "no pairs" "holds no pairs"
expect 1 "missing pairs file" -- "$HS" patch "$G" --pairs "$T/nope.jsonl" -o "$T/ob"
one_line_error "missing pairs file"

# ---- a run ---------------------------------------------------------------------------------
expect 0 "patch trained-gpt2 both" -- "$HS" patch "$TG" --pairs "$P" -o "$T/run" --method both --positions each --resamples 200
grep -q "^patched z of 4 layers over 2 pairs" "$T/out" && ok || bad "patch summary: $(cat "$T/out")"
[ "$(ls "$T/run" | tr '\n' ' ')" = "index.html patching.json patching.png patching_positions.png " ] && ok || bad "patch files: $(ls "$T/run")"
"$PY" - "$T/run/patching.json" <<'PYEOF' && ok || bad "patching.json"
import json, math, sys
j = json.load(open(sys.argv[1]))
assert j["schema"] == "headscope.patching/1" and j["method"] == "both" and j["site"] == "z"
assert j["hook"] == "blocks.L.attn.hook_z" and j["per_position"] is True
assert [p["line"] for p in j["pairs"]] == [1, 3] and j["pairs"][1]["answer_id"] == 4186
m = j["metric"]
c1, c0 = sum(m["clean"]) / 2, sum(m["corrupt"]) / 2
assert abs(m["clean_mean"] - c1) < 1e-12 and len(j["heads"]) == 16
for h in j["heads"]:   # the effect is the normalised mean of per_pair
    e = (sum(h["per_pair"]) / 2 - c0) / (c1 - c0)
    assert abs(h["effect"] - e) < 1e-9, (h, e)
    assert h["ci95"][0] <= h["effect"] + 1e-9 or len(set(h["per_pair"])) > 0
    assert "effect_attribution" in h and len(h["per_pair_attribution"]) == 2
assert len(j["positions"]) == 16 * j["pairs"][0]["n_tokens"]
assert -1 <= j["correlation"]["heads"] <= 1 and -1 <= j["correlation"]["positions"] <= 1
assert j["bootstrap"] == {"resamples": 200, "seed": 24301, "level": 0.95}
assert j["files"] == ["patching.png", "patching_positions.png", "index.html", "patching.json"]
# the page embeds the report (tests/browser_patch.py reads what it shows)
page = open(sys.argv[1].replace("patching.json", "index.html")).read()
at = page.index('<script type="application/json" id="hs-patching">') + 49
assert json.loads(page[at:page.index("</script>", at)]) == j
PYEOF
pngcheck -q "$T/run/patching.png" >/dev/null 2>&1 && ok || bad "patching.png is not a valid PNG"
expect 0 "patch again, another site" -- "$HS" patch "$G" --pairs "$P" -o "$T/run" --site mlp_out --metric prob --direction noise --no-images -q
[ "$(ls "$T/run" | tr '\n' ' ')" = "index.html patching.json " ] && ok || bad "a second run left: $(ls "$T/run")"
"$PY" -c "
import json; j = json.load(open('$T/run/patching.json'))
assert j['site'] == 'mlp_out' and j['n_heads'] == 0 and j['heads'][1]['head'] is None and len(j['heads']) == 2
" && ok || bad "mlp_out report"

# ---- path patching ------------------------------------------------------------------------
expect 2 "patch bad --path" -- "$HS" patch "$G" --pairs "$P" -o "$T/pp" --path 0.1:1.0
stderr_has "patch bad --path" "--path '0.1:1.0' is not SENDER:RECEIVER:INPUT, e.g. 2.3:3.0:k"
expect 2 "patch --path with --site" -- "$HS" patch "$G" --pairs "$P" -o "$T/pp" --path 0.1:1.0:k --site q
expect 2 "patch --receiver alone" -- "$HS" patch "$G" --pairs "$P" -o "$T/pp" --receiver 1.0:k
stderr_has "patch --receiver alone" "--path-senders all and --receiver R:I go together"
expect 1 "patch path out of the model" -- "$HS" patch "$G" --pairs "$P" -o "$T/pp" --path 0.1:2.0:k
one_line_error "patch path out of the model"
stderr_has "patch path out of the model" "path patching: receiver 2.0 (layer 1 to 1, head 0 to 3) with input q, k or v"
expect 0 "patch all senders" -- "$HS" patch "$G" --pairs "$P" -o "$T/pp" --path-senders all --receiver 1.2:v -q
"$PY" -c "
import json; j = json.load(open('$T/pp/patching.json'))
assert j['method'] == 'path' and 'heads' not in j and j['files'] == ['patching.png', 'index.html', 'patching.json']
assert [p['sender'] for p in j['paths']] == ['0.0', '0.1', '0.2', '0.3'] and j['paths'][2]['receiver'] == '1.2'
assert all(p['input'] == 'v' and len(p['per_pair']) == 2 for p in j['paths'])
" && ok || bad "all senders' report: $(head -c 300 "$T/pp/patching.json")"
expect 0 "patch one path" -- "$HS" patch "$G" --pairs "$P" -o "$T/pp" --path 0.1:1.2:v -q
"$PY" -c "
import json; j = json.load(open('$T/pp/patching.json')); a = json.load(open('$T/pp/patching.json'))
assert len(j['paths']) == 1 and j['paths'][0]['sender'] == '0.1' and j['files'] == ['index.html', 'patching.json']
" && ok || bad "one path's report"
[ ! -e "$T/pp/patching.png" ] && ok || bad "the all-senders picture was left beside one path's report"

# ---- --shard I/N and merge: the merged report is the one run's --------------------------
head -3 fixtures/patch/induction.jsonl >"$T/ind.jsonl"
shard_check() { # DESCRIPTION MODEL OPTIONS...
    local what=$1 model=$2
    shift 2
    rm -rf "$T/s1" "$T/s2" "$T/s3" "$T/sall" "$T/sm"
    for i in 1 2 3; do "$HS" patch "$model" --pairs "$T/ind.jsonl" --shard $i/3 -o "$T/s$i" -q "$@" ||
        bad "$what: shard $i"; done
    "$HS" patch "$model" --pairs "$T/ind.jsonl" -o "$T/sall" -q --no-images "$@" || bad "$what: one run"
    expect 0 "merge $what" -- "$HS" merge "$T/s3" "$T/s1" "$T/s2/patching.json" -o "$T/sm" -q
    "$PY" - "$T/sall/patching.json" "$T/sm/patching.json" "$T/s2/patching.json" <<'PYEOF' && ok || bad "merge $what: the merged report differs from one run's"
import json, sys
one, merged, part = (json.load(open(p)) for p in sys.argv[1:])
assert part["shard"] == {"index": 2, "count": 3} and [p["line"] for p in part["pairs"]] == [2]
assert "shard" not in merged and len(merged["pairs"]) == 3
def same(a, b, at="report"):  # the shards' per-pair values as printed: last bits may differ
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), (at, a.keys() ^ b.keys())
        for k in a:
            same(a[k], b[k], at + "." + k)
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), at
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, "%s[%d]" % (at, i))
    elif isinstance(a, (int, float)) and not isinstance(a, bool):
        assert abs(a - b) <= 1e-12 * max(1, abs(a)), (at, a, b)
    else:
        assert a == b, (at, a, b)
same(one, merged)
PYEOF
    [ -s "$T/sm/index.html" ] && grep -q 'id="hs-patching"' "$T/sm/index.html" && ok ||
        bad "merge $what: no patching page"
}
shard_check "z, both methods" "$TG" --method both
shard_check "attn_out per position" "$G" --site attn_out --positions each --metric prob
shard_check "path senders" "$TG" --path-senders all --receiver 1.0:k --direction noise
expect 2 "patch bad --shard" -- "$HS" patch "$TG" --pairs "$T/ind.jsonl" -o "$T/o" --shard 4/3
stderr_has "patch bad --shard" "--shard '4/3' is not I/N with 1 <= I <= N <= 10^6"
expect 1 "patch empty shard" -- "$HS" patch "$TG" --pairs "$T/ind.jsonl" -o "$T/o" --shard 7/9
stderr_has "patch empty shard" "holds 3 pairs, none of them this shard's"
expect 1 "merge a shard missing" -- "$HS" merge "$T/s1" "$T/s2" -o "$T/o"
stderr_has "merge a shard missing" "headscope: merge: 2 of the 3 shards given: every shard 1..3 once"
expect 1 "merge a shard twice" -- "$HS" merge "$T/s1" "$T/s1" "$T/s2" -o "$T/o"
stderr_has "merge a shard twice" "shard 1/3 is given twice"
expect 1 "merge shards of two runs" -- "$HS" merge "$T/s1" "$T/s2" "$T/s3" "$T/sall" -o "$T/o"
one_line_error "merge shards of two runs"
"$HS" patch "$TG" --pairs "$T/ind.jsonl" --shard 2/3 -o "$T/s2" -q --path-senders all --receiver 1.0:k
expect 1 "merge different options" -- "$HS" merge "$T/s1" "$T/s2" "$T/s3" -o "$T/o"
stderr_has "merge different options" "differ in \"direction\": not shards of one run"
"$HS" patch "$TG" --pairs "$T/ind.jsonl" --shard 2/3 -o "$T/s2" -q --path-senders all --receiver 1.1:k --direction noise
expect 1 "merge different receivers" -- "$HS" merge "$T/s1" "$T/s2" "$T/s3" -o "$T/o"
stderr_has "merge different receivers" "the shards' \"paths\" records differ: not shards of one run"
[ ! -e "$T/o" ] && ok || bad "a failed merge left its folder"

echo "cli_patch.sh: $pass passed, $fail failed"
[ "$fail" = 0 ]
