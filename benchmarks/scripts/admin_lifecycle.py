"""The data-lifecycle costs: purging a heavy user, and export / import throughput.

Run from the repository root:  python -m benchmarks.scripts.admin_lifecycle [--memories 10000]
    [--threads 100] [--corpus 100000]

Self-contained: starts a throwaway embedded Postgres, migrates it, and writes in SQL (no
embedder needed; vectors are random, with the deployment's dimension) one tenant holding two
identical heavy users (`--memories` memories each with a history event and a vector,
`--threads` threads of `--messages-per-thread` messages each, a summary and an extraction cursor
per thread) among other users (1,000 memories without vectors and 10 threads each) filling the
tenant up to `--corpus` memories. Then it measures, through the service
layer (the code the API and `mneme admin` run):

* export of a heavy user (records/s, MB/s), streamed from one snapshot;
* purge of that user (one transaction, plus the verification counted after the commit), and as
  the baseline, in the same run, the bare DELETE statements for the other, identical user;
* import of the export back (records/s), one transaction.

It prints numbers; nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import AsyncIterator, Sequence

from pydantic import SecretStr
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service import db_migrations
from service.admin.service import AdminService, UserLifecycle
from service.auth.principal import Principal
from service.config import Settings
from service.db import create_engine, create_sessionmaker, set_tenant, tenant_transaction
from service.embedded_postgres import OWNER_ROLE, bootstrap, start_cluster
from service.memories.vector_columns import VectorColumns
from service.providers import EmbedderUnavailable

TENANT = "bench"
DATABASE = "mneme_admin_bench"
HEAVY = ("heavy-a", "heavy-b")

SEED_USER_SQL = """
INSERT INTO user_account (tenant_id, id, name, email) VALUES (:t, :u, 'Bench User', 'b@x.io');
INSERT INTO profile (tenant_id, scope, user_id, document)
     VALUES (:t, 'user', :u, '{"city": "Lisbon", "diet": "vegetarian"}');
INSERT INTO thread (tenant_id, id, user_id, title, last_message_at)
     SELECT :t, gen_random_uuid(), :u, 'thread ' || g, now() FROM generate_series(1, :threads) g;
INSERT INTO message (tenant_id, thread_id, user_id, seq, role, content)
     SELECT :t, th.id, :u, s, CASE WHEN s % 2 = 0 THEN 'user' ELSE 'assistant' END,
            'message ' || s || ' of a conversation about trains, food and the weather in Porto'
       FROM thread th, generate_series(0, :per_thread - 1) s
      WHERE th.tenant_id = :t AND th.user_id = :u;
INSERT INTO thread_summary (tenant_id, thread_id, sequence, start_index, end_index, entries)
     SELECT :t, th.id, 1, 0, 2, '[{"question": "q", "answer": "a", "refs": []}]'
       FROM thread th WHERE th.tenant_id = :t AND th.user_id = :u;
INSERT INTO extraction_cursor (tenant_id, thread_id, through_seq)
     SELECT :t, th.id, 1 FROM thread th WHERE th.tenant_id = :t AND th.user_id = :u;
INSERT INTO memory (tenant_id, scope, user_id, kind, category, text, embedding, embedding_model,
                    metadata)
     SELECT :t, 'user', :u, (ARRAY['semantic', 'episodic', 'procedural'])[1 + g % 3], 'context',
            'memory ' || g || ' of ' || :u || ': likes green tea, rides a bike, visits Porto',
            CASE WHEN :vectors
                 THEN ARRAY(SELECT random() + g * 0 FROM generate_series(1, :dims))::vector END,
            CASE WHEN :vectors THEN 'bench-random' END, '{"origin": "bench"}'
       FROM generate_series(1, :memories) g;
INSERT INTO memory_event (tenant_id, memory_id, user_id, action, new_text, actor)
     SELECT :t, m.id, :u, 'add', m.text, :u FROM memory m WHERE m.tenant_id = :t AND m.user_id = :u;
