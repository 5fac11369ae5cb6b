"""Account use cases: who the addressed user is, provisioning users on first contact."""

from __future__ import annotations

from service.accounts.repository import AccountRepository
from service.accounts.schemas import UserRead
from service.auth.principal import Principal
from service.errors import NotFound


class AccountService:
    def __init__(self, repository: AccountRepository, principal: Principal) -> None:
        self._repository = repository
        self._principal = principal

    async def get_user(self, user_id: str) -> UserRead:
        user = await self._repository.get_user(user_id)
        if user is None:
            raise NotFound(f"User {user_id!r} is not known in this tenant.")
        return UserRead.model_validate(user)
