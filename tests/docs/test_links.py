"""Every relative link of the README and docs/ leads somewhere: the file exists and, when the
link names a section, the file has a heading with that anchor (GitHub's rule for anchors)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.docs.snippets import REPOSITORY

_LINK = re.compile(r"\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6} (.+)$", flags=re.MULTILINE)
_FENCED = re.compile(r"^```.*?^```", flags=re.MULTILINE | re.DOTALL)


def documents() -> list[Path]:
    return [REPOSITORY / "README.md", *sorted((REPOSITORY / "docs").glob("*.md"))]


def anchors(document: Path) -> set[str]:
    """The anchors GitHub gives the headings of `document`: lower case, punctuation dropped,
    spaces as hyphens."""
    prose = _FENCED.sub("", document.read_text())
    return {
        re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        for heading in _HEADING.findall(prose)
    }


def test_every_relative_link_of_the_docs_leads_to_a_file_and_section() -> None:
    broken: list[str] = []
    for document in documents():
        prose = _FENCED.sub("", document.read_text())
        for target in _LINK.findall(prose):
            if re.match(r"^[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (document.parent / path).resolve() if path else document
            if not linked.exists():
                broken.append(f"{document.name}: {target} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                broken.append(f"{document.name}: {target} (no such section)")
    assert broken == []
