#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks the documentation's links: every relative link of README.md, CONTRIBUTING.md, docs/*.md
and bench/README.md names a file that exists and, with #anchor, a heading of that file (GitHub's
anchors: lower case, punctuation dropped, spaces as hyphens). README.md stays a front page:
at most 250 lines.

    scripts/doc_links.py ROOT
"""
import glob
import os
import re
import sys

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```")


def slug(heading):
    s = heading.strip().lower().replace("`", "")
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        found = set()
        fenced = False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if FENCE.match(line):
                    fenced = not fenced
                elif not fenced and line.startswith("#"):
                    found.add(slug(line.lstrip("#")))
        cache[path] = found
    return cache[path]


def main():
    root = sys.argv[1]
    pages = ["README.md", "CONTRIBUTING.md", "bench/README.md"]
    pages += sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "docs", "*.md")))
    problems = []
    for page in pages:
        path = os.path.join(root, page)
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        fenced = False
        for i, line in enumerate(lines):  # code blocks hold no links
            if FENCE.match(line):
                fenced = not fenced
                lines[i] = ""
            elif fenced:
                lines[i] = ""
        text = "\n".join(lines)
        for match in LINK.finditer(text):  # link text may span lines
            target = match.group(1)
            number = text.count("\n", 0, match.start()) + 1
            if re.match(r"^[a-z]+:", target):
                continue  # http:, https:, mailto:
            file_part, _, anchor = target.partition("#")
            where = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not os.path.exists(where):
                problems.append(f"{page}:{number}: {target}: no such file")
                continue
            if anchor and where.endswith(".md") and anchor not in anchors(where):
                problems.append(f"{page}:{number}: {target}: no heading with anchor #{anchor}")
    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        length = len(f.read().rstrip("\n").split("\n"))
    if length > 250:
        problems.append(f"README.md: {length} lines; a front page has at most 250 (move the rest to docs/)")
    for p in problems:
        print(p)
    if problems:
        sys.exit(1)
    print(f"ok: the links of {len(pages)} pages resolve")


if __name__ == "__main__":
    main()
