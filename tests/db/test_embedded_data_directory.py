"""The embedded database's data directory is made when missing; one that cannot be made, or
that this user cannot write, stops the start with where it is and what to set, before the
database is asked to start in it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from service.embedded_postgres import UnusableDataDirectory, start_cluster
from service.refused_start import StartRefused


def test_a_data_directory_that_cannot_be_made_is_refused_with_where_and_why(
    tmp_path: Path,
) -> None:
    not_a_directory = tmp_path / "a-file"
    not_a_directory.write_text("")
    wanted = not_a_directory / "data"
    with pytest.raises(UnusableDataDirectory) as refused:
        start_cluster(wanted)
    assert str(refused.value) == (
        f"the data directory {wanted} (MNEME_DATA_DIR) cannot be made: Not a directory; set "
        "MNEME_DATA_DIR to a directory this user can write"
    )
    # A start refused for the operator to fix: reported as this one line.
    assert isinstance(refused.value, StartRefused)


def test_a_data_directory_this_user_cannot_write_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A superuser may write anywhere, so the directory's permissions stand in for another
    # user's view of it: what `os.access` answers for this one.
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    real_access = os.access
    monkeypatch.setattr(
        os, "access", lambda path, mode: Path(path) != read_only and real_access(path, mode)
    )
    with pytest.raises(UnusableDataDirectory, match="is not writable by this user"):
        start_cluster(read_only)
    assert list(read_only.iterdir()) == []
