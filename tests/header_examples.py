"""Compiles and links every usage example of the public headers (run by tests/lib.sh).

An example is a run of comment lines indented by at least five spaces (" *     code") that
follows a blank comment line, in a header's opening comment. The blocks of a header
become the body of one function, after the declarations below of the names they take from
their context; the functions are compiled against the headers in INCLUDEDIR and linked with the libraries.

usage: header_examples.py INCLUDEDIR OUT.c -- CC CFLAGS... -- LIBS...
"""
import os
import re
import subprocess
import sys

# Names an example uses without declaring them, per header (as in the surrounding prose).
CONTEXT = {
    "activations.h": "hs_error err = {{0}}; const hs_model *model = NULL; "
                     "const int32_t *ids = NULL; int n = 1;",
    "analysis.h": "hs_error err = {{0}}; hs_trace *t = NULL; int L = 2, H = 2, n = 4; "
                  "const int32_t *ids = NULL; int labels[144]; int n_clusters = 0;",
    "composition.h": "hs_error err = {{0}}; const hs_model *model = NULL;",
    "corpus.h": "hs_error err = {{0}}; double x = 0;",
    "forward.h": "hs_error err = {{0}}; const hs_model *model = NULL; const int32_t *ids = NULL; "
                 "int n = 1, state = 0;",
    "gguf.h": "hs_error err = {{0}}; const hs_model *model = NULL;",
    "hooks.h": "hs_error err = {{0}}; const hs_model *model = NULL; const int32_t *ids = NULL; "
               "int n = 1, state = 0;",
    "patch.h": "hs_error err = {{0}}; const hs_model *model = NULL; const int32_t *clean_ids = "
               "NULL, *corrupt_ids = NULL; int n = 1, answer_id = 0, wrong_id = 1;",
    "html.h": "const char *json = \"{}\"; const float *maps = NULL; int n_heads = 1, n = 1;",
    "importance.h": "hs_error err = {{0}}; const hs_model *model = NULL; "
                    "const int32_t *ids = NULL; int n = 1, L = 1, H = 1;",
    "npy.h": "hs_error err = {{0}}; size_t L = 1, H = 1, n = 1; const float *attn = NULL;",
    "render.h": "const float *map = NULL; int n = 1; const char *const *labels = NULL;",
    "visibility.h": "const float *probs = NULL; int n = 0; double mass = 0;",
    "report.h": "hs_error err = {{0}}; const hs_model *model = NULL; hs_encoding enc = {0}; "
                "const char *text = \"\";",
}
FILE_SCOPE = ("static int my_observer(void *user, int layer, const float *probs, int n_head, "
              "int n)\n{ (void)user, (void)layer, (void)probs, (void)n_head, (void)n; return 0; }\n"
              "static int my_hook(void *user, const hs_hook_call *call)\n"
              "{ (void)user, (void)call; return 0; }\n")


def examples(path):
    """The example blocks of a header's opening comment."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    head = text[:text.index("*/")]
    blocks, cur, prev_blank = [], None, False
    for line in head.split("\n"):
        m = re.match(r"^ \*( {5,}\S.*)$", line)
        if m and (cur is not None or prev_blank):
            cur = (cur or []) + [m.group(1)[4:]]
        elif cur is not None:
            blocks.append(cur)
            cur = None
        prev_blank = line.rstrip() == " *"
    return blocks


def main():
    args = sys.argv[1:]
    inc, out = args[0], args[1]
    sep = args.index("--", 2)
    sep2 = args.index("--", sep + 1)
    cc, libs = args[sep + 1:sep2], args[sep2 + 1:]
    headers = [os.path.join(inc, "headscope.h")] + sorted(
        os.path.join(inc, "headscope", h) for h in os.listdir(os.path.join(inc, "headscope")))
    src = ["#include <stdio.h>", "#include <stdlib.h>", "#include <headscope.h>", FILE_SCOPE]
    names = []
    for h in headers:
        base = os.path.basename(h)
        blocks = examples(h)
        if not blocks:
            continue
        # the blocks of one header continue each other ("... or to memory:"): one function
        name = "example_" + re.sub(r"\W", "_", base)
        names.append(name)
        body = "\n".join("        " + l for b in blocks for l in b)
        src.append("/* %s: %d block(s) */\nstatic int %s(void)\n{\n    %s\n    {\n%s\n    }\n"
                   "    return 0;\n}\n" % (base, len(blocks), name, CONTEXT.get(base, ""), body))
    if len(names) < len(headers) - 1:
        sys.exit("header_examples: only %d headers of %d have examples" % (len(names), len(headers)))
    src.append("int main(void)\n{\n    int (*const fns[])(void) = {%s};\n"
               "    return (int)(sizeof fns / sizeof fns[0]) == %d ? 0 : 1;\n}\n"
               % (", ".join(names), len(names)))
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(src))
    errs = ["-Werror=implicit-function-declaration", "-Werror=incompatible-pointer-types",
            "-Werror=int-conversion", "-Werror=return-type", "-Wno-unused"]
    cmd = cc + errs + ["-I" + inc, out, "-o", out[:-2]] + libs
    r = subprocess.run(cmd)
    if r.returncode:
        sys.exit("header_examples: %s does not compile: %s" % (out, " ".join(cmd)))
    print("header examples: the examples of %d of %d headers compile and link" % (len(names), len(headers)))


if __name__ == "__main__":
    main()
