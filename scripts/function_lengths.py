#!/usr/bin/python3
"""Lists the library's functions longer than a limit (80 lines by default) and fails if any.

A function is a definition that starts at the left margin, or two spaces in (a method written
inside a class in a .cc file), and ends at the first closing brace at that indentation: the form
clang-format gives them. Tables of data (an initializer ending in `= {`) are not functions.
    scripts/function_lengths.py [--limit N] [DIR ...]   (default: the library's directories)
"""
import argparse
import pathlib
import re
import sys

LIBRARY = ["core", "transports", "collectives", "ddp", "launcher"]
NOT_A_FUNCTION = re.compile(
    r"^\s*(namespace|class|struct|enum|union|extern|using|typedef|template|return|if|for|while|"
    r"switch|case|default|else|do|try|catch|public|private|protected|#)\b")


def long_functions(path, limit):
    lines = path.read_text().split("\n")
    found = []
    start = indent = None
    for i, line in enumerate(lines):
        if start is None:
            m = re.match(r"^( {0,2})[A-Za-z_~]", line)
            if m and not NOT_A_FUNCTION.match(line) and "=" not in line.split("(")[0]:
                start, indent = i, m.group(1)
                code = re.sub(r'"([^"\\]|\\.)*"', '""', line)
                if line.rstrip().endswith(";") or ("{" in code and code.count("{") == code.count("}")):
                    start = None  # A declaration, or a body on one line.
            continue
        if line == indent + "}" or line.startswith(indent + "};"):
            if i - start + 1 > limit:
                found.append((i - start + 1, start + 1, lines[start].strip()))
            start = None
        elif line.startswith(indent) and not line.startswith(indent + " ") and line.rstrip().endswith(";"):
            start = None  # A declaration that spanned lines.
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, default=80)
    parser.add_argument("dirs", nargs="*")
    args = parser.parse_args()
    root = pathlib.Path(__file__).resolve().parent.parent
    dirs = [pathlib.Path(d).resolve() for d in args.dirs] or [root / d for d in LIBRARY]
    failures = 0
    for d in dirs:
        for path in sorted(d.rglob("*.cc")):
            for length, line, signature in long_functions(path, args.limit):
                print(f"{path.relative_to(root)}:{line}: {length} lines: {signature}")
                failures += 1
    if failures:
        print(f"{failures} function(s) over {args.limit} lines")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
