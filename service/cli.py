"""The `mneme` command: serve, migrate, reembed, admin, token, and bench (with the
benchmarks package)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import os
import socket
import sys
import tempfile
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from pydantic import ValidationError

from service.admin.cli import add_admin_parser, run_admin
from service.config import Settings, get_settings, settings_problems
from service.mcp.stdio import add_mcp_stdio_parser, run_mcp_stdio
from service.refused_start import StartRefused

if TYPE_CHECKING:
    import uvicorn

    from service.db import DatabaseTarget

BENCH_INSTALL = "pip install -e '.[bench]'"


def _installed_version() -> str:
    """The installed distribution's version (a source tree run without installing has none)."""
    try:
        return version("mneme")
    except PackageNotFoundError:
        return "unknown (not installed)"


def build_parser(
    argv: list[str] | None = None,
) -> tuple[argparse.ArgumentParser, Callable[[argparse.Namespace], int]]:
    """The `mneme` command line's parser (with `bench`'s own when `argv` runs it), and what
    runs `bench`."""
    parser = argparse.ArgumentParser(prog="mneme", description="Mneme memory service")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_installed_version()}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser(
        "serve", help="run the HTTP service (migrating first unless MNEME_MIGRATE_ON_START=false)"
    )
    serve.add_argument("--host", default=None, help="bind address (MNEME_HOST)")
    serve.add_argument("--port", type=int, default=None, help="port (MNEME_PORT)")
    serve.add_argument(
        "--workers",
        type=int,
        default=None,
        help="worker processes (MNEME_WORKERS; with the embedded database they share one cluster)",
    )

    migrate = commands.add_parser("migrate", help="apply (or revert) schema migrations")
    migrate.add_argument(
        "revision", nargs="?", default="head", help="target revision (default head)"
    )
    migrate.add_argument(
        "--downgrade", action="store_true", help="move down to REVISION (e.g. base) instead of up"
    )

    reembed = commands.add_parser(
        "reembed",
        help="embed memories that lack a vector, or change the embedding model without downtime",
        description=(
            "Without a step: embed the memories whose live vector is missing or another "
            "model's. Changing the model (docs/embedding-models.md): `start` claims the second "
            "vector column for the model that is not the live one's (MNEME_EMBEDDING_* or "
            "MNEME_EMBEDDING_SECOND), `run` fills it, builds its index and switches each "
            "complete tenant (resumable), `status` tells where it stands, `finish` makes it "
            "the live column and drops the old one. No step abandons a change once started "
            "(docs/embedding-models.md, A change started by mistake)."
        ),
    )
    reembed.add_argument(
        "step",
        nargs="?",
        choices=("start", "run", "status", "finish"),
        default=None,
        help="a step of changing the model; none: fill missing vectors in place",
    )
    reembed.add_argument(
        "--batch-size",
        type=_positive_int,
        default=64,
        help="memories embedded per batch (default 64)",
    )
    reembed.add_argument(
        "--follow",
        action="store_true",
        help="run: keep embedding memories written meanwhile until the change finishes",
    )

    owner_indexes = commands.add_parser(
        "owner-indexes",
        help="build and drop the largest owners' own vector indexes (one per kind) now",
        description=(
            "An owner with at least MNEME_OWNER_VECTOR_INDEX_FROM memories of one kind (facts, "
            "episodes, procedures) gets an HNSW index of its own for that kind (at most "
            "MNEME_OWNER_VECTOR_INDEXES_MAX indexes, the largest), which its searches walk "
            "instead of sorting its vectors of that kind. A service process with the "
            "owner role does this every MNEME_OWNER_VECTOR_INDEX_REFRESH_SECONDS; this command "
            "does it now, with the migration role (MNEME_MIGRATION_DATABASE_URL). `plan` says "
            "what `refresh` would build and drop."
        ),
    )
    owner_indexes.add_argument(
        "step", nargs="?", choices=("refresh", "plan"), default="refresh", help="default: refresh"
    )

    run_bench = _add_bench_parser(commands, load=_command_of(argv) == "bench")
    add_admin_parser(commands)
    add_mcp_stdio_parser(commands)

    token = commands.add_parser("token", help="mint a dev HS256 token")
    token.add_argument("--tenant", required=True, help="the tenant the token is for")
    token.add_argument("--user", required=True, help="the user, the token's subject")
    token.add_argument("--admin", action="store_true", help="grant the admin role")
    token.add_argument(
        "--service",
        action="store_true",
        help="a service principal (may address any user of the tenant)",
    )
    token.add_argument(
        "--ttl", type=int, default=None, help="lifetime in seconds (MNEME_DEV_TOKEN_TTL_SECONDS)"
    )
    return parser, run_bench


