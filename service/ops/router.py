"""Operational endpoints: liveness, readiness and Prometheus metrics. No authentication."""

from __future__ import annotations

import asyncio
from typing import Literal

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel
from sqlalchemy.exc import SQLAlchemyError

from service import db_migrations
from service.db_outage import RETRY_AFTER_SECONDS
from service.dependencies import State
from service.errors import ServiceUnavailable, problem_responses
from service.jobs import THREAD_SUMMARY_JOB, WRITE_PATH_JOBS
from service.jobs.status import queue_backlog
from service.kit.routing import ApiRoute
from service.observability import (
    DOMAIN_METRICS,
    record_admission,
    record_pool_state,
    render_metrics,
)
from service.state import AppState

router = APIRouter(route_class=ApiRoute, tags=["ops"])


class Health(BaseModel):
    status: Literal["ok"]


class Readiness(BaseModel):
    status: Literal["ready"]
    schema_revision: str


@router.get("/healthz", response_model=Health, summary="Liveness", responses=problem_responses(503))
async def get_health(request: Request) -> Health:
    """The process is up and can heal itself. Says nothing about its dependencies (see /readyz).

    With the embedded database, the process is live only while the task that restarts that
    database is running: without it, an outage would last until someone restarts the service.
    """
    supervisor = getattr(request.app.state, "embedded_supervisor", None)
    if supervisor is not None and not supervisor.running:
        raise _not_ready("The embedded database is no longer supervised.")
    return Health(status="ok")


@router.get(
    "/readyz",
    response_model=Readiness,
    summary="Readiness",
    responses=problem_responses(503),
)
async def get_readiness(state: State) -> Readiness:
    """Ready to serve: the database answers and its schema is at this code's head revision.

    Asked on a connection of its own, not the requests' pool: a process whose connections are
    all busy is serving, and still ready (it answers the excess 503 `SERVICE_BUSY`); taking it
    out of rotation would only move its load onto the other replicas.
    """
    # A database that does not answer within MNEME_READINESS_TIMEOUT_SECONDS is unreachable: a
    # server that stopped answering (a partition) refuses nothing, and a probe that waited for
    # it would time out itself instead of seeing the 503. Reading the schema revision is the
    # question: a database that answers it answers.
    reading = asyncio.ensure_future(db_migrations.current_revision(state.ops_engine))
    try:
        revision = await asyncio.wait_for(
            asyncio.shield(reading), state.settings.readiness_timeout_seconds
        )
    except Exception as exc:
        raise _not_ready("The database is unreachable.") from exc
    finally:
        _let_finish(reading)
    head = state.schema_head
    if revision != head:
        raise _not_ready(
            f"The database schema is at {revision!r}, this code expects {head!r}; "
            "run `mneme migrate`."
        )
    return Readiness(status="ready", schema_revision=revision or "")


def _not_ready(detail: str) -> ServiceUnavailable:
    """A 503 with `Retry-After`, as every outage of the API answers: a load balancer, a
    supervisor or a client waiting for the service asks again after it."""
    return ServiceUnavailable(
        detail,
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        retry_after_seconds=RETRY_AFTER_SECONDS,
    )


_unanswered: set[asyncio.Future[str | None]] = set()
"""Readiness reads given up on, kept until they end."""


def _let_finish(reading: asyncio.Future[str | None]) -> None:
    """Leave a readiness read the probe stopped waiting for to end by itself (its outcome
    dropped). Cancelled, it would still wait to close its connection (SQLAlchemy shields that
    from cancellation; the driver's own limits end it), and the probe's answer with it."""
    if not reading.done():
        _unanswered.add(reading)
        reading.add_done_callback(_forget)


def _forget(reading: asyncio.Future[str | None]) -> None:
    _unanswered.discard(reading)
    # Its error, if any, was the probe's 503 already (not "never retrieved").
    if not reading.cancelled():
        reading.exception()


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
async def get_metrics(request: Request, state: State) -> Response:
    """Prometheus text exposition of the service's metrics."""
    gate = request.app.state.admission_gate
    record_admission(gate.running, gate.waiting)
    await read_gauges(state)
    return Response(render_metrics(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)


async def read_gauges(state: AppState) -> None:
    """Refresh the gauges that describe state rather than events: the runtime connection pool
    and the job queue's backlog. A database that does not answer leaves the queue gauges as
    they were (the scrape still succeeds; /readyz reports the outage). The queue is read on the
    operational connection, so a scrape is not held up by busy requests."""
    record_pool_state(state.engine.pool)
    kinds = (THREAD_SUMMARY_JOB, *WRITE_PATH_JOBS)
    try:
        async with state.ops_engine.connect() as connection:
            backlog = await queue_backlog(connection, kinds)
    except (OSError, SQLAlchemyError):
        return
    for kind in kinds:
        for status in ("queued", "picked"):
            DOMAIN_METRICS.job_queue_depth.labels(kind, status).set(0)
        DOMAIN_METRICS.job_oldest_age.labels(kind).set(0)
    for row in backlog:
        DOMAIN_METRICS.job_queue_depth.labels(row.kind, row.status).set(row.jobs)
        if row.status == "queued":
            DOMAIN_METRICS.job_oldest_age.labels(row.kind).set(row.oldest_age_seconds)
