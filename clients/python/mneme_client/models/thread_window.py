from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.message_read import MessageRead
    from ..models.summarization import Summarization
    from ..models.summary_read import SummaryRead


T = TypeVar("T", bound="ThreadWindow")


@_attrs_define
class ThreadWindow:
    """What a prompt should carry for this thread: the summaries, then the raw recent turns.

    Attributes:
        summarization (Summarization):
        summaries (list[SummaryRead]):
        summary_text (str): Formatted summaries for an <earlier_conversation> block.
        start_index (int): Position of the first raw message returned.
        messages (list[MessageRead]):
        truncated (bool | Unset): Whether older raw messages of the window were left out to keep to `max_messages` (the
            newest are returned; GET …/messages pages through all of them). Default: False.
    """

    summarization: Summarization
    summaries: list[SummaryRead]
    summary_text: str
    start_index: int
    messages: list[MessageRead]
    truncated: bool | Unset = False
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        summarization = self.summarization.to_dict()

        summaries = []
        for summaries_item_data in self.summaries:
            summaries_item = summaries_item_data.to_dict()
            summaries.append(summaries_item)

        summary_text = self.summary_text

        start_index = self.start_index

        messages = []
        for messages_item_data in self.messages:
            messages_item = messages_item_data.to_dict()
            messages.append(messages_item)

        truncated = self.truncated

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "summarization": summarization,
                "summaries": summaries,
                "summary_text": summary_text,
                "start_index": start_index,
                "messages": messages,
            }
        )
        if truncated is not UNSET:
            field_dict["truncated"] = truncated

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.message_read import MessageRead  # noqa: PLC0415
        from ..models.summarization import Summarization  # noqa: PLC0415
        from ..models.summary_read import SummaryRead  # noqa: PLC0415

        d = dict(src_dict)
        summarization = Summarization.from_dict(d.pop("summarization"))

        summaries = []
        _summaries = d.pop("summaries")
        for summaries_item_data in _summaries:
            summaries_item = SummaryRead.from_dict(summaries_item_data)

            summaries.append(summaries_item)

        summary_text = d.pop("summary_text")

        start_index = d.pop("start_index")

        messages = []
        _messages = d.pop("messages")
        for messages_item_data in _messages:
            messages_item = MessageRead.from_dict(messages_item_data)

            messages.append(messages_item)

        truncated = d.pop("truncated", UNSET)

        thread_window = cls(
            summarization=summarization,
            summaries=summaries,
            summary_text=summary_text,
            start_index=start_index,
            messages=messages,
            truncated=truncated,
        )

        thread_window.additional_properties = d
        return thread_window

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