def _positive_int(value: str) -> int:
    """An argument type: a whole number of at least 1 (else a usage error). A batch of 0 would
    embed nothing and report the work done; a negative one is no size at all."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number of at least 1")
    return number


EMBEDDED_DATABASE_COMMANDS = ("serve", "migrate", "reembed", "owner-indexes", "admin", "mcp-stdio")
"""The commands that start the embedded database when no `MNEME_DATABASE_URL` is set."""


OPTION_SETTINGS = {
    "serve": {"host": "host", "port": "port", "workers": "workers"},
    "token": {"ttl": "dev_token_ttl_seconds"},
}
"""The options of a command that stand for a setting (option: setting): an option given is
held to its setting's rules, by the settings themselves."""


def main(argv: list[str] | None = None) -> int:
    parser, run_bench = build_parser(argv)

    args = parser.parse_args(argv)
    try:
        settings = _command_settings(args)
    except _SettingsRefused as refused:
        for problem in refused.problems:
            sys.stderr.write(f"mneme {args.command}: {problem}\n")
        return 2
    if args.command in EMBEDDED_DATABASE_COMMANDS and _embedded_database_refused(args.command):
        return 2
    if args.command in ("serve", "migrate", "reembed", "owner-indexes"):
        from service.logs import configure_logging

        configure_logging(settings.log_level, settings.effective_log_format)
    if args.command == "serve":
        return _serve(settings)
    try:
        return _run_command(args, settings, run_bench)
    except StartRefused as refused:
        sys.stderr.write(f"mneme {args.command}: {refused}\n")
        return 1


class _SettingsRefused(Exception):
    def __init__(self, problems: list[str]) -> None:
        super().__init__(problems)
        self.problems = problems


def _command_settings(args: argparse.Namespace) -> Settings:
    """The settings `args` runs with: the environment's, with the options `OPTION_SETTINGS`
    names in place of their settings. `_SettingsRefused` says what is wrong with either, one
    line each, naming the variable or the option."""
    try:
        settings = get_settings()
    except ValidationError as invalid:
        raise _SettingsRefused(settings_problems(invalid)) from None
    options = OPTION_SETTINGS.get(args.command, {})
    given = {
        setting: getattr(args, option)
        for option, setting in options.items()
        if getattr(args, option) is not None
    }
    if not given:
        return settings
    try:
        return Settings(**given)
    except ValidationError as invalid:
        names = {setting: f"--{option}" for option, setting in options.items()}
        raise _SettingsRefused(settings_problems(invalid, names)) from None


def _run_command(
    args: argparse.Namespace,
    settings: Settings,
    run_bench: Callable[[argparse.Namespace], int],
) -> int:
    """Every command but `serve` (whose start-up runs inside uvicorn)."""
    if args.command == "migrate":
        return asyncio.run(_migrate(args.revision, args.downgrade))
    if args.command == "reembed":
        if args.step is None:
            return asyncio.run(_reembed(args.batch_size))
        return asyncio.run(_change_model(args.step, args.batch_size, args.follow))
    if args.command == "owner-indexes":
        return asyncio.run(_owner_indexes(args.step))
    if args.command == "bench":
        return run_bench(args)
    if args.command == "admin":
        return asyncio.run(run_admin(args))
    if args.command == "mcp-stdio":
        return run_mcp_stdio(args)
    return _token(args, settings)


