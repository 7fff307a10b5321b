#!/usr/bin/env bash
# The command line under faults and hostile input (issue 41's matrix, part of `make
# cli-test`): signals and file size limits in the middle of a write, a closed or full
# standard output, FIFOs where files should be, integers past every option's range, tensors
# stored twice, non-finite activations, oversized partial.json declarations, control
# characters in names. Each case asserts the exit status and the one-line message, that no
# temporary file is left, and that a victim folder beside the outputs keeps its bytes.
set -u
HS=${HEADSCOPE:-build/headscope}
PY=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d /tmp/hs-faults-XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/cli_util.sh"

G=fixtures/tiny-gpt2
TG=fixtures/trained-gpt2
CP=fixtures/corpus/licenses.txt

# The victim: files beside every output, whose bytes no case may change
V="$T/victim"
mkdir -p "$V/sub" && echo notes >"$V/notes.txt" && printf 'a,b\n1,2\n' >"$V/data.csv" && echo x >"$V/sub/x"
victim() { (cd "$V" && find . | LC_ALL=C sort && find . -type f | LC_ALL=C sort | xargs sha256sum); }
victim >"$T/victim.sum"
# clean DESCRIPTION DIR: no temporary file ('*.tmp-*', a staging folder) under DIR, and the
# victim as it was
clean() {
    local left
    left=$(find "$2" \( -name '*.tmp-*' -o -name '.headscope-run-*' \) 2>/dev/null | head -3)
    if [ -z "$left" ]; then ok; else bad "$1: left $left"; fi
    victim | cmp -s - "$T/victim.sum" && ok || bad "$1: the victim folder changed"
}

yes "the quick brown fox jumps over the lazy dog" | head -c 20000 >"$T/long.txt"
for i in 1 2; do
    "$HS" analyze "$TG" --corpus "$CP" --max-texts 4 --shard $i/2 -o "$T/sh$i" -q || bad "shard $i"
done

# ---- signals: every writer removes its temporary files -------------------------------------
# HEADSCOPE_TEST_SIGNAL_TMP=SIG raises SIG as the first temporary file is made (as a signal
# from outside would come while it is written); the process ends by that signal (run by
# sh -c, whose report of it goes to the unread stderr)
W="$T/w"
# (--default-signal: a run under nohup would otherwise inherit SIGHUP ignored, and a program
# rightly leaves an ignored signal ignored)
sig_env() { local sig=$1; shift; sh -c '"$@"' _ env --default-signal HEADSCOPE_TEST_SIGNAL_TMP="$sig" "$@"; }
for sig in 1 2 13 15; do
    mkdir -p "$W"
    expect $((128 + sig)) "attn, signal $sig" -- sig_env $sig "$HS" attn "$TG" --file "$T/long.txt" --truncate -o "$W/a.npy"
    clean "attn, signal $sig" "$W"
    [ ! -e "$W/a.npy" ] && ok || bad "attn, signal $sig: a.npy written"
    expect $((128 + sig)) "convert, signal $sig" -- sig_env $sig "$HS" convert "$TG" -o "$W/m.gguf"
    clean "convert, signal $sig" "$W"
    expect $((128 + sig)) "merge, signal $sig" -- sig_env $sig "$HS" merge "$T/sh1" "$T/sh2" -o "$W/mg" -q
    clean "merge, signal $sig" "$W"
    expect $((128 + sig)) "corpus, signal $sig" -- sig_env $sig "$HS" analyze "$TG" --corpus "$CP" --max-texts 4 -o "$W/c" -q
    clean "corpus, signal $sig" "$W"
    rm -rf "$W"
done
# a checkpoint's texts stay for --resume; the signal after it removes only what is being written
mkdir -p "$W"
expect 1 "corpus stopped after a checkpoint" -- env HEADSCOPE_TEST_STOP_AFTER=3 "$HS" analyze "$TG" --corpus "$CP" --max-texts 6 --checkpoint-every 2 -o "$W/c" -q
expect 143 "resume, signal 15" -- sig_env 15 "$HS" analyze "$TG" --corpus "$CP" --max-texts 6 --checkpoint-every 2 -o "$W/c" -q --resume
expect 0 "resume after the signal" -- "$HS" analyze "$TG" --corpus "$CP" --max-texts 6 --checkpoint-every 2 -o "$W/c" -q --resume
[ "$(wc -l <"$W/c/texts.jsonl")" = 6 ] && ok || bad "resumed run: $(wc -l <"$W/c/texts.jsonl") texts"
clean "resume after a signal" "$W"
rm -rf "$W"

