from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define

from ..models.context_format import ContextFormat
from ..models.context_section_name import ContextSectionName
from ..types import UNSET, Unset

T = TypeVar("T", bound="ContextRequest")


@_attrs_define
class ContextRequest:
    """
    Attributes:
        query (str): Usually the user's latest message.
        budget_tokens (int | None | Unset): Default: MNEME_CONTEXT_BUDGET_TOKENS. At least what the block's preamble and
            its newest message, shortened, need.
        k_user (int | Unset): Relevant user facts to consider. Default: 4.
        k_episodic (int | Unset): Episodic hints to consider. Default: 4.
        k_org (int | Unset): Organization memories to consider. Default: 4.
        include (list[ContextSectionName] | Unset): The sections to build (default: all). An empty list would build
            nothing; `thread` and `recent` need a thread.
        format_ (ContextFormat | Unset):
        encoding (str | Unset): tiktoken encoding. Default: 'cl100k_base'.
        include_proposed (bool | Unset): Also use facts still awaiting review (lifecycle proposed). Default: False.
        mmr_lambda (float | Unset): Relevance vs. diversity when picking memories. Default: 0.7.
        thread_id (None | Unset | UUID): Adds the thread's summaries (`thread`) and its recent raw turns (`recent`).
    """

    query: str
    budget_tokens: int | None | Unset = UNSET
    k_user: int | Unset = 4
    k_episodic: int | Unset = 4
    k_org: int | Unset = 4
    include: list[ContextSectionName] | Unset = UNSET
    format_: ContextFormat | Unset = UNSET
    encoding: str | Unset = "cl100k_base"
    include_proposed: bool | Unset = False
    mmr_lambda: float | Unset = 0.7
    thread_id: None | Unset | UUID = UNSET

    def to_dict(self) -> dict[str, Any]:
        query = self.query

        budget_tokens: int | None | Unset
        if isinstance(self.budget_tokens, Unset):
            budget_tokens = UNSET
        else:
            budget_tokens = self.budget_tokens

        k_user = self.k_user

        k_episodic = self.k_episodic

        k_org = self.k_org

        include: list[str] | Unset = UNSET
        if not isinstance(self.include, Unset):
            include = []
            for include_item_data in self.include:
                include_item = include_item_data.value
                include.append(include_item)

        format_: str | Unset = UNSET
        if not isinstance(self.format_, Unset):
            format_ = self.format_.value

        encoding = self.encoding

        include_proposed = self.include_proposed

        mmr_lambda = self.mmr_lambda

        thread_id: None | str | Unset
        if isinstance(self.thread_id, Unset):
            thread_id = UNSET
        elif isinstance(self.thread_id, UUID):
            thread_id = str(self.thread_id)
        else:
            thread_id = self.thread_id

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "query": query,
            }
        )
        if budget_tokens is not UNSET:
            field_dict["budget_tokens"] = budget_tokens
        if k_user is not UNSET:
            field_dict["k_user"] = k_user
        if k_episodic is not UNSET:
            field_dict["k_episodic"] = k_episodic
        if k_org is not UNSET:
            field_dict["k_org"] = k_org
        if include is not UNSET:
            field_dict["include"] = include
        if format_ is not UNSET:
            field_dict["format"] = format_
        if encoding is not UNSET:
            field_dict["encoding"] = encoding
        if include_proposed is not UNSET:
            field_dict["include_proposed"] = include_proposed
        if mmr_lambda is not UNSET:
            field_dict["mmr_lambda"] = mmr_lambda
        if thread_id is not UNSET:
            field_dict["thread_id"] = thread_id

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        query = d.pop("query")

        def _parse_budget_tokens(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        budget_tokens = _parse_budget_tokens(d.pop("budget_tokens", UNSET))

        k_user = d.pop("k_user", UNSET)

        k_episodic = d.pop("k_episodic", UNSET)

        k_org = d.pop("k_org", UNSET)

        _include = d.pop("include", UNSET)
        include: list[ContextSectionName] | Unset = UNSET
        if _include is not UNSET:
            include = []
            for include_item_data in _include:
                include_item = ContextSectionName(include_item_data)

                include.append(include_item)

        _format_ = d.pop("format", UNSET)
        format_: ContextFormat | Unset
        if isinstance(_format_, Unset):
            format_ = UNSET
        else:
            format_ = ContextFormat(_format_)

        encoding = d.pop("encoding", UNSET)

        include_proposed = d.pop("include_proposed", UNSET)

        mmr_lambda = d.pop("mmr_lambda", UNSET)

        def _parse_thread_id(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                thread_id_type_0 = UUID(data)

                return thread_id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        thread_id = _parse_thread_id(d.pop("thread_id", UNSET))

        context_request = cls(
            query=query,
            budget_tokens=budget_tokens,
            k_user=k_user,
            k_episodic=k_episodic,
            k_org=k_org,
            include=include,
            format_=format_,
            encoding=encoding,
            include_proposed=include_proposed,
            mmr_lambda=mmr_lambda,
            thread_id=thread_id,
        )

        return context_request
