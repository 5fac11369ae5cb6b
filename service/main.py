"""Application factory: `create_app()` assembles the app — the state its lifespan builds, the
background work it starts (each domain registers its own job handlers), the middleware and
the routes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

from fastapi import Depends, FastAPI
from fastapi.routing import APIRoute
from limits.aio.storage import Storage
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from service import db_migrations
from service.accounts.dependencies import EndUserRecord, hold_tenant_writes
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
    assert_database_can_serve,
    client_command_timeout,
    create_engine,
    create_sessionmaker,
    open_database_target,
    reaching,
)
from service.db_outage import install_outage_handlers
from service.embedded_postgres import EmbeddedSupervisor
from service.errors import UnexpectedErrorMiddleware, install_problem_handlers
from service.extraction.hooks import WritePathScheduler
from service.extraction.jobs import register_jobs as register_write_path_jobs
from service.extraction.router import admin_router as write_path_admin_router
from service.extraction.router import user_router as write_path_router
from service.jobs import JobRegistry, JobWorker
from service.kit.admission import AdmissionGate, AdmissionMiddleware
from service.kit.body_limit import BodySizeLimitMiddleware
from service.kit.input_guard import InputGuardMiddleware
from service.kit.limit_storage import limit_storage
from service.kit.media_type import require_json_body
from service.kit.openapi import declare_common_responses
from service.kit.post_commit import BackgroundRunner
from service.kit.security_headers import SecurityHeadersMiddleware
from service.kit.token_counting import encoding_for
from service.logs import configure_logging, log_request
from service.mcp.discovery import MCP_PATH, protected_resource_routes
from service.mcp.endpoint import McpEndpoint
from service.memories.embedding import EmbeddingBackfill
from service.memories.jobs import register_jobs as register_memory_jobs
from service.memories.keyed_router import router as keyed_memories_router
from service.memories.owner_indexes import OwnerIndexes, keep_owner_indexes
from service.memories.router import org_router as org_memories_router
from service.memories.router import user_router as user_memories_router
from service.memories.vector_columns import VectorColumns
from service.observability import (
    SHARED_BETWEEN_WORKERS,
    LabelledRoute,
    Metrics,
    TelemetryMiddleware,
    count_busy_refusal,
    leave_shared_metrics,
    record_admission,
    trace_export,
    trace_exporters,
    watch_event_loop_lag,
    watch_pool,
)
from service.openapi import PUBLIC_PATHS, client_openapi
from service.ops import router as ops
from service.profile.router import org_router as org_profile_router
from service.profile.router import user_router as user_profile_router
from service.providers import (
    Embedder,
    build_embedder,
    build_packaged_embedder,
    embedder_config_from_settings,
    load_configured_model,
    second_embedder_config,
)
from service.providers.embedding_cache import cache_embeddings
from service.providers.llm import build_chat_model
from service.providers.reranker import build_reranker
from service.providers.telemetry import InstrumentedEmbedder
from service.rate_limits import RateLimiter, RateLimitHeadersMiddleware
from service.refused_start import RefusedStartMiddleware
from service.state import AppState
from service.threads.dependencies import build_thread_setup
from service.threads.jobs import register_jobs as register_thread_jobs
from service.threads.router import router as threads_router
from service.web.router import install_web

logger = logging.getLogger("mneme")

API_DESCRIPTION = """
Long-term memory for LLM agents. Identity comes from the bearer token (a JWT or a Mneme API
key); every error is an RFC 9457 `application/problem+json` document with a stable `code`.
"""


def _stop_at_once() -> None:
    """The lifespan was cancelled instead of asked to shut down: uvicorn, told a second time to
    stop (a second Ctrl-C), leaves the lifespan's shutdown out and the event loop then cancels
    every task, this one and the background work's alike. The cancellation is taken back so
    that everything opened still closes, in order, without waiting for what was already
    cancelled: a job in progress is handed back to the queue (or, cut short there too, picked
    up again once its heartbeat lapses), and the database stops after its connections have
    closed."""
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()
    logger.warning("mneme stopping at once: interrupted again while stopping")


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


# Each domain registers the handlers of the jobs it queues (its `jobs.py`).
JOB_REGISTRARS = (register_thread_jobs, register_write_path_jobs, register_memory_jobs)


def create_app(settings: Settings | None = None) -> FastAPI:
    """The app: its state is built and its background work started by the lifespan; its
    middleware and routes are installed now."""
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
            # Everything opened is closed in reverse order, however start-up or shutdown ends.
            async with AsyncExitStack() as stack:
                state = await _open_state(stack, app, settings, metrics, limit_counters)
                await _start_background_work(stack, app, state, mcp)
                logger.info(
                    "mneme ready (embedded database: %s, schema %s, trace export: %s)",
                    settings.uses_embedded_database,
                    state.schema_head,
                    ", ".join(exporters) or "none",
                )
                try:
                    yield
                except asyncio.CancelledError:
                    _stop_at_once()
        leave_shared_metrics()
        logger.info("mneme stopped")

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
    _install_middleware(app, settings, metrics, limit_counters)
    _install_routes(app, settings, mcp)
    return app


async def _open_state(
    stack: AsyncExitStack,
    app: FastAPI,
    settings: Settings,
    metrics: Metrics,
    limit_counters: Storage,
) -> AppState:
    """The database (migrated when configured), the providers and everything built once for
    all requests, as `app.state.mneme`; each closes on `stack`."""
    embedder_config = embedder_config_from_settings(settings)
    raw_embedder = build_embedder(embedder_config)
    embedder = InstrumentedEmbedder(raw_embedder)
    stack.push_async_callback(embedder.aclose)
    # The model a change of embedding model moves to, while one is under way.
    second_config = second_embedder_config(settings)
    raw_second = None if second_config is None else build_embedder(second_config)
    second = None if raw_second is None else InstrumentedEmbedder(raw_second)
    if second is not None:
        stack.push_async_callback(second.aclose)
    # The local models and the context blocks' tokenizer load in threads while the database
    # starts and migrates; they are loaded before the first request all the same.
    warm_up = asyncio.create_task(_load_models(raw_embedder, raw_second), name="mneme-load-models")
    stack.push_async_callback(_finished, warm_up)
    target = await open_database_target(settings)
    stack.callback(target.close)
    if settings.migrate_on_start:
        async with reaching(target.urls.owner, target.urls.owner_source):
            await db_migrations.upgrade_as_owner(target.urls.owner, settings)
    # Requests and jobs wait for each command a little longer than the server's own statement
    # limit: the server ends a slow statement first, and a server that answers nothing at all
    # is given up on (`client_command_timeout`).
    engine = create_engine(
        target.urls.runtime, settings, command_timeout=client_command_timeout(settings)
    )
    stack.push_async_callback(engine.dispose)
    # Readiness and the queue gauges wait no longer than a probe would (and ask nothing that
    # takes longer than that on a database that answers).
    probe_seconds = settings.readiness_timeout_seconds
    ops_engine = create_engine(
        target.urls.runtime,
        settings,
        pool_size=1,
        max_overflow=0,
        pool_timeout=probe_seconds,
        connect_timeout=probe_seconds,
        command_timeout=probe_seconds,
    )
    stack.push_async_callback(ops_engine.dispose)
    # The start's own reads (the runtime role's privileges, the vector columns' state) lift
    # the statement limit, so that a busy database delays a start instead of failing it; they
    # lift the client's limit too, on a connection of their own closed once they are done.
    start_engine = create_engine(target.urls.runtime, settings, pool_size=1, max_overflow=0)
    stack.push_async_callback(start_engine.dispose)
    if SHARED_BETWEEN_WORKERS:
        watch_pool(engine.pool)
    chat_model = build_chat_model(settings)
    if chat_model is not None:
        stack.push_async_callback(chat_model.aclose)
    reranker = build_reranker(settings)
    if reranker is not None:
        stack.push_async_callback(reranker.aclose)
    background = BackgroundRunner()
    # Work started after a commit finishes before the providers and the engine close.
    stack.push_async_callback(background.drain)
    async with reaching(target.urls.runtime, target.urls.runtime_source, runtime_role=True):
        await assert_database_can_serve(start_engine)
    sessionmaker = create_sessionmaker(engine)
    await warm_up

    def packaged(model: str) -> Embedder | None:
        """A packaged model a vector column holds, observed and cached like the others."""
        built = build_packaged_embedder(model, embedder_config)
        if built is None:
            return None
        return cache_embeddings(InstrumentedEmbedder(built), settings.query_embedding_cache_size)

    vector_columns = VectorColumns(
        cache_embeddings(embedder, settings.query_embedding_cache_size),
        () if second is None else (cache_embeddings(second, settings.query_embedding_cache_size),),
        packaged,
    )
    stack.push_async_callback(vector_columns.aclose)
    # Before the first write: the columns' models are the database's, recorded by the first
    # process to serve it, never each process's own settings.
    await vector_columns.record_live_model(start_engine)
    await start_engine.dispose()
    state = AppState(
        settings=settings,
        engine=engine,
        ops_engine=ops_engine,
        sessionmaker=sessionmaker,
        authenticator=Authenticator(
            TokenVerifier(settings),
            ApiKeyAuthenticator(sessionmaker),
            metrics,
            FailedAuthenticationLimit(settings.auth_failure_limit, limit_counters),
        ),
        metrics=metrics,
        schema_head=db_migrations.head_revision(settings),
        embedding_backfill=EmbeddingBackfill(vector_columns, sessionmaker),
        vector_columns=vector_columns,
        background=background,
        chat_model=chat_model,
        hold_tenant_writes=hold_tenant_writes,
        threads=build_thread_setup(
            sessionmaker, chat_model, settings, (WritePathScheduler(settings, chat_model),)
        ),
        transaction_hooks=(EndUserRecord(),),
        reranker=reranker,
        owner_indexes=await _owner_indexes(stack, settings, target.urls.owner),
    )
    app.state.mneme = state
    supervisor = _supervise_embedded_database(app, target)
    if supervisor is not None:
        stack.callback(supervisor.stop)
    return state


async def _owner_indexes(
    stack: AsyncExitStack, settings: Settings, owner_url: str
) -> OwnerIndexes | None:
    """What keeps the largest owners' vector indexes, when this process holds the table's
    owner role (the embedded database's, or MNEME_MIGRATION_DATABASE_URL) and the setting asks
    for it; the runtime role cannot create an index."""
    if (
        settings.owner_vector_index_from <= 0
        or settings.owner_vector_index_refresh_seconds <= 0
        or not (settings.uses_embedded_database or settings.migration_database_url is not None)
    ):
        return None
    owner_engine = create_engine(owner_url, settings, pool_size=1, max_overflow=0)
    stack.push_async_callback(owner_engine.dispose)
    return OwnerIndexes.configured(owner_engine, settings)


async def _load_models(embedder: Embedder, second: Embedder | None) -> None:
    """Load the local models and the context blocks' tokenizer now rather than on the first
    request: reading them takes tenths of a second each. API embedders have nothing to load
    and are not called at start-up. A model file of the operator's that cannot be used (not
    the file its sha256 pins) refuses the start in one line naming its setting."""
    loading = [load_configured_model(embedder, second=False)]
    if second is not None:
        loading.append(load_configured_model(second, second=True))
    await asyncio.gather(asyncio.to_thread(encoding_for), *loading)


async def _finished(task: asyncio.Task[None]) -> None:
    """Wait for `task` (its error, if any, was raised where it was awaited): a start-up that
    failed meanwhile closes nothing the task still uses."""
    with contextlib.suppress(Exception):
        await task


async def _start_background_work(
    stack: AsyncExitStack, app: FastAPI, state: AppState, mcp: McpEndpoint
) -> None:
    """The job worker with every domain's handlers, the retention sweep, the MCP session
    manager and the event loop's lag probe; each stops on `stack`."""
    registry = JobRegistry()
    for register in JOB_REGISTRARS:
        register(registry, state)
    jobs = JobWorker(state.settings, state.engine, registry.handlers, on_failure=registry.failed)
    await jobs.start()
    stack.push_async_callback(jobs.stop)
    retention = RetentionScheduler(
        state.settings, state.engine, RetentionSweeper(state.sessionmaker, state.metrics)
    )
    await retention.start()
    stack.push_async_callback(retention.stop)
    await stack.enter_async_context(mcp.running())
    loop_lag = asyncio.create_task(watch_event_loop_lag(), name="mneme-loop-lag")
    vector_columns = asyncio.create_task(
        state.vector_columns.keep_fresh(
            state.engine, state.settings.embedding_columns_refresh_seconds
        ),
        name="mneme-vector-columns",
    )

    watchers = [loop_lag, vector_columns]
    if state.owner_indexes is not None:
        watchers.append(
            asyncio.create_task(
                keep_owner_indexes(
                    state.owner_indexes, state.settings.owner_vector_index_refresh_seconds
                ),
                name="mneme-owner-indexes",
            )
        )

    async def stop_watchers() -> None:
        for task in watchers:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    stack.push_async_callback(stop_watchers)


