"""Work that gave up during a model outage heals itself: new work never inherits a failed job's
spent attempts, the sweep queues a stranded thread again with backoff, and an admin (or the
`mneme admin` command) can rerun a user's threads."""

from __future__ import annotations

import argparse
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any

import pytest
from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.admin.cli import add_admin_parser, run_admin
from service.config import Settings, get_settings
from service.db import create_sessionmaker, tenant_transaction
from service.embedded_postgres import EmbeddedCluster
from service.extraction.record import FailureRecord
from service.extraction.recovery import WritePathRecovery
from service.extraction.repository import ExtractionRepository, Stranded
from service.jobs import MEMORY_EXTRACTION_JOB, THREAD_SUMMARY_JOB
from service.jobs.status import JobStatusRepository
from service.main import create_app
from tests.conftest import assert_problem, bearer
from tests.extraction.conftest import (
    eventually,
    fact,
    jobs,
    llm_settings,
    say,
    serve,
    wait_for_passes,
    write_path_settings,
)
from tests.fixtures.factories import memories, start_thread
from tests.fixtures.openai_server import API_KEY, MODEL, FakeOpenAIServer, ScriptedExtraction

ADA = ScriptedExtraction([("Ada", [fact("User's daughter is named Ada.", subject="daughter")])])


@pytest.fixture
async def client_for(
    cluster: EmbeddedCluster, settings: Settings, fresh_llm: FakeOpenAIServer
) -> AsyncIterator[Any]:
    """Starts an app (with its worker) on the given settings; stopped after the test."""
    clients: list[AsyncIterator[AsyncClient]] = []

    async def start(**overrides: Any) -> AsyncClient:
        values = {"extraction_strategy": "every_turn", **overrides}
        served = serve(create_app(llm_settings(cluster, fresh_llm, **values)))
        clients.append(served)
        return await anext(served)

    yield start
    for served in clients:
        with pytest.raises(StopAsyncIteration):
            await anext(served)


@pytest.fixture(autouse=True)
async def purge_jobs(runtime_engine: AsyncEngine, tenant: str) -> AsyncIterator[None]:
    """Leaves no job of the test's tenant queued (some wait out long backoffs on purpose),
    so no later test's worker runs one against its own model server."""
    yield
    async with runtime_engine.begin() as connection:
        await connection.execute(
            text("DELETE FROM pgqueuer WHERE position(CAST(:needle AS bytea) IN payload) > 0"),
            {"needle": f'"tenant_id":"{tenant}"'.encode()},
        )


def gave_up(body: dict[str, Any]) -> bool:
    return any(f["final"] for f in body["failures"]) and not body["pending"]


