"""Every link in the README and docs/ leads to a file that exists.

The README points a newcomer at docs/ for everything it does not hold, and the pages point at
each other; a page renamed or moved without its links would strand the reader. Two kinds are
checked: markdown links and images (relative to the page, as a browser follows them) and the
plain `docs/NAME.md` mentions the pages use (relative to the repository).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKDOWN_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
DOCS_MENTION = re.compile(r"(?<![\w/.-])docs/[\w./-]+\.md\b")


def _targets(page: Path) -> list[tuple[str, Path]]:
    """Each link of `page` with the file it must name."""
    text = page.read_text(encoding="utf-8")
    found = []
    for target in MARKDOWN_LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL elsewhere, or an anchor on this page
        found.append((target, (page.parent / target.split("#", 1)[0]).resolve()))
    found += [(mention, ROOT / mention) for mention in DOCS_MENTION.findall(text)]
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_names_a_file_that_exists(page: Path) -> None:
    missing = [target for target, path in _targets(page) if not path.exists()]
    assert missing == [], f"{page.relative_to(ROOT)} links to what does not exist: {missing}"


def test_the_readme_links_every_page_of_docs() -> None:
    """A page no one links is a page no newcomer finds."""
    linked = {path for _, path in _targets(ROOT / "README.md")}
    unlinked = [p.name for p in PAGES[1:] if p.resolve() not in linked]
    assert unlinked == [], f"the README links none of {unlinked}"