# ---- Ctrl-C in a corpus run: what is kept, said in one line; a rerun over the checkpoint -----
# HEADSCOPE_TEST_SIGNAL_AFTER=K raises SIGINT after the K-th text (and its checkpoint, when
# one is due); 8 texts, a checkpoint every 2: K = 1 before the first, 2 right at one, 5
# between two. Each resumed run equals the uninterrupted one (texts.jsonl byte for byte,
# partial.json and report.json apart from the generator and the times), no temporary
# file is left, and a rerun without --resume or --restart is refused.
cargs=(--corpus "$CP" --max-texts 8 --checkpoint-every 2)
"$HS" analyze "$G" "${cargs[@]}" -o "$T/cref" -q || bad "the uninterrupted corpus run"
# same_run DESCRIPTION DIR: DIR holds the uninterrupted run's outputs and no temporary file
same_run() {
    cmp -s "$T/cref/texts.jsonl" "$2/texts.jsonl" && ok || bad "$1: texts.jsonl differs"
    "$PY" - "$T/cref" "$2" <<'PYEOF' && ok || bad "$1: partial.json or report.json differs"
import json, sys
def load(d, f):
    r = json.load(open(d + "/" + f))
    for k in ("generator", "timing"):
        r.pop(k, None)
    r.get("source", {}).pop("seconds", None)
    r.pop("seconds", None)
    return json.dumps(r, sort_keys=True)
a, b = sys.argv[1:3]
sys.exit(0 if all(load(a, f) == load(b, f) for f in ("partial.json", "report.json")) else 1)
PYEOF
    [ -z "$(ls -A "$2" | grep -v -x -e texts.jsonl -e partial.json -e report.json -e index.html)" ] && ok || bad "$1: left $(ls -A "$2")"
}
# kept_only DESCRIPTION DIR: DIR holds the checkpoint (partial.json and the one temporary
# texts.jsonl it names) and nothing else
kept_only() {
    local named
    named=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["checkpoint"]["texts_tmp"])' "$2/partial.json" 2>/dev/null)
    [ -n "$named" ] && [ "$(ls -A "$2" | LC_ALL=C sort | tr '\n' ' ')" = "$(printf '%s\n' partial.json "$named" | LC_ALL=C sort | tr '\n' ' ')" ] && ok || bad "$1: the checkpoint is not all that is left: $(ls -A "$2") (partial.json names '$named')"
}
C="$T/ci"
for k in 1 2 5; do
    rm -rf "$C"
    expect 130 "corpus, SIGINT after text $k" -- env HEADSCOPE_TEST_SIGNAL_AFTER=$k "$HS" analyze "$G" "${cargs[@]}" -o "$C" -q
    one_line_error "corpus, SIGINT after text $k"
    if [ $k = 1 ]; then
        stderr_has "SIGINT before a checkpoint" "interrupted before the first checkpoint (after 2 texts): nothing is kept"
        [ ! -e "$C" ] && ok || bad "SIGINT before a checkpoint: the folder the run made is left: $(ls -A "$C")"
        continue
    fi
    kept=$((k / 2 * 2))
    stderr_has "corpus, SIGINT after text $k" "interrupted; the checkpoint in '$C' keeps $kept of 8 texts (partial.json, texts.jsonl.tmp-"
    stderr_has "corpus, SIGINT after text $k" "run the same command with --resume to go on, or with --restart to start again"
    kept_only "corpus, SIGINT after text $k" "$C"
    cp "$C/partial.json" "$T/cp.json"
    expect 1 "a rerun over the checkpoint (SIGINT after $k)" -- "$HS" analyze "$G" "${cargs[@]}" -o "$C" -q
    one_line_error "a rerun over the checkpoint"
    stderr_has "a rerun over the checkpoint" "'$C' holds an unfinished run's checkpoint ($kept texts of '$CP' analysed): add --resume to go on from it, or --restart to discard it"
    cmp -s "$C/partial.json" "$T/cp.json" && ok || bad "a refused rerun changed the checkpoint"
    kept_only "a refused rerun" "$C"
    if [ $k = 2 ]; then # the resumed run interrupted in turn, after its first text (no new checkpoint)
        expect 130 "a resumed run, SIGINT" -- env HEADSCOPE_TEST_SIGNAL_AFTER=1 "$HS" analyze "$G" "${cargs[@]}" -o "$C" -q --resume
        stderr_has "a resumed run, SIGINT" "keeps 2 of 8 texts"
        kept_only "a resumed run, SIGINT" "$C"
    fi
    expect 0 "resume after SIGINT after text $k" -- "$HS" analyze "$G" "${cargs[@]}" -o "$C" -q --resume
    same_run "resume after SIGINT after text $k" "$C"
