"""Problems of the API-keys domain."""

from __future__ import annotations

from service.errors import Conflict


class ApiKeySecretNotReplayable(Conflict):
    """A retry of a create that already minted a key: the secret is not kept to repeat it."""

    title = "API key already created"
    code = "API_KEY_ALREADY_CREATED"
