"""The embedded cluster's list of handle holders forgets processes that died holding it, so the
last live holder's shutdown stops the postmaster (the process test is in tests/faults)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from service.embedded_postgres import HANDLES_FILE, forget_dead_handles


def _dead_pid() -> int:
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait(timeout=30)
    return finished.pid


def test_dead_holders_are_forgotten_and_live_ones_kept(tmp_path: Path) -> None:
    living = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / HANDLES_FILE).write_text(json.dumps([_dead_pid(), living.pid, os.getpid()]))
        forget_dead_handles(tmp_path)
        assert json.loads((tmp_path / HANDLES_FILE).read_text()) == [living.pid, os.getpid()]
    finally:
        living.kill()
        living.wait(timeout=30)


def test_a_cluster_without_holders_is_left_as_it_is(tmp_path: Path) -> None:
    forget_dead_handles(tmp_path)
    assert not (tmp_path / HANDLES_FILE).exists()
