"""The openai embedder against a fake OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import math
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from pydantic import SecretStr

from service.providers import EmbedderConfig, EmbedderUnavailable, build_embedder
from service.providers.openai_embedder import OpenAIEmbedder
from tests.fixtures.openai_server import API_KEY, EMBEDDING_MODEL, FakeOpenAIServer, fake_vector

MakeEmbedder = Callable[..., OpenAIEmbedder]


def unit(vector: list[float]) -> list[float]:
    norm = math.hypot(*vector)
    return [value / norm for value in vector]


@pytest.fixture
async def make_embedder(
    embeddings_server: FakeOpenAIServer,
) -> AsyncIterator[MakeEmbedder]:
    made: list[OpenAIEmbedder] = []

    def make(**overrides: Any) -> OpenAIEmbedder:
        values: dict[str, Any] = {
            "provider": "openai",
            "dims": embeddings_server.native_dims,
            "openai_base_url": embeddings_server.base_url,
            "openai_api_key": SecretStr(API_KEY),
            "openai_model": EMBEDDING_MODEL,
            "openai_max_retries": 0,
            "openai_timeout_seconds": 5,
        }
        values.update(overrides)
        embedder = build_embedder(EmbedderConfig(**values))
        assert isinstance(embedder, OpenAIEmbedder)
        made.append(embedder)
        return embedder

    yield make
    for embedder in made:
        await embedder.aclose()


async def test_vectors_come_back_unit_length_in_input_order(
    make_embedder: MakeEmbedder, embeddings_server: FakeOpenAIServer
) -> None:
    texts = ["first memory", "second memory", "third memory"]
    vectors = await make_embedder().embed(texts)

    assert vectors == [pytest.approx(unit(fake_vector(text, 8))) for text in texts]
    (request,) = embeddings_server.requests
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert request.body["model"] == EMBEDDING_MODEL
    assert request.body["input"] == texts
    assert request.body["encoding_format"] == "float"
    assert "dimensions" not in request.body


async def test_dimensions_are_sent_only_when_configured(
    make_embedder: MakeEmbedder, embeddings_server: FakeOpenAIServer
) -> None:
    vector = await make_embedder(dims=4, openai_send_dimensions=True).embed_query("hello")

    assert vector == pytest.approx(unit(fake_vector("hello", 4)))
    assert embeddings_server.requests[0].body["dimensions"] == 4


async def test_inputs_are_split_into_batches(
    make_embedder: MakeEmbedder, embeddings_server: FakeOpenAIServer
) -> None:
    texts = [f"memory {n}" for n in range(5)]
    vectors = await make_embedder(openai_batch_size=2).embed(texts)

    assert [request.body["input"] for request in embeddings_server.requests] == [
        texts[0:2],
        texts[2:4],
        texts[4:5],
    ]
    assert vectors == [pytest.approx(unit(fake_vector(text, 8))) for text in texts]


async def test_no_texts_make_no_request(
    make_embedder: MakeEmbedder, embeddings_server: FakeOpenAIServer
) -> None:
    assert await make_embedder().embed([]) == []
    assert embeddings_server.requests == []


async def test_an_empty_string_is_sent_as_a_space(
    make_embedder: MakeEmbedder, embeddings_server: FakeOpenAIServer
) -> None:
    vector = await make_embedder().embed_query("")

    assert vector == pytest.approx(unit(fake_vector(" ", 8)))
    assert embeddings_server.requests[0].body["input"] == [" "]


async def test_server_errors_are_retried_until_one_succeeds(
    make_embedder: MakeEmbedder, embeddings_server: FakeOpenAIServer
) -> None:
    embeddings_server.fail_next = 1
    vector = await make_embedder(openai_max_retries=2).embed_query("hello")

    assert vector == pytest.approx(unit(fake_vector("hello", 8)))
    assert len(embeddings_server.requests) == 2


async def test_a_server_that_keeps_failing_makes_the_embedder_unavailable(
    make_embedder: MakeEmbedder, embeddings_server: FakeOpenAIServer
) -> None:
    embeddings_server.mode = "fail"
    with pytest.raises(EmbedderUnavailable, match=EMBEDDING_MODEL):
        await make_embedder(openai_max_retries=2).embed(["hello"])
    # The first try and both retries.
    assert len(embeddings_server.requests) == 3


async def test_a_rejected_api_key_is_not_retried(
    make_embedder: MakeEmbedder, embeddings_server: FakeOpenAIServer
) -> None:
    embedder = make_embedder(openai_api_key=SecretStr("wrong-key"), openai_max_retries=2)
    with pytest.raises(EmbedderUnavailable):
        await embedder.embed(["hello"])
    assert len(embeddings_server.requests) == 1


async def test_vectors_of_the_wrong_size_make_the_embedder_unavailable(
    make_embedder: MakeEmbedder,
) -> None:
    with pytest.raises(EmbedderUnavailable, match="8-dimensional"):
        await make_embedder(dims=16).embed(["hello"])


async def test_a_server_that_does_not_answer_in_time_makes_the_embedder_unavailable(
    make_embedder: MakeEmbedder, embeddings_server: FakeOpenAIServer
) -> None:
    embeddings_server.mode = "hang"
    with pytest.raises(EmbedderUnavailable):
        await make_embedder(openai_timeout_seconds=0.2).embed(["hello"])


async def test_an_unreachable_server_makes_the_embedder_unavailable(
    make_embedder: MakeEmbedder,
) -> None:
    # A port that was free a moment ago: nothing listens there, so connecting is refused.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    embedder = make_embedder(openai_base_url=f"http://127.0.0.1:{port}/v1")
    with pytest.raises(EmbedderUnavailable):
        await embedder.embed(["hello"])


def test_the_openai_embedder_needs_an_api_key() -> None:
    with pytest.raises(ValueError, match="API key"):
        build_embedder(EmbedderConfig(provider="openai"))


@pytest.mark.parametrize(
    "sent",
    [
        b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\n",
        b'POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Length: 80\r\n\r\n{"input": [',
    ],
    ids=["headers cut short", "body cut short"],
)
async def test_a_request_its_client_abandoned_midway_is_not_recorded(
    make_embedder: MakeEmbedder, embeddings_server: FakeOpenAIServer, sent: bytes
) -> None:
    # Tests that kill a process mid-request count the requests the fake server saw; a
    # request cut short by the kill must not show up as one that arrived.
    host, port = embeddings_server.base_url.removeprefix("http://").split("/")[0].split(":")
    with socket.create_connection((host, int(port))) as abandoned:
        abandoned.sendall(sent)
        abandoned.shutdown(socket.SHUT_WR)
        assert abandoned.recv(1024) == b""
    await make_embedder().embed(["hello"])
    assert [request.body["input"] for request in embeddings_server.requests] == [["hello"]]
