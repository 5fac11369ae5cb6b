"""Embedding profiles: each model's prompts, pooling, Matryoshka size and fusion weight reach the
vectors and the search, for the packaged model, an operator's model file and an API model."""

from __future__ import annotations

import hashlib
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from pydantic import SecretStr

from service.config import Settings
from service.memories.search import linear_lexical_weight
from service.providers import EmbedderConfig, EmbedderUnavailable, build_embedder
from service.providers.local_embedder import LocalEmbedder, pool
from service.providers.profiles import MINILM, PROFILES, EmbeddingProfile
from tests.fixtures.model_files import operator_model_file
from tests.fixtures.openai_server import API_KEY, EMBEDDING_MODEL, FakeOpenAIServer, fake_vector


def unit(vector: list[float]) -> list[float]:
    norm = math.hypot(*vector)
    return [value / norm for value in vector]


@pytest.fixture(scope="module")
def operator_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A model file of the operator's: the packaged one copied, its tokenizer beside it."""
    return operator_model_file(tmp_path_factory.mktemp("model"))


def test_an_operator_model_file_is_named_by_its_profile_and_its_content(
    operator_model: tuple[Path, str], tmp_path: Path
) -> None:
    path, sha256 = operator_model
    e5 = build_embedder(
        EmbedderConfig(
            local_model_path=path, local_model_sha256=sha256, profile="multilingual-e5-small"
        )
    )
    # An ONNX file does not say which model it holds: the profile names the model whose
    # conventions it follows, and the file's digest which file it is.
    assert e5.model_name == f"multilingual-e5-small+file-{sha256[:12]}"
    # Another file under the same profile is another vector space.
    other = tmp_path / "model.onnx"
    other.write_bytes(path.read_bytes() + b"\0")
    shutil.copyfile(path.parent / "tokenizer.json", tmp_path / "tokenizer.json")
    other_sha256 = hashlib.sha256(other.read_bytes()).hexdigest()
    also_e5 = build_embedder(
        EmbedderConfig(
            local_model_path=other, local_model_sha256=other_sha256, profile="multilingual-e5-small"
        )
    )
    assert also_e5.model_name == f"multilingual-e5-small+file-{other_sha256[:12]}"
    # Without a profile, the file's name stands for the model.
    plain = build_embedder(EmbedderConfig(local_model_path=path, local_model_sha256=sha256))
    assert plain.model_name == f"model+file-{sha256[:12]}"
    # The packaged models, which ship with Mneme, keep their names.
    assert build_embedder(EmbedderConfig()).model_name == "all-MiniLM-L6-v2-onnx-int8-dynamic"


async def test_an_operator_model_embeds_with_its_profile_prompts(
    operator_model: tuple[Path, str],
) -> None:
    path, sha256 = operator_model
    # The packaged file as onnxruntime runs it by itself, like the operator's copy of it.
    packaged = LocalEmbedder(EmbedderConfig(profile=MINILM.name))
    custom = build_embedder(
        EmbedderConfig(
            local_model_path=path,
            local_model_sha256=sha256,
            query_prompt="query: ",
            document_prompt="passage: ",
        )
    )
    try:
        (stored,) = await custom.embed(["Ada keeps bees in Lisbon"])
        question = await custom.embed_query("who keeps bees")
        (expected_stored,) = await packaged.embed(["passage: Ada keeps bees in Lisbon"])
        (expected_question,) = await packaged.embed(["query: who keeps bees"])
        (unprompted,) = await packaged.embed(["Ada keeps bees in Lisbon"])
    finally:
        await custom.aclose()
        await packaged.aclose()
    assert stored == pytest.approx(expected_stored, abs=1e-6)
    assert question == pytest.approx(expected_question, abs=1e-6)
    assert stored != pytest.approx(unprompted, abs=1e-3)
    # Another document prompt makes other vectors: they get a name of their own.
    assert custom.model_name.startswith("model")
    assert custom.model_name != MINILM.name


async def test_a_model_file_with_another_sha256_is_refused(
    operator_model: tuple[Path, str],
) -> None:
    path, _ = operator_model
    embedder = build_embedder(EmbedderConfig(local_model_path=path, local_model_sha256="0" * 64))
    with pytest.raises(EmbedderUnavailable, match="sha256"):
        await embedder.embed(["anything"])
    await embedder.aclose()


def test_a_model_file_needs_its_sha256() -> None:
    with pytest.raises(ValueError, match="sha256"):
        EmbedderConfig(local_model_path=Path("/models/model.onnx"))


async def test_a_matryoshka_model_is_cut_to_the_column_and_renormalised(
    operator_model: tuple[Path, str],
) -> None:
    path, sha256 = operator_model
    full = LocalEmbedder(EmbedderConfig(profile=MINILM.name))
    short = build_embedder(
        EmbedderConfig(
            dims=128,
            local_model_path=path,
            local_model_sha256=sha256,
            native_dims=384,
            matryoshka=True,
        )
    )
    try:
        (vector,) = await short.embed(["Ada keeps bees"])
        (whole,) = await full.embed(["Ada keeps bees"])
    finally:
        await short.aclose()
        await full.aclose()
    assert len(vector) == 128 == short.dims
    assert vector == pytest.approx(unit(whole[:128]), abs=1e-5)
    assert short.model_name == f"model@128+file-{sha256[:12]}"


