"""The embedded cluster's buffer cache is sized for the machine (PostgreSQL's own 128 MB is far
smaller than a large owner's search reads), set once, and kept across starts."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import psutil

from service.embedded_postgres import (
    SHARED_BUFFERS_MAX_MB,
    SHARED_BUFFERS_MIN_MB,
    SUPERUSER,
    EmbeddedCluster,
    default_shared_buffers_mb,
    start_cluster,
)


async def _shared_buffers(cluster: EmbeddedCluster) -> str:
    connection = await asyncpg.connect(
        host=str(cluster.socket_dir), user=SUPERUSER, database="postgres"
    )
    try:
        return str(await connection.fetchval("SHOW shared_buffers"))
    finally:
        await connection.close()


def _postmaster_pid(cluster: EmbeddedCluster) -> int:
    return int((Path(cluster.handle.pgdata) / "postmaster.pid").read_text().split()[0])


def test_the_default_is_a_quarter_of_the_memory_within_bounds() -> None:
    quarter = psutil.virtual_memory().total // (1024 * 1024) // 4
    assert default_shared_buffers_mb() == max(
        SHARED_BUFFERS_MIN_MB, min(SHARED_BUFFERS_MAX_MB, quarter)
    )


async def test_the_session_cluster_runs_with_the_default_size(cluster: EmbeddedCluster) -> None:
    mb = default_shared_buffers_mb()
    expected = f"{mb // 1024}GB" if mb % 1024 == 0 else f"{mb}MB"
    assert await _shared_buffers(cluster) == expected


async def test_a_size_is_set_once_and_a_new_one_restarts_the_cluster(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path, shared_buffers_mb=144)
    try:
        assert await _shared_buffers(cluster) == "144MB"
        started = _postmaster_pid(cluster)
        # Started again with the same size (another process, the next start): no restart.
        again = start_cluster(tmp_path, shared_buffers_mb=144)
        assert _postmaster_pid(again) == started
        # Another size: taken, through one restart.
        resized = start_cluster(tmp_path, shared_buffers_mb=160)
        assert await _shared_buffers(resized) == "160MB"
        assert _postmaster_pid(resized) != started
    finally:
        cluster.stop()
