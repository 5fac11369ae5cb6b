"""One secret policy for every durable write, and masked secrets when messages are replayed."""

from __future__ import annotations

import random
import unicodedata
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any

import pytest
from httpx import AsyncClient
from hypothesis import given
from hypothesis import strategies as st

from service.config import Settings
from service.embedded_postgres import EmbeddedCluster
from service.kit import secrets as secrets_module
from service.kit.secrets import (
    MASK,
    find_secret,
    find_secret_in,
    mask_secrets,
    mask_secrets_in,
    mask_secrets_memo,
)
from service.main import create_app
from tests.conftest import assert_problem, bearer
from tests.extraction.conftest import say, serve, wait_for_passes, write_path_settings
from tests.fixtures.factories import memories, start_thread
from tests.secret_samples import SAMPLES

# A well-formed JWT (header and payload decode to JSON), as an identity provider issues them.
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkFkYSJ9"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
SECRETS = {
    "jwt": f"my session token is {JWT}",
    "bearer": "use Authorization: Bearer abcdef0123456789abcdef0123456789",
    "aws": "key AKIAIOSFODNN7EXAMPLE for the bucket",
    "github": "token ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "card": "card 4111 1111 1111 1111 exp 12/29",
    "ssn": "ssn 123-45-6789",
    "pem": "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
    "password": "password: hunter2hunter2",
    "openai": "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789",
    "slack": "xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx",
    "aws_secret": "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "github_fine_grained": "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKL",
    "npm": "npm_abcdefghijklmnopqrstuvwxyz0123456789",
    "huggingface": "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH",
    "basic": "Authorization: Basic YWRhOmh1bnRlcjJodW50ZXIy",
    "stated_password": "my password is hunter2hunter2",
    "stated_passcode": "the door passcode was 88121999",
    "bare_password": "User shared things, password Hunter2Pass9.",
    "pin": "my PIN is 4821",
    "passcode_assignment": "passcode: letmein123",
    "connection_pwd": "Server=db;Uid=sa;Pwd=Sup3rS3cret;",
    "ssn_spaced": "SSN 123 45 6789",
    "ssn_digits": "my social security number is 123456789",
    "card_dotted": "card 4111.1111.1111.1111",
    "card_no_break_spaces": "card 4111\u00a01111\u00a01111\u00a01111",
    # An Artifactory API key: "AKCp" and 69 letters and digits.
    "artifactory": "export ARTIFACTORY_TOKEN="
    "AKCp5bueTFpfypEqQbGJPp7eHFi28fBivfWczrjbPb9erDff9LbXZbj6UsRExVXA8asWGc8fM",
}
# Secrets split by characters nobody sees: each is found, and masking removes them whole.
SPLIT_BY_INVISIBLE_CHARACTERS = [
    ("card ", "4111\u200b1111\u200b1111\u200b1111"),
    ("use ", "ghp_abcdefghijklmn\u00adopqrstuvwxyz0123456789"),
    ("ssn ", "123\u2060-45-\ufeff6789"),
    ("key ", "AKIA\u200dIOSFODNN7EXAMPLE"),
]
# AWS's documented example secret access key: 40 characters of base64.
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
AWS_SECRET_FORMS = [
    f"aws_secret_access_key={AWS_SECRET}",
    f"AWS_SECRET_ACCESS_KEY = {AWS_SECRET}",
    f'export AWS_SECRET_ACCESS_KEY="{AWS_SECRET}"',
    f'{{"AccessKeyId": "ASIAXYZXYZXYZXYZXYZA", "SecretAccessKey": "{AWS_SECRET}"}}',
    f"my AWS secret key is {AWS_SECRET}, keep it safe",
    f"secret access key: {AWS_SECRET}",
    f"AKIAIOSFODNN7EXAMPLE,{AWS_SECRET}",
    f"aws_secret = '{AWS_SECRET}'",
]
# 40 characters that are not AWS secrets: nothing labels them as one, and on their own they do
# not look random (a hash without capitals, a word, paths and ids with words in them).
FORTY_CHARACTERS = [
    "the commit 9fceb02d0ae598e95dc970b74767f19372d61af8 fixed the build",
    "sha1 da39a3ee5e6b4b0d3255bfef95601890afd80709 of the empty file",
    "Pneumonoultramicroscopicsilicovolcanoconiosis is a long word",
    "we rotated the AWS secret access key last week; the new one is in the vault",
    "AKIA is the prefix of AWS access key ids, 20 characters long",
    "open src/Components/Button2/IndexFile/abcdefg today",
    "see Users/Ada/Documents/Project2024/NotesAbc for it",
    "the notes are in 2024/05/01/MeetingNotes/Version3/FinalAb",
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ/abcdefghijklm is the alphabet",
]
# AWS secret access keys on their own, as a user pastes them: random base64 of 40 characters.
BARE_AWS_SECRETS = [
    f"the upload id was {AWS_SECRET} yesterday",
    "here it is: 9dK2/xQv7LmZr4TnB8pWc1YhJ6sGf0Ua3EoNiR5q",
    "Kq8ZmW3xR1v/Tn5Yb7Lc0Pd2Jf4Hg6Sa9Ue+Io3M",
]
HARMLESS = [
    "I had pasta for dinner on 2024-05-01 and it cost $12.50.",
    "My order number is 1234 5678 9012 and my phone is +1 555 010 0199.",
    "The meeting is in room 101; the wifi is slow again.",
    "eyes on the prize: 192.168.1.1 is the router",
    "my password is forgotten, and the password is on the fridge",
    "password reset on 2024-05-01; password 20240501 expired; my password manager v12 works",
    "basic internationalization matters; Basic training starts Monday",
    "pi is 3.14159265358979 and the version is 1.2.3.4",
    "the pin is 3 inches long; pwd: /home/ada",
    "the social security office is on 5th avenue",
    # Capitals after "AP" and a hex digit, which a generic Artifactory pattern takes for an
    # encrypted password.
    "We migrated the pipeline to APACHESPARK; part AP123456789 is out of stock",
]


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_each_kind_of_secret_is_found_and_masked(kind: str) -> None:
    text = SECRETS[kind]
    assert find_secret(text) is not None
    masked = mask_secrets(text)
    assert MASK in masked
    assert find_secret(masked) is None


