"""`/metrics` after a scenario: the domain metrics are there, there are no `_created` series,
and every label value comes from a small known set — never a user id, tenant or free text."""

from __future__ import annotations

import re
from pathlib import Path

from httpx import AsyncClient
from prometheus_client.parser import text_string_to_metric_families

from service.config import Settings
from service.jobs import THREAD_SUMMARY_JOB, WRITE_PATH_JOBS
from service.providers.local_embedder import MODEL_NAME
from tests.conftest import bearer

NUMBER = re.compile(r"^(\+Inf|-?[0-9.e+-]+)$")
CLASS_NAME = re.compile(r"^[A-Z][A-Za-z0-9]{2,40}$")

ALLOWED: dict[str, set[str] | re.Pattern[str]] = {
    "method": {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"},
    "status": re.compile(r"^[1-5][0-9][0-9]$"),
    # Refused credentials; a reranker that gave no usable scores; a request refused as busy.
    "reason": {
        "standing_queue",
        "waited_too_long",
        "pool_timeout",
        "missing",
        "invalid",
        "limited",
        "timeout",
        "unreachable",
        "error_status",
        "bad_answer",
    },
    "purpose": {"query", "document"},
    # Model names come from the settings, not from requests; the domain metrics are
    # process-wide, so other tests' stand-in models appear here too.
    # A vector space names its model, a shortened size (`@384`) and a prompt digest (`+prompt-…`).
    "model": re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,100}$"),
    # An exception class name, or `invalid_output` for a model reply that could not be used.
    "error_type": re.compile(rf"{CLASS_NAME.pattern}|^invalid_output$"),
    "stage": {"fusion_query", "mmr", "rerank"},
    "mode": {"hybrid", "lexical", "vector"},
    "measure": {"used", "budget"},
    # Job kinds are the entrypoints registered in code (the job tests register their own).
    "kind": re.compile(r"^[a-z][a-z0-9_]{0,40}$"),
    "outcome": {"ok", "retry", "failed", "interrupted", "error"},
    "direction": {"input", "output"},
    "state": {"in_use", "idle", "overflow", "queued", "picked"},
    "le": NUMBER,
    # Prometheus' own process and interpreter collectors.
    "implementation": re.compile(r"^[A-Za-z]{1,20}$"),
    "major": re.compile(r"^[0-9]{1,3}$"),
    "minor": re.compile(r"^[0-9]{1,3}$"),
    "patchlevel": re.compile(r"^[0-9]{1,3}$"),
    "version": re.compile(r"^[0-9][0-9A-Za-z.+-]{0,30}$"),
    "generation": {"0", "1", "2"},
}


async def test_every_label_value_is_from_a_known_set_and_no_created_series(
    traced_client: AsyncClient, settings: Settings, tenant: str
) -> None:
    client = traced_client
    user = "user-4471-label-probe"
    headers = bearer(settings, tenant, user)
    await client.post("/v1/users/me/memories", headers=headers, json={"text": "likes tea"})
    for mode in ("hybrid", "lexical", "vector"):
        response = await client.post(
            "/v1/users/me/memories/search",
            headers=headers,
            json={"query": "tea", "mode": mode, "mmr_lambda": 0.5},
        )
        assert response.status_code == 200
    await client.post("/v1/users/me/context", headers=headers, json={"query": "tea"})
    await client.get(f"/v1/users/{user}/memories/not-a-uuid", headers=headers)
    await client.get("/v1/users/me/memories", headers={"Authorization": "Bearer nonsense"})
    await client.get(f"/no/such/path/{user}")
    # The MCP endpoint and its OAuth metadata are plain routes beside the API's.
    await client.post("/mcp", json={})
    await client.get("/.well-known/oauth-protected-resource/mcp")

    exposition = (await client.get("/metrics")).text
    families = {family.name: family for family in text_string_to_metric_families(exposition)}
    mcp_routes = {"/mcp", "/.well-known/oauth-protected-resource/mcp"}
    routes = set((await client.get("/openapi.json")).json()["paths"]) | {"<unmatched>"} | mcp_routes

    for family in families.values():
        for sample in family.samples:
            assert not sample.name.endswith("_created"), sample.name
            for label, value in sample.labels.items():
                assert user not in value and tenant not in value, (sample.name, label, value)
                if label == "route":
                    assert value in routes, (sample.name, value)
                    continue
                assert label in ALLOWED, f"{sample.name}: label {label!r} has no allow-list"
                allowed = ALLOWED[label]
                ok = allowed.match(value) if isinstance(allowed, re.Pattern) else value in allowed
                assert ok, (sample.name, label, value)

    for name in (
        "mneme_http_requests",
        "mneme_embedding_duration_seconds",
        "mneme_embedding_batch_size",
        "mneme_search_stage_duration_seconds",
        "mneme_search_candidates",
        "mneme_context_tokens",
        "mneme_job_queue_depth",
        "mneme_job_oldest_queued_age_seconds",
        "mneme_db_pool_connections",
        "mneme_auth_failures",
        "mneme_event_loop_lag_seconds",
        "process_resident_memory_bytes",
        "process_open_fds",
        "python_gc_objects_collected",
    ):
        assert name in families, name
    # What an operator reads about the scrape covers every series it holds.
    documented = (Path(__file__).parents[2] / "docs" / "operating.md").read_text()
    assert not sorted(name for name in families if f"`{name}" not in documented)
    counted_routes = {s.labels["route"] for s in families["mneme_http_requests"].samples}
    assert mcp_routes <= counted_routes, counted_routes
    stage_modes = {
        (s.labels["stage"], s.labels["mode"])
        for s in families["mneme_search_stage_duration_seconds"].samples
    }
    assert {
        ("fusion_query", "hybrid"),
        ("fusion_query", "lexical"),
        ("mmr", "vector"),
    } <= stage_modes
    models = {
        s.labels["model"]
        for s in families["mneme_embedding_duration_seconds"].samples
        if "model" in s.labels
    }
    assert MODEL_NAME in models
    kinds = {s.labels["kind"] for s in families["mneme_job_queue_depth"].samples}
    assert {THREAD_SUMMARY_JOB, *WRITE_PATH_JOBS} <= kinds
