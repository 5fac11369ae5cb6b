"""What tracing costs a search: p50 / p95 latency of `POST …/memories/search` with spans
exported over OTLP/HTTP to a receiver on loopback, against tracing off, in one run.

Run from the repository root:  python -m tests.bench.tracing_overhead [--rounds 4] [--n 300]

Three conditions, each in a process of its own (OpenTelemetry allows one tracer provider per
process), interleaved round by round so drift on a shared machine hits all of them alike:

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

from service.auth.tokens import mint_dev_token
from service.bench.database import throwaway_database
from service.config import Settings
from service.main import create_app
from tests.bench.embedder_speed import QUERIES, memory_texts

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
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


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


async def child(n: int, warmup: int) -> None:
    """One condition's measurement; the environment chose the condition."""
    settings = _settings(
        database_url=os.environ["BENCH_DATABASE_URL"],
        migrate_on_start=False,
        otel_exporter=os.environ.get("BENCH_EXPORTER", "none"),
    )
    app, client, headers = await _client(settings)
    async with LifespanManager(app), client:
        latencies: list[float] = []
        for i in range(warmup + n):
            body = {"query": QUERIES[i % len(QUERIES)], "limit": 8, "mmr_lambda": 0.7}
            started = time.perf_counter()
            response = await client.post("/v1/users/me/memories/search", headers=headers, json=body)
            elapsed = time.perf_counter() - started
            response.raise_for_status()
            if i >= warmup:
                latencies.append(elapsed)
    sys.stdout.write(json.dumps(latencies) + "\n")


def run_child(condition: str, database_url: str, endpoint: str, n: int, warmup: int) -> list[float]:
    env = {**os.environ, "BENCH_DATABASE_URL": database_url}
    env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = endpoint
    env["BENCH_EXPORTER"] = "otlp" if condition == "otlp" else "none"
    if condition == "disabled":
        env["OTEL_SDK_DISABLED"] = "true"
    done = subprocess.run(  # noqa: S603 - this interpreter, this module
        [
            sys.executable,
            "-m",
            "tests.bench.tracing_overhead",
            "--child",
            f"--n={n}",
            f"--warmup={warmup}",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    latencies: list[float] = json.loads(done.stdout.strip().splitlines()[-1])
    return latencies


def _ms(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q * 100) - 1] * 1e3


async def parent(rounds: int, n: int, warmup: int) -> None:
    from tests.observability.otlp_receiver import OtlpReceiver

    receiver = OtlpReceiver()
    receiver.start()
    base = _settings()
    results: dict[str, list[float]] = {condition: [] for condition in CONDITIONS}
    per_round: dict[str, list[float]] = {condition: [] for condition in CONDITIONS}
    try:
        async with throwaway_database(base) as settings:
            await seed(settings)
            assert settings.database_url is not None
            url = settings.database_url.get_secret_value()
            for round_number in range(rounds):
                # Rotate the order so no condition always runs first or last.
                order = CONDITIONS[round_number % 3 :] + CONDITIONS[: round_number % 3]
                for condition in order:
                    values = await asyncio.to_thread(
                        run_child, condition, url, receiver.endpoint, n, warmup
                    )
                    results[condition].extend(values)
                    per_round[condition].append(statistics.median(values) * 1e3)
                    sys.stderr.write(
                        f"round {round_number + 1} {condition:8s} p50 "
                        f"{statistics.median(values) * 1e3:.2f} ms\n"
                    )
    finally:
        receiver.stop()
    p50 = {c: statistics.median(v) * 1e3 for c, v in results.items()}
    sys.stdout.write(
        f"search latency, {rounds} rounds x {n} searches per condition "
        f"({CORPUS} memories, hybrid + MMR, in-process ASGI)\n"
    )
    sys.stdout.write("condition  p50 ms  p95 ms  per-round p50 ms\n")
    for condition in CONDITIONS:
        rounds_text = " ".join(f"{value:.2f}" for value in per_round[condition])
        sys.stdout.write(
            f"{condition:9s} {p50[condition]:7.2f} {_ms(results[condition], 0.95):7.2f}  "
            f"{rounds_text}\n"
        )
    sys.stdout.write(
        f"otlp / none p50 ratio: {p50['otlp'] / p50['none']:.3f}\n"
        f"otlp / disabled p50 ratio: {p50['otlp'] / p50['disabled']:.3f}\n"
        f"none / disabled p50 ratio: {p50['none'] / p50['disabled']:.3f}\n"
        f"spans received by the loopback collector: {len(receiver.spans)} "
        f"in {receiver.requests} export requests\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--n", type=int, default=300, help="searches per condition per round")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        asyncio.run(child(args.n, args.warmup))
    else:
        asyncio.run(parent(args.rounds, args.n, args.warmup))


if __name__ == "__main__":
    main()
