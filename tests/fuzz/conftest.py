"""The service the fuzz tests call: the real one under uvicorn in a child process, on the test
database, started once for the whole fuzz run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from service.config import Settings
from tests.fuzz.tally import TALLY
from tests.service_process import running_service


@pytest.fixture(scope="session")
def fuzz_base_url(settings: Settings) -> Iterator[str]:
    with running_service(settings) as service:
        yield service.base_url


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TALLY.sent:
        terminalreporter.write_line(
            f"fuzz: {TALLY.sent} requests sent, {TALLY.server_errors} answered with a 5xx"
        )
