"""A job's payload is read under the API's input rules: a handler never starts on a tenant id
or thread id the API would have refused."""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.jobs.queue import PayloadError, decode_payload, encode_payload
from service.kit.types import is_valid_identifier

THREAD = "0b7e4f1c-5d2a-4c3e-9f6b-2a8d1e7c4b90"


def test_a_payload_the_queue_wrote_reads_back() -> None:
    payload = {"tenant_id": "acme", "thread_id": THREAD, "org_writes": "true"}
    assert decode_payload(encode_payload(payload)) == payload


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"[1, 2]",
        b'{"n": 1}',
        b'{"n": "1", "x": 1e400}',
        b'{"tenant_id": "acme\\n", "thread_id": "' + THREAD.encode() + b'"}',
        b'{"tenant_id": "a/b"}',
        b'{"tenant_id": "acme", "thread_id": "not-a-uuid"}',
        b'{"tenant_id": "acme\\u0000"}',
        b"[" * 5000 + b"]" * 5000,
    ],
)
def test_a_payload_outside_the_rules_is_unreadable(raw: bytes) -> None:
    with pytest.raises(PayloadError):
        decode_payload(raw)


@given(
    st.binary(max_size=64)
    | st.dictionaries(st.sampled_from(["tenant_id", "thread_id", "n"]), st.text(max_size=12)).map(
        lambda values: json.dumps(values).encode()
    )
)
def test_any_payload_reads_as_strings_under_the_rules_or_is_unreadable(raw: bytes) -> None:
    try:
        values = decode_payload(raw)
    except PayloadError:
        return
    assert all(isinstance(v, str) for v in values.values())
    assert "tenant_id" not in values or is_valid_identifier(values["tenant_id"], 128)
    assert "thread_id" not in values or uuid.UUID(values["thread_id"])
