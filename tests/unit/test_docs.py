"""The documentation stays a front door plus docs/: a short README, links that resolve inside the repository, and
nothing that points at design notes outside it (a clone must explain itself)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 150

# Spelled in pieces so that this file does not match itself.
OUTSIDE_REFERENCES = ("../" + "shared", "shared/" + "contracts", "shared/" + "DESIGN")

# [text](target) links; autolinks (<http://...>) and absolute URLs are not files.
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
SKIPPED_DIRS = {".git", ".venv", "var", "target", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"}


def _doc_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _relative_links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    targets = (m.group(1) for m in LINK.finditer(text))
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


def _tracked_files() -> list[Path]:
    """Files git tracks (outside .venv); without git, every file of the tree outside build and cache folders."""
    git = shutil.which("git")
    if git is not None:
        done = subprocess.run([git, "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False)
        if done.returncode == 0:
            names = [n for n in done.stdout.decode("utf-8").split("\0") if n and not n.startswith(".venv/")]
            return [ROOT / n for n in names if (ROOT / n).is_file()]
    return [
        p
        for p in ROOT.rglob("*")
        if p.is_file() and not SKIPPED_DIRS.intersection(p.relative_to(ROOT).parts) and ".egg-info" not in str(p)
    ]


def test_the_readme_is_a_front_door_of_at_most_150_lines() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines (at most {README_MAX_LINES}): move detail into docs/"
    )


def test_every_relative_link_in_the_readme_and_docs_resolves_to_a_file_in_the_repository() -> None:
    broken: dict[str, list[str]] = {}
    for page in _doc_pages():
        for target in _relative_links(page):
            path = (page.parent / target.split("#", 1)[0]).resolve()
            if not path.is_relative_to(ROOT) or not path.exists():
                broken.setdefault(page.relative_to(ROOT).as_posix(), []).append(target)
    assert broken == {}, f"links to nothing in the repository: {broken}"


def test_every_docs_page_is_linked_from_the_docs_index() -> None:
    index = {
        (ROOT / "docs" / target.split("#", 1)[0]).resolve().relative_to(ROOT).as_posix()
        for target in _relative_links(ROOT / "docs" / "README.md")
    }
    pages = {p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md") if p.name != "README.md"}
    assert sorted(pages - index) == []


def test_no_tracked_file_points_at_design_notes_outside_the_repository() -> None:
    found: dict[str, list[str]] = {}
    for path in _tracked_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary files (jars, images) hold no references
        hits = [ref for ref in OUTSIDE_REFERENCES if ref in text]
        if hits:
            found[path.relative_to(ROOT).as_posix()] = hits
    assert found == {}, f"files pointing outside the repository (use docs/ instead): {found}"
