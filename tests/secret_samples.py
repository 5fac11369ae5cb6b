"""One sample of each class of secret the service refuses to store, as a user would write it,
with the part that must never be stored or replayed."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SecretSample:
    text: str
    core: str
    """What must appear nowhere it was refused or masked."""


JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkFkYSJ9"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM_BODY = "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun"

SAMPLES: dict[str, SecretSample] = {
    "card": SecretSample("my card is 4111 1111 1111 1111, exp 12/29", "4111 1111 1111 1111"),
    "aws_access_key_id": SecretSample(
        "the deploy key id is AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"
    ),
    "aws_secret_access_key": SecretSample(
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    "github_token": SecretSample(
        "use ghp_abcdefghijklmnopqrstuvwxyz0123456789 for the repo",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    ),
    # The signature, the segment masking used to leave behind.
    "jwt": SecretSample(f"my session token is {JWT}", JWT.rsplit(".", 1)[1]),
    "pem_private_key": SecretSample(
        f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----", PEM_BODY
    ),
    "ssn": SecretSample("my SSN is 123-45-6789", "123-45-6789"),
    "password": SecretSample("wifi password: hunter2hunter2", "hunter2hunter2"),
}
