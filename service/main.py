"""Application factory: `create_app()` wires routers, errors, telemetry and the lifespan."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from fastapi.routing import APIRoute
from starlette.routing import Route
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from service import db_migrations
from service.accounts.dependencies import ensure_tenant, record_end_user
from service.accounts.router import router as accounts_router
from service.admin.retention import RetentionScheduler, RetentionSweeper
from service.admin.router import admin_router
from service.admin.router import user_router as user_export_router
from service.api_keys.authentication import ApiKeyAuthenticator
from service.api_keys.router import router as api_keys_router
from service.auth.authenticator import Authenticator
from service.auth.failure_limit import FailedAuthenticationLimit
from service.auth.tokens import TokenVerifier
from service.config import Settings, get_settings
from service.context.router import router as context_router
from service.db import (
    DatabaseTarget,
    assert_runtime_role_is_unprivileged,
    create_engine,
    create_sessionmaker,
    open_database_target,
)
from service.db_outage import install_outage_handlers
from service.dependencies import AppState
from service.embedded_postgres import EmbeddedSupervisor
from service.errors import UnexpectedErrorMiddleware, install_problem_handlers
from service.extraction.health import JobFailureRecorder
from service.extraction.hooks import WritePathScheduler
from service.extraction.jobs import memory_extraction_job, turn_memories_job
from service.extraction.pipeline import WritePath
from service.extraction.recovery import WritePathRecovery, recovery_jobs
from service.extraction.router import admin_router as write_path_admin_router
from service.extraction.router import user_router as write_path_router
from service.jobs import MEMORY_EXTRACTION_JOB, THREAD_SUMMARY_JOB, TURN_MEMORIES_JOB, JobWorker
from service.kit.body_limit import BodySizeLimitMiddleware
from service.kit.input_guard import InputGuardMiddleware
from service.kit.limit_storage import limit_storage
from service.kit.media_type import require_json_body
from service.kit.openapi import declare_common_problems
from service.kit.post_commit import BackgroundRunner
from service.kit.security_headers import SecurityHeadersMiddleware
from service.kit.token_counting import encoding_for
from service.logs import configure_logging, log_request
from service.mcp.discovery import MCP_PATH, protected_resource_routes
from service.mcp.endpoint import McpEndpoint
from service.memories.embedding import EmbeddingBackfill
from service.memories.keyed_router import router as keyed_memories_router
from service.memories.router import org_router as org_memories_router
from service.memories.router import user_router as user_memories_router
from service.observability import (
    Metrics,
    TelemetryMiddleware,
    trace_export,
    trace_exporters,
    watch_event_loop_lag,
)
from service.openapi import client_openapi
from service.ops import router as ops
from service.profile.router import org_router as org_profile_router
from service.profile.router import user_router as user_profile_router
from service.providers import build_embedder, embedder_config_from_settings
from service.providers.llm import build_chat_model
from service.providers.query_cache import cache_query_embeddings
from service.providers.telemetry import InstrumentedEmbedder
from service.rate_limits import RateLimiter, RateLimitHeadersMiddleware
from service.threads.router import router as threads_router
from service.threads.summaries import thread_summary_job
from service.web.router import install_web

logger = logging.getLogger("mneme")

API_DESCRIPTION = """
Long-term memory for LLM agents. Identity comes from the bearer token (a JWT or a Mneme API
key); every error is an RFC 9457 `application/problem+json` document with a stable `code`.
"""


def _operation_id(route: APIRoute) -> str:
    # SDK generators turn operationIds into method names: keep them the verb_noun function names.
    return route.name


def _supervise_embedded_database(app: FastAPI, target: DatabaseTarget) -> EmbeddedSupervisor | None:
    """Keep the embedded Postgres running for as long as the service runs."""
    if target.cluster is None:
        return None
    supervisor = EmbeddedSupervisor(target.cluster)
    supervisor.start()
    app.state.embedded_supervisor = supervisor
    return supervisor


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    metrics = Metrics()
    mcp = McpEndpoint()
    # One counter store (and, with Redis, one connection pool) for the request limits and the
    # failed-authentication limit.
    limit_counters = limit_storage(settings.rate_limit_storage_uri)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        configure_logging(settings.log_level, settings.effective_log_format)
        exporters = trace_exporters(settings.otel_exporter)
        with trace_export(exporters, settings.otel_service_name):
            async with _running(app) as schema:
                logger.info(
                    "mneme ready (embedded database: %s, schema %s, trace export: %s)",
                    settings.uses_embedded_database,
                    schema,
                    ", ".join(exporters) or "none",
                )
                loop_lag = asyncio.create_task(watch_event_loop_lag(), name="mneme-loop-lag")
                try:
                    yield
                finally:
                    loop_lag.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await loop_lag
        logger.info("mneme stopped")

    @asynccontextmanager
    async def _running(app: FastAPI) -> AsyncIterator[str | None]:
        target = await open_database_target(settings)
        try:
            if settings.migrate_on_start:
                owner_engine = create_engine(
                    target.urls.owner, settings, pool_size=1, max_overflow=0
                )
                try:
                    await db_migrations.upgrade(owner_engine, settings)
                finally:
                    await owner_engine.dispose()
            engine = create_engine(target.urls.runtime, settings)
            raw_embedder = build_embedder(embedder_config_from_settings(settings))
            embedder = InstrumentedEmbedder(raw_embedder)
            chat_model = build_chat_model(settings)
            background = BackgroundRunner()
            try:
                await assert_runtime_role_is_unprivileged(engine)
                sessionmaker = create_sessionmaker(engine)
                # The local model loads now rather than on the first request (API embedders
                # have nothing to load and are not called at start-up).
                load_model = getattr(raw_embedder, "load", None)
                if load_model is not None:
                    await load_model()
                # So is the context blocks' tokenizer (reading its BPE ranks takes ~0.4 s).
                await asyncio.to_thread(encoding_for)
                backfill = EmbeddingBackfill(
                    cache_query_embeddings(embedder, settings.query_embedding_cache_size),
                    sessionmaker,
                )
                app.state.mneme = AppState(
                    settings=settings,
                    engine=engine,
                    sessionmaker=sessionmaker,
                    authenticator=Authenticator(
                        TokenVerifier(settings),
                        ApiKeyAuthenticator(sessionmaker),
                        metrics,
                        FailedAuthenticationLimit(settings.auth_failure_limit, limit_counters),
                    ),
                    metrics=metrics,
                    schema_head=db_migrations.head_revision(settings),
                    embedding_backfill=backfill,
                    background=background,
                    chat_model=chat_model,
                    ensure_tenant=ensure_tenant,
                    transaction_hooks=(record_end_user,),
                    append_listeners=(WritePathScheduler(settings, chat_model),),
                )
                write_path = WritePath(sessionmaker, chat_model, settings, backfill, background)
                recovery = WritePathRecovery(sessionmaker, settings, chat_model)
                jobs = JobWorker(
                    settings,
                    engine,
                    {
                        THREAD_SUMMARY_JOB: thread_summary_job(sessionmaker, chat_model, settings),
                        MEMORY_EXTRACTION_JOB: memory_extraction_job(write_path),
                        TURN_MEMORIES_JOB: turn_memories_job(write_path),
                        **recovery_jobs(recovery),
                    },
                    on_failure=JobFailureRecorder(sessionmaker, recovery.interval),
                )
                await jobs.start()
                supervisor = _supervise_embedded_database(app, target)
                retention = RetentionScheduler(
                    settings, engine, RetentionSweeper(sessionmaker, metrics)
                )
                await retention.start()
                try:
                    async with mcp.running():
                        yield app.state.mneme.schema_head
                finally:
                    await retention.stop()
                    if supervisor is not None:
                        supervisor.stop()
                    await jobs.stop()
                await background.drain()
            finally:
                if chat_model is not None:
                    await chat_model.aclose()
                await embedder.aclose()
                await engine.dispose()
        finally:
            target.close()

    app = FastAPI(
        title="Mneme",
        version="0.1.0",
        description=API_DESCRIPTION,
        lifespan=lifespan,
        generate_unique_id_function=_operation_id,
        # Both are served from local files by install_web (FastAPI's own load from a CDN).
        docs_url=None,
        redoc_url=None,
        # FastAPI's server span stays (it is the request's one server span); exporters are
        # Mneme's alone, so FASTAPI_OTEL_AUTO_CONFIGURE must not add a second set.
        telemetry={"auto_configure": False},
        dependencies=[Depends(require_json_body)],
    )
    app.openapi = client_openapi(app)  # type: ignore[method-assign]
    install_problem_handlers(app)
    install_outage_handlers(app)
    # Innermost of the middlewares: bodies are decoded strictly only after the size limit let
    # them through.
    app.add_middleware(InputGuardMiddleware)
    app.state.rate_limiter = (
        RateLimiter(settings, limit_counters) if settings.rate_limit_enabled else None
    )
    app.add_middleware(RateLimitHeadersMiddleware)
    app.add_middleware(BodySizeLimitMiddleware, max_bytes=settings.max_request_bytes)
    # Inside the telemetry and the security headers, so a 500 carries them like any answer.
    app.add_middleware(UnexpectedErrorMiddleware)
    app.add_middleware(TelemetryMiddleware, metrics=metrics, on_complete=log_request)
    app.add_middleware(SecurityHeadersMiddleware)
    # Outermost: every layer inside sees the client's address, not the proxy's, and only a
    # trusted proxy's X-Forwarded-For is believed.
    app.add_middleware(ProxyHeadersMiddleware, trusted_hosts=settings.trusted_proxy_networks)
    app.include_router(ops.router)
    app.include_router(accounts_router)
    app.include_router(api_keys_router)
    app.include_router(user_memories_router)
    app.include_router(keyed_memories_router)
    app.include_router(write_path_router)
    app.include_router(org_memories_router)
    app.include_router(user_profile_router)
    app.include_router(org_profile_router)
    app.include_router(threads_router)
    app.include_router(context_router)
    app.include_router(write_path_admin_router)
    app.include_router(admin_router)
    app.include_router(user_export_router)
    install_web(app, settings)
    declare_common_problems(app)
    app.router.routes.append(Route(MCP_PATH, mcp, methods=["GET", "POST", "DELETE"]))
    app.router.routes.extend(protected_resource_routes(settings))
    return app
