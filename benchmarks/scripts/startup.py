"""How long the service takes to start: importing it, `mneme token`, and `mneme serve` until
`GET /readyz` answers 200 (a restart, with the embedded database already initialised).

Run from the repository root:  python -m benchmarks.scripts.startup [--runs 5] [--tree DIR …]

Each `--tree` is a source tree of the service (default: this one), run with this interpreter
and its installed dependencies (`PYTHONPATH` set to the tree): pass an older checkout as a
second tree to compare before and after a change. The trees take turns run after run, so load
from elsewhere on a shared machine hits them alike. Besides wall-clock time, each measure
reports the CPU time of the process measured (user + system; for `serve`, the service process
when it first answered ready, without Postgres's own), which other processes' load inflates
far less. Each tree's embedded database lives in a temporary directory, initialised by one
start that is not counted. Prints numbers; asserts nothing. Linux (reads /proc).
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_SECONDS = 120.0
DEV_SECRET = "startup-benchmark-secret-" + "x" * 16


def _environment(tree: Path, data_dir: Path, port: int) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(tree),
        "MNEME_DATA_DIR": str(data_dir),
        "MNEME_PORT": str(port),
        "MNEME_ENV": "dev",
        "MNEME_JWT_HS256_SECRET": DEV_SECRET,
        "MNEME_LOG_LEVEL": "warning",
    }


def _timed_run(command: list[str], tree: Path, environment: dict[str, str]) -> tuple[float, float]:
    """Wall-clock and CPU seconds of a command run to completion."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(  # noqa: S603 - this interpreter, fixed arguments
        command, cwd=tree, env=environment, check=True, stdout=subprocess.DEVNULL
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _process_cpu(pid: int) -> float:
    """User + system seconds the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _serve_until_ready(tree: Path, environment: dict[str, str], port: int) -> tuple[float, float]:
    """Start `mneme serve`; wall-clock seconds until /readyz answered 200, and the service's
    CPU seconds by then. The service is stopped (SIGTERM) before returning."""
    url = f"http://127.0.0.1:{port}/readyz"
    started = time.perf_counter()
    server = subprocess.Popen(
        [sys.executable, "-m", "service", "serve"],
        cwd=tree,
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while time.perf_counter() - started < READY_TIMEOUT_SECONDS:
            if server.poll() is not None:
                raise RuntimeError(f"mneme serve exited with status {server.returncode}")
            try:
                with urllib.request.urlopen(url, timeout=1) as response:
                    if response.status == 200:
                        return time.perf_counter() - started, _process_cpu(server.pid)
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.02)
        raise RuntimeError(f"no 200 from {url} within {READY_TIMEOUT_SECONDS} s")
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


MEASURES = {
    "import service.main": [sys.executable, "-c", "import service.main"],
    "mneme token": [sys.executable, "-m", "service", "token", "--tenant", "t", "--user", "u"],
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--runs", type=int, default=5, help="counted runs of each measure")
    parser.add_argument(
        "--tree",
        action="append",
        type=Path,
        help="a source tree of the service to measure (repeat to compare; default: this one)",
    )
    args = parser.parse_args(argv)
    trees = [tree.resolve() for tree in (args.tree or [ROOT])]
    port = _free_port()
    results: dict[tuple[Path, str], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="mneme-startup-") as scratch:
        environments = {
            tree: _environment(tree, Path(scratch) / f"data-{n}", port)
            for n, tree in enumerate(trees)
        }
        for tree in trees:  # initialises each tree's database; not counted
            _serve_until_ready(tree, environments[tree], port)
        for _ in range(args.runs):
            for tree in trees:
                for name, command in MEASURES.items():
                    timed = _timed_run(command, tree, environments[tree])
                    results.setdefault((tree, name), []).append(timed)
                timed = _serve_until_ready(tree, environments[tree], port)
                results.setdefault((tree, "serve → /readyz 200"), []).append(timed)
    load = os.getloadavg()
    sys.stdout.write(
        f"{args.runs} runs per measure; load average at the end {load[0]:.2f}, {load[1]:.2f}\n"
        "| tree | measure | wall median s | wall min s | CPU median s |\n"
        "| --- | --- | ---: | ---: | ---: |\n"
    )
    for (tree, name), timings in results.items():
        walls = [wall for wall, _ in timings]
        cpus = [cpu for _, cpu in timings]
        sys.stdout.write(
            f"| {tree.name} | {name} | {statistics.median(walls):.2f} | {min(walls):.2f} "
            f"| {statistics.median(cpus):.2f} |\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
