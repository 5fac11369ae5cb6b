"""How many requests the fuzz run sent and how many of them a server error answered, printed at
the end of the run (the measure of a run is its size as much as its failures)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import requests


@dataclass
class Tally:
    sent: int = 0
    server_errors: int = 0

    def count(self, response: requests.Response, *_args: Any, **_kwargs: Any) -> None:
        self.sent += 1
        if response.status_code >= 500:
            self.server_errors += 1


TALLY = Tally()


def counting_session() -> requests.Session:
    """A session whose every answer is counted in `TALLY`."""
    session = requests.Session()
    session.hooks["response"].append(TALLY.count)
    return session
