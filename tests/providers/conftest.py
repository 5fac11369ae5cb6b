"""Fixtures for the embedder tests: the fake OpenAI-compatible server on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fixtures.openai_server import FakeOpenAIServer


@pytest.fixture
def embeddings_server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server
