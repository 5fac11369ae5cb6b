"""The worker runs what the domains register: each kind of job the service queues has exactly
one handler, and every registered failure hook hears of a failed run."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from fastapi import FastAPI

from service.jobs import (
    MEMORY_EXTRACTION_JOB,
    SEARCH_STATISTICS_JOB,
    THREAD_SUMMARY_JOB,
    TURN_MEMORIES_JOB,
    JobFailure,
    JobRegistry,
)
from service.jobs.sweep import WRITE_PATH_SWEEP_JOB
from service.main import JOB_REGISTRARS


async def test_the_domains_register_a_handler_for_every_kind_of_job_the_service_queues(
    app: FastAPI,
) -> None:
    registry = JobRegistry()
    for register in JOB_REGISTRARS:
        register(registry, app.state.mneme)
    assert set(registry.handlers) == {
        THREAD_SUMMARY_JOB,
        MEMORY_EXTRACTION_JOB,
        TURN_MEMORIES_JOB,
        WRITE_PATH_SWEEP_JOB,
        SEARCH_STATISTICS_JOB,
    }


async def nothing(_payload: Mapping[str, str]) -> None:
    return None


def test_a_kind_of_job_has_one_handler() -> None:
    registry = JobRegistry()
    registry.handle("kind", nothing)
    with pytest.raises(ValueError, match="kind"):
        registry.handle("kind", nothing)
    assert registry.handlers == {"kind": nothing}


async def test_every_failure_hook_hears_of_a_failed_run_in_order() -> None:
    heard: list[tuple[str, str]] = []
    registry = JobRegistry()

    async def first(failure: JobFailure) -> None:
        heard.append(("first", failure.entrypoint))

    async def second(failure: JobFailure) -> None:
        heard.append(("second", failure.entrypoint))

    registry.on_failure(first)
    registry.on_failure(second)
    await registry.failed(
        JobFailure(entrypoint="kind", payload={}, attempt=1, final=True, error=RuntimeError())
    )
    assert heard == [("first", "kind"), ("second", "kind")]