def _embedded_database_refused(command: str) -> bool:
    """Whether the embedded database may not start (outside dev mode) or cannot run on this
    machine's CPU (said on stderr): before anything starts, rather than as a worker's failed
    start-up."""
    from service.embedded_postgres import (
        EMBEDDED_IS_FOR_DEV,
        UnsupportedCpu,
        cpu_features,
        require_cpu_features,
    )

    settings = get_settings()
    if settings.database_url is not None:
        return False
    if not settings.is_dev:
        sys.stderr.write(f"mneme {command}: {EMBEDDED_IS_FOR_DEV}\n")
        return True
    try:
        require_cpu_features(cpu_features())
    except UnsupportedCpu as refusal:
        sys.stderr.write(f"mneme {command}: {refusal}\n")
        return True
    return False


def _command_of(argv: list[str] | None) -> str | None:
    """The command word of a command line (the first word that is not an option)."""
    words = sys.argv[1:] if argv is None else argv
    return next((word for word in words if not word.startswith("-")), None)


def _add_bench_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], *, load: bool
) -> Callable[[argparse.Namespace], int]:
    """Add `bench` from the `benchmarks` package, which ships apart from the service (the
    `bench` extra); returns what runs it. Without the package, `mneme bench …` says how to
    install it.

    The package (which loads the whole service) is imported only when `load` says the command
    line runs `bench`: every other command starts without it."""
    if not load:
        # Listed in `mneme --help`; never run (a command line that runs it loads the package).
        commands.add_parser("bench", help="benchmarks (see `mneme bench --help`)")
        return lambda _args: 2
    try:
        from benchmarks.cli import add_bench_parser, run_bench
    except ModuleNotFoundError as exc:
        missing = exc.name or "benchmarks"
        # No option prefix: every word after `bench` (`--help` too) is taken as it is, so any
        # `mneme bench …` gets the install hint rather than a usage error.
        stand_in = commands.add_parser(
            "bench",
            help=f"benchmarks (not installed: {BENCH_INSTALL})",
            add_help=False,
            prefix_chars="\0",
        )
        stand_in.add_argument("arguments", nargs="*")
        return lambda _args: _bench_not_installed(missing)
    add_bench_parser(commands)
    return run_bench


def _bench_not_installed(missing: str) -> int:
    sys.stderr.write(
        f"mneme bench: the benchmarks are not installed (no module named {missing!r}); "
        f"install them from a checkout of the project with: {BENCH_INSTALL}\n"
    )
    return 2


APP_FACTORY = "service.main:create_app"
"""What uvicorn builds the app from, in each worker."""


def _serve(settings: Settings) -> int:
    import uvicorn

    from service.http_protocol import ProblemHttpToolsProtocol

    host, port, workers = settings.host, settings.port, settings.workers
    unusable = _unusable_address(host, port)
    if unusable is not None:
        sys.stderr.write(f"mneme serve: cannot listen on {host}:{port}: {unusable}\n")
        # uvicorn's exit status for a start that fails.
        return 3
    try:
        metrics_dir = _workers_metrics_directory() if workers > 1 else None
    except OSError as exc:
        sys.stderr.write(
            f"mneme serve: the workers need a directory to share their metrics in: {exc}; "
            "set TMPDIR or PROMETHEUS_MULTIPROC_DIR to a writable directory\n"
        )
        return 2
    shared = None
    if workers > 1 and settings.database_url is None:
        shared = asyncio.run(_shared_embedded_database(settings))
    options: dict[str, Any] = {
        "factory": True,
        "host": host,
        "port": port,
        "workers": workers,
        "log_level": settings.log_level,
        # The app configures logging itself (JSON or text, with request and trace ids) and
        # writes its own access line.
        "log_config": None,
        "access_log": False,
        # The app applies X-Forwarded-* itself, trusting MNEME_TRUSTED_PROXIES only; uvicorn's
        # own pass would trust FORWARDED_ALLOW_IPS besides.
        "proxy_headers": False,
        "http": ProblemHttpToolsProtocol,
        "timeout_graceful_shutdown": settings.shutdown_grace_seconds,
    }
    try:
        if workers == 1:
            # A start that fails exits with uvicorn's status for it (3).
            uvicorn.run(APP_FACTORY, **options)
            return 0
        return _supervise_workers(uvicorn.Config(APP_FACTORY, **options))
    finally:
        if metrics_dir is not None:
            metrics_dir.cleanup()
        if shared is not None:
            shared.close()


