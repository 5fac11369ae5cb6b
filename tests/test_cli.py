"""The `mneme` command line: dev tokens, migrations, and `bench` with or without the benchmarks."""

from __future__ import annotations

import argparse
import asyncio
import importlib.abc
import importlib.metadata
import io
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType
from typing import Any

import jwt
import pytest
import uvicorn

from service import db, db_migrations
from service.auth.principal import TENANT_ID_MAX
from service.auth.tokens import TokenVerifier
from service.cli import build_parser, main, reembed_progress
from service.config import Settings, get_settings
from service.embedded_postgres import OWNER_ROLE, EmbeddedCluster, bootstrap
from service.kit.types import IDENTIFIER_MAX, LATEST_NUMERIC_DATE
from service.providers.profiles import PROFILES
from service.refused_start import StartRefused
from tests.conftest import TEST_SECRET
from tests.service_process import free_port


@pytest.fixture(autouse=True)
def fresh_settings() -> Iterator[None]:
    """The CLI reads settings from the environment each test sets up."""
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"mneme {importlib.metadata.version('mneme')}\n"


def test_token_mints_a_verifiable_dev_token(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MNEME_JWT_HS256_SECRET", TEST_SECRET)
    assert main(["token", "--tenant", "acme", "--user", "ada", "--admin", "--service"]) == 0
    token = capsys.readouterr().out.strip()
    claims = jwt.decode(token, TEST_SECRET, algorithms=["HS256"])
    assert (claims["org_id"], claims["sub"], claims["roles"]) == ("acme", "ada", ["admin"])
    assert claims["scope"] == "mneme:service"
    assert claims["exp"] > claims["iat"]


def test_token_refuses_without_a_dev_secret(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MNEME_JWT_HS256_SECRET", "")
    assert main(["token", "--tenant", "acme", "--user", "ada"]) == 2
    assert "no HS256 secret" in capsys.readouterr().err


def test_token_refuses_outside_dev_mode(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MNEME_ENV", "prod")
    monkeypatch.setenv("MNEME_DATABASE_URL", "postgresql://mneme_app@db/mneme")
    monkeypatch.setenv("MNEME_JWT_HS256_SECRET", "p" * 40)
    assert main(["token", "--tenant", "acme", "--user", "ada"]) == 2
    assert "MNEME_ENV=dev" in capsys.readouterr().err


@pytest.fixture
def prod_without_a_database(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Production settings that name no database; the data directory an embedded one would
    be made in."""
    monkeypatch.setenv("MNEME_ENV", "prod")
    monkeypatch.setenv("MNEME_JWT_HS256_SECRET", "p" * 40)
    monkeypatch.delenv("MNEME_DATABASE_URL", raising=False)
    monkeypatch.setenv("MNEME_DATA_DIR", str(tmp_path))
    return tmp_path


def test_token_in_prod_mode_says_dev_tokens_are_for_dev_whatever_else_is_set(
    prod_without_a_database: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["token", "--tenant", "acme", "--user", "ada"]) == 2
    monkeypatch.setenv("MNEME_JWT_HS256_SECRET", "")
    monkeypatch.setenv("MNEME_JWKS_URL", "https://idp.example/jwks.json")
    get_settings.cache_clear()
    assert main(["token", "--tenant", "acme", "--user", "ada"]) == 2
    refusal = "mneme token: dev tokens are minted only with MNEME_ENV=dev\n"
    assert capsys.readouterr().err == 2 * refusal


def test_prod_mode_refuses_the_embedded_database_before_anything_starts(
    prod_without_a_database: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    started: list[object] = []
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: started.append(args))
    assert main(["serve"]) == 2
    assert main(["migrate"]) == 2
    refusal = "outside dev mode set MNEME_DATABASE_URL; the embedded database is for dev"
    assert capsys.readouterr().err == f"mneme serve: {refusal}\nmneme migrate: {refusal}\n"
    assert started == []
    # Whatever opens the database (the app built by uvicorn alone, say) refuses it too.
    with pytest.raises(StartRefused, match=refusal):
        asyncio.run(db.open_database_target(get_settings()))
    assert list(prod_without_a_database.iterdir()) == []


def test_serve_with_workers_refuses_a_metrics_directory_it_cannot_make(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Checked before anything starts: a worker could not record a single metric there (a
    # directory inside a file cannot be made, whoever asks).
    not_a_directory = tmp_path / "metrics.txt"
    not_a_directory.write_text("")
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(not_a_directory / "workers"))
    # Were the check missing, the command would go on to serve: it returns at once instead.
    monkeypatch.setenv("MNEME_DATABASE_URL", "postgresql+asyncpg://nobody@127.0.0.1:1/none")
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: None)
    assert main(["serve", "--workers", "2"]) == 2
    assert "PROMETHEUS_MULTIPROC_DIR" in capsys.readouterr().err


def test_a_cpu_the_embedded_database_cannot_run_on_is_refused_before_anything_starts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    started: list[object] = []
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: started.append(args))
    monkeypatch.setattr("service.embedded_postgres.cpu_features", lambda: frozenset({"sse4_2"}))
    monkeypatch.delenv("MNEME_DATABASE_URL", raising=False)
    assert main(["serve"]) == 2
    assert main(["migrate"]) == 2
    assert started == []
    said = capsys.readouterr().err
    assert "mneme serve: the embedded PostgreSQL's pgvector needs a CPU with" in said
    assert "lacks abm, avx, avx2" in said
    assert "Set MNEME_DATABASE_URL" in said
    # With a database of one's own, the CPU is that server's business.
    monkeypatch.setenv("MNEME_DATABASE_URL", "postgresql+asyncpg://nobody@127.0.0.1:1/none")
    get_settings.cache_clear()
    assert main(["serve"]) == 0
    assert len(started) == 1


def test_settings_that_do_not_validate_are_named_one_line_each_without_their_values(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    started: list[object] = []
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: started.append(args))
    monkeypatch.setenv("MNEME_DB_POOL_SIZE", "lots")
    monkeypatch.setenv("MNEME_SEARCH_FUSION", "hunter2")
    assert main(["serve"]) == 2
    assert started == []
    assert capsys.readouterr().err == (
        "mneme serve: MNEME_DB_POOL_SIZE: Input should be a valid integer, unable to parse "
        "string as an integer\n"
        "mneme serve: MNEME_SEARCH_FUSION: Input should be 'rrf' or 'linear'\n"
    )


def test_a_rule_over_several_settings_is_said_without_showing_any_of_them(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MNEME_ENV", "prod")
    monkeypatch.setenv("MNEME_DATABASE_URL", "postgresql://app:hunter2@db/mneme")
    monkeypatch.setenv("MNEME_JWT_HS256_SECRET", "short")
    assert main(["migrate"]) == 2
    said = capsys.readouterr().err
    assert said.startswith("mneme migrate: MNEME_JWT_HS256_SECRET is the dev default or shorter")
    assert said.count("\n") == 1
    assert "hunter2" not in said
    assert "short" not in said.replace("shorter", "")


SECRET_TEXT = "S3CRETPW"
"""Stands for a password in a setting's value: never in what a command says about it."""


def _mneme(*command: str, tmp_path: Path, **variables: str) -> subprocess.CompletedProcess[str]:
    """`python -m service COMMAND` as an operator runs it, with `variables` set."""
    environment = {
        **os.environ,
        "MNEME_JWT_HS256_SECRET": TEST_SECRET,
        "MNEME_DATA_DIR": str(tmp_path),
        **variables,
    }
    return subprocess.run(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "service", *command],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _assert_one_line_refusal(ran: subprocess.CompletedProcess[str], line: str) -> None:
    assert (ran.returncode, ran.stderr, ran.stdout) == (2, line + "\n", "")


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("MNEME_JWT_ALGORITHMS", "notjson", "is not valid JSON (Expecting value at character 0)"),
        (
            "MNEME_EXTRACTION_CATEGORY_MODES",
            "{bad",
            "is not valid JSON (Expecting property name enclosed in double quotes at character 1)",
        ),
        (
            "MNEME_WEB_OIDC_CONNECT_ORIGINS",
            f"https://user:{SECRET_TEXT}@idp.example",
            "is not valid JSON (Expecting value at character 0)",
        ),
        (
            "MNEME_RATE_LIMIT_DEFAULT",
            SECRET_TEXT,
            "is not a rate limit: an amount per unit of time, e.g. 600/minute",
        ),
        (
            "MNEME_TRUSTED_PROXIES",
            f"10.0.0.0/8,{SECRET_TEXT}",
            "entry 2 of 2 is not an address or CIDR network",
        ),
        (
            "MNEME_LOG_LEVEL",
            SECRET_TEXT,
            "Input should be 'critical', 'error', 'warning', 'info', 'debug' or 'trace'",
        ),
        (
            "MNEME_DATABASE_URL",
            f"postgresql://app:{SECRET_TEXT}@db:notaport/mneme",
            "cannot be read as a URL (is its port a number?): "
            "postgresql://user:password@host:port/database",
        ),
        (
            "MNEME_DATABASE_URL",
            "notaurl",
            "is not a URL of the form postgresql://user:password@host:port/database",
        ),
        ("MNEME_JWKS_URL", "notaurl", "is not a URL of the form https://host/path/to/jwks.json"),
        (
            "MNEME_RATE_LIMIT_STORAGE_URI",
            f"bogus://user:{SECRET_TEXT}@host/0",
            "names no store the rate limits can use: memory://, or Redis as "
            "redis://[:password@]host:port/db (rediss:// with TLS, redis+unix:// on a socket)",
        ),
        (
            "MNEME_RATE_LIMIT_STORAGE_URI",
            f"redis://:{SECRET_TEXT}@host:notaport/0",
            "is not a Redis URI the rate limits can read: redis://[:password@]host:port/db, "
            "with a numeric port and only options redis-py knows",
        ),
    ],
)
@pytest.mark.parametrize("command", [["token", "--tenant", "acme", "--user", "ada"], ["serve"]])
def test_a_setting_that_does_not_validate_stops_a_command_with_one_line_without_its_value(
    command: list[str], variable: str, value: str, said: str, tmp_path: Path
) -> None:
    ran = _mneme(*command, tmp_path=tmp_path, **{variable: value})
    _assert_one_line_refusal(ran, f"mneme {command[0]}: {variable}: {said}")
    assert SECRET_TEXT not in ran.stderr
    # Nothing was started: no embedded database made under the data directory.
    assert list(tmp_path.iterdir()) == []


def test_the_trace_log_level_is_uvicorns_in_any_case(tmp_path: Path) -> None:
    # Logging is configured before uvicorn (which names the level) is loaded.
    port = free_port()
    ran = _mneme(
        "migrate",
        tmp_path=tmp_path,
        MNEME_LOG_LEVEL="TRACE",
        MNEME_DATABASE_URL=f"postgresql://owner@127.0.0.1:{port}/mneme",
    )
    assert ran.returncode == 1
    assert ran.stderr.startswith("mneme migrate: cannot connect to the database at ")
    assert "Traceback" not in ran.stderr


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (["serve", "--workers", "-2"], "--workers: Input should be greater than or equal to 1"),
        (["serve", "--workers", "0"], "--workers: Input should be greater than or equal to 1"),
        (["serve", "--port", "99999"], "--port: Input should be less than or equal to 65535"),
        (["serve", "--port", "-1"], "--port: Input should be greater than or equal to 1"),
        (
            ["token", "--tenant", "acme", "--user", "ada", "--ttl", "-3600"],
            "--ttl: Input should be greater than or equal to 60",
        ),
    ],
)
def test_an_option_that_stands_for_a_setting_is_held_to_the_settings_rule(
    command: list[str],
    said: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    started: list[object] = []
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: started.append(args))
    monkeypatch.setattr("service.cli._supervise_workers", started.append)
    monkeypatch.setenv("MNEME_JWT_HS256_SECRET", TEST_SECRET)
    monkeypatch.setenv("MNEME_DATA_DIR", str(tmp_path))
    assert main(command) == 2
    assert capsys.readouterr() == ("", f"mneme {command[0]}: {said}\n")
    assert started == []
    assert list(tmp_path.iterdir()) == []


