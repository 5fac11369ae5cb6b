"""Finding a quote in a text as a reader would: typography, case and spacing aside.

A quote and its source are compared folded (`fold`): Unicode NFKC (full-width letters and
digits, ligatures, the ellipsis and no-break spaces become their plain forms), typographic
quotes, apostrophes and dashes as their ASCII forms, case folded, each run of whitespace one
space. A model that writes `I'm` where the text has a right single quotation mark (U+2019),
straight quotes for curly ones or a hyphen for a dash quotes the same words. The fold is for
comparing only: `quoted_span` answers with the text's own characters.
"""

from __future__ import annotations

import re
import unicodedata

_WHITESPACE = re.compile(r"\s+")

# Applied after NFKC, which leaves these as they are (it maps the full-width quotes and
# hyphen-minus, U+FF02, U+FF07 and U+FF0D, and the small dashes itself).
_TYPOGRAPHY = str.maketrans(
    {
        # apostrophes and single quotes
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u02bc": "'",
        "\u2039": "'",
        "\u203a": "'",
        # double quotes
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u201f": '"',
        "\u00ab": '"',
        "\u00bb": '"',
        # hyphens, dashes and the minus sign
        "\u2010": "-",
        "\u2011": "-",
        "\u2012": "-",
        "\u2013": "-",
        "\u2014": "-",
        "\u2015": "-",
        "\u2212": "-",
    }
)


def fold(text: str) -> str:
    """`text` as quotes are compared: NFKC, typographic quotes, apostrophes and dashes in
    ASCII, case folded, whitespace runs one space, trimmed."""
    folded = unicodedata.normalize("NFKC", text).translate(_TYPOGRAPHY).casefold()
    return _WHITESPACE.sub(" ", folded).strip()


def quoted_span(folded_quote: str, text: str) -> str | None:
    """The shortest part of `text` that says `folded_quote` (a quote already `fold` d), in
    `text`'s own characters; None when `text` does not hold it (or the quote is empty).

    Found by the fold itself, so the part folds to a text holding the quote whatever the fold
    does to the characters around it: the shortest prefix of `text` that holds the quote, then
    the shortest end of that prefix that still does, widened to whole characters (a base
    character with its combining marks)."""
    if not folded_quote or folded_quote not in fold(text):
        return None
    # Invariant of both searches: the part of `text` they keep holds the quote.
    low, end = 1, len(text)
    while low < end:
        middle = (low + end) // 2
        if folded_quote in fold(text[:middle]):
            end = middle
        else:
            low = middle + 1
    start, high = 0, end - 1
    while start < high:
        middle = (start + high + 1) // 2
        if folded_quote in fold(text[middle:end]):
            start = middle
        else:
            high = middle - 1
    while end < len(text) and _is_mark(text[end]):
        end += 1
    while start > 0 and _is_mark(text[start]):
        start -= 1
    return text[start:end]


def _is_mark(character: str) -> bool:
    """A combining mark, which belongs to the character before it."""
    return unicodedata.category(character).startswith("M")
