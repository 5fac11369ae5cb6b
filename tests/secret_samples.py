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
GITHUB_FINE_GRAINED = (
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ012345"
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
    "aws_secret_access_key_bare": SecretSample(
        "new key 9dK2/xQv7LmZr4TnB8pWc1YhJ6sGf0Ua3EoNiR5q, rotate monthly",
        "9dK2/xQv7LmZr4TnB8pWc1YhJ6sGf0Ua3EoNiR5q",
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
    "stated_password": SecretSample("my password is 0penSesame42", "0penSesame42"),
    "github_fine_grained_token": SecretSample(
        f"the CI uses {GITHUB_FINE_GRAINED}", GITHUB_FINE_GRAINED
    ),
    "npm_token": SecretSample(
        "publish with npm_abcdefghijklmnopqrstuvwxyz0123456789",
        "npm_abcdefghijklmnopqrstuvwxyz0123456789",
    ),
    "huggingface_token": SecretSample(
        "my HF token hf_abcdefghijklmnopqrstuvwxyzABCDEFGH", "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH"
    ),
    "basic_credentials": SecretSample(
        "Authorization: Basic YWRhOmh1bnRlcjJodW50ZXIy", "YWRhOmh1bnRlcjJodW50ZXIy"
    ),
    "labelled_ssn": SecretSample("SSN 987 65 4320 on the form", "987 65 4320"),
    # Characters nobody sees, splitting a secret so that no pattern matches it as sent.
    "card_split_by_zero_width_spaces": SecretSample(
        "card 5500\u200b0000\u200b0000\u200b0004", "5500\u200b0000\u200b0000\u200b0004"
    ),
    "token_split_by_a_soft_hyphen": SecretSample(
        "ghp_abcdefghijklmn\u00adopqrstuvwxyz0123456789 for CI",
        "ghp_abcdefghijklmn\u00adopqrstuvwxyz0123456789",
    ),
}