done
# --restart: the run from the start over a checkpoint, whose temporary file goes too
rm -rf "$C"
expect 130 "SIGINT before a restart" -- env HEADSCOPE_TEST_SIGNAL_AFTER=3 "$HS" analyze "$G" "${cargs[@]}" -o "$C" -q
expect 0 "--restart over a checkpoint" -- "$HS" analyze "$G" "${cargs[@]}" -o "$C" -q --restart
same_run "--restart over a checkpoint" "$C"
expect 2 "--resume with --restart" -- "$HS" analyze "$G" "${cargs[@]}" -o "$C" -q --resume --restart
one_line_error "--resume with --restart"
# the folder -o made, with its parents, goes again when nothing is kept
expect 130 "SIGINT in new parents" -- env HEADSCOPE_TEST_SIGNAL_AFTER=1 "$HS" analyze "$G" "${cargs[@]}" -o "$T/np/a/b" -q
[ ! -e "$T/np" ] && ok || bad "SIGINT before a checkpoint left the parents -o made: $(find "$T/np")"
clean "corpus interrupts" "$T"

# ---- the file size limit (SIGXFSZ): the write fails, the command says so and cleans up ------
mkdir -p "$W"
limited() { (ulimit -f 64 && "$@"); } # 64 KiB
expect 1 "attn past the file size limit" -- limited "$HS" attn "$TG" --file "$T/long.txt" --truncate -o "$W/a.npy"
one_line_error "attn past the file size limit"
stderr_has "attn past the file size limit" "file too large"
clean "attn past the file size limit" "$W"
expect 1 "convert past the file size limit" -- limited "$HS" convert "$TG" -o "$W/m.gguf"
one_line_error "convert past the file size limit"
stderr_has "convert past the file size limit" "file too large"
clean "convert past the file size limit" "$W"
for c in merge corpus analyze dump; do
    case $c in
    merge) set -- merge "$T/sh1" "$T/sh2" -q ;;
    corpus) set -- analyze "$TG" --corpus "$CP" --max-texts 4 -q ;;
    analyze) set -- analyze "$TG" --file "$T/long.txt" --truncate --no-ablation -q ;;
    dump) set -- dump "$TG" --text "$(head -c 400 "$T/long.txt")" --what all ;;
    esac
    expect 1 "$c past the file size limit" -- limited "$HS" "$@" -o "$W/$c"
    one_line_error "$c past the file size limit"
    stderr_has "$c past the file size limit" "file too large"
    clean "$c past the file size limit" "$W"
    [ ! -e "$W/$c" ] && ok || bad "$c past the file size limit left its new folder: $(ls -A "$W/$c")"
done
rm -rf "$W"

