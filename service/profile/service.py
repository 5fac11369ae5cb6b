"""Profile use cases: the merged view, JSON Patch writes, deleting one key.

A profile is a flat key → JSON value document. A user's profile is read merged with the auth
overlay: the stored document wins, and the account's name, email, avatar and socials fill the
keys it lacks. Writes patch that merged view but store only the keys the document already had
plus the keys a patch touched, so account details are never copied into the store unasked.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import JsonValue

from service.accounts.overlay import linked_providers
from service.accounts.service import AccountService
from service.audit.service import AuditTrail
from service.auth.owner import Owner, authorize_write
from service.auth.principal import AccountClaims, Principal
from service.config import Settings
from service.kit.resource_headers import Tagged, if_match_allows, require_none_match
from service.profile.errors import (
    KeyFromAccount,
    PatchFailed,
    ProfileChanged,
    ProfileKeyNotFound,
    ProfileTooLarge,
)
from service.profile.models import Profile
from service.profile.repository import ProfileRepository
from service.profile.schemas import (
    AppliedAdd,
    AppliedPatch,
    AppliedRemove,
    AppliedReplace,
    Document,
    PatchAdd,
    PatchOperation,
    PatchRemove,
    ProfilePatchResult,
    ProfileRead,
    ProfileSource,
)

# The auth overlay's keys, in the order the Memory tab lists account rows.
OVERLAY_KEYS = ("name", "email", "avatar", "socials")


ExtractedWrite = Literal["set", "unchanged", "kept"]
"""What `ProfileService.set_extracted` did with an extracted value."""


@dataclass(frozen=True)
class MergedView:
    document: Document
    sources: dict[str, ProfileSource]


@dataclass(frozen=True)
class PatchOutcome:
    stored: Document
    applied: list[AppliedPatch]


def overlay_values(account: AccountClaims) -> Document:
    """The overlay as profile keys, leaving out what is null or empty (it fills nothing)."""
    values: Document = {
        "name": account.name,
        "email": account.email,
        "avatar": account.avatar,
        "socials": list(linked_providers(account.socials)),
    }
    return {key: value for key, value in values.items() if not _is_empty(value)}


def merge_profile(stored: Mapping[str, JsonValue], overlay: Mapping[str, JsonValue]) -> MergedView:
    """Stored keys always win; the overlay fills only keys the stored document lacks."""
    account_keys = [key for key in OVERLAY_KEYS if key not in stored and key in overlay]
    stored_keys = sorted(stored)
    document: Document = {key: overlay[key] for key in account_keys}
    document.update((key, stored[key]) for key in stored_keys)
    sources: dict[str, ProfileSource] = dict.fromkeys(account_keys, "account")
    sources.update(dict.fromkeys(stored_keys, "memory"))
    return MergedView(document=document, sources=sources)


def apply_patches(
    stored: Mapping[str, JsonValue],
    overlay: Mapping[str, JsonValue],
    operations: Sequence[PatchOperation],
) -> PatchOutcome:
    """Apply operations in order to the merged view; return the document to store.

    `replace` and `remove` of a key the view lacks fail (no silent no-op). Removing a key whose
    value only comes from the account fails too: it would change nothing, since the account
    fills the key again. Each applied operation echoes the value it found.
    """
    view = copy.deepcopy(merge_profile(stored, overlay).document)
    account_only = set(view) - set(stored)
    touched: set[str] = set()
    applied: list[AppliedPatch] = []
    for index, operation in enumerate(operations):
        key = operation.key
        old_value = view.get(key)
        if not isinstance(operation, PatchAdd) and key not in view:
            raise PatchFailed(
                f"Operation {index} ({operation.op} {operation.path}): the profile has no "
                f"key {key!r}.",
                index=index,
                path=operation.path,
            )
        if isinstance(operation, PatchRemove):
            if key in account_only and key not in touched:
                raise _key_from_account(key, index=index)
            del view[key]
            applied.append(AppliedRemove(op="remove", path=operation.path, old_value=old_value))
        else:
            view[key] = copy.deepcopy(operation.value)
            if isinstance(operation, PatchAdd):
                applied.append(
                    AppliedAdd(
                        op="add", path=operation.path, value=operation.value, old_value=old_value
                    )
                )
            else:
                applied.append(
                    AppliedReplace(
                        op="replace",
                        path=operation.path,
                        value=operation.value,
                        old_value=old_value,
                    )
                )
        touched.add(key)
    next_stored = {key: value for key, value in view.items() if key in stored or key in touched}
    return PatchOutcome(stored=next_stored, applied=applied)


def document_bytes(document: Mapping[str, JsonValue]) -> int:
    """Size of a document as compact UTF-8 JSON, the measure the size limit applies to."""
    return len(json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def profile_etag(version: int, overlay: Mapping[str, JsonValue]) -> str:
    """A strong ETag for the merged view: the stored version, and a digest of the overlay when
    there is one (the view changes when either does)."""
    if not overlay:
        return f'"{version}"'
    digest = hashlib.sha256(_canonical(dict(overlay)).encode("utf-8")).hexdigest()[:16]
    return f'"{version}-{digest}"'


class ProfileService:
    def __init__(
        self,
        repository: ProfileRepository,
        accounts: AccountService,
        audit: AuditTrail,
        settings: Settings,
        principal: Principal,
    ) -> None:
        self._repository = repository
        self._accounts = accounts
        self._audit = audit
        self._max_bytes = settings.profile_max_bytes
        self._principal = principal

    async def merged_documents(self, owners: Sequence[Owner]) -> dict[Owner, Document]:
        """Each owner's merged profile (stored keys, then the account's), nothing else: the
        read the context block needs, without versions, sizes or an entity tag; the stored
        rows of all owners come from one statement."""
        stored_documents = await self._repository.documents(owners)
        merged: dict[Owner, Document] = {}
        for owner in owners:
            stored: Document = dict(stored_documents.get(owner, {}))
            merged[owner] = merge_profile(stored, await self._overlay(owner)).document
        return merged

    async def read(self, owner: Owner) -> Tagged[ProfileRead]:
        """The merged view of a user's or the organization's profile, with its entity tag."""
        profile = await self._repository.get(owner)
        overlay = await self._overlay(owner)
        stored: Document = dict(profile.document) if profile else {}
        version = profile.version if profile else 0
        merged = merge_profile(stored, overlay)
        body = ProfileRead(
            profile=merged.document,
            sources=merged.sources,
            stored_keys=sorted(stored),
            extracted_keys=sorted(set(profile.extracted_keys) & stored.keys()) if profile else [],
            key_count=len(stored),
            bytes=document_bytes(stored),
            max_bytes=self._max_bytes,
            version=version,
            updated_at=profile.updated_at if profile and profile.version else None,
        )
        return Tagged(body, profile_etag(version, overlay))

    async def patch(
        self,
        owner: Owner,
        operations: Sequence[PatchOperation],
        if_match: str | None,
        if_none_match: str | None = None,
    ) -> Tagged[ProfilePatchResult]:
        """Apply a JSON Patch, all or nothing, under the profile's row lock."""
        profile, overlay = await self._lock(owner)
        self._check_precondition(if_match, if_none_match, profile.version, overlay)
        stored: Document = dict(profile.document)
        outcome = apply_patches(stored, overlay, operations)
        self._check_size(outcome.stored, stored)
        return await self._write(profile, stored, outcome, overlay, action="profile.patch")

    async def set_extracted(self, owner: Owner, operation: PatchAdd) -> ExtractedWrite:
        """Set one key to a value the write path read from a conversation, unless the key's
        current value was set through the API (by the user, an admin or a service): that value
        is theirs, and extraction does not overwrite it, as it does not replace a fact written
        through the API on weak evidence. The key is then `kept`; a value already stored is
        `unchanged`, and leaves the key's writer as it was."""
        profile, overlay = await self._lock(owner)
        stored: Document = dict(profile.document)
        if operation.key in stored:
            if _same_json(stored[operation.key], operation.value):
                return "unchanged"
            if operation.key not in profile.extracted_keys:
                return "kept"
        outcome = apply_patches(stored, overlay, [operation])
        self._check_size(outcome.stored, stored)
        result = await self._write(
            profile, stored, outcome, overlay, action="profile.patch", extracted=True
        )
        return "set" if result.body.changed else "unchanged"

    async def _lock(self, owner: Owner) -> tuple[Profile, Document]:
        """The owner's profile row, created if missing and locked, and the account's keys."""
        authorize_write(self._principal, owner)
        if owner.user_id is None:
            await self._accounts.hold_tenant_writes()
            await self._accounts.ensure_tenant()
        else:
            await self._accounts.hold_user_writes(owner.user_id)
            await self._accounts.ensure_user(owner.user_id)
        profile = await self._repository.lock_or_create(owner)
        return profile, await self._overlay(owner)

    def _check_size(self, document: Document, stored: Document) -> None:
        if not _same_json(document, stored):
            size = document_bytes(document)
            if size > self._max_bytes:
                raise ProfileTooLarge(
                    f"The profile would take {size} bytes; the limit is {self._max_bytes}. "
                    "Nothing was written; retry with less.",
                    attempted_bytes=size,
                    max_bytes=self._max_bytes,
                )

    async def delete_key(
        self, owner: Owner, key: str, if_match: str | None, if_none_match: str | None = None
    ) -> Tagged[ProfilePatchResult]:
        """Remove one stored key (the Memory page's delete)."""
        authorize_write(self._principal, owner)
        if owner.user_id is None:
            await self._accounts.hold_tenant_writes()
        else:
            await self._accounts.hold_user_writes(owner.user_id)
        profile = await self._repository.get(owner, for_update=True)
        overlay = await self._overlay(owner)
        version = profile.version if profile else 0
        self._check_precondition(if_match, if_none_match, version, overlay)
        stored: Document = dict(profile.document) if profile else {}
        if profile is None or key not in stored:
            if key in overlay:
                raise _key_from_account(key)
            raise ProfileKeyNotFound(f"The profile has no stored key {key!r}.", key=key)
        removal = PatchRemove.model_construct(op="remove", path=f"/{key}")
        outcome = apply_patches(stored, overlay, [removal])
        return await self._write(profile, stored, outcome, overlay, action="profile.delete_key")

    async def _write(
        self,
        profile: Profile,
        stored: Document,
        outcome: PatchOutcome,
        overlay: Document,
        *,
        action: str,
        extracted: bool = False,
    ) -> Tagged[ProfilePatchResult]:
        changed = not _same_json(outcome.stored, stored)
        extracted_keys = _extracted_keys(profile.extracted_keys, outcome, extracted=extracted)
        if changed:
            profile = await self._repository.save(profile, outcome.stored, extracted_keys)
            await self._audit.record(
                action,
                target_type="profile",
                target_id=profile.user_id,
                detail={
                    "scope": profile.scope,
                    "user_id": profile.user_id,
                    "version": profile.version,
                    "operations": [{"op": p.op, "path": p.path} for p in outcome.applied],
                    **_changed_keys(stored, outcome.stored),
                },
            )
        elif extracted_keys != sorted(profile.extracted_keys):
            # A key written again with its value through the API becomes the writer's own.
            profile = await self._repository.save_extracted_keys(profile, extracted_keys)
        after = merge_profile(outcome.stored, overlay)
        body = ProfilePatchResult(
            changed=changed,
            bytes=document_bytes(outcome.stored),
            key_count=len(outcome.stored),
            version=profile.version,
            before=merge_profile(stored, overlay).document,
            after=after.document,
            sources=after.sources,
            patches=outcome.applied,
        )
        return Tagged(body, profile_etag(profile.version, overlay))

    @staticmethod
    def _check_precondition(
        if_match: str | None, if_none_match: str | None, version: int, overlay: Document
    ) -> None:
        """`If-Match` and `If-None-Match` against the profile as it is now: a profile always
        exists (if only empty), so `If-None-Match: *` never passes."""
        current = profile_etag(version, overlay)
        if not if_match_allows(if_match, current):
            raise ProfileChanged(
                "The profile changed since you read it; read it again and retry.",
                headers={"ETag": current},
                current_etag=current,
            )
        require_none_match(
            if_none_match,
            current,
            detail="The profile is in the state If-None-Match names; nothing changed.",
        )

    async def _overlay(self, owner: Owner) -> Document:
        """The account's keys: a user's, from its identity provider; none for the org."""
        if owner.user_id is None:
            return {}
        return overlay_values(await self._accounts.overlay(owner.user_id))