def _supervise_workers(config: uvicorn.Config) -> int:
    """Run `config.workers` worker processes, as `uvicorn.run` does, until they stop; the exit
    status: uvicorn's for a failed start (3) when a worker could not start, else 0.

    uvicorn's supervisor stops every worker when one fails to start, but `uvicorn.run` then
    returns as if they had served: a service manager would read a start that never happened as
    a clean stop."""
    from uvicorn.config import STARTUP_FAILURE
    from uvicorn.supervisors import Multiprocess

    supervisor = Multiprocess(config, sockets=[config.bind_socket()])
    with contextlib.suppress(KeyboardInterrupt):
        supervisor.run()
    failed = any(process.exitcode == STARTUP_FAILURE for process in supervisor.processes)
    return STARTUP_FAILURE if failed else 0


def _unusable_address(host: str, port: int) -> str | None:
    """Why `mneme serve` could not listen on `host`:`port` (None: it can), found by binding it
    as uvicorn does (`SO_REUSEADDR`) and letting go at once: asked before the database starts
    and the schema migrates, which uvicorn does before it binds."""
    try:
        [(family, kind, protocol, _, address), *_] = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        return f"{host} is not an address of this machine ({exc.strerror})"
    with socket.socket(family, kind, protocol) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return (
                    "the port is in use (another mneme serve, or another program, holds it; "
                    "choose another with --port or MNEME_PORT)"
                )
            return exc.strerror or str(exc)
    return None


def _workers_metrics_directory() -> tempfile.TemporaryDirectory[str] | None:
    """A directory of this run's own where the workers keep their metrics, so a scrape that
    reaches any of them renders all of theirs (prometheus_client's multiprocess mode, which the
    workers take from the environment they inherit). An operator's `PROMETHEUS_MULTIPROC_DIR`
    is used instead, emptied first: files of an earlier run would count its workers again.
    Returns the directory to remove at exit (None for the operator's)."""
    from service.observability.metrics import MULTIPROCESS_DIR_VARIABLE

    given = os.environ.get(MULTIPROCESS_DIR_VARIABLE)
    if given:
        Path(given).mkdir(parents=True, exist_ok=True)
        for stale in Path(given).glob("*.db"):
            stale.unlink()
        return None
    directory = tempfile.TemporaryDirectory(prefix="mneme-metrics-")
    os.environ[MULTIPROCESS_DIR_VARIABLE] = directory.name
    return directory


async def _shared_embedded_database(settings: Settings) -> DatabaseTarget:
    """Start and migrate the embedded cluster here, once, and point the workers at it.

    Each worker runs the app's lifespan; left alone, every one would start a cluster on the
    same data directory and migrate it concurrently. The workers inherit this environment,
    so they connect to the running cluster as to any external database, and only the parent
    stops it.
    """
    from service import db_migrations
    from service.db import open_database_target

    target = await open_database_target(settings)
    if settings.migrate_on_start:
        await db_migrations.upgrade_as_owner(target.urls.owner, settings)
    os.environ["MNEME_DATABASE_URL"] = target.urls.runtime
    os.environ["MNEME_MIGRATION_DATABASE_URL"] = target.urls.owner
    os.environ["MNEME_MIGRATE_ON_START"] = "false"
    return target


