"""The accounts domain's problems."""

from __future__ import annotations

from service.errors import Forbidden


class AccountWriteForbidden(Forbidden):
    title = "An end user's account details come from its token"
    code = "ACCOUNT_WRITE_FORBIDDEN"
