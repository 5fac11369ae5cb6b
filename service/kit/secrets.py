"""What may never be stored durably: credentials and PII-like content, found alike everywhere.

One detector serves every durable write, whichever way it enters (API bodies, MCP tools, import
lines, token claims, the write path): memory text, evidence, speaker, metadata and keys,
profile values, the account overlay, thread titles and metadata, message authors and
metadata, API key names, extracted facts and turn memories; and the masking of raw thread
messages (their text, author, tool calls and metadata) and summaries replayed into a prompt.
A request it refuses answers 422 `SECRET_REFUSED`; what cannot be refused (the write
path's output, a token's claims) is left out. It combines:

- detect-secrets' pattern detectors (JWTs, cloud, GitHub/GitLab/Slack/Stripe/OpenAI/… tokens,
  private keys, credentials in URLs): well kept, and each pattern is specific to one issuer.
  Its entropy and keyword detectors are left out: on conversational text they fire on ordinary
  words; so are its IP address and Artifactory detectors (`_DETECTORS_LEFT_OUT`);
- rules of our own for what it has no detector for: US social security numbers, payment card
  numbers (in the card networks' number ranges and confirmed with the Luhn checksum, so order
  and phone numbers, timestamps and ids are not refused),
  bearer tokens and HTTP Basic credentials, Mneme API keys, GCP service-account keys, AWS
  secret access keys (labelled, after their key id, or bare when they look random), GitHub
  fine-grained, npm and Hugging Face tokens, `password: …`-style assignments, "my password
  is …" statements and "password <letters and digits>", and JWTs spanned through their
  signature;
- in JSON (metadata, profile values), any non-trivial string under a key that names a
  credential (`password`, `api_key`, `access_token`, …); the documents replayed into every
  prompt (profile values, the account overlay) refuse such a key whatever it holds.

Text is searched as it reads: format characters a reader never sees (a zero-width space, a
soft hyphen, a word joiner) are left out and every kind of space counts as a space, so a secret
split by them is still found, and masked with them.

Each finding has a stable rule name so a refusal can say which rule fired without echoing
the text.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
import re
import unicodedata
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.jwt import JwtTokenDetector

from service.errors import SecretRefused

MASK = "[secret removed]"

_SSN = re.compile(r"\b\d{3}-\d{2}-\d{4}\b")
# Named as one, a social security number is one whatever separates its groups.
_SSN_LABELLED = re.compile(
    r"\b(?:ssn|social[ -]security(?:[ -]?(?:number|no\.?|#))?)\b[^\d\n]{0,16}?"
    r"(?<!\d)(\d{3}[ .-]?\d{2}[ .-]?\d{4})(?!\d)",
    re.IGNORECASE,
)
# A card number stands on its own: not inside a word, a hash or an id (a run of digits in a hex
# digest, 4751324109739), nor after a "+" (an international phone number, +4834008596635).
_CARD_CANDIDATE = re.compile(r"(?<![^\W_])(?<!\+)(?:\d[ -]?){12,18}\d(?![^\W_])")
# Dots only between groups of four, as a card is printed: a decimal number is not a candidate.
_DOTTED_CARD_CANDIDATE = re.compile(r"(?<![^\W_])(?<![\d.+])(?:\d{4}\.){3}\d{4}(?!\.?\d)(?![^\W_])")
# An identifier in the UUID format is never a card number, whatever its digits: with the Luhn
# checksum alone, one random UUID in 400 held a card-like run across its hyphens
# ("98c828d5-3390-4770-8015-11eb0d9b420c"), and with the network ranges and the standalone rule
# above still one in 30,000 does (its first three groups all digits); ids are everywhere in
# what agents store (threads, messages, memories, orders).
_UUID = re.compile(
    r"(?<![0-9A-Za-z])[0-9A-Fa-f]{8}-(?:[0-9A-Fa-f]{4}-){3}[0-9A-Fa-f]{12}(?![0-9A-Za-z])"
)
_PEM_PRIVATE_KEY = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----)?",
    re.IGNORECASE | re.DOTALL,
)
_AWS_ACCESS_KEY = re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")
# An AWS secret access key is 40 characters of base64 with no prefix to tell it apart from a
# word, a hash, a path or an id of the same length. 40 such characters count as one when
# something says what they are: a label naming an AWS secret or a secret access key
# (`aws_secret_access_key=…`, `"SecretAccessKey": "…"`, "my AWS secret key is …") shortly
# before them, or an access key id just before them on the same line (the pair as AWS hands
# it out); after an id, the candidate must also look random (upper and lower case letters and
# a digit or `/`/`+`). On their own they count only when they look like nothing but a key
# (`_looks_like_a_bare_aws_secret`): both cases, a digit, one to four `/` or `+` (a git hash
# has no capitals, a word no digit, a path more separators) and the character variety of
# random base64 (Shannon entropy at least 4.45 bits, which 99 % of random keys reach and paths
# and identifiers of that length stay below).
_BASE64_40 = r"(?<![A-Za-z0-9/+])([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"
_BARE_BASE64_40 = re.compile(_BASE64_40)
_BARE_KEY_MIN_ENTROPY_BITS = 4.45
_AWS_SECRET_KEY_LABELLED = re.compile(
    r"(?:(?<![a-z])aws(?![a-z])[^\n]{0,24}?secret|secret[ _-]?access[ _-]?key)[^\n]{0,32}?"
    + _BASE64_40,
    re.IGNORECASE,
)
_AWS_SECRET_KEY_AFTER_ID = re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b[^\n]{0,80}?" + _BASE64_40)
# detect-secrets' JWT pattern ends lazily and so stops before the signature: a JWT's span is
# taken here through its last segment (JWS has three, JWE five), so masking removes all of it.
_JWT = re.compile(r"\beyJ[A-Za-z0-9_=-]+(?:\.[A-Za-z0-9_=+/-]*){1,4}")
_GCP_SERVICE_ACCOUNT_KEY = re.compile(r'"private_key_id"\s*:\s*"[0-9a-f]{20,}"')
_API_TOKENS = re.compile(
    r"\b(?:sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}"  # OpenAI / Anthropic style
    r"|gh[pousr]_[A-Za-z0-9]{30,}"  # GitHub tokens
    r"|github_pat_[A-Za-z0-9_]{40,}"  # GitHub fine-grained tokens
    r"|npm_[A-Za-z0-9]{36}"  # npm access tokens
    r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face tokens
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"  # Slack tokens
    r"|AIza[0-9A-Za-z_-]{35}"  # Google API keys
    r"|sk_live_[0-9A-Za-z]{20,}"  # Stripe live keys
    r"|AKCp[0-9A-Za-z]{69}\b)"  # Artifactory API keys (73 characters)
)
# "Bearer <token>", and Google OAuth access tokens (detect-secrets has no detector for them).
_BEARER_TOKEN = re.compile(
    r"\bBearer\s+[A-Za-z0-9\-._~+/]{16,}=*|\bya29\.[0-9A-Za-z_-]{20,}", re.IGNORECASE
)
# `Basic <base64>` counts only when the base64 decodes to `user:password`: a phrase such as
# "basic internationalization" is not a credential.
_BASIC_CREDENTIALS = re.compile(r"\bBasic\s+([A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])")
_MNEME_API_KEY = re.compile(r"\bmneme\.[A-Za-z0-9_-]+\.[0-9a-f]{32}\.[A-Za-z0-9_-]{16,}")
_ASSIGNED_SECRET = re.compile(
    r"\b(?:password|passwd|passcode|passphrase|api[_-]?key|secret[_-]?key"
    r"|(?:aws[_-]?)?secret[_-]?access[_-]?key|access[_-]?token|client[_-]?secret)"
    r"[\"']?\s*[:=]\s*\S{6,}"
    r"|\bpwd\s*=\s*[^\s;]{6,}",
    re.IGNORECASE,
)
# "My password is hunter2", "the passcode was 8812": a password stated in words. The value must
# hold a digit, so "my password is forgotten" or "the password is on the fridge" stay readable;
# a PIN is its four to eight digits. Without a verb ("password Hunter2Pass9") the value must
# hold a letter and a digit both: "password 2024-05-01" (a date), "password reset" stay.
_STATED_PASSWORD = re.compile(
    r"\b(?:password|passwd|passcode|passphrase)\s+(?:is|was)\s*[:=]?\s*[\"'\u201c]?"
    r"(?=[^\s\"'\u201d]*\d)[^\s\"'\u201d]{6,}"
    r"|\b(?:password|passwd|passcode|passphrase)\s+[\"'\u201c]?"
    r"(?=[^\s\"'\u201d]*\d)(?=[^\s\"'\u201d]*[a-z])[^\s\"'\u201d]{6,}"
    r"|\bpin(?:[ -]?code)?\s+(?:is|was|[:=])\s*\d{4,8}\b",
    re.IGNORECASE,
)
_NOT_ALPHANUMERIC = re.compile(r"[^a-z0-9]")
_CREDENTIAL_NAME_PARTS = (
    "password",
    "passwd",
    "passphrase",
    "apikey",
    "secretkey",
    "secretaccesskey",
    "awssecret",
    "privatekey",
)


_DETECTORS_LEFT_OUT = frozenset({"IPPublicDetector", "ArtifactoryDetector"})
"""detect-secrets' pattern detectors that do not find credentials in conversational text: an
IP address is not one, and the Artifactory detector takes any word of capitals after "AP" and
a hex digit for an encrypted password ("APACHESPARK", a part number "AP123456789"); its API
keys are found by their exact form instead (`_API_TOKENS`)."""


def _pattern_detectors() -> tuple[RegexBasedDetector, ...]:
    detectors: list[RegexBasedDetector] = []
    plugins: list[type[Any]] = list(get_mapping_from_secret_type_to_class().values())
    for plugin in plugins:
        if issubclass(plugin, RegexBasedDetector) and plugin.__name__ not in _DETECTORS_LEFT_OUT:
            detectors.append(plugin())
    return tuple(sorted(detectors, key=lambda detector: type(detector).__name__))


_DETECTORS = _pattern_detectors()


@dataclass(frozen=True)
class SecretFinding:
    rule: str
    description: str
    start: int
    end: int


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


def _issued_by_a_card_network(digits: str) -> bool:
    """Whether `digits` begin as the payment networks' card numbers do: Visa 4; Mastercard 51-55
    and 2221-2720; American Express 34 and 37; JCB 35; Diners Club 30, 36, 38 and 39; Maestro 50
    and 56-59; Discover, UnionPay, RuPay and Maestro under 6.

    A Luhn checksum passes one number in ten, so the checksum alone took one millisecond
    timestamp in ten (1733753037352), one snowflake id in ten and many a long order number for
    a card. Numbers that begin with 0, 7, 8 or 9 are not payment cards, nor those with 1 but for
    airlines' own UATP cards, which are left out with them."""
    first = digits[0]
    if first in "456":
        return True
    if first == "2":
        return 2221 <= int(digits[:4]) <= 2720
    return first == "3" and digits[1] in "0456789"


