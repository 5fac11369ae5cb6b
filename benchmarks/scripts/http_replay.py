"""The realistic scenario's questions asked over HTTP of two or more code versions' servers at
once, each question of every server in turn: which answers faster, and whether they return the
same hits.

Run from the repository root, after `statement_replay` has loaded the scenario under `--data`:

    python -m benchmarks.scripts.http_replay --tree before=/path/to/checkout --tree after=.
        [--data DIR] [--questions 40] [--passes 3] [--what search|context]
        [--env NAME=DIR:VAR=VALUE[,VAR=VALUE]] [--body JSON]

Each version is `mneme serve`'s app (uvicorn, one worker) of its tree (`--tree NAME=DIR`, its
`service` first on the child's import path), or of a tree with settings overridden (`--env`), all
on the scenario's database, none migrating it. A question goes to every server before the next
question, each version taking each place in the order in turn (`run_order`; a question's order
moves on by a place every pass), one client, one request at a time: a machine whose speed drifts by
±10 % between two runs a minute apart (a shared VM) moves every version alike, which sequential
runs of one version after another do not. The first pass is not recorded: it warms each server's
question-vector cache, as an agent's repeated question is answered; the search and the context
block are the API's defaults, with the fields of `--body` (a JSON object, such as `{"categories":
["preference"]}` for a filtered search) added to every request.

It prints, per size, each version's p50 request time, its change against the first version's,
the server's own CPU per request (the mean over the recorded requests of its threads' CPU time
around each, `server_cpu_seconds`: what a change saves in the service's Python, which the
request time shows only mixed with Postgres and the client; it includes what the server does
in the background meanwhile, such as a recount of owners' statistics a search asked for), for
how many questions it returned the first version's hits in the same order (search: the memory
ids; context: each section's item ids), what share of the first version's hits it returned in
any order, and the spread of its time per question over the first version's (the 10th and 90th
percentiles, as `statement_replay` prints it), and the p50 of its fusion statement as the server
itself timed it (the `fusion_query` stage of `mneme_search_stage_duration_seconds`, read from
the server's `/metrics` after each request, outside the request's time: the one statement a
search or a context block runs, with the owners' look-up and the plan setting that go with it).
That last column is the statement as the service runs it, on its own connections and settings,
asked in turn with the other versions on one database: the figure to judge a change of the
statement by (`statement_replay` replays the bare statements on connections of its own, and has
timed a version's statement at 100k memories several ms away from what its server took).
Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

from benchmarks.scripts.statement_replay import (
    Figures,
    Version,
    _cluster_urls,
    _say,
    add_version_arguments,
    chosen_versions,
    kept_scenario,
    run_order,
)

if TYPE_CHECKING:
    from benchmarks.server import RunningServer


def answered_hits(what: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    """The hits of one answer, in order: a search's memory ids, or each section of a context
    block with its items' ids (the profile's keys have none and are left out)."""
    if what == "search":
        return [("hits", hit["memory"]["id"]) for hit in body["hits"]]
    return [
        (section["name"], item["id"])
        for section in body["sections"] or []
        for item in section["items"]
        if item["id"] is not None
    ]


@asynccontextmanager
async def serving(
    versions: Sequence[Version], runtime_url: str, owner_url: str
) -> AsyncIterator[list[RunningServer]]:
    """Every version's server on the scenario's database, until exit."""
    from pydantic import SecretStr

    from benchmarks.server import loopback_server
    from service.config import Settings

    settings = Settings().model_copy(
        update={
            "database_url": SecretStr(runtime_url),
            "migration_database_url": SecretStr(owner_url),
            # The database is the scenario's, migrated by the code that loaded it: a version
            # with another head must not move it.
            "migrate_on_start": False,
            "rate_limit_enabled": False,
            "jobs_enabled": False,
            "workers": 1,
        }
    )
    async with AsyncExitStack() as stack:
        yield [
            await stack.enter_async_context(
                loopback_server(settings, tree=version.tree, environment=version.environment)
            )
            for version in versions
        ]


async def replay(
    servers: Sequence[RunningServer],
    versions: Sequence[Version],
    questions: dict[str, list[dict[str, Any]]],
    passes: int,
    what: str,
    body: dict[str, Any] | None = None,
) -> dict[str, Figures]:
    """Each question of every server in turn, `passes` recorded passes after one that is not,
    each request's body the question and `body`'s fields; the figures per size."""
    import httpx

    from benchmarks.server import server_cpu_seconds
    from service.auth.dev_tokens import mint_dev_token
    from service.config import Settings

    settings = Settings()
    figures: dict[str, Figures] = {}
    async with AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                httpx.AsyncClient(base_url=server.base_url, timeout=60.0)
            )
            for server in servers
        ]

        async def statements_so_far(which: int) -> tuple[float, int]:
            """A server's fusion statements so far (`statement_totals`)."""
            return statement_totals((await clients[which].get("/metrics")).text)

        so_far = [await statements_so_far(which) for which in range(len(servers))]
        for round_number in range(passes + 1):
            # Each question's order moves on by a place every pass, so that over the passes each
            # version takes each place for every question (a count carried over the passes kept
            # one order for a question whenever a pass asked a multiple of the versions'
            # number of questions).
            turn = round_number
            for size, asked in questions.items():
                each = figures.setdefault(size, Figures())
                for question in asked:
                    user = question["user_id"]
                    token = mint_dev_token(settings, tenant_id=question["tenant_id"], user_id=user)
                    path = f"/v1/users/{user}/" + (
                        "memories/search" if what == "search" else "context"
                    )
                    answers: dict[int, list[tuple[str, str]]] = {}
                    for which in run_order(len(versions), turn):
                        cpu_before = server_cpu_seconds(servers[which].pid)
                        started = time.perf_counter()
                        response = await clients[which].post(
                            path,
                            json={"query": question["text"], **(body or {})},
                            headers={"Authorization": f"Bearer {token}"},
                        )
                        elapsed = time.perf_counter() - started
                        cpu = server_cpu_seconds(servers[which].pid) - cpu_before
                        if response.status_code != 200:
                            raise RuntimeError(
                                f"{versions[which].name} answered {response.status_code}: "
                                f"{response.text[:500]}"
                            )
                        answers[which] = answered_hits(what, response.json())
                        # Read after the request's time and CPU are taken: the request's own
                        # statement (a search and a context block each run one), as its server
                        # timed it.
                        (seconds, ran), (seconds_then, ran_then) = (
                            await statements_so_far(which),
                            so_far[which],
                        )
                        so_far[which] = (seconds, ran)
                        if round_number:
                            name = versions[which].name
                            each.seconds.setdefault(name, []).append(elapsed)
                            each.cpu_seconds.setdefault(name, []).append(cpu)
                            if ran - ran_then == 1:
                                each.statements.setdefault(name, []).append(seconds - seconds_then)
                    turn += 1
                    if round_number == 0:
                        each.compare(versions, answers)
    return figures


