"""Account use cases: what Mneme knows about a user of the caller's tenant."""

from __future__ import annotations

from service.accounts.repository import AccountRepository
from service.accounts.schemas import UserRead
from service.errors import NotFound


class AccountService:
    def __init__(self, repository: AccountRepository) -> None:
        self._repository = repository

    async def get_user(self, user_id: str) -> UserRead:
        user = await self._repository.get_user(user_id)
        if user is None:
            raise NotFound(f"User {user_id!r} is not known in this tenant.")
        return UserRead.model_validate(user)

    async def ensure_tenant(self) -> None:
        """Provision the caller's tenant row (tenants are created on first use)."""
        await self._repository.ensure_tenant()

    async def ensure_user(self, user_id: str) -> None:
        """Provision the tenant and user rows a service's writes for `user_id` need."""
        await self._repository.ensure_user(user_id)
