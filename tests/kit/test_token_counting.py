"""Token counts come from the real cl100k_base BPE, loaded without any network access."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.kit.token_counting import EncodingUnavailable, _load, count_tokens, encoding_for


def test_cl100k_counts_match_known_values() -> None:
    assert count_tokens("hello world") == 2
    assert encoding_for().encode("hello world") == [15339, 1917]
    assert count_tokens("") == 0


def test_special_token_text_is_counted_as_plain_text() -> None:
    assert count_tokens("<|endoftext|>") > 1


def test_cl100k_is_served_from_the_bundled_file_under_its_public_name() -> None:
    assert encoding_for("cl100k_base").encode("hello world") == [15339, 1917]


@pytest.mark.parametrize("name", ["no-such-encoding", "o200k"])
def test_unknown_encodings_are_refused(name: str) -> None:
    with pytest.raises(EncodingUnavailable, match="unknown"):
        encoding_for(name)


def test_an_encoding_neither_bundled_nor_cached_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An empty cache and no network: o200k_base cannot be loaded, so it is not counted at all.
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(
        "tiktoken.load.read_file", lambda blobpath: (_ for _ in ()).throw(OSError("offline"))
    )
    _load.cache_clear()
    try:
        with pytest.raises(EncodingUnavailable, match="not available offline"):
            encoding_for("o200k_base")
    finally:
        _load.cache_clear()
