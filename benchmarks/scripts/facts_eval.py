"""Do facts stay true? Scripted conversations through the real write path, scored.

Run from the repository root:  python -m benchmarks.scripts.facts_eval [--model silent|oracle|both]

Each conversation is a fresh user in a throwaway embedded Postgres: some facts are written
through the API first (deliberate facts), then the user's turns are appended through the API
and an extraction pass runs after each turn (the real `WritePath`, resolver and embedder). The
model is the project's loopback OpenAI-compatible server answering from a script: `silent`
never fills `supersedes` (as real models often do), `oracle` names every fact a new one
replaces. At the end every scripted fact is looked up and compared with the state it should be
in: `current` (confirmed and live), `superseded`, or `review` (written `proposed` with
`needs_review`, the deliberate fact it contradicts left current).

It prints, per model: facts in the expected state; scripted contradictions resolved (the old
fact superseded by the new one); facts that should stay current but were superseded; and each
miss. It asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from asgi_lifespan import LifespanManager
from httpx import ASGITransport, AsyncClient
from pydantic import SecretStr

from service import db_migrations
from service.auth.tokens import mint_dev_token
from service.config import Settings
from service.db import create_engine
from service.embedded_postgres import OWNER_ROLE, bootstrap, start_cluster
from service.extraction.pipeline import WritePath
from service.main import create_app
from tests.fixtures.openai_server import API_KEY, MODEL, FakeOpenAIServer, ScriptedExtraction

DATABASE = "mneme_facts_eval"
# Signs the run's own tokens for its throwaway database only.
SECRET = "facts-eval-secret-that-is-long-enough-for-hs256-0123456789"  # noqa: S105

Expected = Literal["current", "superseded", "review"]


def fact(
    text: str,
    category: str,
    subject: str = "",
    *,
    replaces: tuple[str, ...] = (),
    confidence: float = 0.95,
) -> dict[str, Any]:
    """A fact as the scripted model proposes it; `replaces` are fragments of the facts the
    oracle model names in `supersedes`."""
    return {
        "text": text,
        "category": category,
        "subject": subject,
        "scope": "user",
        "confidence": confidence,
        "evidence": "",
        "supersedes": list(replaces),
    }


@dataclass
class Conversation:
    name: str
    turns: list[tuple[str, list[dict[str, Any]]]]
    expected: dict[str, Expected]
    # Scripted contradictions: (old fact, new fact) pairs that should end old → superseded.
    contradictions: list[tuple[str, str]] = field(default_factory=list)
    deliberate: list[dict[str, Any]] = field(default_factory=list)


CONVERSATIONS = [
    Conversation(
        "move",
        [
            ("I live in Lisbon.", [fact("User lives in Lisbon.", "context", "home_city")]),
            (
                "Actually I moved to Porto last month.",
                [fact("User lives in Porto.", "context", "home_city", replaces=("Lisbon",))],
            ),
        ],
        {"User lives in Lisbon.": "superseded", "User lives in Porto.": "current"},
        [("User lives in Lisbon.", "User lives in Porto.")],
    ),
    Conversation(
        "move twice, and a team",
        [
            ("I'm based in Berlin.", [fact("User lives in Berlin.", "context", "home_city")]),
            ("My team is fraud-ops.", [fact("User's team is fraud-ops.", "context", "team")]),
            (
                "We relocated to Munich.",
                [fact("User lives in Munich.", "context", "home_city", replaces=("Berlin",))],
            ),
            (
                "And now Vienna, for good.",
                [fact("User lives in Vienna.", "context", "home_city", replaces=("Munich",))],
            ),
        ],
        {
            "User lives in Berlin.": "superseded",
            "User lives in Munich.": "superseded",
            "User lives in Vienna.": "current",
            "User's team is fraud-ops.": "current",
        },
        [
            ("User lives in Berlin.", "User lives in Munich."),
            ("User lives in Munich.", "User lives in Vienna."),
        ],
    ),
    Conversation(
        "change of mind (drink)",
        [
            (
                "I prefer tea in the morning.",
                [fact("User prefers tea in the morning.", "preference", "morning_drink")],
            ),
            (
                "I've switched to coffee in the morning.",
                [
                    fact(
                        "User prefers coffee in the morning.",
                        "preference",
                        "morning_drink",
                        replaces=("tea",),
                    )
                ],
            ),
        ],
        {
            "User prefers tea in the morning.": "superseded",
            "User prefers coffee in the morning.": "current",
        },
        [("User prefers tea in the morning.", "User prefers coffee in the morning.")],
    ),
    Conversation(
        "change of mind without a subject",
        [
            ("I like dark mode.", [fact("User prefers dark mode.", "preference")]),
            (
                "Light mode works better for me now.",
                [fact("User prefers light mode.", "preference", replaces=("dark mode",))],
            ),
        ],
        {"User prefers dark mode.": "superseded", "User prefers light mode.": "current"},
        [("User prefers dark mode.", "User prefers light mode.")],
    ),
    Conversation(
        "new job",
        [
            ("I work at Acme.", [fact("User works at Acme.", "knowledge", "employer")]),
            (
                "I joined Globex last week.",
                [fact("User works at Globex.", "knowledge", "employer", replaces=("Acme",))],
            ),
        ],
        {"User works at Acme.": "superseded", "User works at Globex.": "current"},
        [("User works at Acme.", "User works at Globex.")],
    ),
    Conversation(
        "bigger goal",
        [
            (
                "I'm training for a half marathon.",
                [fact("User is training for a half marathon.", "goal", "running_goal")],
            ),
            (
                "Now I'm aiming for a full marathon.",
                [
                    fact(
                        "User is training for a full marathon.",
                        "goal",
                        "running_goal",
                        replaces=("half marathon",),
                    )
                ],
            ),
        ],
        {
            "User is training for a half marathon.": "superseded",
            "User is training for a full marathon.": "current",
        },
        [("User is training for a half marathon.", "User is training for a full marathon.")],
    ),
    Conversation(
        "a birthday",
        [
            ("I'm 34 years old, by the way.", [fact("User is 34 years old.", "context", "age")]),
            (
                "I turned 35 today!",
                [fact("User is 35 years old.", "context", "age", replaces=("34",))],
            ),
        ],
        {"User is 34 years old.": "superseded", "User is 35 years old.": "current"},
        [("User is 34 years old.", "User is 35 years old.")],
    ),
    Conversation(
        "repeats",
        [
            ("I'm vegetarian.", [fact("User is vegetarian.", "context", "diet")]),
            ("As I said, I'm vegetarian.", [fact("User is vegetarian.", "context", "diet")]),
            ("Vegetarian, yes.", [fact("User is vegetarian.", "context", "diet")]),
        ],
        {"User is vegetarian.": "current"},
    ),
    Conversation(
        "unrelated preferences next to a deliberate one",
        [
            ("I prefer dark mode.", [fact("User prefers dark mode.", "preference")]),
            ("Keep answers concise.", [fact("User prefers concise answers.", "behavior")]),
            ("I drink oat milk.", [fact("User drinks oat milk.", "preference")]),
        ],
        {
            "User prefers metric units.": "current",
            "User prefers dark mode.": "current",
            "User prefers concise answers.": "current",
            "User drinks oat milk.": "current",
        },
        deliberate=[{"text": "User prefers metric units.", "category": "preference"}],
    ),
    Conversation(
        "a deliberate fact contradicted on weak evidence",
        [
            (
                "These days I prefer imperial units.",
                [fact("User prefers imperial units.", "preference")],
            ),
        ],
        {"User prefers metric units.": "current", "User prefers imperial units.": "review"},
        deliberate=[{"text": "User prefers metric units.", "category": "preference"}],
    ),
    Conversation(
        "a deliberate fact with its subject, changed",
        [
            (
                "I moved to Madrid.",
                [fact("User lives in Madrid.", "context", "home_city", replaces=("Seville",))],
            ),
        ],
        {"User lives in Seville.": "superseded", "User lives in Madrid.": "current"},
        [("User lives in Seville.", "User lives in Madrid.")],
        deliberate=[
            {
                "text": "User lives in Seville.",
                "category": "context",
                "metadata": {"subject": "home_city"},
            }
        ],
    ),
    Conversation(
        "pets and hobbies add up",
        [
            ("I have a dog named Rex.", [fact("User has a dog named Rex.", "context", "pets")]),
            ("I like hiking.", [fact("User likes hiking.", "preference", "hobby")]),
            (
                "We also adopted a cat named Tom.",
                [fact("User has a cat named Tom.", "context", "pets")],
            ),
            ("I started painting too.", [fact("User likes painting.", "preference", "hobbies")]),
        ],
        {
            "User has a dog named Rex.": "current",
            "User has a cat named Tom.": "current",
            "User likes hiking.": "current",
            "User likes painting.": "current",
        },
    ),
    Conversation(
        "the answer language changes, languages spoken add up",
        [
            (
                "Please answer in English; I speak Portuguese.",
                [
                    fact("User wants answers in English.", "preference", "response_language"),
                    fact("User speaks Portuguese.", "context", "languages_spoken"),
                ],
            ),
            (
                "From now on answer in German. I learned Spanish too.",
                [
                    fact(
                        "User wants answers in German.",
                        "preference",
                        "response_language",
                        replaces=("English",),
                    ),
                    fact("User speaks Spanish.", "context", "languages_spoken"),
                ],
            ),
        ],
        {
            "User wants answers in English.": "superseded",
            "User wants answers in German.": "current",
            "User speaks Portuguese.": "current",
            "User speaks Spanish.": "current",
        },
        [("User wants answers in English.", "User wants answers in German.")],
    ),
    Conversation(
        "a tentative move, proposed, then said with confidence",
        [
            ("I live in Lisbon.", [fact("User lives in Lisbon.", "context", "home_city")]),
            (
                "Maybe I'll be in Porto now, not sure.",
                [
                    fact(
                        "User lives in Porto.",
                        "context",
                        "home_city",
                        replaces=("Lisbon",),
                        confidence=0.75,
                    )
                ],
            ),
            (
                "Yes, I live in Porto now.",
                [fact("User lives in Porto.", "context", "home_city", replaces=("Lisbon",))],
            ),
        ],
        {"User lives in Lisbon.": "superseded", "User lives in Porto.": "current"},
        [("User lives in Lisbon.", "User lives in Porto.")],
    ),
    Conversation(
        "one subject spelled two ways",
        [
            ("I live in Braga.", [fact("User lives in Braga.", "context", "home_city")]),
            (
                "I moved to Faro.",
                [fact("User lives in Faro.", "context", "homeCity", replaces=("Braga",))],
            ),
        ],
        {"User lives in Braga.": "superseded", "User lives in Faro.": "current"},
        [("User lives in Braga.", "User lives in Faro.")],
    ),
]


@dataclass
class Score:
    model: str
    facts: int = 0
    in_state: int = 0
    contradictions: int = 0
    resolved: int = 0
    should_stay: int = 0
    wrongly_superseded: int = 0
    misses: list[str] = field(default_factory=list)


@asynccontextmanager
async def environment(workdir: Path, server: FakeOpenAIServer) -> AsyncIterator[Any]:
    cluster = start_cluster(workdir)
    try:
        await bootstrap(cluster, DATABASE)
        settings = Settings(
            _env_file=None,
            database_url=SecretStr(cluster.url("mneme_app", DATABASE)),
            migration_database_url=SecretStr(cluster.url(OWNER_ROLE, DATABASE)),
            jwt_hs256_secret=SecretStr(SECRET),
            rate_limit_enabled=False,
            jobs_enabled=False,
            migrate_on_start=False,
            thread_summary_keep_recent=0,
            extraction_strategy="every_turn",
            llm_base_url=server.base_url,
            llm_api_key=API_KEY,
            llm_model=MODEL,
            llm_max_retries=0,
        )
        assert settings.migration_database_url is not None
        owner = create_engine(settings.migration_database_url.get_secret_value(), settings)
        try:
            await db_migrations.upgrade(owner, settings)
        finally:
            await owner.dispose()
        app = create_app(settings)
        async with (
            LifespanManager(app),
            AsyncClient(transport=ASGITransport(app=app), base_url="http://mneme.eval") as client,
        ):
            write_path = WritePath(app.state.mneme)
            yield settings, client, write_path
    finally:
        cluster.stop()


async def run_conversation(
    settings: Settings,
    client: AsyncClient,
    write_path: WritePath,
    conversation: Conversation,
    score: Score,
) -> None:
    tenant = f"eval-{uuid.uuid4().hex[:12]}"
    token = mint_dev_token(settings, tenant_id=tenant, user_id="user")
    headers = {"Authorization": f"Bearer {token}"}
    base = "/v1/users/me"
    for memory in conversation.deliberate:
        response = await client.post(f"{base}/memories", headers=headers, json=memory)
        response.raise_for_status()
    thread = await client.post(f"{base}/threads", headers=headers, json={})
    thread.raise_for_status()
    thread_id = uuid.UUID(thread.json()["id"])
    for said, _ in conversation.turns:
        messages = [{"role": "user", "content": said}, {"role": "assistant", "content": "Noted."}]
        appended = await client.post(
            f"{base}/threads/{thread_id}/messages", headers=headers, json={"messages": messages}
        )
        appended.raise_for_status()
        await write_path.extract(tenant, thread_id, org_writes=False)
    listed = await client.get(
        f"{base}/memories",
        headers=headers,
        params={"kind": "semantic", "lifecycle": ["confirmed", "proposed", "superseded"]},
    )
    listed.raise_for_status()
    by_text: dict[str, list[dict[str, Any]]] = {}
    for memory in listed.json()["items"]:
        by_text.setdefault(memory["text"], []).append(memory)

    def state_of(text: str) -> str:
        found = by_text.get(text, [])
        if len(found) != 1:
            return f"{len(found)} rows"
        memory = found[0]
        if memory["lifecycle"] == "superseded":
            return "superseded"
        if memory["lifecycle"] == "proposed" and memory["needs_review"]:
            return "review"
        return "current"

    for text, expected in conversation.expected.items():
        score.facts += 1
        actual = state_of(text)
        if actual == expected:
            score.in_state += 1
        else:
            score.misses.append(f"{conversation.name}: {text!r} is {actual}, expected {expected}")
        if expected == "current":
            score.should_stay += 1
            score.wrongly_superseded += actual == "superseded"
    for old, new in conversation.contradictions:
        score.contradictions += 1
        [replaced] = by_text.get(old, [{}])[:1] or [{}]
        [replacement] = by_text.get(new, [{}])[:1] or [{}]
        if replaced.get("lifecycle") == "superseded" and replaced.get(
            "superseded_by"
        ) == replacement.get("id"):
            score.resolved += 1


async def evaluate(models: list[str]) -> list[Score]:
    server = FakeOpenAIServer()
    server.start()
    scores = []
    try:
        with tempfile.TemporaryDirectory(prefix="mneme-facts-eval-") as workdir:
            async with environment(Path(workdir), server) as (settings, client, write_path):
                for model in models:
                    score = Score(model)
                    for conversation in CONVERSATIONS:
                        server.reply = ScriptedExtraction(conversation.turns)
                        server.omit_supersedes = model == "silent"
                        await run_conversation(settings, client, write_path, conversation, score)
                    scores.append(score)
    finally:
        server.stop()
    return scores


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["silent", "oracle", "both"], default="both")
    args = parser.parse_args(argv)
    models = ["silent", "oracle"] if args.model == "both" else [args.model]
    scores = asyncio.run(evaluate(models))
    out = sys.stdout
    out.write(f"{len(CONVERSATIONS)} scripted conversations\n\n")
    out.write(
        "| model | facts in the expected state | contradictions resolved | "
        "facts wrongly superseded |\n|---|---|---|---|\n"
    )
    for s in scores:
        out.write(
            f"| {s.model} | {s.in_state}/{s.facts} | {s.resolved}/{s.contradictions} | "
            f"{s.wrongly_superseded}/{s.should_stay} |\n"
        )
    for s in scores:
        for miss in s.misses:
            out.write(f"{s.model}: {miss}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
