# The checks tests/cli.sh and tests/cli_outdir.sh share (sourced; $T is the test's folder).
pass=0 fail=0

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }

# expect STATUS DESCRIPTION -- command...: checks the exit status; stderr kept in $T/err
expect() {
    local want=$1 desc=$2
    shift 3
    "$@" >"$T/out" 2>"$T/err"
    local got=$?
    if [ "$got" = "$want" ]; then ok; else bad "$desc: exit $got, want $want; stderr: $(head -c 300 "$T/err")"; fi
}

# one_line_error DESCRIPTION: stderr of the last expect is exactly one line starting "headscope: "
one_line_error() {
    local lines
    lines=$(wc -l <"$T/err")
    if [ "$lines" = 1 ] && grep -q '^headscope: ' "$T/err"; then ok; else bad "$1: stderr not one 'headscope:' line: $(cat "$T/err")"; fi
}

stderr_has() { if grep -qiF -- "$2" "$T/err"; then ok; else bad "$1: stderr lacks '$2': $(cat "$T/err")"; fi; }
stdout_is() { if [ "$(cat "$T/out")" = "$2" ]; then ok; else bad "$1: stdout '$(head -c 300 "$T/out")', want '$2'"; fi; }
no_file() {
    local left
    left=$(ls -d "$2" "$2".tmp* 2>/dev/null)
    if [ -z "$left" ]; then ok; else bad "$1: '$left' was left behind"; fi
}