def test_the_remembered_masking_masks_alike_and_keeps_no_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A replayed turn is masked once and then remembered: the same result every time, and the
    memory holds the masked text only, never the secret, and at most its bound of texts."""
    monkeypatch.setattr(secrets_module, "_masked", OrderedDict())
    monkeypatch.setattr(secrets_module, "_MASKED_KEPT", 3)
    texts = [f"note {n}: {SECRETS[kind]}" for n, kind in enumerate(sorted(SECRETS))]
    texts += [*HARMLESS[:4], "x" * 5000 + SECRETS[sorted(SECRETS)[0]]]
    for _ in range(2):
        for text in texts:
            assert mask_secrets_memo(text) == mask_secrets(text)
    kept = secrets_module._masked
    assert len(kept) == 3
    for key, masked in kept.items():
        assert find_secret(masked) is None
        assert all(SECRETS[kind].encode() not in key for kind in SECRETS)
    # The longest text is masked each time, not kept.
    assert all(len(masked) < 4096 for masked in kept.values())


@pytest.mark.parametrize(("before", "secret"), SPLIT_BY_INVISIBLE_CHARACTERS)
def test_a_secret_split_by_invisible_characters_is_found_and_masked_whole(
    before: str, secret: str
) -> None:
    assert find_secret(before + secret) is not None
    assert mask_secrets(f"{before}{secret} ok") == f"{before}{MASK} ok"


# Format characters (category Cf) a reader never sees.
INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u200e", "\u2062"]


def _readable(text: str) -> str:
    return "".join(ch for ch in text if unicodedata.category(ch) != "Cf")


@given(
    kind=st.sampled_from(sorted(SAMPLES)),
    insertions=st.lists(
        st.tuples(st.integers(min_value=0), st.sampled_from(INVISIBLE)), min_size=1, max_size=6
    ),
)
def test_invisible_characters_anywhere_in_a_secret_neither_hide_it_nor_survive_its_mask(
    kind: str, insertions: list[tuple[int, str]]
) -> None:
    text = SAMPLES[kind].text
    for position, character in insertions:
        at = position % (len(text) + 1)
        text = text[:at] + character + text[at:]
    assert find_secret(text) is not None
    assert _readable(SAMPLES[kind].core) not in _readable(mask_secrets(text))


@pytest.mark.parametrize("text", AWS_SECRET_FORMS)
def test_an_aws_secret_access_key_is_found_when_labelled_and_masked_whole(text: str) -> None:
    assert find_secret(text) is not None
    masked = mask_secrets(text)
    assert AWS_SECRET not in masked and MASK in masked
    # The key alone, without its label, is what masking removes; the label stays readable.
    assert "AKIAIOSFODNN7EXAMPLE" not in masked


@pytest.mark.parametrize("text", FORTY_CHARACTERS)
def test_forty_characters_without_an_aws_label_are_not_a_secret(text: str) -> None:
    assert find_secret(text) is None
    assert mask_secrets(text) == text


@pytest.mark.parametrize("text", BARE_AWS_SECRETS)
def test_an_aws_secret_access_key_on_its_own_is_found_when_it_looks_random(text: str) -> None:
    found = find_secret(text)
    assert found is not None and found.rule == "cloud_access_key"
    key = text[found.start : found.end]
    assert len(key) == 40 and mask_secrets(text) == text.replace(key, MASK)


def test_an_aws_secret_under_a_credential_named_json_key_is_refused() -> None:
    for key in ("aws_secret_access_key", "SecretAccessKey", "awsSecret"):
        located = find_secret_in({"aws": {key: "anything-at-all"}})
        assert located is not None and located[0] == ("aws", key)


def test_json_is_masked_as_it_is_refused_keys_included_and_other_values_kept() -> None:
    tool_calls = [
        {
            "id": "call_1",
            "function": {"name": "login", "arguments": '{"user": "ada", "pin": "my PIN is 4821"}'},
        },
        {"id": "call_2", "retries": 3, "ok": True, "note": None},
    ]
    metadata = {
        "api_key": "anything-at-all",
        "passwords": ["one", "two"],
        "AKIAIOSFODNN7EXAMPLE": "a key named by its secret",
        "nested": {"card": "4111 1111 1111 1111", "blank_token": " "},
        "channel": "web",
    }

    masked_calls = mask_secrets_in(tool_calls)
    masked_metadata = mask_secrets_in(metadata)

    assert masked_calls[1] == tool_calls[1]
    assert masked_calls[0]["function"]["name"] == "login"
    assert "4821" not in str(masked_calls) and MASK in masked_calls[0]["function"]["arguments"]
    assert masked_metadata == {
        "api_key": MASK,
        "passwords": [MASK, MASK],
        MASK: "a key named by its secret",
        "nested": {"card": MASK, "blank_token": " "},
        "channel": "web",
    }


def test_masking_a_jwt_removes_all_three_segments_of_every_occurrence() -> None:
    header, payload, signature = JWT.split(".")
    text = f"first {JWT}. Then again: {JWT}\nand unsigned {header}.{payload}. Done."
    masked = mask_secrets(text)
    for segment in (header, payload, signature):
        assert segment not in masked
    # (detect-secrets spans an unsigned token with its closing dot.)
    assert masked == f"first {MASK}. Then again: {MASK}\nand unsigned {MASK} Done."


def test_every_occurrence_of_a_repeated_secret_is_masked() -> None:
    # A SendGrid key: found by detect-secrets, which names what it found but not where.
    sendgrid = "SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG"
    masked = mask_secrets(f"{sendgrid} and again {sendgrid}")
    assert masked == f"{MASK} and again {MASK}"


# Its digits across the hyphens ("3390-4770-8015-11") pass the Luhn checksum.
UUID_WITH_A_CARDS_DIGITS = "98c828d5-3390-4770-8015-11eb0d9b420c"


def test_an_identifier_in_the_uuid_format_is_never_a_card_number() -> None:
    for text in (
        UUID_WITH_A_CARDS_DIGITS,
        UUID_WITH_A_CARDS_DIGITS.upper(),
        f"supersedes {UUID_WITH_A_CARDS_DIGITS}, see the thread",
        f'{{"proposed_supersedes": ["{UUID_WITH_A_CARDS_DIGITS}"]}}',
    ):
        assert find_secret(text) is None, text
        assert mask_secrets(text) == text
    # About one random UUID in 400 looked like a card before; none of 20,000 may now.
    ids = random.Random(400)
    for _ in range(20_000):
        identifier = str(uuid.UUID(int=ids.getrandbits(128), version=4))
        assert find_secret(identifier) is None, identifier


def test_a_card_number_beside_an_identifier_is_still_found_and_masked_alone() -> None:
    text = f"order {UUID_WITH_A_CARDS_DIGITS} paid with 4111-1111-1111-1111"
    assert find_secret(text) is not None
    assert mask_secrets(text) == f"order {UUID_WITH_A_CARDS_DIGITS} paid with {MASK}"


# The networks' published test numbers, one per number range a card network issues from.
TEST_CARDS = {
    "Visa": "4111 1111 1111 1111",
    "Mastercard": "5555 5555 5555 4444",
    "Mastercard, 2-series": "2223 0031 2200 3222",
    "American Express": "3782 822463 10005",
    "American Express, 34": "3400 000000 00009",
    "Discover": "6011 1111 1111 1117",
    "JCB": "3530 1113 3330 0000",
    "Diners Club": "3056 930902 5904",
    "UnionPay": "6200 0000 0000 0005",
    "Maestro": "6759 6498 2643 8453",
}


@pytest.mark.parametrize("network", sorted(TEST_CARDS))
def test_a_card_number_of_every_network_is_found(network: str) -> None:
    number = TEST_CARDS[network]
    assert find_secret(f"my card is {number}") is not None
    assert find_secret(f"my card is {number.replace(' ', '')}") is not None
    assert mask_secrets(f"pay with {number} today") == f"pay with {MASK} today"
    # Written in other digits: fullwidth, Arabic-Indic.
    for zero in (0xFF10, 0x0660):
        other_digits = "".join(chr(zero + int(char)) if char.isdigit() else char for char in number)
        assert find_secret(f"my card is {other_digits}") is not None, other_digits


def test_timestamps_ids_digests_and_phone_numbers_are_not_cards() -> None:
    # Each of these passes the Luhn checksum, as one number in ten does.
    for text in (
        "the event at 1733753037352 ms",  # a millisecond timestamp
        "discord user 1100000000000000015",  # a snowflake id
        "exported 20240501120008 UTC",  # yyyymmddhhmmss
        "invoice 7000000000000005",
        "ticket 3100000000000003",
    ):
        assert find_secret(text) is None, text
    # Digits inside a hex digest (4751324109739) and after the "+" of a phone number.
    assert find_secret("d989f9558ac9129f817904b0b409e194faaf7f1707dd4751324109739b76fbb0") is None
    assert find_secret("call +4834008596635 or +49 151 23456789") is None
    # A Luhn checksum passed one timestamp and one snowflake in ten; none may be a card now.
    numbers = random.Random(10)
    for _ in range(5_000):
        timestamp = 1_700_000_000_000 + numbers.randrange(10**11)
        snowflake = 1_100_000_000_000_000_000 + numbers.randrange(10**18)
        assert find_secret(f"at {timestamp}, id {snowflake}") is None, (timestamp, snowflake)
        digest = numbers.randbytes(32).hex()
        phone = f"+4{numbers.randrange(10**11, 10**12)}"
        assert find_secret(f"commit {digest}, phone {phone}") is None, (digest, phone)


@pytest.mark.parametrize("text", HARMLESS)
def test_ordinary_text_is_not_a_secret(text: str) -> None:
    assert find_secret(text) is None
    assert mask_secrets(text) == text


def test_json_values_are_searched_in_keys_values_and_credential_named_fields() -> None:
    assert find_secret_in({"a": [{"b": SECRETS["jwt"]}]}) is not None
    assert find_secret_in({SECRETS["aws"]: 1}) is not None
    located = find_secret_in({"service": {"wifi_password": "correct horse"}}, ("body",))
    assert located is not None and located[0] == ("body", "service", "wifi_password")
    assert find_secret_in({"max_tokens": 300, "topic": "gardening"}) is None


@pytest.mark.parametrize("kind", ["jwt", "bearer", "card", "aws", "aws_secret"])
async def test_memory_text_and_metadata_refuse_every_secret_kind(
    client: AsyncClient, settings: Settings, tenant: str, kind: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    for body in (
        {"text": SECRETS[kind]},
        {"text": "fine", "evidence": SECRETS[kind]},
        {"text": "fine", "metadata": {"note": SECRETS[kind]}},
    ):
        response = await client.post("/v1/users/me/memories", json=body, headers=headers)
        assert_problem(response, 422, "SECRET_REFUSED")
        assert SECRETS[kind] not in response.text
    stored = await client.post("/v1/users/me/memories", json={"text": "fine"}, headers=headers)
    patched = await client.patch(
        f"/v1/users/me/memories/{stored.json()['id']}",
        json={"metadata": {"k": SECRETS[kind]}},
        headers=headers,
    )
    assert_problem(patched, 422, "SECRET_REFUSED")
    listing = await client.get("/v1/users/me/memories", headers=headers)
    assert [m["metadata"] for m in listing.json()["items"]] == [{}]


@pytest.mark.parametrize("kind", ["jwt", "card", "aws", "ssn", "aws_secret"])
async def test_profile_values_and_the_account_overlay_refuse_secrets(
    client: AsyncClient, settings: Settings, tenant: str, kind: str
) -> None:
    user = bearer(settings, tenant, "ada")
    patch = [{"op": "add", "path": "/note", "value": SECRETS[kind]}]
    response = await client.patch(
        "/v1/users/me/profile",
        json=patch,
        headers={**user, "content-type": "application/json-patch+json"},
    )
    assert_problem(response, 422, "SECRET_REFUSED")
    profile = (await client.get("/v1/users/me/profile", headers=user)).json()
    assert "note" not in str(profile)

    service = bearer(settings, tenant, "svc", service=True)
    overlay = await client.put(
        "/v1/users/bob/account", json={"name": SECRETS[kind]}, headers=service
    )
    assert_problem(overlay, 422, "SECRET_REFUSED")


@pytest.fixture(scope="module")
async def masking_client(cluster: EmbeddedCluster) -> AsyncIterator[AsyncClient]:
    async for client in serve(create_app(write_path_settings(cluster))):
        yield client


async def _window_and_context(
    client: AsyncClient, headers: dict[str, str], thread_id: str
) -> tuple[Any, Any]:
    window = await client.get(f"/v1/users/me/threads/{thread_id}/window", headers=headers)
    context = await client.post(
        "/v1/users/me/context",
        json={"query": "session token", "thread_id": thread_id},
        headers=headers,
    )
    assert window.status_code == 200 and context.status_code == 200
    return window.json(), context.json()


async def test_a_jwt_in_a_message_is_stored_as_sent_never_remembered_and_masked_on_replay(
    masking_client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    thread_id = await start_thread(masking_client, headers)
    await say(masking_client, headers, thread_id, SECRETS["jwt"], "Noted.")
    passes = await wait_for_passes(masking_client, headers, 1)
    assert sum(p["dropped"].get("secret", 0) for p in passes) == 1
    assert await memories(masking_client, headers) == []

    messages = await masking_client.get(
        f"/v1/users/me/threads/{thread_id}/messages", headers=headers
    )
    assert messages.json()["items"][0]["content"] == SECRETS["jwt"]
    window, context = await _window_and_context(masking_client, headers, thread_id)
    assert JWT not in str(window) and MASK in window["messages"][0]["content"]
    assert JWT not in context["text"] and MASK in context["text"]


@pytest.mark.parametrize("kind", sorted(SAMPLES))
async def test_a_secret_in_a_message_is_stored_as_sent_and_masked_whole_on_replay(
    client: AsyncClient, settings: Settings, tenant: str, kind: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    sample = SAMPLES[kind]
    thread_id = await start_thread(client, headers)
    appended = await client.post(
        f"/v1/users/me/threads/{thread_id}/messages",
        headers=headers,
        json={"messages": [{"role": "user", "content": sample.text}]},
    )
    assert appended.status_code == 201, appended.text

    window = await client.get(f"/v1/users/me/threads/{thread_id}/window", headers=headers)
    context = await client.post(
        "/v1/users/me/context", json={"query": sample.text, "thread_id": thread_id}, headers=headers
    )

    assert window.json()["messages"][0]["content"] != sample.text
    assert sample.core not in window.text and MASK in window.text
    assert sample.core not in context.text and MASK in context.json()["text"]


async def test_replay_can_be_configured_to_keep_messages_as_sent(
    cluster: EmbeddedCluster, settings: Settings, tenant: str
) -> None:
    keeping = create_app(write_path_settings(cluster, message_secrets_on_replay="keep"))
    async for client in serve(keeping):
        headers = bearer(settings, tenant, "ada")
        thread_id = await start_thread(client, headers)
        await say(client, headers, thread_id, SECRETS["jwt"], "Noted.")
        window, _context = await _window_and_context(client, headers, thread_id)
        assert window["messages"][0]["content"] == SECRETS["jwt"]


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ("use sk-proj-abcdefghijklmnopqrstuvwxyz123456", "what looks like an API token"),
        ("My SSN is 123-45-6789", "what looks like a US social security number"),
        ("Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l", "what looks like HTTP Basic"),
    ],
)
async def test_a_refusal_names_what_it_found_in_plain_english(
    client: AsyncClient, settings: Settings, value: str, named: str
) -> None:
    headers = bearer(settings, "t-" + uuid.uuid4().hex[:12], "ada")
    refused = await client.post("/v1/users/me/memories", headers=headers, json={"text": value})
    body = assert_problem(refused, 422, "SECRET_REFUSED")
    assert body["detail"].startswith(f"Refusing to store {named}"), body["detail"]
