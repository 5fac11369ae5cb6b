from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="ComponentScores")


@_attrs_define
class ComponentScores:
    """Why a memory ranked where it did, exactly as the fusion query computed it.

    Attributes:
        lexical_rank (int | None):
        lexical_score (float | None):
        vector_rank (int | None):
        vector_cosine (float | None):
        fused_score (float):
        neighbour_score (float): The evidence of this memory's neighbours in its conversation: the best fused score
            among the candidates whose turn right before or right after them in the source thread it is (a fact lends to the
            turns around it). Only turns (episodic memories) receive it: 0 for a fact or a procedure, and for a memory
            outside any thread.
        thread_score (float): The evidence of this memory's session: the best fused score among its own and the
            candidates from its source thread (its own, outside a thread). The turns of a session share it, so it orders
            sessions rather than the turns within one.
        recency_factor (float):
        confidence_factor (float):
        final_score (float):
        speaker_score (float | Unset): Set when the query names the speaker of this memory (one of the speakers of the
            searched memories): the prior for that speaker's words, on the fused scale. Default: 0.0.
        date_score (float | Unset): Set when the query names a day, week or month and this memory happened then (its
            `event_at`): the prior for that time, on the fused scale. 0 for a memory without `event_at` (when it was stored
            is not when it happened). Default: 0.0.
        mmr_score (float | None | Unset):
        rerank_score (float | None | Unset): The configured reranking service's relevance score (`MNEME_RERANK_URL`);
            null without one, when it failed or timed out, and beyond its first `top_n` candidates. The hits it scored come
            first, ordered by it; the rest follow in fused order.
    """

    lexical_rank: int | None
    lexical_score: float | None
    vector_rank: int | None
    vector_cosine: float | None
    fused_score: float
    neighbour_score: float
    thread_score: float
    recency_factor: float
    confidence_factor: float
    final_score: float
    speaker_score: float | Unset = 0.0
    date_score: float | Unset = 0.0
    mmr_score: float | None | Unset = UNSET
    rerank_score: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        lexical_rank: int | None
        lexical_rank = self.lexical_rank

        lexical_score: float | None
        lexical_score = self.lexical_score

        vector_rank: int | None
        vector_rank = self.vector_rank

        vector_cosine: float | None
        vector_cosine = self.vector_cosine

        fused_score = self.fused_score

        neighbour_score = self.neighbour_score

        thread_score = self.thread_score

        recency_factor = self.recency_factor

        confidence_factor = self.confidence_factor

        final_score = self.final_score

        speaker_score = self.speaker_score

        date_score = self.date_score

        mmr_score: float | None | Unset
        if isinstance(self.mmr_score, Unset):
            mmr_score = UNSET
        else:
            mmr_score = self.mmr_score

        rerank_score: float | None | Unset
        if isinstance(self.rerank_score, Unset):
            rerank_score = UNSET
        else:
            rerank_score = self.rerank_score

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "lexical_rank": lexical_rank,
                "lexical_score": lexical_score,
                "vector_rank": vector_rank,
                "vector_cosine": vector_cosine,
                "fused_score": fused_score,
                "neighbour_score": neighbour_score,
                "thread_score": thread_score,
                "recency_factor": recency_factor,
                "confidence_factor": confidence_factor,
                "final_score": final_score,
            }
        )
        if speaker_score is not UNSET:
            field_dict["speaker_score"] = speaker_score
        if date_score is not UNSET:
            field_dict["date_score"] = date_score
        if mmr_score is not UNSET:
            field_dict["mmr_score"] = mmr_score
        if rerank_score is not UNSET:
            field_dict["rerank_score"] = rerank_score

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)

        def _parse_lexical_rank(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        lexical_rank = _parse_lexical_rank(d.pop("lexical_rank"))

        def _parse_lexical_score(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        lexical_score = _parse_lexical_score(d.pop("lexical_score"))

        def _parse_vector_rank(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        vector_rank = _parse_vector_rank(d.pop("vector_rank"))

        def _parse_vector_cosine(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        vector_cosine = _parse_vector_cosine(d.pop("vector_cosine"))

        fused_score = d.pop("fused_score")

        neighbour_score = d.pop("neighbour_score")

        thread_score = d.pop("thread_score")

        recency_factor = d.pop("recency_factor")

        confidence_factor = d.pop("confidence_factor")

        final_score = d.pop("final_score")

        speaker_score = d.pop("speaker_score", UNSET)

        date_score = d.pop("date_score", UNSET)

        def _parse_mmr_score(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        mmr_score = _parse_mmr_score(d.pop("mmr_score", UNSET))

        def _parse_rerank_score(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        rerank_score = _parse_rerank_score(d.pop("rerank_score", UNSET))

        component_scores = cls(
            lexical_rank=lexical_rank,
            lexical_score=lexical_score,
            vector_rank=vector_rank,
            vector_cosine=vector_cosine,
            fused_score=fused_score,
            neighbour_score=neighbour_score,
            thread_score=thread_score,
            recency_factor=recency_factor,
            confidence_factor=confidence_factor,
            final_score=final_score,
            speaker_score=speaker_score,
            date_score=date_score,
            mmr_score=mmr_score,
            rerank_score=rerank_score,
        )

        component_scores.additional_properties = d
        return component_scores

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
