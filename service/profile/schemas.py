"""Profile I/O: the JSON Patch operations a write may use, the merged view, patch results."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    RootModel,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from service.accounts.overlay import credential_refused, find_credential
from service.kit.secrets import is_credential_name
from service.kit.types import InputRefused, check_json

JSON_PATCH_MEDIA_TYPE = "application/json-patch+json"
KEY_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]*$"
# RFC 6901 pointer to one top-level key: no array indices, no nesting, no `~` escapes.
PATH_PATTERN = r"^/[A-Za-z_][A-Za-z0-9_-]*$"
MAX_KEY_LENGTH = 128
MAX_PATCH_OPERATIONS = 100
MAX_VALUE_DEPTH = 32

ProfileSource = Literal["memory", "account"]

ProfileKey = Annotated[
    str,
    Field(
        pattern=KEY_PATTERN,
        max_length=MAX_KEY_LENGTH,
        description="A top-level profile key.",
        examples=["city"],
    ),
]


def _refuse_unstorable(value: JsonValue) -> JsonValue:
    """Refuse what the free-form JSON rules refuse (`service.kit.types`), nested at most
    `MAX_VALUE_DEPTH` deep: a profile value is flat, not a document."""
    try:
        check_json(value, [], max_depth=MAX_VALUE_DEPTH)
    except InputRefused as refused:
        raise PydanticCustomError(refused.kind, refused.message) from None
    return value


def _storable(value: JsonValue) -> JsonValue:
    _refuse_unstorable(value)
    location = find_credential(value)
    if location is not None:
        raise credential_refused("/".join(str(part) for part in ("value", *location)))
    return value


StorableJson = Annotated[JsonValue, AfterValidator(_storable)]

Document = dict[str, JsonValue]
"""A profile document as read: its keys and their JSON values."""

StoredDocument = dict[ProfileKey, Annotated[JsonValue, AfterValidator(_refuse_unstorable)]]
"""A stored profile document as patches build it: top-level keys of `KEY_PATTERN` and at most
`MAX_KEY_LENGTH` characters, each value under the free-form JSON rules and at most
`MAX_VALUE_DEPTH` deep. Its size limit is a setting (`profile_max_bytes`, measured by
`document_bytes`), and credential-named keys are the secret policy's to refuse."""


class _Operation(BaseModel):
    model_config = ConfigDict(extra="forbid")

    op: str
    path: str = Field(
        pattern=PATH_PATTERN,
        max_length=MAX_KEY_LENGTH + 1,
        description="A JSON Pointer to one top-level key.",
        examples=["/city"],
    )

    @field_validator("path")
    @classmethod
    def _not_a_credential(cls, path: str, info: ValidationInfo) -> str:
        # Removing such a key stays possible, so a profile can always be cleaned up.
        if info.data.get("op") != "remove" and is_credential_name(path[1:]):
            raise credential_refused(path)
        return path

    @property
    def key(self) -> str:
        return self.path[1:]


class PatchAdd(_Operation):
    """Set a key, whether or not the profile has it."""

    op: Literal["add"]
    value: StorableJson


class PatchReplace(_Operation):
    """Change a key the merged view has (a key from the account included)."""

    op: Literal["replace"]
    value: StorableJson


class PatchRemove(_Operation):
    """Remove a stored key."""

    op: Literal["remove"]


PatchOperation = Annotated[PatchAdd | PatchReplace | PatchRemove, Field(discriminator="op")]


class ProfilePatch(RootModel[list[PatchOperation]]):
    """An RFC 6902 JSON Patch limited to `add`, `replace` and `remove` of top-level keys,
    applied in order, all or nothing."""

    root: Annotated[list[PatchOperation], Field(max_length=MAX_PATCH_OPERATIONS)]


class ProfileRead(BaseModel):
    """A profile as the Memory page shows it: the merged view and where each key comes from."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "profile": {"name": "Ada Lovelace", "city": "Lisbon", "diet": "vegetarian"},
                    "sources": {"name": "account", "city": "memory", "diet": "memory"},
                    "stored_keys": ["city", "diet"],
                    "extracted_keys": ["city"],
                    "key_count": 2,
                    "bytes": 38,
                    "max_bytes": 8192,
                    "version": 3,
                    "updated_at": "2026-11-30T09:12:44Z",
                }
            ]
        }
    )

    profile: dict[str, JsonValue] = Field(
        description="The merged view: the stored document, plus account details (name, "
        "email, avatar, socials) for keys the document lacks. Account keys come first, then "
        "stored keys alphabetically."
    )
    sources: dict[str, ProfileSource] = Field(
        description="Per key: `memory` (stored in the profile) or `account` (from the "
        "user's identity provider, read-only here)."
    )
    stored_keys: list[str] = Field(description="The keys of the stored document, sorted.")
    extracted_keys: list[str] = Field(
        description="The stored keys whose current value the write path's extraction set, "
        "sorted. Every other stored key was set through the API (by the user, an admin or a "
        "service), and extraction does not overwrite it."
    )
    key_count: int = Field(description="How many keys the stored document has.")
    bytes: int = Field(description="Size of the stored document as compact UTF-8 JSON.")
    max_bytes: int = Field(description="The largest stored document a write may produce.")
    version: int = Field(description="Grows by one with each change; 0 before the first.")
    updated_at: datetime | None = None


class AppliedAdd(BaseModel):
    op: Literal["add"]
    path: str
    value: JsonValue
    old_value: JsonValue = Field(
        description="The key's value just before this operation; null if it had none."
    )


class AppliedReplace(BaseModel):
    op: Literal["replace"]
    path: str
    value: JsonValue
    old_value: JsonValue = Field(description="The key's value just before this operation.")


class AppliedRemove(BaseModel):
    op: Literal["remove"]
    path: str
    old_value: JsonValue = Field(description="The key's value just before this operation.")


AppliedPatch = Annotated[AppliedAdd | AppliedReplace | AppliedRemove, Field(discriminator="op")]


class ProfilePatchResult(BaseModel):
    """What a write did, shaped for a before/after diff."""

    ok: Literal[True] = True
    changed: bool = Field(description="False when the patch left the stored document as it was.")
    bytes: int = Field(description="Size of the stored document after the write.")
    key_count: int = Field(description="Keys in the stored document after the write.")
    version: int
    before: dict[str, JsonValue] = Field(description="The merged view before the write.")
    after: dict[str, JsonValue] = Field(description="The merged view after the write.")
    sources: dict[str, ProfileSource] = Field(description="Where each key of `after` comes from.")
    patches: list[AppliedPatch] = Field(
        description="Each operation as applied, in order, with the value it replaced."
    )
