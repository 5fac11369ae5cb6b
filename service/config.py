"""Runtime configuration: every setting is an environment variable with the MNEME_ prefix."""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import re
import time
from collections.abc import Mapping
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import limits
import platformdirs
from pydantic import (
    AnyHttpUrl,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails
from pydantic_settings import BaseSettings, SettingsConfigDict

from service.kit.types import LATEST_NUMERIC_DATE, PriorWeightText, UnitIntervalText

# Categories the write path itself gives episodic memories; extracted facts cannot use them.
RESERVED_CATEGORIES = frozenset({"turn", "episode"})
# Matched with `fullmatch`: a `$` would also admit a trailing newline.
_CATEGORY = re.compile(r"[a-z][a-z0-9_.-]{0,63}")

# A secret that ships in the repository can never protect production tokens.
DEV_DEFAULT_SECRET = "mneme-dev-secret-not-for-production-use"  # noqa: S105 - the documented dev default


class SettingRefused(ValueError):
    """A setting refused by one of this module's rules, in words that never repeat the value
    given: a value (a URL, a list, text in the wrong variable) may hold a password."""


LogLevel = Literal["critical", "error", "warning", "info", "debug", "trace"]
"""uvicorn's log levels (`trace`, below `debug`, is uvicorn's own)."""


CONTEXT_BUDGET_MIN_TOKENS = 72
"""The smallest budget a block is built in: its fixed preamble (36 tokens with `cl100k_base`)
and a thread's newest message, however long, shortened around its marker (`shortened`), which
need 67. Below it a block is empty (always, below about 43) or leaves out the message its next
model call answers: a 422 says so where an empty block would not say why."""


SECRET_ALGORITHMS = ("HS256",)
"""The token signing algorithms MNEME_JWT_HS256_SECRET verifies."""

JWKS_ALGORITHMS = ("RS256", "RS384", "RS512", "ES256", "ES384", "PS256")
"""The token signing algorithms verified with a key of MNEME_JWKS_URL's key set."""

DEFAULT_JWKS_ALGORITHMS = ("RS256", "ES256")
"""The ones of them accepted when MNEME_JWT_ALGORITHMS is unset: what identity providers sign
with."""


DATABASE_URL_SCHEMES = ("postgresql", "postgres", "postgresql+asyncpg")
"""What a database URL may start with: PostgreSQL, reached through asyncpg."""


def _url_refused(url: str, schemes: tuple[str, ...], shape: str, *, needs_host: bool) -> None:
    """SettingRefused unless `url` has one of `schemes`, a host (or, `needs_host` false, a
    socket named in its query) and a numeric port when it has one: a URL the service would
    otherwise read only as it starts, where its parser's error is a traceback."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - read for the error a port that is not a number raises
    except ValueError:
        raise SettingRefused(f"cannot be read as a URL (is its port a number?): {shape}") from None
    located = parts.hostname if needs_host else parts.netloc or parts.query
    if parts.scheme not in schemes or not located:
        raise SettingRefused(f"is not a URL of the form {shape}")


def _split_list(value: str) -> list[str]:
    return [entry.strip() for entry in value.split(",") if entry.strip()]


def _default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("mneme"))


class Settings(BaseSettings):
    """All of Mneme's settings; see docs/configuration.md for what each one does."""

    model_config = SettingsConfigDict(
        env_prefix="MNEME_",
        env_file=".env",
        extra="ignore",
        frozen=True,
        # Lists and objects are decoded from their JSON text by `_decoded_json`, so that bad
        # JSON is a validation error of its setting like any other (pydantic-settings' own
        # decoding raises an error of its own, outside validation).
        enable_decoding=False,
    )

    # --- runtime mode -----------------------------------------------------------------------
    env: Literal["dev", "prod"] = "dev"
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65_535)
    log_level: LogLevel = "info"
    # One JSON object per line, or text for a terminal; unset: text in dev, JSON in prod.
    log_format: Literal["json", "text"] | None = None

    # --- database ---------------------------------------------------------------------------
    # Runtime connection (the non-owner role under RLS). Unset → embedded Postgres.
    database_url: SecretStr | None = None
    # Owner connection used for migrations; defaults to database_url.
    migration_database_url: SecretStr | None = None
    data_dir: Path = Field(default_factory=_default_data_dir)
    # The embedded database's buffer cache, in MB; unset: a quarter of the machine's memory,
    # between 128 MB and 2 GB. A change restarts the embedded cluster once.
    embedded_shared_buffers_mb: int | None = Field(default=None, ge=16, le=1_048_576)
    db_runtime_role: str = Field(default="mneme_app", pattern=r"^[a-z_][a-z0-9_]{0,62}$")
    db_pool_size: int = Field(default=10, ge=1)
    db_max_overflow: int = Field(default=10, ge=0)
    # How long a request waits for a pooled connection while every one (the pool and its
    # overflow) is in use, before it is answered 503 `SERVICE_BUSY`: a process that cannot keep
    # up refuses the excess in seconds, well inside a client's own timeout, instead of letting
    # every request queue until clients give up on answers it still computes.
    db_pool_timeout_seconds: float = Field(default=5, gt=0, le=300)
    # The requests one process works on at once (liveness, readiness and metrics not counted);
    # the next wait for a place, up to `request_queue_timeout_seconds`, and once requests have
    # been waiting without a break for a second, new ones are refused at once: 503
    # `SERVICE_BUSY` (docs/failure-modes.md). Unset: twice the runtime pool's connections
    # (`db_pool_size` + `db_max_overflow`), enough to keep every connection busy while as many
    # requests are parsed, authenticated and answered around their transactions. A request
    # waiting on a hosted model (no connection held) gives its place up meanwhile.
    max_requests_in_progress: int | None = Field(default=None, ge=1, le=100_000)
    request_queue_timeout_seconds: float = Field(default=5, gt=0, le=300)
    db_statement_timeout_ms: int = Field(default=15_000, ge=0)
    # How long opening a database connection may take before it fails as an outage (a 503
    # `DATABASE_UNAVAILABLE` to the request that needed it): a server that does not answer
    # (a partition, a frozen host) is given up on instead of waited for.
    db_connect_timeout_seconds: float = Field(default=5, gt=0, le=300)
    # How long `/readyz` (and the queue gauges of `/metrics`) wait for the database before
    # answering 503 (the gauges: keeping their last values): below a probe's own timeout
    # (deploy/k8s: 3 s), so that the probe sees the 503, not a timeout of its own.
    readiness_timeout_seconds: float = Field(default=2, gt=0, le=60)
    # The statements each pooled connection keeps prepared, least recently used first out (the
    # driver's own cache; its statements are the ones run on the driver, the search's among
    # them). A kept search statement's plan holds ~2.7 MB of its database backend's memory.
    db_statement_cache_size: int = Field(default=100, ge=0)
    # The search statements with their owners written in (a text per large owner and filter
    # shape) each pooled connection keeps prepared, apart from the cache above, least recently
    # used first out: what bounds a backend's plans, whatever the number of large owners.
    db_owner_statement_cache_size: int = Field(default=20, ge=0)
    # The search and context statements every owner shares (a text per filter shape: 81 among
    # the combinations of a search's filters) each pooled connection keeps prepared, apart from
    # both caches above, least recently used first out: each holds a plan of 3-5 MB in the
    # backend, so the shapes clients use must not decide a connection's memory.
    db_search_statement_cache_size: int = Field(default=20, ge=0)
    # Ping every pooled connection before handing it out: one more round trip per request. Off
    # by default: a request whose pooled connection turns out to be closed (the server restarted,
    # an idle timeout) starts its transaction again on a new one instead (service/db.py).
    db_pool_pre_ping: bool = False
    migrate_on_start: bool = True
    # uvicorn worker processes of one replica (`mneme serve`): searches are CPU-bound, so one
    # process uses one core. Each has its own pool and job worker; with the embedded database
    # the parent starts and migrates the cluster once and the workers share it.
    workers: int = Field(default=1, ge=1, le=64)
    # How long `mneme serve`, told to stop, waits for the requests in flight before it abandons
    # them and shuts down in order: a client that never finishes its request (a body that never
    # ends) would otherwise hold the stop until the process is killed. Under an orchestrator,
    # allow the stop this and the job worker's 20 s before SIGKILL (docs/failure-modes.md).
    shutdown_grace_seconds: float = Field(default=10, gt=0, le=3600)

    # --- identity ---------------------------------------------------------------------------
    jwt_hs256_secret: SecretStr | None = SecretStr(DEV_DEFAULT_SECRET)
    jwks_url: str | None = None
    jwks_cache_seconds: int = Field(default=300, ge=0)
    # Minimum gap between forced JWKS refetches for unknown key ids (a flood of random kids
    # must not become a flood of requests to the identity provider).
    jwks_refresh_cooldown_seconds: float = Field(default=30, ge=0)
    # The signing algorithms a token may use, each of them one the keys configured verify
    # (`SECRET_ALGORITHMS` need the secret, `JWKS_ALGORITHMS` the key set); unset: those of
    # the keys configured (`accepted_jwt_algorithms`).
    jwt_algorithms: list[str] | None = None
    jwt_issuer: str | None = None
    jwt_audience: str | None = None
    jwt_leeway_seconds: int = Field(default=30, ge=0)
    tenant_claim: str = "org_id"
    user_claim: str = "sub"
    roles_claim: str = "roles"
    scope_claim: str = "scope"
    admin_role: str = "admin"
    # Auth overlay claims: recorded per end user, never the tokens themselves.
    name_claim: str = "name"
    email_claim: str = "email"
    avatar_claim: str = "picture"
    socials_claim: str = "identities"
    service_scope: str = "mneme:service"
    dev_token_ttl_seconds: int = Field(default=3600, ge=60)

    # --- embeddings ---------------------------------------------------------------------------
    embedding_provider: Literal["local", "openai"] = "local"
    # Size of memory.embedding; fixed when the schema is first migrated.
    embedding_dims: int = Field(default=384, ge=1, le=16000)
    embedding_local_threads: int = Field(default=2, ge=1)
    # Questions asked at the same time are embedded together, at most this many (docs).
    embedding_local_query_batch: int = Field(default=16, ge=1, le=256)
    embedding_openai_base_url: str | None = None
    embedding_openai_api_key: SecretStr | None = None
    embedding_openai_model: str = "text-embedding-3-small"
    embedding_openai_send_dimensions: bool = False
    # Send `input_type` (query / document) for servers that add the model's prompts themselves.
    embedding_openai_send_input_type: bool = False
    embedding_openai_batch_size: int = Field(default=128, ge=1)
    embedding_openai_timeout_seconds: float = Field(default=10, gt=0)
    embedding_openai_max_retries: int = Field(default=2, ge=0)
    # The model's conventions (docs/embedding-models.md): a known profile by name (unset: the
    # model's own, else a plain one), and any field of it replaced.
    embedding_profile: str | None = None
    embedding_query_prompt: str | None = Field(default=None, max_length=1000)
    embedding_document_prompt: str | None = Field(default=None, max_length=1000)
    embedding_pooling: Literal["mean", "cls"] | None = None
    # The size of the vectors the model makes, when it differs from the column's (a Matryoshka
    # model is cut to the column's size).
    embedding_native_dims: int | None = Field(default=None, ge=1, le=16000)
    embedding_matryoshka: bool | None = None
    embedding_lexical_weight: UnitIntervalText | None = None
    # An ONNX model file of the operator's for the local provider, with tokenizer.json beside
    # it; its sha256 is required and checked when it loads.
    embedding_local_model_path: Path | None = None
    embedding_local_model_sha256: str | None = Field(default=None, pattern=r"^[0-9a-fA-F]{64}$")
    # Query vectors kept in process (LRU, keyed by model and text; ~1.5 KB each at 384
    # dimensions); 0 embeds every query afresh.
    query_embedding_cache_size: int = Field(default=2048, ge=0)
    # A second embedding model the service runs beside the one above while the model changes
    # (docs/embedding-models.md, "Changing the model"): the embedding settings' fields as a JSON
    # object without the `embedding_` prefix, e.g. {"provider": "openai", "openai_model":
    # "all-mpnet-base-v2", "dims": 768}. Fields not given take their defaults, except the
    # OpenAI-compatible server's URL and key, which are the ones above unless given.
    embedding_second: dict[str, Any] | None = None
    # How often the service reads which vector column each tenant searches (a change of the
    # embedding model waits for longer than this before it relies on a change being seen).
    embedding_columns_refresh_seconds: float = Field(default=2.0, gt=0, le=60)

    # --- memories and retrieval ---------------------------------------------------------------
    # How a hybrid search fuses its two sides when the request does not say: linear weighs the
    # magnitudes (BM25 relative to the best lexical hit, the cosine as is), so a decisive match
    # on one side is not flattened to a rank as RRF does.
    search_fusion: Literal["rrf", "linear"] = "linear"
    # RRF's k: on LoCoMo k=5 gives recall@10 0.696 against 0.642 for the literature's 60
    # (docs/benchmarks.md).
    search_rrf_k: int = Field(default=5, ge=1)
    search_candidate_pool: int = Field(default=100, ge=10, le=1000)
    # Under linear fusion (the default) every lexical candidate is weighed with its own cosine,
    # read from its row, so the vector side brings only the memories near the question that the
    # lexical side missed: this many (at least a request's limit, at most the candidate pool).
    # 50 agreed with a vector pool of 100 on 0.965-0.987 of the top 10 of owners of 1k-100k
    # memories, and kept LoCoMo's recall (docs/benchmarks.md). RRF fuses ranks, which exist
    # only within a pool: it reads `search_candidate_pool` on both sides.
    search_vector_pool: int = Field(default=50, ge=10, le=1000)
    # An owner (with the organization, when searched together) holding at least this many
    # memories is searched through the impact-ordered postings: the lexical side reads the
    # top `search_postings_per_lexeme` postings of each question lexeme and scores those
    # memories exactly, instead of testing every memory (docs/benchmarks.md). Below it, or
    # until the owner's statistics are first counted in the background, search is exact.
    # From about a thousand memories the bounded path is the cheaper one (a word in most of
    # the owner's memories brings no candidates); a smaller owner's top 10 leans on memories
    # that share only such words with the question, which the bounded path leaves out.
    search_bounded_from: int = Field(default=1_000, ge=1)
    search_postings_per_lexeme: int = Field(default=1_000, ge=10, le=10_000)
    # How deep the same read goes to find the memories that hold two or more of the question's
    # lexemes: such a memory can outscore the top postings of each while sitting below them
    # in every list (a longer memory naming both words), so it goes on only where two or more
    # of the lists are longer than the top. It reads index entries, and the rows of at most
    # twice the candidate pool of such memories. At 100k memories, 5,000 took the
    # top 10's agreement with the exact ranking from 0.912 to 0.948 (docs/benchmarks.md);
    # 3,000 postings per lexeme did as much at a row read each.
    search_postings_scanned: int = Field(default=5_000, ge=10, le=100_000)
    # An owner (a user, or the organization) with at least this many memories of one kind
    # (semantic, episodic, procedural) gets an HNSW index of its own, partial to its memories of
    # that kind, built concurrently in the background by a process that has the owner role (the
    # embedded database's, or MNEME_MIGRATION_DATABASE_URL) every
    # `owner_vector_index_refresh_seconds` (0: never; `mneme owner-indexes refresh` builds them
    # on demand). Its searches walk the graphs of its own vectors only, at
    # `owner_vector_index_ef_search`, instead of sorting them all exactly (the table keeps no
    # graph of its own); a context's facts and episodes each walk their kind's. At most
    # `owner_vector_indexes_max` indexes, the largest, are kept: every index on the memory table
    # costs each write a check of its condition and the planner a look at it. An index is kept
    # until its kind holds fewer than half of `owner_vector_index_from` of the owner's memories.
    owner_vector_index_from: int = Field(default=2_000, ge=0)
    owner_vector_indexes_max: int = Field(default=100, ge=0, le=1_000)
    # A graph of one owner's memories of one kind, walked with a candidate list of at least
    # this, and at least twice the search's vector candidates (`search_vector_pool`, or the
    # candidate pool under RRF or in vector mode): twice a pool of 100 agreed with the exact
    # order as often as one walk at 400 of the owner's memories of every kind, in the same time.
    owner_vector_index_ef_search: int = Field(default=100, ge=10, le=1000)
    # The candidate list while an owner's graph is built, and while each of its writes is
    # inserted (pgvector needs at least twice the graph's 16 neighbours). On an owner of 100,000
    # natural-text memories, walks of a graph built with 64 agreed with the exact top 10 0.953
    # (facts) and 0.938 (episodes) of the time, with 100 0.970 and 0.968, with 200 0.972; from
    # 5,000 to 10,000 memories, batch writes took 1.00x the time they take without a graph at
    # 64, 1.23x at 200 (docs/benchmarks.md). An index built with another value is built again
    # beside the old one at the next refresh.
    owner_vector_index_ef_construction: int = Field(default=100, ge=32, le=1000)
    owner_vector_index_refresh_seconds: float = Field(default=600, ge=0)
    # Unset: the embedding profile's weight (its model's share against BM25), else 0.5.
    search_linear_lexical_weight: UnitIntervalText | None = None
    # How much of a memory's conversation is added to its own fused score: the best fused
    # score among its neighbours in its source thread, and the best fused score of its session
    # (source thread; its own, outside a thread).
    search_neighbour_weight: PriorWeightText = 0.5
    search_thread_weight: PriorWeightText = 0.5
    # The prior for the speaker a query names (a memory whose `speaker` is named in the query),
    # on the fused scale: "what did Ada say about X" is most often answered by Ada's words.
    search_speaker_weight: PriorWeightText = 0.5
    # The prior for the time a query names ("on 7 May 2023", "last June"): the memories that
    # happened then, on the fused scale. 1, not 0.5 as the other priors: the time's words are
    # not matched as words, so "what did I do on 7 May 2026?" has little else to rank by, and
    # at 0.5 a memory of that day ranked below any memory whose own match was half as good
    # again as its own (at 1: three times as good). On LoCoMo's 182 questions that name a time,
    # R@1 is 0.396 at 0.5, 0.440 at 1 and 0.451 at 2, where R@10 falls (docs/benchmarks.md).
    search_date_weight: PriorWeightText = 1.0
    search_recency_weight: UnitIntervalText = 0.2
    search_confidence_weight: UnitIntervalText = 0.2
    # Recency half-lives per kind, in days; 0 = never fades. Facts (semantic) go stale and are
    # superseded, so the newer one should win; an episode is the record of something that
    # happened at its event time and stays as true and as relevant to a question about it
    # however old it is (decaying episodes lost recall on conversations of the recent past),
    # as do standing instructions.
    half_life_semantic_days: float = Field(default=120, ge=0)
    half_life_episodic_days: float = Field(default=0, ge=0)
    half_life_procedural_days: float = Field(default=0, ge=0)
    # An optional reranking service (docs/embedding-models.md, "Reranking"): the first
    # `rerank_top_n` fused candidates of a search are sent to `rerank_url` and ordered by its
    # scores. `rerank_api` is the shape of the request and answer: `cohere` (Cohere v2, Jina,
    # vLLM, Infinity: `documents` → `results[].relevance_score`), `voyage` (`documents` →
    # `data[].relevance_score`) or `tei` (`texts` → `[{index, score}]`). A reranker that fails
    # or is slower than the timeout leaves the fused order.
    rerank_url: AnyHttpUrl | None = None
    rerank_api: Literal["cohere", "voyage", "tei"] = "cohere"
    rerank_api_key: SecretStr | None = None
    rerank_model: str | None = Field(default=None, max_length=200)
    rerank_top_n: int = Field(default=30, ge=1, le=300)
    rerank_timeout_seconds: float = Field(default=2, gt=0, le=60)
    hnsw_ef_search: int = Field(default=100, ge=10, le=1000)
    # pgvector's iterative index scan (≥ 0.8) when a filtered search walks an owner's own HNSW
    # index (a filter that passes part of a kind): keep scanning the graph until `pool` rows
    # pass the filter, or `hnsw_max_scan_tuples` tuples were visited.
    hnsw_iterative_scan: Literal["off", "relaxed_order", "strict_order"] = "relaxed_order"
    hnsw_max_scan_tuples: int = Field(default=20_000, ge=1)

    # --- profiles -----------------------------------------------------------------------------
    # Largest stored profile document, in bytes of its compact UTF-8 JSON (8 KiB: the profile
    # is rendered into prompts, so it stays small).
    profile_max_bytes: int = Field(default=8192, ge=2)

    # --- LLM (summaries, extraction): any OpenAI-compatible chat endpoint; unset = off -------
    llm_base_url: str | None = None
    llm_api_key: SecretStr | None = None
    llm_model: str = "gpt-4o-mini"
    llm_timeout_seconds: float = Field(default=30, gt=0)
    llm_max_retries: int = Field(default=2, ge=0)

    # --- context ---------------------------------------------------------------------------------
    context_budget_tokens: int = Field(default=1200, ge=CONTEXT_BUDGET_MIN_TOKENS, le=32_000)

    # --- threads --------------------------------------------------------------------------------
    # K: summarise in windows of K messages; below 1 switches summaries off.
    thread_summary_keep_recent: int = 10
    # Human turns always kept raw at the end of a prompt window.
    thread_messages_buffer_recent_turns: int = Field(default=5, ge=0)
    # The most raw messages `GET …/threads/{id}/window` returns unless the request asks for a
    # number (`max_messages`): the newest of the window. Without summaries the window is the
    # whole thread, and a response (and its read) would otherwise grow with the conversation.
    thread_window_max_messages: int = Field(default=200, ge=1, le=1000)

    # --- background jobs --------------------------------------------------------------------------
    jobs_enabled: bool = True
    job_max_attempts: int = Field(default=5, ge=1)
    # Wait after a job's first failed run; it doubles after each further failure (≤ 5 minutes).
    job_retry_initial_delay_seconds: float = Field(default=2, gt=0)
    # New jobs wake the worker at once (LISTEN/NOTIFY); retries that waited out their backoff
    # are found by polling this often.
    job_poll_interval_seconds: float = Field(default=10, gt=0)

    # --- extraction (the write path: memories from conversation turns) ------------------------
    # Switches the automatic write path off (LLM extraction, or turn storage without an LLM).
    extraction_enabled: bool = True
    # When a thread's new turns are worth an extraction pass: after every turn, every N turns,
    # on a farewell, or both of the last two.
    extraction_strategy: Literal["every_turn", "interval", "farewell", "both"] = "interval"
    # `interval`: a pass once this many human turns arrived since the last pass.
    extraction_interval_turns: int = Field(default=5, ge=1)
    # `farewell`: a pass when a new human message contains one of these (case-insensitive).
    extraction_farewell_phrases: list[str] = [
        "goodbye",
        "that's all for now",
        "talk later",
        "see you",
        "catch you later",
    ]
    # No pass over fewer characters of conversation than this (they wait for more).
    extraction_min_conversation_chars: int = Field(default=20, ge=0)
    # At most this many facts per human turn, so one turn cannot flood the memory.
    extraction_max_facts_per_turn: int = Field(default=3, ge=0)
    # Below 0.7 a fact is dropped, below 0.82 it waits for review (`proposed`).
    extraction_fact_confidence_threshold: float = Field(default=0.7, ge=0, le=1)
    extraction_quarantine_confidence: float = Field(default=0.82, ge=0, le=1)
    # A fact this close (cosine) to a live one of the same owner is the same fact again.
    extraction_near_duplicate_cosine: float = Field(default=0.92, gt=0, le=1)
    # The fixed category set and how a new fact combines with older ones of its category.
    extraction_category_modes: dict[str, Literal["replace", "merge", "accumulate"]] = {
        "preference": "replace",
        "behavior": "replace",
        "correction": "replace",
        "goal": "merge",
        "knowledge": "merge",
        "context": "accumulate",
        "policy": "replace",
    }
    # A fact of a `replace` category this close (cosine) to a live one of the same category,
    # when either lacks a subject, states the same thing differently: it supersedes it.
    extraction_contradiction_cosine: float = Field(default=0.75, gt=0, le=1)
    # Subjects that hold several current values at once: a new fact about one of them adds
    # to the older ones instead of superseding them. A subject is multi-valued when one of its
    # snake_case words is listed in the plural ("pets", "languages_spoken"), or in the singular
    # ("language", "food_allergy") unless a word of `..._single_choice_words` picks one value
    # ("response_language", "favorite_instrument": those replace each other).
    extraction_multi_valued_subjects: list[str] = [
        "hobby",
        "pet",
        "language",
        "skill",
        "interest",
        "allergy",
        "child",
        "friend",
        "sport",
        "instrument",
    ]
    # Words that make a subject about a multi-valued topic, named in the singular, one choice
    # with one current value: the language answers are in, the favourite instrument.
    extraction_single_choice_words: list[str] = [
        "preferred",
        "favorite",
        "favourite",
        "primary",
        "main",
        "native",
        "default",
        "response",
        "reply",
        "answer",
        "ui",
        "interface",
        "display",
    ]
    # A write-path or summary job that gave up is run again after this long, doubling for
    # each further give-up on the same thread (at most `..._max_seconds`).
    write_path_sweep_interval_seconds: float = Field(default=300, gt=0)
    write_path_sweep_max_backoff_seconds: float = Field(default=6 * 3600, gt=0)
    # Categories an organization-wide fact may have (the org allowlist).
    extraction_org_categories: list[str] = ["policy", "knowledge", "context"]
    # Current facts (hybrid search) the model sees, so it can refer to them by id.
    extraction_context_facts: int = Field(default=20, ge=0, le=100)
    # Most messages one model call reads; a longer backlog is processed in several calls.
    extraction_max_window_messages: int = Field(default=40, ge=2, le=500)
    # Most facts one compaction reads.
    compaction_max_facts: int = Field(default=200, ge=2, le=500)

    # --- http ---------------------------------------------------------------------------------
    max_request_bytes: int = Field(default=1_048_576, ge=1024)
    # How long a client may take over its request (`mneme serve`): the request line and headers
    # from their first byte, the body between one part and the next. A client that stops
    # midway gets a 408 and its connection is closed, instead of holding it (and the request
    # waiting for its body) for as long as it stays connected. The same time bounds a client
    # that reads nothing of an answer larger than the connection's buffers: it is dropped.
    request_read_timeout_seconds: float = Field(default=30, gt=0, le=3600)
    # Per principal (tenant + user, or API key); the tenant ceiling caps all its principals.
    rate_limit_default: str = "600/minute"
    rate_limit_tenant: str = "6000/minute"
    rate_limit_enabled: bool = True
    # memory:// counts per process; redis://host:6379/0 shares the counters across replicas.
    rate_limit_storage_uri: str = "memory://"
    # Failed authentications allowed per client address (`limits` syntax) before further
    # failures from it are answered 429 instead of 401; a valid credential is never refused by
    # it. Counted in the same store as the rate limits (shared by the replicas on Redis).
    auth_failure_limit: str = "30/minute"
    # The proxies in front of the service whose X-Forwarded-For / X-Forwarded-Proto headers are
    # believed (comma-separated addresses or CIDR networks, e.g. an ingress controller's pod
    # network). The client address is then the last X-Forwarded-For entry that is not one of
    # them; from any other peer the headers are ignored. Empty: believe no peer.
    trusted_proxies: str = "127.0.0.1"
    # What every replay of a raw thread message into a prompt does with a secret found in it
    # (the window, a context block, and the prompts of summary and extraction passes sent to
    # the chat model): `mask` replaces it with a placeholder, `keep` replays messages exactly
    # as they were sent. Messages are always stored as sent (the user's own record of the
    # conversation). See `service.threads.replay`.
    message_secrets_on_replay: Literal["mask", "keep"] = "mask"

    # --- telemetry ----------------------------------------------------------------------------
    # Where spans go. Unset: the standard OTEL_TRACES_EXPORTER / OTEL_SDK_DISABLED (and nothing
    # when neither is set); the exporter's own settings are the standard OTEL_EXPORTER_OTLP_*.
    otel_exporter: Literal["none", "console", "otlp"] | None = None
    # Unset: OTEL_SERVICE_NAME, or "mneme".
    otel_service_name: str | None = None

    # --- the Memory page (/memory) -------------------------------------------------------------
    # OIDC sign-in from the browser (authorization code + PKCE, public client). The page reads
    # the issuer's `.well-known/openid-configuration` itself; unset issuer = no OIDC button.
    web_oidc_issuer: str | None = None
    web_oidc_client_id: str | None = None
    web_oidc_scopes: str = "openid profile email"
    # Which token of the token response the page sends to the API as its bearer token: the
    # one whose audience and claims MNEME_JWT_* are configured to accept.
    web_oidc_token: Literal["access_token", "id_token"] = "access_token"  # noqa: S105 - a field name
    # The page's Content-Security-Policy lets it connect to its own origin and the issuer's;
    # a provider whose token endpoint is on another host (a JSON list of URLs) is added here.
    web_oidc_connect_origins: list[AnyHttpUrl] = []

    @field_validator(
        "jwt_hs256_secret",
        "jwks_url",
        "database_url",
        "migration_database_url",
        "embedding_openai_api_key",
        "llm_api_key",
        "llm_base_url",
        "rerank_url",
        "rerank_api_key",
        "rerank_model",
        "web_oidc_issuer",
        "web_oidc_client_id",
        mode="before",
    )
    @classmethod
    def _empty_means_unset(cls, value: object) -> object:
        # `MNEME_JWT_HS256_SECRET=` in an env file must switch the feature off, not set "".
        return None if value == "" else value

    @field_validator(
        "jwt_algorithms",
        "embedding_second",
        "extraction_farewell_phrases",
        "extraction_category_modes",
        "extraction_multi_valued_subjects",
        "extraction_single_choice_words",
        "extraction_org_categories",
        "web_oidc_connect_origins",
        mode="before",
    )
    @classmethod
    def _decoded_json(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise SettingRefused(f"is not valid JSON ({exc.msg} at character {exc.pos})") from None

    @field_validator("embedding_second")
    @classmethod
    def _second_model_fields(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        # Each field is held to the rule of its MNEME_EMBEDDING_* setting: the same model is
        # described either way, and a field the settings do not have is a typo.
        if value is None:
            return None
        try:
            given = _second_model_settings().model_validate(value)
        except ValidationError as invalid:
            raise SettingRefused(
                "; ".join(
                    _second_field_problem(problem, list(value)) for problem in invalid.errors()
                )
            ) from None
        # The fields given, as their settings read them (a number given as text is a number,
        # an API key a secret that no repr of the settings shows).
        checked: dict[str, Any] = given.model_dump(exclude_unset=True)
        return checked

    @field_validator("database_url", "migration_database_url")
    @classmethod
    def _database_url_shape(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            _url_refused(
                value.get_secret_value(),
                DATABASE_URL_SCHEMES,
                "postgresql://user:password@host:port/database",
                needs_host=False,
            )
        return value

    @field_validator("jwks_url")
    @classmethod
    def _jwks_url_shape(cls, value: str | None) -> str | None:
        if value is not None:
            _url_refused(
                value, ("https", "http"), "https://host/path/to/jwks.json", needs_host=True
            )
        return value

    @field_validator("jwt_algorithms")
    @classmethod
    def _algorithms_are_verified(cls, value: list[str] | None) -> list[str] | None:
        # A name the verifier does not know would accept no token, silently; `none` would
        # accept any, and is never taken. Entries are told by their place: a value in the
        # wrong variable may be a secret.
        if value is None:
            return None
        if not value:
            raise SettingRefused(
                "names no algorithm; leave it unset to accept those of the keys configured"
            )
        for position, name in enumerate(value, start=1):
            if name.lower() == "none":
                raise SettingRefused(
                    f"entry {position} of {len(value)} is none: unsigned tokens are never accepted"
                )
            if name not in SECRET_ALGORITHMS + JWKS_ALGORITHMS:
                raise SettingRefused(
                    f"entry {position} of {len(value)} is not an algorithm the service "
                    f"verifies: {', '.join(SECRET_ALGORITHMS)} (with MNEME_JWT_HS256_SECRET), "
                    f"{', '.join(JWKS_ALGORITHMS)} (with MNEME_JWKS_URL)"
                )
        return value

    @field_validator("dev_token_ttl_seconds")
    @classmethod
    def _dev_tokens_expire_when_the_service_can_read_it(cls, value: int) -> int:
        # The verifier refuses an `exp` past the year 9999: a longer lifetime would mint
        # tokens that every request refuses.
        latest = LATEST_NUMERIC_DATE - int(time.time())
        if value > latest:
            raise SettingRefused(
                f"Input should be at most {latest} seconds now: a token must expire by "
                "9999-12-31T23:59:59Z, the latest 'exp' the service accepts"
            )
        return value

    @field_validator("log_level", mode="before")
    @classmethod
    def _level_in_any_case(cls, value: object) -> object:
        # Python's own spelling (INFO) names the same level.
        return value.lower() if isinstance(value, str) else value

    @field_validator("rate_limit_default", "rate_limit_tenant", "auth_failure_limit")
    @classmethod
    def _limit_parses(cls, value: str) -> str:
        # Refuse a typo at start-up rather than on the first request that needs the limit.
        try:
            limits.parse(value)
        except ValueError:
            raise SettingRefused(
                "is not a rate limit: an amount per unit of time, e.g. 600/minute"
            ) from None
        return value

    @field_validator("rate_limit_storage_uri")
    @classmethod
    def _limit_storage_opens(cls, value: str) -> str:
        # Opened by the app only as it is built, in each worker: a URI it cannot read would
        # stop every one of them with limits' error, which quotes the URI and its password.
        from service.kit.limit_storage import unusable_storage

        problem = unusable_storage(value)
        if problem is not None:
            raise SettingRefused(problem)
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies_are_networks(cls, value: str) -> str:
        # A wildcard would let every client name its own address in X-Forwarded-For (and so
        # step out of the failed-authentication limit); a typo would silently trust nobody.
        entries = _split_list(value)
        for position, entry in enumerate(entries, start=1):
            if entry == "*":
                raise SettingRefused(
                    "must name the proxies (addresses or CIDR networks), not *: "
                    "a wildcard lets any client choose its own address"
                )
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise SettingRefused(
                    f"entry {position} of {len(entries)} is not an address or CIDR network"
                ) from None
        return value

    @property
    def accepted_jwt_algorithms(self) -> list[str]:
        """The algorithms a token may be signed with: `jwt_algorithms`, else those of the
        keys configured (HS256 with the secret; RS256 and ES256 with a JWKS URL)."""
        if self.jwt_algorithms is not None:
            return self.jwt_algorithms
        secret = list(SECRET_ALGORITHMS) if self.jwt_hs256_secret is not None else []
        jwks = list(DEFAULT_JWKS_ALGORITHMS) if self.jwks_url is not None else []
        return secret + jwks

    @property
    def trusted_proxy_networks(self) -> list[str]:
        return _split_list(self.trusted_proxies)

    @property
    def effective_log_format(self) -> Literal["json", "text"]:
        if self.log_format is not None:
            return self.log_format
        return "text" if self.is_dev else "json"

    @property
    def uses_embedded_database(self) -> bool:
        return self.database_url is None

    @property
    def llm_configured(self) -> bool:
        return self.llm_base_url is not None or self.llm_api_key is not None

    @property
    def is_dev(self) -> bool:
        return self.env == "dev"

    @model_validator(mode="after")
    def _extraction_settings_agree(self) -> Settings:
        if self.extraction_quarantine_confidence < self.extraction_fact_confidence_threshold:
            raise SettingRefused(
                "MNEME_EXTRACTION_QUARANTINE_CONFIDENCE must not be below "
                "MNEME_EXTRACTION_FACT_CONFIDENCE_THRESHOLD"
            )
        categories = set(self.extraction_category_modes)
        refused = sum(
            1
            for c in categories | set(self.extraction_org_categories)
            if not _CATEGORY.fullmatch(c) or c in RESERVED_CATEGORIES
        )
        if refused:
            raise SettingRefused(
                "MNEME_EXTRACTION_CATEGORY_MODES / MNEME_EXTRACTION_ORG_CATEGORIES: categories "
                "are lower-case names of letters, digits and . _ -, at most 64 characters, "
                f"not {' or '.join(sorted(RESERVED_CATEGORIES))}; {refused} of them are not"
            )
        if not categories:
            raise SettingRefused("MNEME_EXTRACTION_CATEGORY_MODES needs at least one category")
        unknown = sorted(set(self.extraction_org_categories) - categories)
        if unknown:
            raise SettingRefused(
                f"MNEME_EXTRACTION_ORG_CATEGORIES names {len(unknown)} categories that are not "
                "in MNEME_EXTRACTION_CATEGORY_MODES"
            )
        return self

    @model_validator(mode="after")
    def _postings_scanned_reach_past_the_top(self) -> Settings:
        if self.search_postings_scanned < self.search_postings_per_lexeme:
            raise SettingRefused(
                "MNEME_SEARCH_POSTINGS_SCANNED must be at least "
                "MNEME_SEARCH_POSTINGS_PER_LEXEME: the top postings of a lexeme are part of "
                "what is scanned"
            )
        return self

    @property
    def requests_in_progress_limit(self) -> int:
        """`max_requests_in_progress`, or its default from the pool's size."""
        if self.max_requests_in_progress is not None:
            return self.max_requests_in_progress
        return 2 * (self.db_pool_size + self.db_max_overflow)

    @model_validator(mode="after")
    def _owner_indexes_are_found_by_bounded_searches(self) -> Settings:
        # The indexes are built for the owners the search statistics count, at the bounded
        # size: an index of an owner below it would be built, checked on every write, and
        # rarely worth a walk.
        if 0 < self.owner_vector_index_from < self.search_bounded_from:
            raise SettingRefused(
                "MNEME_OWNER_VECTOR_INDEX_FROM must be 0 (no owner indexes) or at least "
                "MNEME_SEARCH_BOUNDED_FROM: an owner's index is read by the searches that "
                "use its search statistics"
            )
        return self

    @model_validator(mode="after")
    def _embedding_models_can_run(self) -> Settings:
        # A model no embedder can run stops every command here, naming its setting, rather
        # than the service once its database has started.
        from service.providers.embedder import (
            embedder_config_from_settings,
            embedding_setting_name,
            second_embedder_config,
        )
        from service.providers.profiles import EmbeddingSettingsRefused

        for second in (False, True):
            try:
                config = (
                    second_embedder_config(self) if second else embedder_config_from_settings(self)
                )
                if config is not None:
                    config.check()
            except EmbeddingSettingsRefused as refused:
                raise SettingRefused(
                    f"{embedding_setting_name(refused.field, second=second)}: {refused}"
                ) from None
        return self

    @model_validator(mode="after")
    def _algorithms_have_their_keys(self) -> Settings:
        # An algorithm listed without its key verifies no token: in prod that is a service
        # that accepts none of the tokens it was told to, in dev a setting that does nothing.
        for name in self.jwt_algorithms or []:
            if name in SECRET_ALGORITHMS and self.jwt_hs256_secret is None:
                raise SettingRefused(
                    f"MNEME_JWT_ALGORITHMS lists {name}, which needs MNEME_JWT_HS256_SECRET "
                    "(unset): set the secret or leave the algorithm out"
                )
            if name in JWKS_ALGORITHMS and self.jwks_url is None:
                raise SettingRefused(
                    f"MNEME_JWT_ALGORITHMS lists {name}, which needs MNEME_JWKS_URL (unset): "
                    "set the identity provider's key set or leave the algorithm out"
                )
        return self

    @model_validator(mode="after")
    def _refuse_default_secrets_outside_dev(self) -> Settings:
        # The embedded database is refused outside dev by what would start it (the commands
        # that use a database), not here: `mneme token` then says that dev tokens are for dev.
        if self.env == "dev":
            return self
        secret = self.jwt_hs256_secret.get_secret_value() if self.jwt_hs256_secret else None
        if secret is not None and (secret == DEV_DEFAULT_SECRET or len(secret) < 32):
            raise SettingRefused(
                "MNEME_JWT_HS256_SECRET is the dev default or shorter than 32 characters; "
                "set a strong secret or unset it (MNEME_JWT_HS256_SECRET=) and use MNEME_JWKS_URL"
            )
        if secret is None and self.jwks_url is None:
            raise SettingRefused(
                "outside dev mode set MNEME_JWKS_URL or a strong MNEME_JWT_HS256_SECRET"
            )
        return self


@cache
def _second_model_settings() -> type[BaseModel]:
    """The fields `embedding_second` may hold, each with its MNEME_EMBEDDING_* setting's own
    type and bounds, and no other."""
    from service.providers.embedder import EmbedderConfig

    prefix = "embedding_"
    fields = {
        config_field.name: (
            Settings.model_fields[prefix + config_field.name].annotation,
            Settings.model_fields[prefix + config_field.name],
        )
        for config_field in dataclasses.fields(EmbedderConfig)
    }
    model: type[BaseModel] = create_model(  # type: ignore[call-overload]
        "SecondEmbeddingModel", __config__=ConfigDict(extra="forbid"), **fields
    )
    return model


def _second_field_problem(problem: ErrorDetails, given: list[str]) -> str:
    """One problem of `embedding_second`'s object (whose keys are `given`), naming its field:
    a known one by its name, another by its place (a key typed in the wrong place may be a
    secret, as a value may)."""
    field = str(problem["loc"][0]) if problem["loc"] else ""
    if problem["type"] == "extra_forbidden":
        place = given.index(field) + 1 if field in given else 0
        return (
            f"field {place} of {len(given)} is not an embedding setting (the fields are the "
            "MNEME_EMBEDDING_* settings' names, lower case, without the prefix)"
        )
    return f"{field}: {_problem_text(problem)}"


@lru_cache
def get_settings() -> Settings:
    return Settings()


def settings_problems(
    invalid: ValidationError, names: Mapping[str, str] | None = None
) -> list[str]:
    """What is wrong with the settings, one line each, naming the variable (or the command-line
    option `names` gives for a setting) and never showing the value given."""
    lines = []
    for problem in invalid.errors(include_url=False):
        location = problem["loc"]
        said = _problem_text(problem)
        if not location:
            lines.append(said)
            continue
        setting = str(location[0])
        name = (names or {}).get(setting, f"MNEME_{setting.upper()}")
        lines.append(f"{name}: {said}")
    return lines


def _problem_text(problem: ErrorDetails) -> str:
    """The rule a setting broke, in words that do not repeat its value. pydantic's own checks
    state the rule (a type, a bound, the choices) without the input; a validator's text is
    shown when it is a `SettingRefused` (written not to repeat it) or when the value given was
    a number, and otherwise replaced: a library's message may quote a URL with its password."""
    text = problem["msg"]
    if problem["type"] not in ("value_error", "assertion_error"):
        return text
    text = text.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    error = problem.get("ctx", {}).get("error")
    if isinstance(error, SettingRefused) or _is_number(problem["input"]):
        return text
    return "is not a valid value"


def _is_number(value: object) -> bool:
    if isinstance(value, int | float):
        return True
    try:
        float(str(value))
    except ValueError:
        return False
    return True
