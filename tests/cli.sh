#!/usr/bin/env bash
# End-to-end tests of the headscope command line. Run by `make test` (HEADSCOPE points at
# the binary). Numbers are checked against the independent references in fixtures/:
# token ids from fixtures/tokenizer/ref_tokenize.py, attention maps from the float64
# PyTorch reference fixtures/ref/hs_ref.py (via compare_attn.py).
set -u
HS=${HEADSCOPE:-build/headscope}
PY=${PYTHON:-/usr/bin/python3}
SHARED=../shared/models
T=$(mktemp -d /tmp/hs-cli-XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/cli_util.sh"

G=fixtures/tiny-gpt2
B=fixtures/tiny-bert

# ---- usage and help -------------------------------------------------------------------
expect 2 "no arguments" -- "$HS"
expect 0 "--help" -- "$HS" --help
grep -q "^usage: headscope" "$T/out" && ok || bad "--help prints usage to stdout"
expect 2 "unknown command" -- "$HS" frobnicate
for c in attn tokenize info; do
    expect 0 "$c --help" -- "$HS" "$c" --help
    grep -q "^usage: headscope $c" "$T/out" && ok || bad "$c --help text"
    expect 2 "$c unknown flag" -- "$HS" "$c" --bogus "$G"
done
expect 2 "attn without -o" -- "$HS" attn "$G" --text hi
expect 2 "attn --text and --file" -- "$HS" attn "$G" --text hi --file /dev/null -o "$T/a.npy"
expect 2 "attn without text" -- "$HS" attn "$G" -o "$T/a.npy"
expect 2 "attn two models" -- "$HS" attn "$G" "$B" --text hi -o "$T/a.npy"
expect 2 "attn -o without value" -- "$HS" attn "$G" --text hi -o

# ---- tokenize: known ids ------------------------------------------------------------------
expect 0 "tokenize gpt2 json" -- "$HS" tokenize "$G" --text "Hello world" --json
stdout_is "GPT-2 Hello world" '{"ids":[15496,995],"tokens":["Hello","Ġworld"],"type_ids":[0,0]}'
expect 0 "tokenize gpt2 endoftext" -- "$HS" tokenize "$G" --text "hello <|endoftext|> world" --json
grep -q '"ids":\[31373,220,50256,995\]' "$T/out" && ok || bad "GPT-2 <|endoftext|> ids: $(cat "$T/out")"
expect 0 "tokenize bert json" -- "$HS" tokenize "$B" --text "hello world" --json
grep -q '"ids":\[101,7592,2088,102\]' "$T/out" && ok || bad "BERT hello world ids: $(cat "$T/out")"
expect 0 "tokenize bert mask" -- "$HS" tokenize "$B" --text "The capital of France is [MASK]." --json
[ "$(grep -o '103' "$T/out" | wc -l)" = 1 ] && ok || bad "one [MASK]: $(cat "$T/out")"
expect 0 "tokenize bert pair" -- "$HS" tokenize "$B" --text "a cat" --text-pair "a dog" --json
grep -q '"type_ids":\[0,0,0,0,1,1,1\]' "$T/out" && ok || bad "pair type ids: $(cat "$T/out")"
printf 'caf\xc3\xa9 \x00 x' >"$T/nul.txt"
expect 0 "tokenize --file with NUL" -- "$HS" tokenize "$B" --file "$T/nul.txt" --json
grep -q '"tokens":\["\[CLS\]","cafe","x","\[SEP\]"\]' "$T/out" && ok || bad "NUL dropped, accent stripped: $(cat "$T/out")"
expect 0 "tokenize stdin" -- bash -c "printf 'Hello world' | '$HS' tokenize '$G' --file - --json"
stdout_is "stdin" '{"ids":[15496,995],"tokens":["Hello","Ġworld"],"type_ids":[0,0]}'
# --display: the readable forms (GPT-2's byte table: "\u0120" is a space, "\u00c3\u00a9" the bytes of e-acute)
expect 0 "tokenize --display" -- "$HS" tokenize "$G" --text "Hello world, café" --display
stdout_is "GPT-2 display" "$(printf '0\t15496\t0\tHello\n1\t995\t0\t world\n2\t11\t0\t,\n3\t40304\t0\t café')"
expect 0 "tokenize --display --json" -- "$HS" tokenize "$B" --text "unaffable" --display --json
stdout_is "BERT display" '{"ids":[101,14477,20961,3468,102],"tokens":["[CLS]","una","##ffa","##ble","[SEP]"],"type_ids":[0,0,0,0,0],"display":["[CLS]","una","##ffa","##ble","[SEP]"]}'
expect 1 "tokenize to a full stdout" -- bash -c "'$HS' tokenize '$G' --text 'Hello world' > /dev/full"
stderr_has "full stdout" "cannot write to standard output"
# an empty text: no ids for GPT-2, [CLS] [SEP] (and a second [SEP] for a pair) for BERT, as
# Hugging Face's tokenizers and llama-tokenize give them
expect 0 "tokenize gpt2 empty" -- "$HS" tokenize "$G" --text ""
stdout_is "GPT-2 empty text" ""
expect 0 "tokenize gpt2 empty json" -- "$HS" tokenize "$G" --text "" --json
stdout_is "GPT-2 empty json" '{"ids":[],"tokens":[],"type_ids":[]}'
expect 0 "tokenize bert empty" -- "$HS" tokenize "$B" --text "" --json
stdout_is "BERT empty text" '{"ids":[101,102],"tokens":["[CLS]","[SEP]"],"type_ids":[0,0]}'
expect 0 "tokenize bert empty pair" -- "$HS" tokenize "$B" --text "" --text-pair "" --json
stdout_is "BERT empty pair" '{"ids":[101,102,102],"tokens":["[CLS]","[SEP]","[SEP]"],"type_ids":[0,0,1]}'

# ---- tokenize on a family tokenizer.json (ids from the Rust tokenizers library: node
# fixtures/tokenizer/make_family_goldens.js; README "Family tokenizers") -------------------------
F=fixtures/tokenizer/families
expect 0 "tokenize roberta json" -- "$HS" tokenize "$F/roberta.tokenizer.json" --text "Hello <mask>" --text-pair "a" --json
stdout_is "RoBERTa mask and pair" '{"ids":[0,15500,50264,2,2,68,2],"tokens":["<s>","Hello","<mask>","</s>","</s>","a","</s>"],"type_ids":[0,0,0,0,0,0,0]}'
expect 0 "tokenize llama2 json" -- "$HS" tokenize "$F/llama2.tokenizer.json" --text "<s> h" --json
stdout_is "Llama 2 prepend after <s>" '{"ids":[1,1,391,524],"tokens":["<s>","<s>","▁","▁h"],"type_ids":[0,0,0,0]}'
expect 0 "tokenize llama2_ms json" -- "$HS" tokenize "$F/llama2_ms.tokenizer.json" --text "<s> h" --json
stdout_is "Llama 2 metaspace first" '{"ids":[1,1,524],"tokens":["<s>","<s>","▁h"],"type_ids":[0,0,0]}'
expect 0 "tokenize llama3 pair" -- "$HS" tokenize "$F/llama3.tokenizer.json" --text "12345" --text-pair "1" --json
stdout_is "Llama 3 digits and pair" '{"ids":[3256,1193,18,19,20,3256,16],"tokens":["<|begin_of_text|>","12","3","4","5","<|begin_of_text|>","1"],"type_ids":[0,0,0,0,0,1,1]}'
expect 0 "tokenize qwen2" -- "$HS" tokenize "$F/qwen2.tokenizer.json" --text "12345"
[ "$(cut -f2 "$T/out" | tr '\n' ' ')" = "16 17 18 19 20 " ] && ok || bad "Qwen2 single digits: $(cat "$T/out")"
expect 0 "tokenize neox" -- "$HS" tokenize "$F/neox.tokenizer.json" --text "a     b" --json
grep -q '"ids":\[66,3277,67\]' "$T/out" && ok || bad "NeoX space run: $(cat "$T/out")"
expect 1 "tokenize neox pair" -- "$HS" tokenize "$F/neox.tokenizer.json" --text a --text-pair b
one_line_error "neox pair"
stderr_has "neox pair" "this model's byte-level BPE tokenizer (post-processor ByteLevel) takes a single text"
expect 1 "tokenize max-tokens below roberta's specials" -- "$HS" tokenize "$F/roberta.tokenizer.json" --text a --text-pair b --max-tokens 3
stderr_has "roberta specials" "leaves no room for the 4 special tokens the post-processor (RobertaProcessing) adds"
expect 0 "tokenize roberta max-tokens" -- "$HS" tokenize "$F/roberta.tokenizer.json" --text "a b c d e" --max-tokens 4 --json
grep -q '"ids":\[0,68,279,2\]' "$T/out" && ok || bad "RoBERTa truncation keeps </s>: $(cat "$T/out")"
printf '{"model": {"type": "WordLevel", "vocab": {}}}' >"$T/wl.json"
expect 1 "tokenize unsupported tokenizer.json" -- "$HS" tokenize "$T/wl.json" --text a
one_line_error "unsupported tokenizer.json"
stderr_has "unsupported tokenizer.json" "model 'WordLevel' is not supported"
# T5's Unigram (ids from unigram_golden.json's library: "▁the" 5, "</s>" 1), its readable form,
# and a Precompiled normalizer whose charsmap is not one refused by name
expect 0 "tokenize t5" -- "$HS" tokenize "$F/t5.tokenizer.json" --text "the  the" --display --json
stdout_is "T5 Unigram" '{"ids":[5,5,1],"tokens":["▁the","▁the","</s>"],"type_ids":[0,0,0],"display":[" the"," the","</s>"]}'
printf '{"normalizer": {"type": "Precompiled", "precompiled_charsmap": "AAAA"}, "model": {"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0]]}}' >"$T/uni.json"
expect 1 "tokenize Precompiled" -- "$HS" tokenize "$T/uni.json" --text a
one_line_error "Precompiled"
stderr_has "Precompiled" "Precompiled precompiled_charsmap is malformed (its trie is empty or longer than the map)"
# a tokenizer.json with text or a NUL byte after its object is refused at that byte (issue 41)
sz=$(wc -c <fixtures/tokenizer/added.tokenizer.json)
{ cat fixtures/tokenizer/added.tokenizer.json; printf '}'; } >"$T/trail.json"
expect 1 "tokenize tokenizer.json with trailing text" -- "$HS" tokenize "$T/trail.json" --text a
one_line_error "tokenizer.json with trailing text"
stderr_has "tokenizer.json with trailing text" "not valid JSON (text after the end of the JSON value at byte $sz)"
{ cat fixtures/tokenizer/added.tokenizer.json; printf '\0'; } >"$T/nul.json"
expect 1 "tokenize tokenizer.json with a NUL byte" -- "$HS" tokenize "$T/nul.json" --text a
stderr_has "tokenizer.json with a NUL byte" "not valid JSON (a NUL byte at byte $sz)"

# ---- attn against the reference ------------------------------------------------------------
# compare TEXT MODEL [PAIR]: ids from the reference tokenizer must equal headscope's, and the
# maps must match the float64 reference within 1e-5.
compare() {
    local model=$1 text=$2 pair=${3:-} name tol=${TOL:-1e-5}
    name=$(basename "$model")
    local args=(--ids "$T/ref_ids.npy" --types "$T/ref_types.npy")
    local hsargs=()
    [ -n "$pair" ] && args+=(--pair "$pair") && hsargs+=(--text-pair "$pair")
    "$PY" fixtures/ref/ref_ids.py "$model" "$text" "${args[@]}" || { bad "$name: reference tokenizer failed"; return; }
    expect 0 "$name tokenize" -- "$HS" tokenize "$model" --text "$text" "${hsargs[@]}" --json
    "$PY" -c "
import json, sys, numpy as np
got = json.load(open('$T/out'))
ref = np.load('$T/ref_ids.npy').tolist(); tt = np.load('$T/ref_types.npy').tolist()
sys.exit(0 if (got['ids'], got['type_ids']) == (ref, tt) else 1)" && ok || bad "$name: ids differ from the reference tokenizer"
    expect 0 "$name attn" -- "$HS" attn "$model" --text "$text" "${hsargs[@]}" -o "$T/attn.npy"
    if "$PY" fixtures/ref/compare_attn.py "$model" "$T/ref_ids.npy" "$T/attn.npy" --type-ids "$T/ref_types.npy" --tol "$tol" >"$T/cmp" 2>&1; then
        ok
    else
        bad "$name maps vs reference: $(cat "$T/cmp")"
    fi
}
compare "$G" "The cat sat on the mat. The cat sat on the mat. Induction heads copy what came next."
compare "$B" "The capital of France is [MASK]." "Paris is a city in Europe."
compare fixtures/trained-gpt2 "When Mary and John went to the store, John gave a drink to Mary."
# 193 tokens: causal products run in blocks of 128 query rows (two blocks here). Over this
# many tokens float32 accumulation alone moves this model's maps by ~1.1e-5 from the float64
# reference (measured with and without the blocking), hence the 2e-5 bound here.
LONG=$(printf 'Permission is hereby granted, free of charge, to any person obtaining a copy of this software and associated documentation files, to deal in the Software without restriction. %.0s' 1 2 3 4 5 6)
TOL=2e-5 compare fixtures/trained-gpt2 "$LONG"
if [ -d "$SHARED/tiny-gpt2" ]; then
    compare "$SHARED/tiny-gpt2" "When Mary and John went to the store, John gave a drink to"
    compare "$SHARED/tiny-bert" "unaffable résumé naïve café" "日本語 text"
else
    echo "cli: skipped the F32 originals of the tiny models: $SHARED is absent (development checkout only)"
fi

# gguf_round_trip DIR TEXT TYPES...: convert DIR to GGUF of each type; ids identical to the
# folder's, maps equal for f32 (<= 1e-6); for the others the difference is printed and only
# a gross error (> 0.5, e.g. a transposed tensor) fails.
gguf_round_trip() {
    local dir=$1 text=$2 name
    shift 2
    name=$(basename "$dir")
    "$HS" attn "$dir" --text "$text" -o "$T/rt_ref.npy" -q || { bad "$name attn"; return; }
    "$HS" tokenize "$dir" --text "$text" --json >"$T/rt_ids.json"
    for ty in "$@"; do
        expect 0 "$name convert $ty" -- "$HS" convert "$dir" -o "$T/rt.bin" --type "$ty"
        expect 0 "$name tokenize gguf $ty" -- "$HS" tokenize "$T/rt.bin" --text "$text" --json
        cmp -s "$T/out" "$T/rt_ids.json" && ok || bad "$name $ty: ids differ from the folder's"
        expect 0 "$name attn gguf $ty" -- "$HS" attn "$T/rt.bin" --text "$text" -o "$T/rt.npy"
        "$PY" -c "
import numpy as np, sys
d = float(np.abs(np.load('$T/rt.npy') - np.load('$T/rt_ref.npy')).max())
print('gguf round trip: $name $ty max|d| = %.3g' % d)
sys.exit(1 if ('$ty' == 'f32' and d > 1e-6) or d > 0.5 else 0)" && ok || bad "$name $ty round-trip maps"
        rm -f "$T/rt.bin"
    done
}

# GPT-2-small and BERT-base shapes, random weights, generated now (not committed).
GS_TEXT="$(printf 'word%d is here, ' $(seq 1 16))"
"$PY" fixtures/ref/make_checkpoint.py --arch gpt2-small --out "$T/gpt2-small" --tokenizer "$G" >/dev/null &&
    compare "$T/gpt2-small" "$GS_TEXT" || bad "gpt2-small checkpoint"
gguf_round_trip "$T/gpt2-small" "$GS_TEXT" f32 f16 bf16 q8_0
rm -rf "$T/gpt2-small"
BB_TEXT="$(printf 'sentence %d goes on, ' $(seq 1 12))"
"$PY" fixtures/ref/make_checkpoint.py --arch bert-base --out "$T/bert-base" --tokenizer "$B" >/dev/null &&
    compare "$T/bert-base" "$BB_TEXT" "and a second segment follows here" || bad "bert-base checkpoint"
gguf_round_trip "$T/bert-base" "$BB_TEXT" f32 f16 bf16 q8_0
rm -rf "$T/bert-base"

# Pythia-160m's shape (12 x 12 x 768, rotary on 16 of 64 dims, parallel residual, vocab 50304,
# untied embed_out), random F16 weights generated now, no tokenizer: 48 seeded ids through
# attn --ids; maps (1e-5) and every next-token NLL (1e-4) against families.py.
"$PY" fixtures/ref/make_checkpoint.py --arch pythia-160m --out "$T/pythia-160m" --dtype f16 >/dev/null &&
    "$PY" -c "import numpy as np; np.save('$T/py_ids.npy', np.random.default_rng(160).integers(0, 50304, 48).astype('<i4'))" ||
    bad "pythia-160m checkpoint"
expect 0 "pythia-160m attn --ids" -- "$HS" attn "$T/pythia-160m" --ids "$T/py_ids.npy" --nll "$T/py_nll.npy" -o "$T/py_attn.npy" -q
if "$PY" fixtures/ref/compare_family.py "$T/pythia-160m" "$T/py_ids.npy" "$T/py_attn.npy" --nll "$T/py_nll.npy" >"$T/cmp" 2>&1; then
    ok
else
    bad "pythia-160m maps and NLL vs families.py: $(cat "$T/cmp")"
fi
# ... and through GGUF (with the NeoX tokenizer.json, which a GGUF file needs; its 3,281
# tokens are padded to the 50,304 rows): F16 weights stored as F16 give the folder's maps and
# NLL bit for bit
cp fixtures/tokenizer/families/neox.tokenizer.json "$T/pythia-160m/tokenizer.json"
expect 0 "pythia-160m convert" -- "$HS" convert "$T/pythia-160m" -o "$T/py.gguf" --type f16
expect 0 "pythia-160m gguf attn --ids" -- "$HS" attn "$T/py.gguf" --ids "$T/py_ids.npy" --nll "$T/py_nll_g.npy" -o "$T/py_attn_g.npy" -q
if cmp -s "$T/py_attn.npy" "$T/py_attn_g.npy" && cmp -s "$T/py_nll.npy" "$T/py_nll_g.npy"; then ok; else bad "pythia-160m: the GGUF file's maps or NLL differ from the folder's"; fi
rm -f "$T/py.gguf" "$T/py_attn_g.npy" "$T/py_nll_g.npy"
# llama.cpp's own files of the rotary families (fixtures/gguf/families, gguf-py): info names
# the family, tokenize gives the golden text's ids (the Rust tokenizers library's)
FTEXT="The capital of France is Paris. The capital of Germany is Berlin. The capital of Italy is Rome."
for g in tiny-pythia.f32:gpt_neox:tiny_pythia tiny-llama.q8_0:llama:tiny_llama tiny-llama3.f32:llama:tiny_llama3 tiny-qwen2.f16:qwen2:tiny_qwen2; do
    f=fixtures/gguf/families/${g%%:*}.gguf
    fam=${g#*:}
    expect 0 "GGUF ${g%%:*} info" -- "$HS" info "$f"
    grep -q "^family: *${fam%%:*} " "$T/out" && ok || bad "GGUF ${g%%:*} info: $(head -c 300 "$T/out")"
    expect 0 "GGUF ${g%%:*} tokenize" -- "$HS" tokenize "$f" --text "$FTEXT" --json
    "$PY" -c "import json, sys, numpy as np; sys.exit(json.load(open('$T/out'))['ids'] != np.load('fixtures/family-golden/${g##*:}_text.ids.npy').tolist())" &&
        ok || bad "GGUF ${g%%:*} tokenize: ids differ from the golden's"
done
# ggml's other block formats (fixtures/gguf/families/tiny-llama-wide.mixed.gguf, one format a
# matrix): info names each type; attn gives the maps of the float64 reference on the file's
# own dequantised weights (fixtures/quant/); analyze and dump run on it
QF=fixtures/gguf/families/tiny-llama-wide.mixed.gguf
expect 0 "GGUF mixed formats info" -- "$HS" info "$QF"
for ty in IQ4_XS Q4_1 Q5_0 Q5_1 IQ4_NL Q3_K Q2_K Q5_K; do
    grep -q "| $ty *|" "$T/out" && ok || bad "GGUF mixed formats info: no $ty tensor listed"
done
expect 0 "GGUF mixed formats attn" -- "$HS" attn "$QF" --ids fixtures/family-golden/tiny_llama_text.ids.npy -o "$T/qm.npy"
"$PY" -c "import numpy as np, sys; sys.exit(int(abs(np.load('$T/qm.npy') - np.load('fixtures/quant/tiny-llama-wide.mixed.attn.npy')).max() > 1e-5))" &&
    ok || bad "GGUF mixed formats attn: maps differ from fixtures/quant/tiny-llama-wide.mixed.attn.npy"
expect 0 "GGUF mixed formats analyze" -- "$HS" analyze "$QF" --text "$FTEXT" -o "$T/qa" -q
[ -s "$T/qa/report.json" ] && ok || bad "GGUF mixed formats analyze: no report.json"
expect 0 "GGUF mixed formats dump" -- "$HS" dump "$QF" --text "$FTEXT" --what pattern,mlp_out -o "$T/qd" -q
[ -s "$T/qd/blocks.0.hook_mlp_out.npy" ] && ok || bad "GGUF mixed formats dump: no hook_mlp_out"
rm -rf "$T/qm.npy" "$T/qa" "$T/qd"
# a special-token id beyond the vocabulary: a warning on stderr, the default id, exit 0
expect 0 "GGUF bos id beyond the vocabulary" -- "$HS" tokenize fixtures/gguf/tokdefects/llama-bos-beyond.gguf --text "Hello" --json
grep -qx "headscope: tokenize: warning: tokenizer.ggml.bos_token_id = 5000 is beyond the vocabulary of 2393 tokens; the default 1 is used, as llama.cpp does" "$T/err" &&
    grep -q '"ids":\[1,714,1188,338\]' "$T/out" && ok || bad "GGUF bos id beyond the vocabulary: $(cat "$T/err" "$T/out")"
# what llama.cpp's llama cannot hold is refused in one line, and no file is left: a Llama
# rotating half of each head (partial_rotary_factor)
mkdir -p "$T/llama-half" && cp fixtures/family-models/tiny-llama/* "$T/llama-half/" &&
    "$PY" -c "import json; p='$T/llama-half/config.json'; c=json.load(open(p)); c['partial_rotary_factor'] = 0.5; json.dump(c, open(p, 'w'))"
expect 1 "partial rotary llama refuses GGUF" -- "$HS" convert "$T/llama-half" -o "$T/half.gguf"
one_line_error "partial rotary llama refuses GGUF"
stderr_has "partial rotary llama refuses GGUF" "this Llama model rotates 4 of its 8 head dimensions"
no_file "partial rotary llama refuses GGUF" "$T/half.gguf"
rm -rf "$T/llama-half"
rm -rf "$T/pythia-160m" "$T/py_attn.npy" "$T/py_nll.npy"

# A grouped-query model end to end: tiny Qwen2 (4 query heads on 1 KV head) with GPT-2's
# byte-level tokenizer.json, analyzed from text. Every head's kv_head, the loss, the ablation
# of each query head and of each KV group against families.py on the report's ids.
"$PY" fixtures/ref/make_family_checkpoint.py --arch tiny-qwen2 --out "$T/qwen-gpt2tok" \
    --tokenizer fixtures/tokenizer/gpt2.tokenizer.json --seed 5 >/dev/null || bad "tiny qwen2 checkpoint"
expect 0 "analyze grouped-query model" -- "$HS" analyze "$T/qwen-gpt2tok" -o "$T/qw" -q \
    --text "The cat sat on the mat. The cat sat on the mat."
if "$PY" -c "
import json, sys
import numpy as np
sys.path.insert(0, 'fixtures/ref')
import families as F
r = json.load(open('$T/qw/report.json'))
m = F.load_model('$T/qwen-gpt2tok')
H, KV = m.cfg['H'], m.cfg['KV']
assert r['model']['n_kv_head'] == KV == 1 and [h['kv_head'] for h in r['heads']] == [h % H // (H // KV) for h in range(len(r['heads']))]
base, abl = F.ablation(m, np.array(r['input']['ids']))
_, abl_kv = F.ablation(m, np.array(r['input']['ids']), kv_groups=True)
got = np.array([h['ablation_delta'] for h in r['heads']]).reshape(abl.shape)
d = max(abs(base - r['loss']['value']), float(np.abs(got - abl).max()), float(np.abs(np.array(r['kv_groups']['ablation_delta']) - abl_kv).max()))
print('grouped-query report: loss, ablation, KV-group ablation max|d| = %.3g' % d)
sys.exit(0 if d <= 1e-4 and r['kv_groups']['heads_per_group'] == 4 else 1)" >"$T/cmp" 2>&1; then
    ok
else
    bad "grouped-query report vs families.py: $(cat "$T/cmp")"
fi
rm -rf "$T/qwen-gpt2tok" "$T/qw"

# The multi-query families end to end (Falcon-7B's layout, Falcon-RW's ALiBi, GPT-BigCode)
# with their byte-level tokenizer.json files (fixtures/tokenizer/families/falcon.tokenizer.json,
# starcoder.tokenizer.json): info, then analyze from text; every head's kv_head, the loss, the
# ablation of each query head and of each KV group (multi-query: the whole layer) against
# families_mqa.py on the report's ids; one K/V head leaves the across-group measures null.
MQ="tiny-falcon-mq tiny-falcon-rw tiny-bigcode"
"$PY" -c "
import sys
sys.path.insert(0, 'fixtures/ref')
import families_mqa as M
for a in '$MQ'.split():
    tok = 'falcon' if 'falcon' in a else 'starcoder'
    M.main(['--arch', a, '--out', '$T/' + a, '--seed', '5', '--tokenizer',
            'fixtures/tokenizer/families/%s.tokenizer.json' % tok])" || bad "multi-query checkpoints"
MQT="The cat sat on the mat in 1999. 12,345 tokens!! -- x"
for a in $MQ; do
    expect 0 "info $a" -- "$HS" info "$T/$a"
    if [ "$a" = tiny-falcon-rw ]; then # Falcon-RW's ALiBi layout has no GGUF form (docs/gguf.md)
        expect 1 "convert $a" -- "$HS" convert "$T/$a" -o "$T/$a.gguf"
        one_line_error "convert $a"
        stderr_has "convert $a" "has no GGUF form"
        no_file "convert $a" "$T/$a.gguf"
    else # the released tokenizers' pre-tokenizers: llama.cpp's falcon and starcoder
        expect 0 "convert $a" -- "$HS" convert "$T/$a" -o "$T/$a.gguf"
        expect 0 "tokenize $a" -- "$HS" tokenize "$T/$a" --text "$MQT" --json
        mv "$T/out" "$T/mq-tok"
        expect 0 "tokenize $a.gguf" -- "$HS" tokenize "$T/$a.gguf" --text "$MQT" --json
        cmp -s "$T/out" "$T/mq-tok" && ok || bad "$a: the GGUF file's ids are not the folder's: $(cat "$T/out")"
    fi
    expect 0 "analyze $a" -- "$HS" analyze "$T/$a" -o "$T/mq-$a" -q \
        --text "The cat sat on the mat in 1999. The cat sat on the mat in 1999."
done
if "$PY" -c "
import json, sys
import numpy as np
sys.path.insert(0, 'fixtures/ref')
import families as F, families_mqa as M
for a in '$MQ'.split():
    r = json.load(open('$T/mq-%s/report.json' % a))
    m = M.load_model('$T/' + a)
    H, KV = m.cfg['H'], m.cfg['KV']
    assert r['model']['family'] == m.kind and r['model']['n_kv_head'] == KV
    assert [h['kv_head'] for h in r['heads']] == [h % H // (H // KV) for h in range(len(r['heads']))]
    ids = np.array(r['input']['ids'])
    base, abl = F.ablation(m, ids)
    got = np.array([h['ablation_delta'] for h in r['heads']]).reshape(abl.shape)
    d = max(abs(base - r['loss']['value']), float(np.abs(got - abl).max()))
    kv = r['kv_groups']
    if KV < H:
        _, abl_kv = F.ablation(m, ids, kv_groups=True)
        d = max(d, float(np.abs(np.array(kv['ablation_delta']) - abl_kv).max()))
        L = m.cfg['L']
        assert KV > 1 or (kv['similarity']['across'] == [None] * L and kv['similarity']['p_value'] == [None] * L)
    else:
        assert kv is None
    print('%s report: loss, ablation, KV-group ablation max|d| = %.3g' % (a, d))
    assert d <= 1e-4, a" >"$T/cmp" 2>&1; then
    ok
else
    bad "multi-query reports vs families_mqa.py: $(cat "$T/cmp")"
fi
for a in $MQ; do rm -rf "$T/$a" "$T/mq-$a"; done
# Sliding windows and longrope: tiny-mistral (window 64, BF16 here; F32 in the goldens) and
# tiny-phi3 (window 200, longrope past 128 tokens; F32 here, BF16 in the goldens) with Llama
# 2's tokenizer.json, generated now, on a text of ~260 tokens, longer than both windows and
# Phi-3's original context: maps and NLL against families.py, `analyze` end to end with its
# loss and gradient importance (check_family_report.py) and the metrics of the visible keys
# with model.layers (check_window_report.py); the window through GGUF, longrope refused there.
WIN_TEXT="$(printf 'The story %d goes on and on, here and there. ' $(seq 1 18))"
for w in mistral:bf16:llama phi3:f32:phi3; do
    a=${w%%:*} dt=${w#*:} dt=${dt%%:*} fam=${w##*:}
    "$PY" fixtures/ref/make_family_checkpoint.py --arch "tiny-$a" --out "$T/win-$a" --dtype "$dt" --seed 7 \
        --tokenizer fixtures/tokenizer/families/llama2.tokenizer.json >/dev/null || bad "tiny-$a checkpoint"
    expect 0 "$a tokenize" -- "$HS" tokenize "$T/win-$a" --text "$WIN_TEXT" --json
    "$PY" -c "import json, sys, numpy as np; np.save(sys.argv[2], np.array(json.load(open(sys.argv[1]))['ids'], np.int32))" \
        "$T/out" "$T/win_ids.npy" || bad "$a ids"
    expect 0 "$a attn" -- "$HS" attn "$T/win-$a" --text "$WIN_TEXT" --nll "$T/win_nll.npy" -o "$T/win_attn.npy" -q
    "$PY" fixtures/ref/compare_family.py "$T/win-$a" "$T/win_ids.npy" "$T/win_attn.npy" --nll "$T/win_nll.npy" \
        >"$T/cmp" 2>&1 && ok || bad "$a maps vs families.py: $(cat "$T/cmp")"
    echo "tiny-$a: $(tr "\n" ";" <"$T/cmp")"
    expect 0 "$a info" -- "$HS" info "$T/win-$a"
    grep -q "^family: *$fam " "$T/out" && grep -q "^attention: *a sliding window of" "$T/out" && ok ||
        bad "$a info: $(head -c 400 "$T/out")"
    expect 0 "$a analyze" -- "$HS" analyze "$T/win-$a" --text "$WIN_TEXT" -o "$T/win_out" -q --no-pruning
    "$PY" fixtures/ref/check_family_report.py "$T/win_out/report.json" "$T/win-$a" >"$T/cmp" 2>&1 &&
        "$PY" fixtures/ref/check_window_report.py "$T/win_out/report.json" "$T/win-$a" >>"$T/cmp" 2>&1 &&
        ok || bad "$a report vs families.py: $(cat "$T/cmp")"
    echo "tiny-$a report: $(tr "\n" ";" <"$T/cmp")"
    [ -s "$T/win_out/index.html" ] && [ -s "$T/win_out/gallery.png" ] && ok || bad "$a analyze outputs"
    rm -rf "$T/win_out"
done
# Mistral's window in a llama GGUF file (llama.attention.sliding_window, which llama.cpp's
# llama does not read): BF16 stored as BF16 gives the folder's maps bit for bit
expect 0 "mistral convert" -- "$HS" convert "$T/win-mistral" -o "$T/win.gguf" --type bf16
expect 0 "mistral gguf info" -- "$HS" info "$T/win.gguf"
grep -q "llama.attention.sliding_window = 64" "$T/out" && grep -q "^attention: *a sliding window of 64" "$T/out" &&
    ok || bad "mistral gguf info: $(head -c 600 "$T/out")"
expect 0 "mistral gguf attn" -- "$HS" attn "$T/win.gguf" --text "$WIN_TEXT" --nll "$T/win_nll_g.npy" -o "$T/win_attn_g.npy" -q
"$HS" attn "$T/win-mistral" --text "$WIN_TEXT" --nll "$T/win_nll.npy" -o "$T/win_attn.npy" -q &&
    cmp -s "$T/win_attn.npy" "$T/win_attn_g.npy" && cmp -s "$T/win_nll.npy" "$T/win_nll_g.npy" && ok ||
    bad "mistral: the GGUF file's maps or NLL differ from the folder's"
# Phi-3's window and longrope as llama.cpp's converter writes them (phi3.attention.sliding_window,
# rope_factors_long/short.weight, rope.scaling.attn_factor and original_context_length): F32
# gives the folder's maps and NLL bit for bit; longrope in a llama file is refused
expect 0 "phi3 convert" -- "$HS" convert "$T/win-phi3" -o "$T/phi.gguf"
expect 0 "phi3 gguf info" -- "$HS" info "$T/phi.gguf"
grep -q "phi3.attention.sliding_window = 200" "$T/out" && grep -q "phi3.rope.scaling.original_context_length = 128" "$T/out" &&
    grep -q "rope_factors_long.weight" "$T/out" && grep -q "^family: *phi3 " "$T/out" && ok ||
    bad "phi3 gguf info: $(head -c 900 "$T/out")"
expect 0 "phi3 gguf attn" -- "$HS" attn "$T/phi.gguf" --text "$WIN_TEXT" --nll "$T/win_nll_g.npy" -o "$T/win_attn_g.npy" -q
"$HS" attn "$T/win-phi3" --text "$WIN_TEXT" --nll "$T/win_nll.npy" -o "$T/win_attn.npy" -q &&
    cmp -s "$T/win_attn.npy" "$T/win_attn_g.npy" && cmp -s "$T/win_nll.npy" "$T/win_nll_g.npy" && ok ||
    bad "phi3: the GGUF file's maps or NLL differ from the folder's"
"$PY" -c "import json, sys; p = sys.argv[1] + '/config.json'; c = json.load(open(p)); c['model_type'] = 'llama'; c['original_max_position_embeddings'] = 128; json.dump(c, open(p, 'w'))" "$T/win-mistral"
"$PY" -c "import json, sys; p = sys.argv[1] + '/config.json'; c = json.load(open(p)); c['rope_scaling'] = json.load(open(sys.argv[2]))['rope_scaling']; c['sliding_window'] = None; json.dump(c, open(p, 'w'))" "$T/win-mistral" "$T/win-phi3/config.json"
expect 1 "llama longrope convert" -- "$HS" convert "$T/win-mistral" -o "$T/lr.gguf"
one_line_error "llama longrope convert"
stderr_has "llama longrope convert" "longrope scaling in a llama model cannot be written to GGUF"
no_file "llama longrope convert" "$T/lr.gguf"
rm -rf "$T/win-mistral" "$T/win-phi3" "$T/win.gguf" "$T/phi.gguf" "$T"/win_*.npy

# ---- encoder families: RoBERTa and DistilBERT ------------------------------------------------
# The tiny models of fixtures/family-models with the tokenizer files of
# fixtures/encoder-golden/tokenizers, and roberta-base / distilbert-base shapes with random
# weights (generated now): maps against the float64 reference families.py (compare_family.py,
# 1e-5), the MLM loss (1e-4) and gradient importance (autograd) of `analyze`'s report
# (check_family_report.py), `analyze` end to end, GGUF for RoBERTa, DistilBERT refused.
# family_check NAME DIR TEXT [analyze options]: tokenize, attn, analyze, the references.
family_check() {
    local name=$1 dir=$2 text=$3
    shift 3
    expect 0 "$name tokenize" -- "$HS" tokenize "$dir" --text "$text" --json
    "$PY" -c "import json, sys, numpy as np; np.save(sys.argv[2], np.array(json.load(open(sys.argv[1]))['ids'], np.int32))" \
        "$T/out" "$T/fam_ids.npy" || { bad "$name ids"; return; }
    expect 0 "$name attn" -- "$HS" attn "$dir" --text "$text" -o "$T/fam_attn.npy"
    "$PY" fixtures/ref/compare_family.py "$dir" "$T/fam_ids.npy" "$T/fam_attn.npy" >"$T/cmp" 2>&1 &&
        ok || bad "$name maps vs families.py: $(cat "$T/cmp")"
    echo "$name: $(cat "$T/cmp")"
    rm -rf "$T/fam_out"
    expect 0 "$name analyze" -- "$HS" analyze "$dir" --text "$text" -o "$T/fam_out" -q "$@"
    local fam=${name#tiny-}
    "$PY" -c "import json, sys; sys.exit(json.load(open(sys.argv[1]))['model']['family'] != sys.argv[2])" \
        "$T/fam_out/report.json" "${fam%-base}" && ok || bad "$name report family"
    "$PY" fixtures/ref/check_family_report.py "$T/fam_out/report.json" "$dir" >"$T/cmp" 2>&1 &&
        ok || bad "$name loss and gradient vs families.py: $(cat "$T/cmp")"
    echo "$name: $(tr "\n" ";" <"$T/cmp")"
    [ -s "$T/fam_out/index.html" ] && [ -s "$T/fam_out/gallery.png" ] && ok || bad "$name analyze outputs"
}
FAM_TEXT="the capital of france is paris. the cat sat on the mat, and the cat sat on the mat."
for f in roberta distilbert; do
    mkdir -p "$T/tiny-$f" && cp fixtures/family-models/tiny-$f/* fixtures/encoder-golden/tokenizers/$f/* "$T/tiny-$f/"
    family_check "tiny-$f" "$T/tiny-$f" "$FAM_TEXT"
done
expect 0 "info tiny-roberta" -- "$HS" info "$T/tiny-roberta"
grep -q '^family: *roberta (bidirectional, post-LN, gelu erf)' "$T/out" && ok || bad "info roberta: $(cat "$T/out")"
# RoBERTa's GGUF says add_bos_token / add_eos_token, so its ids are <s> ... </s> as llama.cpp
# gives them: the round trip starts from a folder whose tokenizer.json (RobertaProcessing)
# says the same (vocab.json + merges.txt alone add nothing: docs/tokenizers.md)
mkdir -p "$T/tiny-roberta-tj" && cp "$T/tiny-roberta"/* "$T/tiny-roberta-tj/" &&
    cp fixtures/gguf/tokdefects/roberta.tokenizer.json "$T/tiny-roberta-tj/tokenizer.json"
gguf_round_trip "$T/tiny-roberta-tj" "$FAM_TEXT" f32 f16 q8_0
"$HS" tokenize "$T/tiny-roberta" --text "$FAM_TEXT" --json >"$T/rb_plain.json"
"$HS" convert "$T/tiny-roberta" -o "$T/rb_plain.bin" >/dev/null
expect 0 "roberta gguf from vocab files tokenize" -- "$HS" tokenize "$T/rb_plain.bin" --text "$FAM_TEXT" --json
"$PY" -c "import json, sys; a = json.load(open('$T/rb_plain.json'))['ids']; b = json.load(open('$T/out'))['ids']; sys.exit(b != [0] + a + [2])" &&
    ok || bad "roberta gguf written from vocab.json + merges.txt: ids are not <s> + the folder's + </s>"
rm -rf "$T/tiny-roberta-tj" "$T/rb_plain.bin" "$T/rb_plain.json"
"$HS" convert "$T/tiny-roberta" -o "$T/rb.bin" >/dev/null && "$HS" info "$T/rb.bin" >"$T/out" 2>&1
grep -q "general.architecture = 'bert'" "$T/out" && grep -q "tokenizer.ggml.model = 'gpt2'" "$T/out" &&
    grep -q '^family: *roberta' "$T/out" && ok || bad "roberta gguf as llama.cpp writes it: $(head -c 600 "$T/out")"
rm -f "$T/rb.bin"
expect 1 "distilbert convert" -- "$HS" convert "$T/tiny-distilbert" -o "$T/db.bin"
one_line_error "distilbert convert"
stderr_has "distilbert convert" "architecture 'distilbert' has no GGUF form"
no_file "distilbert convert" "$T/db.bin"
rm -rf "$T/tiny-roberta" "$T/tiny-distilbert"
# Real shapes at n = 64 tokens (no ablation: 144 / 72 passes). roberta-base reads its byte-level
# BPE as vocab.json + merges.txt written from fixtures/tokenizer/families/roberta.tokenizer.json,
# distilbert-base the bert-base-uncased vocab.txt (its published tokenizer).
ENC_TEXT="$(printf 'the story %d goes on here, ' $(seq 1 7))"
"$PY" fixtures/ref/make_checkpoint.py --arch roberta-base --out "$T/roberta-base" >/dev/null &&
    "$PY" -c "
import json, sys
j = json.load(open('fixtures/tokenizer/families/roberta.tokenizer.json', encoding='utf-8'))
json.dump(j['model']['vocab'], open(sys.argv[1] + '/vocab.json', 'w', encoding='utf-8'), ensure_ascii=False)
m = j['model']['merges']
open(sys.argv[1] + '/merges.txt', 'w', encoding='utf-8').write('#version: 0.2\n' + ''.join((x if isinstance(x, str) else ' '.join(x)) + '\n' for x in m))" "$T/roberta-base" &&
    family_check roberta-base "$T/roberta-base" "$ENC_TEXT" --no-ablation || bad "roberta-base checkpoint"
rm -rf "$T/roberta-base"
"$PY" fixtures/ref/make_checkpoint.py --arch distilbert-base --out "$T/distilbert-base" >/dev/null &&
    cp fixtures/tokenizer/bert/vocab.txt "$T/distilbert-base/" &&
    family_check distilbert-base "$T/distilbert-base" "$ENC_TEXT" --no-ablation || bad "distilbert-base checkpoint"
rm -rf "$T/distilbert-base"

# ---- bad input: one line on stderr, exit 1, no output file ----------------------------------
for d in fixtures/bad/*/; do
    d=${d%/}
    [ "$(basename "$d")" = valid ] && continue
    expect 1 "bad model $(basename "$d")" -- "$HS" attn "$d" --text "hi" -o "$T/x.npy"
    one_line_error "bad model $(basename "$d")"
    no_file "bad model $(basename "$d")" "$T/x.npy"
done
expect 1 "missing model" -- "$HS" attn "$T/nope" --text hi -o "$T/x.npy"
stderr_has "missing model" "No such file or directory"
expect 1 "empty text" -- "$HS" attn "$G" --text "" -o "$T/x.npy"
stderr_has "empty text" "the text is empty"
no_file "empty text" "$T/x.npy"
printf 'ok \xff\xfe bad' >"$T/bad.txt"
expect 1 "invalid utf-8" -- "$HS" attn "$G" --file "$T/bad.txt" -o "$T/x.npy"
one_line_error "invalid utf-8"
stderr_has "invalid utf-8" "UTF-8"
no_file "invalid utf-8" "$T/x.npy"
expect 1 "missing text file" -- "$HS" attn "$G" --file "$T/none.txt" -o "$T/x.npy"
stderr_has "missing text file" "cannot open"
long=$(printf 'token %.0s' $(seq 1 200))
expect 1 "too long" -- "$HS" attn "$G" --text "$long" -o "$T/x.npy"
stderr_has "too long" "pass --truncate"
no_file "too long" "$T/x.npy"
expect 0 "too long with --truncate" -- "$HS" attn "$G" --text "$long" --truncate -o "$T/x.npy"
"$PY" -c "import numpy as np; a=np.load('$T/x.npy'); assert a.shape==(2,4,128,128), a.shape" && ok || bad "--truncate shape"
# analyze --max-tokens N on one text: the first N tokens (the ids tokenize gives, cut), marked
# truncated; above the context it keeps the context; a text shorter than N is left whole
expect 0 "analyze --max-tokens" -- "$HS" analyze "$G" --text "$long" --max-tokens 40 -o "$T/mt" -q --no-ablation --no-images
"$HS" tokenize "$G" --text "$long" --json >"$T/mt.tok" 2>/dev/null
"$PY" - "$T/mt/report.json" "$T/mt.tok" <<'PYEOF' && ok || bad "analyze --max-tokens 40 is not the first 40 ids"
import json, sys
r, t = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert r["input"]["n_tokens"] == 40 and r["input"]["truncated"] is True, r["input"]["n_tokens"]
assert r["input"]["ids"] == t["ids"][:40]
PYEOF
expect 0 "analyze --max-tokens above the context" -- "$HS" analyze "$G" --text "$long" --max-tokens 5000 -o "$T/mt" -q --no-ablation --no-images
"$PY" -c "import json; r=json.load(open('$T/mt/report.json')); assert r['input']['n_tokens'] == 128 and r['input']['truncated']" && ok || bad "--max-tokens 5000 keeps the context"
expect 0 "analyze --max-tokens longer than the text" -- "$HS" analyze "$G" --text "a b c" --max-tokens 40 -o "$T/mt" -q --no-ablation --no-images
"$PY" -c "import json; r=json.load(open('$T/mt/report.json')); assert r['input']['n_tokens'] == 3 and not r['input']['truncated']" && ok || bad "--max-tokens 40 on 3 tokens"
expect 2 "analyze --max-tokens 0" -- "$HS" analyze "$G" --text "a b c" --max-tokens 0 -o "$T/mt" -q
# truncation as Hugging Face's tokenizers library does it (longest_first), single texts and
# pairs at many lengths (fixtures/tokenizer/truncation_golden.json, make_truncation_goldens.js)
"$PY" - "$HS" <<'PYEOF' && ok || bad "tokenize --max-tokens differs from the tokenizers library"
import json, subprocess, sys
hs = sys.argv[1]
cases = json.load(open("fixtures/tokenizer/truncation_golden.json"))["cases"]
assert len(cases) >= 100
wrong = 0
for c in cases:
    model = "fixtures/tiny-bert" if c["model"] == "bert" else "fixtures/trained-gpt2"
    cmd = [hs, "tokenize", model, "--text", c["text"], "--max-tokens", str(c["max"]), "--json"]
    if c["pair"] is not None:
        cmd += ["--text-pair", c["pair"]]
    r = subprocess.run(cmd, capture_output=True)
    if len(c["ids"]) > c["max"]:  # the library overruns a max below a pair's 3 specials
        if r.returncode != 1 or b"special tokens" not in r.stderr:
            wrong += 1
            print("max %d below the specials was not refused" % c["max"], file=sys.stderr)
        continue
    got = json.loads(r.stdout)
    if got["ids"] != c["ids"] or got["type_ids"] != c["type_ids"]:
        wrong += 1
        print("max %d %r/%r: %s, want %s" % (c["max"], c["text"][:20], (c["pair"] or "")[:20],
                                           got["ids"], c["ids"]), file=sys.stderr)
sys.exit(1 if wrong else 0)
PYEOF
expect 2 "tokenize --max-tokens 0" -- "$HS" tokenize "$B" --text hi --max-tokens 0
# a 60 MB text with --truncate: tokenised only as far as the context needs (seconds, not
# minutes; peak memory under 4x the text), and refused without it as quickly
"$PY" -c "import sys; sys.stdout.write('the heads attend to the previous token. ' * 1500000)" >"$T/big.txt"
"$PY" - "$HS" "$T/big.txt" "$B" "$G" <<'PYEOF' && ok || bad "a 60 MB text costs too much"
import os, resource, subprocess, sys, time
hs, big, b, g = sys.argv[1:5]
good = True
for model, extra, want in ((b, ["--truncate"], 0), (g, ["--truncate"], 0), (b, [], 1)):
    t0 = time.time()
    r = subprocess.run([hs, "attn", model, "--file", big, "-o", big + ".npy", "-q"] + extra,
                       capture_output=True, timeout=120)
    dt, rss = time.time() - t0, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    if r.returncode != want or dt > 30 or rss > 4 * os.path.getsize(big):
        print("%s %s: exit %d in %.1f s, peak %d MB" % (model, extra, r.returncode, dt, rss >> 20),
              file=sys.stderr)
        good = False
sys.exit(0 if good else 1)
PYEOF
expect 1 "pair on gpt2" -- "$HS" attn "$G" --text a --text-pair b -o "$T/x.npy"
expect 1 "unwritable output" -- "$HS" attn "$G" --text hi -o "$T/no/such/dir/x.npy"
one_line_error "unwritable output"

# ---- analyze ---------------------------------------------------------------------------
REP="The cat sat on the mat. The cat sat on the mat. The cat sat on the mat."
expect 0 "analyze tiny-gpt2" -- "$HS" analyze "$G" --text "$REP" -o "$T/an"
grep -q "^wrote $T/an/report.json" "$T/out" && ok || bad "analyze summary: $(cat "$T/out")"
for f in index.html gallery.png similarity.png importance.png heads/L0_H2.png heads/L1_H1.png; do
    [ -s "$T/an/$f" ] && ok || bad "analyze did not write $f"
done
pngcheck -q "$T/an/gallery.png" "$T/an/heads/L1_H1.png" >/dev/null && ok || bad "pngcheck on analyze pictures"
expect 0 "analyze --no-images" -- "$HS" analyze "$G" --text "$REP" -o "$T/noimg" -q --no-images --no-ablation
[ ! -e "$T/noimg/gallery.png" ] && [ -s "$T/noimg/index.html" ] && ok || bad "--no-images still writes pictures"
"$PY" fixtures/ref/check_report.py "$G" "$T/an/report.json" --tol 1e-4 >"$T/cmp" 2>&1 && ok || bad "report vs reference: $(cat "$T/cmp")"
# the shipped model's circuit: 0.2 previous-token, 1.1 induction; on a repeated text the
# induction head's ablation raises the loss more than any other head's
"$PY" - "$T/an/report.json" <<'PYEOF' && ok || bad "tiny-gpt2 heads not identified"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["schema"] == "headscope.report/3"
h = {x["id"]: x for x in r["heads"]}
assert h["0.2"]["label"] == "previous_token", h["0.2"]
assert h["1.1"]["label"] == "induction", h["1.1"]
assert h["0.2"]["text_scores"]["no_sinks"]["previous_token"] > 0.9
assert h["0.2"]["text_scores"]["all"]["previous_token"] > 0.9
assert h["1.1"]["probe_scores"]["no_sinks"]["induction"] > 0.8
assert [x["id"] for x in r["heads"] if any(l["type"] == "induction" for l in x["labels"])] == ["1.1"]
lab = [l for l in h["1.1"]["labels"] if l["type"] == "induction"][0]
assert lab["measured_on"] == "probe" and lab["attention"] == "no_sinks" and lab["threshold"] == 0.3, lab
assert r["options"]["label_thresholds"]["induction"] == 0.3 and r["options"]["sinks"] == ["first_token"]
top = max(r["heads"], key=lambda x: x["ablation_delta"])
assert top["id"] == "1.1", top["id"]
assert all(x["gradient_importance"] is not None for x in r["heads"])
for k in ("model", "input", "loss", "heads", "diversity", "similarity", "clusters", "pruning", "probe"):
    assert k in r, k
assert len(r["similarity"]["matrix"]) == 8 and len(r["diversity"]["pairwise_frobenius"]) == 8
assert len(r["clusters"]["merges"]) == 7 and len(r["clusters"]["labels"]) == 8
assert r["pruning"]["curve"] and all(c["removed"] for c in r["pruning"]["curve"])
g = r["generator"]
assert g["command_line"][:3] == ["headscope", "analyze", "fixtures/tiny-gpt2"], g
assert g["command_line"][3] == "--text" and g["command_line"][-2:] == ["-o", g["command_line"][-1]], g
assert [f["name"] for f in r["model"]["files"]] == ["config.json", "model.safetensors", "vocab.json", "merges.txt"]
import hashlib
for f in r["model"]["files"]:
    b = open("fixtures/tiny-gpt2/" + f["name"], "rb").read()
    assert f["bytes"] == len(b) and f["sha256"] == hashlib.sha256(b).hexdigest(), f
PYEOF
# a sharded checkpoint's report hashes the index and every shard it names, once each, by name
expect 0 "analyze sharded" -- "$HS" analyze fixtures/family-models/tiny-llama --text "hello world" \
    -o "$T/shard" -q --no-images --no-dla
"$PY" - "$T/shard/report.json" <<'PYEOF' && ok || bad "report files of a sharded checkpoint"
import hashlib, json, sys
r = json.load(open(sys.argv[1]))
names = [f["name"] for f in r["model"]["files"]]
assert names == ["config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors",
                 "model-00002-of-00002.safetensors", "tokenizer.json"], names
for f in r["model"]["files"]:
    b = open("fixtures/family-models/tiny-llama/" + f["name"], "rb").read()
    assert f["bytes"] == len(b) and f["sha256"] == hashlib.sha256(b).hexdigest(), f
PYEOF
# ---- latent attention and experts (deepseek_v2): analyze end to end on a dense model and one
# with experts; against the float64 reference (fixtures/ref/mla_ref.py) on the reports' own
# ids: the loss, every head's ablation delta, position share and |dL/dxi|
DSL=fixtures/mla-models/tiny-deepseek-lite
DSM=fixtures/mla-models/tiny-deepseek-moe
for m in "$DSL" "$DSM"; do
    expect 0 "analyze $m" -- "$HS" analyze "$m" --text "The cat sat on the mat. The cat sat on the mat." \
        -o "$T/mla-$(basename "$m")" -q --no-images
done
"$PY" - "$T" "$DSL" "$DSM" <<'PYEOF' && ok || bad "deepseek_v2 reports vs the reference"
import json, os, sys
sys.path.insert(0, "fixtures/ref")
import mla_ref
for model in sys.argv[2:]:
    r = json.load(open(os.path.join(sys.argv[1], "mla-" + os.path.basename(model), "report.json")))
    cfg, W = mla_ref.read(model)
    ids, L, H = r["input"]["ids"], cfg["num_hidden_layers"], cfg["num_attention_heads"]
    loss_at = lambda hm: mla_ref.nll(mla_ref.forward(cfg, W, ids, hm)["logits"], ids).mean()
    mask = lambda l, h, x: [[x if (a, b) == (l, h) else 1.0 for b in range(H)] for a in range(L)]
    base, share = loss_at(None), mla_ref.forward(cfg, W, ids)["pos_share"]
    assert abs(r["loss"]["value"] - base) <= 1e-5, (model, r["loss"]["value"], base)
    assert r["options"]["gradient"] is True and r["composition"]["available"] is False
    assert any(m["key"] == "position_share" for m in r["metrics"])
    for h in r["heads"]:
        l, k = h["layer"], h["head"]
        assert abs(h["position_share"] - share[l][k]) <= 1e-5, (model, l, k, h["position_share"])
        d = loss_at(mask(l, k, 0.0)) - base   # the ablation sweep's zero ablation
        assert abs(h["ablation_delta"] - d) <= 1e-4, (model, l, k, h["ablation_delta"], d)
        g = abs(loss_at(mask(l, k, 1 + 1e-5)) - loss_at(mask(l, k, 1 - 1e-5))) / 2e-5
        assert abs(h["gradient_raw"] - g) <= 1e-4 * (1 + g), (model, l, k, h["gradient_raw"], g)
PYEOF
expect 0 "info deepseek_v3" -- "$HS" info fixtures/mla-models/tiny-deepseek-v3
grep -q "^attention:    latent (kv_lora 32, q_lora 32): q/k heads 24 wide (8 rotary" "$T/out" &&
    grep -q "^experts:      8 routed (2 a token, sigmoid), 1 shared, 16 wide, from layer 1" "$T/out" &&
    ok || bad "info deepseek_v3: $(cat "$T/out")"
# GGUF (llama.cpp's deepseek2): the file's maps are the folder's, and it converts again the same
for m in "$DSL" "$DSM"; do
    expect 0 "convert $(basename "$m")" -- "$HS" convert "$m" -o "$T/ds.gguf" --name t
    expect 0 "convert $(basename "$m") again" -- "$HS" convert "$T/ds.gguf" -o "$T/ds2.gguf" --name t
    cmp -s "$T/ds.gguf" "$T/ds2.gguf" && ok || bad "$(basename "$m"): GGUF -> GGUF differs"
    "$HS" attn "$m" --text "The cat sat on the mat." -o "$T/dsa.npy" -q &&
        "$HS" attn "$T/ds.gguf" --text "The cat sat on the mat." -o "$T/dsb.npy" -q &&
        cmp -s "$T/dsa.npy" "$T/dsb.npy" && ok || bad "$(basename "$m"): the GGUF file's maps differ"
done
expect 1 "dump q of latent attention" -- "$HS" dump "$DSL" --text "hi there" --what q -o "$T/mlad"
grep -q "not recorded for multi-head latent attention" "$T/err" && ok || bad "dump q refusal: $(cat "$T/err")"
# dump's router choices against the reference's
expect 0 "dump router" -- "$HS" dump "$DSM" --text "The cat sat on the mat." --what router,mlp_out -o "$T/moed" -q
"$PY" - "$T/moed" "$DSM" <<'PYEOF' && ok || bad "dump router vs the reference"
import json, os, sys
import numpy as np
sys.path.insert(0, "fixtures/ref")
import mla_ref
d = sys.argv[1]
cfg, W = mla_ref.read(sys.argv[2])
ref = mla_ref.forward(cfg, W, np.load(os.path.join(d, "input_ids.npy")))["route"]
names = [f["file"] for f in json.load(open(os.path.join(d, "manifest.json")))["files"]]
assert "blocks.0.mlp.router_experts.npy" not in names   # layer 0 is dense
got = np.load(os.path.join(d, "blocks.1.mlp.router_experts.npy"))
assert got.dtype == np.int32 and (got == ref[1]).all(), (got, ref[1])
PYEOF
expect 1 "dump router of a dense model" -- "$HS" dump "$DSL" --text "hi" --what router -o "$T/moen"
grep -q "no mixture of experts" "$T/err" && ok || bad "dump router refusal: $(cat "$T/err")"
# a checkpoint missing an expert, or with an expert of the wrong shape: one line naming it
"$PY" - "$DSM" "$T/moebad" <<'PYEOF' && ok || bad "write the broken expert checkpoints"
import os, shutil, sys
sys.path.insert(0, "fixtures/ref")
import hs_ref
src, out = sys.argv[1], sys.argv[2]
t = hs_ref.read_safetensors(os.path.join(src, "model.safetensors"))
for name, drop, reshape in (("gone", "model.layers.1.mlp.experts.3.down_proj.weight", None),
                            ("shape", None, "model.layers.1.mlp.experts.5.up_proj.weight")):
    d = os.path.join(out, name)
    os.makedirs(d)
    shutil.copy(os.path.join(src, "config.json"), d)
    items = {k: (v[:, :-1] if k == reshape else v) for k, v in t.items() if k != drop}
    hs_ref.write_safetensors(os.path.join(d, "model.safetensors"), items)
PYEOF
expect 1 "an expert missing" -- "$HS" info "$T/moebad/gone"
grep -q "tensor 'model.layers.1.mlp.experts.3.down_proj.weight' is missing" "$T/err" && ok || bad "missing expert: $(cat "$T/err")"
expect 1 "an expert of the wrong shape" -- "$HS" info "$T/moebad/shape"
grep -q "tensor 'model.layers.1.mlp.experts.5.up_proj.weight' must be (16, 64)" "$T/err" && ok || bad "expert shape: $(cat "$T/err")"
expect 0 "analyze gpt2 has no position share" -- "$HS" analyze "$G" --text "hello world" -o "$T/nomla" -q --no-images
"$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); assert all(h['position_share'] is None for h in r['heads'])" \
    "$T/nomla/report.json" && ok || bad "gpt2 position_share is null"
expect 0 "analyze greedy pruning" -- "$HS" analyze "$G" --text "$REP" -o "$T/gr" -q --no-images --prune-method greedy
"$PY" - "$T/an/report.json" "$T/gr/report.json" <<'PYEOF' && ok || bad "pruning methods"
import json, sys
d, g = (json.load(open(p))["pruning"] for p in sys.argv[1:3])
assert d["method"] == "gradient" and d["round_heads"] == 1, d
assert g["method"] == "greedy" and all(len(c["removed"]) == 1 for c in g["curve"]), g
left = [c["heads_left"] for c in d["curve"]]
assert left == sorted(left, reverse=True) and left[0] == 7, left
PYEOF
expect 2 "bad --prune-method" -- "$HS" analyze "$G" --text "$REP" -o "$T/bpm" --prune-method best
expect 2 "bad --prune-round" -- "$HS" analyze "$G" --text "$REP" -o "$T/bpm" --prune-round 0
expect 0 "analyze --json" -- "$HS" analyze "$G" --text "$REP" -o "$T/an2" --json --no-pruning
"$PY" -c "import json,sys; a=json.load(open('$T/out')); b=json.load(open('$T/an2/report.json')); sys.exit(a!=b)" && ok || bad "--json prints the report"
expect 0 "analyze tiny-bert pair" -- "$HS" analyze "$B" --text "The capital of France is Paris." --text-pair "It is a big city." -o "$T/bp" -q
"$PY" fixtures/ref/check_report.py "$B" "$T/bp/report.json" >"$T/cmp" 2>&1 && ok || bad "bert pair report: $(cat "$T/cmp")"
expect 0 "analyze tiny-bert single" -- "$HS" analyze "$B" --text "The capital of France is [MASK]." -o "$T/bs" -q
"$PY" fixtures/ref/check_report.py "$B" "$T/bs/report.json" >"$T/cmp" 2>&1 && ok || bad "bert single report: $(cat "$T/cmp")"
# input.sinks and input.word_ids, worked out by hand from the tokens:
# [CLS] the heads ##cope sat [SEP] where [SEP]; head scope Ġruns Ċ b
expect 0 "analyze words bert" -- "$HS" analyze "$B" --text "the headscope sat" --text-pair "where" -o "$T/wb" -q --no-images --no-ablation
"$PY" -c "
import json; i=json.load(open('$T/wb/report.json'))['input']
assert i['sinks'] == [0, 5, 7], i['sinks']
assert i['word_ids'] == [0, 1, 2, 2, 3, 4, 5, 6], i['word_ids']" && ok || bad "bert sinks and word ids"
expect 0 "analyze words gpt2" -- "$HS" analyze "$G" --text "headscope runs
b" -o "$T/wg" -q --no-images --no-ablation
"$PY" -c "
import json; i=json.load(open('$T/wg/report.json'))['input']
assert i['sinks'] == [0], i['sinks']
assert i['word_ids'] == [0, 0, 1, 2, 3], i['word_ids']" && ok || bad "gpt2 sinks and word ids"
expect 2 "analyze bad threshold" -- "$HS" analyze "$G" --text hi -o "$T/x" --cluster-threshold -1
expect 2 "analyze bad threshold text" -- "$HS" analyze "$G" --text hi -o "$T/x" --cluster-threshold abc
expect 2 "analyze bad layers syntax" -- "$HS" analyze "$G" --text hi -o "$T/x" --layers 1-
expect 2 "analyze bad similarity" -- "$HS" analyze "$G" --text hi -o "$T/x" --similarity cosine
expect 2 "analyze no -o" -- "$HS" analyze "$G" --text hi
expect 2 "analyze bad label threshold" -- "$HS" analyze "$G" --text hi -o "$T/x" --label-thresholds copying=0.3
stderr_has "bad label threshold" "unknown head type 'copying'"
expect 2 "analyze bad flow limit" -- "$HS" analyze "$G" --text hi -o "$T/x" --flow-max-tokens -1
# head types with thresholds from the command line, SVG, composition, rollout and flow,
# head names as integers (trained-gpt2: 3.0 induction, 2.3 previous-token feeding it)
expect 0 "analyze trained-gpt2 heads" -- "$HS" analyze fixtures/trained-gpt2 --text "$REP" -o "$T/tg" -q --no-pruning --svg --label-thresholds induction=0.35,sink=0.45
"$PY" - "$T/tg/report.json" "$T/tg" <<'PYEOF' && ok || bad "trained-gpt2 head types, composition, rollout"
import json, os, sys, xml.dom.minidom
r = json.load(open(sys.argv[1]))
h = {(x["layer"], x["head"]): x for x in r["heads"]}
types = lambda x: [l["type"] for l in x["labels"]]
assert "induction" in types(h[3, 0]) and "previous_token" in types(h[2, 3]), (types(h[3, 0]), types(h[2, 3]))
assert [k for k, x in h.items() if "induction" in types(x)] == [(3, 0)]
assert r["options"]["label_thresholds"]["induction"] == 0.35 and r["options"]["sink_threshold"] == 0.45
assert "first_token" in h[3, 0]["sinks"]["types"]
c = r["composition"]
assert c["available"] and len(c["k"]) == 16 and c["k"][11][12] is not None and c["k"][12][11] is None
k_into = max(range(12), key=lambda a: c["k"][a][12])
assert (k_into // 4, k_into % 4) == (2, 3), k_into
assert all(isinstance(e["from_layer"], int) for e in c["strongest"])
n = r["input"]["n_tokens"]
ro = r["rollout"]["matrix"]
assert len(ro) == n and all(abs(sum(row) - 1) < 1e-6 for row in ro)
assert len(r["flow"]["matrix"]) == n
for f in ("heads/L3_H0.svg", "rollout.png", "flow.png", "composition.png", "dla.png"):
    assert f in r["files"] and os.path.getsize(os.path.join(sys.argv[2], f)) > 0, f
xml.dom.minidom.parse(os.path.join(sys.argv[2], "heads/L3_H0.svg"))
cand = r["pruning"]["candidates"]
assert [f'{x["layer"]}.{x["head"]}' for x in r["pruning"]["candidate_heads"]] == cand
PYEOF
expect 0 "analyze tiny-bert pair has no composition" -- "$HS" analyze "$B" --text "The cat sat." --text-pair "It slept." -o "$T/bc" -q --no-ablation
"$PY" -c "import json,sys; c=json.load(open('$T/bc/report.json'))['composition']; sys.exit(c['available'] or 'post-norm' not in c['reason'])" && ok || bad "bert composition not refused with a reason"
expect 1 "analyze layer out of range" -- "$HS" analyze "$G" --text hi -o "$T/lr" --layers 0,5
one_line_error "layer out of range"
stderr_has "layer out of range" "layer 5 is out of range"
no_file "layer out of range" "$T/lr/report.json"
expect 1 "analyze one token needs no-ablation" -- "$HS" analyze "$G" --text "Hello" -o "$T/one"
stderr_has "one token" "--no-ablation"
no_file "one token" "$T/one/report.json"
expect 0 "analyze one token without ablation" -- "$HS" analyze "$G" --text "Hello" -o "$T/one" --no-ablation -q
expect 0 "analyze --no-gradient" -- "$HS" analyze "$G" --text "$REP" -o "$T/ng" --no-gradient --no-images -q
"$PY" -c "
import json; r=json.load(open('$T/ng/report.json'))
assert r['options']['gradient'] is False and all(h['gradient_raw'] is None for h in r['heads'])" && ok || bad "--no-gradient"
expect 0 "analyze --layers" -- "$HS" analyze "$G" --text "$REP" -o "$T/l1" --layers 1 -q
"$PY" -c "
import json; r=json.load(open('$T/l1/report.json'))
assert [h['id'] for h in r['heads']] == ['1.0','1.1','1.2','1.3']
assert r['diversity']['per_layer'][0] is None" && ok || bad "--layers restricts the heads"
expect 1 "analyze failure removes the folder it made" -- "$HS" analyze "$G" --text "Hello" -o "$T/made"
[ ! -e "$T/made" ] && ok || bad "a failed analyze left '$T/made' behind"
printf 'a\0b c d' >"$T/nul.txt"
expect 0 "analyze text with NUL" -- "$HS" analyze "$G" --file "$T/nul.txt" -o "$T/nul" -q --no-images
"$PY" -c "import json,sys; t=json.load(open('$T/nul/report.json'))['input']['text']; sys.exit(t != 'a\ufffdb c d')" && ok || bad "NUL in input.text"
expect 1 "analyze bad model" -- "$HS" analyze fixtures/bad/nan_weight --text hi -o "$T/bm"
no_file "bad model" "$T/bm/report.json"
expect 1 "analyze output is a file" -- "$HS" analyze "$G" --text hi -o fixtures/bad/MANIFEST.tsv
one_line_error "output is a file"

# ---- dump, ablation kinds, direct logit attribution ------------------------------------------
expect 0 "dump --help" -- "$HS" dump --help
grep -q "^usage: headscope dump" "$T/out" && ok || bad "dump --help text"
expect 2 "dump bad --what" -- "$HS" dump "$G" --text hi --what q,bogus -o "$T/dx"
stderr_has "dump bad --what" "headscope: dump: --what: 'bogus' is not one of"
expect 2 "dump empty --what item" -- "$HS" dump "$G" --text hi --what q, -o "$T/dx"
expect 2 "dump without --what" -- "$HS" dump "$G" --text hi -o "$T/dx"
expect 2 "dump without -o" -- "$HS" dump "$G" --text hi --what q
expect 1 "dump bad model" -- "$HS" dump fixtures/bad/nan_weight --text hi --what all -o "$T/dx"
one_line_error "dump bad model"
[ ! -e "$T/dx" ] && ok || bad "a failed dump left '$T/dx' behind"
TG=fixtures/trained-gpt2
expect 0 "dump trained-gpt2" -- "$HS" dump "$TG" --text "The cat sat on the mat. The cat sat on the mat." --what all -o "$T/dg"
grep -q "^wrote 38 files to $T/dg" "$T/out" && ok || bad "dump summary: $(cat "$T/out")"
"$PY" fixtures/ref/check_dump.py "$TG" "$T/dg" >"$T/chk" 2>&1 && ok || bad "dump gpt2 vs reference: $(cat "$T/chk")"
expect 0 "dump the hook sites" -- "$HS" dump "$TG" --text "The cat sat on the mat. The cat" --what result,resid_post,ln_final,logits,z,resid_pre,attn_out,mlp_out -o "$T/dh" -q
[ -s "$T/dh/logits.npy" ] && [ -s "$T/dh/ln_final.hook_normalized.npy" ] && [ -s "$T/dh/blocks.3.attn.hook_result.npy" ] && ok || bad "dump hook sites: $(ls "$T/dh")"
"$PY" fixtures/ref/check_dump.py "$TG" "$T/dh" >"$T/chk" 2>&1 && ok || bad "dump hook sites vs reference: $(cat "$T/chk")"
expect 0 "dump tiny-bert pair" -- "$HS" dump "$B" --text "where is the dog?" --text-pair "it is in the garden." --what q,k,v,z,pattern,resid_pre,attn_out,mlp_out,norm -o "$T/db" -q
"$PY" fixtures/ref/check_dump.py "$B" "$T/db" >"$T/chk" 2>&1 && ok || bad "dump bert vs reference: $(cat "$T/chk")"
expect 0 "dump one kind" -- "$HS" dump "$G" --text "Hello world" --what pattern -o "$T/d1" -q
[ "$(ls "$T/d1" | tr '\n' ' ')" = "blocks.0.attn.hook_pattern.npy blocks.1.attn.hook_pattern.npy input_ids.npy manifest.json " ] && ok || bad "dump pattern files: $(ls "$T/d1")"
expect 2 "analyze bad --ablation" -- "$HS" analyze "$G" --text "$REP" --ablation half -o "$T/ab"
stderr_has "analyze bad --ablation" "headscope: analyze: --ablation 'half' is not zero, mean or resample"
expect 2 "analyze bad --resample-seed" -- "$HS" analyze "$G" --text "$REP" --ablation resample --resample-seed x -o "$T/ab"
[ ! -e "$T/ab" ] && ok || bad "a usage error left '$T/ab' behind"
for k in mean resample; do
    expect 0 "analyze --ablation $k" -- "$HS" analyze "$TG" --text "$REP" --ablation $k --no-images -o "$T/ab-$k" -q
done
"$PY" - "$T" <<'PYEOF' && ok || bad "--ablation mean/resample in the report"
import json, sys
t = sys.argv[1]
m, r = (json.load(open("%s/ab-%s/report.json" % (t, k))) for k in ("mean", "resample"))
assert m["options"]["ablation_kind"] == "mean" and "resample_ids" not in m["options"]
o = r["options"]
assert o["ablation_kind"] == "resample" and o["resample_seed"] == 1
ids = r["input"]["ids"]
assert sorted(o["resample_ids"]) == sorted(ids) and o["resample_ids"] != ids
assert all(h["ablation_delta"] is not None for h in m["heads"] + r["heads"])
assert len(m["pruning"]["curve"]) > 0
PYEOF
"$PY" fixtures/ref/make_attribution.py --check "$TG" "$T/ab-mean/report.json" >"$T/chk" 2>&1 && ok || bad "report's direct logit attribution and norm-based summaries vs reference: $(cat "$T/chk")"
expect 0 "analyze bert: no dla" -- "$HS" analyze "$B" --text "the dog is in the garden" --no-images --no-ablation -o "$T/abb" -q
"$PY" -c "
import json,sys; r=json.load(open('$T/abb/report.json'))
d=r['direct_logit_attribution']
sys.exit(0 if d['available'] is False and 'not causal' in d['reason'] and r['heads'][0]['dla_total'] is None else 1)" && ok || bad "bert report: direct_logit_attribution"
"$PY" fixtures/ref/make_attribution.py --check "$B" "$T/abb/report.json" >"$T/chk" 2>&1 && ok || bad "bert report's norm-based summaries vs reference: $(cat "$T/chk")"
# word-level maps (--word-level) in the report, the pictures and attn, against the reference
WT="Tokenization of antidisestablishmentarianism happens, obviously."
expect 0 "analyze --word-level gpt2" -- "$HS" analyze "$TG" --text "$WT" --word-level --no-ablation -o "$T/wlg" -q
expect 0 "attn --word-level gpt2" -- "$HS" attn "$TG" --text "$WT" --word-level -o "$T/wlg.npy"
grep -q "x 5 x 5 words" "$T/out" && ok || bad "attn --word-level summary: $(cat "$T/out")"
"$PY" fixtures/ref/check_words.py "$TG" "$T/wlg/report.json" "$T/wlg.npy" >"$T/chk" 2>&1 && ok || bad "gpt2 word-level maps vs reference: $(cat "$T/chk")"
pngcheck -q "$T/wlg/heads/L3_H0.words.png" >/dev/null && grep -q '"heads/L3_H0.words.png"' "$T/wlg/report.json" && ok || bad "word-level picture"
expect 0 "analyze --word-level bert pair" -- "$HS" analyze "$B" --text "The snorkeling dogfish is hyperventilating." --text-pair "unbelievably so" --word-level --no-images --no-ablation -o "$T/wlb" -q
expect 0 "attn --word-level bert pair" -- "$HS" attn "$B" --text "The snorkeling dogfish is hyperventilating." --text-pair "unbelievably so" --word-level -o "$T/wlb.npy" -q
"$PY" fixtures/ref/check_words.py "$B" "$T/wlb/report.json" "$T/wlb.npy" >"$T/chk" 2>&1 && ok || bad "bert word-level maps vs reference: $(cat "$T/chk")"
expect 2 "--word-level with --corpus" -- "$HS" analyze "$TG" --corpus fixtures/corpus/licenses.txt --word-level -o "$T/wc"
stderr_has "--word-level with --corpus" "--word-level is for a single text"
expect 2 "--ablation mean with --corpus, no --corpus-ablation" -- "$HS" analyze "$TG" --corpus fixtures/corpus/licenses.txt --ablation mean -o "$T/wc"
stderr_has "--ablation mean with --corpus" "--ablation mean with --corpus needs --corpus-ablation"
[ ! -e "$T/wc" ] && ok || bad "a usage error left '$T/wc' behind"
expect 2 "--ablation resample with --corpus" -- "$HS" analyze "$TG" --corpus fixtures/corpus/licenses.txt --corpus-ablation --ablation resample -o "$T/wc"
stderr_has "--ablation resample with --corpus" "--ablation resample is for a single text"
expect 2 "--ablation mean with --corpus on stdin" -- "$HS" analyze "$TG" --corpus - --corpus-ablation --ablation mean -o "$T/wc" </dev/null
stderr_has "--ablation mean on stdin" "reads the corpus twice"
expect 2 "--loss-span with --corpus" -- "$HS" analyze "$TG" --corpus fixtures/corpus/licenses.txt --loss-span repeated -o "$T/wc"
# mean ablation with means over the corpus: every token of the three texts (BERT: of their
# MLM inputs), recomputed by the float64 reference, which also tells them from each text's own
printf 'The licence is granted free of charge.\nPermission is hereby granted to any person.\nThe software is provided as is, without warranty.\n' >"$T/c3.txt"
for mdl in "$TG" "$B"; do
    expect 0 "corpus mean ablation on $mdl" -- "$HS" analyze "$mdl" --corpus "$T/c3.txt" --corpus-ablation --ablation mean -o "$T/cm" -q
    "$PY" fixtures/ref/check_corpus_means.py "$mdl" "$T/c3.txt" "$T/cm" >"$T/chk" 2>&1 && ok || bad "corpus mean ablation on $mdl vs reference: $(cat "$T/chk")"
    grep -q '"ablation_means":	"corpus"' "$T/cm/report.json" && ok || bad "corpus report lacks options.ablation_means"
    rm -rf "$T/cm"
done
# a shard takes its means over the whole corpus: its texts' deltas are the full run's
expect 0 "corpus mean ablation, all" -- "$HS" analyze "$TG" --corpus "$T/c3.txt" --corpus-ablation --ablation mean --no-gradient -o "$T/cmall" -q
expect 0 "corpus mean ablation, shard 2/2" -- "$HS" analyze "$TG" --corpus "$T/c3.txt" --corpus-ablation --ablation mean --no-gradient --shard 2/2 -o "$T/cms" -q
"$PY" -c "
import json, sys
full = {json.loads(l)['line']: json.loads(l)['heads']['ablation_delta'] for l in open('$T/cmall/texts.jsonl')}
part = [json.loads(l) for l in open('$T/cms/texts.jsonl')]
assert [p['line'] for p in part] == [2], [p['line'] for p in part]
sys.exit(0 if all(p['heads']['ablation_delta'] == full[p['line']] for p in part) else 1)" && ok || bad "a shard's corpus means differ from the whole corpus's"
# the induction claim (docs/metrics.md § The induction claim): on 40 random words repeated
# twice, mean-ablating the induction head 3.0 costs the most next-token loss on the repeated
# half, and on the probe's second half; every delta recomputed by the float64 reference
IND=$("$PY" -c "
import random, re; p = sorted(set(re.findall(r'[a-z]{3,}', open('fixtures/corpus/licenses.txt').read().lower())))
r = random.Random(2); w = [r.choice(p) for _ in range(40)]; print(' '.join(w + w))")
expect 0 "analyze trained-gpt2 induction ablation" -- "$HS" analyze "$TG" --text "$IND" --ablation mean --loss-span repeated --no-pruning --no-images -o "$T/ind" -q
"$PY" fixtures/ref/induction_ablation.py --check "$TG" "$T/ind/report.json" >"$T/chk" 2>&1 && ok || bad "trained-gpt2 span ablation vs reference: $(cat "$T/chk")"
"$PY" - "$T/ind/report.json" <<'PYEOF' && ok || bad "trained-gpt2: ablating the induction head 3.0 does not cost the most on the repeated text"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["options"]["loss_span"] == "repeated" and r["loss"]["span"] == "repeated"
n = r["input"]["n_tokens"]
assert r["loss"]["rows"][-1] == n - 2 and n // 2 - 2 <= len(r["loss"]["rows"]) < n // 2 + 4, r["loss"]["rows"]
top = max(r["heads"], key=lambda x: x["ablation_delta"])
assert (top["layer"], top["head"]) == (3, 0), top["id"]
pa = r["probe"]["ablation"]
assert pa["available"] and pa["kind"] == "mean", pa
top = max(pa["heads"], key=lambda e: e["delta"])
assert (top["layer"], top["head"]) == (3, 0), top
assert pa["first_half_loss"] - pa["loss"] > 3, pa
PYEOF
# zero ablation on the same span puts 3.3 first: zeroing it moves the stream off its range
expect 0 "analyze trained-gpt2 zero ablation on the repeated half" -- "$HS" analyze "$TG" --text "$IND" --loss-span repeated --no-pruning --no-gradient --no-images -o "$T/ind0" -q
"$PY" -c "
import json, sys; r = json.load(open('$T/ind0/report.json'))
top = max(r['heads'], key=lambda x: x['ablation_delta'])
sys.exit(0 if (top['layer'], top['head']) == (3, 3) else 1)" && ok || bad "trained-gpt2: zero ablation no longer puts 3.3 first (docs/metrics.md says it does)"
# models without an induction head are not given one: no label, no in-context gain on the
# probe, no head whose ablation costs much there
for fm in tiny-llama tiny-qwen2 tiny-pythia; do
    expect 0 "analyze $fm probe ablation" -- "$HS" analyze "fixtures/family-models/$fm" --text "$IND" --truncate --no-pruning --no-images -o "$T/ni" -q
    "$PY" - "$T/ni/report.json" <<'PYEOF' && ok || bad "$fm: an induction head where there is none"
import json, sys
r = json.load(open(sys.argv[1]))
assert not [x["id"] for x in r["heads"] if any(l["type"] == "induction" for l in x["labels"])]
pa = r["probe"]["ablation"]
assert pa["available"] and pa["first_half_loss"] - pa["loss"] < 0.5, pa
assert max(e["delta"] for e in pa["heads"]) < 0.5, pa["heads"]
PYEOF
done
expect 2 "analyze bad loss span" -- "$HS" analyze "$TG" --text "$IND" -o "$T/x" --loss-span second
stderr_has "bad loss span" "loss span 'second' is not 'all', 'repeated'"
expect 2 "analyze bad probe ablation" -- "$HS" analyze "$TG" --text "$IND" -o "$T/x" --probe-ablation half
expect 1 "analyze loss span with no repeat" -- "$HS" analyze "$TG" --text "one two three" -o "$T/x" --loss-span repeated
stderr_has "loss span with no repeat" "the loss span 'repeated' keeps no position of the text (no token occurs twice)"
[ ! -e "$T/x/report.json" ] && ok || bad "a failed analysis left a report behind"
expect 1 "analyze loss span on an MLM model" -- "$HS" analyze fixtures/tiny-bert --text "a b a b" -o "$T/x" --loss-span 1:3
stderr_has "loss span on an MLM model" "a loss span is for the next-token loss; this model's loss is the mlm loss"
# the naturally trained GPT-2 of ../shared: on random tokens repeated twice the induction head
# 3.0 adds the most to the correct next token's logit, the report matching the reference
if [ -d "$SHARED/trained-gpt2" ]; then
    RND=$("$PY" -c "
import random; r = random.Random(7); w = [r.choice(['apple','river','stone','cloud','seven','yellow','market','silver','garden','window','tiger','paper']) for _ in range(24)]
print(' '.join(w + w))")
    expect 0 "analyze shared trained-gpt2 repeated" -- "$HS" analyze "$SHARED/trained-gpt2" --text "$RND" --no-images -o "$T/sh" -q
    "$PY" fixtures/ref/make_attribution.py --check "$SHARED/trained-gpt2" "$T/sh/report.json" >"$T/chk" 2>&1 && ok || bad "shared trained-gpt2 direct logit attribution vs reference: $(cat "$T/chk")"
    "$PY" -c "
import json,sys; r=json.load(open('$T/sh/report.json'))
top=max(r['direct_logit_attribution']['heads'], key=lambda e: e['total'])
sys.exit(0 if (top['layer'], top['head']) == (3, 0) else 1)" && ok || bad "shared trained-gpt2: 3.0 is not the head with the largest direct logit attribution"
else
    echo "cli: skipped the shared trained-gpt2 attribution check: $SHARED/trained-gpt2 is absent"
fi
if [ -d "$SHARED/trained-bert" ]; then
    expect 0 "analyze shared trained-bert pair" -- "$HS" analyze "$SHARED/trained-bert" --text "The licence is granted free of charge." --text-pair "Permission is hereby granted." --word-level --no-images --no-ablation -o "$T/shb" -q
    "$PY" fixtures/ref/make_attribution.py --check "$SHARED/trained-bert" "$T/shb/report.json" >"$T/chk" 2>&1 && ok || bad "shared trained-bert norm-based summaries vs reference: $(cat "$T/chk")"
    "$PY" fixtures/ref/check_words.py "$SHARED/trained-bert" "$T/shb/report.json" >"$T/chk" 2>&1 && ok || bad "shared trained-bert word-level maps vs reference: $(cat "$T/chk")"
else
    echo "cli: skipped the shared trained-bert norm-based check: $SHARED/trained-bert is absent"
fi

# ---- convert (GGUF) -----------------------------------------------------------------------
expect 0 "convert --help" -- "$HS" convert --help
expect 2 "convert bad type" -- "$HS" convert "$G" -o "$T/m.bin" --type q4_0
expect 2 "convert without -o" -- "$HS" convert "$G"
expect 1 "convert missing folder" -- "$HS" convert "$T/none" -o "$T/m.bin"
one_line_error "convert missing folder"
no_file "convert missing folder" "$T/m.bin"
TXT="The cat sat on the mat. The cat sat on the mat."
BTXT="The capital of France is [MASK]."
"$HS" attn "$G" --text "$TXT" -o "$T/hf_g.npy" -q && "$HS" attn "$B" --text "$BTXT" -o "$T/hf_b.npy" -q || bad "attn on HF folders"
"$HS" tokenize "$G" --text "$TXT" --json >"$T/ids_g.json"; "$HS" tokenize "$B" --text "$BTXT" --json >"$T/ids_b.json"
for ty in f32 f16 bf16 q8_0; do
    expect 0 "convert gpt2 $ty" -- "$HS" convert "$G" -o "$T/g_$ty.bin" --type "$ty"
    expect 0 "convert bert $ty" -- "$HS" convert "$B" -o "$T/b_$ty.bin" --type "$ty"
    expect 0 "tokenize gguf gpt2 $ty" -- "$HS" tokenize "$T/g_$ty.bin" --text "$TXT" --json
    cmp -s "$T/out" "$T/ids_g.json" && ok || bad "gguf $ty gpt2 ids differ from the HF folder"
    expect 0 "tokenize gguf bert $ty" -- "$HS" tokenize "$T/b_$ty.bin" --text "$BTXT" --json
    cmp -s "$T/out" "$T/ids_b.json" && ok || bad "gguf $ty bert ids differ from the HF folder"
    expect 0 "attn gguf gpt2 $ty" -- "$HS" attn "$T/g_$ty.bin" --text "$TXT" -o "$T/g_$ty.npy"
    expect 0 "attn gguf bert $ty" -- "$HS" attn "$T/b_$ty.bin" --text "$BTXT" -o "$T/b_$ty.npy"
done
# f32 round trip: identical maps (the F16 source converts to F32 exactly); other types: bounded
"$PY" - "$T" <<'PYEOF' && ok || bad "gguf round-trip maps"
import sys, numpy as np
t = sys.argv[1]
bound = {"f32": 1e-6, "f16": 5e-3, "bf16": 2e-2, "q8_0": 5e-2}
for fam in ("g", "b"):
    ref = np.load(f"{t}/hf_{fam}.npy")
    for ty, tol in bound.items():
        d = np.abs(np.load(f"{t}/{fam}_{ty}.npy") - ref).max()
        print(f"{fam} {ty} max|d|={d:.3g}")
        assert d <= tol, (fam, ty, d)
PYEOF
expect 0 "info gguf" -- "$HS" info "$T/g_f16.bin"
grep -q "general.architecture" "$T/out" && grep -q "blk.0.attn_qkv.weight" "$T/out" && grep -q "format: *GGUF" "$T/out" && ok || bad "info gguf listing: $(head -c 600 "$T/out")"
expect 0 "analyze gguf" -- "$HS" analyze "$T/g_f32.bin" --text "$TXT" -o "$T/ag" -q
# the tied GPT-2 head: a copy in output.weight by default (llama.cpp b4747 needs it), left out
# with --no-output-copy; the maps are the same either way
expect 0 "info gguf f32" -- "$HS" info "$T/g_f32.bin"
grep -qE "\| output\\.weight$" "$T/out" && ok || bad "convert writes output.weight for a tied GPT-2"
expect 0 "convert --no-output-copy" -- "$HS" convert "$G" -o "$T/g_nocopy.bin" --no-output-copy
expect 0 "info --no-output-copy" -- "$HS" info "$T/g_nocopy.bin"
grep -qE "\| output\\.weight$" "$T/out" && bad "--no-output-copy still wrote output.weight" || ok
expect 0 "attn --no-output-copy" -- "$HS" attn "$T/g_nocopy.bin" --text "$TXT" -o "$T/g_nocopy.npy"
cmp -s "$T/g_nocopy.npy" "$T/g_f32.npy" && ok || bad "maps with and without output.weight differ"
# vocabulary-only files (no tensors, as llama.cpp's models/ggml-vocab-*.gguf): tokenize and
# info work, the commands that run the model refuse them in one line
VB=fixtures/gguf/good/tiny-bert-vocab.gguf
expect 0 "tokenize vocab-only bert" -- "$HS" tokenize "$VB" --text "unaffable playing [MASK] [unused0]" --json
stdout_is "vocab-only bert ids" '{"ids":[4,16,17,18,24,23,6,7,3,8,5],"tokens":["[CLS]","un","##aff","##able","play","##ing","[MASK]","[","[UNK]","]","[SEP]"],"type_ids":[0,0,0,0,0,0,0,0,0,0,0]}'
expect 0 "info vocab-only bert" -- "$HS" info "$VB"
grep -q "format: *GGUF, vocabulary only" "$T/out" && grep -q "WordPiece, 27 tokens" "$T/out" && grep -q "'\[unused0\]'" "$T/out" && ok || bad "info vocab-only: $(head -c 900 "$T/out")"
expect 0 "tokenize vocab-only gpt2" -- "$HS" tokenize fixtures/gguf/good/tiny-gpt2-vocab.gguf --text "Hello the world" --json
cp "$T/out" "$T/vo.json"
expect 0 "tokenize tiny hf gpt2" -- "$HS" tokenize fixtures/gguf/tiny-gpt2 --text "Hello the world" --json
cmp -s "$T/out" "$T/vo.json" && ok || bad "vocab-only gpt2 ids differ from its folder: $(cat "$T/vo.json")"
for c in attn analyze convert; do
    args=("$HS" "$c" "$VB" -o "$T/vo.out")
    [ "$c" = convert ] || args+=(--text hi)
    expect 1 "$c vocab-only" -- "${args[@]}"
    one_line_error "$c vocab-only"
    stderr_has "$c vocab-only" "no tensors"
    no_file "$c vocab-only" "$T/vo.out"
done
for f in fixtures/gguf/bad/*.gguf; do
    expect 1 "bad gguf $(basename "$f")" -- "$HS" attn "$f" --text hi -o "$T/bg.npy"
    one_line_error "bad gguf $(basename "$f")"
    no_file "bad gguf $(basename "$f")" "$T/bg.npy"
done

# ---- info ----------------------------------------------------------------------------------
expect 0 "info gpt2" -- "$HS" info "$G"
grep -q "^layers: *2$" "$T/out" && grep -q "byte-level BPE, 50257 tokens" "$T/out" && ok || bad "info gpt2: $(cat "$T/out")"
expect 0 "info bert" -- "$HS" info "$B"
grep -q "WordPiece, 30522 tokens, lowercased" "$T/out" && ok || bad "info bert: $(cat "$T/out")"

# tokenize needs config.json and the tokenizer files only; info reads headers, not weights
mkdir -p "$T/tokonly" && cp "$G/config.json" "$G/vocab.json" "$G/merges.txt" "$T/tokonly/"
expect 0 "tokenize without weights" -- "$HS" tokenize "$T/tokonly" --text "Hello world" --json
grep -q '"ids": *\[15496, *995\]' "$T/out" && ok || bad "tokenize without weights: $(cat "$T/out")"
expect 1 "attn without weights" -- "$HS" attn "$T/tokonly" --text hi -o "$T/tw.npy"
one_line_error "attn without weights"
grep -q "model.safetensors" "$T/err" && ok || bad "attn without weights names the file: $(cat "$T/err")"
expect 0 "info hub bert" -- "$HS" info fixtures/models/bert-hub
grep -q "weights stored as F32" "$T/out" && grep -q "^lm head: *MLM" "$T/out" && ok || bad "info hub bert: $(cat "$T/out")"
expect 0 "info trained gpt2" -- "$HS" info fixtures/trained-gpt2
grep -q "weights stored as F16" "$T/out" && grep -q "^parameters: *7259008$" "$T/out" && ok || bad "info trained gpt2: $(cat "$T/out")"

# Folders as older and newer hub models ship them: tokenizer.json only, pytorch_model.bin
# only (converted from the safetensors folder by torch.save at test time): the same ids and
# the same maps, byte for byte, as the vocab-file/safetensors folder they were made from.
for pair in "fixtures/trained-gpt2 gpt2" "fixtures/tiny-bert bert-uncased"; do
    set -- $pair
    src=$1 tj=fixtures/tokenizer/$2.tokenizer.json d="$T/hub-$2"
    "$PY" fixtures/ref/make_torchbin_models.py "$src" "$d" >/dev/null && cp "$tj" "$d/tokenizer.json" && ok || bad "$src: making the pytorch_model.bin folder"
    for f in "$d"/*; do case $f in *config.json|*pytorch_model.bin|*tokenizer.json) ;; *) bad "$d has $f";; esac; done
    TXT2="The capital of France is Paris. Ünïcödé, tabs	and 12,345 numbers!"
    "$HS" tokenize "$src" --text "$TXT2" --json >"$T/ids_a" && "$HS" tokenize "$d" --text "$TXT2" --json >"$T/ids_b" && cmp -s "$T/ids_a" "$T/ids_b" && ok || bad "$src: tokenizer.json ids differ"
    "$HS" attn "$src" --text "$TXT2" -o "$T/ma.npy" -q && "$HS" attn "$d" --text "$TXT2" -o "$T/mb.npy" -q && cmp -s "$T/ma.npy" "$T/mb.npy" && ok || bad "$src: pytorch_model.bin maps differ"
done
# hostile pickles are refused with one line, and no output is left
for f in evil_os_system evil_eval legacy huge_numel; do
    mkdir -p "$T/evil-$f" && cp "$G/config.json" "$G/vocab.json" "$G/merges.txt" "$T/evil-$f/" && cp "fixtures/torchbin/$f.bin" "$T/evil-$f/pytorch_model.bin"
    expect 1 "hostile pytorch_model.bin $f" -- "$HS" attn "$T/evil-$f" --text hi -o "$T/evil.npy"
    one_line_error "hostile pytorch_model.bin $f"
    no_file "hostile pytorch_model.bin $f" "$T/evil.npy"
done

# Writers never follow a symlink planted at a predictable temporary name: each outside
# file keeps its bytes, and every output still appears.
mkdir -p "$T/sym/out/heads" && echo keep >"$T/sym/victim"
for f in out/report.json out/index.html out/gallery.png out/heads/L0_H0.png a.npy m.gguf; do
    ln -s "$T/sym/victim" "$T/sym/$f.tmp"
done
"$HS" analyze "$G" --text "$REP" -o "$T/sym/out" -q --no-ablation && "$HS" attn "$G" --text hi -o "$T/sym/a.npy" -q && "$HS" convert "$G" -o "$T/sym/m.gguf" >/dev/null && ok || bad "writers with planted symlinks"
[ "$(cat "$T/sym/victim")" = keep ] && ok || bad "a planted symlink was followed: $(head -c 80 "$T/sym/victim")"
for f in out/report.json out/index.html out/gallery.png out/heads/L0_H0.png a.npy m.gguf; do
    [ -f "$T/sym/$f" ] && [ ! -L "$T/sym/$f" ] || bad "$f was not written"
done

# An interrupted or failed analyze leaves OUTDIR as it was; a rerun removes only what the
# earlier run listed; a locked folder refuses a second run
IO="$T/iofolder/out"
mkdir -p "$IO" && "$HS" analyze "$G" --text "$REP" -o "$IO" -q --no-ablation && ok || bad "first run"
echo mine >"$IO/notes.txt" && echo mine >"$IO/heads/mine.png"
snapshot() { (cd "$IO" && find . | LC_ALL=C sort && find . -type f | LC_ALL=C sort | xargs md5sum); }
snapshot >"$T/io.before"
for step in analyze pictures report; do
    expect 143 "interrupted after $step" -- env HEADSCOPE_TEST_SIGNAL_AT=$step "$HS" analyze "$G" --text "other words here" -o "$IO" -q --no-ablation
    stderr_has "interrupted after $step" "left as it was"
    snapshot | cmp -s - "$T/io.before" && ok || bad "interrupted after $step changed the folder: $(snapshot | diff - "$T/io.before" | head -5)"
done
expect 143 "interrupted run into a new folder" -- env HEADSCOPE_TEST_SIGNAL_AT=pictures "$HS" analyze "$G" --text "words" -o "$T/iofolder/new" -q --no-ablation
[ ! -e "$T/iofolder/new" ] && ok || bad "an interrupted run left its new folder"
expect 1 "failed run into a new folder" -- "$HS" analyze "$T/no-model" --text "words" -o "$T/iofolder/new2" -q
[ ! -e "$T/iofolder/new2" ] && ok || bad "a failed run left its new folder"
expect 0 "rerun without images" -- "$HS" analyze "$G" --text "other words here" -o "$IO" -q --no-ablation --no-images
[ ! -e "$IO/gallery.png" ] && [ ! -e "$IO/heads/L0_H0.png" ] && ok || bad "the earlier run's pictures stayed"
[ -f "$IO/notes.txt" ] && [ -f "$IO/heads/mine.png" ] && [ -f "$IO/report.json" ] && ok || bad "a rerun removed a file it did not write"
ls -a "$IO" | grep -q '^\.headscope-run' && bad "a staging folder was left" || ok
# The earlier report is read a block at a time for its top-level "files": one inside an
# object or a string is not taken, and a report past 64 MB (n x n matrices) is still read
BIG="$T/iofolder/big"
mkdir -p "$BIG" && echo old >"$BIG/gallery.png" && echo old >"$BIG/decoy.png"
{ printf '{"model": {"files": ["decoy.png"]}, "note": "\\"files\\": [\\"decoy.png\\"]", "pad": "'
  head -c 70000000 /dev/zero | tr '\0' x
  printf '", "files": ["gallery.png"]}\n'; } >"$BIG/report.json"
expect 0 "rerun over a 70 MB report" -- "$HS" analyze "$G" --text "words" -o "$BIG" -q --no-ablation --no-images
[ ! -e "$BIG/gallery.png" ] && [ -f "$BIG/decoy.png" ] && ok || bad "the files a 70 MB report listed were not removed, or a nested list was taken"
rm -rf "$BIG"
if command -v flock >/dev/null; then
    flock "$IO" sleep 5 &
    sleep 0.5
    expect 1 "locked folder" -- "$HS" analyze "$G" --text "words" -o "$IO" -q --no-ablation
    stderr_has "locked folder" "another headscope run"
    wait
fi
mkdir -p "$T/iofolder/elsewhere" && echo keep >"$T/iofolder/elsewhere/gallery.png" && echo keep >"$T/iofolder/elsewhere/L0_H0.png"
"$HS" analyze "$G" --text "words" -o "$IO" -q --no-ablation && ok || bad "run with pictures"
rm -rf "$IO/heads" && ln -s "$T/iofolder/elsewhere" "$IO/heads"
expect 1 "heads is a symlink" -- "$HS" analyze "$G" --text "words" -o "$IO" -q --no-ablation
stderr_has "heads is a symlink" "symbolic link"
[ "$(cat "$T/iofolder/elsewhere/L0_H0.png")" = keep ] && [ "$(ls "$T/iofolder/elsewhere" | wc -l)" = 2 ] && ok || bad "files were removed or written through a heads symlink"

# attention that overflows float32 is refused, naming the layer and head (attn writes it
# with --allow-nonfinite and a warning): layer 1's query and key columns scaled by 1e20
"$PY" - "$G" "$T/overflow" <<'PYEOF' && ok || bad "overflow model"
import shutil, sys
sys.path.insert(0, "fixtures/ref")
import hs_ref as R
src, d = sys.argv[1:3]
shutil.copytree(src, d)
t = R.read_safetensors(d + "/model.safetensors")
k = [x for x in t if x.endswith("h.1.attn.c_attn.weight")][0]
w = t[k].copy()
w[:, : 2 * w.shape[0]] *= 1e20
t[k] = w
R.write_safetensors(d + "/model.safetensors", t)  # F32
PYEOF
expect 1 "overflowing attention" -- "$HS" attn "$T/overflow" --text "hello world" -o "$T/ov.npy"
one_line_error "overflowing attention"
stderr_has "overflowing attention" "layer 1 head 0 attention is not finite"
no_file "overflowing attention" "$T/ov.npy"
expect 1 "overflowing attention in analyze" -- "$HS" analyze "$T/overflow" --text "hello world" -o "$T/ov-an"
stderr_has "overflowing attention in analyze" "scores overflow float32"
expect 0 "--allow-nonfinite" -- "$HS" attn "$T/overflow" --text "hello world" -o "$T/ov.npy" --allow-nonfinite
stderr_has "--allow-nonfinite" "warning: layer 1 head 0"
"$PY" -c "import numpy as n,sys; a=n.load('$T/ov.npy'); sys.exit(0 if n.isfinite(a[0]).all() and not n.isfinite(a[1,0]).all() else 1)" && ok || bad "--allow-nonfinite maps"

# a FIFO or a device as MODEL is refused at once, not waited on
mkfifo "$T/fifo" && expect 1 "fifo model" -- timeout 5 "$HS" info "$T/fifo" && one_line_error "fifo model"
expect 1 "device model" -- timeout 5 "$HS" info /dev/zero
# hostile files are refused before they cost memory: peak RSS under 4x the file
"$PY" - "$HS" "$T" "$G" "$B" <<'PYEOF' && ok || bad "hostile files cost memory"
import os, resource, shutil, struct, subprocess, sys
hs, tmp, g, b = sys.argv[1:5]
def case(name, src, fname, data, want):
    d = os.path.join(tmp, name)
    shutil.copytree(src, d)
    if os.path.exists(os.path.join(d, "tokenizer.json")):  # so the vocabulary files are read
        os.remove(os.path.join(d, "tokenizer.json"))
    with open(os.path.join(d, fname), "wb") as f:
        f.write(data)
    # under AddressSanitizer, freed buffers wait in its quarantine (resident, up to 256 MB):
    # without it the peak is the program's own
    env = dict(os.environ, ASAN_OPTIONS=(os.environ.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=0").lstrip(":"))
    r = subprocess.run([hs, "info", d], capture_output=True, env=env)
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # the largest child so far
    err = r.stderr.decode(errors="replace")
    okay = r.returncode == 1 and want in err and err.count("\n") == 1 and rss < 4 * len(data)
    print("%s: exit %d, peak %d MB for %d MB: %s" % (name, r.returncode, rss >> 20, len(data) >> 20, err.strip()),
          file=sys.stderr if not okay else open(os.devnull, "w"))
    return okay
hdr = b"[" + b"0," * (10 << 20) + b"0]"
good = case("st_array", g, "model.safetensors", struct.pack("<Q", len(hdr)) + hdr, "refused before parsing")
good &= case("vocab_array", g, "vocab.json", b"[" + b"0," * (16 << 20) + b"0]", "refused before parsing")
good &= case("vocab_lines", b, "vocab.txt", b"\n" * (32 << 20), "lines")
sys.exit(0 if good else 1)
PYEOF
# strings from files and the command line are escaped in messages: one line, no escape codes
mkdir -p "$T/evil" && cp "$G"/* "$T/evil/"
"$PY" -c "import json,sys; p=sys.argv[1]; c=json.load(open(p)); c['model_type']='gpt2\n\x1b[31mEVIL'; json.dump(c,open(p,'w'))" "$T/evil/config.json"
expect 1 "control characters in config" -- "$HS" info "$T/evil"
one_line_error "control characters in config"
grep -qF "'gpt2\\n\\x1b[31mEVIL'" "$T/err" && ! grep -q "$(printf '\033')" "$T/err" && ok || bad "config string not escaped: $(od -c "$T/err" | head -3)"
expect 2 "control characters in a command name" -- "$HS" "$(printf 'x\033[2J')"
head -1 "$T/err" | grep -qF "'x\\x1b[2J' is not a command" && ok || bad "command name not escaped: $(head -1 "$T/err")"

# --threads (every command) and HEADSCOPE_THREADS: the same bits with 1, 2 and 3 threads, on a
# text long enough for every parallel loop to split (trained-gpt2, ~200 tokens)
LONG="$(head -c 1000 fixtures/corpus/licenses.txt)"
expect 0 "attn 1 thread" -- "$HS" attn fixtures/trained-gpt2 --threads 1 --text "$LONG" -o "$T/t1.npy"
HEADSCOPE_THREADS=2 "$HS" attn fixtures/trained-gpt2 --text "$LONG" -o "$T/t2.npy" -q && ok || bad "HEADSCOPE_THREADS=2"
"$HS" attn fixtures/trained-gpt2 --threads 3 --text "$LONG" -o "$T/t3.npy" -q && ok || bad "--threads 3"
cmp -s "$T/t1.npy" "$T/t2.npy" && cmp -s "$T/t1.npy" "$T/t3.npy" && ok || bad "maps depend on the thread count"
for t in 1 3; do
    "$HS" analyze fixtures/trained-gpt2 --threads $t --text "$LONG" --no-hash --no-images -o "$T/an$t" -q || bad "analyze --threads $t"
done
# two reports the same but for the generator and the timings (and, with a third argument, with
# DLA and composition in them)
same_report() {
    "$PY" - "$@" <<'PYEOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for r in (a, b):
    r.pop("generator", None)
    r.pop("timing", None)
if len(sys.argv) > 3 and not (a.get("direct_logit_attribution") and a.get("composition")):
    sys.exit("no DLA or composition")
sys.exit(0 if json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True) else 1)
PYEOF
}
same_report "$T/an1/report.json" "$T/an3/report.json" && ok || bad "analyze results depend on the thread count"
expect 2 "--threads 0" -- "$HS" attn "$G" --threads 0 --text hi -o "$T/t0.npy"
one_line_error "--threads 0"
expect 2 "--threads without value" -- "$HS" info "$G" --threads
HEADSCOPE_THREADS=lots "$HS" info "$G" >/dev/null 2>"$T/err"; [ $? = 2 ] && ok || bad "bad HEADSCOPE_THREADS is a usage error"

# --weight-memory (every command) and HEADSCOPE_WEIGHT_MEMORY: trained-gpt2 is stored as F16;
# with a budget below one layer every layer is converted again in every pass, with no bound
# once at load: the same bits in analyze (DLA, norm-based attention and composition read
# the weights held converted), dump (norm-based attention) and convert (the GGUF writer);
# 'stored' keeps the F16 embeddings and tied LM head in their stored type (the Conv1D
# layers are converted): the same bits again, the writer converting the table it reads
MED="$(head -c 300 fixtures/corpus/licenses.txt)"
for wm in 0 all stored; do
    "$HS" analyze fixtures/trained-gpt2 --weight-memory $wm --text "$MED" --no-hash --no-images -o "$T/wm$wm" -q || bad "analyze --weight-memory $wm"
    HEADSCOPE_WEIGHT_MEMORY=$wm "$HS" dump fixtures/trained-gpt2 --text "$MED" --what pattern,norm,mlp_out -o "$T/wmd$wm" -q || bad "dump HEADSCOPE_WEIGHT_MEMORY=$wm"
    "$HS" convert fixtures/trained-gpt2 --weight-memory=$wm -o "$T/wm$wm.gguf" >/dev/null || bad "convert --weight-memory $wm"
done
same_report "$T/wm0/report.json" "$T/wmall/report.json" weights && ok || bad "analyze results depend on the weight budget"
same_report "$T/wmstored/report.json" "$T/wmall/report.json" weights && ok || bad "analyze results differ with the embeddings stored"
for f in blocks.3.attn.norm_pattern.npy blocks.3.hook_mlp_out.npy blocks.0.attn.hook_pattern.npy; do
    cmp -s "$T/wmd0/$f" "$T/wmdall/$f" && ok || bad "dump $f depends on the weight budget"
    cmp -s "$T/wmdstored/$f" "$T/wmdall/$f" && ok || bad "dump $f differs with the embeddings stored"
done
cmp -s "$T/wm0.gguf" "$T/wmall.gguf" && ok || bad "convert depends on the weight budget"
cmp -s "$T/wmstored.gguf" "$T/wmall.gguf" && ok || bad "convert differs with the embeddings stored"
# --weight-memory stored: a Q4_K_M file's layers (Q5_0, Q5_1, Q8_0) multiplied in their
# stored type give the maps' bytes of the converted layers; info says which. With no budget
# given (the default since 3.2.0) the file is run as 'stored'; GPT-2's F16 Conv1D layers
# cannot be and are converted once at load, as before
QF=fixtures/gguf/families/tiny-qwen2.q4_k_m_fallback.gguf
for wm in stored all; do
    "$HS" attn "$QF" --weight-memory $wm --text "$MED" --truncate -o "$T/ws$wm.npy" -q || bad "attn --weight-memory $wm"
done
"$HS" attn "$QF" --text "$MED" --truncate -o "$T/wsdefault.npy" -q || bad "attn with the default weight memory"
cmp -s "$T/wsstored.npy" "$T/wsall.npy" && ok || bad "attn --weight-memory stored changes the maps"
cmp -s "$T/wsdefault.npy" "$T/wsall.npy" && ok || bad "attn's default weight memory changes the maps"
"$HS" info "$QF" | grep -q "none converted: layers multiplied in their stored type" && ok || bad "info: the default is not stored"
"$HS" info fixtures/trained-gpt2 | grep -q "; budget [0-9]* MB: converted once, at load" && ok || bad "info: GPT-2's F16 Conv1D layers are not converted by default"
"$HS" info fixtures/trained-gpt2 --weight-memory stored | grep -q "budget 0 MB: stored (in, out), so not multiplied in their stored type but converted again in every pass" &&
    ok || bad "info --weight-memory stored: GPT-2's F16 Conv1D layers are said to be stored"
HEADSCOPE_WEIGHT_MEMORY=stored "$HS" info "$QF" | grep -q "layers multiplied in their stored type" && ok || bad "info under HEADSCOPE_WEIGHT_MEMORY=stored"
# and that the tables stay stored: llama-quantize wrote token_embd.weight as Q8_0, no output.weight
HEADSCOPE_WEIGHT_MEMORY=stored "$HS" info "$QF" | grep -qx "tables: *token embeddings Q8_0 (kept stored), LM head tied to them: rows decoded where read" &&
    ok || bad "info under HEADSCOPE_WEIGHT_MEMORY=stored: no tables line"
"$HS" info "$QF" --weight-memory all | grep -q "^tables:" && bad "info without stored weights has a tables line" || ok
"$HS" info "$QF" | grep -q "^tables: *token embeddings Q8_0 (kept stored)" && ok || bad "info: no tables line by default"
# a NaN in the Q8_0 token embeddings (the second block's f16 scale): refused at open, the
# table kept in its stored type named as the converted one is
QN=fixtures/gguf/families/tiny-llama.q8_0.gguf
"$PY" - "$QN" "$T/nan-emb.gguf" "$("$HS" info "$QN" | sed -n 's/.*data at byte \([0-9]*\).*/\1/p')" <<'PYEOF'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
at = int(sys.argv[3]) + 34  # token_embd.weight is the first tensor: its second block's scale
b[at:at + 2] = b"\x00\x7e"
open(sys.argv[2], "wb").write(b)
PYEOF
for wm in stored all; do
    expect 1 "NaN embeddings, --weight-memory $wm" -- "$HS" attn "$T/nan-emb.gguf" --weight-memory $wm --text hi -o "$T/nan-emb.npy"
    one_line_error "NaN embeddings, --weight-memory $wm"
    stderr_has "NaN embeddings, --weight-memory $wm" "tensor 'token_embd.weight' holds a non-finite value (NaN) at element 32"
    no_file "NaN embeddings, --weight-memory $wm" "$T/nan-emb.npy"
done
expect 2 "--weight-memory bogus" -- "$HS" attn "$G" --weight-memory 12X --text hi -o "$T/w.npy"
one_line_error "--weight-memory bogus"
stderr_has "--weight-memory bogus" "headscope: --weight-memory '12X' is not a size (e.g. 512M, 4G or all)"
no_file "--weight-memory bogus" "$T/w.npy"
HEADSCOPE_WEIGHT_MEMORY=lots "$HS" attn fixtures/trained-gpt2 --text hi -o "$T/w.npy" 2>"$T/err"; [ $? = 1 ] && ok || bad "bad HEADSCOPE_WEIGHT_MEMORY fails the open"
one_line_error "bad HEADSCOPE_WEIGHT_MEMORY"
stderr_has "bad HEADSCOPE_WEIGHT_MEMORY" "HEADSCOPE_WEIGHT_MEMORY='lots' is not a size"

# ---- analyze --corpus -----------------------------------------------------------------------
TG=fixtures/trained-gpt2
CP=fixtures/corpus/licenses.txt
expect 0 "corpus licenses" -- "$HS" analyze "$TG" --corpus "$CP" -o "$T/co"
grep -q "40 texts analysed" "$T/out" && grep -q "^wrote $T/co/report.json" "$T/out" && ok || bad "corpus summary: $(cat "$T/out")"
[ -s "$T/co/texts.jsonl" ] && [ -z "$(ls "$T/co" | grep tmp)" ] && grep -q "id=\"hs-texts\"" "$T/co/index.html" && ok || bad "corpus outputs"
"$PY" fixtures/corpus/check_corpus.py "$T/co" "$TG" --ref-texts 4 >"$T/chk" 2>&1 && ok || bad "corpus statistics vs NumPy and the reference: $(cat "$T/chk")"
# 500 real paragraphs (Debian's licence and documentation texts) on the naturally trained
# GPT-2 and BERT of ../shared: every statistic recomputed with NumPy, entropies and the mean
# similarity with the float64 reference
if [ -d "$SHARED/trained-gpt2" ] && [ -d "$SHARED/trained-bert" ]; then
    "$PY" fixtures/corpus/make_paragraphs.py "$T/para.txt" --n 500 >"$T/chk" 2>&1 && ok || bad "paragraphs: $(cat "$T/chk")"
    for mdl in trained-gpt2 trained-bert; do
        expect 0 "corpus of 500 paragraphs on $mdl" -- "$HS" analyze "$SHARED/$mdl" --corpus "$T/para.txt" --max-tokens 128 -o "$T/para-$mdl" -q
        "$PY" fixtures/corpus/check_corpus.py "$T/para-$mdl" "$SHARED/$mdl" --ref-texts 5 >"$T/chk" 2>&1 && ok || bad "500 paragraphs on $mdl vs NumPy and the reference: $(cat "$T/chk")"
        "$PY" -c "import json,sys; c=json.load(open(sys.argv[1]))['corpus']; sys.exit(0 if c['n_texts'] == 500 else 1)" "$T/para-$mdl/report.json" && ok || bad "500 paragraphs on $mdl: not every text analysed"
    done
else
    echo "cli: skipped the 500-paragraph corpus check: $SHARED/trained-gpt2 and trained-bert are absent (development checkout only)"
fi
expect 0 "corpus rerun" -- "$HS" analyze "$TG" --corpus "$CP" -o "$T/co2" -q
cmp -s "$T/co/texts.jsonl" "$T/co2/texts.jsonl" && ok || bad "corpus texts.jsonl differs between runs"
"$PY" - "$T/co/report.json" "$T/co2/report.json" <<'PYEOF' && ok || bad "corpus report differs between runs"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for r in (a, b):
    del r["timing"], r["generator"]
assert a == b
PYEOF
# a grouped-query model's corpus report: the KV-group measures of the mean similarity,
# recomputed by the NumPy reference (fixtures/ref/make_kv_golden.py) from the report's matrix;
# a GPT-2 corpus report has none
expect 0 "corpus on tiny-llama" -- "$HS" analyze fixtures/family-models/tiny-llama --corpus fixtures/corpus/mixed.jsonl --max-tokens 40 -o "$T/ckv" -q
"$PY" - "$T/ckv/report.json" "$T/co/report.json" <<'PYEOF' && ok || bad "corpus kv_groups differ from the NumPy reference"
import json, sys
import numpy as np
sys.path.insert(0, "fixtures/ref")
import make_kv_golden as K
r, g2 = (json.load(open(p)) for p in sys.argv[1:])
c, m = r["corpus"], r["model"]
assert "kv_groups" not in g2["corpus"], "a GPT-2 corpus has no KV groups"
kv = c["kv_groups"]
assert kv["n_kv_head"] == m["n_kv_head"] == 2 and "ablation_delta" not in kv
heads = [(h["layer"], h["head"]) for h in c["heads"]]
sim = np.array(c["similarity"]["matrix"], float)
want = K.kv_measures(sim, heads, m["n_layer"], m["n_head"], m["n_kv_head"], "pearson")
got = kv["similarity"]
for key in ("within", "across", "p_value", "p_value_holm"):
    assert np.allclose(np.array(got[key], float), np.array(want[key], float), atol=1e-12), key
for key in ("within_mean", "across_mean", "other_layers_mean"):
    assert abs(got[key] - want[key]) < 1e-12, key
assert np.allclose(np.array(got["groups"], float), np.array(want["groups"], float), atol=1e-12)
assert got["n_within_pairs"] == want["n_within_pairs"] == 36
PYEOF
expect 0 "corpus jsonl with bad lines" -- "$HS" analyze "$TG" --corpus fixtures/corpus/mixed.jsonl -o "$T/cm"
stderr_has "bad json line" "line 4: invalid_json"
stderr_has "bad utf-8 line" "line 8: invalid_utf8"
stderr_has "pair for gpt-2" "line 6: text_pair_unsupported"
"$PY" - "$T/cm/report.json" <<'PYEOF' && ok || bad "corpus skip counts: $(head -c 600 "$T/cm/report.json")"
import json, sys
c = json.load(open(sys.argv[1]))["corpus"]
assert c["source"]["format"] == "jsonl", c["source"]
assert (c["n_texts"], c["n_records"], c["n_empty"], c["n_skipped"]) == (3, 7, 2, 4), c
s = c["skipped"]
assert (s["invalid_json"], s["invalid_utf8"], s["text_pair_unsupported"]) == (2, 1, 1), s
PYEOF
printf '{"text": 1}\nnot json\n\n' >"$T/allbad.jsonl"
expect 1 "corpus with no good line" -- "$HS" analyze "$TG" --corpus "$T/allbad.jsonl" -o "$T/cb" -q
one_line_error "corpus with no good line"
[ ! -e "$T/cb" ] && ok || bad "a failed corpus run left '$T/cb' behind"
expect 1 "corpus missing file" -- "$HS" analyze "$TG" --corpus "$T/none.txt" -o "$T/cb"
one_line_error "corpus missing file"
expect 0 "corpus stdin --max-texts" -- bash -c "'$HS' analyze '$TG' --corpus - --max-texts 5 -o '$T/cs' -q < '$CP'"
expect 0 "corpus --sample" -- "$HS" analyze "$TG" --corpus "$CP" --sample 7 --seed 3 -o "$T/csa" -q
expect 0 "corpus --sample again" -- "$HS" analyze "$TG" --corpus "$CP" --sample 7 --seed 3 -o "$T/csb" -q
cmp -s "$T/csa/texts.jsonl" "$T/csb/texts.jsonl" && ok || bad "same seed, different sample"
expect 0 "corpus --max-tokens" -- "$HS" analyze "$TG" --corpus "$CP" --max-tokens 30 --max-texts 10 -o "$T/ct" -q
expect 0 "corpus --skip-long" -- "$HS" analyze "$TG" --corpus "$CP" --max-tokens 30 --max-texts 10 --skip-long -o "$T/ck" -q
mkdir -p "$T/cdir" && printf 'The second file.\n' >"$T/cdir/b.txt" && printf 'The first file.' >"$T/cdir/a.txt" && printf 'skipped' >"$T/cdir/c.md"
expect 0 "corpus folder" -- "$HS" analyze "$TG" --corpus "$T/cdir" -o "$T/cf" -q
expect 0 "corpus --corpus-ablation" -- "$HS" analyze "$TG" --corpus "$CP" --max-texts 3 --corpus-ablation -o "$T/cab" -q
"$PY" - "$T" <<'PYEOF' && ok || bad "corpus stdin, sample, max-tokens, folder, ablation"
import json, sys
t = sys.argv[1]
rep = lambda d: json.load(open(f"{t}/{d}/report.json"))["corpus"]
lines = lambda d: [json.loads(l) for l in open(f"{t}/{d}/texts.jsonl")]
assert rep("cs")["n_texts"] == 5 and [x["line"] for x in lines("cs")] == [1, 2, 3, 4, 5]
sa = [x["line"] for x in lines("csa")]
assert len(sa) == 7 and sa == sorted(sa) and sa != list(range(1, 8)), sa
ct, ck = rep("ct"), rep("ck")
assert all(x["n_tokens"] <= 30 for x in lines("ct")) and ct["n_texts"] == 10
assert ct["n_truncated"] == sum(x["truncated"] for x in lines("ct")) > 0, ct["n_truncated"]
assert ck["skipped"]["too_long"] == ct["n_truncated"] and ck["n_texts"] == 10 - ct["n_truncated"]
cf = rep("cf")
assert cf["source"]["format"] == "folder" and cf["n_texts"] == 2
assert [x["line"] for x in lines("cf")] == [1, 2]
ab = rep("cab")["heads"][0]["ablation_delta"]
assert ab["n"] == 3 and ab["mean"] is not None, ab
assert rep("co")["heads"][0]["ablation_delta"] is None
PYEOF
expect 2 "corpus and --text" -- "$HS" analyze "$TG" --corpus "$CP" --text hi -o "$T/cx"
expect 2 "corpus option without --corpus" -- "$HS" analyze "$TG" --text hi --sample 3 -o "$T/cx"
expect 2 "corpus bad --sample" -- "$HS" analyze "$TG" --corpus "$CP" --sample 0 -o "$T/cx"
expect 2 "corpus bad format" -- "$HS" analyze "$TG" --corpus "$CP" --corpus-format csv -o "$T/cx"

# ---- corpus sharding, merging, resuming, progress --------------------------------------------
# The single run of the first 12 texts is the reference for the shards and for resuming.
expect 0 "corpus 12 texts" -- "$HS" analyze "$TG" --corpus "$CP" --max-texts 12 -o "$T/c12" -q --progress=json
[ -s "$T/c12/partial.json" ] && ok || bad "a single corpus run writes partial.json"
"$PY" - "$T/err" <<'PYEOF' && ok || bad "--progress=json lines: $(head -c 600 "$T/err")"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
assert [e["texts_done"] for e in ev] == list(range(1, 13)) + [12], ev
assert ev[-1]["event"] == "done" and all(e["event"] == "progress" for e in ev[:-1])
for e in ev:
    assert set(e) == {"event", "texts_done", "texts_total", "tokens", "elapsed_s", "tokens_per_s", "eta_s"}, e
assert ev[-1]["tokens"] == json.load(open(sys.argv[1].replace("err", "c12/report.json")))["corpus"]["tokens"]["total"]
PYEOF
expect 0 "corpus quiet, no progress" -- "$HS" analyze "$TG" --corpus "$CP" --max-texts 2 -o "$T/cq" -q
[ ! -s "$T/err" ] && ok || bad "corpus -q wrote on stderr: $(cat "$T/err")"
if command -v parallel >/dev/null; then
    expect 0 "4 shards with GNU parallel" -- parallel -j 2 --halt now,fail=1 \
        "$HS" analyze "$TG" --corpus "$CP" --max-texts 12 --shard {}/4 -o "$T/sh{}" -q ::: 1 2 3 4
else
    bad "GNU parallel is not installed (make deps)"
    for i in 1 2 3 4; do "$HS" analyze "$TG" --corpus "$CP" --max-texts 12 --shard $i/4 -o "$T/sh$i" -q; done
fi
[ -s "$T/sh3/partial.json" ] && [ -s "$T/sh3/texts.jsonl" ] && [ ! -e "$T/sh3/report.json" ] && ok || bad "a shard writes partial.json and texts.jsonl, no report"
expect 0 "merge 4 shards" -- "$HS" merge "$T/sh3" "$T/sh1/partial.json" "$T/sh4" "$T/sh2" -o "$T/mg"
grep -q "^wrote $T/mg/report.json" "$T/out" && ok || bad "merge summary: $(cat "$T/out")"
cmp -s "$T/c12/texts.jsonl" "$T/mg/texts.jsonl" && ok || bad "merged texts.jsonl differs from the single run's"
# means, sd, intervals, similarity: equal to 1e-12 relative (summation order); counts,
# labels and clusters exactly
"$PY" - "$T/c12/report.json" "$T/mg/report.json" <<'PYEOF' && ok || bad "merged report differs from the single run's"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for r in (a, b):
    del r["generator"], r["timing"]
def cmp(x, y, path):
    if isinstance(x, dict):
        assert x.keys() == y.keys(), path
        for k in x:
            cmp(x[k], y[k], f"{path}.{k}")
    elif isinstance(x, list):
        assert len(x) == len(y), path
        for i, (u, v) in enumerate(zip(x, y)):
            cmp(u, v, f"{path}[{i}]")
    elif isinstance(x, float) or isinstance(y, float):
        assert abs(x - y) <= 1e-12 * max(1.0, abs(x)), (path, x, y)
    else:
        assert x == y, (path, x, y)
cmp(a, b, "")
PYEOF
expect 0 "merge of one partial" -- "$HS" merge "$T/c12" -o "$T/m1" -q
"$PY" - "$T/c12/report.json" "$T/m1/report.json" <<'PYEOF' && ok || bad "merge of one partial is not its run's report"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
del a["generator"], b["generator"]
assert a == b
PYEOF
cmp -s "$T/c12/partial.json" "$T/m1/partial.json" && ok || bad "merge of one partial changed the partial"
# bad records across shards: every shard reads them, the report counts them once
for i in 1 2 3 4; do "$HS" analyze "$TG" --corpus fixtures/corpus/mixed.jsonl --shard $i/4 -o "$T/mx$i" -q 2>/dev/null; done
expect 0 "merge shards with skipped records" -- "$HS" merge "$T"/mx? -o "$T/mxm" -q
"$PY" - "$T/mxm/report.json" "$T/cm/report.json" <<'PYEOF' && ok || bad "merged skip counts"
import json, sys
a, b = (json.load(open(p))["corpus"] for p in sys.argv[1:3])
for k in ("n_records", "n_texts", "n_empty", "n_skipped", "skipped", "tokens"):
    assert a[k] == b[k], (k, a[k], b[k])
PYEOF
# refusals
expect 2 "--shard 0/4" -- "$HS" analyze "$TG" --corpus "$CP" --shard 0/4 -o "$T/cx"
expect 2 "--shard 5/4" -- "$HS" analyze "$TG" --corpus "$CP" --shard 5/4 -o "$T/cx"
expect 2 "--shard 2" -- "$HS" analyze "$TG" --corpus "$CP" --shard 2 -o "$T/cx"
expect 2 "--shard without --corpus" -- "$HS" analyze "$TG" --text hi --shard 1/2 -o "$T/cx"
expect 2 "--progress=loud" -- "$HS" analyze "$TG" --corpus "$CP" --progress=loud -o "$T/cx"
expect 0 "merge --help" -- "$HS" merge --help
grep -q "^usage: headscope merge" "$T/out" && ok || bad "merge --help text"
expect 2 "merge without parts" -- "$HS" merge -o "$T/cx"
expect 2 "merge without -o" -- "$HS" merge "$T/sh1"
expect 1 "merge with a missing shard" -- "$HS" merge "$T/sh1" "$T/sh2" "$T/sh4" -o "$T/cx"
one_line_error "merge with a missing shard"; stderr_has "merge with a missing shard" "shard 3/4 is missing"
expect 1 "merge with a shard twice" -- "$HS" merge "$T/sh1" "$T/sh2" "$T/sh2" "$T/sh3" -o "$T/cx"
one_line_error "merge with a shard twice"; stderr_has "merge with a shard twice" "given twice"
"$HS" analyze "$G" --corpus "$CP" --max-texts 12 --shard 2/4 -o "$T/shg" -q
expect 1 "merge across models" -- "$HS" merge "$T/sh1" "$T/shg" "$T/sh3" "$T/sh4" -o "$T/cx"
one_line_error "merge across models"; stderr_has "merge across models" "different model"
"$HS" analyze "$TG" --corpus "$CP" --max-texts 12 --shard 2/4 --similarity js -o "$T/shj" -q
expect 1 "merge across options" -- "$HS" merge "$T/sh1" "$T/shj" "$T/sh3" "$T/sh4" -o "$T/cx"
one_line_error "merge across options"; stderr_has "merge across options" "--similarity"
expect 1 "merge across selections" -- "$HS" merge "$T/sh1" "$T/mx2" "$T/sh3" "$T/sh4" -o "$T/cx"
one_line_error "merge across selections"
head -c 300 "$T/sh2/partial.json" >"$T/cut.json"
expect 1 "merge of a cut partial" -- "$HS" merge "$T/cut.json" -o "$T/cx"
one_line_error "merge of a cut partial"; stderr_has "merge of a cut partial" "not a headscope partial"
sed 's/"n_sim":[0-9]*/"n_sim":"x"/' "$T/sh2/partial.json" >"$T/bad.json"
expect 1 "merge of a partial with a bad field" -- "$HS" merge "$T/bad.json" -o "$T/cx"
one_line_error "merge of a partial with a bad field"; stderr_has "merge of a partial with a bad field" "'n_sim'"
expect 1 "merge of a report" -- "$HS" merge "$T/c12/report.json" -o "$T/cx"
one_line_error "merge of a report"
[ ! -e "$T/cx" ] && ok || bad "a failed merge left '$T/cx' behind"
# resume: stop after 5 texts (a checkpoint every 2), go on, compare with the uninterrupted run
HEADSCOPE_TEST_STOP_AFTER=5 expect 1 "corpus stopped after 5 texts" -- "$HS" analyze "$TG" --corpus "$CP" --max-texts 12 --checkpoint-every 2 -o "$T/rs" -q
ls "$T/rs"/texts.jsonl.tmp-* >/dev/null 2>&1 && [ -s "$T/rs/partial.json" ] && [ ! -e "$T/rs/report.json" ] && ok || bad "a stopped run keeps its checkpoint: $(ls "$T/rs")"
expect 1 "merge of a checkpoint" -- "$HS" merge "$T/rs" -o "$T/cx"
one_line_error "merge of a checkpoint"; stderr_has "merge of a checkpoint" "unfinished"
expect 1 "resume with other options" -- "$HS" analyze "$TG" --corpus "$CP" --max-texts 11 -o "$T/rs" --resume -q
one_line_error "resume with other options"
expect 0 "resume" -- "$HS" analyze "$TG" --corpus "$CP" --max-texts 12 --checkpoint-every 2 -o "$T/rs" --resume -q
cmp -s "$T/c12/texts.jsonl" "$T/rs/texts.jsonl" && ok || bad "resumed texts.jsonl differs from the uninterrupted run's"
[ -z "$(ls "$T/rs" | grep tmp)" ] && ok || bad "resume left a temporary file: $(ls "$T/rs")"
"$PY" - "$T/c12/report.json" "$T/rs/report.json" <<'PYEOF' && ok || bad "resumed report differs from the uninterrupted run's"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for r in (a, b):
    del r["generator"], r["timing"]
assert json.dumps(a) == json.dumps(b)
PYEOF
expect 1 "resume a finished run" -- "$HS" analyze "$TG" --corpus "$CP" --max-texts 12 -o "$T/rs" --resume -q
one_line_error "resume a finished run"
expect 2 "resume from stdin" -- "$HS" analyze "$TG" --corpus - --resume -o "$T/rs"

# viz/page/pagegen: the page's files become byte arrays; it refuses what would break the page
PG=$(dirname "$HS")/gen/pagegen
if [ -x "$PG" ]; then
    mkdir -p "$T/pg"
    printf '<p>\n@include x.js\n@data\n</p>\n' >"$T/pg/t.html"
    printf 'let a = 1;' >"$T/pg/x.js"
    expect 0 "pagegen" -- "$PG" "$T/pg/t.html" "$T/pg/out.c"
    # before: "<p>\n" "let a = 1;\n" (a newline is added); after: "</p>\n"
    grep -q '^const size_t hs_page_before_len = 15;' "$T/pg/out.c" &&
        grep -q '^const size_t hs_page_after_len = 5;' "$T/pg/out.c" &&
        grep -q '60,112,62,10,108,101,116,32,97,32,61,32,49,59,10,' "$T/pg/out.c" && ok || bad "pagegen output: $(head -c 600 "$T/pg/out.c")"
    for bad_js in 'x = "</script>";' 'x = "<!-- y";' 'x = "https://example.org";'; do
        printf '%s\n' "$bad_js" >"$T/pg/x.js"
        expect 1 "pagegen refuses $bad_js" -- "$PG" "$T/pg/t.html" "$T/pg/bad.c"
        [ "$(wc -l <"$T/err")" = 1 ] && grep -q '^pagegen: ' "$T/err" && ok || bad "pagegen: not one line: $(cat "$T/err")"
        no_file "pagegen refuses $bad_js" "$T/pg/bad.c"
    done
    printf '<p>\n' >"$T/pg/nodata.html"
    expect 1 "pagegen without @data" -- "$PG" "$T/pg/nodata.html" "$T/pg/bad.c"
    stderr_has "pagegen without @data" "no @data line"
    no_file "pagegen without @data" "$T/pg/bad.c"
    expect 2 "pagegen usage" -- "$PG" "$T/pg/t.html"
else
    bad "no $PG (make builds it)"
fi

# OpenBLAS's kernels: where it picks a family older than the CPU runs (a virtual machine's
# CPU it does not know), headscope sets OPENBLAS_CORETYPE and runs itself again with the
# same arguments; HEADSCOPE_TEST_BLAS_CORE makes it take OpenBLAS's choice as that name.
# A CPU with AVX has a better family than SSE3 "Prescott"; an OPENBLAS_CORETYPE the user
# set is kept.
if grep -qw avx /proc/cpuinfo; then
    expect 0 "version, OpenBLAS as if on Prescott" -- env -u OPENBLAS_CORETYPE HEADSCOPE_TEST_BLAS_CORE=Prescott "$HS" --version
    if grep -q '^OpenBLAS kernels \(Sandybridge\|Haswell\|SkylakeX\), OpenMP threads (OpenBLAS chose Prescott; headscope set OPENBLAS_CORETYPE)$' "$T/out"; then ok; else bad "kernel re-exec: $(cat "$T/out")"; fi
    "$HS" info fixtures/trained-gpt2 >"$T/info1" 2>&1
    env -u OPENBLAS_CORETYPE HEADSCOPE_TEST_BLAS_CORE=Prescott "$HS" info fixtures/trained-gpt2 >"$T/info2" 2>&1
    if cmp -s "$T/info1" "$T/info2" && [ -s "$T/info1" ]; then ok; else bad "info after the kernel re-exec differs: $(diff "$T/info1" "$T/info2" | head -5)"; fi
    expect 0 "version, OPENBLAS_CORETYPE kept" -- env OPENBLAS_CORETYPE=Prescott HEADSCOPE_TEST_BLAS_CORE=Prescott "$HS" --version
    if grep -q '^OpenBLAS kernels Prescott, OpenMP threads$' "$T/out"; then ok; else bad "OPENBLAS_CORETYPE not kept: $(cat "$T/out")"; fi
fi

# ---- usage errors: one line, with what was probably meant (issue 40) ------------------------
expect 2 "misspelt option" -- "$HS" analyze "$G" --txt hi -o "$T/u"
one_line_error "misspelt option"
stderr_has "misspelt option" "headscope: analyze: unknown option '--txt'; did you mean '--text'? (see 'headscope analyze --help')"
expect 2 "misspelt command" -- "$HS" analyse "$G" --text hi -o "$T/u"
one_line_error "misspelt command"
stderr_has "misspelt command" "headscope: 'analyse' is not a command; did you mean 'analyze'? (see 'headscope --help')"
expect 2 "unknown command" -- "$HS" frobnicate
one_line_error "unknown command"; stderr_has "unknown command" "'frobnicate' is not a command (see 'headscope --help')"
expect 2 "ambiguous abbreviation" -- "$HS" analyze "$G" --max 3 --text hi -o "$T/u"
one_line_error "ambiguous abbreviation"
stderr_has "ambiguous abbreviation" "unknown option '--max': it abbreviates --max-tokens-in-images, --max-texts, --max-tokens (see 'headscope analyze --help')"
expect 2 "a value to a flag" -- "$HS" attn "$G" --quiet=1 --text hi -o "$T/u.npy"
one_line_error "a value to a flag"; stderr_has "a value to a flag" "option '--quiet' takes no value"
expect 2 "misspelt common option" -- "$HS" tokenize "$G" --thread 2 --text hi
stderr_has "misspelt common option" "did you mean '--threads'?"
for c in attn dump tokenize info convert merge; do
    expect 2 "$c: unknown option" -- "$HS" $c "$G" --bogus-option
    one_line_error "$c: unknown option"; stderr_has "$c: unknown option" "(see 'headscope $c --help')"
    expect 2 "$c: missing value" -- "$HS" $c "$G" -o
    one_line_error "$c: missing value"
done
[ ! -e "$T/u" ] && [ ! -e "$T/u.npy" ] && ok || bad "a usage error left output behind"
# --threads and --weight-memory before the command, as after it
"$HS" tokenize "$G" --text "Hello world" --json >"$T/tk0" || bad "tokenize"
expect 0 "--threads before the command" -- "$HS" --threads 2 tokenize "$G" --text "Hello world" --json
cmp -s "$T/out" "$T/tk0" && ok || bad "--threads before the command: $(cat "$T/out")"
expect 0 "--threads= and --weight-memory before the command" -- "$HS" --threads=1 --weight-memory all tokenize "$G" --text "Hello world" --json
cmp -s "$T/out" "$T/tk0" && ok || bad "--threads= before the command: $(cat "$T/out")"
expect 2 "--threads before the command, no value" -- "$HS" --threads
one_line_error "--threads before the command, no value"
expect 2 "--threads 0 before the command" -- "$HS" --threads 0 info "$G"
one_line_error "--threads 0 before the command"
# --file - drops one trailing newline (\n or \r\n), as echo adds it; a second one is text
for nl in '\n' '\r\n'; do
    expect 0 "--file - with a trailing newline" -- bash -c "printf 'Hello world$nl' | '$HS' tokenize '$G' --file - --json"
    cmp -s "$T/out" "$T/tk0" && ok || bad "--file - kept its trailing newline: $(cat "$T/out")"
done
expect 0 "--file - with two newlines" -- bash -c "printf 'Hello world\n\n' | '$HS' tokenize '$G' --file - --json"
grep -q '"ids":\[15496,995,198\]' "$T/out" && ok || bad "--file - dropped more than one newline: $(cat "$T/out")"
# a text past the context says its length: "hello" then " hello" x 199 is 200 GPT-2 tokens
# (31373, then 23748 each), past tiny-gpt2's 128
printf 'hello%.0s' x >"$T/long200.txt"; for i in $(seq 199); do printf ' hello'; done >>"$T/long200.txt"
expect 1 "a text past the context" -- "$HS" attn "$G" --file "$T/long200.txt" -o "$T/u.npy"
one_line_error "a text past the context"
stderr_has "a text past the context" "the text is 200 tokens, more than the model's context of 128; pass --truncate to keep the first 128"
# convert: OUT is a file
mkdir -p "$T/cvdir"
expect 1 "convert into a folder" -- "$HS" convert "$G" -o "$T/cvdir"
one_line_error "convert into a folder"; stderr_has "convert into a folder" "is a folder: -o OUT names the file to write"
[ -z "$(ls -A "$T/cvdir")" ] && ok || bad "convert into a folder wrote $(ls -A "$T/cvdir")"

# ---- a single text's progress: every phase, JSON lines or a terminal's line ----------------
expect 0 "analyze --progress=json" -- "$HS" analyze "$G" --text "the cat sat on the mat. the cat sat" -o "$T/pj" -q --progress=json
"$PY" - "$T/err" "$T/pj/report.json" <<'PYEOF' && ok || bad "analyze --progress=json: $(head -c 600 "$T/err")"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
r = json.load(open(sys.argv[2]))
L, H = r["model"]["n_layer"], r["model"]["n_head"]
assert ev[-1]["event"] == "done" and set(ev[-1]) == {"event", "elapsed_s"}, ev[-1]
ph = ev[:-1]
for e in ph:
    assert e["event"] == "phase" and set(e) == {"event", "phase", "done", "total", "elapsed_s", "eta_s"}, e
    assert 0 <= e["done"] <= e["total"] or e["total"] == 0, e
    assert (e["eta_s"] is None) == (e["total"] == 0 or e["done"] == 0), e
names = []
for e in ph:
    if not names or names[-1] != e["phase"]:
        names.append(e["phase"])
for want in ("loading the model", "tokenizing", "forward", "probe", "pairwise", "composition",
             "gradient", "ablation", "probe ablation", "pruning", "pictures", "the page and report.json"):
    assert want in names, (want, names)
assert len(names) == len(set(names)), names  # each phase once, in one run
count = lambda p: [e["done"] for e in ph if e["phase"] == p and e["total"]]
assert count("forward") == list(range(1, L + 1)), count("forward")
assert count("ablation") == list(range(1, L * H + 1)), count("ablation")
assert count("probe ablation") == list(range(1, L * H + 1)), count("probe ablation")
assert count("composition") == list(range(1, L + L * (L - 1) // 2 + 2)), count("composition")
steps = [e for e in ph if e["phase"] == "pruning" and e["total"]]
d = [e["done"] for e in steps]
assert steps and d == sorted(set(d)) and d[0] >= 1 and d[-1] <= steps[-1]["total"], steps
assert all(e["eta_s"] == 0 for e in ph if e["total"] and e["done"] == e["total"])
t = [e["elapsed_s"] for e in ev]
assert t == sorted(t), t
PYEOF
expect 0 "analyze, stderr not a terminal" -- "$HS" analyze "$G" --text "the cat sat on the mat" -o "$T/pn"
[ ! -s "$T/err" ] && ok || bad "progress on a stderr that is not a terminal: $(head -c 300 "$T/err")"
# on_pty FILE COMMAND...: runs COMMAND on a pseudo-terminal, what it wrote kept in FILE; its
# exit status
on_pty() {
    "$PY" - "$@" <<'PYEOF'
import os, pty, select, sys
out, argv = sys.argv[1], sys.argv[2:]
pid, fd = pty.fork()
if pid == 0:
    os.execvp(argv[0], argv)
buf = b""
while True:
    r, _, _ = select.select([fd], [], [], 120)
    if not r:
        break
    try:
        d = os.read(fd, 65536)
    except OSError:
        break
    if not d:
        break
    buf += d
_, st = os.waitpid(pid, 0)
open(out, "wb").write(buf)
sys.exit(os.WEXITSTATUS(st) if os.WIFEXITED(st) else 1)
PYEOF
}
# on a pseudo-terminal (HEADSCOPE_TEST_PHASE_SHOW=now: every report drawn, not only after a
# second): a line per phase rewritten in place, each ended before the summary
on_pty "$T/pt.out" env HEADSCOPE_TEST_PHASE_SHOW=now "$HS" analyze "$G" --text "the cat sat on the mat. the cat sat" -o "$T/pt" && ok || bad "analyze on a terminal"
"$PY" - "$T/pt.out" "$G" <<'PYEOF' && ok || bad "analyze on a terminal: progress"
import sys
s, model = open(sys.argv[1], "rb").read().decode("utf-8", "replace"), sys.argv[2]
for want in ("\rheadscope: analyze: loading the model, 0:0", "\rheadscope: analyze: forward 2/2",
             "\rheadscope: analyze: ablation 1/8, ETA ", "\rheadscope: analyze: ablation 8/8",
             "\rheadscope: analyze: probe ablation 8/8", "\rheadscope: analyze: pruning 1/",
             "\rheadscope: analyze: composition, 0:0"):
    assert want in s, (want, s[:2000])
summary = s.index(model + ": gpt2, 2 layers x 4 heads")
assert s[summary - 2:summary] == "\r\n" and "\r" not in s[summary:].replace("\r\n", ""), s[summary - 200:summary + 100]
PYEOF

# a corpus run counts its texts first: done/total and an ETA from the first text on (shard 2/2
# of the first 5 lines: texts 1 and 3, counted from 0, so 2), null for a corpus on stdin
CPL=fixtures/corpus/licenses.txt
expect 0 "corpus progress with a total" -- "$HS" analyze "$G" --corpus "$CPL" --max-texts 5 --shard 2/2 -o "$T/cpt" -q --progress=json
"$PY" - "$T/err" <<'PYEOF' && ok || bad "corpus --progress=json total: $(head -c 600 "$T/err")"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
assert [(e["event"], e["texts_done"], e["texts_total"]) for e in ev] == [("progress", 1, 2), ("progress", 2, 2), ("done", 2, 2)], ev
assert ev[0]["eta_s"] is not None and ev[0]["eta_s"] >= 0 and ev[-1]["eta_s"] == 0, ev
PYEOF
expect 0 "corpus progress from stdin" -- bash -c "head -n 3 '$CPL' | '$HS' analyze '$G' --corpus - -o '$T/cps' -q --progress=json"
"$PY" -c 'import json,sys; ev=[json.loads(l) for l in open(sys.argv[1])]; sys.exit(0 if len(ev) == 4 and all(e["texts_total"] is None for e in ev) else 1)' "$T/err" && ok || bad "corpus on stdin: $(cat "$T/err")"
# on a terminal: one line rewritten in place, done/total, the rate and the ETA
on_pty "$T/cptt.out" "$HS" analyze "$G" --corpus "$CPL" --max-texts 3 -o "$T/cptt" && ok || bad "corpus on a terminal"
"$PY" - "$T/cptt.out" <<'PYEOF' && ok || bad "corpus progress on a terminal: $(head -c 600 "$T/cptt.out")"
import re, sys
s = open(sys.argv[1], "rb").read().decode("utf-8", "replace")
assert re.search(r"\rheadscope: analyze: 1/3 texts, \d+ tokens/s, ETA \d+:\d\d", s), s[:1000]
assert re.search(r"\rheadscope: analyze: 3/3 texts, \d+ tokens/s, ETA 0:00 *\r\n", s), s[:1000]
PYEOF

echo "cli: $pass passed, $fail failed"
[ "$fail" = 0 ]
