"""The embedded cluster's buffer cache is sized for the machine (PostgreSQL's own 128 MB is far
smaller than a large owner's search reads), set once, and kept across starts; a process that
finds the cluster in use by another never restarts it for its own size."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import asyncpg
import psutil
import pytest

from service.embedded_postgres import (
    HANDLES_FILE,
    SHARED_BUFFERS_MAX_MB,
    SHARED_BUFFERS_MIN_MB,
    SUPERUSER,
    EmbeddedCluster,
    default_shared_buffers_mb,
    start_cluster,
)
from tests.conftest import TEST_SECRET


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


def _command(
    data_dir: Path, *command: str, shared_buffers_mb: int
) -> subprocess.CompletedProcess[str]:
    """`mneme COMMAND` as an operator runs it beside the service, on the same data directory,
    with a buffer cache of its own configured."""
    environment = {
        name: value for name, value in os.environ.items() if not name.startswith("MNEME_")
    }
    environment |= {
        "MNEME_DATA_DIR": str(data_dir),
        "MNEME_EMBEDDED_SHARED_BUFFERS_MB": str(shared_buffers_mb),
        "MNEME_JWT_HS256_SECRET": TEST_SECRET,
    }
    return subprocess.run(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "service", *command],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _running_postmaster(pgdata: Path) -> int | None:
    """The pid of the postmaster running on `pgdata`, if one is."""
    try:
        pid = int((pgdata / "postmaster.pid").read_text().split()[0])
    except (OSError, IndexError, ValueError):
        return None
    try:
        alive = psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return None
    return pid if alive else None


# Starts the embedded cluster here and runs commands in processes of their own beside it.
@pytest.mark.slow
async def test_a_command_beside_a_running_service_attaches_to_its_cluster_as_it_runs(
    tmp_path: Path,
) -> None:
    """The service (this process) runs the cluster with 144 MB; a command configured with
    another size uses it as it is, says so in one line, and leaves it running when it exits;
    the service's stop then stops it. Alone on the data directory, a command starts the
    cluster with its own size and stops it when it exits."""
    pgdata = tmp_path / "pgdata"
    service = start_cluster(tmp_path, shared_buffers_mb=144)
    started = _postmaster_pid(service)
    try:
        for command in (["migrate"], ["admin", "list-users", "--tenant", "acme"]):
            ran = _command(tmp_path, *command, shared_buffers_mb=160)
            assert ran.returncode == 0, ran.stderr
            assert _running_postmaster(pgdata) == started
            assert await _shared_buffers(service) == "144MB"
            notices = [line for line in ran.stderr.splitlines() if "in use by another" in line]
            assert len(notices) == 1, ran.stderr
            assert "with shared_buffers = 144 MB; the 160 MB asked for here" in notices[0]
            # The command let go of its handle; the service's is the only one left.
            assert json.loads((pgdata / HANDLES_FILE).read_text()) == [os.getpid()]
        service.stop()
        # The postmaster the service started, and no other, was running: its stop stops it.
        assert _running_postmaster(pgdata) is None
        ran = _command(tmp_path, "migrate", shared_buffers_mb=160)
        assert ran.returncode == 0, ran.stderr
        assert "embedded Postgres: restarting with shared_buffers = 160 MB" in ran.stderr
        assert "in use by another" not in ran.stderr
        assert _running_postmaster(pgdata) is None
    finally:
        service.stop()
        left = _running_postmaster(pgdata)
        if left is not None:  # a restart under the service left a postmaster of its own
            psutil.Process(left).terminate()
