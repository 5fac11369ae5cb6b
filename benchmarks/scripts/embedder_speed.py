"""How fast the local embedder loads, answers one query and embeds a batch of memories.

Run from the repository root:
    python -m benchmarks.scripts.embedder_speed [--threads N] [--profile NAME ...]
It goes through the async API (and so `asyncio.to_thread`) exactly as the service does. With
several `--profile`s (e.g. both packaged ones), each query is asked of every model in turn, so
the models are compared in the same moments of a machine whose speed drifts.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time

from service.providers import EmbedderConfig

QUERIES = [
    "What does the user like to do on weekends?",
    "Which programming languages does she prefer?",
    "When is the next dentist appointment?",
    "What did we decide about the database migration?",
]
_CLAUSES = [
    "the user prefers dark mode",
    "likes short answers",
    "their daughter starts school in september",
    "asked to be reminded about the quarterly report",
    "works remotely from lisbon",
    "dislikes meetings before ten",
    "enjoys hiking, climbing and board games",
    "is allergic to peanuts",
]


def memory_texts(count: int, seed: int = 7) -> list[str]:
    """Memory-like texts of 1 to 12 clauses (4 to ~60 words), as a real memory store has."""
    rng = random.Random(seed)  # noqa: S311 - reproducible texts, not secrets
    return [", ".join(rng.choices(_CLAUSES, k=rng.randint(1, 12))) + "." for _ in range(count)]


async def main(threads: int, queries: int, texts: int, profiles: list[str | None]) -> None:
    started = time.perf_counter()
    # Imported here to time it: loading onnxruntime is part of what start-up pays.
    from service.providers.local_embedder import LocalEmbedder

    import_seconds = time.perf_counter() - started
    embedders = [
        LocalEmbedder(EmbedderConfig(local_threads=threads, profile=profile))
        for profile in profiles
    ]
    load_seconds = []
    for embedder in embedders:
        started = time.perf_counter()
        await embedder.load()
        load_seconds.append(time.perf_counter() - started)

    for embedder in embedders:
        for query in QUERIES:
            await embedder.embed_query(query)
    latencies: list[list[float]] = [[] for _ in embedders]
    for n in range(queries):
        for embedder, measured in zip(embedders, latencies, strict=True):
            started = time.perf_counter()
            await embedder.embed_query(QUERIES[n % len(QUERIES)])
            measured.append(time.perf_counter() - started)

    batch = memory_texts(texts)
    batch_seconds = []
    for embedder in embedders:
        started = time.perf_counter()
        await embedder.embed(batch)
        batch_seconds.append(time.perf_counter() - started)

    sys.stdout.write(
        f"intra-op threads {threads}\n"
        f"  import:           {import_seconds * 1000:7.1f} ms   (onnxruntime, tokenizers, numpy)\n"
    )
    for embedder, loaded, measured, seconds in zip(
        embedders, load_seconds, latencies, batch_seconds, strict=True
    ):
        p50, p95 = (statistics.quantiles(measured, n=100)[i] for i in (49, 94))
        sys.stdout.write(
            f"local embedder {embedder.model_name}\n"
            f"  model load:       {loaded * 1000:7.1f} ms\n"
            f"  query latency:    p50 {p50 * 1000:5.2f} ms   p95 {p95 * 1000:5.2f} ms"
            f"   ({queries} queries)\n"
            f"  batch throughput: {texts / seconds:7.1f} texts/s"
            f"   ({texts} texts of 4-60 words)\n"
        )
        await embedder.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=EmbedderConfig().local_threads)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--texts", type=int, default=512)
    parser.add_argument(
        "--profile",
        action="append",
        help="a packaged model's profile (repeat to compare; default: the packaged default)",
    )
    args = parser.parse_args()
    asyncio.run(main(args.threads, args.queries, args.texts, args.profile or [None]))
