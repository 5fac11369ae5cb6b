"""`python -m benchmarks.scripts.overload`: requests at a steady rate, whatever the server
answers, and what the clients got: answers in time, refusals, requests given up."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from benchmarks.load import parse_sizes
from benchmarks.scripts import statement_replay
from benchmarks.scripts.overload import answered_by_server, main
from tests.bench_load.chats import TOY_SCENARIO, write_chats

REPOSITORY = Path(__file__).resolve().parents[2]


def _rows(printed: str) -> dict[str, list[str]]:
    """The report's rows by version: the cells after the version's name."""
    rows = {}
    for line in printed.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 7 and cells[0] not in ("version", "---"):
            rows[cells[0]] = cells[1:]
    return rows


@pytest.mark.slow
def test_a_server_past_its_limit_refuses_and_one_within_it_answers_everything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chats = write_chats(tmp_path / "chats.json")
    data = tmp_path / "replay"
    assert main(["--data", str(data), "--tree", f"a={REPOSITORY}"]) == 2
    assert "holds no loaded scenario" in capsys.readouterr().err
    loading = statement_replay._arguments([*TOY_SCENARIO, "--dataset", str(chats)])
    asyncio.run(statement_replay._load(data, loading, parse_sizes(loading.sizes)))

    assert (
        main(
            [
                "--data",
                str(data),
                "--size",
                "60",
                "--what",
                "search",
                "--rate",
                "400",
                "--seconds",
                "0.5",
                "--env",
                f"roomy={REPOSITORY}:MNEME_MAX_REQUESTS_IN_PROGRESS=1000",
                "--env",
                f"one-place={REPOSITORY}:MNEME_MAX_REQUESTS_IN_PROGRESS=1,"
                "MNEME_REQUEST_QUEUE_TIMEOUT_SECONDS=0.001",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "200 requests at 400/s for 0.5 s" in printed
    rows = _rows(printed)
    roomy, one_place = rows["roomy"], rows["one-place"]
    # With room for all of them, every request is answered, none refused, none lost.
    assert float(roomy[0]) > 0
    assert roomy[2] == "0" and roomy[4] == "0" and roomy[5] == "0"
    # With one place and no time to wait for it, requests that overlap are refused as busy,
    # and the refused are not answers computed for nobody.
    assert one_place[2].endswith("503 SERVICE_BUSY")
    refused = int(one_place[2].split()[0])
    assert 0 < refused < 200
    assert one_place[5] == "0"


def test_the_servers_own_answers_are_counted_for_the_route_asked() -> None:
    exposition = "\n".join(
        [
            'mneme_http_requests_total{method="POST",route="/v1/users/{user_id}/context",'
            'status="200"} 7.0',
            'mneme_http_requests_total{method="POST",route="/v1/users/{user_id}/context",'
            'status="503"} 3.0',
            'mneme_http_requests_total{method="POST",route="/v1/users/{user_id}/memories/search",'
            'status="200"} 5.0',
        ]
    )
    assert answered_by_server(exposition, "/v1/users/{user_id}/context") == 7
    assert answered_by_server(exposition, "/v1/users/{user_id}/memories/search") == 5
    assert answered_by_server(exposition, "/v1/users/{user_id}/profile") == 0
