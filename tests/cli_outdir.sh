#!/usr/bin/env bash
# The output folder's guarantees (docs/analyze.md#the-output-folder), end to end, with hostile
# folders: nothing of the user's is removed or written, inside OUTDIR or outside it (a victim
# folder's SHA-256 digests, link counts and listing are compared before and after every
# case); one writer at a time in a folder; checkpoints that disagree are refused; a commit
# replaces only the earlier run's own outputs; a killed run's staging folder is removed by
# the next run. Run by `make test` after tests/cli.sh (HEADSCOPE points at the binary).
set -u
HS=${HEADSCOPE:-build/headscope}
PY=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d /tmp/hs-outdir-XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/cli_util.sh"

G=fixtures/tiny-gpt2
CP=fixtures/corpus/licenses.txt
TXT="the cat sat on the mat and the cat sat on the mat"
A=(-q --no-ablation --no-rollout --no-composition)   # a quick single-text run

# The victim: files outside every OUTDIR that hostile folders point at.
V="$T/victim"
mkdir -p "$V" && printf 'a\nb\nc\n%.0s' $(seq 4000) >"$V/big.txt" && echo secret >"$V/notes.txt"
victim_state() { (cd "$V" && find . | LC_ALL=C sort && find . -type f | LC_ALL=C sort | xargs sha256sum && stat -c '%n %h %s' ./*); }
victim_state >"$T/victim.ref"
victim_same() {
    if victim_state | cmp -s - "$T/victim.ref"; then ok; else bad "$1: the victim folder changed: $(victim_state | diff - "$T/victim.ref" | head -4)"; fi
}
# user_files DIR: the user's files in DIR (notes.txt, data.csv) with their digests
user_files() { (cd "$1" && sha256sum notes.txt data.csv 2>&1); }

# ---- 1. a report.json headscope did not write lists the user's files -----------------------
for cmd in analyze corpus merge; do
    O="$T/planted-$cmd"
    mkdir -p "$O/heads" && echo mine >"$O/notes.txt" && echo 1,2 >"$O/data.csv" && echo mine >"$O/heads/mine.png"
    printf '{"files": ["notes.txt", "data.csv", "heads/mine.png", "../victim/notes.txt", "%s/big.txt", "heads/../notes.txt", "heads/L0_H0.png/../../data.csv"]}\n' "$V" >"$O/report.json"
    user_files "$O" >"$T/user.ref"
    case $cmd in
    analyze) expect 0 "analyze over a planted report" -- "$HS" analyze "$G" --text "$TXT" -o "$O" "${A[@]}" ;;
    corpus) expect 0 "corpus over a planted report" -- "$HS" analyze "$G" --corpus "$CP" --max-texts 2 -o "$O" -q ;;
    merge)
        [ -d "$T/c4" ] || "$HS" analyze "$G" --corpus "$CP" --max-texts 4 -o "$T/c4" -q
        expect 0 "merge over a planted report" -- "$HS" merge "$T/c4" -o "$O" -q ;;
    esac
    user_files "$O" | cmp -s - "$T/user.ref" && [ -f "$O/heads/mine.png" ] && ok || bad "$cmd removed a file a planted report.json listed: $(ls -R "$O" | head -20)"
    grep -q '"schema"' "$O/report.json" && ok || bad "$cmd did not write its report"
    victim_same "$cmd over a planted report"
done

# ---- 2. --resume: the checkpoint's temporary texts.jsonl planted as a link to the victim -----
"$HS" analyze "$G" --corpus "$CP" --max-texts 8 -o "$T/c8" -q || bad "the reference corpus run"
checkpoint() { # checkpoint DIR: a run of 8 texts stopped after 5 (a checkpoint every 2, and at the stop)
    rm -rf "$1"
    HEADSCOPE_TEST_STOP_AFTER=5 "$HS" analyze "$G" --corpus "$CP" --max-texts 8 --checkpoint-every 2 -o "$1" -q 2>/dev/null
    ls "$1"/texts.jsonl.tmp-* >/dev/null 2>&1 || bad "no checkpoint in $1: $(ls "$1")"
}
resume() { "$HS" analyze "$G" --corpus "$CP" --max-texts 8 --checkpoint-every 2 -o "$1" --resume -q; }
R="$T/rs"
checkpoint "$R"
tmp=$(ls "$R"/texts.jsonl.tmp-*)
rm "$tmp" && ln "$V/big.txt" "$tmp"
expect 1 "resume through a hard link" -- resume "$R"
one_line_error "resume through a hard link"; stderr_has "resume through a hard link" "hard link"
rm "$tmp" && victim_same "resume through a hard link"
ln -s "$V/big.txt" "$tmp"
expect 1 "resume through a symbolic link" -- resume "$R"
one_line_error "resume through a symbolic link"
victim_same "resume through a symbolic link"
# a resume stopped again (a new checkpoint in a new file) and resumed: the uninterrupted
# run's texts.jsonl, and no temporary file left
checkpoint "$R"
first=$(ls "$R"/texts.jsonl.tmp-*)
HEADSCOPE_TEST_STOP_AFTER=1 expect 1 "a resumed run stopped again" -- resume "$R"
[ "$(ls "$R" | grep -c tmp)" = 1 ] && [ ! -e "$first" ] && ok || bad "a resumed run's checkpoint left the earlier temporary file: $(ls "$R")"
expect 0 "resume twice" -- resume "$R"
cmp -s "$T/c8/texts.jsonl" "$R/texts.jsonl" && [ -z "$(ls "$R" | grep tmp)" ] && ok || bad "resumed twice: texts.jsonl differs or a temporary file is left: $(ls "$R")"
# a resume that fails before its first checkpoint (the corpus changed) removes its new
# temporary file and leaves the checkpoint as it was, still resumable
head -n 40 "$CP" >"$T/corpus.txt"
"$HS" analyze "$G" --corpus "$T/corpus.txt" --max-texts 8 -o "$T/c8b" -q || bad "the reference run of the copy"
rm -rf "$R" && HEADSCOPE_TEST_STOP_AFTER=5 "$HS" analyze "$G" --corpus "$T/corpus.txt" --max-texts 8 --checkpoint-every 2 -o "$R" -q 2>/dev/null
(cd "$R" && ls -A && sha256sum ./*) >"$T/ck.ref"
cp "$T/corpus.txt" "$T/corpus.orig" && sed -i '1s/^/changed /' "$T/corpus.txt"
expect 1 "resume over a changed corpus" -- "$HS" analyze "$G" --corpus "$T/corpus.txt" --max-texts 8 --checkpoint-every 2 -o "$R" --resume -q
stderr_has "resume over a changed corpus" "has changed since the checkpoint"
(cd "$R" && ls -A && sha256sum ./*) | cmp -s - "$T/ck.ref" && ok || bad "a failed resume changed the checkpoint: $(ls -A "$R")"
mv "$T/corpus.orig" "$T/corpus.txt"
expect 0 "resume after a failed resume" -- "$HS" analyze "$G" --corpus "$T/corpus.txt" --max-texts 8 --checkpoint-every 2 -o "$R" --resume -q
cmp -s "$T/c8b/texts.jsonl" "$R/texts.jsonl" && [ -z "$(ls "$R" | grep tmp)" ] && ok || bad "resume after a failed resume: $(ls "$R")"

# ---- 3. checkpoints whose parts disagree --------------------------------------------------
# edit DIR PYTHON: changes the checkpoint's partial.json (c: its "checkpoint" object)
edit() { "$PY" -c "import json,sys; p=sys.argv[1]; j=json.load(open(p)); c=j['checkpoint']; $2; json.dump(j, open(p,'w'))" "$1/partial.json"; }
checkpoint "$R"
edit "$R" "c['texts_bytes'] = 0"
expect 1 "a checkpoint of 5 texts with an empty texts.jsonl" -- resume "$R"
one_line_error "empty texts.jsonl"; stderr_has "empty texts.jsonl" "holds 0 texts (0 bytes), its aggregate 5"
checkpoint "$R"
edit "$R" "c['texts_bytes'] -= 1"
expect 1 "a checkpoint ending inside a line" -- resume "$R"
one_line_error "ending inside a line"; stderr_has "ending inside a line" "inside a line"
checkpoint "$R"
edit "$R" "c['position'] = 3; j['source']['n_selected'] = 3"
expect 1 "a checkpoint before its texts" -- resume "$R"
one_line_error "position before its texts"; stderr_has "position before its texts" "its aggregate 5, at position 3"
checkpoint "$R"
edit "$R" "j['source']['n_selected'] = 7"
expect 1 "a checkpoint past its position" -- resume "$R"
one_line_error "past its position"; stderr_has "past its position" "its position is 5 records, its source's selected records 7"
checkpoint "$R"
edit "$R" "c['texts_bytes'] = 10**6"
expect 1 "a checkpoint longer than its texts" -- resume "$R"
one_line_error "longer than its texts"
[ ! -e "$R/report.json" ] && ls "$R"/texts.jsonl.tmp-* >/dev/null 2>&1 && ok || bad "a refused resume changed its checkpoint: $(ls "$R")"
victim_same "inconsistent checkpoints"

# ---- 4. one writer at a time: every command that writes a folder takes its lock -------------
L="$T/locked"
mkdir -p "$L"
"$PY" -c "import fcntl,os,sys,time; fd=os.open(sys.argv[1], os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_EX); open(sys.argv[2],'w').close(); time.sleep(60)" "$L" "$T/locked.ready" &
lock_pid=$!
for _ in $(seq 100); do [ -e "$T/locked.ready" ] && break; sleep 0.1; done
expect 1 "merge into a locked folder" -- "$HS" merge "$T/c4" -o "$L" -q
one_line_error "merge into a locked folder"; stderr_has "merge into a locked folder" "another headscope run"
expect 1 "corpus into a locked folder" -- "$HS" analyze "$G" --corpus "$CP" --max-texts 2 -o "$L" -q
one_line_error "corpus into a locked folder"; stderr_has "corpus into a locked folder" "another headscope run"
expect 1 "dump into a locked folder" -- "$HS" dump "$G" --text "$TXT" --what pattern -o "$L" -q
one_line_error "dump into a locked folder"
[ -z "$(ls -A "$L")" ] && ok || bad "a refused writer wrote into the locked folder: $(ls -A "$L")"
kill "$lock_pid" && wait "$lock_pid" 2>/dev/null
# merge while an analyze is writing there (held after writing its report, before its
# commit): merge is refused, and analyze, stopped, leaves the folder as it was
W="$T/writing"
mkdir -p "$W" && echo mine >"$W/notes.txt"
HEADSCOPE_TEST_HOLD_AT=report "$HS" analyze "$G" --text "$TXT" -o "$W" "${A[@]}" 2>/dev/null &
an_pid=$!
for _ in $(seq 300); do ls "$W"/.headscope-run-*/report.json >/dev/null 2>&1 && break; sleep 0.1; done
expect 1 "merge while analyze writes" -- "$HS" merge "$T/c4" -o "$W" -q
one_line_error "merge while analyze writes"; stderr_has "merge while analyze writes" "another headscope run"
kill -TERM "$an_pid"; wait "$an_pid"
[ "$(ls -A "$W")" = notes.txt ] && ok || bad "analyze and merge in one folder left: $(ls -A "$W")"
victim_same "locks"

# ---- 5. a commit replaces the earlier run's outputs, and only those ---------------------------
for cmd in merge corpus; do
    O="$T/replace-$cmd"
    "$HS" analyze "$G" --text "$TXT" -o "$O" "${A[@]}" || bad "single-text run"
    [ -f "$O/gallery.png" ] && [ -f "$O/heads/L0_H0.png" ] || bad "the single-text run wrote no pictures"
    echo mine >"$O/notes.txt" && echo mine >"$O/heads/mine.png"
    if [ $cmd = merge ]; then
        expect 0 "merge over a single-text run" -- "$HS" merge "$T/c4" -o "$O" -q
    else
        expect 0 "corpus over a single-text run" -- "$HS" analyze "$G" --corpus "$CP" --max-texts 2 -o "$O" -q
    fi
    [ "$(cd "$O" && find . -type f | LC_ALL=C sort | tr '\n' ' ')" = "./heads/mine.png ./index.html ./notes.txt ./partial.json ./report.json ./texts.jsonl " ] && ok || bad "$cmd over a single-text run left: $(cd "$O" && find . -type f | LC_ALL=C sort | tr '\n' ' ')"
done
# a shard over a single-text run: the earlier report goes with its pictures
O="$T/replace-shard"
"$HS" analyze "$G" --text "$TXT" -o "$O" "${A[@]}" && echo mine >"$O/notes.txt"
expect 0 "a shard over a single-text run" -- "$HS" analyze "$G" --corpus "$CP" --max-texts 4 --shard 1/2 -o "$O" -q
[ "$(cd "$O" && find . | LC_ALL=C sort | tr '\n' ' ')" = ". ./notes.txt ./partial.json ./texts.jsonl " ] && ok || bad "a shard over a single-text run left: $(cd "$O" && find . | LC_ALL=C sort | tr '\n' ' ')"
# dump over an earlier dump: the activations it does not write again go, and a name its
# manifest lists that is not one of dump's stays
D="$T/replace-dump"
"$HS" dump "$G" --text "$TXT" --what q,pattern -o "$D" -q && echo mine >"$D/notes.txt" || bad "first dump"
"$PY" -c "import json,sys; p=sys.argv[1]; j=json.load(open(p)); j['files'].append({'file': 'notes.txt'}); json.dump(j, open(p,'w'))" "$D/manifest.json"
expect 0 "dump over a dump" -- "$HS" dump "$G" --text "$TXT" --what pattern -o "$D" -q
[ "$(cd "$D" && ls | tr '\n' ' ')" = "blocks.0.attn.hook_pattern.npy blocks.1.attn.hook_pattern.npy input_ids.npy manifest.json notes.txt " ] && ok || bad "dump over a dump left: $(ls "$D" | tr '\n' ' ')"
victim_same "replacing earlier runs"

# ---- 6. a killed run's staging folder goes with the next run into the folder ----------------
K="$T/killed"
mkdir -p "$K" && echo mine >"$K/notes.txt"
HEADSCOPE_TEST_HOLD_AT=pictures "$HS" analyze "$G" --text "$TXT" -o "$K" "${A[@]}" 2>/dev/null &
sup=$!
for _ in $(seq 300); do ls "$K"/.headscope-run-*/gallery.png >/dev/null 2>&1 && break; sleep 0.1; done
# the worker: the child of the supervisor (its parent pid, the 4th field of /proc/PID/stat)
worker=$("$PY" - "$sup" <<'PYEOF'
import os, sys
for d in filter(str.isdigit, os.listdir("/proc")):
    try:
        if open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[1] == sys.argv[1]:
            print(d)
    except OSError:
        pass
PYEOF
)
[ -n "$worker" ] && kill -KILL "$sup" "$worker"
{ wait "$sup"; } 2>/dev/null # no "Killed" line
stale=$(ls -d "$K"/.headscope-run-* 2>/dev/null)
[ -n "$stale" ] && [ -f "$stale/gallery.png" ] && ok || bad "kill -9 left no staging folder to test with: $(ls -A "$K")"
# hand-made ones: a dead run's with a file of the user's (emptied of headscope's files, kept),
# an earlier version's (no pid), a live process's (left alone), a link (never followed)
true & dead=$!
wait "$dead"
mkdir -p "$K/.headscope-run-$dead-Abc123/heads" "$K/.headscope-run-Old123/heads" "$K/.headscope-run-$$-Liv123"
echo x >"$K/.headscope-run-$dead-Abc123/report.json" && echo mine >"$K/.headscope-run-$dead-Abc123/mine.txt"
echo x >"$K/.headscope-run-$dead-Abc123/heads/L1_H2.words.png" && echo x >"$K/.headscope-run-$dead-Abc123/index.html.tmp-Q1w2E3"
echo x >"$K/.headscope-run-Old123/gallery.png" && echo x >"$K/.headscope-run-Old123/heads/L0_H0.png"
echo x >"$K/.headscope-run-$$-Liv123/report.json"
ln -s "$V" "$K/.headscope-run-$dead-Sym123"
expect 0 "a run after kill -9" -- "$HS" analyze "$G" --text "$TXT" -o "$K" "${A[@]}"
[ ! -e "$stale" ] && [ ! -e "$K/.headscope-run-Old123" ] && ok || bad "stale staging folders were left: $(ls -A "$K")"
[ "$(ls -A "$K/.headscope-run-$dead-Abc123")" = mine.txt ] && ok || bad "a dead run's staging folder: $(ls -AR "$K/.headscope-run-$dead-Abc123")"
[ -f "$K/.headscope-run-$$-Liv123/report.json" ] && [ -L "$K/.headscope-run-$dead-Sym123" ] && ok || bad "a live run's staging folder or a link was removed"
[ -f "$K/notes.txt" ] && [ -f "$K/report.json" ] && ok || bad "the run after kill -9: $(ls -A "$K")"
victim_same "stale staging"

# ---- reruns said, --no-clobber, missing parents (issue 40) ----------------------------------
# a rerun says what it replaced (not with -q); --no-clobber refuses a folder with an earlier
# run's outputs before anything runs, and leaves it as it was, for analyze, corpus, merge, dump
R="$T/rerun"
mkdir -p "$R" && echo mine >"$R/notes.txt"
expect 0 "a first run beside a file of the user's" -- "$HS" analyze "$G" --text "$TXT" -o "$R" --no-images --no-ablation --no-rollout --no-composition
[ ! -s "$T/err" ] && ok || bad "a first run said something on stderr: $(cat "$T/err")"
expect 0 "a rerun" -- "$HS" analyze "$G" --text "$TXT" -o "$R" --no-ablation --no-rollout --no-composition
one_line_error "a rerun"
stderr_has "a rerun" "headscope: analyze: replaced the earlier run in '$R' (2 files: "
expect 0 "a quiet rerun" -- "$HS" analyze "$G" --text "$TXT" -o "$R" "${A[@]}"
[ ! -s "$T/err" ] && ok || bad "a quiet rerun said something: $(cat "$T/err")"
(cd "$R" && find . -type f | LC_ALL=C sort | xargs sha256sum) >"$T/rerun.sum"
for cmd in analyze corpus merge dump; do
    case $cmd in
    analyze) expect 1 "analyze --no-clobber" -- "$HS" analyze "$G" --text "$TXT" -o "$R" "${A[@]}" --no-clobber ;;
    corpus) expect 1 "corpus --no-clobber" -- "$HS" analyze "$G" --corpus "$CP" --max-texts 2 -o "$R" -q --no-clobber ;;
    merge) expect 1 "merge --no-clobber" -- "$HS" merge "$T/c4" -o "$R" -q --no-clobber ;;
    dump) expect 1 "dump --no-clobber" -- "$HS" dump "$G" --text "$TXT" --what pattern -o "$R" -q --no-clobber ;;
    esac
    one_line_error "$cmd --no-clobber"
    stderr_has "$cmd --no-clobber" "holds an earlier run's outputs ("
    (cd "$R" && find . -type f | LC_ALL=C sort | xargs sha256sum) | cmp -s - "$T/rerun.sum" && ok || bad "$cmd --no-clobber changed the folder"
