"""Property tests of the API under generated values of the shared input types (times in any
offset and year, numbers from subnormal to beyond a double, free-form JSON, identifiers, query
text): never a 5xx; a refusal stores nothing; what is stored reads back as it was sent."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import quote

from httpx import AsyncClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.config import Settings
from tests.conftest import bearer, new_tenant

EXAMPLES = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

offsets = st.integers(min_value=-24 * 60 + 1, max_value=24 * 60 - 1).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)
aware_times = st.builds(
    lambda moment, tz: moment.replace(tzinfo=tz).isoformat(),
    st.one_of(
        st.sampled_from([datetime(1, 1, 1), datetime(9999, 12, 31, 23, 59, 59, 999999)]),
        st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)),
    ),
    offsets,
)
time_texts = st.one_of(
    aware_times,
    st.datetimes().map(datetime.isoformat),  # naive
    st.sampled_from(["yesterday", "infinity", "4000-01-01 BC", "200000-01-01T00:00:00Z", ""]),
)
numbers = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.integers(min_value=-(10**20), max_value=10**20).map(str),
    st.sampled_from(["1e400", "-1e400", "5e-324", "1e-300", "1e-6", "0", "1", "9" * 4400]),
)
json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
json_texts = st.recursive(
    json_leaves,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
).map(json.dumps)
metadata_texts = st.one_of(
    st.dictionaries(st.text(max_size=5), json_texts, max_size=3).map(
        lambda d: "{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in d.items()) + "}"
    ),
    numbers.map(lambda n: '{"n": ' + n + "}"),
    st.integers(min_value=1, max_value=120).map(lambda n: '{"k": ' * n + "{}" + "}" * n),
    json_texts,
)


def _as_floats(value: Any) -> Any:
    """JSON numbers compared as numbers (jsonb writes a large double as an integer)."""
    if isinstance(value, dict):
        return {k: _as_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_floats(v) for v in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return value


@EXAMPLES
@given(event_at=time_texts, confidence=numbers, metadata=metadata_texts)
async def test_a_memory_is_refused_storing_nothing_or_stored_and_read_back(
    client: AsyncClient, settings: Settings, event_at: str, confidence: str, metadata: str
) -> None:
    headers = bearer(settings, new_tenant(), "ada")
    body = (
        f'{{"text": "a memory", "event_at": {json.dumps(event_at)}, '
        f'"confidence": {confidence}, "metadata": {metadata}}}'
    )

    response = await client.post(
        "/v1/users/me/memories",
        content=body.encode(),
        headers={**headers, "content-type": "application/json"},
    )

    assert response.status_code in (201, 422), response.text
    listing = await client.get("/v1/users/me/memories", headers=headers)
    assert listing.status_code == 200, listing.text
    if response.status_code == 422:
        assert listing.json()["items"] == []
        return
    [stored] = listing.json()["items"]
    sent = json.loads(body)
    assert datetime.fromisoformat(stored["event_at"]) == datetime.fromisoformat(event_at), body
    assert stored["confidence"] == float(sent["confidence"])
    assert _as_floats(stored["metadata"]) == _as_floats(sent["metadata"])


@EXAMPLES
@given(value=time_texts, name=st.sampled_from(["active_after", "active_before", "since", "until"]))
async def test_an_admin_time_filter_is_answered_or_refused(
    client: AsyncClient, settings: Settings, value: str, name: str
) -> None:
    admin = bearer(settings, new_tenant(), "root", admin=True)
    path = "/v1/admin/users" if name.startswith("active") else "/v1/admin/audit"
    response = await client.get(path, params={name: value}, headers=admin)
    assert response.status_code in (200, 422), response.text


weights = st.one_of(
    st.floats(min_value=0, max_value=1),
    st.sampled_from([5e-324, 1e-300, 1e-7, 1e-6, 0.0, 1.0]),
)


@EXAMPLES
@given(
    recency=weights,
    confidence=weights,
    lexical=weights,
    stored_confidence=weights,
    mode=st.sampled_from(["lexical", "hybrid"]),
)
async def test_a_search_with_any_weights_ranks_or_is_refused(
    client: AsyncClient,
    settings: Settings,
    recency: float,
    confidence: float,
    lexical: float,
    stored_confidence: float,
    mode: str,
) -> None:
    headers = bearer(settings, new_tenant(), "ada")
    memory = {
        "text": "green tea in Kyoto",
        "event_at": "0001-01-01T00:00:00.000001Z",
        "confidence": stored_confidence,
    }
    created = await client.post("/v1/users/me/memories", json=memory, headers=headers)
    assert created.status_code in (201, 422), created.text
    response = await client.post(
        "/v1/users/me/memories/search",
        json={
            "query": "green tea",
            "mode": mode,
            "fusion": "linear",
            "recency_weight": recency,
            "confidence_weight": confidence,
            "linear_lexical_weight": lexical,
        },
        headers=headers,
    )
    assert response.status_code in (200, 422), response.text


identifier_texts = st.text(
    st.sampled_from("ab9._:@|+=-\n\r\t %/\u00e9"), min_size=1, max_size=8
).filter(lambda user: user not in {".", ".."})  # dot segments: the client resolves them away


@EXAMPLES
@given(user=identifier_texts)
async def test_any_user_id_in_a_path_is_a_user_or_not_found(
    client: AsyncClient, settings: Settings, user: str
) -> None:
    service = bearer(settings, new_tenant(), "agent", service=True)
    url = f"/v1/users/{quote(user, safe='')}/memories"
    written = await client.post(url, json={"text": "a fact"}, headers=service)
    assert written.status_code in (201, 404), written.text
    listed = await client.get(url, headers=service)
    assert listed.status_code in (200, 404), listed.text
    if written.status_code == 201:
        assert [m["user_id"] for m in listed.json()["items"]] == [user]
