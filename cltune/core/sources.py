"""A kernel's source as the files it was joined from (a family's .cl files, a config's sources with
their #includes inlined): which file and line each line of the joined text came from, so that a
build error names the user's file and line, not the compiler's temporary copy."""

from __future__ import annotations

import re

# Where a line of the joined text came from: ((first line in the joined text, file, its line there), ...)
Lines = tuple

# The name a compiler gives the text it was handed, and the line: PoCL's temporary copy
# (…/pocl/kcache/tempfile_wAXI8p.cl:3), or clang's `<source>:3` (other drivers).
AT = re.compile(r"(?:[^\s:'\"<>=]*[/\\])?tempfile_\w+\.cl:(\d+)|<source>:(\d+)")
# clang's note on where a macro's text was spelled (`<Spelling=…tempfile_x.cl:2:28>`): a line of the
# #define lines cltune puts above the source, in nobody's file; left out.
SPELLING = re.compile(r" <Spelling=(?:<[^<>]*>|[^<>])*>")  # also `<Spelling=<scratch space>:8:28>`


def whole_file(name: str) -> Lines:
    """One file, as it is."""
    return ((1, name, 1),)


def joined(parts: list) -> tuple[str, Lines]:
    """[(text, lines), ...] joined with newlines, as a family or a config joins its files ->
    (the text, where each of its lines came from; past its end, nowhere: text a subclass appends)."""
    texts, out, start = [], [], 1
    for text, lines in parts:
        out += [(start + first - 1, name, line) for first, name, line in lines]
        texts.append(text)
        start += text.count("\n") + 1
    return "\n".join(texts), tuple(out) + ((start, "", 0),)


def inlined(name: str, pieces: list) -> tuple[str, Lines]:
    """A file whose lines are `pieces`, each a line's text or, for an #include line, (the comment that
    replaces it, (the included text, its lines)) -> (the text, where each line came from)."""
    texts, out, at = [], [(1, name, 1)], 1
    for i, piece in enumerate(pieces, 1):
        if isinstance(piece, str):
            texts.append(piece)
            at += 1
            continue
        comment, (text, lines) = piece
        texts.append(f"{comment}\n{text}")
        out += [(at + first, inc, line) for first, inc, line in lines]
        at += 2 + text.count("\n")
        out.append((at, name, i + 1))
    return "\n".join(texts), tuple(out)


def locate(lines: Lines, line: int) -> tuple[str, int] | None:
    """(file, line in it) of a line of the joined text; None without a map, or past its end."""
    found = None
    for first, name, there in lines:
        if first <= line:
            found = (name, there + line - first) if name else None
    return found


def named(log_line: str, lines: Lines) -> str:
    """A build log's line with the compiler's name for the source (and its line) replaced by the
    user's file and line (`add.cl:3:38: error: ...`); as it is without a map."""
    def sub(m):
        where = locate(lines, int(m.group(1) or m.group(2)))
        return m.group(0) if where is None else f"{where[0]}:{where[1]}"
    return AT.sub(sub, SPELLING.sub("", log_line)) if lines else log_line
