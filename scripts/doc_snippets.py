#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Every C++ code block of the documentation, as files the test suite compiles.

    scripts/doc_snippets.py OUT_DIR ROOT FILE...   (FILE: .md or .hpp, relative to ROOT)

Sources of code blocks:
  * Markdown: every ```cpp block.
  * Public headers: the usage example of the comment at the top of the file, lines written
    `//   code` (three spaces after the slashes); a run of such lines, blank `//` lines inside
    it allowed, is one block.
Markdown ```python blocks are whole scripts, written as OUT_DIR/<doc>_py<n>.py and run by the
tests against the Python module of the build tree (kind `python`).
A block holding `int main(` is a whole program: written as OUT_DIR/<doc>_<n>.cpp, built and run
by the tests (under ASan+UBSan in that tree). A `<!-- snippet: compile-only -->` line right
above a Markdown block builds it without running it (a program that needs mpirun or a GPU).
Any other block is a fragment: each becomes the body of a function in OUT_DIR/fragments.cpp,
compiled and linked against tests/snippets/context.hpp, which declares the names fragments use
without defining them (g, x, W, b, loss, cg, feeds, ...): fragments show calls in the middle of
a program, so they are compiled, not run. `#include` lines of a fragment go to the file's top.
`#line` directives point compiler errors at the documentation's own lines.

Prints one line per program on stdout: `name|kind|path` with kind run, compile or fragments.
Files are rewritten only when their text changes, so unchanged snippets are not rebuilt.
"""
import os
import re
import sys


def md_blocks(text, lang="cpp"):
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```" + lang:
            start = i + 1
            j = start
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            if j == len(lines):
                raise SystemExit(f"unterminated ```cpp block at line {i + 1}")
            compile_only = i > 0 and lines[i - 1].strip() == "<!-- snippet: compile-only -->"
            yield start + 1, lines[start:j], compile_only
            i = j + 1
        else:
            i += 1


def header_blocks(text):
    lines = text.split("\n")
    # The leading comment: from the first line to the first line that is not a comment.
    end = 0
    while end < len(lines) and lines[end].startswith("//"):
        end += 1
    i = 0
    while i < end:
        if lines[i].startswith("//   "):
            start = i
            block = []
            j = i
            while j < end and (lines[j].startswith("//   ") or lines[j].strip() == "//"):
                block.append(lines[j][5:] if lines[j].startswith("//   ") else "")
                j += 1
            while block and block[-1] == "":
                block.pop()
            yield start + 1, block, False
            i = j
        else:
            i += 1


def write_if_changed(path, text):
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return
    except FileNotFoundError:
        pass
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def main():
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    out, root, docs = sys.argv[1], sys.argv[2], sys.argv[3:]
    os.makedirs(out, exist_ok=True)
    includes, fragments, calls = [], [], []
    for doc in docs:
        with open(os.path.join(root, doc), encoding="utf-8") as f:
            text = f.read()
        blocks = md_blocks(text) if doc.endswith(".md") else header_blocks(text)
        stem = re.sub(r"[^A-Za-z0-9]+", "_", os.path.splitext(doc)[0]).strip("_")
        source = os.path.join(root, doc)
        if doc.endswith(".md"):
            for n, (line, body, _) in enumerate(md_blocks(text, "python"), 1):
                name = f"{stem}_py{n}"
                path = os.path.join(out, name + ".py")
                write_if_changed(path, f"# {source}:{line}\n" + "\n".join(body) + "\n")
                print(f"{name}|python|{path}")
        for n, (line, body, compile_only) in enumerate(blocks, 1):
            if any("int main(" in l for l in body):
                name = f"{stem}_{n}"
                path = os.path.join(out, name + ".cpp")
                write_if_changed(path, f'#line {line} "{source}"\n' + "\n".join(body) + "\n")
                print(f"{name}|{'compile' if compile_only else 'run'}|{path}")
                continue
            code = []
            for l in body:
                if l.lstrip().startswith("#include"):
                    includes.append(l.strip())
                    code.append("")
                else:
                    code.append(l)
            fragments.append(
                f"[[maybe_unused]] int {stem}_{n}([[maybe_unused]] int argc, "
                f"[[maybe_unused]] char** argv) {{\n"
                f'#line {line} "{source}"\n' + "\n".join(code) + "\n  return 0;\n}\n")
            calls.append(f"    snippet_context::{stem}_{n}(argc, argv);\n")
    # Every fragment in one translation unit: the headers are parsed once for all of them.
    if fragments:
        path = os.path.join(out, "fragments.cpp")
        head = ["// Generated by scripts/doc_snippets.py: do not edit.",
                "#include <hetgraph/hetgraph.hpp>"]
        head += sorted(set(includes))
        head.append('#include "context.hpp"')
        write_if_changed(path, "\n".join(head) + "\nnamespace snippet_context {\n" +
                         "\n".join(fragments) + "}  // namespace snippet_context\n\n"
                         "// Linked, so every name a fragment uses must exist; never run.\n"
                         "int main(int argc, char** argv) {\n"
                         "  if (argc < 0) {\n" + "".join(calls) + "  }\n  return 0;\n}\n")
        print(f"fragments|fragments|{path}")


if __name__ == "__main__":
    main()
