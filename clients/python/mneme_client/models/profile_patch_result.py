from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.applied_add import AppliedAdd
    from ..models.applied_remove import AppliedRemove
    from ..models.applied_replace import AppliedReplace
    from ..models.profile_patch_result_after import ProfilePatchResultAfter
    from ..models.profile_patch_result_before import ProfilePatchResultBefore
    from ..models.profile_patch_result_sources import ProfilePatchResultSources


T = TypeVar("T", bound="ProfilePatchResult")


@_attrs_define
class ProfilePatchResult:
    """What a write did, shaped for a before/after diff.

    Attributes:
        changed (bool): False when the patch left the stored document as it was.
        bytes_ (int): Size of the stored document after the write.
        key_count (int): Keys in the stored document after the write.
        version (int):
        before (ProfilePatchResultBefore): The merged view before the write.
        after (ProfilePatchResultAfter): The merged view after the write.
        sources (ProfilePatchResultSources): Where each key of `after` comes from.
        patches (list[AppliedAdd | AppliedRemove | AppliedReplace]): Each operation as applied, in order, with the value
            it replaced.
        ok (bool | Unset):  Default: True.
    """

    changed: bool
    bytes_: int
    key_count: int
    version: int
    before: ProfilePatchResultBefore
    after: ProfilePatchResultAfter
    sources: ProfilePatchResultSources
    patches: list[AppliedAdd | AppliedRemove | AppliedReplace]
    ok: bool | Unset = True
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.applied_add import AppliedAdd  # noqa: PLC0415
        from ..models.applied_replace import AppliedReplace  # noqa: PLC0415

        changed = self.changed

        bytes_ = self.bytes_

        key_count = self.key_count

        version = self.version

        before = self.before.to_dict()

        after = self.after.to_dict()

        sources = self.sources.to_dict()

        patches = []
        for patches_item_data in self.patches:
            patches_item: dict[str, Any]
            if isinstance(patches_item_data, AppliedAdd):
                patches_item = patches_item_data.to_dict()
            elif isinstance(patches_item_data, AppliedReplace):
                patches_item = patches_item_data.to_dict()
            else:
                patches_item = patches_item_data.to_dict()

            patches.append(patches_item)

        ok = self.ok

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "changed": changed,
                "bytes": bytes_,
                "key_count": key_count,
                "version": version,
                "before": before,
                "after": after,
                "sources": sources,
                "patches": patches,
            }
        )
        if ok is not UNSET:
            field_dict["ok"] = ok

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.applied_add import AppliedAdd  # noqa: PLC0415
        from ..models.applied_remove import AppliedRemove  # noqa: PLC0415
        from ..models.applied_replace import AppliedReplace  # noqa: PLC0415
        from ..models.profile_patch_result_after import ProfilePatchResultAfter  # noqa: PLC0415
        from ..models.profile_patch_result_before import ProfilePatchResultBefore  # noqa: PLC0415
        from ..models.profile_patch_result_sources import ProfilePatchResultSources  # noqa: PLC0415

        d = dict(src_dict)
        changed = d.pop("changed")

        bytes_ = d.pop("bytes")

        key_count = d.pop("key_count")

        version = d.pop("version")

        before = ProfilePatchResultBefore.from_dict(d.pop("before"))

        after = ProfilePatchResultAfter.from_dict(d.pop("after"))

        sources = ProfilePatchResultSources.from_dict(d.pop("sources"))

        patches = []
        _patches = d.pop("patches")
        for patches_item_data in _patches:

            def _parse_patches_item(
                data: object,
            ) -> AppliedAdd | AppliedRemove | AppliedReplace:
                try:
                    if not isinstance(data, dict):
                        raise TypeError()
                    patches_item_type_0 = AppliedAdd.from_dict(data)

                    return patches_item_type_0
                except (TypeError, ValueError, AttributeError, KeyError):
                    pass
                try:
                    if not isinstance(data, dict):
                        raise TypeError()
                    patches_item_type_1 = AppliedReplace.from_dict(data)

                    return patches_item_type_1
                except (TypeError, ValueError, AttributeError, KeyError):
                    pass
                if not isinstance(data, dict):
                    raise TypeError()
                patches_item_type_2 = AppliedRemove.from_dict(data)

                return patches_item_type_2

            patches_item = _parse_patches_item(patches_item_data)

            patches.append(patches_item)

        ok = d.pop("ok", UNSET)

        profile_patch_result = cls(
            changed=changed,
            bytes_=bytes_,
            key_count=key_count,
            version=version,
            before=before,
            after=after,
            sources=sources,
            patches=patches,
            ok=ok,
        )

        profile_patch_result.additional_properties = d
        return profile_patch_result

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