def _extracted_keys(before: Sequence[str], outcome: PatchOutcome, *, extracted: bool) -> list[str]:
    """The stored keys the write path set after a write: a key the write touched is the
    writer's (the write path's for an extracted value, else the API's), the others keep theirs."""
    keys = set(before)
    for patch in outcome.applied:
        key = patch.path[1:]
        if extracted and patch.op != "remove":
            keys.add(key)
        else:
            keys.discard(key)
    return sorted(keys & outcome.stored.keys())


def _same_json(left: JsonValue, right: JsonValue) -> bool:
    """JSON equality: Python's `==` would call `1`, `1.0` and `true` the same value."""
    return _canonical(left) == _canonical(right)


def _canonical(value: JsonValue) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _is_empty(value: JsonValue) -> bool:
    return value is None or value == "" or value == [] or value == {}


def _key_from_account(key: str, *, index: int | None = None) -> KeyFromAccount:
    extensions: dict[str, Any] = {"key": key, "source": "account"}
    if index is not None:
        extensions["index"] = index
    return KeyFromAccount(
        f"{key!r} comes from the user's account (identity provider), not from the stored "
        "profile, so there is nothing to remove; change it at the identity provider, or "
        "`replace` it to store an override.",
        **extensions,
    )


def _changed_keys(before: Document, after: Document) -> dict[str, Document]:
    """Before and after values of the keys a write changed (a key missing on one side did
    not exist there), so the audit trail shows the change without copying the profile."""
    keys = {
        key
        for key in before.keys() | after.keys()
        if key not in before or key not in after or not _same_json(before[key], after[key])
    }
    return {
        "before": {key: before[key] for key in sorted(keys) if key in before},
        "after": {key: after[key] for key in sorted(keys) if key in after},
    }