async def _migrate(revision: str, downgrade: bool) -> int:
    from alembic.util import CommandError

    from service import db_migrations
    from service.db import open_command_engine

    settings = get_settings()
    try:
        target, engine = await open_command_engine(settings)
        try:
            if downgrade:
                await db_migrations.downgrade(engine, settings, revision)
            else:
                await db_migrations.upgrade(engine, settings, revision)
            current = await db_migrations.current_revision(engine)
        finally:
            await engine.dispose()
            target.close()
    except StartRefused as refused:
        sys.stderr.write(f"mneme migrate: {refused}; nothing was migrated\n")
        return 1
    except CommandError as refused:
        # Alembic's refusal of the revision asked for (one it cannot find, or not a target in
        # that direction from where the schema is): a bad argument. The run is one transaction,
        # rolled back with the error.
        sys.stderr.write(f"mneme migrate: {refused}; nothing was migrated\n")
        return 2
    sys.stdout.write(f"schema at revision {current or 'base'}\n")
    return 0


def reembed_progress(stream: TextIO) -> Any:
    """The re-embedding's progress bar: a count of memories, a space before the unit
    ("120 memories", "35.2 memories/s")."""
    from tqdm import tqdm

    return tqdm(desc="re-embedding", unit=" memories", file=stream)


async def _reembed(batch_size: int) -> int:
    from service.db import open_command_engine
    from service.memories.reembed import ReembedRefused, live_model, reembed
    from service.providers import (
        EmbeddingSettingsRefused,
        build_embedder,
        build_packaged_embedder,
        embedder_config_from_settings,
        load_configured_model,
        named,
    )

    settings = get_settings()
    target, engine = await open_command_engine(settings)
    config = embedder_config_from_settings(settings)
    owned = build_embedder(config)
    # The live column is filled with its model, as the service serves it: the configured
    # one (under the name the column records for its vectors), else a packaged one.
    live = await live_model(engine, owned)
    embedder = named(owned, live)
    if embedder is None:
        packaged = build_packaged_embedder(live, config)
        if packaged is not None:
            await owned.aclose()
            owned = packaged
        embedder = owned
    try:
        await load_configured_model(embedder, second=False)
        with reembed_progress(sys.stderr) as progress:
            report = await reembed(
                engine, embedder, batch_size=batch_size, on_progress=progress.update
            )
    except (ReembedRefused, EmbeddingSettingsRefused) as exc:
        sys.stderr.write(f"mneme reembed: {exc}\n")
        return 2
    finally:
        await owned.aclose()
        await engine.dispose()
        target.close()
    sys.stdout.write(f"re-embedded {report.embedded} memories with {embedder.model_name}\n")
    return 0


async def _owner_indexes(step: str) -> int:
    """`mneme owner-indexes`: the owners' vector indexes refreshed now, or the plan of it."""
    from service.db import open_command_engine
    from service.memories.owner_indexes import OwnerIndexes, OwnerIndexesRefused

    settings = get_settings()
    target, engine = await open_command_engine(settings)
    indexes = OwnerIndexes.configured(engine, settings)
    try:
        if step == "plan":
            lines = (await indexes.plan()).lines()
        else:
            lines = (await indexes.refresh()).lines()
    except OwnerIndexesRefused as exc:
        sys.stderr.write(f"mneme owner-indexes: {exc}\n")
        return 2
    finally:
        await engine.dispose()
        target.close()
    sys.stdout.write("".join(f"{line}\n" for line in lines))
    return 0


