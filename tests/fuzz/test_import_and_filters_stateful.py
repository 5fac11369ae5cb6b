"""Stateful fuzzing of import and the admin filters against the running service.

A Hypothesis state machine writes memories and messages for a few users, exports them, purges
them, imports exports back (untouched, or with one line made hostile), and filters the users
and the audit trail by times taken from what the service answered (and by hostile times). The
links between steps are the ones a client follows: export → purge → import of that export, and
a response's `created_at` / `last_active_at` → the next filter's bounds.

Invariants: no answer is a 5xx; a refused import leaves the user exactly as it was; an untouched
export imports back to the same counts; a filter answers only rows inside its bounds.

Run with `pytest -m fuzz` (`MNEME_FUZZ_EXAMPLES` bounds the number of runs).
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from typing import Any

import pytest
import requests
from hypothesis import HealthCheck, event
from hypothesis import settings as run_settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from service.config import Settings
from tests.conftest import bearer, new_tenant
from tests.fuzz.hostile import HOSTILE_TIMES, json_values, splice, times
from tests.fuzz.tally import counting_session

pytestmark = pytest.mark.fuzz

MAX_EXAMPLES = int(os.environ.get("MNEME_FUZZ_EXAMPLES", "15"))
USERS = ("ada", "bob", "eve")
NDJSON = {"content-type": "application/x-ndjson"}
# Columns an import line may carry hostile values in, per record type.
HOSTILE_COLUMNS = {
    "user_account": ("created_at", "last_seen_at", "name", "socials"),
    "profile": ("document", "updated_at", "version"),
    "thread": ("created_at", "title", "metadata"),
    "message": ("created_at", "content", "metadata", "tool_calls", "seq"),
    "memory": ("created_at", "event_at", "text", "confidence", "metadata", "speaker"),
    "memory_event": ("created_at", "new_text", "changes"),
    "audit_log": ("created_at", "detail"),
}


def _time(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def _valid_time(text: str) -> bool:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return False
    return moment.utcoffset() is not None


def test_import_and_filters_hold_under_any_sequence_of_steps(
    fuzz_base_url: str, settings: Settings
) -> None:
    base = fuzz_base_url
    app_settings = settings

    class ImportAndFilters(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.tenant = new_tenant()
            self.admin = bearer(app_settings, self.tenant, "root", admin=True)
            self.agent = bearer(app_settings, self.tenant, "agent", service=True)
            self.http = counting_session()
            self.exports: dict[str, list[str]] = {}
            self.seen_times: list[str] = []

        def call(self, method: str, path: str, **kwargs: Any) -> requests.Response:
            response = self.http.request(method, f"{base}{path}", timeout=60, **kwargs)
            assert response.status_code < 500, f"{method} {path}: {response.text[:500]}"
            return response

        def state_of(self, user: str) -> dict[str, Any] | None:
            """The user's counts per record type, from its export header (None: unknown)."""
            response = self.call("GET", f"/v1/users/{user}/export", headers=self.admin)
            if response.status_code == 404:
                return None
            assert response.status_code == 200, response.text
            header: dict[str, Any] = json.loads(response.text.splitlines()[0])
            counts: dict[str, Any] = header["counts"]
            return counts

        def remember_times(self, *values: str | None) -> None:
            self.seen_times.extend(v for v in values if v)

        @initialize()
        def users_with_data_and_their_exports(self) -> None:
            for user in USERS:
                self.write(user, f"{user} likes green tea")
                self.export(user)

        @rule(user=st.sampled_from(USERS), text=st.text(min_size=1, max_size=40))
        def write(self, user: str, text: str) -> None:
            memory = self.call(
                "POST", f"/v1/users/{user}/memories", headers=self.agent, json={"text": text}
            )
            if memory.status_code == 201:
                self.remember_times(memory.json()["created_at"])
            thread = self.call("POST", f"/v1/users/{user}/threads", headers=self.agent, json={})
            assert thread.status_code == 201, thread.text
            self.call(
                "POST",
                f"/v1/users/{user}/threads/{thread.json()['id']}/messages",
                headers=self.agent,
                json={"messages": [{"role": "user", "content": text}]},
            )

        @rule(user=st.sampled_from(USERS))
        def export(self, user: str) -> None:
            response = self.call("GET", f"/v1/users/{user}/export", headers=self.admin)
            assert response.status_code in (200, 404), response.text
            if response.status_code == 200:
                self.exports[user] = response.text.splitlines()

        @rule(user=st.sampled_from(USERS))
        def purge(self, user: str) -> None:
            response = self.call("DELETE", f"/v1/admin/users/{user}", headers=self.admin)
            assert response.status_code in (200, 404), response.text
            if response.status_code == 200:
                assert response.json()["verified"] is True
                assert self.state_of(user) is None

        @precondition(lambda self: bool(self.exports))
        @rule(data=st.data())
        def import_untouched(self, data: st.DataObject) -> None:
            user = data.draw(st.sampled_from(sorted(self.exports)))
            lines = self.exports[user]
            if data.draw(st.booleans()):
                self.purge(user)
            before = self.state_of(user)
            response = self.call(
                "POST",
                f"/v1/admin/users/{user}/import",
                headers={**self.admin, **NDJSON},
                data="\n".join(lines) + "\n",
            )
            event(f"untouched import: {response.status_code}")
            if before is not None:
                assert response.status_code == 409, response.text
                assert self.state_of(user) == before
                return
            assert response.status_code == 200, response.text
            announced = {k: v for k, v in json.loads(lines[0])["counts"].items() if v}
            assert response.json()["imported"] == announced
            after = self.state_of(user)
            assert after is not None
            # The import's own audit entry is an `admin.*` one, which exports leave out.
            assert {k: v for k, v in after.items() if v} == announced

        @precondition(lambda self: bool(self.exports))
        @rule(data=st.data())
        def import_hostile(self, data: st.DataObject) -> None:
            user = data.draw(st.sampled_from(sorted(self.exports)))
            lines = list(self.exports[user])
            records = [(i, json.loads(line)) for i, line in enumerate(lines) if i > 0]
            candidates = [(i, r) for i, r in records if r["type"] in HOSTILE_COLUMNS]
            if not candidates:
                return
            index, record = data.draw(st.sampled_from(candidates))
            column = data.draw(st.sampled_from(HOSTILE_COLUMNS[record["type"]]))
            value = data.draw(st.one_of(times.map(json.dumps), json_values))
            lines[index] = splice(record, column, value)
            # Mostly into a purged user, so that the line checks run (not `USER_NOT_EMPTY`).
            if data.draw(st.integers(0, 3)):
                self.purge(user)
            before = self.state_of(user)
            response = self.call(
                "POST",
                f"/v1/admin/users/{user}/import",
                headers={**self.admin, **NDJSON},
                data=("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"),
            )
            event(f"hostile import: {response.status_code}")
            if response.status_code != 200:
                assert response.status_code in (409, 413, 422), response.text
                assert self.state_of(user) == before
            else:
                assert before is None
                # Accepted: every read of the user and the tenant answers.
                assert self.state_of(user) is not None
                for path in (f"/v1/users/{user}/memories", f"/v1/users/{user}/threads"):
                    assert self.call("GET", path, headers=self.agent).status_code == 200
                self.call("GET", "/v1/admin/users", headers=self.admin)

        def bound(self, data: st.DataObject) -> str | None:
            """A filter bound: a time the service answered, a hostile one, or none."""
            choices = [st.sampled_from(HOSTILE_TIMES), times, st.none()]
            if self.seen_times:
                choices.insert(1, st.sampled_from(self.seen_times))
            drawn: str | None = data.draw(st.one_of(*choices))
            return drawn

        @rule(data=st.data())
        def list_users(self, data: st.DataObject) -> None:
            after, before = self.bound(data), self.bound(data)
            params = {k: v for k, v in (("active_after", after), ("active_before", before)) if v}
            response = self.call("GET", "/v1/admin/users", headers=self.admin, params=params)
            event(f"user filter: {response.status_code}")
            if not all(_valid_time(v) for v in params.values()):
                assert response.status_code in (200, 422), response.text
                return
            assert response.status_code in (200, 422), response.text
            if response.status_code != 200:
                return
            for item in response.json()["items"]:
                self.remember_times(item["created_at"], item["last_active_at"])
                active = _time(item["last_active_at"])
                if after and active is not None:
                    assert active >= datetime.fromisoformat(after)
                if before and active is not None:
                    assert active < datetime.fromisoformat(before)

        @rule(data=st.data())
        def audit(self, data: st.DataObject) -> None:
            since, until = self.bound(data), self.bound(data)
            params = {k: v for k, v in (("since", since), ("until", until)) if v}
            response = self.call("GET", "/v1/admin/audit", headers=self.admin, params=params)
            event(f"audit filter: {response.status_code}")
            assert response.status_code in (200, 422), response.text
            if response.status_code != 200:
                return
            assert all(_valid_time(v) for v in params.values()), params
            for item in response.json()["items"]:
                self.remember_times(item["created_at"])
                created = datetime.fromisoformat(item["created_at"])
                if since:
                    assert created >= datetime.fromisoformat(since)
                if until:
                    assert created < datetime.fromisoformat(until)

        @invariant()
        def tenant_reads_answer(self) -> None:
            assert self.call("GET", "/v1/admin/users", headers=self.admin).status_code == 200

        def teardown(self) -> None:
            self.http.close()

    run_state_machine_as_test(
        ImportAndFilters,
        settings=run_settings(
            max_examples=MAX_EXAMPLES,
            stateful_step_count=12,
            derandomize=True,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        ),
    )
