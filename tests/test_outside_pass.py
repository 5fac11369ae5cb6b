"""An outside pass, as an attacker would run it: hand-made hostile values of every class that
once got past a side door (times at and past the calendar's edges, numbers no double holds,
identifiers with separators, JSON nested too deep, secrets), tried against every way data
enters: REST bodies, paths and query strings, import lines, and MCP tool arguments.

For every case: no answer is a 5xx (or an MCP `INTERNAL_ERROR`); a refused case changes no
row of the tenant (counted per table, as the owner); a case that must be refused is refused.
At the end no secret sits in any row of the tenant outside the tables that keep the user's
own words as sent (messages and their summaries). Each test reports every failing case at once.

About 1,000 cases, a minute or two on a small machine: behind the `slow` marker (`pytest -m slow`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Container
from dataclasses import dataclass
from functools import partial
from typing import Any
from urllib.parse import quote

import pytest
from httpx import AsyncClient, Response
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from tests.admin.conftest import seed_user
from tests.conftest import bearer, new_tenant
from tests.fuzz.hostile import (
    BLANK_TEXTS,
    HOSTILE_IDENTIFIERS,
    HOSTILE_JSON,
    HOSTILE_NUMBERS,
    HOSTILE_TIMES,
    SECRET_TEXTS,
    splice,
)
from tests.secret_samples import SAMPLES

pytestmark = pytest.mark.slow

JSON = {"content-type": "application/json"}
NDJSON = {"content-type": "application/x-ndjson"}
JSON_PATCH = {"content-type": "application/json-patch+json"}
MCP_HEADERS = {"accept": "application/json, text/event-stream", **JSON}
# Tables that keep the user's words as sent (masked wherever they are replayed).
AS_SENT_TABLES = frozenset({"message", "thread_summary"})

QUESTIONS = [
    "what happened on 9999-12-31",
    "The deed is dated 1 January 0001",
    "what did I do on 0000-00-00",
    "on 31/12/9999 at 23:59",
    "December 31, 9999",
    "what about 10000-01-01",
    "in the year 0",
    "on 29 February 2025",
    "yesterday at 25:00",
    "between 0001-01-01 and 9999-12-31",
    "\u200b",
    "tea" + "\u0301" * 500,
]

# Request bodies with `<>` where the hostile value goes, as written.
EVENT_AT = '{"text": "tea", "event_at": <>}'
EXPIRES_AT = '{"text": "tea", "expires_at": <>}'
EVENT_AFTER = '{"query": "tea", "event_after": <>}'
METADATA_X = '{"text": "tea", "metadata": {"x": <>}}'
CONFIDENCE = '{"text": "tea", "confidence": <>}'
RECENCY = '{"query": "tea", "recency_weight": <>}'
LEXICAL_WEIGHT = '{"query": "tea", "mode": "lexical", "linear_lexical_weight": <>}'
MESSAGE_METADATA_X = '{"messages": [{"role": "user", "content": "hi", "metadata": {"x": <>}}]}'
METADATA = '{"text": "tea", "metadata": <>}'
THREAD_METADATA = '{"metadata": <>}'
TOOL_CALLS = '{"messages": [{"role": "assistant", "content": "ok", "tool_calls": [<>]}]}'
TEXT = '{"text": <>}'
SPEAKER = '{"text": "tea", "speaker": <>}'
PROCEDURE_STYLE = '{"style": <>, "workflow": "Plan first."}'
METADATA_NOTE = '{"text": "tea", "metadata": {"note": <>}}'
TITLE = '{"title": <>}'
QUERY = '{"query": <>}'
PROFILE_ADD = '[{"op": "add", "path": "/note", "value": <>}]'


@dataclass(frozen=True)
class Case:
    name: str
    send: Callable[[], Awaitable[Response]]
    must_refuse: bool = False


def raw(value_json: str, template: str) -> bytes:
    """`template` with `<>` replaced by `value_json` as written (what no encoder produces)."""
    return template.replace("<>", value_json).encode("utf-8", "surrogatepass")


def mcp_body(tool: str, arguments_json: str) -> bytes:
    head = '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "%s", '
    return raw(arguments_json, head % tool + '"arguments": <>}}')


async def tenant_rows(engine: AsyncEngine, tenant: str) -> dict[str, int]:
    """Rows per table the tenant holds, as the owner (no row-level security in the way)."""
    async with engine.connect() as connection:
        tables = [
            row.table_name
            for row in await connection.execute(
                text(
                    "SELECT table_name FROM information_schema.columns WHERE column_name = "
                    "'tenant_id' AND table_schema = current_schema() ORDER BY table_name"
                )
            )
        ]
        counts = await connection.execute(
            text(
                " UNION ALL ".join(
                    f"SELECT '{t}' AS name, count(*) AS n FROM {t} WHERE tenant_id = :t"
                    for t in tables
                )
            ),
            {"t": tenant},
        )
        return {row.name: int(row.n) for row in counts}


async def tenant_text(engine: AsyncEngine, tenant: str, *, skip: frozenset[str]) -> str:
    async with engine.connect() as connection:
        names = [n for n in await tenant_rows(engine, tenant) if n not in skip]
        rows = [
            str(row)
            for name in names
            for row in await connection.execute(
                text(f"SELECT t::text FROM {name} t WHERE tenant_id = :t"), {"t": tenant}
            )
        ]
    return "\n".join(rows)


def is_server_error(response: Response) -> bool:
    return response.status_code >= 500 or "INTERNAL_ERROR" in response.text


def refused(response: Response) -> bool:
    """A 4xx, or an MCP tool error (MCP answers 200 with `isError`)."""
    if 400 <= response.status_code < 500:
        return True
    if response.headers.get("content-type", "").startswith("application/json"):
        body = response.json()
        if isinstance(body, dict) and ("error" in body or body.get("result", {}).get("isError")):
            return True
    return False


async def run_cases(
    cases: list[Case],
    engine: AsyncEngine,
    tenant: str,
    after_accepted: Callable[[], Awaitable[None]] | None = None,
    refusals: Container[int] | None = None,
) -> list[str]:
    """Every case once; what went wrong, one line per case. `refusals`: the only statuses a
    refusal may have (a 409 would hide what a case was about)."""
    failures: list[str] = []
    for case in cases:
        before = await tenant_rows(engine, tenant)
        response = await case.send()
        if is_server_error(response):
            failures.append(f"{case.name}: server error {response.text[:200]}")
            continue
        if refused(response):
            if refusals is not None and response.status_code not in refusals:
                failures.append(f"{case.name}: refused with {response.status_code}")
            if await tenant_rows(engine, tenant) != before:
                failures.append(f"{case.name}: refused ({response.status_code}) but stored")
            continue
        if case.must_refuse:
            failures.append(f"{case.name}: accepted ({response.status_code}), must be refused")
        if after_accepted is not None:
            await after_accepted()
    return failures


async def test_rest_bodies_paths_and_queries_refuse_hostile_values_storing_nothing(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine
) -> None:
    tenant = new_tenant()
    agent = bearer(settings, tenant, "agent", service=True)
    admin = bearer(settings, tenant, "root", admin=True)
    ada = bearer(settings, tenant, "ada")
    user = "/v1/users/ada"
    # The user, a thread and an admin's first request exist before the cases, so a case's
    # first sight of them is no change.
    assert (await client.get("/v1/users/me/memories", headers=ada)).status_code == 200
    assert (await client.get("/v1/admin/users", headers=admin)).status_code == 200
    thread = (await client.post(f"{user}/threads", headers=agent, json={})).json()["id"]
    memory = (await client.post(f"{user}/memories", headers=agent, json={"text": "tea"})).json()

    def post(path: str, body: bytes, headers: dict[str, str] = agent) -> Callable[[], Any]:
        return lambda: client.post(path, content=body, headers={**headers, **JSON})

    def get(path: str, params: dict[str, str], headers: dict[str, str] = admin) -> Any:
        return lambda: client.get(path, params=params, headers=headers)

    def patch_memory(body: bytes) -> Callable[[], Any]:
        return lambda: client.patch(
            f"{user}/memories/{memory['id']}", content=body, headers={**agent, **JSON}
        )

    def put_keyed(body: bytes) -> Callable[[], Any]:
        return lambda: client.put(
            f"{user}/keyed-memories",
            params={"kind": "semantic", "key": "drink"},
            content=body,
            headers={**agent, **JSON},
        )

    def put_procedures(body: bytes) -> Callable[[], Any]:
        return lambda: client.put(f"{user}/procedures", content=body, headers={**agent, **JSON})

    def patch_profile(body: bytes) -> Callable[[], Any]:
        return lambda: client.patch(
            f"{user}/profile", content=body, headers={**agent, **JSON_PATCH}
        )

    cases: list[Case] = []
    for t in HOSTILE_TIMES:
        value = json.dumps(t)
        cases += [
            Case(f"memory event_at {t!r}", post(f"{user}/memories", raw(value, EVENT_AT))),
            Case(f"memory expires_at {t!r}", post(f"{user}/memories", raw(value, EXPIRES_AT))),
            Case(
                f"search event_after {t!r}",
                post(f"{user}/memories/search", raw(value, EVENT_AFTER)),
            ),
            Case(f"users active_after {t!r}", get("/v1/admin/users", {"active_after": t})),
            Case(f"users active_before {t!r}", get("/v1/admin/users", {"active_before": t})),
            Case(f"audit since {t!r}", get("/v1/admin/audit", {"since": t})),
            Case(f"audit until {t!r}", get("/v1/admin/audit", {"until": t})),
        ]
    for question in QUESTIONS:
        value = json.dumps(question)
        cases += [
            Case(f"search {question!r}", post(f"{user}/memories/search", raw(value, QUERY))),
            Case(f"context {question!r}", post(f"{user}/context", raw(value, QUERY))),
        ]
    for n in HOSTILE_NUMBERS:
        cases += [
            Case(f"memory metadata {n[:20]}", post(f"{user}/memories", raw(n, METADATA_X))),
            Case(f"memory confidence {n[:20]}", post(f"{user}/memories", raw(n, CONFIDENCE))),
            Case(f"recency_weight {n[:20]}", post(f"{user}/memories/search", raw(n, RECENCY))),
            Case(
                f"lexical weight {n[:20]}", post(f"{user}/memories/search", raw(n, LEXICAL_WEIGHT))
            ),
            Case(
                f"message metadata {n[:20]}",
                post(f"{user}/threads/{thread}/messages", raw(n, MESSAGE_METADATA_X)),
            ),
        ]
    for identifier in HOSTILE_IDENTIFIERS:
        path = f"/v1/users/{quote(identifier, safe='')}"
        cases += [
            Case(
                f"path user {identifier[:20]!r} write",
                post(f"{path}/memories", b'{"text": "tea"}'),
                must_refuse=True,
            ),
            Case(
                f"path user {identifier[:20]!r} read",
                partial(client.get, f"{path}/memories", headers=agent),
            ),
            Case(
                f"admin user {identifier[:20]!r}",
                partial(client.get, f"/v1/admin/users/{quote(identifier, safe='')}", headers=admin),
            ),
        ]
        if identifier:
            # The dev minter refuses such a subject; a token carrying it anyway must be refused.
            claims: dict[str, Any] = {settings.user_claim: identifier}
            token = bearer(settings, tenant, "x", **claims)
            cases.append(
                Case(
                    f"token subject {identifier[:20]!r}",
                    post("/v1/users/me/memories", b'{"text": "tea"}', token),
                    must_refuse=True,
                )
            )
    for value in HOSTILE_JSON:
        cases += [
            Case(f"memory metadata {value[:20]}", post(f"{user}/memories", raw(value, METADATA))),
            Case(
                f"thread metadata {value[:20]}",
                post(f"{user}/threads", raw(value, THREAD_METADATA)),
            ),
            Case(
                f"tool_calls {value[:20]}",
                post(f"{user}/threads/{thread}/messages", raw(value, TOOL_CALLS)),
            ),
        ]
    for blank in BLANK_TEXTS:
        value = json.dumps(blank)
        cases += [
            Case(f"memory text {blank!r}", post(f"{user}/memories", raw(value, TEXT)), True),
            Case(f"memory patch {blank!r}", patch_memory(raw(value, TEXT)), True),
            Case(f"keyed memory {blank!r}", put_keyed(raw(value, TEXT)), True),
            Case(f"speaker {blank!r}", post(f"{user}/memories", raw(value, SPEAKER)), True),
            Case(f"search {blank!r}", post(f"{user}/memories/search", raw(value, QUERY)), True),
            Case(f"context {blank!r}", post(f"{user}/context", raw(value, QUERY)), True),
            Case(f"procedure {blank!r}", put_procedures(raw(value, PROCEDURE_STYLE))),
        ]
    for secret in SECRET_TEXTS:
        value = json.dumps(secret)
        cases += [
            Case(
                f"memory text {secret[:16]!r}",
                post(f"{user}/memories", raw(value, TEXT)),
                must_refuse=True,
            ),
            Case(
                f"memory metadata {secret[:16]!r}",
                post(f"{user}/memories", raw(value, METADATA_NOTE)),
                must_refuse=True,
            ),
            Case(
                f"thread title {secret[:16]!r}",
                post(f"{user}/threads", raw(value, TITLE)),
                must_refuse=True,
            ),
            Case(
                f"profile value {secret[:16]!r}",
                patch_profile(raw(value, PROFILE_ADD)),
                must_refuse=True,
            ),
        ]
    assert len(cases) >= 200

    failures = await run_cases(cases, owner_engine, tenant)

    assert not failures, f"{len(failures)} of {len(cases)} cases:\n" + "\n".join(failures)
    stored = await tenant_text(owner_engine, tenant, skip=AS_SENT_TABLES)
    assert not [kind for kind, s in SAMPLES.items() if s.core in stored]


async def test_import_lines_refuse_hostile_values_storing_nothing(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine
) -> None:
    tenant = new_tenant()
    admin = bearer(settings, tenant, "root", admin=True)
    await seed_user(client, settings, owner_engine, tenant, "ada")
    exported = await client.get("/v1/users/ada/export", headers=admin)
    records = [json.loads(line) for line in exported.text.splitlines()]
    assert (await client.delete("/v1/admin/users/ada", headers=admin)).status_code == 200
    lines = [json.dumps(record) for record in records]

    def first(kind: str) -> int:
        return next(i for i, record in enumerate(records) if record["type"] == kind)

    def with_line(kind: str, column: str, value_json: str, path: str = "ada") -> Case:
        index = first(kind)
        body = [*lines]
        body[index] = splice(records[index], column, value_json)
        content = ("\n".join(body) + "\n").encode("utf-8", "surrogatepass")
        return Case(
            f"import {kind}.{column} = {value_json[:24]}",
            lambda: client.post(
                f"/v1/admin/users/{quote(path, safe='')}/import",
                content=content,
                headers={**admin, **NDJSON},
            ),
            must_refuse=must,
        )

    cases: list[Case] = []
    must = False
    for t in HOSTILE_TIMES:
        cases += [
            with_line("memory", "created_at", json.dumps(t)),
            with_line("user_account", "last_seen_at", json.dumps(t)),
            with_line("audit_log", "created_at", json.dumps(t)),
        ]
    for n in HOSTILE_NUMBERS:
        cases += [
            with_line("memory", "metadata", '{"x": ' + n + "}"),
            with_line("memory", "confidence", n),
            with_line("message", "seq", n),
        ]
    for value in HOSTILE_JSON:
        cases += [
            with_line("profile", "document", '{"note": ' + value + "}"),
            with_line("message", "tool_calls", "[" + value + "]"),
            with_line("thread_summary", "entries", "[" + value + "]"),
        ]
    must = True
    for identifier in HOSTILE_IDENTIFIERS:
        cases += [
            with_line("memory", "user_id", json.dumps(identifier)),
            with_line("profile", "user_id", json.dumps(identifier), path=identifier or "-"),
        ]
    for secret in SECRET_TEXTS:
        value = json.dumps(secret)
        cases += [
            with_line("memory", "text", value),
            with_line("profile", "document", '{"note": ' + value + "}"),
            with_line("thread", "title", value),
            with_line("audit_log", "detail", '{"note": ' + value + "}"),
        ]
    for key in ("9lives", "home town", "city\n", "k" * 129, "wifi_password"):
        cases.append(with_line("profile", "document", json.dumps({key: "x"})))
    cases.append(with_line("profile", "document", json.dumps({"notes": "x" * 9000})))
    assert len(cases) >= 200

    async def purge() -> None:
        # An accepted import leaves a user the next case would find not empty.
        assert (await client.delete("/v1/admin/users/ada", headers=admin)).status_code == 200
        assert (await client.get("/v1/admin/users", headers=admin)).status_code == 200

    failures = await run_cases(
        cases, owner_engine, tenant, after_accepted=purge, refusals={404, 413, 422}
    )

    assert not failures, f"{len(failures)} of {len(cases)} cases:\n" + "\n".join(failures)
    stored = await tenant_text(owner_engine, tenant, skip=AS_SENT_TABLES)
    assert not [kind for kind, s in SAMPLES.items() if s.core in stored]


async def test_mcp_tool_arguments_refuse_hostile_values_storing_nothing(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine
) -> None:
    tenant = new_tenant()
    ada = bearer(settings, tenant, "ada")
    assert (await client.get("/v1/users/me/memories", headers=ada)).status_code == 200

    def tool(name: str, arguments_json: str, *, must_refuse: bool = False) -> Case:
        body = mcp_body(name, arguments_json)
        return Case(
            f"mcp {name} {arguments_json[:40]}",
            lambda: client.post("/mcp", content=body, headers={**ada, **MCP_HEADERS}),
            must_refuse=must_refuse,
        )

    cases: list[Case] = []
    for question in QUESTIONS:
        value = json.dumps(question)
        cases += [
            tool("recall", '{"query": ' + value + "}"),
            tool("get_context", '{"query": ' + value + "}"),
            tool("remember", '{"text": ' + value + "}"),
        ]
    for n in HOSTILE_NUMBERS:
        cases += [
            tool("remember", '{"text": "tea", "metadata": {"x": ' + n + "}}"),
            tool("recall", '{"query": "tea", "limit": ' + n + "}"),
            tool("get_context", '{"query": "tea", "budget_tokens": ' + n + "}"),
            tool(
                "update_profile",
                '{"operations": [{"op": "add", "path": "/n", "value": ' + n + "}]}",
            ),
        ]
    for value in HOSTILE_JSON:
        cases += [
            tool("remember", '{"text": "tea", "metadata": ' + value + "}"),
            tool(
                "update_profile",
                '{"operations": [{"op": "add", "path": "/v", "value": ' + value + "}]}",
            ),
        ]
    for t in HOSTILE_TIMES:
        cases.append(tool("remember", '{"text": ' + json.dumps(f"met on {t}") + "}"))
    for blank in BLANK_TEXTS:
        value = json.dumps(blank)
        cases += [
            tool("remember", '{"text": ' + value + "}", must_refuse=True),
            tool("recall", '{"query": ' + value + "}", must_refuse=True),
            tool("get_context", '{"query": ' + value + "}", must_refuse=True),
        ]
    for identifier in HOSTILE_IDENTIFIERS:
        value = json.dumps(identifier)
        cases += [
            tool("forget", '{"memory_id": ' + value + "}", must_refuse=True),
            tool("get_context", '{"query": "tea", "thread_id": ' + value + "}", must_refuse=True),
        ]
    for secret in SECRET_TEXTS:
        value = json.dumps(secret)
        cases += [
            tool("remember", '{"text": ' + value + "}", must_refuse=True),
            tool(
                "remember", '{"text": "tea", "metadata": {"note": ' + value + "}}", must_refuse=True
            ),
            tool(
                "update_profile",
                '{"operations": [{"op": "add", "path": "/note", "value": ' + value + "}]}",
                must_refuse=True,
            ),
        ]
    for key in ("/9lives", "/home town", "/city\n", "/" + "k" * 129, "/wifi_password"):
        operation = json.dumps([{"op": "add", "path": key, "value": "x"}])
        cases.append(tool("update_profile", '{"operations": ' + operation + "}", must_refuse=True))
    assert len(cases) >= 200

    failures = await run_cases(cases, owner_engine, tenant)

    assert not failures, f"{len(failures)} of {len(cases)} cases:\n" + "\n".join(failures)
    stored = await tenant_text(owner_engine, tenant, skip=AS_SENT_TABLES)
    assert not [kind for kind, s in SAMPLES.items() if s.core in stored]
