"""Safe retries for POST: an `Idempotency-Key` makes a request apply at most once.

Clients and the proxies between them deliver at least once: a timeout after the server
committed looks exactly like a timeout before it did, so the only safe client reaction is to
send the request again. With an `Idempotency-Key` header that retry is harmless. The first
request claims the key by inserting an `idempotency_record` row *in the request's own
transaction*, runs, and stores its response in that row before the commit; a retry finds the
row and gets the stored status and body back without running the operation a second time.

Because the record and the request's effects share one transaction, there is no window in
which one exists without the other:

- the first attempt commits → effects and stored response become visible together;
- the first attempt fails or rolls back → no record is left, and the retry simply runs;
- a retry arrives while the first attempt is still in flight → its INSERT blocks on the
  primary key until the first transaction ends, then replays (commit) or claims (rollback).

A key is scoped to (tenant, principal): two callers may pick the same key independently.
A request is its method, its path and its body; the path is the one the store's `request_path`
gives, which the application makes the path *as resolved* (`/v1/users/me/…` is the caller's own
`/v1/users/<id>/…`), so that a retry through a layer that spells the path the other way still
replays. Reusing a key for a different request is a client bug and answered with 409
`IDEMPOTENCY_KEY_REUSED`, never with somebody else's response. Records expire after a TTL
(24 hours by default); an expired record is treated as absent.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any, Final, TypeVar

from fastapi import Depends, Header, Request, Response
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from service.errors import Conflict, ValidationFailed
from service.observability import tracer

ResultT = TypeVar("ResultT")

DEFAULT_TTL: Final = timedelta(hours=24)
KEY_MAX_LENGTH: Final = 255
REPLAYED_HEADER: Final = "Idempotent-Replayed"

_KEY_PATTERN = re.compile(rf"[\x20-\x7e]{{1,{KEY_MAX_LENGTH}}}")
# Each extra attempt needs a record to vanish between two of our statements (an expiry
# sweep, or a concurrent reclaim of an expired key); more than this is not worth waiting for.
_CLAIM_ATTEMPTS: Final = 3

CLAIM_KEY_SQL = text(
    """
    WITH tenant_row AS (
        INSERT INTO tenant (id) VALUES (:tenant_id) ON CONFLICT (id) DO NOTHING
    )
    INSERT INTO idempotency_record (tenant_id, principal, key, method, path, request_hash)
    VALUES (:tenant_id, :principal, :key, :method, :path, :request_hash)
    ON CONFLICT (tenant_id, principal, key) DO NOTHING
    RETURNING key
    """
)
"""Claim a key: one row when claimed, none when a committed record holds it. While another
transaction holds an uncommitted claim on the same key, this waits for it to end.

The record references the tenant row, which a service's first request may not have made: it
is provisioned in the same statement (the record's foreign key is checked once the whole
statement has run, so it sees the row the CTE inserted)."""

FIND_RECORD_SQL = text(
    """
    SELECT method, path, request_hash, status_code, response_body,
           created_at < now() - make_interval(secs => :ttl_seconds) AS expired
      FROM idempotency_record
     WHERE tenant_id = :tenant_id AND principal = :principal AND key = :key
    """
)
"""The record holding a key, with whether it has outlived the TTL."""

DELETE_EXPIRED_RECORD_SQL = text(
    """
    DELETE FROM idempotency_record
     WHERE tenant_id = :tenant_id AND principal = :principal AND key = :key
       AND created_at < now() - make_interval(secs => :ttl_seconds)
    """
)
"""Drop a key's record if it has expired; a fresh record is left alone."""

COMPLETE_RECORD_SQL = text(
    """
    UPDATE idempotency_record
       SET status_code = :status_code, response_body = CAST(:response_body AS json)
     WHERE tenant_id = :tenant_id AND principal = :principal AND key = :key
       AND status_code IS NULL
    RETURNING key
    """
)
"""Store the response of a claimed key; no row when the claim was already completed."""


class IdempotencyKeyReused(Conflict):
    title = "Idempotency key reused"
    code = "IDEMPOTENCY_KEY_REUSED"


class IdempotencyKeyInProgress(Conflict):
    title = "Idempotent request in progress"
    code = "IDEMPOTENCY_KEY_IN_PROGRESS"


