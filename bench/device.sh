#!/bin/sh
# The engine benchmark on a lent many-core machine that has Python and PyTorch but none of
# headscope's libraries (docs/bench.md#on-a-lent-machine).
#
#   here, after `make all build/hs-bench`:   sh bench/device.sh pack
#       copies build/hs-bench, build/headscope and the shared libraries they load (not libc,
#       libm, the loader), xz-compressed, into build-device/ (git-ignored, about 5 MB)
#   there, with build-device carried:       sh bench/device.sh run [hs-bench options]
#       unpacks to /tmp, writes the GPT-2-small and BERT-base random checkpoints with
#       fixtures/ref/make_checkpoint.py, runs hs-bench on them with the PyTorch side, and
#       appends every line to $OUT/bench.txt as it comes (setup output: $OUT/setup.txt)
#
#   here, before the call:                   sh bench/device.sh slim
#       the working tree travels whole and the tracked fixtures make it about 90 MB, over the
#       machine's 64 MiB: removes (from the working tree only) the tracked files under fixtures/
#       that the run does not read (it keeps fixtures/ref, the GGUF writers, the GPT-2
#       tokenizer files); `sh bench/device.sh unslim` brings them back (git checkout)
#
# Example run options: --threads 1,2,4,8,16 --reps 3 --breakdown
set -eu
pack_dir=build-device

case "${1:-}" in
pack)
    for f in build/hs-bench build/headscope; do
        [ -x "$f" ] || { echo "device.sh: $f is missing (make all build/hs-bench)" >&2; exit 1; }
    done
    rm -rf "$pack_dir"
    mkdir -p "$pack_dir/lib"
    cp build/hs-bench build/headscope "$pack_dir/"
    ldd build/hs-bench build/headscope | awk '/=> \// { print $3 }' | sort -u |
        while read -r so; do
            case "$(basename "$so")" in
            libc.so* | libm.so* | ld-linux*) ;;
            *) cp -L "$so" "$pack_dir/lib/" ;;
            esac
        done
    xz -9 "$pack_dir"/lib/*
    du -sh "$pack_dir"
    ;;
slim)
    git ls-files fixtures |
        grep -v -E '^fixtures/ref/|^fixtures/gguf/[^/]*\.py$|^fixtures/tiny-gpt2/(config.json|vocab.json|merges.txt)$' |
        while read -r f; do rm -f "$f"; done
    echo "device.sh: fixtures slimmed; the tracked tree is now $(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1) bytes (sh bench/device.sh unslim restores)"
    ;;
unslim)
    git checkout -- fixtures
    ;;
run)
    shift
    : "${OUT:?device.sh run writes its results under \$OUT}"
    [ -d "$pack_dir" ] || { echo "device.sh: no $pack_dir (run 'pack' here, carry it)" >&2; exit 1; }
    d=/tmp/hs-device
    rm -rf "$d"
    mkdir -p "$d/lib"
    cp "$pack_dir/hs-bench" "$pack_dir/headscope" "$d/"
    for f in "$pack_dir"/lib/*.xz; do
        xz -dc "$f" >"$d/lib/$(basename "$f" .xz)"
    done
    LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export LD_LIBRARY_PATH
    py=$(command -v python3)
    {
        nproc
        lscpu 2>/dev/null | grep -E 'Model name|Socket|Core|Thread|NUMA node\(|Flags' | cut -c1-400
        "$py" -c 'import torch; print("torch", torch.__version__, torch.get_num_threads())'
        "$py" fixtures/ref/make_checkpoint.py --arch gpt2-small --out "$d/gpt2-small" \
            --tokenizer fixtures/tiny-gpt2
        "$py" fixtures/ref/make_checkpoint.py --arch bert-base --out "$d/bert-base"
    } >>"$OUT/setup.txt" 2>&1
    "$d/hs-bench" "$d/gpt2-small" "$d/bert-base" --headscope "$d/headscope" \
        --torch bench/torch_forward.py --python "$py" "$@" >>"$OUT/bench.txt" 2>&1
    ;;
*)
    echo "usage: sh bench/device.sh pack | slim | unslim | run [hs-bench options]" >&2
    exit 2
    ;;
esac