def statement_totals(exposition: str) -> tuple[float, int]:
    """The seconds a server's fusion statements have taken so far, and how many it has run
    (over every search mode), from its `/metrics` text."""
    from prometheus_client.parser import text_string_to_metric_families

    from service.memories.telemetry import SEARCH_STAGE_METRIC, STATEMENT_STAGE

    seconds, count = 0.0, 0
    for family in text_string_to_metric_families(exposition):
        if family.name != SEARCH_STAGE_METRIC:
            continue
        for sample in family.samples:
            if sample.labels.get("stage") != STATEMENT_STAGE:
                continue
            if sample.name.endswith("_sum"):
                seconds += sample.value
            elif sample.name.endswith("_count"):
                count += int(sample.value)
    return seconds, count


def report(versions: Sequence[Version], figures: dict[str, Figures], what: str) -> str:
    lines = [
        f"## The scenario's questions over HTTP ({what}), p50 of the request",
        "",
        "| size | version | p50 ms | against the first | server CPU ms a request "
        "| same hits as the first | the first's hits returned "
        "| each question against the first (p10 / p90) | statement in the server, p50 ms |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    first = versions[0].name
    for size, each in figures.items():
        for version in versions:
            p50 = statistics.median(each.seconds[version.name]) * 1000
            cpu = statistics.fmean(each.cpu_seconds[version.name]) * 1000
            change = same = shared = spread = ""
            if version is not versions[0]:
                change, same, shared, spread = each.against_first(version.name, first)
            timed = each.statements.get(version.name)
            statement = f"{statistics.median(timed) * 1000:.2f}" if timed else "none timed"
            lines.append(
                f"| {size} | {version.name} | {p50:.1f} | {change} | {cpu:.2f} | {same} | {shared} "
                f"| {spread} | {statement} |"
            )
    return "\n".join(lines) + "\n"


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_version_arguments(parser, passes=3)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _arguments(argv)
    versions = chosen_versions(arguments, "http_replay")
    if versions is None:
        return 2
    scenario = kept_scenario(arguments.data, "http_replay")
    if scenario is None:
        return 2
    questions = {
        size: asked[: arguments.questions] for size, asked in scenario["questions"].items()
    }

    async def run(runtime_url: str, owner_url: str) -> dict[str, Figures]:
        async with serving(versions, runtime_url, owner_url) as servers:
            return await replay(
                servers, versions, questions, arguments.passes, arguments.what, arguments.body
            )

    cluster, runtime_url, owner_url = _cluster_urls(arguments.data)
    try:
        figures = asyncio.run(run(runtime_url, owner_url))
    except RuntimeError as error:
        _say(f"http_replay: {error}")
        return 1
    finally:
        cluster.stop()
    sys.stdout.write(report(versions, figures, arguments.what))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
