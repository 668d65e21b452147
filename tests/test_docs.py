"""The README and docs/ stay short, linked and true to the repository: README.md is at most 260
lines; every relative link in README.md and docs/*.md names a file that exists (and an anchor names
a heading of that file, by GitHub's slug rules); every repository path written in backticks exists;
the README's two fenced set-up commands are the main job (`cltune sweep`) and the test command that
.ci/run runs. Plain text only: no OpenCL device, no cltune import."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
MAX_README_LINES = 260

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
# Repository paths written in backticks: a top-level folder of this repository, then a path.
REPO_PATH = re.compile(r"^(?:cltune|benchmarks|configs|kernels|examples|scripts|tests|docs|\.ci)/[\w./-]*$")


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the lines outside fenced code blocks."""
    out, fenced = [], None
    for number, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if m:
            if fenced is None:
                fenced = m.group(1)
            elif m.group(1) == fenced:
                fenced = None
            continue
        if fenced is None:
            out.append((number, line))
    return out


def fenced_blocks(text: str) -> list[str]:
    """The contents of the fenced code blocks, in order."""
    blocks, current, fence = [], [], None
    for line in text.splitlines():
        m = FENCE.match(line)
        if m and fence is None:
            fence, current = m.group(1), []
        elif m and m.group(1) == fence:
            blocks.append("\n".join(current))
            fence = None
        elif fence is not None:
            current.append(line)
    return blocks


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its rendered text (code spans, links and emphasis reduced to
    their text) lower-cased, every character but letters, digits, `_`, `-` and spaces dropped, spaces
    made hyphens."""
    text = CODE_SPAN.sub(lambda m: m.group(2), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"(\*+|(?<!\w)_+|_+(?!\w))", "", text)
    text = re.sub(r"<[^>]+>", "", text)
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file; a repeated slug gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    out = set()
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        m = HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(path: Path) -> list[tuple[int, str]]:
    """(line number, target) of every Markdown link and image outside code."""
    out = []
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        line = CODE_SPAN.sub("", line)
        out += [(number, m.group(2)) for m in LINK.finditer(line)]
    return out


def backticked_paths(path: Path) -> list[tuple[int, str]]:
    """(line number, path) of every repository path written as a code span outside code blocks."""
    out = []
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        for m in CODE_SPAN.finditer(line):
            token = m.group(2).strip()
            if REPO_PATH.match(token):
                out.append((number, token))
    return out


def external(target: str) -> bool:
    return re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) is not None


def test_readme_is_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, (
        f"README.md has {len(lines)} lines; at most {MAX_README_LINES}: move detail to docs/")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    broken = []
    for number, target in links(page):
        if external(target):
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        where = f"{page.relative_to(ROOT)}:{number}: {target}"
        if not dest.exists():
            broken.append(f"{where}: no such file")
            continue
        if anchor:
            if dest.suffix != ".md":
                broken.append(f"{where}: an anchor into a file that is not Markdown")
            elif anchor not in anchors(dest):
                broken.append(f"{where}: no heading with anchor #{anchor} in {dest.name}")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_repository_paths_exist(page):
    missing = [f"{page.relative_to(ROOT)}:{n}: {p}" for n, p in backticked_paths(page)
               if not (ROOT / p.rstrip("/")).exists()]
    assert not missing, "paths named in the docs that are not in the repository:\n" + "\n".join(missing)


def ci_test_command() -> str:
    """The command .ci/run runs: its line that starts with the system-deps step."""
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
             if line.strip().startswith("sh scripts/system-deps")]
    assert len(lines) == 1, f".ci/run: expected one command line starting with the system-deps step, got {lines}"
    return lines[0]


def words(command: str) -> list[str]:
    """A command's words without pip's quiet flag (.ci/run installs quietly; the README does not)."""
    return [w for w in command.split() if w not in ("-q", "--quiet")]


def test_readme_setup_commands():
    setup = [b.strip() for b in fenced_blocks(README.read_text(encoding="utf-8"))
             if "scripts/system-deps" in b and "\n" not in b.strip()]
    assert len(setup) == 2, f"README.md: expected two fenced one-line set-up commands, got {setup}"
    main_job, tests = setup
    assert "cltune sweep" in main_job, f"README.md: the first set-up command is the main job: {main_job}"
    assert words(tests) == words(ci_test_command()), (
        f"README.md's test command and .ci/run's differ:\n  {tests}\n  {ci_test_command()}")


def test_slug_rules():
    assert slug("The Python API, in Kernel Tuner's conventions") == "the-python-api-in-kernel-tuners-conventions"
    assert slug("`[run]` keys") == "run-keys"
    assert slug("How well a busy host can be ranked") == "how-well-a-busy-host-can-be-ranked"
    assert slug("bench_fusion") == "bench_fusion"
    assert slug("A farm of boards: `cltune worker`") == "a-farm-of-boards-cltune-worker"