def _cards(text: str) -> Iterator[tuple[int, int]]:
    # The UUIDs blanked out (same length: the spans found still point into `text`).
    searched = _UUID.sub(lambda uuid: "_" * len(uuid.group()), text)
    for pattern in (_CARD_CANDIDATE, _DOTTED_CARD_CANDIDATE):
        for match in pattern.finditer(searched):
            # In ASCII: a card written in other digits (fullwidth, Arabic-Indic) is one too.
            digits = "".join(str(int(digit)) for digit in re.findall(r"\d", match.group()))
            if (
                13 <= len(digits) <= 19
                and _issued_by_a_card_network(digits)
                and _luhn_valid(digits)
            ):
                yield match.span()


def _labelled_ssns(text: str) -> Iterator[tuple[int, int]]:
    for match in _SSN_LABELLED.finditer(text):
        yield match.span(1)


def _basic_credentials(text: str) -> Iterator[tuple[int, int]]:
    for match in _BASIC_CREDENTIALS.finditer(text):
        encoded = match.group(1)
        try:
            decoded = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
        except (binascii.Error, ValueError):
            continue
        user, colon, password = decoded.decode("utf-8", "replace").partition(":")
        if colon and user and password and decoded.isascii():
            yield match.span()


def _spans(pattern: re.Pattern[str]) -> Callable[[str], Iterator[tuple[int, int]]]:
    return lambda text: (m.span() for m in pattern.finditer(text))


