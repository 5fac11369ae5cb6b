from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.pass_read_mode import PassReadMode

if TYPE_CHECKING:
    from ..models.pass_read_dropped import PassReadDropped


T = TypeVar("T", bound="PassRead")


@_attrs_define
class PassRead:
    """One finished write-path pass over a thread's window of messages.

    Attributes:
        thread_id (None | UUID):
        user_id (None | str):
        mode (PassReadMode):
        trigger (str):
        model (None | str):
        from_seq (int):
        through_seq (int):
        written (list[UUID]):
        superseded (int):
        reconfirmed (int):
        removed (int):
        flagged (int): Facts written or changed through the API that this pass would have replaced on weak evidence:
            left current, the new fact awaits review.
        profile_keys (list[str]):
        dropped (PassReadDropped):
        finished_at (datetime.datetime):
    """

    thread_id: None | UUID
    user_id: None | str
    mode: PassReadMode
    trigger: str
    model: None | str
    from_seq: int
    through_seq: int
    written: list[UUID]
    superseded: int
    reconfirmed: int
    removed: int
    flagged: int
    profile_keys: list[str]
    dropped: PassReadDropped
    finished_at: datetime.datetime
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        thread_id: None | str
        if isinstance(self.thread_id, UUID):
            thread_id = str(self.thread_id)
        else:
            thread_id = self.thread_id

        user_id: None | str
        user_id = self.user_id

        mode = self.mode.value

        trigger = self.trigger

        model: None | str
        model = self.model

        from_seq = self.from_seq

        through_seq = self.through_seq

        written = []
        for written_item_data in self.written:
            written_item = str(written_item_data)
            written.append(written_item)

        superseded = self.superseded

        reconfirmed = self.reconfirmed

        removed = self.removed

        flagged = self.flagged

        profile_keys = self.profile_keys

        dropped = self.dropped.to_dict()

        finished_at = self.finished_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "thread_id": thread_id,
                "user_id": user_id,
                "mode": mode,
                "trigger": trigger,
                "model": model,
                "from_seq": from_seq,
                "through_seq": through_seq,
                "written": written,
                "superseded": superseded,
                "reconfirmed": reconfirmed,
                "removed": removed,
                "flagged": flagged,
                "profile_keys": profile_keys,
                "dropped": dropped,
                "finished_at": finished_at,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.pass_read_dropped import PassReadDropped  # noqa: PLC0415

        d = dict(src_dict)

        def _parse_thread_id(data: object) -> None | UUID:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                thread_id_type_0 = UUID(data)

                return thread_id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | UUID, data)

        thread_id = _parse_thread_id(d.pop("thread_id"))

        def _parse_user_id(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        user_id = _parse_user_id(d.pop("user_id"))

        mode = PassReadMode(d.pop("mode"))

        trigger = d.pop("trigger")

        def _parse_model(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        model = _parse_model(d.pop("model"))

        from_seq = d.pop("from_seq")

        through_seq = d.pop("through_seq")

        written = []
        _written = d.pop("written")
        for written_item_data in _written:
            written_item = UUID(written_item_data)

            written.append(written_item)

        superseded = d.pop("superseded")

        reconfirmed = d.pop("reconfirmed")

        removed = d.pop("removed")

        flagged = d.pop("flagged")

        profile_keys = cast(list[str], d.pop("profile_keys"))

        dropped = PassReadDropped.from_dict(d.pop("dropped"))

        finished_at = datetime.datetime.fromisoformat(d.pop("finished_at"))

        pass_read = cls(
            thread_id=thread_id,
            user_id=user_id,
            mode=mode,
            trigger=trigger,
            model=model,
            from_seq=from_seq,
            through_seq=through_seq,
            written=written,
            superseded=superseded,
            reconfirmed=reconfirmed,
            removed=removed,
            flagged=flagged,
            profile_keys=profile_keys,
            dropped=dropped,
            finished_at=finished_at,
        )

        pass_read.additional_properties = d
        return pass_read

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
