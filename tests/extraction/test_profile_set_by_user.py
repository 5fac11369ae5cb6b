"""Profile keys set through the API are the writer's: extraction sets and updates the keys it
set itself, and leaves a key whose value the user (or an admin, or a service) set."""

from __future__ import annotations

from typing import Any

from httpx import AsyncClient

from service.config import Settings
from tests.conftest import bearer
from tests.extraction.conftest import say, wait_for_passes
from tests.fixtures.factories import start_thread
from tests.fixtures.openai_server import FakeOpenAIServer, RecordedRequest, Reply, extraction

PATCH = {"content-type": "application/json-patch+json"}


def _profile_answers(answers: dict[str, list[tuple[str, str]]]) -> Any:
    """A model that proposes, for the turn holding a marker, its profile values."""

    def reply(request: RecordedRequest) -> Reply:
        new = request.user.split("## New messages", 1)[-1]
        [marker] = [m for m in answers if m in new]
        return extraction(
            profile=[
                {"key": key, "value": value, "confidence": 0.95, "evidence": marker}
                for key, value in answers[marker]
            ]
        )

    return reply


async def test_extraction_does_not_overwrite_a_profile_key_the_user_set(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ola")
    patched = await llm_client.patch(
        "/v1/users/me/profile",
        headers={**headers, **PATCH},
        json=[{"op": "add", "path": "/timezone", "value": "Europe/Berlin"}],
    )
    assert patched.status_code == 200, patched.text
    fresh_llm.reply = _profile_answers(
        {
            "OLA1": [("timezone", "UTC"), ("home_city", "Lisbon")],
            "OLA2": [("home_city", "Porto")],
            "OLA3": [("home_city", "Braga"), ("timezone", "Europe/Berlin")],
        }
    )
    thread_id = await start_thread(llm_client, headers)

    await say(llm_client, headers, thread_id, "OLA1 I live in Lisbon, on UTC time.")
    [first] = await wait_for_passes(llm_client, headers, 1)
    profile = (await llm_client.get("/v1/users/me/profile", headers=headers)).json()
    assert profile["profile"]["timezone"] == "Europe/Berlin"
    assert profile["profile"]["home_city"] == "Lisbon"
    assert profile["extracted_keys"] == ["home_city"]
    assert first["profile_keys"] == ["home_city"]
    assert first["dropped"] == {"profile:set_by_user": 1}

    # A key extraction set, extraction updates.
    await say(llm_client, headers, thread_id, "OLA2 I moved to Porto.")
    [second, _] = await wait_for_passes(llm_client, headers, 2)
    assert second["profile_keys"] == ["home_city"]
    profile = (await llm_client.get("/v1/users/me/profile", headers=headers)).json()
    assert profile["profile"]["home_city"] == "Porto"

    # Once the user sets it, it is theirs; a value the profile holds already is no drop.
    patched = await llm_client.patch(
        "/v1/users/me/profile",
        headers={**headers, **PATCH},
        json=[{"op": "replace", "path": "/home_city", "value": "Faro"}],
    )
    assert patched.status_code == 200, patched.text
    await say(llm_client, headers, thread_id, "OLA3 Braga is home now.")
    [third, *_] = await wait_for_passes(llm_client, headers, 3)
    assert third["profile_keys"] == []
    assert third["dropped"] == {"profile:set_by_user": 1}
    profile = (await llm_client.get("/v1/users/me/profile", headers=headers)).json()
    assert profile["profile"]["home_city"] == "Faro"
    assert profile["extracted_keys"] == []
    assert profile["profile"]["timezone"] == "Europe/Berlin"
