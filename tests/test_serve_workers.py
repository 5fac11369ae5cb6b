"""`mneme serve --workers N` on the embedded database: one cluster, started and migrated by
the parent, shared by every worker, stopped when the parent exits."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from service.config import Settings
from tests.conftest import TEST_SECRET, bearer, new_tenant

# Starts `mneme serve` with two workers and its own embedded cluster.
pytestmark = pytest.mark.slow

READY_SECONDS = 240


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _postmaster_pid(data_dir: Path) -> int | None:
    pid_file = data_dir / "pgdata" / "postmaster.pid"
    try:
        return int(pid_file.read_text().splitlines()[0])
    except (OSError, IndexError, ValueError):
        return None


def _children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _environment(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.decode(errors="replace").partition("=") for item in raw.split(b"\0") if item)
    return {name: value for name, _, value in pairs}


def test_workers_share_one_embedded_cluster(tmp_path: Path) -> None:
    port = _free_port()
    environment = {
        name: value for name, value in os.environ.items() if not name.startswith("MNEME_")
    }
    environment |= {
        "MNEME_DATA_DIR": str(tmp_path),
        "MNEME_JWT_HS256_SECRET": TEST_SECRET,
        "MNEME_JOBS_ENABLED": "false",
        "MNEME_EMBEDDING_LOCAL_THREADS": "1",
        "MNEME_LOG_LEVEL": "warning",
    }
    log = (tmp_path / "serve.log").open("wb")
    process = subprocess.Popen(  # noqa: S603 - our own interpreter and fixed arguments
        [sys.executable, "-m", "service", "serve", "--workers", "2", "--port", str(port)],
        env=environment,
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        base_url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + READY_SECONDS
        while True:
            assert process.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                if httpx.get(f"{base_url}/readyz", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
            time.sleep(0.5)
        postmaster = _postmaster_pid(tmp_path)
        assert postmaster is not None
        headers = bearer(Settings(jwt_hs256_secret=TEST_SECRET), new_tenant(), "alice")
        # Fresh connections, so both workers answer some of them; every answer comes from
        # the one cluster the parent started (a worker's own cluster would not have it).
        created = httpx.post(
            f"{base_url}/v1/users/me/memories",
            headers=headers,
            json={"text": "Keeps bees on the roof"},
            timeout=30,
        )
        assert created.status_code == 201, created.text
        for _ in range(8):
            listed = httpx.get(f"{base_url}/v1/users/me/memories", headers=headers, timeout=30)
            assert listed.status_code == 200, listed.text
            assert [item["id"] for item in listed.json()["items"]] == [created.json()["id"]]
        assert _postmaster_pid(tmp_path) == postmaster
        # The workers neither start a cluster nor migrate: two processes migrating one fresh
        # database at once would race on its first CREATE TABLE.
        workers = [
            environment
            for environment in map(_environment, _children(process.pid))
            if environment.get("MNEME_MIGRATE_ON_START") == "false"
        ]
        assert len(workers) >= 2  # the two workers (and any helper process they share)
        assert all(
            str(tmp_path / "pgdata") in worker.get("MNEME_DATABASE_URL", "") for worker in workers
        )
        # Whichever worker a scrape reaches, it counts every worker's requests: the 8 lists,
        # answered by both, in each of several scrapes on fresh connections.
        [metrics_dir] = {worker["PROMETHEUS_MULTIPROC_DIR"] for worker in workers}
        for _ in range(6):
            scraped = httpx.get(f"{base_url}/metrics", timeout=30)
            assert scraped.status_code == 200
            assert _requests_counted(scraped.text, "GET", "/v1/users/{user_id}/memories") == 8
            assert _series(scraped.text, "mneme_db_pool_connections")
            # Series of one process would describe whichever worker answered.
            assert not _series(scraped.text, "process_cpu_seconds_total")
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
            log.close()
    assert process.returncode == 0, (tmp_path / "serve.log").read_text()
    # The parent stopped the cluster it started, and removed the workers' metrics.
    assert _postmaster_pid(tmp_path) is None
    assert not Path(metrics_dir).exists()


def _series(exposition: str, name: str) -> list[Sample]:
    return [
        sample
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
        if sample.name == name
    ]


def _requests_counted(exposition: str, method: str, route: str) -> float:
    return sum(
        sample.value
        for sample in _series(exposition, "mneme_http_requests_total")
        if sample.labels["method"] == method and sample.labels["route"] == route
    )
