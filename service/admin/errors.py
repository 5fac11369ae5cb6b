"""The admin domain's problems: an invalid import line, a user who already has data, a
confirmation that does not name the tenant."""

from __future__ import annotations

from service.errors import Conflict, DomainError


class ImportLineInvalid(DomainError):
    """A line of an import could not be taken; the whole import wrote nothing."""

    status = 422
    title = "An import line is invalid"
    code = "IMPORT_LINE_INVALID"


class UserNotEmpty(Conflict):
    title = "The user already has data"
    code = "USER_NOT_EMPTY"


class ConfirmationMismatch(DomainError):
    status = 422
    title = "The confirmation does not name this tenant"
    code = "CONFIRMATION_MISMATCH"