def _shannon_entropy(text: str) -> float:
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def _looks_like_a_bare_aws_secret(candidate: str) -> bool:
    separators = sum(candidate.count(c) for c in "/+")
    return (
        1 <= separators <= 4
        and any(c.isupper() for c in candidate)
        and any(c.islower() for c in candidate)
        and any(c.isdigit() for c in candidate)
        and _shannon_entropy(candidate) >= _BARE_KEY_MIN_ENTROPY_BITS
    )


def _aws_secret_keys(text: str) -> Iterator[tuple[int, int]]:
    for match in _AWS_SECRET_KEY_LABELLED.finditer(text):
        yield match.span(1)
    for match in _BARE_BASE64_40.finditer(text):
        if _looks_like_a_bare_aws_secret(match.group(1)):
            yield match.span(1)
    for match in _AWS_SECRET_KEY_AFTER_ID.finditer(text):
        key = match.group(1)
        if (
            any(c.isupper() for c in key)
            and any(c.islower() for c in key)
            and any(c.isdigit() or c in "/+" for c in key)
        ):
            yield match.span(1)


def _jwts(text: str) -> Iterator[tuple[int, int]]:
    for match in _JWT.finditer(text):
        # The longest run of segments that decodes as a JWT (header and payload JSON objects,
        # as detect-secrets checks), so a sentence's closing dot or a word after it is not
        # taken for one.
        segments = match.group().split(".")
        for count in range(len(segments), 1, -1):
            token = ".".join(segments[:count])
            if segments[count - 1] and JwtTokenDetector.is_formally_valid(token):
                yield match.start(), match.start() + len(token)
                break


