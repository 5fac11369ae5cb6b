"""The API keys routes' bodies: what creating a key takes, and what listing and creating
answer (the secret only once)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from service.kit.types import Timestamp, has_visible_character

ApiKeyRole = Literal["admin"]


class ApiKeyCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"name": "support-bot", "roles": []}]}
    )

    # Shown wherever keys are listed: a name nobody can see names nothing.
    name: Annotated[str, AfterValidator(has_visible_character)] = Field(
        min_length=1, max_length=200, description="What the key is for."
    )
    roles: list[ApiKeyRole] = Field(
        default_factory=list, description="`admin` lets the key call /v1/admin endpoints."
    )
    expires_at: Timestamp | None = Field(default=None, description="Optional expiry.")


class ApiKeyRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    name: str
    display_prefix: str
    roles: list[str]
    created_by: str
    created_at: datetime
    last_used_at: datetime | None
    expires_at: datetime | None
    revoked_at: datetime | None


class ApiKeyCreated(ApiKeyRead):
    key: str = Field(description="The full key. It is shown only in this response; store it now.")
