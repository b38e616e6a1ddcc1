"""README.md stays a short front door, and the tree cites only documents a reader has.

The README: under 8,000 characters, no line over 120, no commit hashes and no changelog prose (measurement history
belongs in docs/results.md), and every relative link in it (docs/ pages and their anchors included) resolves.

Everywhere a reader looks (verl/, tests/, docs/, examples/, benchmarks/, scripts/, docker/, the README): no citation
of a document that is not in the repository -- a numbered article or issue, a "seed article", "the issue's bar".
Such a sentence should name the feature or the behaviour and link the docs/ page that describes it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SCANNED_DIRS = ("verl", "tests", "docs", "examples", "benchmarks", "scripts", "docker")
SCANNED_SUFFIXES = {".py", ".md", ".sh", ".yaml", ".yml", ".toml", ".txt", ".cfg", ".ini"}
SKIPPED_DIRS = {"__pycache__", ".git", "outputs", ".pytest_cache", ".ruff_cache"}

# A citation of a document the repository does not hold: "article 004", "Seed article 000", "issue 16", "issue #16",
# "the article's range", "the bar". Plain English ("avoid the issue") does not match.
ABSENT_DOCUMENT = re.compile(
    r"\barticles? \d{3}\b"
    r"|\bseed[- ]articles?\b"
    r"|\bissues? #?\d+\b"
    r"|\bthe (?:seed )?articles?'s?\b"
    r"|\bthe issue's\b",
    re.IGNORECASE,
)

HEX_WORD = re.compile(r"(?<![\w@./#-])[0-9a-f]{7,40}(?![\w-])")
URL = re.compile(r"https?://\S+")
ISO_DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
CHANGELOG = re.compile(
    r"^#+ .*\b(?:changelog|change log|release notes|what's new|history|news)\b"
    r"|^\s*[-*] (?:added|fixed|changed|removed|deprecated|bumped)\b"
    r"|^#+ v?\d+\.\d+(?:\.\d+)?\b",
    re.IGNORECASE | re.MULTILINE,
)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def readme() -> str:
    return README.read_text(encoding="utf-8")


def scanned_files() -> list[Path]:
    files = [README]
    for top in SCANNED_DIRS:
        for path in sorted((ROOT / top).rglob("*")):
            if SKIPPED_DIRS.intersection(path.relative_to(ROOT).parts):
                continue
            if path.is_file() and (path.suffix in SCANNED_SUFFIXES or path.name.startswith("Dockerfile")):
                files.append(path)
    return [f for f in files if f.resolve() != Path(__file__).resolve()]


def test_readme_is_short():
    text = readme()
    assert len(text) < 8000, f"README.md is {len(text)} characters (limit 8,000): move detail into docs/"
    long_lines = [f"{n}: {len(line)}" for n, line in enumerate(text.splitlines(), 1) if len(line) > 120]
    assert not long_lines, "README.md lines over 120 characters (line: length): " + ", ".join(long_lines)


def commit_hashes(text: str) -> list[str]:
    """7-40 hex-digit words with at least one digit and one letter, outside URLs and identifiers (a_b1c2d3e4,
    0x9e3779b9, pkg@abc1234, path/abc1234 are not words here)."""
    text = URL.sub(" ", text)
    words = HEX_WORD.findall(text)
    return [w for w in words if re.search(r"\d", w) and re.search(r"[a-f]", w)]


def test_commit_hash_detection():
    assert commit_hashes("fixed in 3bed223; see a1b2c3d4e5f6") == ["3bed223", "a1b2c3d4e5f6"]
    assert commit_hashes("https://github.com/o/r/commit/3bed223 deadbeef 1234567 x_3bed223 0x3bed2231") == []


def test_readme_has_no_commit_hashes_or_changelog():
    text = readme()
    assert not commit_hashes(text), (
        f"commit hashes in README.md (history belongs in docs/results.md): {commit_hashes(text)}"
    )
    dated = ISO_DATE.findall(URL.sub(" ", text))
    assert not dated, f"dated entries in README.md (history belongs in docs/results.md): {dated}"
    prose = [m.group(0).strip() for m in CHANGELOG.finditer(text)]
    assert not prose, f"changelog prose in README.md: {prose}"


def github_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces to hyphens, -1, -2 on
    repeats. Headings inside fenced code blocks are not headings."""
    anchors, seen = set(), {}
    in_fence = False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        m = re.match(r"#{1,6} +(.*?)\s*#*\s*$", line)
        if in_fence or not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).replace("`", "").strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def test_github_anchors():
    page = "# The Python API\n## `PPOTrainer`\n```\n# not a heading\n```\n" + "## Step callbacks (4.1)\n" * 2
    assert github_anchors(page) == {"the-python-api", "ppotrainer", "step-callbacks-41", "step-callbacks-41-1"}


def test_readme_links_resolve():
    links = [target for target in LINK.findall(readme()) if not re.match(r"[a-z][a-z0-9+.-]*:", target)]
    assert any(target.startswith("docs/") for target in links), "README.md links no docs/ page"
    broken = []
    for target in links:
        path, _, anchor = target.partition("#")
        file = ROOT / path if path else README
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in github_anchors(file.read_text(encoding="utf-8")):
            broken.append(f"{target}: no heading with that anchor in {path}")
    assert not broken, "README.md links that do not resolve:\n" + "\n".join(broken)


@pytest.mark.parametrize(
    "line",
    [
        "Article 000's argument groups",
        "(seed articles 000 and 004)",
        "within issue 16's 5-point bar",
        "issue #7",
        "the article's tip",
        "the issue's bound",
    ],
)
def test_absent_document_pattern_matches(line):
    assert ABSENT_DOCUMENT.search(line)


@pytest.mark.parametrize("line", ["avoid the issue entirely", "seed 1, 2 threads", "articles, \\text{} wrappers"])
def test_absent_document_pattern_spares_plain_english(line):
    assert not ABSENT_DOCUMENT.search(line)


def test_no_citations_of_absent_documents():
    hits = []
    for path in scanned_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if ABSENT_DOCUMENT.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:120]}")
    assert not hits, (
        "citations of documents the repository does not hold; name the feature and link its docs/ page instead:\n"
        + "\n".join(hits)
    )