def _detect_secrets(text: str) -> Iterator[tuple[int, int]]:
    for detector in _DETECTORS:
        for found in set(detector.analyze_string(text)):
            # The detector names what it found, not where: every occurrence is a finding.
            start = text.find(found)
            while start >= 0:
                yield start, start + len(found)
                start = text.find(found, start + 1)


@dataclass(frozen=True)
class _Rule:
    name: str
    # What the rule finds, as a refusal names it, with its own article ("an API token").
    description: str
    spans: Callable[[str], Iterator[tuple[int, int]]]


_RULES: tuple[_Rule, ...] = (
    _Rule("ssn", "a US social security number", _spans(_SSN)),
    _Rule("ssn", "a US social security number", _labelled_ssns),
    _Rule("payment_card", "a payment card number", _cards),
    _Rule("pem_private_key", "a PEM private key", _spans(_PEM_PRIVATE_KEY)),
    _Rule("cloud_access_key", "a cloud access key", _spans(_AWS_ACCESS_KEY)),
    _Rule("cloud_access_key", "a cloud access key", _spans(_GCP_SERVICE_ACCOUNT_KEY)),
    _Rule("cloud_access_key", "a cloud secret access key", _aws_secret_keys),
    _Rule("bearer_token", "a bearer token", _spans(_BEARER_TOKEN)),
    _Rule("bearer_token", "HTTP Basic credentials", _basic_credentials),
    _Rule("api_secret", "an API token or credential", _spans(_API_TOKENS)),
    _Rule("api_secret", "an API token or credential", _spans(_MNEME_API_KEY)),
    _Rule("api_secret", "an API token or credential", _spans(_ASSIGNED_SECRET)),
    _Rule("api_secret", "an API token or credential", _spans(_STATED_PASSWORD)),
    _Rule("credential", "a credential or access token", _detect_secrets),
    _Rule("credential", "a credential or access token", _jwts),
)


