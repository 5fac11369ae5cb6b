from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from service.accounts.repository import AccountRepository
from service.accounts.schemas import UserRead
from service.accounts.service import AccountService
from service.dependencies import AddressedUserId, CurrentPrincipal, Session
from service.errors import problem_responses

router = APIRouter(prefix="/v1/users", tags=["users"])


def get_account_service(session: Session, principal: CurrentPrincipal) -> AccountService:
    return AccountService(AccountRepository(session, principal.tenant_id))


AccountSvc = Annotated[AccountService, Depends(get_account_service)]


@router.get(
    "/{user_id}",
    response_model=UserRead,
    summary="Get a user's account",
    responses=problem_responses(401, 404, 422, 429),
)
async def get_user(user_id: AddressedUserId, accounts: AccountSvc) -> UserRead:
    """The account Mneme knows for a user: its id and the details its identity provider shared
    (the auth overlay). `me` is the caller."""
    return await accounts.get_user(user_id)