def _install_middleware(
    app: FastAPI, settings: Settings, metrics: Metrics, limit_counters: Storage
) -> None:
    # Sees the start-up alone (a request passes through it): a start refused for what the
    # operator must fix is reported as its one-line reason.
    app.add_middleware(RefusedStartMiddleware)
    # Once its body is in (a client that sends it slowly holds no place meanwhile: the input
    # guard reads it first) and before anything else is done for it (its credentials, its
    # transaction); inside the telemetry, which counts and logs a refusal like any answer.
    # Its gauges are read at scrape time (`/metrics`), but with several workers each keeps its
    # own current, as the pool's are kept.
    app.state.admission_gate = AdmissionGate(
        settings.requests_in_progress_limit,
        settings.request_queue_timeout_seconds,
        on_change=record_admission if SHARED_BETWEEN_WORKERS else None,
    )
    app.add_middleware(
        AdmissionMiddleware,
        gate=app.state.admission_gate,
        exempt_paths=PUBLIC_PATHS,
        on_refused=count_busy_refusal,
    )
    # Inside the size limit: bodies are decoded strictly only after it let them through.
    app.add_middleware(InputGuardMiddleware, bodies_checked_by=[MCP_PATH])
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


def _install_routes(app: FastAPI, settings: Settings, mcp: McpEndpoint) -> None:
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
    declare_common_responses(app)
    # POST only. No GET: the server is stateless and sends nothing unasked, so it offers no
    # event stream (a 405 is the streamable HTTP transport's way to say so); a GET stream would
    # stay open with nothing ever sent on it, holding a connection for as long as the client
    # waits. No DELETE: with no session there is nothing to end (the transport's 405 again),
    # and `Allow` names only what is served.
    app.router.routes.append(LabelledRoute(MCP_PATH, mcp, methods=["POST"]))
    app.router.routes.extend(protected_resource_routes(settings))
