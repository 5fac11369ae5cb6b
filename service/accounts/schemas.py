"""What the accounts routes answer: a user as the API shows it."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field


class UserRead(BaseModel):
    """A user of the caller's tenant and the account details its identity provider shared."""

    model_config = ConfigDict(from_attributes=True)

    id: str
    tenant_id: str
    name: str | None = None
    email: str | None = None
    avatar: str | None = None
    socials: list[str] = Field(default_factory=list, description="Linked OAuth providers.")
    created_at: datetime
    last_seen_at: datetime | None = None
