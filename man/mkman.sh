#!/bin/sh
# Writes a man page (roff) from headscope's --help: mkman.sh HEADSCOPE VERSION [COMMAND].
# Without COMMAND: headscope(1) from `headscope --help`; with it: headscope-COMMAND(1) from
# `headscope COMMAND --help`. The help text is the page's body, verbatim, so the pages
# cannot drift from the program.
set -eu
bin=$1 version=$2 cmd=${3:-}
if [ -n "$cmd" ]; then
    name="headscope-$cmd"
    help=$("$bin" "$cmd" --help)
    summary=$("$bin" --help | sed -n "s/^  $cmd  *//p")
else
    name=headscope
    help=$("$bin" --help)
    summary="analyse every attention head of GPT-2, BERT, RoBERTa, DistilBERT, GPT-NeoX/Pythia, Llama, Mistral, Qwen2, Phi-3, Falcon, GPT-BigCode, DeepSeek-V2/V3, Qwen3, Qwen3-MoE, OLMo-2 and Gemma 2/3 models"
fi
upper=$(printf '%s' "$name" | tr 'a-z-' 'A-Z-')
printf '.TH %s 1 "" "headscope %s" "User Commands"\n' "$upper" "$version"
printf '.SH NAME\n%s \\- %s\n' "$name" "$summary"
printf '.SH DESCRIPTION\n.nf\n'
# roff: escape backslashes, and protect lines that start with . or '
printf '%s\n' "$help" | sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"
printf '.fi\n'
if [ -z "$cmd" ]; then
    printf '.SH SEE ALSO\n'
    for c in $("$bin" --help | sed -n '/^commands:/,/^$/s/^  \([a-z][a-z]*\)  .*/\1/p'); do
        printf '.BR headscope-%s (1)\n' "$c"
    done
    printf '.PP\nThe documentation is installed in share/doc/headscope.\n'
else
    printf '.SH SEE ALSO\n.BR headscope (1)\n'
fi
