"""Token counts come from the real cl100k_base BPE, loaded without any network access."""

from __future__ import annotations

from service.kit.token_counting import count_tokens, encoding_for


def test_cl100k_counts_match_known_values() -> None:
    assert count_tokens("hello world") == 2
    assert encoding_for().encode("hello world") == [15339, 1917]
    assert count_tokens("") == 0


def test_special_token_text_is_counted_as_plain_text() -> None:
    assert count_tokens("<|endoftext|>") > 1


def test_unavailable_encodings_fall_back_to_cl100k() -> None:
    assert encoding_for("no-such-encoding").encode("hello world") == [15339, 1917]
