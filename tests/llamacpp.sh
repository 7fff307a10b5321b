#!/usr/bin/env bash
# Interoperability with llama.cpp itself: converts the shared trained models with
# `headscope convert` (f32, f16, bf16, q8_0), loads every file with llama.cpp's own tools and
# compares what they compute with headscope on the same file:
#   - token ids: llama-tokenize against `headscope tokenize`, on texts with specials,
#     accents, emoji, spacing and an empty text (and on llama.cpp's vocabulary-only
#     models/ggml-vocab-{gpt-2,bert-bge}.gguf when LLAMACPP_MODELS is set);
#   - GPT-2: the mean next-token loss of llama-perplexity over the first 256 tokens of
#     fixtures/corpus/licenses.txt (within 1e-4 nats at f32); llama-simple, llama-cli and
#     llama-eval-callback load and run every file;
#   - BERT: llama-embedding's final hidden states (no pooling, no normalisation) against
#     headscope's (cosine >= 0.99999 for every token at f32);
#   - RoBERTa (fixtures/family-models/tiny-roberta with the tokenizer files of
#     fixtures/encoder-golden/tokenizers, converted as llama.cpp's RobertaModel writes it):
#     llama-embedding's hidden states against headscope's on llama-tokenize's ids;
#   - the rotary decoders (fixtures/family-models/tiny-{pythia,llama,llama3,qwen2} converted
#     to f32, f16 and q8_0): llama-tokenize's ids of the golden text are those of
#     fixtures/family-golden/ (the Rust tokenizers library's) and so are headscope's on the
#     written file, and llama-embedding's final hidden states are within a bound of the
#     float64 goldens; llama-quantize's Q4_0 / Q4_K / Q6_K files (fixtures/gguf/families),
#     the Q8_0 one and ggml's quantizer's files of every other block format headscope reads:
#     llama-embedding against headscope on the same file; with LLAMACPP_MODELS,
#     llama.cpp's own tokenizer test on its ggml-vocab-llama-spm.gguf
#     (LLAMACPP_FAMILIES_ONLY=1 runs this part alone);
#   - the multi-query families (fixtures/mqa-models/tiny-{falcon-mq,falcon-nd,bigcode,
#     bigcode-mha} with fixtures/gguf/arch/bpe128.tokenizer.json, converted to f32 and f16 as
#     llama.cpp's falcon and starcoder) and latent attention (fixtures/mla-models/
#     tiny-deepseek-{lite,moe,v3} with tiny-deepseek-lite's tokenizer, as deepseek2):
#     llama-tokenize's ids against headscope's, and llama-embedding's final hidden states
#     against headscope's on the same file (LLAMACPP_MQA_ONLY=1 runs this part alone);
#   - T5 (fixtures/t5/models/t5-tiny, and t5-v1_1-tiny with relative_attention_max_distance
#     128, llama.cpp's, converted to f32 and f16 as llama.cpp's t5): llama-tokenize's ids
#     against headscope's (less the </s> headscope appends: llama-tokenize adds none), and the
#     encoder's output: the file's encoder rewritten as llama.cpp's t5encoder
#     (tests/llamacpp.py t5-encoder, with llama.cpp's gguf-py from LLAMACPP_GGUF_PY, default
#     LLAMACPP/../../gguf-py), run by llama-embedding --attention non-causal (it refuses an
#     encoder-decoder, and runs an encoder-only file causally unless told), against
#     hs_forward_encdec's encoder output (LLAMACPP_T5_ONLY=1 runs this part alone);
#   - issue 39's tokenizer files (fixtures/gguf/tokdefects): llama-tokenize's ids against
#     headscope's (RoBERTa's add_bos_token / add_eos_token, equal SentencePiece scores, a BOS id
#     beyond the vocabulary).
#
#   LLAMACPP=/path/to/llama.cpp/build/bin [LLAMACPP_MODELS=/path/to/llama.cpp/models] \
#       bash tests/llamacpp.sh          # or: make llamacpp-test LLAMACPP=...
#
# Nothing here comes from llama.cpp; it only runs llama.cpp's programs. Without LLAMACPP (or
# without ../shared/models) the script says why and exits 0: `make test` does not run it.
# The last run's output is recorded in docs/gguf.md.
set -u
HS=${HEADSCOPE:-build/headscope}
PY=${PYTHON:-/usr/bin/python3}
SHARED=${SHARED_MODELS:-../shared/models}
L=${LLAMACPP:-}

