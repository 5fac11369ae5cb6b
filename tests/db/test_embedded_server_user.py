"""Processes starting the embedded cluster at once on a new machine, as root, create the system
user PostgreSQL runs as exactly once (`ensure_server_user`): each of them then finds the uid that
the system keeps, the one its data directory must belong to."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from service.embedded_postgres import ensure_server_user

STARTING_AT_ONCE = 6
# Without the lock, one round in four or so happens to leave every process the same uid.
ROUNDS = 4

# Each process says it is ready, waits for the same signal, makes sure the user exists (as
# `start_cluster` does before pgserver looks for it), and prints the uid it would give its data
# directory.
_STARTER = textwrap.dedent(
    """
    import os, pwd, sys, time
    from pathlib import Path
    from service.embedded_postgres import ensure_server_user
    ready, signal, name = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    (ready / str(os.getpid())).touch()
    while not signal.exists():
        time.sleep(0.001)
    ensure_server_user(name)
    print(pwd.getpwnam(name).pw_uid)
    """
)


def _passwd_entries(name: str) -> list[str]:
    lines = Path("/etc/passwd").read_text().splitlines()
    return [line for line in lines if line.split(":", 1)[0] == name]


def _remove_user(name: str) -> None:
    for _ in range(STARTING_AT_ONCE):
        if not _passwd_entries(name):
            return
        # The test's own user name; userdel is the system's, wherever PATH finds it.
        subprocess.run(["userdel", name], capture_output=True, check=False)  # noqa: S603, S607


def _start_at_once(name: str, where: Path) -> list[tuple[str, str]]:
    """Each starter's uid and error output."""
    ready, signal = where / "ready", where / "go"
    ready.mkdir()
    starters = [
        subprocess.Popen(  # noqa: S603 - this interpreter, a fixed script
            [sys.executable, "-c", _STARTER, str(ready), str(signal), name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(STARTING_AT_ONCE)
    ]
    try:
        deadline = time.monotonic() + 60
        while len(list(ready.iterdir())) < STARTING_AT_ONCE and time.monotonic() < deadline:
            time.sleep(0.01)
        signal.touch()
        return [starter.communicate(timeout=60) for starter in starters]
    finally:
        for starter in starters:
            starter.kill()


@pytest.mark.skipif(
    sys.platform == "win32" or os.geteuid() != 0,
    reason="only root runs PostgreSQL as another system user",
)
@pytest.mark.parametrize("round_", range(ROUNDS))
def test_processes_starting_at_once_create_the_server_user_once(
    tmp_path: Path, round_: int
) -> None:
    name = f"mneme{uuid.uuid4().hex[:10]}"
    try:
        answers = _start_at_once(name, tmp_path)
        assert [error for _, error in answers if "Error" in error] == []
        entries = _passwd_entries(name)
        assert len(entries) == 1
        kept_uid = entries[0].split(":")[2]
        assert [uid.strip() for uid, _ in answers] == [kept_uid] * STARTING_AT_ONCE
    finally:
        _remove_user(name)


def test_a_user_that_is_not_root_creates_no_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    name = f"mneme{uuid.uuid4().hex[:10]}"
    ensure_server_user(name)
    assert _passwd_entries(name) == []
