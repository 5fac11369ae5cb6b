"""A job worker in a process of its own, for the crash test.

`python -m tests.jobs.worker_process DATABASE_URL ENTRYPOINT MARKER_FILE` runs a worker whose
handler writes its payload to MARKER_FILE and then never returns, until the process is killed.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path

from pydantic import SecretStr

from service.config import Settings
from service.db import create_engine
from service.jobs import JobWorker

HEARTBEAT_TIMEOUT = timedelta(seconds=1)


async def main(database_url: str, entrypoint: str, marker: Path) -> None:
    settings = Settings(_env_file=None, env="dev", database_url=SecretStr(database_url))
    engine = create_engine(database_url, settings, pool_size=1)

    def announce(payload: Mapping[str, str]) -> None:
        # Written beside the marker and renamed onto it: the test never reads it half-written.
        partial = marker.with_suffix(".partial")
        partial.write_text(json.dumps(dict(payload)))
        partial.replace(marker)

    async def handle(payload: Mapping[str, str]) -> None:
        await asyncio.to_thread(announce, payload)
        await asyncio.Event().wait()

    worker = JobWorker(
        settings,
        engine,
        {entrypoint: handle},
        heartbeat_timeout=HEARTBEAT_TIMEOUT,
        poll_interval=timedelta(seconds=0.1),
    )
    await worker.start()
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], Path(sys.argv[3])))