class _ReadableText:
    """`text` as a reader sees it, and the way back to positions in `text`: format characters
    (category Cf: zero-width spaces and joiners, soft hyphens, word joiners, byte-order marks,
    bidirectional controls) are left out and every other space separator becomes a plain
    space, so that a secret split by characters nobody sees is found all the same."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._origin: list[int] | None = None
        if text.isascii():
            # No format characters, and the only space is the plain one: read as it stands.
            return
        kept: list[str] = []
        self._origin = []
        for index, character in enumerate(text):
            category = unicodedata.category(character)
            if category == "Cf":
                continue
            kept.append(" " if category == "Zs" else character)
            self._origin.append(index)
        self.text = "".join(kept)

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        """The span of `text` that the readable span `start:end` (not empty) came from."""
        if self._origin is None:
            return start, end
        return self._origin[start], self._origin[end - 1] + 1


def _findings(text: str) -> Iterator[SecretFinding]:
    readable = _ReadableText(text)
    for rule in _RULES:
        for start, end in rule.spans(readable.text):
            if end > start:
                where = readable.original_span(start, end)
                yield SecretFinding(rule.name, rule.description, *where)


def find_secrets(text: str) -> list[SecretFinding]:
    """Every secret-looking span of `text`, in order of position."""
    return sorted(_findings(text), key=lambda f: (f.start, -f.end))


def find_secret(text: str) -> SecretFinding | None:
    """The first rule `text` violates, or None when it is safe to remember."""
    return next(_findings(text), None)


Location = tuple[str | int, ...]


def find_secret_in(
    value: Any, loc: Location = (), *, any_credential_key: bool = False
) -> tuple[Location, SecretFinding] | None:
    """The location and finding of the first secret in a JSON value (keys included), or None.

    A non-blank string under a credential-named key is a secret. With `any_credential_key`
    (the documents replayed into every prompt: profile values and the account overlay), such
    a key is refused whatever it holds.
    """
    pending: list[tuple[Any, Location, str | None]] = [(value, loc, None)]
    while pending:
        item, where, key = pending.pop()
        if isinstance(item, str):
            finding = find_secret(item)
            if finding is None and key is not None and item.strip() and is_credential_name(key):
                finding = SecretFinding("credential", "credential", 0, len(item))
            if finding is not None:
                return where, finding
        elif isinstance(item, Mapping):
            for child_key, child in item.items():
                name = str(child_key)
                key_finding = find_secret(name)
                if key_finding is None and any_credential_key and is_credential_name(name):
                    key_finding = SecretFinding("credential", "credential", 0, len(name))
                if key_finding is not None:
                    return (*where, name), key_finding
                pending.append((child, (*where, name), name))
        elif isinstance(item, list | tuple):
            pending.extend((child, (*where, i), key) for i, child in enumerate(item))
    return None


def is_credential_name(name: str) -> bool:
    """Whether a field name means a credential or a provider account id, however it is spelled
    (`access_token`, `refreshToken`, `id-token`, `providerAccountId`, `wifi_password`, …)."""
    normalized = _NOT_ALPHANUMERIC.sub("", name.lower())
    return normalized.endswith(("token", "tokens", "accountid", "clientsecret")) or any(
        part in normalized for part in _CREDENTIAL_NAME_PARTS
    )


def mask_secrets(text: str) -> str:
    """`text` with every secret-looking span replaced by a placeholder."""
    findings = find_secrets(text)
    if not findings:
        return text
    parts: list[str] = []
    position = 0
    for finding in findings:
        if finding.end <= position:
            continue
        parts.append(text[position : max(position, finding.start)])
        parts.append(MASK)
        position = finding.end
    parts.append(text[position:])
    return "".join(parts)


_MASKED_KEPT = 8192
"""How many masked texts `mask_secrets_memo` keeps (each at most `_MASK_MEMO_MAX_CHARS`)."""

_MASK_MEMO_MAX_CHARS = 4096
"""A longer text is masked on every call: it is rarely replayed whole again and again."""

_masked: OrderedDict[bytes, str] = OrderedDict()


def mask_secrets_memo(text: str) -> str:
    """`mask_secrets`, remembered for the texts a prompt replays on every call (a conversation's
    recent turns: ~0.1 ms each to mask, a context block replays dozens). Kept by a digest of the
    text, least recently used first out: what the process keeps is the masked text, never the
    text with its secrets."""
    if len(text) > _MASK_MEMO_MAX_CHARS:
        return mask_secrets(text)
    key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    masked = _masked.get(key)
    if masked is not None:
        _masked.move_to_end(key)
        return masked
    masked = mask_secrets(text)
    _masked[key] = masked
    if len(_masked) > _MASKED_KEPT:
        _masked.popitem(last=False)
    return masked


def mask_secrets_in(value: Any) -> Any:
    """A JSON value (a message's tool calls or metadata) as a prompt replays it: every string,
    keys included, through `mask_secrets_memo`, and a non-blank string under a
    credential-named key (`find_secret_in`'s rule) replaced whole."""
    return _masked_json(value, under_credential_key=False)


def _masked_json(value: Any, *, under_credential_key: bool) -> Any:
    if isinstance(value, str):
        return MASK if under_credential_key and value.strip() else mask_secrets_memo(value)
    if isinstance(value, Mapping):
        return {
            mask_secrets_memo(str(key)): _masked_json(
                child, under_credential_key=is_credential_name(str(key))
            )
            for key, child in value.items()
        }
    if isinstance(value, list | tuple):
        return [_masked_json(child, under_credential_key=under_credential_key) for child in value]
    return value


def refuse_secrets(
    value: Any, loc: Location, *, any_credential_key: bool = False, line: int | None = None
) -> None:
    """The durable-write policy: raise 422 `SECRET_REFUSED` if `value` holds a secret.

    `value` is text or any JSON value; `loc` is where it came from in the request, so the
    problem can point at the field without echoing what was in it. `line` names the line of
    an import the value came from (the whole import is then refused).
    """
    found = find_secret_in(value, loc, any_credential_key=any_credential_key)
    if found is None:
        return
    where, finding = found
    field = next((part for part in reversed(where) if isinstance(part, str)), "value")
    reason = f"what looks like {finding.description} ({field})"
    errors = [{"loc": list(where), "msg": f"matches rule {finding.rule}", "type": finding.rule}]
    if line is None:
        raise SecretRefused(f"Refusing to store {reason}.", rule=finding.rule, errors=errors)
    raise SecretRefused(
        f"Line {line}: refusing to import {reason}. Nothing was imported.",
        rule=finding.rule,
        errors=errors,
        line=line,
    )