# ---- a closed or full standard output after the run is in place: one line that says so -----
# closed_stdout COMMAND...: runs it with a pipe whose reading end is already closed
closed_stdout() { "$PY" -c 'import os, subprocess, sys
r, w = os.pipe(); os.close(r)
sys.exit(subprocess.call(sys.argv[1:], stdout=w))' "$@"; }
mkdir -p "$W"
for how in closed full; do
    for c in "analyze --json" "analyze" "dump --what q"; do
        d="$W/$how-${c%% *}-${c##* }"
        if [ $how = closed ]; then
            expect 1 "$c into a $how stdout" -- closed_stdout "$HS" $c "$TG" --text "hello there" -o "$d"
        else
            expect 1 "$c into a $how stdout" -- bash -c '"$@" >/dev/full' _ "$HS" $c "$TG" --text "hello there" -o "$d"
        fi
        one_line_error "$c into a $how stdout"
        stderr_has "$c into a $how stdout" "the run is complete in '$d'"
        if [ "${c%% *}" = dump ]; then f=manifest.json; else f=report.json; fi
        [ -s "$d/$f" ] && ok || bad "$c into a $how stdout: no complete run in the folder"
        clean "$c into a $how stdout" "$W"
    done
    # merge (staged like analyze): the shards of the signals section above
    d="$W/$how-merge"
    if [ $how = closed ]; then
        expect 1 "merge into a $how stdout" -- closed_stdout "$HS" merge "$T/sh1" "$T/sh2" -o "$d"
    else
        expect 1 "merge into a $how stdout" -- bash -c '"$@" >/dev/full' _ "$HS" merge "$T/sh1" "$T/sh2" -o "$d"
    fi
    one_line_error "merge into a $how stdout"
    stderr_has "merge into a $how stdout" "the run is complete in '$d'"
    [ -s "$d/report.json" ] && ok || bad "merge into a $how stdout: no complete merge in the folder"
    clean "merge into a $how stdout" "$W"
done
rm -rf "$W"

# ---- integers: checked whole against each option's range before any narrowing -------------
# (--layers and the analysis options' table: tests/test_options.c on main)
mkdir -p "$W"
for v in 4294967296 9223372036854775808 99999999999999999999 -4294967295 " 7" +7 7x ""; do
    for opt in --max-tokens-in-images --max-tokens; do
        expect 2 "analyze $opt '$v'" -- "$HS" analyze "$G" --text "hello there" "$opt" "$v" -o "$W/i"
        stderr_has "analyze $opt '$v'" "$opt '$v' is not a number"
    done
    for opt in --max-texts --sample --seed --checkpoint-every; do
        expect 2 "corpus $opt '$v'" -- "$HS" analyze "$G" --corpus "$CP" "$opt" "$v" -o "$W/i"
        stderr_has "corpus $opt '$v'" "$opt '$v' is "
    done
    case $v in " 7" | +7) ;; *) # strtol's own leniency there: a leading space or '+'
        for sh in "$v/2" "1/$v"; do
            expect 2 "--shard '$sh'" -- "$HS" analyze "$G" --corpus "$CP" --shard "$sh" -o "$W/i"
            stderr_has "--shard '$sh'" "is not I/N"
        done ;;
    esac
    expect 2 "tokenize --max-tokens '$v'" -- "$HS" tokenize "$G" --text hi --max-tokens "$v"
    stderr_has "tokenize --max-tokens '$v'" "needs a whole number >= 1, not '$v'"
    expect 2 "--threads '$v'" -- "$HS" tokenize "$G" --text hi --threads "$v"
    stderr_has "--threads '$v'" "is not a number in [1, 4096]"
    [ ! -e "$W/i" ] && ok || bad "a refused option left a folder"
done
# merge: a shard's texts.jsonl with a line number past a long is refused, not undefined
cp -r "$T/sh1" "$W/p1" && cp -r "$T/sh2" "$W/p2"
sed -i '1s/"line":[0-9]*/"line":99999999999999999999/' "$W/p1/texts.jsonl"
expect 1 "merge, a line number past a long" -- "$HS" merge "$W/p1" "$W/p2" -o "$W/m" -q
one_line_error "merge, a line number past a long"
stderr_has "merge, a line number past a long" "line 1 is not a texts.jsonl line"
clean "merge, a line number past a long" "$W"
# merge: texts out of corpus order in a shard, a source line in two shards, a NUL byte in a
# line are refused (they were merged out of order or written cut)
rm -rf "$W/p1" && cp -r "$T/sh1" "$W/p1"
tac "$T/sh1/texts.jsonl" >"$W/p1/texts.jsonl"
expect 1 "merge, a shard's texts out of order" -- "$HS" merge "$W/p1" "$W/p2" -o "$W/m" -q
one_line_error "merge, a shard's texts out of order"
stderr_has "merge, a shard's texts out of order" "line 2 is of source line 1, not after the line before's 3"
cp "$T/sh1/texts.jsonl" "$W/p2/texts.jsonl"
expect 1 "merge, a source line in two shards" -- "$HS" merge "$T/sh1" "$W/p2" -o "$W/m" -q
one_line_error "merge, a source line in two shards"
stderr_has "merge, a source line in two shards" "source line 1 is in both"
cp "$T/sh1/texts.jsonl" "$W/p1/texts.jsonl" && cp "$T/sh2/texts.jsonl" "$W/p2/texts.jsonl"
sed -i '1s/"line":1,/"line":1,"\x00":0,/' "$W/p1/texts.jsonl"
expect 1 "merge, a NUL byte in a line" -- "$HS" merge "$W/p1" "$W/p2" -o "$W/m" -q
one_line_error "merge, a NUL byte in a line"
stderr_has "merge, a NUL byte in a line" "line 1 is not a texts.jsonl line"
[ ! -e "$W/m" ] && ok || bad "a refused merge left its folder"
clean "merge, refused texts" "$W"
rm -rf "$W"

