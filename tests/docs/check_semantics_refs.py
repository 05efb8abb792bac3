#!/usr/bin/env python3
"""Checks the citations of docs/DEEPSPEED_SEMANTICS.md in the source tree.

1. Every "DEEPSPEED_SEMANTICS.md §N" (and the further §M of the same list or
   range, e.g. "§6.1, §6.2" or "§1.2-§1.5") names a section that is a heading
   of docs/DEEPSPEED_SEMANTICS.md.
2. No citation of the old, out-of-repository reference notes remains:
   "reference §x", "reference (§x", "reference section x", a "reference"
   whose "§x" continues on the next comment line, "the reference's ... §x",
   or the file name deepspeed-semantics.md.

Scans src/ kernels/ include/ tests/ tools/ bench/ and docs/ (text files only).
Usage: check_semantics_refs.py [REPO_ROOT]   (default: two levels above this file)
Exit status 0 when clean, 1 with one line per problem (file:line: what).
"""
import os
import re
import sys

SCANNED_DIRS = ("src", "kernels", "include", "tests", "tools", "bench", "docs")
DOC = os.path.join("docs", "DEEPSPEED_SEMANTICS.md")
DOC_NAME = "DEEPSPEED_SEMANTICS.md"
SELF = os.path.realpath(__file__)

SECTION = r"(\d+(?:\.\d+)*)"
# A heading "## 5. Accumulation ..." or "### 5.4 Global norm ...".
HEADING = re.compile(r"^#{1,6}\s+" + SECTION + r"\.?\s")
# The old citations, spelled out so that this file does not match itself.
STALE = [
    (re.compile(r"\breference(?:'s)?[ \t]*(?:\n[ \t]*(?://+|#+|\*+|/\*+)?)?[ \t]*\(?[ \t]*§", re.I),
     "cites the out-of-repository reference notes"),
    (re.compile(r"\breference's\b[^\n§]*(?:\n[^\n§]*)?§", re.I), "cites the out-of-repository reference notes"),
    (re.compile(r"\breference section\s+\d", re.I), "cites the out-of-repository reference notes"),
    (re.compile(r"deepspeed-semantics\.md", re.I), "names the out-of-repository reference notes"),
]
CITE = re.compile(re.escape(DOC_NAME))
SECTION_REF = re.compile("§" + SECTION)
# Where the list of sections after a citation ends: another document or source.
OTHER_DOC = re.compile(r"[A-Za-z_][\w-]*\.md\b|\bissue\s+\d|\bRFC\b|\bDESIGN\b", re.I)
COMMENT_LEADER = re.compile(r"^\s*(?://+|#+|\*+|/\*+)?\s*")


def headings(root):
    found = set()
    with open(os.path.join(root, DOC), encoding="utf-8") as f:
        for line in f:
            m = HEADING.match(line)
            if m:
                found.add(m.group(1))
    return found


def text_files(root):
    for top in SCANNED_DIRS:
        base = os.path.join(root, top)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__")
            for name in sorted(filenames):
                path = os.path.join(dirpath, name)
                if os.path.realpath(path) == SELF or not os.path.isfile(path):
                    continue
                try:
                    with open(path, encoding="utf-8") as f:
                        text = f.read()
                except (UnicodeDecodeError, OSError):
                    continue  # binary data, not documentation
                if "\0" not in text:
                    yield os.path.relpath(path, root), text


def cited_sections(lines, i, start):
    """Section numbers cited from lines[i][start:] on: up to another document's
    name, continuing onto the next line while the list ends with ',' or '-'."""
    out = []
    segment = lines[i][start:]
    while True:
        stop = OTHER_DOC.search(segment)
        if stop:
            segment = segment[:stop.start()]
        out += SECTION_REF.findall(segment)
        tail = segment.rstrip()
        if stop or i + 1 >= len(lines) or not tail.endswith((",", "-", "–")) or "§" not in tail:
            return out
        i += 1
        segment = COMMENT_LEADER.sub("", lines[i], count=1)


def check(root):
    known = headings(root)
    problems = []
    for rel, text in text_files(root):
        stale_lines = set()
        for pattern, what in STALE:
            for m in pattern.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                if line not in stale_lines:
                    stale_lines.add(line)
                    problems.append(f"{rel}:{line}: {what}: {m.group(0).strip()!r}")
        if rel == DOC:
            continue
        lines = text.split("\n")
        for i, line in enumerate(lines):
            for m in CITE.finditer(line):
                sections = cited_sections(lines, i, m.end())
                if not sections:
                    continue  # the document as a whole
                for s in sections:
                    if s not in known:
                        problems.append(f"{rel}:{i + 1}: {DOC_NAME} §{s} is not a heading of {DOC}")
    return problems


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(SELF), "..", "..")
    root = os.path.realpath(root)
    if not os.path.isfile(os.path.join(root, DOC)):
        print(f"check_semantics_refs: {DOC} not found under {root}", file=sys.stderr)
        return 1
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print(f"check_semantics_refs: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"check_semantics_refs: every {DOC_NAME} citation resolves; no old reference citation left")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