def test_a_model_that_cannot_be_shortened_is_refused_at_start_up() -> None:
    with pytest.raises(ValueError, match="cannot be shortened"):
        build_embedder(EmbedderConfig(dims=128))
    with pytest.raises(ValueError, match="fewer than"):
        PROFILES["embeddinggemma-300m"].stored_dims(1024)


def test_pooling_takes_the_mean_over_the_mask_or_the_first_token() -> None:
    hidden = np.array([[[1.0, 0.0], [3.0, 2.0], [9.0, 9.0]]], dtype=np.float32)
    mask = np.array([[1, 1, 0]], dtype=np.int64)
    assert pool(hidden, mask, "mean").tolist() == [[2.0, 1.0]]
    assert pool(hidden, mask, "cls").tolist() == [[1.0, 0.0]]


async def test_an_api_model_gets_its_prompts_and_is_shortened_when_the_server_is_not(
    embeddings_server: FakeOpenAIServer,
) -> None:
    embedder = build_embedder(
        EmbedderConfig(
            provider="openai",
            dims=4,
            openai_base_url=embeddings_server.base_url,
            openai_api_key=SecretStr(API_KEY),
            openai_model=EMBEDDING_MODEL,
            profile="nomic-embed-text-v1.5",
            native_dims=embeddings_server.native_dims,
            openai_max_retries=0,
        )
    )
    try:
        (stored,) = await embedder.embed(["Ada keeps bees"])
        question = await embedder.embed_query("who keeps bees")
    finally:
        await embedder.aclose()
    inputs = [request.body["input"] for request in embeddings_server.requests]
    assert inputs == [["search_document: Ada keeps bees"], ["search_query: who keeps bees"]]
    native = embeddings_server.native_dims
    assert stored == pytest.approx(unit(fake_vector("search_document: Ada keeps bees", native)[:4]))
    assert question == pytest.approx(unit(fake_vector("search_query: who keeps bees", native)[:4]))
    assert embedder.model_name == "nomic-embed-text-v1.5@4"


def test_an_unknown_profile_name_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match="multilingual-e5-small"):
        EmbedderConfig(profile="no-such-model").resolved_profile()


def test_the_fusion_weight_follows_the_profile_unless_the_settings_set_one() -> None:
    assert linear_lexical_weight(Settings(_env_file=None)) == MINILM.lexical_weight
    gemma = Settings(
        _env_file=None,
        embedding_provider="openai",
        embedding_openai_api_key=API_KEY,
        embedding_openai_model="embeddinggemma-300m",
        embedding_dims=768,
    )
    assert linear_lexical_weight(gemma) == PROFILES["embeddinggemma-300m"].lexical_weight
    unknown = Settings(
        _env_file=None,
        embedding_provider="openai",
        embedding_openai_api_key=API_KEY,
        embedding_dims=1024,
        embedding_openai_model="someone-elses-model",
    )
    assert linear_lexical_weight(unknown) == 0.5
    chosen = Settings(_env_file=None, search_linear_lexical_weight=0.8)
    assert linear_lexical_weight(chosen) == 0.8
    overridden = Settings(_env_file=None, embedding_lexical_weight=0.3)
    assert linear_lexical_weight(overridden) == 0.3


def test_the_packaged_models_keep_the_names_their_vectors_were_stored_under() -> None:
    assert LocalEmbedder(EmbedderConfig()).model_name == "all-MiniLM-L6-v2-onnx-int8-dynamic"
    first_releases = LocalEmbedder(EmbedderConfig(profile="all-MiniLM-L6-v2-onnx-int8"))
    assert first_releases.model_name == "all-MiniLM-L6-v2-onnx-int8"
    assert EmbeddingProfile(name="x", dims=8).space_name(8) == "x"


async def test_input_type_is_sent_only_when_the_server_wants_it(
    embeddings_server: FakeOpenAIServer,
) -> None:
    def make(send: bool) -> EmbedderConfig:
        return EmbedderConfig(
            provider="openai",
            dims=embeddings_server.native_dims,
            openai_base_url=embeddings_server.base_url,
            openai_api_key=SecretStr(API_KEY),
            openai_model=EMBEDDING_MODEL,
            openai_send_input_type=send,
            openai_max_retries=0,
        )

    for send in (True, False):
        embedder = build_embedder(make(send))
        await embedder.embed(["Ada keeps bees"])
        await embedder.embed_query("who keeps bees")
        await embedder.aclose()
    sent = [request.body.get("input_type") for request in embeddings_server.requests]
    assert sent == ["document", "query", None, None]