done
mkdir -p "$T/users" && echo mine >"$T/users/notes.txt"
expect 0 "--no-clobber into a folder of the user's files only" -- "$HS" analyze "$G" --text "$TXT" -o "$T/users" "${A[@]}" --no-clobber
expect 0 "--no-clobber into a new folder" -- "$HS" merge "$T/c4" -o "$T/fresh" -q --no-clobber
expect 2 "--no-clobber with --resume" -- "$HS" analyze "$G" --corpus "$CP" -o "$R" --resume --no-clobber
one_line_error "--no-clobber with --resume"
# -o a/b/c makes the missing parents; a failed run removes the folders it made, only those
expect 0 "-o with missing parents" -- "$HS" analyze "$G" --text "$TXT" -o "$T/p1/a/b" "${A[@]}"
[ -f "$T/p1/a/b/report.json" ] && ok || bad "-o with missing parents: $(find "$T/p1" | head)"
mkdir -p "$T/p2"
for cmd in analyze corpus merge dump; do
    case $cmd in
    analyze) expect 1 "analyze failing in new parents" -- "$HS" analyze "$T/no-model" --text "$TXT" -o "$T/p2/x/y/z" "${A[@]}" ;;
    corpus) expect 1 "corpus failing in new parents" -- "$HS" analyze "$G" --corpus "$T/no-corpus" -o "$T/p2/x/y/z" -q ;;
    merge) expect 1 "merge failing in new parents" -- "$HS" merge "$T/no-shard" -o "$T/p2/x/y/z" -q ;;
    dump) expect 1 "dump failing in new parents" -- "$HS" dump "$T/no-model" --text "$TXT" --what pattern -o "$T/p2/x/y/z" -q ;;
    esac
    [ -d "$T/p2" ] && [ -z "$(ls -A "$T/p2")" ] && ok || bad "$cmd failing in new parents left $(find "$T/p2")"
done
touch "$T/plainfile"
expect 1 "-o under a file" -- "$HS" analyze "$G" --text "$TXT" -o "$T/plainfile/a/b" "${A[@]}"
one_line_error "-o under a file"; stderr_has "-o under a file" "Not a directory"

echo "cli_outdir: $pass passed, $fail failed"
[ "$fail" = 0 ]
