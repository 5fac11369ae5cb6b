"""Fixtures the memory tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fixtures.openai_server import FakeOpenAIServer
from tests.memories.model_change import NEW_DIMS


@pytest.fixture(scope="module")
def embeddings_server() -> Iterator[FakeOpenAIServer]:
    """An OpenAI-compatible embeddings server for the model a change of model moves to (a
    module may replace it, as the killed-process test does with a slow one)."""
    server = FakeOpenAIServer(native_dims=NEW_DIMS)
    server.start()
    yield server
    server.stop()
