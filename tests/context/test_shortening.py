"""A message too long for a block: its beginning and its end, whole words, around a marker
that says how much is left out, within the tokens it is given."""

from __future__ import annotations

import pytest

from service.context.shortening import SHORTENED_MIN_TOKENS, shortened
from service.kit.token_counting import count_tokens

DIARY = (
    "Here is my diary. "
    + " ".join(f"Day {day}: I watered the basil, then read for an hour." for day in range(300))
    + " Which day was the hottest?"
)


def test_a_message_that_fits_is_shown_as_it_is() -> None:
    assert shortened("user: ", "What about peppers?", 10, "cl100k_base") == "What about peppers?"


@pytest.mark.parametrize("most", [30, 40, 77, 200, 1000])
def test_a_long_message_keeps_its_beginning_and_its_end_in_whole_words(most: int) -> None:
    text = shortened("user: ", DIARY, most, "cl100k_base")

    assert text is not None and count_tokens("user: " + text) <= most
    head, _, rest = text.partition(" [… ")
    left_out, _, tail = rest.partition(" tokens of this message not shown …] ")
    assert DIARY.startswith(head) and DIARY[len(head)] == " "
    assert DIARY.endswith(tail) and DIARY[-len(tail) - 1] == " "
    assert tail.endswith("Which day was the hottest?") or not tail
    # Roughly what the two pieces do not show.
    shown = count_tokens(head) + count_tokens(tail)
    assert int(left_out.replace(",", "")) == count_tokens(DIARY) - shown


def test_text_without_spaces_is_cut_between_characters() -> None:
    text = shortened("user: ", "寿司が大好き。" * 400, 40, "cl100k_base")

    assert text is not None and count_tokens("user: " + text) <= 40
    assert text.startswith("寿司") and text.endswith("き。") and "\ufffd" not in text


def test_too_few_tokens_to_show_anything_but_the_marker_is_none() -> None:
    marker_alone = count_tokens("user:  [… 2,000 tokens of this message not shown …] ")
    assert (
        shortened("user: ", DIARY, marker_alone + SHORTENED_MIN_TOKENS - 2, "cl100k_base") is None
    )