async def _change_model(step: str, batch_size: int, follow: bool) -> int:
    """One step of changing the embedding model (`service.memories.reembed`)."""
    from service.db import open_command_engine
    from service.memories import reembed
    from service.memories.owner_indexes import OwnerIndexes
    from service.memories.vector_columns import load_state
    from service.providers import (
        Embedder,
        EmbeddingSettingsRefused,
        build_embedder,
        embedder_config_from_settings,
        load_configured_model,
        named,
        second_embedder_config,
    )

    settings = get_settings()
    target, engine = await open_command_engine(settings)
    configured = build_embedder(embedder_config_from_settings(settings))
    second_config = second_embedder_config(settings)
    second = None if second_config is None else build_embedder(second_config)
    # Long enough for every service process to have read a change of the state again.
    settle = 2 * settings.embedding_columns_refresh_seconds + 1

    async def new_model() -> Embedder | None:
        """The embedder of the model the change goes to: the one that is not the live
        column's, or the column being filled's (under the name that column records), loaded
        (a model file of the operator's that cannot be used is refused here, before the step
        does anything)."""
        filling = (await load_state(engine)).column("filling")
        live_model = await reembed.live_model(engine, configured)
        for embedder in (configured, second):
            if embedder is None:
                continue
            if filling is not None:
                filler = named(embedder, str(filling.model))
                if filler is not None:
                    await load_configured_model(embedder, second=embedder is second)
                    return filler
            elif named(embedder, live_model) is None:
                await load_configured_model(embedder, second=embedder is second)
                return embedder
        return None

    async def no_new_model() -> reembed.ReembedRefused:
        """Why the settings name no model to change to: the change under way is to another
        model, or there is nothing to change."""
        filling = (await load_state(engine)).column("filling")
        if filling is None:
            if step == "start":
                return reembed.ReembedRefused(
                    "no new model to change to: set MNEME_EMBEDDING_SECOND (or "
                    "MNEME_EMBEDDING_*) to a model other than the live column's"
                )
            return reembed.ReembedRefused("no change of model is under way (`mneme reembed start`)")
        return reembed.ReembedRefused(
            f"a change of model to {filling.model} is under way (memory.{filling.name} is being "
            f"filled), and the settings name no embedder of {filling.model}: configure it as "
            "MNEME_EMBEDDING_SECOND (or MNEME_EMBEDDING_*) and complete the change with "
            "`mneme reembed run` and `mneme reembed finish`; no step abandons a change "
            "(docs/embedding-models.md, A change started by mistake)"
        )

    try:
        if step == "status":
            for line in (await reembed.status(engine)).lines():
                sys.stdout.write(line + "\n")
            return 0
        new = await new_model()
        if step == "start":
            if new is None:
                raise await no_new_model()
            column = await reembed.start(engine, configured, new)
            sys.stdout.write(f"memory.{column} is being filled for {new.model_name}\n")
        elif step == "run":
            if new is None:
                raise await no_new_model()
            with reembed_progress(sys.stderr) as progress:
                current = await reembed.run(
                    engine,
                    new,
                    batch_size=batch_size,
                    settle_seconds=settle,
                    follow=follow,
                    on_progress=progress.update,
                    owner_indexes=OwnerIndexes.configured(engine, settings),
                )
            for line in current.lines():
                sys.stdout.write(line + "\n")
        else:
            column = await reembed.finish(engine, new, batch_size=batch_size, settle_seconds=settle)
            sys.stdout.write(f"memory.{column} is the live vector column\n")
    except (reembed.ReembedRefused, EmbeddingSettingsRefused) as exc:
        sys.stderr.write(f"mneme reembed {step}: {exc}\n")
        return 2
    finally:
        for embedder in (configured, second):
            if embedder is not None:
                await embedder.aclose()
        await engine.dispose()
        target.close()
    return 0


def _token(args: argparse.Namespace, settings: Settings) -> int:
    from service.auth.dev_tokens import mint_dev_token

    if not settings.is_dev:
        sys.stderr.write("mneme token: dev tokens are minted only with MNEME_ENV=dev\n")
        return 2
    if settings.jwt_hs256_secret is None:
        sys.stderr.write("mneme token: no HS256 secret is configured (MNEME_JWT_HS256_SECRET)\n")
        return 2
    try:
        token = mint_dev_token(
            settings,
            tenant_id=args.tenant,
            user_id=args.user,
            admin=args.admin,
            service=args.service,
        )
    except ValueError as exc:
        sys.stderr.write(f"mneme token: {exc}\n")
        return 2
    sys.stdout.write(token + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
