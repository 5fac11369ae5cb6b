"""Embedding model profiles: what a model needs besides its weights to embed well for search.

A retrieval model is trained with its own conventions: the text it expects before a question and
before a passage (e5's "query: " / "passage: ", EmbeddingGemma's task prompts), how token states
become one vector (mean or [CLS] pooling), whether its leading dimensions are an embedding of
their own (Matryoshka training, so a 768-dimensional model can fill a 384-dimensional column),
and how much its cosine should weigh against BM25 in the linear fusion (a stronger model earns
a larger share). Used without them, the same weights retrieve noticeably worse.

A profile is picked by name (`MNEME_EMBEDDING_PROFILE`), or follows from the provider and model;
each field can be overridden in the settings for a model the table below does not know.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Any, Literal

from service.refused_start import StartRefused

Pooling = Literal["mean", "cls"]


class EmbeddingSettingsRefused(StartRefused, ValueError):
    """The embedding settings describe no model the service can run, or one that cannot fill
    the vector column: the start is refused with the reason, in one line. `field` names the
    setting at fault (an `EmbedderConfig` field, e.g. "profile"), when one is."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True, slots=True)
class EmbeddingProfile:
    """One model's conventions (see the module docstring)."""

    name: str
    # The size of the vectors the model makes.
    dims: int
    query_prompt: str = ""
    document_prompt: str = ""
    pooling: Pooling = "mean"
    # Its first k dimensions, normalised again, are an embedding of their own.
    matryoshka: bool = False
    # The linear fusion's weight of BM25 against this model's cosine; None: the settings'.
    lexical_weight: float | None = None
    # Word pieces per text the model reads (a local model truncates to this).
    max_tokens: int = 512

    def __post_init__(self) -> None:
        if self.dims < 1 or self.max_tokens < 1:
            raise EmbeddingSettingsRefused("a profile's dims and max_tokens must be at least 1")
        if self.lexical_weight is not None and not 0 <= self.lexical_weight <= 1:
            raise EmbeddingSettingsRefused("a profile's lexical_weight lies between 0 and 1")

    def stored_dims(self, column_dims: int) -> int:
        """The size of the vectors stored for this model in a column of `column_dims`;
        raises `EmbeddingSettingsRefused` when the model cannot fill the column."""
        if column_dims == self.dims:
            return column_dims
        if self.matryoshka and column_dims < self.dims:
            return column_dims
        if self.matryoshka:
            raise EmbeddingSettingsRefused(
                f"{self.name} makes {self.dims}-dimensional vectors, fewer than the column's "
                f"{column_dims}",
                "dims",
            )
        raise EmbeddingSettingsRefused(
            f"{self.name} makes {self.dims}-dimensional vectors and cannot be shortened to the "
            f"column's {column_dims}; set the embedding dims to {self.dims} or pick another model",
            "dims",
        )

    def space_name(self, column_dims: int) -> str:
        """The name stored with each vector (`memory.embedding_model`): vectors compare only
        with vectors of the same name. It changes with anything that changes the vectors: the
        model, a shortened size, the document prompt."""
        name = self.name
        if column_dims != self.dims:
            name += f"@{column_dims}"
        known = PROFILES.get(self.name)
        if known is not None and known.document_prompt != self.document_prompt:
            digest = hashlib.sha256(self.document_prompt.encode()).hexdigest()[:8]
            name += f"+prompt-{digest}"
        return name


MINILM = EmbeddingProfile(
    # The packaged model file as onnxruntime runs it by itself (its int8 weights turned into
    # float32 when it loads): the packaged default of the first releases, whose vectors many
    # databases hold under this name.
    name="all-MiniLM-L6-v2-onnx-int8",
    dims=384,
    lexical_weight=0.5,
    max_tokens=256,
)

MINILM_INT8_PRODUCTS = replace(MINILM, name="all-MiniLM-L6-v2-onnx-int8-dynamic")
"""The same packaged file with its matrix products run in int8, the activations quantized on
every run (`service.providers.int8_products`), each text alone: a fifth to a third less time
per question, ~1.4 times the texts per second, vectors at cosine ~0.99 to the ones above, so a
vector space of its own. The packaged default."""

PACKAGED_PROFILES = (MINILM_INT8_PRODUCTS, MINILM)
"""The models the `local` provider runs from the packaged file, without a model path: the
first is the default. A vector column that holds one of them can always be served."""

PROFILES: dict[str, EmbeddingProfile] = {
    profile.name: profile
    for profile in (
        *PACKAGED_PROFILES,
        # The fp32 original, as a local ONNX file or served: the same conventions.
        replace(MINILM, name="all-MiniLM-L6-v2"),
        EmbeddingProfile(
            name="multilingual-e5-small",
            dims=384,
            query_prompt="query: ",
            document_prompt="passage: ",
            lexical_weight=0.6,
        ),
        EmbeddingProfile(name="all-mpnet-base-v2", dims=768, lexical_weight=0.35, max_tokens=384),
        EmbeddingProfile(
            name="embeddinggemma-300m",
            dims=768,
            query_prompt="task: search result | query: ",
            document_prompt="title: none | text: ",
            matryoshka=True,
            lexical_weight=0.25,
            max_tokens=2048,
        ),
        EmbeddingProfile(
            name="nomic-embed-text-v1.5",
            dims=768,
            query_prompt="search_query: ",
            document_prompt="search_document: ",
            matryoshka=True,
            max_tokens=2048,
        ),
        EmbeddingProfile(
            name="bge-small-en-v1.5",
            dims=384,
            query_prompt="Represent this sentence for searching relevant passages: ",
            pooling="cls",
        ),
        EmbeddingProfile(
            name="text-embedding-3-small", dims=1536, matryoshka=True, max_tokens=8191
        ),
        EmbeddingProfile(
            name="text-embedding-3-large", dims=3072, matryoshka=True, max_tokens=8191
        ),
    )
}
"""The models whose conventions Mneme knows. Their fusion weights: MiniLM's and e5-small's were
chosen on LoCoMo through the service (docs/benchmarks.md); mpnet's and EmbeddingGemma's follow
the ablation in docs/embedding-models.md; the rest stay None (the settings' weight)."""


@dataclass(frozen=True, slots=True)
class ProfileOverrides:
    """Settings that replace single fields of the chosen profile (None: keep the profile's)."""

    query_prompt: str | None = None
    document_prompt: str | None = None
    pooling: Pooling | None = None
    native_dims: int | None = None
    matryoshka: bool | None = None
    lexical_weight: float | None = None


def resolve_profile(
    name: str | None, model: str, column_dims: int, overrides: ProfileOverrides
) -> EmbeddingProfile:
    """The profile named `name` (else the one of `model`, else a plain profile for a model
    of the column's size), with the overrides applied."""
    chosen = name or model
    if name is not None and name not in PROFILES:
        # The name given is not repeated: a value in the wrong variable may be a secret.
        raise EmbeddingSettingsRefused(
            f"is not a known embedding profile; known: {', '.join(sorted(PROFILES))} "
            "(or leave it unset and give the prompts and pooling in the settings)",
            "profile",
        )
    profile = PROFILES.get(chosen) or EmbeddingProfile(name=chosen, dims=column_dims)
    changes: dict[str, Any] = {
        field_name: value
        for field_name, value in (
            ("query_prompt", overrides.query_prompt),
            ("document_prompt", overrides.document_prompt),
            ("pooling", overrides.pooling),
            ("dims", overrides.native_dims),
            ("matryoshka", overrides.matryoshka),
            ("lexical_weight", overrides.lexical_weight),
        )
        if value is not None
    }
    return replace(profile, **changes) if changes else profile
