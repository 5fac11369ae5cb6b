"""What tracing costs a search: p50 / p95 latency of `POST …/memories/search` with spans
exported over OTLP/HTTP to a receiver on loopback, against tracing off, in one run.

Run from the repository root:  python -m benchmarks.scripts.tracing_overhead [--rounds 40] [--n 20]

Three conditions, each in a process of its own (OpenTelemetry allows one tracer provider per
process). The processes run side by side but take turns in lockstep — `--n` searches each,
round after round, only one process searching at a time — so load from elsewhere on a shared
machine hits all conditions alike. Besides wall-clock latency each process reports its own CPU
time per search (all its threads, the exporter's included), which other processes' load does
not inflate:

* `disabled` — `OTEL_SDK_DISABLED=true`: no span is recorded at all;
* `none`     — the default `MNEME_OTEL_EXPORTER=none`: spans are recorded (their trace ids
               reach logs and problem responses) but sent nowhere;
* `otlp`     — `MNEME_OTEL_EXPORTER=otlp` to the loopback receiver (batch processor).

Every process drives the real app in-process over ASGI against one embedded Postgres holding
a seeded corpus (the same 500 memories and queries for all). Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from asgi_lifespan import LifespanManager
from fastapi import FastAPI
from httpx import ASGITransport, AsyncClient

from benchmarks.database import throwaway_database
from benchmarks.scripts.embedder_speed import QUERIES, memory_texts
from service.auth.tokens import mint_dev_token
from service.config import Settings
from service.main import create_app

TENANT = "bench-tracing"
USER = "reader"
CONDITIONS = ("disabled", "none", "otlp")
CORPUS = 500


def _settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "data_dir": Path(tempfile.gettempdir()) / "mneme-bench-unused",
        "rate_limit_enabled": False,
        "jobs_enabled": False,
        "log_level": "warning",
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)


async def _client(settings: Settings) -> tuple[FastAPI, AsyncClient, dict[str, str]]:
    app = create_app(settings)
    token = mint_dev_token(settings, tenant_id=TENANT, user_id=USER)
    client = AsyncClient(transport=ASGITransport(app=app), base_url="http://mneme.bench")
    return app, client, {"Authorization": f"Bearer {token}"}


async def seed(settings: Settings) -> None:
    app, client, headers = await _client(settings)
    async with LifespanManager(app), client:
        texts = memory_texts(CORPUS)
        for start in range(0, len(texts), 100):
            response = await client.post(
                "/v1/users/me/memories/batch",
                headers=headers,
                json={"items": [{"text": text} for text in texts[start : start + 100]]},
            )
            response.raise_for_status()


async def child(warmup: int) -> None:
    """One condition (the environment chose it): on each `run N` line from the parent, N
    searches, answered with one JSON line of their latencies and the CPU time they took."""
    settings = _settings(
        database_url=os.environ["BENCH_DATABASE_URL"],
        migrate_on_start=False,
        otel_exporter=os.environ.get("BENCH_EXPORTER", "none"),
    )
    app, client, headers = await _client(settings)
    async with LifespanManager(app), client:
        done = 0

        async def search() -> float:
            nonlocal done
            body = {"query": QUERIES[done % len(QUERIES)], "limit": 8, "mmr_lambda": 0.7}
            done += 1
            started = time.perf_counter()
            response = await client.post("/v1/users/me/memories/search", headers=headers, json=body)
            response.raise_for_status()
            return time.perf_counter() - started

        for _ in range(warmup):
            await search()
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        while (command := await asyncio.to_thread(sys.stdin.readline)).startswith("run "):
            cpu = time.process_time()
            latencies = [await search() for _ in range(int(command.split()[1]))]
            reply = {"latencies": latencies, "cpu": time.process_time() - cpu}
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


def start_child(
    condition: str, database_url: str, endpoint: str, warmup: int
) -> subprocess.Popen[str]:
    env = {**os.environ, "BENCH_DATABASE_URL": database_url}
    env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = endpoint
    env["BENCH_EXPORTER"] = "otlp" if condition == "otlp" else "none"
    if condition == "disabled":
        env["OTEL_SDK_DISABLED"] = "true"
    process = subprocess.Popen(  # noqa: S603 - this interpreter, this module
        [
            sys.executable,
            "-m",
            "benchmarks.scripts.tracing_overhead",
            "--child",
            f"--warmup={warmup}",
        ],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    if process.stdout.readline().strip() != "ready":
        raise RuntimeError(f"the {condition} process did not start")
    return process


def run_block(process: subprocess.Popen[str], n: int) -> dict[str, Any]:
    assert process.stdin is not None
    assert process.stdout is not None
    process.stdin.write(f"run {n}\n")
    process.stdin.flush()
    reply: dict[str, Any] = json.loads(process.stdout.readline())
    return reply


def _ms(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q * 100) - 1] * 1e3


async def parent(rounds: int, n: int, warmup: int) -> None:
    from tests.observability.otlp_receiver import OtlpReceiver

    receiver = OtlpReceiver()
    receiver.start()
    latencies: dict[str, list[float]] = {condition: [] for condition in CONDITIONS}
    cpu: dict[str, float] = dict.fromkeys(CONDITIONS, 0.0)
    try:
        async with throwaway_database(_settings()) as settings:
            await seed(settings)
            assert settings.database_url is not None
            url = settings.database_url.get_secret_value()
            processes = {
                condition: await asyncio.to_thread(
                    start_child, condition, url, receiver.endpoint, warmup
                )
                for condition in CONDITIONS
            }
            try:
                for round_number in range(rounds):
                    # Rotate the order so no condition always runs first or last.
                    shift = round_number % len(CONDITIONS)
                    for condition in CONDITIONS[shift:] + CONDITIONS[:shift]:
                        reply = await asyncio.to_thread(run_block, processes[condition], n)
                        latencies[condition].extend(reply["latencies"])
                        cpu[condition] += reply["cpu"]
            finally:
                for process in processes.values():
                    assert process.stdin is not None
                    process.stdin.write("quit\n")
                    process.stdin.close()
                    process.wait(timeout=60)
    finally:
        receiver.stop()
    total = rounds * n
    p50 = {c: statistics.median(v) * 1e3 for c, v in latencies.items()}
    cpu_ms = {c: cpu[c] / total * 1e3 for c in CONDITIONS}
    sys.stdout.write(
        f"search, {rounds} rounds x {n} searches per condition in lockstep "
        f"({CORPUS} memories, hybrid + MMR, limit 8, in-process ASGI)\n"
        "condition  p50 ms  p95 ms  CPU ms/search (service process)\n"
    )
    for condition in CONDITIONS:
        sys.stdout.write(
            f"{condition:9s} {p50[condition]:7.2f} {_ms(latencies[condition], 0.95):7.2f}"
            f"  {cpu_ms[condition]:7.2f}\n"
        )
    sys.stdout.write(
        f"p50 ratio otlp/none {p50['otlp'] / p50['none']:.3f}, "
        f"otlp/disabled {p50['otlp'] / p50['disabled']:.3f}, "
        f"none/disabled {p50['none'] / p50['disabled']:.3f}\n"
        f"CPU ratio otlp/none {cpu_ms['otlp'] / cpu_ms['none']:.3f}, "
        f"otlp/disabled {cpu_ms['otlp'] / cpu_ms['disabled']:.3f}\n"
        f"spans received by the loopback collector: {len(receiver.spans)} "
        f"in {receiver.requests} export requests\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--n", type=int, default=20, help="searches per condition per round")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        asyncio.run(child(args.warmup))
    else:
        asyncio.run(parent(args.rounds, args.n, args.warmup))


if __name__ == "__main__":
    main()
