"""A service on a hosted embedding model that answers in `--model-ms`: how many never-seen
searches it answers, and how fast it answers a request that embeds nothing meanwhile, two or
more code versions one after the other.

Run from the repository root:

    python -m benchmarks.scripts.hosted_model --tree before=/path/to/checkout --tree after=.
        [--model-ms 300] [--clients 30] [--seconds 20] [--data DIR]
        [--env NAME=DIR:VAR=VALUE[,VAR=VALUE]]

The model is an OpenAI-compatible embeddings server on loopback, started by the script: it
answers each request after `--model-ms`, many at once (as a hosted API does), with vectors
derived from each text. Each version is `mneme serve`'s app (uvicorn, one worker) of its tree
(`--tree NAME=DIR`, its `service` first on the import path; `--env` the same with settings
changed) on an embedded database of its own under `--data` (emptied first), its embedder that
server, its other settings the defaults, no rate limit. `--clients` clients each ask one
question after another for `--seconds`, every question new (so each is embedded), while one
more client reads the user (`GET /v1/users/me`, no embedding) in a loop.

Prints per version: the searches answered a second, their p50, how many were refused (503),
and the reads' p50 / p99 and refusals. Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
from pydantic import SecretStr

from benchmarks.scripts.statement_replay import (
    Version,
    _say,
    add_tree_arguments,
    distinct_versions,
)

API_KEY = "hosted-model-benchmark"
DEFAULT_DIMS = 384


def text_vector(text: str, dims: int) -> list[float]:
    """A vector derived from `text` alone (the service makes it unit length)."""
    digest = hashlib.sha256(text.encode()).digest()
    return [float(digest[i % len(digest)] - 128 + i % 7) for i in range(dims)]


@contextmanager
def hosted_model(latency_seconds: float) -> Iterator[str]:
    """An OpenAI-compatible `/v1/embeddings` on 127.0.0.1 answering after `latency_seconds`,
    a thread per request; yields its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
            time.sleep(latency_seconds)
            dims = int(body.get("dimensions", DEFAULT_DIMS))
            data = [
                {"object": "embedding", "index": index, "embedding": text_vector(text, dims)}
                for index, text in enumerate(body["input"])
            ]
            answer = json.dumps(
                {
                    "object": "list",
                    "data": data,
                    "model": body["model"],
                    "usage": {"prompt_tokens": 1, "total_tokens": 1},
                }
            ).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: object) -> None:
            """Quiet: a line per request would be the benchmark's own noise."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.request_queue_size = 1024
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        host, port = server.server_address[:2]
        yield f"http://{host!s}:{port}/v1"
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Figures:
    searched: list[float] = field(default_factory=list)
    searches_refused: int = 0
    searches_failed: int = 0
    read: list[float] = field(default_factory=list)
    reads_refused: int = 0
    seconds: float = 0.0


async def measure(base_url: str, token: str, clients: int, seconds: float) -> Figures:
    figures = Figures()
    headers = {"Authorization": f"Bearer {token}"}
    limits = httpx.Limits(max_connections=clients + 1, max_keepalive_connections=clients + 1)
    async with httpx.AsyncClient(
        base_url=base_url, headers=headers, timeout=60.0, limits=limits
    ) as client:
        written = await client.post(
            "/v1/users/me/memories/batch",
            json={"items": [{"text": f"User keeps note {n} about kayaks"} for n in range(50)]},
        )
        written.raise_for_status()
        end = time.perf_counter() + seconds

        async def asker(number: int) -> None:
            turn = 0
            while time.perf_counter() < end:
                turn += 1
                started = time.perf_counter()
                response = await client.post(
                    "/v1/users/me/memories/search",
                    json={"query": f"what about kayak note {number}-{turn}"},
                )
                if response.status_code == 503:
                    figures.searches_refused += 1
                elif response.status_code != 200 or not response.json()["query_embedded"]:
                    figures.searches_failed += 1
                else:
                    figures.searched.append(time.perf_counter() - started)

        async def reader() -> None:
            while time.perf_counter() < end:
                started = time.perf_counter()
                response = await client.get("/v1/users/me")
                if response.status_code == 503:
                    figures.reads_refused += 1
                else:
                    response.raise_for_status()
                    figures.read.append(time.perf_counter() - started)

        began = time.perf_counter()
        await asyncio.gather(reader(), *(asker(n) for n in range(clients)))
        figures.seconds = time.perf_counter() - began
    return figures


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(share * len(ordered)) - 1)] if ordered else 0.0


def report(versions: Sequence[Version], figures: dict[str, Figures]) -> str:
    lines = [
        "| version | searches answered /s | search p50 ms | searches refused | failed |"
        " reads p50 / p99 ms | reads refused |",
        "| --- | ---: | ---: | ---: | ---: | --- | ---: |",
    ]
    for version in versions:
        each = figures[version.name]
        search_p50 = 1000 * statistics.median(each.searched) if each.searched else 0.0
        lines.append(
            f"| {version.name} | {len(each.searched) / each.seconds:.1f} | {search_p50:.0f} | "
            f"{each.searches_refused} | {each.searches_failed} | "
            f"{1000 * percentile(each.read, 0.5):.1f} / {1000 * percentile(each.read, 0.99):.1f}"
            f" | {each.reads_refused} |"
        )
    return "\n".join(lines) + "\n"


async def _run(
    versions: Sequence[Version], data: Path, latency: float, clients: int, seconds: float
) -> dict[str, Figures]:
    from benchmarks.server import loopback_server
    from service.auth.dev_tokens import mint_dev_token
    from service.config import Settings

    figures: dict[str, Figures] = {}
    with hosted_model(latency) as model_url:
        for version in versions:
            directory = data / version.name
            shutil.rmtree(directory, ignore_errors=True)
            settings = Settings().model_copy(
                update={
                    "data_dir": directory,
                    "rate_limit_enabled": False,
                    "workers": 1,
                    "embedding_provider": "openai",
                    "embedding_openai_base_url": model_url,
                    "embedding_openai_api_key": SecretStr(API_KEY),
                    "embedding_openai_send_dimensions": True,
                    "embedding_openai_max_retries": 0,
                }
            )
            async with loopback_server(
                settings, tree=version.tree, environment=version.environment
            ) as server:
                token = mint_dev_token(settings, tenant_id="hosted", user_id="ada")
                figures[version.name] = await measure(server.base_url, token, clients, seconds)
            _say(f"hosted_model: {version.name} measured")
    return figures


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_tree_arguments(parser)
    parser.add_argument("--model-ms", type=float, default=300.0)
    parser.add_argument("--clients", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument(
        "--data",
        type=Path,
        default=Path(tempfile.gettempdir()) / "mneme-hosted-model",
        help="where each version's database is made, emptied first (default: %(default)s)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _arguments(argv)
    versions = distinct_versions(arguments, "hosted_model")
    if versions is None:
        return 2
    if arguments.model_ms < 0 or arguments.clients < 1 or arguments.seconds <= 0:
        _say("hosted_model: --model-ms not negative, --clients at least 1, --seconds above 0")
        return 2
    figures = asyncio.run(
        _run(
            versions,
            arguments.data,
            arguments.model_ms / 1000,
            arguments.clients,
            arguments.seconds,
        )
    )
    sys.stdout.write(report(versions, figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
