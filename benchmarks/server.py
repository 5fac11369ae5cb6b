"""The service as users run it, for the load benchmark: uvicorn in a child process, on loopback.

A child process keeps the load generator's own CPU time (httpx, JSON) out of the server's event
loop; both still share the machine's cores with Postgres, which is the point on a single box.
uvicorn binds 127.0.0.1 itself, on a port the kernel just reported free, as `mneme serve` does.
(Handing it a pre-bound socket with `--fd` would be race-free, but uvicorn then treats the socket
as a Unix one and never sets TCP_NODELAY: every response would wait ~40 ms for a delayed ACK.)
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from pydantic import SecretStr

import service
from service.config import Settings

LOOPBACK = "127.0.0.1"
READY_TIMEOUT_SECONDS = 300.0
STOP_TIMEOUT_SECONDS = 30.0
# Accept backlog: more than the benchmark's largest number of concurrent clients.
BACKLOG = 512


class ServerFailed(RuntimeError):
    """The child process exited or never became ready; carries the tail of its log."""


@dataclass(frozen=True)
class RunningServer:
    base_url: str
    pid: int
    command: tuple[str, ...]


def server_cpu_seconds(pid: int) -> float:
    """The CPU seconds the live threads of process `pid` have run so far (the sum of their
    `/proc/<pid>/task/<tid>/schedstat`, in nanoseconds): precise enough to take around a single
    request, where `/proc/<pid>/stat` counts in clock ticks of 10 ms. A thread that has exited
    no longer counts, so take both readings while the server runs."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread exited between the listing and the read
    return total / 1e9


def _env_value(value: Any) -> str:
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | dict):
        return json.dumps(value)
    return str(value)


def settings_environment(settings: Settings) -> dict[str, str]:
    """The process environment that makes a child's `Settings()` equal `settings`: every
    setting as its MNEME_ variable, unset ones removed from what the child inherits."""
    environment = dict(os.environ)
    for name in Settings.model_fields:
        variable = f"MNEME_{name.upper()}"
        value = getattr(settings, name)
        if value is None:
            environment.pop(variable, None)
        else:
            environment[variable] = _env_value(value)
    return environment


def _importing_this_service(environment: dict[str, str]) -> dict[str, str]:
    """`environment` with this process's source tree as the child's import path, unless the
    caller chose one (PYTHONPATH set): run from another checkout (`python -m benchmarks` in a
    worktree), the child would otherwise import the installed `service`, and a before/after
    comparison would measure the same server twice."""
    if environment.get("PYTHONPATH"):
        return environment
    return {**environment, "PYTHONPATH": str(Path(service.__file__).resolve().parent.parent)}


def _importing(tree: Path | None, environment: dict[str, str]) -> dict[str, str]:
    """`environment` importing the service from `tree` (None: as `_importing_this_service`)."""
    if tree is None:
        return _importing_this_service(environment)
    return {**environment, "PYTHONPATH": str(tree)}


def _log_tail(log: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        port: int = probe.getsockname()[1]
        return port


@asynccontextmanager
async def loopback_server(
    settings: Settings, *, tree: Path | None = None, environment: dict[str, str] | None = None
) -> AsyncIterator[RunningServer]:
    """Run `create_app(settings)` under uvicorn (`settings.workers` processes, as `mneme
    serve` runs it; no access log) until exit: the service of `tree` when given (another
    checkout, to compare code versions), with `environment`'s variables on top of the
    settings'."""
    port = _free_port()
    command = (
        sys.executable,
        "-m",
        "uvicorn",
        "service.main:create_app",
        "--factory",
        "--host",
        LOOPBACK,
        "--port",
        str(port),
        "--backlog",
        str(BACKLOG),
        "--workers",
        str(settings.workers),
        "--no-access-log",
        "--log-level",
        "warning",
    )
    workdir = Path(tempfile.mkdtemp(prefix="mneme-bench-server-"))
    log = workdir / "server.log"
    try:
        with log.open("wb") as log_file:
            # cwd is an empty directory: no stray .env there, every setting comes from `env`.
            process = await asyncio.create_subprocess_exec(
                *command,
                cwd=workdir,
                env=_importing(tree, {**settings_environment(settings), **(environment or {})}),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log_file,
                stderr=log_file,
            )
        try:
            base_url = f"http://{LOOPBACK}:{port}"
            await _wait_until_ready(process, base_url, log)
            yield RunningServer(base_url=base_url, pid=process.pid, command=command)
        finally:
            await _stop(process)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


async def _wait_until_ready(process: asyncio.subprocess.Process, base_url: str, log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    async with httpx.AsyncClient(base_url=base_url, timeout=5.0) as client:
        while time.monotonic() < deadline:
            if process.returncode is not None:
                raise ServerFailed(
                    f"the server exited with {process.returncode}:\n{_log_tail(log)}"
                )
            try:
                if (await client.get("/readyz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.2)
    raise ServerFailed(f"the server was not ready within {READY_TIMEOUT_SECONDS:.0f} s")


async def _stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is not None:
        return
    process.terminate()
    try:
        await asyncio.wait_for(process.wait(), STOP_TIMEOUT_SECONDS)
    except TimeoutError:
        process.kill()
        await process.wait()
