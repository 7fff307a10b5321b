#!/usr/bin/python3
"""The documentation against the files and reports it describes (run by tests/docs_check.sh).

    docs_check.py images PICS...        every picture README.md and docs/*.md show exists, and
                                        they are exactly PICS (make docs-images' outputs)
    docs_check.py links DIR             in DIR/README.md and DIR/docs/*.md (the repository, or
                                        an installed DOCDIR), every picture and every link to
                                        a document, picture, LICENSE, CITATION.cff or example
                                        resolves (in the repository: every relative link)
    docs_check.py keys REPORT.json...   every key the reports hold is named in
                                        docs/report-schema.md (in code, `key`), every key of
                                        its report.json tables occurs in one of the reports,
                                        the Top level table is exactly the reports' top-level
                                        keys, and no table names a key twice

Prints one line per mismatch and exits 1 when there is one."""
import glob
import json
import os
import re
import sys

bad = []


def images(pics):
    shown = set()
    for md in ["README.md"] + sorted(glob.glob("docs/*.md")):
        for m in re.finditer(r"!\[[^\]]*\]\(([^)\s]+)\)", open(md, encoding="utf-8").read()):
            p = os.path.normpath(os.path.join(os.path.dirname(md), m.group(1)))
            shown.add(p)
            if not os.path.isfile(p):
                bad.append("%s shows %s, which does not exist" % (md, m.group(1)))
    made = {os.path.normpath(p) for p in pics}
    for p in sorted(shown - made):
        bad.append("%s is shown in the docs but make docs-images does not draw it" % p)
    for p in sorted(made - shown):
        bad.append("make docs-images draws %s, which no document shows" % p)


def links(args):
    root = args[0]
    repo = os.path.isdir(os.path.join(root, ".git")) or os.path.isfile(os.path.join(root, "Makefile"))
    for md in [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md"))):
        for m in re.finditer(r"\]\(([^)\s]+)\)", open(md, encoding="utf-8").read()):
            target = m.group(1).split("#")[0]
            if not target or re.match(r"[a-z]+:", target):
                continue
            kept = re.search(r"(\.md|\.png|LICENSE|CITATION\.cff|examples/[^/]+)$", target)
            if (repo or kept) and not os.path.exists(os.path.normpath(os.path.join(os.path.dirname(md), target))):
                bad.append("%s links to %s, which is not there" % (os.path.relpath(md, root), m.group(1)))


# objects whose keys are data, not schema: the thresholds by head type (the types are the
# detector table's keys), a head's text_scores/probe_scores halves (all, no_sinks: named in
# the text), the timing phases (a table of their own)
DATA_KEYED = {"label_thresholds"}


def report_keys(v, out, top=None, parent=""):
    if isinstance(v, dict):
        for k, x in v.items():
            out.add(k)
            if k not in DATA_KEYED:
                report_keys(x, out, parent=k)
    elif isinstance(v, list):
        for x in v:
            report_keys(x, out, parent=parent)


NOT_REPORT = ("Partial aggregates",)  # sections about other files (partial.json)


def schema_keys():
    """The names in code anywhere in report-schema.md; the backquoted names in the first
    column of the tables of report.json's sections; the rows of the 'Top level' table."""
    text = open("docs/report-schema.md", encoding="utf-8").read()
    named = set()
    for span in re.findall(r"`([^`]+)`", text):
        named.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", span))
    keys, top, section = set(), set(), ""
    for line in text.splitlines():
        if line.startswith("#"):
            section = line.strip("# ")
        if not line.startswith("| `") or section.startswith(NOT_REPORT):
            continue
        names = re.findall(r"`([a-z_][a-z0-9_]*)`", line.split("|")[1])
        keys.update(names)
        if section == "Top level":
            top.update(names)
    return named, keys, top


def dup_rows():
    """A key documented twice in one table."""
    seen, section = set(), ""
    for line in open("docs/report-schema.md", encoding="utf-8"):
        if line.startswith("#") or not line.startswith("|"):
            seen = set() if line.startswith("#") or not line.strip() else seen
            continue
        if line.startswith("| `"):
            first = line.split("|")[1].strip()
            if first in seen:
                bad.append("report-schema.md documents %s twice in one table" % first)
            seen.add(first)


def keys(paths):
    named, doc, doc_top = schema_keys()
    dup_rows()
    held, tops = set(), set()
    for p in paths:
        r = json.load(open(p))
        tops.update(r.keys())
        report_keys(r, held)
    for k in sorted(held - named):
        bad.append("report.json holds key %r, which report-schema.md does not document" % k)
    for k in sorted(doc - held):
        bad.append("report-schema.md documents key %r, which none of the reports holds" % k)
    for k in sorted(tops ^ doc_top):
        bad.append("top-level key %r: %s" % (k, "not in report-schema.md's Top level table" if k in tops else "in the Top level table, in no report"))


def main():
    modes = {"images": images, "links": links, "keys": keys}
    if len(sys.argv) < 3 or sys.argv[1] not in modes:
        print(__doc__, file=sys.stderr)
        return 2
    modes[sys.argv[1]](sys.argv[2:])
    for b in bad:
        print("docs: " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
