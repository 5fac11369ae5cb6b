"""The OpenAI-compatible chat model against a real local server, through the real client."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, SecretStr

from service.config import Settings
from service.providers.llm import (
    ChatModel,
    LLMUnavailable,
    OpenAIChatModel,
    build_chat_model,
    lone_surrogates_replaced,
    strict_json_schema,
)
from service.threads.summaries import SummaryOutput
from tests.fixtures.openai_server import API_KEY, MODEL, FakeOpenAIServer, completion

MakeModel = Callable[..., OpenAIChatModel]


@pytest.fixture
def llm_server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
async def make_model(llm_server: FakeOpenAIServer) -> AsyncIterator[MakeModel]:
    made: list[OpenAIChatModel] = []

    def make(**overrides: Any) -> OpenAIChatModel:
        values: dict[str, Any] = {
            "model": MODEL,
            "base_url": llm_server.base_url,
            "api_key": API_KEY,
            "timeout_seconds": 5,
            "max_retries": 0,
        }
        values.update(overrides)
        model = OpenAIChatModel(**values)
        made.append(model)
        return model

    yield make
    for model in made:
        await model.aclose()


def ask(model: ChatModel, transcript: str = '{"id":"#1","messages":[]}') -> Any:
    return model.complete_json(
        system="summarise", user=transcript, output=SummaryOutput, schema_name="thread_summary"
    )


async def test_the_request_asks_for_strict_structured_output(
    make_model: MakeModel, llm_server: FakeOpenAIServer
) -> None:
    transcript = json.dumps(
        {
            "id": "#1",
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hello"},
            ],
        }
    )
    output = await ask(make_model(), transcript)

    assert output == SummaryOutput.model_validate(
        {"entries": [{"question": "hi", "answer": "hello", "refs": ["#1"]}]}
    )
    (request,) = llm_server.requests
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert request.body["model"] == MODEL
    assert request.body["messages"] == [
        {"role": "system", "content": "summarise"},
        {"role": "user", "content": transcript},
    ]
    response_format = request.body["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["name"] == "thread_summary"
    assert response_format["json_schema"]["strict"] is True
    assert response_format["json_schema"]["schema"] == strict_json_schema(SummaryOutput)


def test_strict_schemas_close_every_object_and_require_every_property() -> None:
    schema = strict_json_schema(SummaryOutput)
    objects = [schema, *schema["$defs"].values()]
    assert len(objects) == 2
    for node in objects:
        assert node["additionalProperties"] is False
        assert node["required"] == list(node["properties"])

    class Loose(BaseModel):
        text: str

    class Closed(BaseModel):
        model_config = ConfigDict(extra="forbid")
        text: str

    with pytest.raises(ValueError, match="forbid"):
        strict_json_schema(Loose)
    assert strict_json_schema(Closed)["required"] == ["text"]


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("fail", "HTTP 500"),
        ("malformed", "does not match SummaryOutput: \\$:json_invalid"),
        ("schema_violation", "entries.0.extra:extra_forbidden, entries.0.refs:missing"),
        ("refusal", "refused"),
        ("truncated", "cut off"),
    ],
)
async def test_unusable_answers_raise_llm_unavailable(
    make_model: MakeModel, llm_server: FakeOpenAIServer, mode: Any, message: str
) -> None:
    llm_server.mode = mode
    with pytest.raises(LLMUnavailable, match=message):
        await ask(make_model())


async def test_errors_never_quote_the_models_reply(
    make_model: MakeModel, llm_server: FakeOpenAIServer
) -> None:
    secret = "the user's bank PIN is 4321"
    llm_server.reply = lambda _: completion(json.dumps({"entries": [{"question": secret}]}))
    with pytest.raises(LLMUnavailable) as raised:
        await ask(make_model())
    assert "4321" not in str(raised.value)
    assert raised.value.__cause__ is None


async def test_coerced_types_are_refused(
    make_model: MakeModel, llm_server: FakeOpenAIServer
) -> None:
    llm_server.reply = lambda _: completion(
        json.dumps({"entries": [{"question": "q", "answer": 42, "refs": []}]})
    )
    with pytest.raises(LLMUnavailable, match=re.escape("entries.0.answer:string_type")):
        await ask(make_model())


async def test_the_clients_retries_ride_out_a_transient_failure(
    make_model: MakeModel, llm_server: FakeOpenAIServer
) -> None:
    llm_server.fail_next = 1
    output = await ask(make_model(max_retries=1))
    assert len(output.entries) == 1
    assert len(llm_server.requests) == 2


async def test_a_hanging_server_times_out(
    make_model: MakeModel, llm_server: FakeOpenAIServer
) -> None:
    llm_server.mode = "hang"
    with pytest.raises(LLMUnavailable, match="timed out"):
        await ask(make_model(timeout_seconds=0.2))


async def test_a_wrong_key_is_unavailable_not_a_crash(
    make_model: MakeModel, llm_server: FakeOpenAIServer
) -> None:
    with pytest.raises(LLMUnavailable, match="HTTP 401"):
        await ask(make_model(api_key="wrong"))


async def test_a_model_is_built_only_when_an_llm_is_configured(
    llm_server: FakeOpenAIServer,
) -> None:
    assert build_chat_model(Settings(_env_file=None)) is None
    model = build_chat_model(
        Settings(
            _env_file=None,
            llm_base_url=llm_server.base_url,
            llm_api_key=SecretStr(API_KEY),
            llm_model="some-model",
        )
    )
    assert model is not None
    try:
        assert model.model_name == "some-model"
        assert len((await ask(model)).entries) == 1
        assert llm_server.requests[0].body["model"] == "some-model"
    finally:
        await model.aclose()


async def test_a_lone_surrogate_in_a_reply_is_read_as_the_replacement_character(
    make_model: MakeModel, llm_server: FakeOpenAIServer
) -> None:
    # The reply's JSON text as a model may write it: a lone high and a lone low surrogate
    # escape, a pair that stays an emoji, and an escaped backslash before a `u`.
    reply = (
        '{"entries": [{"question": "Lisb\\ud800on \\udc00 \\ud83d\\ude00 \\\\ud800", '
        '"answer": "a", "refs": []}]}'
    )
    llm_server.reply = lambda _: completion(reply)
    summary = await ask(make_model())
    assert summary.entries[0].question == "Lisb\ufffdon \ufffd \U0001f600 \\ud800"


def test_only_lone_surrogate_escapes_are_replaced() -> None:
    assert lone_surrogates_replaced('"\\ud83d\\ude00"') == '"\\ud83d\\ude00"'
    assert lone_surrogates_replaced('"\\ud83d"') == '"\\ufffd"'
    assert lone_surrogates_replaced('"\\ude00\\ud83d"') == '"\\ufffd\\ufffd"'
    assert lone_surrogates_replaced('"\\\\ud83d \\u00e9"') == '"\\\\ud83d \\u00e9"'
