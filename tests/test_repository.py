"""The repository stands alone: nothing tracked reads a path outside the clone.

Users clone only this repository, so a tracked file that names a sibling folder (the team's
``shared/`` datasets), an absolute path of a developer machine, or a Markdown link leaving the
repository works here and fails for them. Pure file scan; no services needed.
"""

from __future__ import annotations

import functools
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Written split so that this file does not match itself.
OUTSIDE_PATTERNS = {
    "a sibling 'shared' folder": re.compile(r"\.\./+" + "shared"),
    "an absolute path of a developer machine": re.compile("/" + r"work/[\w.-]"),
    "a path above the repository root from infra/env.sh's CDC_ROOT": re.compile(r"CDC_ROOT\}?/\.\." + "/"),
}
#: a Markdown link: its target file (empty for a link into the same file) and its #anchor, if any
MD_LINK = re.compile(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)")
BINARY_SUFFIXES = {".png", ".jpg", ".gif", ".parquet", ".ico"}


def tracked_files() -> list[Path]:
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout
    except (OSError, subprocess.CalledProcessError) as e:  # pragma: no cover - not a git checkout
        pytest.skip(f"not a git checkout: {e}")
    return [ROOT / p for p in out.split("\0") if p]


def text_of(path: Path) -> str | None:
    if path.suffix in BINARY_SUFFIXES or path.name == "uv.lock" or not path.is_file():
        return None
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None


def test_no_tracked_file_names_a_path_outside_the_repository():
    problems = []
    for path in tracked_files():
        text = text_of(path)
        if text is None:
            continue
        for no, line in enumerate(text.splitlines(), 1):
            for what, pattern in OUTSIDE_PATTERNS.items():
                if pattern.search(line):
                    problems.append(f"{path.relative_to(ROOT)}:{no}: {what}: {line.strip()[:120]}")
    assert not problems, "tracked files that reach outside the repository:\n" + "\n".join(problems)


def markdown_links() -> Iterator[tuple[Path, str, str | None]]:
    """``(file, target, anchor)`` of every link in the tracked Markdown files that is not a URL
    (``target`` empty for a link into the same file; ``anchor`` ``None`` without ``#``)."""
    for path in tracked_files():
        if path.suffix != ".md":
            continue
        for m in MD_LINK.finditer(text_of(path) or ""):
            target = m.group(1)
            if "://" not in target and not target.startswith(("mailto:", "/")):
                yield path, target, m.group(2)


def test_relative_markdown_links_stay_inside_the_repository_and_exist():
    problems = []
    for path, target, _ in markdown_links():
        if target:
            resolved = (path.parent / target).resolve()
            if not resolved.is_relative_to(ROOT):
                problems.append(f"{path.relative_to(ROOT)}: link {target} leaves the repository")
            elif not resolved.exists():
                problems.append(f"{path.relative_to(ROOT)}: link {target} points to nothing")
    assert not problems, "\n".join(problems)


@functools.cache
def heading_anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of a markdown file: the heading text without links'
    targets, lower-cased, every character other than letters, digits, ``_``, ``-`` and spaces
    dropped, spaces turned into ``-``; a repeated anchor gets ``-1``, ``-2``, ... Headings inside
    fenced code blocks are not headings."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in (text_of(path) or "").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        m = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m is None:
            continue
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1))
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def test_markdown_links_to_a_heading_name_one_that_exists():
    problems, checked = [], 0
    for path, target, anchor in markdown_links():
        if not anchor:
            continue
        file = (path.parent / target).resolve() if target else path
        if file.suffix != ".md" or not file.exists():
            continue  # other files, and missing ones (the test above reports those)
        checked += 1
        if anchor not in heading_anchors(file):
            problems.append(f"{path.relative_to(ROOT)}: link {target}#{anchor}: no such heading")
    assert checked > 50, "the docs link to their sections; this test must see those links"
    assert not problems, "\n".join(problems)


def test_heading_anchors_follow_github():
    path = ROOT / "docs" / "benchmarks.md"
    anchors = heading_anchors(path)
    assert "the-gil-switch-interval-of-the-run-process" in anchors
    assert "under-a-real-daemon-issue-11-benchdaemon_latencypy" in anchors
    assert "bytecode-of-the-environment" in anchors


def test_sample_datasets_ship_with_the_repository():
    tracked = {p.relative_to(ROOT).as_posix() for p in tracked_files()}
    for name in (
        "infra/datasets/inventory/inventory.sql",
        "infra/datasets/sakila/sakila-schema.sql",
        "infra/datasets/sakila/sakila-data.sql",
        "infra/datasets/sakila/LICENSE",
    ):
        assert name in tracked, f"{name} is not tracked"
    env = (ROOT / "infra" / "env.sh").read_text()
    assert 'CDC_DATASETS_DIR="${CDC_DATASETS_DIR:-$CDC_ROOT/infra/datasets}"' in env
