"""Quotes found as a reader finds them (typography, compatibility forms, case and spacing
aside), and answered in the quoted text's own characters."""

from __future__ import annotations

import pytest

from service.kit.quoting import fold, quoted_span

APOSTROPHE = "\u2019"
CURLY_QUOTES = ("\u201c", "\u201d")


@pytest.mark.parametrize(
    ("typed", "quoted"),
    [
        (f"I{APOSTROPHE}m here", "I'm here"),
        ("\u2018yes\u2019", "'yes'"),
        (f"{CURLY_QUOTES[0]}home{CURLY_QUOTES[1]}", '"home"'),
        ("\u00abhome\u00bb", '"home"'),
        ("\u201ehome\u201f", '"home"'),
        ("9\u20135", "9-5"),
        ("now \u2014 later", "now - later"),
        ("a\u2011b\u2010c\u2212d", "a-b-c-d"),
        ("\uff19\u2013\uff15", "9-5"),  # full-width digits
        ("\ufb01nance", "finance"),  # a ligature
        ("wait\u2026", "wait..."),
        ("caf\u00e9", "cafe\u0301"),  # composed and decomposed
        ("no\u00a0break", "no break"),
        ("  EVERY\n\tmorning ", "every morning"),
        ("STRASSE", "stra\u00dfe"),
    ],
)
def test_typography_compatibility_forms_case_and_spacing_fold_alike(
    typed: str, quoted: str
) -> None:
    assert fold(typed) == fold(quoted)


def test_the_span_is_the_texts_own_words_however_the_quote_is_typed() -> None:
    text = (
        f"Well, I{APOSTROPHE}m based in Berlin \u2014 {CURLY_QUOTES[0]}the best{CURLY_QUOTES[1]}!"
    )
    assert quoted_span(fold("i'm BASED in"), text) == f"I{APOSTROPHE}m based in"
    assert quoted_span(fold('berlin - "the best"'), text) == (
        f"Berlin \u2014 {CURLY_QUOTES[0]}the best{CURLY_QUOTES[1]}"
    )
    assert quoted_span(fold("every morning"), "I run EVERY\n\n morning.") == "EVERY\n\n morning"
    assert quoted_span(
        fold("9-5 at the finance"), "I work \uff19\u2013\uff15 at the \ufb01nance"
    ) == ("\uff19\u2013\uff15 at the \ufb01nance")


def test_a_span_keeps_whole_characters() -> None:
    # The text spells the accent as a combining mark: the span ends after it.
    assert quoted_span(fold("caf\u00e9"), "a cafe\u0301 au lait") == "cafe\u0301"


def test_no_span_for_a_quote_the_text_does_not_hold() -> None:
    assert quoted_span(fold("I'm in Paris"), f"I{APOSTROPHE}m in Berlin") is None
    assert quoted_span(fold("  "), "anything") is None