"""
"""One user with `memories` memories (each with an `add` event), `threads` threads of
`per_thread` messages, a summary and a cursor per thread, a profile."""

BASELINE_SQL = (
    "DELETE FROM memory_event WHERE tenant_id = :t AND user_id = :u",
    "DELETE FROM memory WHERE tenant_id = :t AND user_id = :u",
    "DELETE FROM message WHERE tenant_id = :t AND user_id = :u",
    "DELETE FROM thread WHERE tenant_id = :t AND user_id = :u",
    "DELETE FROM profile WHERE tenant_id = :t AND user_id = :u",
    "DELETE FROM user_account WHERE tenant_id = :t AND id = :u",
)
"""The baseline: the bare deletes a hand-written purge would run (summaries and cursors go by
cascade), without the catalogue, the jobs, the audit trail or the verification."""


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def seed(engine: AsyncEngine, args: argparse.Namespace, dims: int) -> float:
    started = time.perf_counter()
    fillers = max((args.corpus - 2 * args.memories) // 1000, 0)
    # Only the heavy users' memories carry vectors: they are what is exported and purged.
    users = [(u, args.memories, args.threads, True) for u in HEAVY] + [
        (f"user-{n:04d}", 1000, 10, False) for n in range(fillers)
    ]
    async with engine.begin() as connection:
        await connection.execute(text("INSERT INTO tenant (id) VALUES (:t)"), {"t": TENANT})
    for user, memories, threads, vectors in users:
        async with engine.begin() as connection:
            await set_tenant(connection, TENANT)
            for statement in SEED_USER_SQL.strip().split(";\n"):
                await connection.execute(
                    text(statement),
                    {
                        "t": TENANT,
                        "u": user,
                        "threads": threads,
                        "per_thread": args.messages_per_thread,
                        "memories": memories,
                        "dims": dims,
                        "vectors": vectors,
                    },
                )
    async with engine.begin() as connection:
        await connection.execute(text("SET LOCAL statement_timeout = 0"))
        await connection.execute(text("ANALYZE"))
    return time.perf_counter() - started


async def corpus_size(engine: AsyncEngine) -> tuple[int, int]:
    async with engine.connect() as connection:
        memories = (await connection.execute(text("SELECT count(*) FROM memory"))).scalar_one()
        messages = (await connection.execute(text("SELECT count(*) FROM message"))).scalar_one()
    return int(memories), int(messages)


async def run(args: argparse.Namespace) -> None:
    import shutil
    import tempfile
    from pathlib import Path

    workdir = Path(tempfile.mkdtemp(prefix="mneme-admin-bench-"))
    cluster = await asyncio.to_thread(start_cluster, workdir)
    try:
        await bootstrap(cluster, DATABASE)
        settings = Settings(
            _env_file=None,
            database_url=SecretStr(cluster.url("mneme_app", DATABASE)),
            migration_database_url=SecretStr(cluster.url(OWNER_ROLE, DATABASE)),
        )
        owner = create_engine(cluster.url(OWNER_ROLE, DATABASE), settings, pool_size=2)
        runtime = create_engine(cluster.url("mneme_app", DATABASE), settings, pool_size=4)
        try:
            await db_migrations.upgrade(owner, settings)
            seeded = await seed(owner, args, settings.embedding_dims)
            memories, messages = await corpus_size(owner)
            say(
                f"corpus: {memories} memories, {messages} messages in one tenant "
                f"(seeded in {seeded:.1f} s); heavy users: {args.memories} memories, "
                f"{args.threads} threads x {args.messages_per_thread} messages"
            )
            await measure(runtime, owner, settings)
        finally:
            await runtime.dispose()
            await owner.dispose()
    finally:
        await asyncio.to_thread(cluster.stop)
        shutil.rmtree(workdir, ignore_errors=True)


async def measure(runtime: AsyncEngine, owner: AsyncEngine, settings: Settings) -> None:
    sessionmaker = create_sessionmaker(runtime)
    operator = Principal(
        tenant_id=TENANT, subject="bench", kind="service", credential="api_key", is_admin=True
    )
    lifecycle = UserLifecycle(sessionmaker, operator)

    started = time.perf_counter()
    export = await lifecycle.open_export(HEAVY[0])
    lines: list[bytes] = []
    async for line in export.lines():
        lines.append(line)
    elapsed = time.perf_counter() - started
    size = sum(len(line) for line in lines)
    records = len(lines) - 1
    say(
        f"export:   {records} records, {size / 1e6:.1f} MB in {elapsed:.2f} s = "
        f"{records / elapsed:,.0f} records/s, {size / 1e6 / elapsed:.1f} MB/s"
    )

    started = time.perf_counter()
    report = await lifecycle.purge_user(HEAVY[0])
    elapsed = time.perf_counter() - started
    say(
        f"purge:    {sum(report.deleted.values())} rows in {elapsed:.2f} s "
        f"(one transaction + verification after commit; verified={report.verified})"
    )
    started = time.perf_counter()
    async with owner.begin() as connection:
        for statement in BASELINE_SQL:
            await connection.execute(text(statement), {"t": TENANT, "u": HEAVY[1]})
    baseline = time.perf_counter() - started
    say(f"baseline: the bare DELETE statements for the identical user: {baseline:.2f} s")

    async def body() -> AsyncIterator[bytes]:
        for line in lines:
            yield line

    started = time.perf_counter()
    async with tenant_transaction(sessionmaker, TENANT) as session:
        service = AdminService.acting_as(
            session,
            operator,
            profile_max_bytes=settings.profile_max_bytes,
            vector_columns=VectorColumns(_SeededModel(settings.embedding_dims)),
        )
        imported = await service.import_user(HEAVY[0], body())
    elapsed = time.perf_counter() - started
    total = sum(imported.imported.values())
    say(f"import:   {total} records in {elapsed:.2f} s = {total / elapsed:,.0f} records/s")


class _SeededModel:
    """The model the seeded vectors name: an import keeps them in the column that holds it.
    Nothing is embedded here."""

    def __init__(self, dims: int) -> None:
        self.model_name = "bench-random"
        self.dims = dims

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise EmbedderUnavailable("the benchmark embeds nothing")

    async def embed_query(self, text: str) -> list[float]:
        raise EmbedderUnavailable("the benchmark embeds nothing")

    async def aclose(self) -> None:
        """Nothing to release."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=100)
    parser.add_argument("--messages-per-thread", type=int, default=20)
    parser.add_argument("--corpus", type=int, default=100_000)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
