"""The pure rules under the profile API: merging, patch application, sizes and ETags."""

from __future__ import annotations

from typing import Any

import pytest

from service.auth.principal import AccountClaims
from service.profile.errors import KeyFromAccount, PatchFailed
from service.profile.schemas import PatchOperation, ProfilePatch
from service.profile.service import (
    apply_patches,
    document_bytes,
    merge_profile,
    overlay_values,
    profile_etag,
)

OVERLAY: dict[str, Any] = {"name": "Ada", "email": "ada@example.test", "socials": ["github"]}


def operations(*raw: dict[str, Any]) -> list[PatchOperation]:
    return ProfilePatch.model_validate(list(raw)).root


def test_merge_lists_account_keys_first_then_stored_keys_alphabetically() -> None:
    merged = merge_profile({"zip": "1000", "city": "Lisbon", "email": None}, OVERLAY)
    assert list(merged.document) == ["name", "socials", "city", "email", "zip"]
    assert merged.document["email"] is None
    assert merged.sources == {
        "name": "account",
        "socials": "account",
        "city": "memory",
        "email": "memory",
        "zip": "memory",
    }


def test_overlay_values_drop_empty_fields_and_the_password_provider() -> None:
    claims = AccountClaims(name="Ada", email=None, avatar="", socials=("credential", "google"))
    assert overlay_values(claims) == {"name": "Ada", "socials": ["google"]}
    assert overlay_values(AccountClaims(socials=("credential",))) == {}


def test_patches_keep_stored_and_touched_keys_only() -> None:
    outcome = apply_patches(
        {"city": "Lisbon"},
        OVERLAY,
        operations({"op": "replace", "path": "/email", "value": "new@example.test"}),
    )
    assert outcome.stored == {"city": "Lisbon", "email": "new@example.test"}


def test_old_values_follow_the_sequence_of_operations() -> None:
    outcome = apply_patches(
        {"city": "Lisbon"},
        {},
        operations(
            {"op": "add", "path": "/city", "value": "Porto"},
            {"op": "replace", "path": "/city", "value": "Faro"},
            {"op": "remove", "path": "/city"},
        ),
    )
    assert [patch.old_value for patch in outcome.applied] == ["Lisbon", "Porto", "Faro"]
    assert outcome.stored == {}


@pytest.mark.parametrize(("old", "new"), [(1, True), (0, False), (1, 1.5)])
def test_a_different_json_value_is_a_change_even_if_python_calls_it_equal(
    old: Any, new: Any
) -> None:
    outcome = apply_patches(
        {"flag": old}, {}, operations({"op": "replace", "path": "/flag", "value": new})
    )
    assert type(outcome.stored["flag"]) is type(new)


def test_stored_input_is_not_mutated() -> None:
    stored: dict[str, Any] = {"pets": ["cat"]}
    apply_patches(stored, {}, operations({"op": "replace", "path": "/pets", "value": []}))
    assert stored == {"pets": ["cat"]}


@pytest.mark.parametrize("op", ["replace", "remove"])
def test_missing_keys_fail_instead_of_being_ignored(op: str) -> None:
    raw: dict[str, Any] = {"op": op, "path": "/city"}
    if op == "replace":
        raw["value"] = "x"
    with pytest.raises(PatchFailed):
        apply_patches({}, OVERLAY, operations(raw))


def test_removing_an_account_only_key_fails_unless_the_patch_set_it() -> None:
    with pytest.raises(KeyFromAccount):
        apply_patches({}, OVERLAY, operations({"op": "remove", "path": "/name"}))
    outcome = apply_patches(
        {},
        OVERLAY,
        operations(
            {"op": "add", "path": "/name", "value": "Countess"},
            {"op": "remove", "path": "/name"},
        ),
    )
    assert outcome.stored == {}


def test_size_is_compact_utf8_json() -> None:
    assert document_bytes({}) == 2
    assert document_bytes({"a": "é"}) == len('{"a":"é"}'.encode())
    assert document_bytes({"a": [1, 2]}) == len(b'{"a":[1,2]}')


def test_etags_change_with_the_version_and_the_overlay_only() -> None:
    assert profile_etag(3, {}) == '"3"'
    assert profile_etag(3, OVERLAY) == profile_etag(3, dict(reversed(OVERLAY.items())))
    assert profile_etag(3, OVERLAY) != profile_etag(3, {**OVERLAY, "name": "Bo"})
    assert profile_etag(3, OVERLAY) != profile_etag(4, OVERLAY)
