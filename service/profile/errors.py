"""The profile domain's problems."""

from __future__ import annotations

from service.errors import Conflict, DomainError, NotFound, PreconditionFailed


class PatchFailed(Conflict):
    title = "Patch does not apply"
    code = "PATCH_FAILED"


class KeyFromAccount(Conflict):
    title = "This key comes from the user's account"
    code = "KEY_FROM_ACCOUNT"


class ProfileKeyNotFound(NotFound):
    title = "Profile key not found"


class ProfileTooLarge(DomainError):
    status = 413
    title = "Profile too large"
    code = "PROFILE_TOO_LARGE"


class ProfileChanged(PreconditionFailed):
    title = "The profile changed since it was read"


class UnsupportedPatchMediaType(DomainError):
    status = 415
    title = "Unsupported patch media type"
    code = "UNSUPPORTED_MEDIA_TYPE"
