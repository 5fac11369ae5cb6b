"""Showing a message longer than a context block can hold: its beginning and its end, with a
marker between them that says how much is left out, so the model reading the block knows that
something was said there (a pasted log, a diary) and sees how it opens and what it ends on,
which is where a question after a pasted text usually is."""

from __future__ import annotations

from service.kit.token_counting import count_tokens, encoding_for

# A shortened message shows at least this many tokens of its own: less would be a marker
# alone, which says nothing the model can use.
SHORTENED_MIN_TOKENS = 8


def left_out_marker(tokens: int) -> str:
    """What stands in a shortened message for the `tokens` it leaves out."""
    return f" [… {tokens:,} tokens of this message not shown …] "


def shortened(prefix: str, content: str, most: int, encoding: str) -> str | None:
    """`content` cut to its beginning and its end, whole words, around `left_out_marker`, so
    that `prefix + content` counts at most `most` tokens; `content` itself when it fits, and
    None when fewer than `SHORTENED_MIN_TOKENS` of it would be left to show."""
    if count_tokens(prefix + content, encoding) <= most:
        return content
    coder = encoding_for(encoding)
    tokens = coder.encode(content, disallowed_special=())
    # The marker's count with the whole message's number in it: no shorter number is longer.
    room = (
        most - count_tokens(prefix, encoding) - count_tokens(left_out_marker(len(tokens)), encoding)
    )
    while room >= SHORTENED_MIN_TOKENS:
        head_tokens = (room + 1) // 2
        head = _whole_words_from_start(coder.decode(tokens[:head_tokens]))
        tail = _whole_words_to_end(coder.decode(tokens[len(tokens) - (room - head_tokens) :]))
        shown = count_tokens(head, encoding) + count_tokens(tail, encoding)
        text = f"{head}{left_out_marker(len(tokens) - shown)}{tail}".strip()
        over = count_tokens(prefix + text, encoding) - most
        if over <= 0:
            return text
        # Tokens merge differently where the pieces meet: ask for fewer and try again.
        room -= over
    return None


def _whole_words_from_start(text: str) -> str:
    """`text` up to its last whitespace (all of it when it has none, as Chinese or Japanese
    text), without a character the cut split (decoded as U+FFFD)."""
    cut = max(text.rfind(" "), text.rfind("\n"))
    return (text[:cut] if cut > 0 else text).rstrip("\ufffd").rstrip()


def _whole_words_to_end(text: str) -> str:
    """`text` from after its first whitespace (see `_whole_words_from_start`)."""
    starts = [index for index in (text.find(" "), text.find("\n")) if index >= 0]
    cut = min(starts) if starts else -1
    return (text[cut + 1 :] if 0 <= cut < len(text) - 1 else text).lstrip("\ufffd").lstrip()