if [ -z "$L" ]; then
    echo "llamacpp: skipped: set LLAMACPP to the folder holding llama.cpp's llama-tokenize, llama-perplexity, llama-embedding, llama-simple and llama-eval-callback"
    exit 0
fi
# The block formats (no models needed): ggml.h from LLAMACPP_INCLUDE (default: the source
# tree's ggml/include, two folders above build/bin), libggml-base from LLAMACPP.
INC=${LLAMACPP_INCLUDE:-$L/../../ggml/include}
if [ -f "$INC/ggml.h" ] && [ -f "$L/libggml-base.so" ]; then
    QT=$(mktemp -d /tmp/hs-llamacpp-quant-XXXXXX)
    # shellcheck disable=SC2046
    ${CC:-cc} -std=c11 -O1 -Iinclude -Isrc -I"$INC" tests/llamacpp_quant.c "$(dirname "$HS")/libheadscope.a" \
        -L"$L" -lggml-base -Wl,-rpath,"$L" -L/usr/lib/$(${CC:-cc} -print-multiarch)/openblas-openmp \
        $(pkg-config --libs libpng libcjson libutf8proc) -lopenblas -fopenmp -lm -o "$QT/q" 2>"$QT/err" ||
        { echo "llamacpp: cannot build tests/llamacpp_quant.c: $(head -3 "$QT/err")"; exit 1; }
    "$QT/q" || { echo "llamacpp: block formats differ from llama.cpp's"; rm -rf "$QT"; exit 1; }
    rm -rf "$QT"
else
    echo "llamacpp: block formats not compared: no ggml.h in $INC (set LLAMACPP_INCLUDE) or no $L/libggml-base.so"
fi
for t in llama-tokenize llama-perplexity llama-embedding llama-simple llama-eval-callback; do
    if [ ! -x "$L/$t" ]; then
        echo "llamacpp: skipped: $L/$t is missing (build it: cmake --build BUILD --target $t)"
        exit 0
    fi
done
for m in trained-gpt2 trained-bert; do
    if [ ! -d "$SHARED/$m" ]; then
        echo "llamacpp: skipped: $SHARED/$m is absent (development checkout only)"
        exit 0
    fi
done