UNKNOWN_PROFILE = (
    f"is not a known embedding profile; known: {', '.join(sorted(PROFILES))} (or leave it "
    "unset and give the prompts and pooling in the settings)"
)
NEEDS_SHA256 = (
    "a local model file needs its sha256, so the vectors stored are always the same model's"
)
SHA256_PATTERN = "String should match pattern '^[0-9a-fA-F]{64}$'"
NO_768 = (
    "all-MiniLM-L6-v2-onnx-int8-dynamic makes 384-dimensional vectors and cannot be shortened "
    "to the column's 768; set the embedding dims to 384 or pick another model"
)


@pytest.mark.parametrize(
    ("variables", "said"),
    [
        (
            {"MNEME_EMBEDDING_PROFILE": "no-such-model"},
            f"MNEME_EMBEDDING_PROFILE: {UNKNOWN_PROFILE}",
        ),
        (
            {"MNEME_EMBEDDING_SECOND": '{"profile": "no-such-model"}'},
            f"MNEME_EMBEDDING_SECOND: profile: {UNKNOWN_PROFILE}",
        ),
        (
            {"MNEME_EMBEDDING_SECOND": '{"provider": "local", "colour": "blue"}'},
            "MNEME_EMBEDDING_SECOND: field 2 of 2 is not an embedding setting (the fields are "
            "the MNEME_EMBEDDING_* settings' names, lower case, without the prefix)",
        ),
        (
            {"MNEME_EMBEDDING_LOCAL_MODEL_PATH": "/models/model.onnx"},
            f"MNEME_EMBEDDING_LOCAL_MODEL_SHA256: {NEEDS_SHA256}",
        ),
        (
            {"MNEME_EMBEDDING_SECOND": '{"local_model_path": "/models/model.onnx"}'},
            f"MNEME_EMBEDDING_SECOND: local_model_sha256: {NEEDS_SHA256}",
        ),
        (
            {"MNEME_EMBEDDING_LOCAL_MODEL_SHA256": "00"},
            f"MNEME_EMBEDDING_LOCAL_MODEL_SHA256: {SHA256_PATTERN}",
        ),
        (
            {
                "MNEME_EMBEDDING_SECOND": (
                    '{"local_model_path": "/models/model.onnx", "local_model_sha256": "00"}'
                )
            },
            f"MNEME_EMBEDDING_SECOND: local_model_sha256: {SHA256_PATTERN}",
        ),
        ({"MNEME_EMBEDDING_DIMS": "768"}, f"MNEME_EMBEDDING_DIMS: {NO_768}"),
        ({"MNEME_EMBEDDING_SECOND": '{"dims": 768}'}, f"MNEME_EMBEDDING_SECOND: dims: {NO_768}"),
        (
            {"MNEME_EMBEDDING_PROVIDER": "openai"},
            "MNEME_EMBEDDING_OPENAI_API_KEY: the openai embedder needs an API key (any "
            "placeholder for a server that checks none)",
        ),
    ],
)
def test_an_embedding_model_no_embedder_can_run_is_refused_as_its_setting_before_anything_starts(
    variables: dict[str, str],
    said: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The configured model and the second one (MNEME_EMBEDDING_SECOND, its fields the
    MNEME_EMBEDDING_* settings') are held to the same rules, each problem named by the
    variable (and field) that set it, before the database or the server starts."""
    started: list[object] = []
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: started.append(args))
    monkeypatch.setenv("MNEME_JWT_HS256_SECRET", TEST_SECRET)
    monkeypatch.setenv("MNEME_DATA_DIR", str(tmp_path))
    for variable, value in variables.items():
        monkeypatch.setenv(variable, value)
    assert main(["serve"]) == 2
    assert capsys.readouterr() == ("", f"mneme serve: {said}\n")
    assert started == []
    assert list(tmp_path.iterdir()) == []


JWKS = "https://idp.example/.well-known/jwks.json"


@pytest.mark.parametrize("env", ["dev", "prod"])
@pytest.mark.parametrize(
    ("algorithms", "keys", "said"),
    [
        (
            '["none"]',
            {},
            "MNEME_JWT_ALGORITHMS: entry 1 of 1 is none: unsigned tokens are never accepted",
        ),
        (
            '["HS256", "NONE"]',
            {},
            "MNEME_JWT_ALGORITHMS: entry 2 of 2 is none: unsigned tokens are never accepted",
        ),
        (
            '["HS256", "HS257"]',
            {},
            "MNEME_JWT_ALGORITHMS: entry 2 of 2 is not an algorithm the service verifies: HS256 "
            "(with MNEME_JWT_HS256_SECRET), RS256, RS384, RS512, ES256, ES384, PS256 (with "
            "MNEME_JWKS_URL)",
        ),
        (
            '["RS256"]',
            {},
            "MNEME_JWT_ALGORITHMS lists RS256, which needs MNEME_JWKS_URL (unset): set the "
            "identity provider's key set or leave the algorithm out",
        ),
        (
            '["RS256", "HS256"]',
            {"MNEME_JWT_HS256_SECRET": "", "MNEME_JWKS_URL": JWKS},
            "MNEME_JWT_ALGORITHMS lists HS256, which needs MNEME_JWT_HS256_SECRET (unset): set "
            "the secret or leave the algorithm out",
        ),
        (
            "[]",
            {},
            "MNEME_JWT_ALGORITHMS: names no algorithm; leave it unset to accept those of the "
            "keys configured",
        ),
    ],
)
def test_a_token_algorithm_nothing_verifies_is_refused_before_anything_starts(
    env: str,
    algorithms: str,
    keys: dict[str, str],
    said: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`none`, a name the service does not verify, or an algorithm whose key is not
    configured would leave a service that accepts none of the tokens it was told to."""
    started: list[object] = []
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: started.append(args))
    monkeypatch.setenv("MNEME_ENV", env)
    monkeypatch.setenv("MNEME_DATABASE_URL", "postgresql://mneme_app@db/mneme")
    monkeypatch.setenv("MNEME_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("MNEME_JWT_HS256_SECRET", TEST_SECRET)
    monkeypatch.setenv("MNEME_JWT_ALGORITHMS", algorithms)
    for variable, value in keys.items():
        monkeypatch.setenv(variable, value)
    assert main(["serve"]) == 2
    assert capsys.readouterr() == ("", f"mneme serve: {said}\n")
    assert started == []


@pytest.mark.parametrize("second", [False, True])
@pytest.mark.parametrize(
    ("beside", "said"),
    [
        (None, "is not a model file this user can read"),
        (
            "model.onnx",
            "has no tokenizer.json beside it (the model's tokenizer, in the same directory)",
        ),
    ],
)
def test_a_model_file_that_is_not_there_is_refused_as_its_setting_before_anything_starts(
    second: bool,
    beside: str | None,
    said: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    models = tmp_path / "models"
    models.mkdir()
    if beside is not None:
        (models / beside).write_bytes(b"a model without its tokenizer")
    model, sha256 = str(models / "model.onnx"), "0" * 64
    if second:
        pinned = {"local_model_path": model, "local_model_sha256": sha256}
        monkeypatch.setenv("MNEME_EMBEDDING_SECOND", json.dumps(pinned))
    else:
        monkeypatch.setenv("MNEME_EMBEDDING_LOCAL_MODEL_PATH", model)
        monkeypatch.setenv("MNEME_EMBEDDING_LOCAL_MODEL_SHA256", sha256)
    started: list[object] = []
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: started.append(args))
    monkeypatch.setenv("MNEME_JWT_HS256_SECRET", TEST_SECRET)
    data = tmp_path / "data"
    monkeypatch.setenv("MNEME_DATA_DIR", str(data))
    assert main(["serve"]) == 2
    setting = (
        "MNEME_EMBEDDING_SECOND: local_model_path" if second else "MNEME_EMBEDDING_LOCAL_MODEL_PATH"
    )
    assert capsys.readouterr() == ("", f"mneme serve: {setting}: {said}\n")
    assert started == []
    assert not data.exists()


@pytest.mark.parametrize(
    ("port", "said"),
    [
        ("99999", "Input should be less than or equal to 65535"),
        ("0", "Input should be greater than or equal to 1"),
    ],
)
def test_a_port_setting_outside_1_to_65535_is_refused(port: str, said: str, tmp_path: Path) -> None:
    ran = _mneme("serve", tmp_path=tmp_path, MNEME_PORT=port)
    _assert_one_line_refusal(ran, f"mneme serve: MNEME_PORT: {said}")
    assert list(tmp_path.iterdir()) == []


def test_token_ttl_takes_the_place_of_the_setting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MNEME_JWT_HS256_SECRET", TEST_SECRET)
    assert main(["token", "--tenant", "acme", "--user", "ada", "--ttl", "120"]) == 0
    claims = jwt.decode(capsys.readouterr().out.strip(), TEST_SECRET, algorithms=["HS256"])
    assert claims["exp"] - claims["iat"] == 120


async def test_token_refuses_a_ttl_whose_expiry_the_service_would_not_accept(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The verifier reads `exp` only up to the end of the year 9999: a token that expires later
    # is refused on its first request, however it was minted.
    monkeypatch.setenv("MNEME_JWT_HS256_SECRET", TEST_SECRET)
    latest = LATEST_NUMERIC_DATE - int(time.time())
    command = ["token", "--tenant", "acme", "--user", "ada", "--ttl"]
    for ttl in (latest + 10, 99999999999999):
        assert main([*command, str(ttl)]) == 2
        out, err = capsys.readouterr()
        assert out == ""
        assert re.fullmatch(
            r"mneme token: --ttl: Input should be at most \d+ seconds now: a token must expire "
            r"by 9999-12-31T23:59:59Z, the latest 'exp' the service accepts\n",
            err,
        )
    assert main([*command, str(latest - 60)]) == 0
    token = capsys.readouterr().out.strip()
    principal = await TokenVerifier(Settings(jwt_hs256_secret=TEST_SECRET)).verify(token)
    assert (principal.tenant_id, principal.subject) == ("acme", "ada")


def test_a_dev_token_ttl_setting_past_the_latest_expiry_is_refused(tmp_path: Path) -> None:
    ran = _mneme(
        "token",
        "--tenant",
        "acme",
        "--user",
        "ada",
        tmp_path=tmp_path,
        MNEME_DEV_TOKEN_TTL_SECONDS="99999999999999",
    )
    assert ran.returncode == 2
    assert ran.stderr.startswith(
        "mneme token: MNEME_DEV_TOKEN_TTL_SECONDS: Input should be at most "
    )


def test_token_rejects_ids_that_cannot_be_addressed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MNEME_JWT_HS256_SECRET", TEST_SECRET)
    assert main(["token", "--tenant", "acme", "--user", "a/b"]) == 2
    assert main(["token", "--tenant", "t" * (TENANT_ID_MAX + 1), "--user", "ada"]) == 2
    said = capsys.readouterr().err.splitlines()
    assert said == 2 * [
        f"mneme token: tenant ids are 1-{TENANT_ID_MAX} and user ids 1-{IDENTIFIER_MAX} "
        "characters of A-Z a-z 0-9 . _ : @ | + = -, starting with a letter or digit (and a "
        "user is not called 'me')"
    ]
    assert main(["token", "--tenant", "t" * TENANT_ID_MAX, "--user", "u" * IDENTIFIER_MAX]) == 0


def test_the_help_of_serve_and_owner_indexes_says_what_they_do(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "migrating first unless MNEME_MIGRATE_ON_START=false" in " ".join(
        capsys.readouterr().out.split()
    )
    with pytest.raises(SystemExit):
        main(["owner-indexes", "--help"])
    assert (
        "memories of one kind (facts, episodes, procedures) gets an HNSW index of its own for"
        " that kind" in " ".join(capsys.readouterr().out.split())
    )


def test_migrate_moves_the_schema_down_and_up(
    cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    database = "mneme_cli"
    asyncio.run(bootstrap(cluster, database))
    url = cluster.url(OWNER_ROLE, database)
    monkeypatch.setenv("MNEME_DATABASE_URL", url)
    assert main(["migrate"]) == 0
    head = db_migrations.head_revision(get_settings())
    assert f"schema at revision {head}" in capsys.readouterr().out
    assert main(["migrate", "base", "--downgrade"]) == 0
    assert "schema at revision base" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["nonexistent_rev"], "Can't locate revision identified by 'nonexistent_rev'"),
        (
            ["nonexistent_rev", "--downgrade"],
            "Can't locate revision identified by 'nonexistent_rev'",
        ),
        (["+5"], "Relative revision +5 didn't produce 5 migrations"),
    ],
)
def test_migrate_refuses_a_revision_alembic_cannot_resolve_with_one_line(
    arguments: list[str],
    said: str,
    cluster: EmbeddedCluster,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    database = "mneme_cli_revision"
    asyncio.run(bootstrap(cluster, database))
    monkeypatch.setenv("MNEME_DATABASE_URL", cluster.url(OWNER_ROLE, database))
    assert main(["migrate", "head"]) == 0
    capsys.readouterr()
    assert main(["migrate", *arguments]) == 2
    assert capsys.readouterr() == ("", f"mneme migrate: {said}; nothing was migrated\n")
    assert main(["migrate", "head"]) == 0
    assert "schema at revision" in capsys.readouterr().out


def test_migrate_refuses_a_server_it_cannot_run_on_and_says_why(
    cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The tests' server stands for one too old by asking for a PostgreSQL not released yet.
    database = "mneme_cli_refused"
    asyncio.run(bootstrap(cluster, database))
    monkeypatch.setenv("MNEME_DATABASE_URL", cluster.url(OWNER_ROLE, database))
    monkeypatch.setattr(db, "MINIMUM_SERVER_VERSION_NUM", 990000)
    assert main(["migrate"]) == 1
    said = capsys.readouterr()
    assert "mneme migrate: the database server runs PostgreSQL" in said.err
    assert "nothing was migrated" in said.err
    assert "schema at revision" not in said.out


def test_migrate_names_the_database_it_cannot_reach_and_migrates_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    monkeypatch.setenv("MNEME_DATABASE_URL", f"postgresql://owner:hunter2@127.0.0.1:{port}/mneme")
    assert main(["migrate"]) == 1
    said = capsys.readouterr()
    assert said.err.startswith(
        f"mneme migrate: cannot connect to the database at postgresql://owner:***@127.0.0.1:{port}"
        "/mneme (MNEME_DATABASE_URL): "
    )
    assert said.err.endswith("; nothing was migrated\n")
    assert said.err.count("\n") == 1
    assert "hunter2" not in said.err
    assert said.out == ""


@pytest.mark.parametrize(
    "command",
    [
        ["reembed"],
        ["reembed", "status"],
        ["owner-indexes", "plan"],
        ["admin", "list-users", "--tenant", "acme"],
    ],
)
def test_a_command_names_the_database_it_cannot_reach_before_it_starts(
    command: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    monkeypatch.setenv("MNEME_DATABASE_URL", f"postgresql://app:hunter2@127.0.0.1:{port}/mneme")
    assert main(command) == 1
    said = capsys.readouterr()
    assert said.err.startswith(
        f"mneme {command[0]}: cannot connect to the database at "
        f"postgresql://app:***@127.0.0.1:{port}/mneme (MNEME_DATABASE_URL): "
    )
    assert said.err.count("\n") == 1
    assert "hunter2" not in said.err
    assert said.out == ""


@pytest.mark.parametrize("workers", [1, 2])
def test_serve_on_a_port_in_use_says_so_before_it_starts_anything(
    tmp_path: Path,
    workers: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("MNEME_DATA_DIR", str(tmp_path))
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        assert main(["serve", "--port", str(port), "--workers", str(workers)]) == 3
    said = capsys.readouterr()
    assert said.err == (
        f"mneme serve: cannot listen on 127.0.0.1:{port}: the port is in use (another mneme "
        "serve, or another program, holds it; choose another with --port or MNEME_PORT)\n"
    )
    # Nothing was started: no embedded database made under the data directory.
    assert list(tmp_path.iterdir()) == []


def test_serve_on_an_address_not_of_this_machine_says_so(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("MNEME_DATA_DIR", str(tmp_path))
    # TEST-NET-1 (RFC 5737): never an address of this machine.
    assert main(["serve", "--host", "192.0.2.1", "--port", str(free_port())]) == 3
    said = capsys.readouterr().err
    assert said.startswith("mneme serve: cannot listen on 192.0.2.1:") and said.count("\n") == 1
    assert "in use" not in said
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "workers",
    # Several workers exit with the same status: uvicorn's own run would return 0 for them.
    [1, pytest.param(2, marks=pytest.mark.slow)],
)
def test_serve_stops_a_start_it_cannot_make_with_one_line(tmp_path: Path, workers: int) -> None:
    # The process as an operator runs it: uvicorn's start-up, the app's lifespan, the exit.
    port = free_port()
    environment = {
        **os.environ,
        "MNEME_DATABASE_URL": f"postgresql://mneme_app:hunter2@127.0.0.1:{port}/mneme",
        "MNEME_JWT_HS256_SECRET": TEST_SECRET,
        "MNEME_DATA_DIR": str(tmp_path),
        "MNEME_LOG_FORMAT": "text",
    }
    command = ["serve", "--port", str(free_port()), "--workers", str(workers)]
    ran = subprocess.run(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "service", *command],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 3  # uvicorn's exit status for a failed start
    errors = [line for line in ran.stderr.splitlines() if " ERROR " in line]
    refusals = [line for line in errors if "mneme cannot start: " in line]
    # Each worker says why once, then that its start failed (and the supervisor, that it stops).
    assert 1 <= len(refusals) <= workers, ran.stderr
    assert all(
        "mneme cannot start: cannot connect to the database at "
        f"postgresql://mneme_app:***@127.0.0.1:{port}/mneme (MNEME_DATABASE_URL): " in line
        for line in refusals
    )
    assert next(line for line in errors if line not in refusals).endswith(
        "Application startup failed. Exiting."
    )
    assert len(errors) <= 2 * workers + (workers > 1), ran.stderr
    assert "Traceback" not in ran.stderr
    assert "hunter2" not in ran.stderr


class _Without(importlib.abc.MetaPathFinder):
    """Finds none of some top-level packages, as in an install that lacks them."""

    def __init__(self, *packages: str) -> None:
        self.packages = packages

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        if fullname.partition(".")[0] in self.packages:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


def _uninstall(monkeypatch: pytest.MonkeyPatch, *packages: str) -> None:
    """Imports of `packages` fail from now on, as if they were not installed; so do imports of
    the benchmarks modules, which are imported afresh."""
    forgotten = {*packages, "benchmarks"}
    for name in [name for name in sys.modules if name.partition(".")[0] in forgotten]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [_Without(*packages), *sys.meta_path])


@pytest.fixture
def without_benchmarks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The service installed without the `benchmarks` package (as in its image)."""
    _uninstall(monkeypatch, "benchmarks")


@pytest.mark.usefixtures("without_benchmarks")
@pytest.mark.parametrize(
    "arguments",
    [["bench"], ["bench", "retrieval", "--limit-questions", "3"], ["bench", "--help"]],
)
def test_bench_without_the_benchmarks_says_how_to_install_them(
    arguments: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(arguments) == 2

    err = capsys.readouterr().err
    assert "the benchmarks are not installed (no module named 'benchmarks')" in err
    assert "pip install -e '.[bench]'" in err
    assert "Traceback" not in err


@pytest.mark.usefixtures("without_benchmarks")
def test_the_other_commands_work_without_the_benchmarks(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MNEME_JWT_HS256_SECRET", TEST_SECRET)

    assert main(["token", "--tenant", "acme", "--user", "ada"]) == 0
    assert capsys.readouterr().out.count(".") == 2


@pytest.mark.parametrize(
    ("missing", "arguments"),
    [("asgi_lifespan", ["bench", "retrieval"]), ("httpx", ["bench", "load"])],
)
def test_bench_without_its_extra_says_how_to_install_it(
    missing: str,
    arguments: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _uninstall(monkeypatch, missing)

    assert main(arguments) == 2

    err = capsys.readouterr().err
    assert f"{missing} is missing; install the bench extra: pip install -e '.[bench]'" in err


@pytest.mark.parametrize("step", [[], ["run"], ["finish"]])
@pytest.mark.parametrize("size", ["0", "-1", "many"])
def test_reembed_refuses_a_batch_size_below_one_before_anything_runs(
    step: list[str], size: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # A batch of 0 would embed nothing and report the work done; a negative one reached the
    # database as a LIMIT it refused, in a traceback.
    parser, _ = build_parser(["reembed"])
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["reembed", *step, "--batch-size", size])
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"mneme reembed: error: argument --batch-size: {size!r} is not a whole number of at least 1"
    )


def test_the_reembed_progress_counts_memories_with_a_space_before_the_unit() -> None:
    stream = io.StringIO()
    with reembed_progress(stream) as progress:
        progress.update(120)
    shown = stream.getvalue()
    assert "120 memories" in shown
    assert "memories/s" in shown
    assert "0memories" not in shown


# What a command that never serves must not load: the web framework, the database toolkit,
# the vector maths (together, seconds of start-up).
SERVING_MODULES = ("fastapi", "sqlalchemy", "alembic", "numpy", "onnxruntime")
# What the service itself loads only when a feature needs it: an LLM or an OpenAI-compatible
# embedder (openai), the first request to /mcp (mcp), `mneme bench` (benchmarks).
OPTIONAL_MODULES = ("openai", "mcp", "mcp_types", "benchmarks")


def _loaded_after(statements: str) -> dict[str, Any]:
    """Run `statements` in a fresh interpreter (dev settings); its `code` and which of
    `SERVING_MODULES` and `OPTIONAL_MODULES` it loaded."""
    watched = {*SERVING_MODULES, *OPTIONAL_MODULES}
    script = (
        "import json, sys\n"
        "code = 0\n"
        f"{statements}\n"
        "top = {name.partition('.')[0] for name in sys.modules}\n"
        f"loaded = sorted(top & set({sorted(watched)!r}))\n"
        "sys.stderr.write('\\n' + json.dumps({'code': code, 'loaded': loaded}))\n"
    )
    environment = {**os.environ, "MNEME_JWT_HS256_SECRET": TEST_SECRET, "MNEME_ENV": "dev"}
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).resolve().parents[1]), environment.get("PYTHONPATH", "")]
    )
    ran = subprocess.run(  # noqa: S603 - our own interpreter and script
        [sys.executable, "-c", script], env=environment, capture_output=True, text=True, check=False
    )
    assert ran.returncode == 0, ran.stderr
    outcome: dict[str, Any] = json.loads(ran.stderr.splitlines()[-1])
    return outcome


@pytest.mark.parametrize(
    "arguments",
    [["token", "--tenant", "acme", "--user", "ada"], ["--version"], ["admin", "--help"]],
)
def test_the_lightweight_commands_do_not_load_the_service(arguments: list[str]) -> None:
    outcome = _loaded_after(
        "from service.cli import main\n"
        "try:\n"
        f"    code = main({arguments!r})\n"
        "except SystemExit as exit:\n"
        "    code = exit.code\n"
    )
    assert outcome == {"code": 0, "loaded": []}


def test_the_service_starts_without_the_optional_features_clients() -> None:
    outcome = _loaded_after("from service.main import create_app\ncreate_app()")
    assert set(outcome["loaded"]) & set(OPTIONAL_MODULES) == set()
    assert "fastapi" in outcome["loaded"]  # the check sees what the app does load


def _options_without_help(parser: argparse.ArgumentParser, command: str) -> list[str]:
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, subcommand in action.choices.items():
                missing += _options_without_help(subcommand, f"{command} {name}")
        elif not action.help:
            missing.append(f"{command} {'/'.join(action.option_strings) or action.dest}")
    return missing


def test_every_option_of_every_command_says_what_it_does() -> None:
    parser, _ = build_parser(["token"])
    assert _options_without_help(parser, "mneme") == []