@dataclass(frozen=True)
class IdempotencyClaim:
    """This request holds the key: run the operation, then `complete` the claim."""

    principal: str
    key: str
    method: str
    path: str
    request_hash: str


@dataclass(frozen=True)
class AnswerHeaders:
    """Headers of an answer (`Location`, `ETag`) derived from its JSON body, so that a replay,
    which has only the stored body, carries the same ones; set on `response` otherwise."""

    response: Response
    derive: Callable[[Any], Mapping[str, str]]


@dataclass(frozen=True)
class IdempotentReplay:
    """The key was used by an earlier, committed request: answer with its response."""

    status_code: int
    body: Any

    def response(self, headers: Mapping[str, str] | None = None) -> Response:
        """The stored response with `headers`, marked as a replay so clients and logs can
        tell."""
        headers = {**(headers or {}), REPLAYED_HEADER: "true"}
        if self.status_code == 204:
            return Response(status_code=204, headers=headers)
        return JSONResponse(self.body, status_code=self.status_code, headers=headers)


def validate_idempotency_key(key: str) -> str:
    """The key itself, or a 422 when it is not 1-255 printable ASCII characters."""
    if _KEY_PATTERN.fullmatch(key) is None:
        raise ValidationFailed(
            f"The Idempotency-Key must be 1-{KEY_MAX_LENGTH} printable ASCII characters.",
            errors=[
                {
                    "loc": ["header", "Idempotency-Key"],
                    "msg": f"must be 1-{KEY_MAX_LENGTH} printable ASCII characters",
                    "type": "idempotency_key",
                }
            ],
        )
    return key


def request_hash(body: bytes | Any) -> str:
    """sha256 hex of the body's canonical JSON, so formatting and key order do not count.

    Raw bytes that are not JSON are hashed as they are.
    """
    if isinstance(body, bytes | bytearray | memoryview):
        raw = bytes(body)
        try:
            document = json.loads(raw)
        except ValueError:
            return hashlib.sha256(raw).hexdigest()
    else:
        document = jsonable_encoder(body)
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


async def idempotency_key_header(
    key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            description=(
                "Makes this POST safe to retry: a retry with the same key and the same body "
                "gets the first attempt's response (marked `Idempotent-Replayed: true`) instead "
                "of applying the request again. 1-255 printable ASCII characters, unique per "
                "request (a UUID is a good choice); remembered for 24 hours."
            ),
        ),
    ] = None,
) -> str | None:
    return None if key is None else validate_idempotency_key(key)


# A dependency rather than a bare `Header` alias: `Annotated` cannot carry the header's default,
# and a route that forgot `= None` would make the header silently required.
IdempotencyKeyHeader = Annotated[str | None, Depends(idempotency_key_header)]
"""The optional, validated `Idempotency-Key` header; declaring it documents it in OpenAPI."""


def spelled_path(request: Request) -> str:
    """The request's path as the client spelled it."""
    return request.url.path