TH=2
T=$(mktemp -d /tmp/hs-llamacpp-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
# run DESCRIPTION -- command...: exit status 0 expected; output kept in $T/run.log
run() {
    local desc=$1
    shift 2
    if "$@" >"$T/run.log" 2>&1; then ok; else bad "$desc: exit $?: $(grep -iE 'error|fail|abort' "$T/run.log" | head -3)"; fi
}

# ---- the rotary decoders: files headscope writes, run by llama.cpp ------------------------
# llama-embedding's hidden states (after the final norm) against the float64 reference the
# Hugging Face folder's goldens hold. Bounds: f32 4e-5 (the gguf-py files measured 4e-6; NeoX
# 2e-3: ggml's GELU is the tanh form, read from an F16 table), f16 2e-2, q8_0 0.5 (llama.cpp
# also rounds activations to Q8 blocks in these products; d = 64 is tiny).
families() {
    local m g ty f text tol cos
    FTEXT="The capital of France is Paris. The capital of Germany is Berlin. The capital of Italy is Rome."
    for mg in tiny-pythia:tiny_pythia tiny-llama:tiny_llama tiny-llama3:tiny_llama3 tiny-qwen2:tiny_qwen2; do
        m=${mg%%:*}
        g=fixtures/family-golden/${mg##*:}_text
        for ty in f32 f16 q8_0; do
            f=$T/$m-$ty.gguf
            run "convert $m $ty" -- "$HS" convert "fixtures/family-models/$m" -o "$f" --type "$ty"
            "$L/llama-tokenize" -m "$f" -p "$FTEXT" --ids --log-disable >"$T/fids.txt" 2>/dev/null || { bad "$m-$ty: llama-tokenize failed"; continue; }
            "$HS" tokenize "$f" --text "$FTEXT" --json >"$T/h.json" 2>"$T/h.err" || { bad "$m-$ty: headscope tokenize: $(cat "$T/h.err")"; continue; }
            if "$PY" tests/llamacpp.py ids "$T/h.json" "$T/fids.txt" >"$T/ids.log"; then ok; else bad "$m-$ty ids: $(cat "$T/ids.log")"; fi
            if ! "$L/llama-embedding" -m "$f" -p "$FTEXT" --pooling none --embd-normalize -1 \
                --embd-output-format json -c 128 -b 128 -ub 128 -ctk f32 -ctv f32 -t $TH --no-warmup \
                >"$T/emb.json" 2>"$T/emb.err"; then
                bad "$m-$ty llama-embedding failed: $(grep -iE 'error|assert' "$T/emb.err" | head -3)"
                continue
            fi
            tol=4e-5 cos=0.99999
            [ "$m" = tiny-pythia ] && tol=4e-3
            case $ty in f16) tol=2e-2 cos=0.9999 ;; q8_0) tol=0.5 cos=0.99 ;; esac
            if "$PY" tests/llamacpp.py golden "$g.ids.npy" "$g.hidden.npy" "$T/fids.txt" "$T/emb.json" $tol $cos >"$T/emb.log"; then ok; else bad "$m-$ty: beyond $tol / $cos"; fi
            echo "$m-$ty: $(cat "$T/emb.log")"
        done
    done
}
# llama-quantize's files of a llama (fixtures/gguf/families/tiny-llama-wide.*), and ggml's
# quantizer's files of issue 39 (tiny-llama-wide.mixed: IQ4_XS, Q4_1, Q5_0, Q5_1, IQ4_NL,
# Q3_K, Q2_K, Q5_K; tiny-qwen2.q4_k_m_fallback: Q5_0, Q5_1, Q8_0): llama.cpp's hidden states
# against headscope's on the same file (both decode the same blocks; llama.cpp also
# quantises activations to Q8 blocks, hence the bound).
quantized() {
    local f text="The capital of France is Paris. The capital of Germany is Berlin."
    for f in fixtures/gguf/families/tiny-llama-wide.q4_0.gguf fixtures/gguf/families/tiny-llama-wide.q4_k.gguf \
        fixtures/gguf/families/tiny-llama-wide.q6_k.gguf fixtures/gguf/families/tiny-llama.q8_0.gguf \
        fixtures/gguf/families/tiny-llama-wide.mixed.gguf fixtures/gguf/families/tiny-qwen2.q4_k_m_fallback.gguf; do
        if ! "$L/llama-embedding" -m "$f" -p "$text" --pooling none --embd-normalize -1 \
            --embd-output-format json -c 128 -b 128 -ub 128 -ctk f32 -ctv f32 -t $TH --no-warmup \
            >"$T/emb.json" 2>"$T/emb.err"; then
            bad "$(basename "$f") llama-embedding failed: $(grep -iE 'error|assert' "$T/emb.err" | head -3)"
            continue
        fi
        if "$PY" tests/llamacpp.py embed "$f" "$text" "$T/emb.json" 0.99 >"$T/emb.log"; then ok; else bad "$(basename "$f"): cosine below 0.99"; fi
        echo "$(basename "$f" .gguf) (headscope vs llama.cpp on the file): $(cat "$T/emb.log")"
    done
}
# llama.cpp's own tokenizer test on its vocabulary-only Llama 2 file (SentencePiece scores:
# headscope's merges come from them)
spm_vocab() {
    local v=${LLAMACPP_MODELS:-}/ggml-vocab-llama-spm.gguf
    if [ -z "${LLAMACPP_MODELS:-}" ] || [ ! -f "$v.inp" ]; then
        echo "llamacpp: ggml-vocab-llama-spm.gguf not tried: set LLAMACPP_MODELS to llama.cpp's models/ folder"
        return
    fi
    if "$PY" tests/llamacpp.py vocab-cases "$HS" "$v" "$v.inp" "$v.out" >"$T/voc.log"; then ok; else bad "llama-spm vocabulary: $(cat "$T/voc.log")"; fi
    echo "ggml-vocab-llama-spm: $(tail -1 "$T/voc.log")"
}
# emb_vs_ids FILE TEXT IDS CTX COS NAME: llama-embedding's final hidden states of TEXT against
# headscope's on llama-tokenize's ids (IDS), cosine >= COS for every token; 1 when llama.cpp
# fails (the summary in $T/emb.log). The text goes twice, as two prompts, and the first is
# compared: llama.cpp of 2026 may lose the tail of its output at exit (tests/llamacpp.py's
# read_embeddings). A context under 256 is raised to it: that llama.cpp asserts
# (n_outputs_max) on -c 128 with every token's output; the texts are far shorter.
emb_vs_ids() {
    local c=$4
    [ "$c" -lt 256 ] && c=256
    if ! "$L/llama-embedding" -m "$1" -p "$2"$'\n'"$2" --pooling none --embd-normalize -1 \
        --embd-output-format json -c "$c" -b "$c" -ub "$c" -ctk f32 -ctv f32 -t $TH --no-warmup \
        >"$T/emb.json" 2>"$T/emb.err"; then
        bad "$6 llama-embedding failed: $(grep -iE 'error|assert' "$T/emb.err" | head -3)"
        return 1
    fi
    if "$PY" tests/llamacpp.py embed-ids "$1" "$3" "$T/emb.json" "$5" >"$T/emb.log"; then ok; else bad "$6: cosine below $5"; fi
}
# ---- the multi-query families: falcon (7B's one norm, 40B's two and grouped K/V heads) and
# starcoder (one K/V head, and a multi-head c_attn written with its head_count_kv); latent
# attention: deepseek2 (V2-Lite with YaRN, V2's softmax experts, V3's sigmoid router) -----
# Bounds: f32 cosine 0.9999 for Falcon (its GELU is the exact erf form, ggml's the tanh one
# from an F16 table), 0.99999 for StarCoder and DeepSeek's dense layers; f16 0.999. Routing
# rules differ where llama.cpp departs from transformers (docs/gguf.md): a group of experts
# scored by its best two also under softmax (tiny-deepseek-moe: 0.99), the other groups'
# biased scores masked to -inf rather than 0 (tiny-deepseek-v3, whose random correction bias
# makes many kept scores negative: 0.7, a misread file gives about 0).
mqa() {
    local m ty f cos c tok text="the cat sat on the mat. the dog sat on the cat. then the cat ran."
    for m in tiny-falcon-mq tiny-falcon-nd tiny-bigcode tiny-bigcode-mha tiny-deepseek-lite \
        tiny-deepseek-moe tiny-deepseek-v3; do
        case $m in
        tiny-deepseek*) mkdir -p "$T/$m" && cp fixtures/mla-models/$m/* "$T/$m/" &&
            cp fixtures/mla-models/tiny-deepseek-lite/tokenizer.json "$T/$m/tokenizer.json" ;;
        *) mkdir -p "$T/$m" && cp fixtures/mqa-models/$m/* "$T/$m/" &&
            cp fixtures/gguf/arch/bpe128.tokenizer.json "$T/$m/tokenizer.json" ;;
        esac
        c=$(grep -oE '"(n_positions|max_position_embeddings)": [0-9]+' "$T/$m/config.json" | grep -oE '[0-9]+$')
        for ty in f32 f16; do
            f=$T/$m-$ty.gguf
            cos=0.99999
            case $m in tiny-falcon*) cos=0.9999 ;; esac
            [ "$ty" = f16 ] && cos=0.999
            case $m in tiny-deepseek-moe) cos=0.99 ;; tiny-deepseek-v3) cos=0.7 ;; esac
            run "convert $m $ty" -- "$HS" convert "$T/$m" -o "$f" --type "$ty"
            "$L/llama-tokenize" -m "$f" -p "$text" --ids --log-disable >"$T/mids.txt" 2>/dev/null || { bad "$m-$ty: llama-tokenize failed"; continue; }
            "$HS" tokenize "$f" --text "$text" --json >"$T/h.json" 2>"$T/h.err" || { bad "$m-$ty: headscope tokenize: $(cat "$T/h.err")"; continue; }
            if "$PY" tests/llamacpp.py ids "$T/h.json" "$T/mids.txt" >"$T/ids.log"; then ok; else bad "$m-$ty ids: $(cat "$T/ids.log")"; fi
            emb_vs_ids "$f" "$text" "$T/mids.txt" "$c" "$cos" "$m-$ty" || continue
            echo "$m-$ty (headscope vs llama.cpp on the file): $(cat "$T/emb.log")"
        done
    done
}
# The released Falcon, StarCoder and DeepSeek tokenizers (their cuts to 2,000 merges,
# fixtures/tokenizer/real/<name>.small.tokenizer.json) in tiny checkpoints sized to them
# (Falcon-7B's layout, GPT-BigCode's, Llama's for DeepSeek's, as test_tokenizer_real does),
# converted: tokenizer.ggml.pre falcon, starcoder, deepseek-coder, deepseek-llm, deepseek-v3;
# llama-tokenize's ids on the written file against headscope's (LLAMACPP_PRETOK_ONLY=1 runs
# this part alone).
pretok() {
    local spec name maker text f n=0
    local texts=("Hello world, the cat sat on the mat." "In 1999, 12,345.678 people paid \$1,000,000!!"
        "Ünïcödé résumé naïve café — 日本語のテキスト 東京 서울 🙂 x^2"
        "  two  spaces, a	tab and
a newline  " "def f(x):
    return x**2  # 100%
" "unaffable GPT-2's tokenizer doesn't split \"quotes\" (or brackets)... ok?")
    for spec in "falcon:families_mqa.py --seed 1 --arch tiny-falcon-mq" \
        "starcoder:families_mqa.py --seed 1 --arch tiny-bigcode" \
        "deepseek_coder:make_family_checkpoint.py --arch tiny-llama" \
        "deepseek_llm:make_family_checkpoint.py --arch tiny-llama" \
        "deepseek_v3:make_family_checkpoint.py --arch tiny-llama"; do
        name=${spec%%:*} maker=${spec#*:}
        f=$T/pre-$name.gguf
        # shellcheck disable=SC2086
        "$PY" fixtures/ref/$maker --out "$T/pre-$name" \
            --tokenizer "fixtures/tokenizer/real/$name.small.tokenizer.json" >/dev/null || { bad "$name: checkpoint"; continue; }
        run "convert pre-$name" -- "$HS" convert "$T/pre-$name" -o "$f"
        for text in "${texts[@]}"; do
            ids_case "$f" "$text" "$name"
            n=$((n + 1))
        done
        # and llama.cpp's own test texts (models/ggml-vocab-*.gguf.inp, the empty one left out:
        # llama-tokenize refuses an empty prompt)
        local inp=${LLAMACPP_MODELS:-/nonexistent}/ggml-vocab-deepseek-llm.gguf.inp k
        [ -f "$inp" ] || continue
        rm -rf "$T/inp" && mkdir "$T/inp" && "$PY" -c "
import sys
texts = open(sys.argv[1], 'rb').read().split(b'\n__ggml_vocab_test__\n')[:-1]
for k, t in enumerate(texts):
    if t:
        open('%s/%03d.txt' % (sys.argv[2], k), 'wb').write(t)" "$inp" "$T/inp"
        for k in "$T"/inp/*.txt; do
            ids_case "$f" "$(cat "$k"; printf x)" "$name" # a trailing x keeps the text's newlines
            n=$((n + 1))
        done
    done
    echo "pre-tokenizers: $n texts x files compared with llama-tokenize"
}
# ids_case FILE TEXT NAME: llama-tokenize and headscope tokenize give the same ids
ids_case() {
    "$L/llama-tokenize" -m "$1" -p "$2" --ids --log-disable >"$T/l.txt" 2>/dev/null || { bad "$3: llama-tokenize failed"; return; }
    "$HS" tokenize "$1" --text "$2" --json >"$T/h.json" 2>"$T/h.err" || { bad "$3: headscope tokenize: $(cat "$T/h.err")"; return; }
    if "$PY" tests/llamacpp.py ids "$T/h.json" "$T/l.txt" >"$T/ids.log"; then ok; else bad "$3 ids differ on '$2': $(cat "$T/ids.log")"; fi
}
if [ "${LLAMACPP_PRETOK_ONLY:-0}" = 1 ]; then
    pretok
    echo "llamacpp: $pass passed, $fail failed"
    [ "$fail" = 0 ]
    exit
fi
# ---- T5: llama.cpp's t5 (ids) and t5encoder (the encoder's output) ------------------------
# Bounds: f32 cosine 0.99999, f16 0.999.
t5() {
    local m ty f e cos text dir gp=${LLAMACPP_GGUF_PY:-$L/../../gguf-py}
    export HEADSCOPE_LIB=${HEADSCOPE_LIB:-$(dirname "$HS")/libheadscope.so.3}
    local texts=("the cat sat on the mat. the dog sat on the cat. then the cat ran."
        "  Two  spaces,	a tab and
a newline; Ünïcödé ﬁ ① café 日本 </s> <pad> end  ")
    mkdir -p "$T/t5-v11-128" && cp fixtures/t5/models/t5-v1_1-tiny/* "$T/t5-v11-128/" &&
        sed -i 's/"relative_attention_max_distance": 64/"relative_attention_max_distance": 128/' "$T/t5-v11-128/config.json"
    for m in t5-tiny t5-v11-128; do
        dir=fixtures/t5/models/$m
        [ "$m" = t5-v11-128 ] && dir=$T/$m
        for ty in f32 f16; do
            f=$T/$m-$ty.gguf e=$T/$m-$ty-enc.gguf
            cos=0.99999
            [ "$ty" = f16 ] && cos=0.999
            run "convert $m $ty" -- "$HS" convert "$dir" -o "$f" --type "$ty"
            for text in "${texts[@]}"; do
                "$L/llama-tokenize" -m "$f" -p "$text" --ids --log-disable >"$T/tids.txt" 2>/dev/null || { bad "$m-$ty: llama-tokenize failed"; continue; }
                "$HS" tokenize "$f" --text "$text" --json >"$T/h.json" 2>"$T/h.err" || { bad "$m-$ty: headscope tokenize: $(cat "$T/h.err")"; continue; }
                if "$PY" tests/llamacpp.py t5-ids "$T/h.json" "$T/tids.txt" >"$T/ids.log"; then ok; else bad "$m-$ty ids: $(cat "$T/ids.log")"; fi
            done
            run "t5encoder $m $ty" -- "$PY" tests/llamacpp.py t5-encoder "$gp" "$f" "$e"
            text=${texts[0]}
            if ! "$L/llama-embedding" -m "$e" -p "$text"$'\n'"$text" --attention non-causal --pooling none \
                --embd-normalize -1 --embd-output-format json -c 256 -b 256 -ub 256 -t $TH --no-warmup \
                >"$T/emb.json" 2>"$T/emb.err"; then
                bad "$m-$ty llama-embedding failed: $(grep -iE 'error|assert' "$T/emb.err" | head -3)"
                continue
            fi
            if "$PY" tests/llamacpp.py t5-enc-embed "$f" "$text" "$T/emb.json" "$cos" >"$T/emb.log"; then ok; else bad "$m-$ty: cosine below $cos"; fi
            echo "$m-$ty (headscope vs llama.cpp's t5encoder): $(cat "$T/emb.log")"
        done
    done
}
if [ "${LLAMACPP_T5_ONLY:-0}" = 1 ]; then
    t5
    echo "llamacpp: $pass passed, $fail failed"
    [ "$fail" = 0 ]
    exit
fi
if [ "${LLAMACPP_MQA_ONLY:-0}" = 1 ]; then
    mqa
    echo "llamacpp: $pass passed, $fail failed"
    [ "$fail" = 0 ]
    exit
fi
if [ "${LLAMACPP_FAMILIES_ONLY:-0}" = 1 ]; then
    spm_vocab
    quantized
    families
    echo "llamacpp: $pass passed, $fail failed"
    [ "$fail" = 0 ]
    exit
fi

TYPES="f32 f16 bf16 q8_0"
echo "llama.cpp: $("$L/llama-embedding" --version 2>&1 | grep -m1 version)"
echo "headscope: $("$HS" --version 2>&1 | head -1)"

# ---- convert ----------------------------------------------------------------------------
for ty in $TYPES; do
    run "convert gpt2 $ty" -- "$HS" convert "$SHARED/trained-gpt2" -o "$T/gpt2-$ty.gguf" --type "$ty"
    run "convert bert $ty" -- "$HS" convert "$SHARED/trained-bert" -o "$T/bert-$ty.gguf" --type "$ty"
done

# ---- token ids ----------------------------------------------------------------------------
TEXTS=("Hello world, the cat sat on the mat."
    "The capital of France is [MASK]. [CLS] [unused0] [mask]"
    "hello <|endoftext|> world <|endoftext|>"
    "Ünïcödé résumé naïve café — 日本語のテキスト 🙂 \$x^2\$ 12,345.67"
    "  two  spaces, a	tab and
a newline  "
    "unaffable GPT-2's tokenizer doesn't split \"quotes\" (or brackets)!"
    "")
n_ids=0
for f in "$T"/gpt2-*.gguf "$T"/bert-*.gguf; do
    for text in "${TEXTS[@]}"; do
        ids_case "$f" "$text" "$(basename "$f")"
        n_ids=$((n_ids + 1))
    done
done
# the 256 tokens the loss below is taken over
"$L/llama-tokenize" -m "$T/gpt2-f32.gguf" -f fixtures/corpus/licenses.txt --ids --log-disable 2>/dev/null \
    | tail -1 | "$PY" -c "import sys, json; print(json.dumps(json.loads(sys.stdin.read())[:256]))" >"$T/l.txt"
"$HS" tokenize "$T/gpt2-f32.gguf" --file fixtures/corpus/licenses.txt --max-tokens 256 --json >"$T/h.json"
if "$PY" tests/llamacpp.py ids "$T/h.json" "$T/l.txt" >"$T/ids.log"; then ok; else bad "licenses.txt ids differ: $(head -c 400 "$T/ids.log")"; fi
n_ids=$((n_ids + 1))
if [ -n "${LLAMACPP_MODELS:-}" ]; then
    for v in gpt-2 bert-bge; do
        f="$LLAMACPP_MODELS/ggml-vocab-$v.gguf"
        if [ ! -f "$f" ]; then bad "$f is missing"; continue; fi
        run "info $(basename "$f")" -- "$HS" info "$f"
        for text in "${TEXTS[@]}"; do
            ids_case "$f" "$text" "$(basename "$f")"
            n_ids=$((n_ids + 1))
        done
    done
else
    echo "llamacpp: vocabulary-only files not tried: set LLAMACPP_MODELS to llama.cpp's models/ folder"
fi
echo "token ids: $n_ids texts x files compared with llama-tokenize"

# ---- GPT-2: every file loads and runs; the loss -------------------------------------------
# llama-perplexity's strided mode scores positions n_ctx - stride - 1 .. n_ctx - 2 of one
# chunk, and sets n_ctx to -c + stride/2: -c 129 --ppl-stride 255 makes one 256-token chunk
# (the model's whole context) with every next token scored, as headscope's loss does. The
# KV cache is F32 (-ctk/-ctv f32): llama.cpp's default F16 cache alone moves the loss by
# ~1e-4 (printed below as "f16 cache"). Beyond f32, llama.cpp also rounds the activations
# (to F16, BF16 or Q8_0 blocks) in its matrix products, hence the wider bounds.
# ppl FILE [CACHE]: the perplexity llama-perplexity prints, or nothing
ppl() {
    "$L/llama-perplexity" -m "$1" -f fixtures/corpus/licenses.txt -c 129 -b 129 --ppl-stride 255 \
        --chunks 1 -t $TH -ctk "${2:-f32}" -ctv "${2:-f32}" >"$T/ppl.log" 2>&1
    grep -o '\[1\][0-9.]*,' "$T/ppl.log" | tr -d '[1],' | head -1
}
for ty in $TYPES; do
    f=$T/gpt2-$ty.gguf
    name=gpt2-$ty
    run "$name llama-simple" -- "$L/llama-simple" -m "$f" -n 8 "The Linux kernel"
    run "$name llama-eval-callback" -- "$L/llama-eval-callback" -m "$f" -p "The cat sat" -n 1 -t $TH
    if [ -x "$L/llama-cli" ]; then
        run "$name llama-cli" -- "$L/llama-cli" -m "$f" -p "The cat" -n 4 -no-cnv -t $TH </dev/null
    fi
    p=$(ppl "$f")
    if [ -z "$p" ]; then
        bad "$name llama-perplexity printed no perplexity: $(grep -iE 'error|need' "$T/ppl.log" | head -3)"
        continue
    fi
    tol=1e-4
    case $ty in f16) tol=1e-3 ;; bf16) tol=1e-2 ;; q8_0) tol=2e-2 ;; esac
    if "$PY" tests/llamacpp.py loss "$f" fixtures/corpus/licenses.txt 256 "$p" $tol >"$T/loss.log"; then ok; else bad "$name loss beyond $tol"; fi
    echo "$name: $(cat "$T/loss.log")"
    if [ "$ty" = f32 ]; then
        p=$(ppl "$f" f16)
        "$PY" tests/llamacpp.py loss "$f" fixtures/corpus/licenses.txt 256 "$p" 1 >"$T/loss.log"
        echo "$name, f16 cache: $(cat "$T/loss.log")"
    fi
done
# without the tied head's copy: headscope reads it; llama.cpp only from March 2025 on
"$HS" convert "$SHARED/trained-gpt2" -o "$T/nocopy.gguf" --no-output-copy >/dev/null || bad "convert --no-output-copy"
if "$L/llama-simple" -m "$T/nocopy.gguf" -n 4 "The" >"$T/run.log" 2>&1; then
    echo "gpt2 --no-output-copy: loads in this llama.cpp"
else
    echo "gpt2 --no-output-copy: refused by this llama.cpp: $(grep -o "missing tensor '[^']*'" "$T/run.log" | head -1)"
fi

# ---- BERT: every file loads; the final hidden states ---------------------------------------
# The residual at f32 is llama.cpp's GELU: BERT's is the exact erf form, ggml's the tanh
# approximation (read from an F16 table); the other types add rounded activations.
BTEXTS=("The capital of France is [MASK]."
    "Permission is hereby granted, free of charge, to any person obtaining a copy of this software, to deal in the Software without restriction.")
for ty in $TYPES; do
    f=$T/bert-$ty.gguf
    name=bert-$ty
    cos=0.99999
    case $ty in f16) cos=0.9999 ;; bf16) cos=0.99 ;; q8_0) cos=0.95 ;; esac
    k=0
    for text in "${BTEXTS[@]}"; do
        k=$((k + 1))
        if ! "$L/llama-embedding" -m "$f" -p "$text" --pooling none --embd-normalize -1 \
            --embd-output-format json -c 256 -b 256 -ub 256 -ctk f32 -ctv f32 -t $TH --no-warmup \
            >"$T/emb.json" 2>"$T/emb.err"; then
            bad "$name llama-embedding failed: $(grep -iE 'error|assert' "$T/emb.err" | head -3)"
            continue
        fi
        if "$PY" tests/llamacpp.py embed "$f" "$text" "$T/emb.json" $cos >"$T/emb.log"; then ok; else bad "$name text $k: cosine below $cos"; fi
        echo "$name text $k: $(cat "$T/emb.log")"
    done
done

# ---- RoBERTa (filed as bert, with a gpt2 tokenizer and the position table chopped) --------
mkdir -p "$T/tiny-roberta" && cp fixtures/family-models/tiny-roberta/* fixtures/encoder-golden/tokenizers/roberta/* "$T/tiny-roberta/"
RTEXT="the cat sat on the mat, the capital of france is paris"
for ty in f32 f16; do
    f=$T/roberta-$ty.gguf
    cos=0.99999
    [ "$ty" = f16 ] && cos=0.999
    run "convert roberta $ty" -- "$HS" convert "$T/tiny-roberta" -o "$f" --type "$ty"
    "$L/llama-tokenize" -m "$f" -p "$RTEXT" --ids --log-disable >"$T/rids.txt" 2>/dev/null || { bad "roberta-$ty: llama-tokenize failed"; continue; }
    emb_vs_ids "$f" "$RTEXT" "$T/rids.txt" 128 "$cos" "roberta-$ty" || continue
    echo "roberta-$ty: $(cat "$T/emb.log")"
done

# issue 39's tokenizer cases (fixtures/gguf/tokdefects, checked without llama.cpp by
# tests/test_gguf_tokdefects.c): llama-tokenize's ids against headscope's on a RoBERTa file as
# llama.cpp's converter writes it and as headscope writes it (<s> ... </s> from add_bos_token /
# add_eos_token), a Llama vocabulary with equal scores, and a BOS id beyond the vocabulary
# (llama.cpp warns and keeps its default, headscope too)
for f in fixtures/gguf/tokdefects/roberta.gguf "$T/roberta-f32.gguf" \
    fixtures/gguf/tokdefects/llama-equal-scores.gguf fixtures/gguf/tokdefects/llama-bos-beyond.gguf; do
    for text in "${TEXTS[@]}" "Hello" "$RTEXT"; do
        ids_case "$f" "$text" "$(basename "$f")"
    done
done

families
quantized
spm_vocab
mqa
t5
pretok

echo "llamacpp: $pass passed, $fail failed"
[ "$fail" = 0 ]
