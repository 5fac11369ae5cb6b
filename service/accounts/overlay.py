"""What a user's auth overlay may hold, and the body a service sets it with.

The overlay is what the identity provider shares about a user: name, email, avatar and the
linked OAuth providers. It is rendered into every prompt the profile reaches, so it
never holds tokens (access, refresh, id) or the provider's account ids, and a body that tries
to set them is refused rather than silently trimmed.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from service.auth.tokens import PASSWORD_PROVIDERS
from service.errors import POLICY_REFUSAL_TYPE
from service.kit.secrets import find_secret, find_secret_in, is_credential_name
from service.kit.types import (
    SOCIALS_MAX,
    AccountEmail,
    AccountName,
    AvatarUrl,
    ProviderName,
    account_value,
)


def looks_like_token(value: str) -> bool:
    """Whether the text holds a credential or PII, by the policy every durable write follows."""
    return find_secret(value) is not None


def find_credential(value: object) -> tuple[str | int, ...] | None:
    """Where in a JSON value a credential sits (a credential-named key, whatever it holds, or
    a token-shaped string), as a location path; None when there is none."""
    found = find_secret_in(value, any_credential_key=True)
    return None if found is None else found[0]


def linked_providers(providers: list[str] | tuple[str, ...]) -> list[str]:
    """Linked OAuth providers, deduplicated, without the email+password "credential" one:
    signing in with a password is not a linked account and must not be shown as one."""
    return list(dict.fromkeys(p for p in providers if p.lower() not in PASSWORD_PROVIDERS))


def credential_refused(field: str) -> PydanticCustomError:
    return PydanticCustomError(
        POLICY_REFUSAL_TYPE,
        "{field} looks like a token or an account id; Mneme never stores those",
        {"field": field},
    )


class AccountOverlayUpdate(BaseModel):
    """The account details a service sets for a user. It replaces the whole overlay: an
    omitted field is cleared."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"name": "Ada Lovelace", "email": "ada@example.com", "socials": ["github"]}
            ]
        },
    )

    name: AccountName | None = None
    email: AccountEmail | None = None
    avatar: AvatarUrl | None = Field(default=None, description="A picture URL.")
    socials: list[ProviderName] = Field(
        default_factory=list,
        max_length=SOCIALS_MAX,
        description="Linked OAuth providers (e.g. `github`); the password `credential` "
        "provider is dropped.",
    )

    @model_validator(mode="before")
    @classmethod
    def _refuse_credential_fields(cls, data: Any) -> Any:
        # Checked before `extra="forbid"` so the refusal names the real reason.
        if isinstance(data, dict):
            for key in data:
                if isinstance(key, str) and is_credential_name(key):
                    raise credential_refused(key)
        return data

    @field_validator("name", "email", "avatar")
    @classmethod
    def _plain_text(cls, value: str | None) -> str | None:
        if value is None or account_value(value) is None:
            return None
        if "\x00" in value:
            raise PydanticCustomError("string_nul", "must not contain NUL characters")
        if looks_like_token(value):
            raise credential_refused("the value")
        return value

    @field_validator("socials")
    @classmethod
    def _linked_only(cls, value: list[str]) -> list[str]:
        if any(looks_like_token(provider) for provider in value):
            raise credential_refused("socials")
        return linked_providers(value)
