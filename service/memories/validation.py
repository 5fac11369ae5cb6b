"""What may never become a durable memory: secrets, credentials and PII-like content.

Each rule has a stable name so a refusal can say which one fired without echoing the text.
The card rule confirms candidates with the Luhn checksum, so order numbers and phone numbers
with enough digits are not refused by accident.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_SSN = re.compile(r"\b\d{3}-\d{2}-\d{4}\b")
_CARD_CANDIDATE = re.compile(r"(?<!\d)(?:\d[ -]?){12,18}\d(?!\d)")
_PEM_PRIVATE_KEY = re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----", re.IGNORECASE)
_AWS_ACCESS_KEY = re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")
_GCP_SERVICE_ACCOUNT_KEY = re.compile(r'"private_key_id"\s*:\s*"[0-9a-f]{20,}"')
_API_SECRETS = re.compile(
    r"\b(?:sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}"  # OpenAI / Anthropic style
    r"|gh[pousr]_[A-Za-z0-9]{30,}"  # GitHub tokens
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"  # Slack tokens
    r"|AIza[0-9A-Za-z_-]{35}"  # Google API keys
    r"|sk_live_[0-9A-Za-z]{20,})"  # Stripe live keys
)
_ASSIGNED_SECRET = re.compile(
    r"\b(?:password|passwd|api[_-]?key|secret[_-]?key|access[_-]?token|client[_-]?secret)"
    r"\s*[:=]\s*\S{6,}",
    re.IGNORECASE,
)


def _luhn_valid(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2 == 1:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def _has_card_number(text: str) -> bool:
    for match in _CARD_CANDIDATE.finditer(text):
        digits = re.sub(r"\D", "", match.group())
        if 13 <= len(digits) <= 19 and _luhn_valid(digits):
            return True
    return False


@dataclass(frozen=True)
class SecretRule:
    name: str
    description: str
    matches: Callable[[str], bool]


SECRET_RULES: tuple[SecretRule, ...] = (
    SecretRule("ssn", "US social security number", lambda t: bool(_SSN.search(t))),
    SecretRule("payment_card", "payment card number", _has_card_number),
    SecretRule("pem_private_key", "PEM private key", lambda t: bool(_PEM_PRIVATE_KEY.search(t))),
    SecretRule(
        "cloud_access_key",
        "cloud access key",
        lambda t: bool(_AWS_ACCESS_KEY.search(t) or _GCP_SERVICE_ACCOUNT_KEY.search(t)),
    ),
    SecretRule(
        "api_secret",
        "API token or credential",
        lambda t: bool(_API_SECRETS.search(t) or _ASSIGNED_SECRET.search(t)),
    ),
)


def find_secret(text: str) -> SecretRule | None:
    """The first rule `text` violates, or None when it is safe to remember."""
    for rule in SECRET_RULES:
        if rule.matches(text):
            return rule
    return None