class IdempotencyStore:
    """Claims idempotency keys and remembers responses, inside the request's transaction.

    Build one per request from the request's `Session` and the caller's tenant and subject.
    Never commits: the record must commit or roll back together with the request's effects.

    A claim is the request's first write, made before the operation takes its own locks, and
    its record's foreign key holds the tenant row until the commit. `hold_writes` takes, before
    the claim, what every write to the tenant's data takes first (the tenant's write lock, which
    a purge of the tenant holds alone): without it a request could hold the tenant row while
    waiting for that lock, and the purge hold the lock while waiting to delete the row.

    `request_path` gives the path a request is fingerprinted by: two spellings it maps to one
    path are one request.
    """

    def __init__(
        self,
        session: AsyncSession,
        tenant_id: str,
        principal_subject: str,
        *,
        ttl: timedelta = DEFAULT_TTL,
        hold_writes: Callable[[], Awaitable[None]] | None = None,
        request_path: Callable[[Request], str] = spelled_path,
    ) -> None:
        self._session = session
        self._tenant_id = tenant_id
        self._principal = principal_subject
        self._ttl_seconds = ttl.total_seconds()
        self._hold_writes = hold_writes
        self._request_path = request_path

    async def begin(
        self, key: str, method: str, path: str, request_body: bytes | Any
    ) -> IdempotentReplay | IdempotencyClaim:
        """Claim `key` for this request, or return the response of the request that holds it.

        Raises `IdempotencyKeyReused` when the key was used for a different request and
        `ValidationFailed` when the key is malformed.
        """
        claim = IdempotencyClaim(
            principal=self._principal,
            key=validate_idempotency_key(key),
            method=method.upper(),
            path=path,
            request_hash=request_hash(request_body),
        )
        params = {"tenant_id": self._tenant_id, "principal": self._principal, "key": claim.key}
        ttl = {"ttl_seconds": self._ttl_seconds}
        if self._hold_writes is not None:
            await self._hold_writes()
        for _ in range(_CLAIM_ATTEMPTS):
            claimed = await self._session.execute(
                CLAIM_KEY_SQL,
                {
                    **params,
                    "method": claim.method,
                    "path": claim.path,
                    "request_hash": claim.request_hash,
                },
            )
            if claimed.scalar_one_or_none() is not None:
                return claim
            record = (await self._session.execute(FIND_RECORD_SQL, {**params, **ttl})).one_or_none()
            if record is None:
                continue
            if record.expired:
                await self._session.execute(DELETE_EXPIRED_RECORD_SQL, {**params, **ttl})
                continue
            if (record.method, record.path, record.request_hash) != (
                claim.method,
                claim.path,
                claim.request_hash,
            ):
                raise IdempotencyKeyReused(
                    "This Idempotency-Key was already used for a different request; "
                    "use a new key for a new request."
                )
            if record.status_code is None:
                # Only visible to the transaction that claimed it, i.e. the same request
                # claiming twice, or a request that committed without completing its claim.
                break
            return IdempotentReplay(status_code=record.status_code, body=record.response_body)
        raise IdempotencyKeyInProgress(
            "A request with this Idempotency-Key has not finished; retry shortly.",
            headers={"Retry-After": "1"},
        )

    async def begin_request(
        self, key: str, request: Request, request_body: bytes | Any
    ) -> IdempotentReplay | IdempotencyClaim:
        """`begin` for `request`: its method and its path as `request_path` gives it."""
        return await self.begin(key, request.method, self._request_path(request), request_body)

    async def complete(self, claim: IdempotencyClaim, status_code: int, body: Any) -> None:
        """Remember the response a retry of the claimed request must get.

        `body` is anything `jsonable_encoder` understands (pydantic models included).
        """
        if claim.principal != self._principal:
            raise ValueError("the claim belongs to another principal's store")
        stored = await self._session.execute(
            COMPLETE_RECORD_SQL,
            {
                "tenant_id": self._tenant_id,
                "principal": self._principal,
                "key": claim.key,
                "status_code": status_code,
                "response_body": json.dumps(jsonable_encoder(body)),
            },
        )
        if stored.scalar_one_or_none() is None:
            raise RuntimeError(f"idempotency claim {claim.key!r} is not open in this transaction")

    async def run(
        self,
        key: str | None,
        request: Request,
        request_body: bytes | Any,
        operation: Callable[[], Awaitable[ResultT]],
        *,
        status_code: int,
        headers: AnswerHeaders | None = None,
    ) -> ResultT | Response:
        """Run `operation` at most once per key: its result, or the replayed response.

        Without a key the operation simply runs. Errors it raises are not remembered: they
        roll the transaction back, claim included, so a retry runs the operation again.
        With `headers`, the answer carries headers derived from its body, a replay too.
        """
        if key is None:
            result = await operation()
        else:
            with tracer.start_as_current_span("idempotency.claim") as span:
                outcome = await self.begin_request(key, request, request_body)
                replay = isinstance(outcome, IdempotentReplay)
                span.set_attribute("mneme.idempotency.replay", replay)
            if isinstance(outcome, IdempotentReplay):
                return outcome.response(None if headers is None else headers.derive(outcome.body))
            result = await operation()
            await self.complete(outcome, status_code, result)
        if headers is not None:
            headers.response.headers.update(headers.derive(jsonable_encoder(result)))
        return result
