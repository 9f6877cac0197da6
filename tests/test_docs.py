"""README and docs/: the Python example runs as written, links resolve, and the code they name exists."""

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = [README, ROOT / "graphs" / "README.md", ROOT / "bench" / "results" / "SUMMARY.md",
        *sorted((ROOT / "docs").rglob("*.md"))]


def _python_example() -> str:
    """The indented block under README's `## Python` heading."""
    section = README.read_text().split("## Python\n", 1)[1].split("\n## ", 1)[0]
    return "\n".join(line[4:] for line in section.splitlines() if line.startswith("    "))


def _anchors(path: Path) -> set[str]:
    """GitHub's anchors for a Markdown file's headings: lower case, punctuation dropped, spaces to hyphens."""
    heads = re.findall(r"^#+ (.*)$", path.read_text(), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def test_readme_is_short():
    assert len(README.read_text().splitlines()) <= 250


def test_readme_python_example_runs_as_written():
    """Run from the repository root, as a newcomer would after the set-up command."""
    example = _python_example()
    assert len(example.splitlines()) == 6
    done = subprocess.run([sys.executable, "-c", example], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    printed = re.search(r"^prints `(.*?)`", README.read_text(), flags=re.M).group(1)
    assert done.stdout.strip() == printed


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc):
    for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
        if target.startswith(("http://", "https://")):
            continue
        path, _, anchor = target.partition("#")
        resolved = (doc.parent / path).resolve() if path else doc
        assert resolved.exists(), f"{doc.name}: {target}"
        if anchor and resolved.is_file():
            assert anchor in _anchors(resolved), f"{doc.name}: {target}"


def _resolves(dotted: str) -> bool:
    """Whether ``placer.a.b.c`` names a module, or an attribute reached from the longest importable prefix."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_named_code_exists(doc):
    """A module, function or class the docs name in backquotes (`placer.x.y`) still exists there."""
    names = sorted(set(re.findall(r"`(placer(?:\.\w+)+)", doc.read_text())))
    assert [n for n in names if not _resolves(n)] == []