# ---- a tensor stored in two safetensors shards: refused, naming it and both shards ---------
# tiny Llama's second shard given, besides its own, a copy of a tensor of the first: one the
# index maps to the first shard, and one (the other case) the index does not name at all
LL=fixtures/family-models/tiny-llama
for which in mapped unmapped; do
    D="$T/dup-$which"
    mkdir -p "$D" && cp "$LL"/* "$D"/
    "$PY" - "$D" "$which" <<'PYEOF' || bad "building the two-shard tensor ($which)"
import json, struct, sys
d, which = sys.argv[1], sys.argv[2]
def read(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]
h1, d1 = read(d + "/model-00001-of-00002.safetensors")
h2, d2 = read(d + "/model-00002-of-00002.safetensors")
name = "model.layers.0.self_attn.k_proj.weight"
e = dict(h1[name])
a, b = e["data_offsets"]
e["data_offsets"] = [len(d2), len(d2) + b - a]
h2[name] = e
d2 += d1[a:b]
if which == "unmapped":  # the index forgets it: only the shards hold it
    p = d + "/model.safetensors.index.json"
    idx = json.load(open(p))
    del idx["weight_map"][name]
    json.dump(idx, open(p, "w"))
hj = json.dumps(h2).encode()
hj += b" " * (-len(hj) % 8)
open(d + "/model-00002-of-00002.safetensors", "wb").write(struct.pack("<Q", len(hj)) + hj + d2)
PYEOF
    for c in info attn; do
        if [ $c = info ]; then set -- info "$D"; else set -- attn "$D" --text hello -o "$T/dup.npy"; fi
        expect 1 "$c, a tensor in two shards ($which)" -- "$HS" "$@"
        one_line_error "$c, a tensor in two shards ($which)"
        stderr_has "$c, a tensor in two shards ($which)" "tensor 'model.layers.0.self_attn.k_proj.weight' is in two shards ('model-00001-of-00002.safetensors' and 'model-00002-of-00002.safetensors')"
        [ ! -e "$T/dup.npy" ] && ok || bad "$c, a tensor in two shards ($which): output written"
    done
done
clean "a tensor in two shards" "$T"

# ---- FIFOs and devices where files are read: refused by name at once, never waited on ------
# (each run under timeout: a hang fails the case with status 124)
mkdir -p "$W/cf" "$W/sp"
printf 'hello world\n' >"$W/cf/a.txt"
for kind in fifo device folder; do
    case $kind in
    fifo) mkfifo "$W/cf/b.txt" ;;
    device) ln -s /dev/zero "$W/cf/b.txt" ;;
    folder) mkdir "$W/cf/b.txt" ;;
    esac
    expect 1 "corpus folder with a $kind entry" -- timeout 20 "$HS" analyze "$G" --corpus "$W/cf" -o "$W/o" -q
    one_line_error "corpus folder with a $kind entry"
    stderr_has "corpus folder with a $kind entry" "'$W/cf/b.txt' is not a regular file"
    [ ! -e "$W/o" ] && ok || bad "corpus folder with a $kind entry left its folder"
    rm -rf "$W/cf/b.txt"
done
for f in texts.jsonl partial.json; do
    for kind in fifo device; do
        rm -rf "$W/sp" && cp -r "$T/sh1" "$W/sp" && rm "$W/sp/$f"
        if [ $kind = fifo ]; then mkfifo "$W/sp/$f"; else ln -s /dev/zero "$W/sp/$f"; fi
        expect 1 "merge, a shard's $f a $kind" -- timeout 20 "$HS" merge "$W/sp" "$T/sh2" -o "$W/m" -q
        one_line_error "merge, a shard's $f a $kind"
        stderr_has "merge, a shard's $f a $kind" "'$W/sp/$f' is not a regular file"
        [ ! -e "$W/m" ] && ok || bad "merge, a shard's $f a $kind left its folder"
    done
done
clean "FIFOs and devices" "$W"
rm -rf "$W"

# ---- control characters from paths and GGUF names never reach stdout raw --------------------
# in a human-readable summary they are escaped as on stderr (\x1b, \x07, \n); --json output
# JSON-escapes them instead
# raw_controls DESCRIPTION: stdout of the last expect has no C0 control byte or DEL but
# newlines and tabs
raw_controls() {
    if LC_ALL=C grep -q "[$(printf '\001-\010\013-\037\177')]" <(tr -d '\n\t' <"$T/out"); then
        bad "$1: a raw control character on stdout: $(head -c 300 "$T/out" | cat -v)"
    else ok; fi
}
ESC=$(printf '\033')
BEL=$(printf '\007')
N="x${ESC}[1m${BEL}y"
C="$T/ctl/$N"
mkdir -p "$C" && cp -r "$G" "$C/model"
expect 0 "info, a control character in the path" -- "$HS" info "$C/model"
raw_controls "info, a control character in the path"
grep -qF 'x\x1b[1m\x07y' "$T/out" && ok || bad "info: the path not escaped: $(cat -v "$T/out" | head -3)"
expect 0 "analyze summary" -- "$HS" analyze "$C/model" --text "hello there" -o "$C/out" --no-ablation --no-images
raw_controls "analyze summary"
grep -qF "wrote $T/ctl/x\x1b[1m\x07y/out/report.json" "$T/out" && ok || bad "analyze: wrote line not escaped: $(cat -v "$T/out" | tail -2)"
expect 0 "analyze --json" -- "$HS" analyze "$C/model" --text "hello there" -o "$C/out" --no-ablation --no-images --json
raw_controls "analyze --json"
"$PY" -c 'import json, sys; r = json.load(open(sys.argv[1])); assert "\x1b[1m\x07" in r["model"]["path"], r["model"]["path"]' "$T/out" && ok || bad "analyze --json: the path not JSON-escaped as itself"
expect 0 "attn wrote line" -- "$HS" attn "$C/model" --text "hello there" -o "$C/a.npy"
raw_controls "attn wrote line"
expect 0 "convert wrote line" -- "$HS" convert "$C/model" -o "$C/m.gguf"
raw_controls "convert wrote line"
expect 0 "dump wrote line" -- "$HS" dump "$C/model" --text "hello there" --what q -o "$C/d"
raw_controls "dump wrote line"
printf 'one text here\nanother text here\n' >"$C/corpus.txt"
for i in 1 2; do
    expect 0 "corpus shard summary" -- "$HS" analyze "$C/model" --corpus "$C/corpus.txt" --shard $i/2 -o "$C/s$i"
    raw_controls "corpus shard summary"
done
expect 0 "merge summary" -- "$HS" merge "$C/s1" "$C/s2" -o "$C/mg"
raw_controls "merge summary"
grep -qF 'x\x1b[1m\x07y/corpus.txt: 2 shards' "$T/out" && ok || bad "merge: the corpus path not escaped: $(cat -v "$T/out" | head -2)"
# a GGUF tensor name holding ESC [1m and BEL (the tied output copy, which the loader leaves)
"$PY" - "$C/m.gguf" <<'PYEOF' || bad "patching a GGUF tensor name"
import struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
old = struct.pack("<Q", 13) + b"output.weight"
i = b.find(old)
assert i > 0
b[i:i + len(old)] = struct.pack("<Q", 13) + b"out\x1b[1m\x07.wgts"
open(p, "wb").write(b)
PYEOF
expect 0 "info, a GGUF tensor name with control characters" -- "$HS" info "$C/m.gguf"
raw_controls "info, a GGUF tensor name with control characters"
grep -qF 'out\x1b[1m\x07.wgts' "$T/out" && ok || bad "info: the tensor name not escaped: $(grep wgts "$T/out" | cat -v)"
rm -rf "$T/ctl"

# ---- non-finite values named before LAPACK: embeddings near 1e36 ----------------------------
# tiny GPT-2 in float32 with wte x 1e36: the copying scores' W_U W_E overflows float; the
# composition says so in one line (it said "the eigenvalue solver failed (info -4)", after
# LAPACK's own lines on stderr)
mkdir -p "$T/big" && cp "$G"/*.json "$G"/*.txt "$T/big"/
"$PY" - "$G/model.safetensors" "$T/big/model.safetensors" <<'PYEOF' || bad "writing the 1e36 model"
import json, struct, sys
import numpy as np
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n]); data = b[8 + n:]
hdr, out, off = {}, [], 0
for k, v in h.items():
    if k == "__metadata__":
        continue
    a, z = v["data_offsets"]
    x = np.frombuffer(data[a:z], dtype={"F16": np.float16, "F32": np.float32}[v["dtype"]]).astype(np.float32)
    if k == "wte.weight":
        x = x * np.float32(1e36)
    raw = x.tobytes()
    hdr[k] = {"dtype": "F32", "shape": v["shape"], "data_offsets": [off, off + len(raw)]}
    out.append(raw)
    off += len(raw)
hj = json.dumps(hdr).encode()
hj += b" " * (-len(hj) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(hj)) + hj + b"".join(out))
PYEOF
expect 1 "composition of embeddings near 1e36" -- "$HS" analyze "$T/big" --text "hello there world again" -o "$T/big-out" -q --no-ablation
one_line_error "composition of embeddings near 1e36"
stderr_has "composition of embeddings near 1e36" "composition: the token circuit diag(ln_f) W_U W_E of the copying scores is not finite"
[ ! -s "$T/out" ] && ok || bad "composition of embeddings near 1e36: LAPACK spoke: $(head -2 "$T/out")"
[ ! -e "$T/big-out" ] && ok || bad "composition of embeddings near 1e36 left its folder"
clean "composition of embeddings near 1e36" "$T"

# ---- merge: oversized declarations refused before they cost memory -------------------------
# shard 1's partial.json (trained-gpt2: 16 heads) given a sim_sum of n x n, or a head_index
# of n heads; at n and 4n (2 MB to 30 MB files) the peak RSS may grow by the file's growth
# (its pages are scanned), not by a parse tree of ~64 bytes a number
mkdir -p "$W"
"$PY" - "$HS" "$T/sh1" "$T/sh2" "$W" <<'PYEOF' && ok || bad "merge of oversized partials"
import json, os, resource, shutil, subprocess, sys
hs, sh1, sh2, w = sys.argv[1:]
def peak(kind, n):
    d = os.path.join(w, f"{kind}{n}")
    shutil.copytree(sh1, d)
    p = json.load(open(os.path.join(d, "partial.json")))
    a = p["aggregate"]
    if kind == "sim":
        a["sim_sum"] = [[1.5] * n for _ in range(n)]
    else:
        a["options"]["head_index"] = list(range(n))
    text = json.dumps(p)
    open(os.path.join(d, "partial.json"), "w").write(text)
    code = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True);"
            "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, r.stderr.decode().strip())")
    out = subprocess.run([sys.executable, "-c", code, hs, "merge", d, sh2, "-o", os.path.join(w, "m"), "-q"],
                         capture_output=True, text=True).stdout.split(" ", 2)
    rc, kb, err = int(out[0]), int(out[1]), out[2].strip()
    assert rc == 1 and "\n" not in err and "JSON values, more than a partial of the model it names holds" in err, (rc, err)
    assert not os.path.exists(os.path.join(w, "m")), "merge left its folder"
    return kb * 1024, len(text)
for kind, n in (("sim", 300), ("heads", 200000)):
    r1, f1 = peak(kind, n)
    r4, f4 = peak(kind, 2 * n if kind == "sim" else 4 * n)
    assert r4 - r1 <= 1.5 * (f4 - f1) + (4 << 20), (kind, r1, r4, f1, f4)
    print(f"{kind}: files {f1 >> 10} -> {f4 >> 10} KiB, peak RSS {r1 >> 20} -> {r4 >> 20} MiB", file=sys.stderr)
PYEOF
clean "merge of oversized partials" "$W"
rm -rf "$W"

echo "cli_faults.sh: $pass passed, $fail failed"
[ "$fail" = 0 ]
