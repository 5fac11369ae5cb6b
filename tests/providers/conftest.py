"""Fixtures for the embedder tests: a fake OpenAI-compatible server on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.providers.fake_embeddings_server import FakeEmbeddingsServer


@pytest.fixture
def embeddings_server() -> Iterator[FakeEmbeddingsServer]:
    server = FakeEmbeddingsServer()
    server.start()
    yield server
    server.stop()