async def test_an_append_during_a_retry_wait_gets_a_fresh_job_of_its_own(
    client_for: Any, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    client = await client_for(job_retry_initial_delay_seconds=3600)
    headers = bearer(settings, tenant, "alex")
    fresh_llm.mode = "fail"
    thread_id = await start_thread(client, headers)
    await say(client, headers, thread_id, "Hello there, I am planning a trip.")
    await eventually(client, headers, lambda b: [p["attempts"] for p in b["pending"]] == [1])

    await say(client, headers, thread_id, "My daughter's name is Ada.")
    pending = (await jobs(client, headers))["pending"]
    assert sorted(p["attempts"] for p in pending) == [0, 1]
    assert {p["thread_id"] for p in pending} == {thread_id}


async def test_a_conversation_that_ended_during_an_outage_is_caught_up_by_the_sweep(
    client_for: Any, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    client = await client_for(job_max_attempts=1, write_path_sweep_interval_seconds=0.5)
    headers = bearer(settings, tenant, "alex")
    fresh_llm.mode = "fail"
    thread_id = await start_thread(client, headers)
    await say(client, headers, thread_id, "My daughter's name is Ada.", "Lovely name!")
    await eventually(client, headers, gave_up)

    # No new append: the model comes back and the sweep alone finishes the conversation.
    fresh_llm.mode = "summarize"
    fresh_llm.reply = ADA
    [finished] = await wait_for_passes(client, headers, 1)
    assert finished["through_seq"] == 1
    assert [m["text"] for m in await memories(client, headers)] == ["User's daughter is named Ada."]


async def test_the_sweep_waits_out_a_backoff_that_doubles_each_time_it_requeues(
    client: AsyncClient, settings: Settings, runtime_engine: AsyncEngine, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alex")
    thread_id = await start_thread(client, headers)
    await say(client, headers, thread_id, "Hello.")
    thread_id_uuid = uuid.UUID(thread_id)
    sessionmaker = create_sessionmaker(runtime_engine)
    recovery = WritePathRecovery(
        sessionmaker,
        settings.model_copy(update={"jobs_enabled": True, "write_path_sweep_interval_seconds": 60}),
        chat_model=None,
    )
    assert [recovery.backoff(n) for n in range(3)] == [timedelta(seconds=s) for s in (60, 120, 240)]

    async def give_up() -> Stranded:
        async with tenant_transaction(sessionmaker, tenant) as session:
            repository = ExtractionRepository(session, tenant)
            record = FailureRecord(user_id="alex", kind="turn_memories", attempt=5, final=True)
            await repository.record_failure("mneme:jobs", thread_id_uuid, record)
            [stranded] = await repository.stranded(THREAD_SUMMARY_JOB)
            return stranded

    first = await give_up()
    early = await recovery.sweep(tenant, now=first.failed_at + timedelta(seconds=59))
    assert early.queued == [] and early.next_run == first.failed_at + timedelta(seconds=60)
    due = await recovery.sweep(tenant, now=first.failed_at + timedelta(seconds=61))
    assert due.queued == [(thread_id_uuid, "turn_memories")] and due.next_run is None
    again = await recovery.sweep(tenant, now=first.failed_at + timedelta(seconds=62))
    assert again.queued == []  # queued once per give-up

    second = await give_up()
    assert second.requeues == 1
    later = await recovery.sweep(tenant, now=second.failed_at + timedelta(seconds=61))
    assert later.queued == [] and later.next_run == second.failed_at + timedelta(seconds=120)
    async with tenant_transaction(sessionmaker, tenant) as session:
        queued = await JobStatusRepository(session, tenant).pending(
            ["turn_memories", "write_path_sweep"], user_id=None, limit=10
        )
    assert sorted(j.kind for j in queued) == ["turn_memories", "write_path_sweep"]


async def test_an_admin_reruns_a_users_stranded_threads(
    client_for: Any, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    client = await client_for(job_max_attempts=1, write_path_sweep_interval_seconds=3600)
    headers = bearer(settings, tenant, "alex")
    admin = bearer(settings, tenant, "root", admin=True)
    fresh_llm.mode = "fail"
    thread_id = await start_thread(client, headers)
    await say(client, headers, thread_id, "My daughter's name is Ada.", "Lovely name!")
    await eventually(client, headers, gave_up)
    fresh_llm.mode = "summarize"
    fresh_llm.reply = ADA

    refused = await client.post("/v1/admin/jobs/rerun", headers=headers, json={"user_id": "alex"})
    assert_problem(refused, 403, "FORBIDDEN")
    unknown = await client.post(
        "/v1/admin/jobs/rerun",
        headers=admin,
        json={"user_id": "alex", "thread_id": "00000000-0000-0000-0000-000000000000"},
    )
    assert_problem(unknown, 404, "NOT_FOUND")
    response = await client.post("/v1/admin/jobs/rerun", headers=admin, json={"user_id": "alex"})
    assert response.status_code == 202, response.text
    assert response.json() == {"threads": [thread_id], "kinds": [MEMORY_EXTRACTION_JOB]}
    await wait_for_passes(client, headers, 1)
    assert [m["text"] for m in await memories(client, headers)] == ["User's daughter is named Ada."]


async def test_an_admins_rerun_is_audited_as_that_admin(
    client_for: Any, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    client = await client_for(write_path_sweep_interval_seconds=3600)
    headers = bearer(settings, tenant, "alex")
    thread_id = await start_thread(client, headers)
    await say(client, headers, thread_id, "I'm training for a marathon.")
    admin = bearer(settings, tenant, "root", admin=True)
    response = await client.post(
        "/v1/admin/jobs/rerun",
        headers={**admin, "X-Request-ID": "rerun-by-root"},
        json={"user_id": "alex", "thread_id": thread_id},
    )
    assert response.status_code == 202, response.text
    assert response.json()["kinds"]
    audit = await client.get("/v1/admin/audit", headers=admin, params={"action": "job.requeued"})
    assert audit.status_code == 200, audit.text
    entries = audit.json()["items"]
    assert entries and all(
        (e["actor_kind"], e["actor_id"], e["target_id"], e["request_id"], e["detail"]["reason"])
        == ("user", "root", thread_id, "rerun-by-root", "rerun")
        for e in entries
    )


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="mneme")
    add_admin_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


@pytest.fixture
def command_env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The environment of `mneme admin` at an operator's shell: the database, nothing else."""
    assert settings.database_url is not None
    monkeypatch.setenv("MNEME_DATABASE_URL", settings.database_url.get_secret_value())
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


@pytest.mark.parametrize("command_has_model", [False, True], ids=["shell", "shell-with-llm"])
@pytest.mark.parametrize("service_has_model", [True, False], ids=["llm-service", "turns-service"])
async def test_the_admin_command_reruns_a_thread_as_the_services_worker_would(
    command_env: None,
    client: AsyncClient,
    cluster: EmbeddedCluster,
    fresh_llm: FakeOpenAIServer,
    settings: Settings,
    tenant: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    service_has_model: bool,
    command_has_model: bool,
) -> None:
    # What the command's own environment says of a model (an ops shell or a CronJob rarely
    # holds the service's LLM settings) must not decide how the service processes the turns:
    # stored raw by a service that could extract from them, they are never extracted.
    headers = bearer(settings, tenant, "alex")
    thread_id = await start_thread(client, headers)  # an app without a worker: nothing runs
    await say(client, headers, thread_id, "My daughter's name is Ada.", "Lovely name!")
    fresh_llm.reply = ADA
    worker_settings = (
        llm_settings(cluster, fresh_llm, extraction_strategy="every_turn")
        if service_has_model
        else write_path_settings(cluster, extraction_strategy="every_turn")
    )
    if command_has_model:  # set after the service's settings, which read the environment too
        monkeypatch.setenv("MNEME_LLM_BASE_URL", fresh_llm.base_url)
        monkeypatch.setenv("MNEME_LLM_API_KEY", API_KEY)
        get_settings.cache_clear()
    served = serve(create_app(worker_settings))
    service = await anext(served)
    try:
        rerun = ["admin", "rerun-jobs", "--tenant", tenant, "--user", "alex"]
        assert await run_admin(_parse([*rerun, "--thread", thread_id])) == 0
        assert "for 1 thread(s)" in capsys.readouterr().out
        [finished] = await wait_for_passes(service, headers, 1)
        texts = [m["text"] for m in await memories(service, headers)]
    finally:
        with pytest.raises(StopAsyncIteration):
            await anext(served)
    if service_has_model:
        assert (finished["mode"], texts) == ("llm", ["User's daughter is named Ada."])
    else:
        assert (finished["mode"], texts) == ("turns", ["My daughter's name is Ada."])


async def test_the_admin_command_answers_an_unknown_user_or_thread_as_the_api_does(
    command_env: None,
    client: AsyncClient,
    settings: Settings,
    tenant: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    headers = bearer(settings, tenant, "alex")
    thread_id = await start_thread(client, headers)
    await say(client, headers, thread_id, "I'm training for a marathon.")
    rerun = ["admin", "rerun-jobs", "--tenant", tenant, "--user"]
    capsys.readouterr()

    assert await run_admin(_parse([*rerun, "nobody"])) == 1
    assert capsys.readouterr().err.strip() == (
        "mneme admin rerun-jobs: NOT_FOUND: User 'nobody' has no thread with messages here."
    )
    other = uuid.uuid4()
    assert await run_admin(_parse([*rerun, "alex", "--thread", str(other)])) == 1
    assert capsys.readouterr().err.strip() == (
        f"mneme admin rerun-jobs: NOT_FOUND: No thread {other} of this user with messages."
    )
    assert await run_admin(_parse([*rerun, "nobody", "--thread", thread_id])) == 1
    assert "NOT_FOUND" in capsys.readouterr().err


async def test_summary_passes_are_listed_in_the_jobs_view(
    client_for: Any, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    client = await client_for(thread_summary_keep_recent=2, extraction_enabled=False)
    headers = bearer(settings, tenant, "alex")
    thread_id = await start_thread(client, headers)
    for said in ("I'm planning a trip to Japan.", "Mostly Kyoto and Osaka.", "In April."):
        await say(client, headers, thread_id, said)
    body = await eventually(client, headers, lambda b: bool(b["summaries"]) and not b["pending"])
    [summary] = body["summaries"]
    assert summary["thread_id"] == thread_id
    assert (summary["start_index"], summary["end_index"]) == (0, 4)
    assert summary["model"] == MODEL


async def test_a_rerun_for_a_user_without_threads_is_a_404_and_any_user_id_is_taken(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    admin = bearer(settings, tenant, "root", admin=True)
    for user_id in ("nobody", "u" * 256):
        response = await client.post(
            "/v1/admin/jobs/rerun", headers=admin, json={"user_id": user_id}
        )
        assert_problem(response, 404, "NOT_FOUND")
    for user_id in ("me", "u" * 257, "a/b"):
        response = await client.post(
            "/v1/admin/jobs/rerun", headers=admin, json={"user_id": user_id}
        )
        assert_problem(response, 422, "VALIDATION_FAILED")
