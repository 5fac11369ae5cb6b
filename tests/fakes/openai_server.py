"""A small OpenAI-compatible `/v1/chat/completions` server on 127.0.0.1, run in a thread.

The real `openai` client talks to it over HTTP, so its whole code path (request building,
retries, timeouts, response parsing) runs in tests. By default it answers Structured Outputs
requests for thread summaries with one entry per transcript line, and extraction and compaction
requests (told apart by their schema name) with an empty proposal; `mode` switches to other
answers, `fail_next` makes the next requests fail first, `hold` keeps replies back until
`release()`, and `reply` overrides everything for one test. `ScriptedExtraction` is a
deterministic extraction model answering from the request itself (facts per phrase of the new
user messages, `supersedes` by fragments of the current facts shown), and `omit_supersedes`
empties every extraction reply's `supersedes`, as real models often do. Every request is
recorded.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

API_KEY = "test-llm-key"
MODEL = "fake-chat-model"

Mode = Literal[
    "summarize",  # one entry per JSONL line: the user's words, the replies, refs ["#N"]
    "empty",  # {"entries": []}
    "malformed",  # content that is not JSON
    "schema_violation",  # JSON with an unknown field and a missing one
    "refusal",  # a Structured Outputs refusal
    "truncated",  # finish_reason "length"
    "fail",  # HTTP 500
    "hang",  # no answer until released (or 30 s)
]
Reply = tuple[int, dict[str, Any]]


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def system(self) -> str:
        return str(self.body["messages"][0]["content"])

    @property
    def user(self) -> str:
        return str(self.body["messages"][-1]["content"])

    @property
    def schema_name(self) -> str | None:
        """The name of the requested Structured Outputs schema, if any."""
        response_format = self.body.get("response_format") or {}
        name = (response_format.get("json_schema") or {}).get("name")
        return str(name) if name is not None else None

    def transcript(self) -> list[dict[str, Any]]:
        """The JSONL transcript of a summary request, one dict per line."""
        return [json.loads(line) for line in self.user.splitlines()]


def completion(
    content: str | None, *, finish_reason: str = "stop", refusal: str | None = None
) -> Reply:
    """A 200 chat completion carrying `content`."""
    return 200, {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": refusal},
                "finish_reason": finish_reason,
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


EMPTY_EXTRACTION: dict[str, Any] = {"facts": [], "remove": [], "episode": None, "profile": []}


def extraction(
    facts: list[dict[str, Any]] | None = None,
    *,
    remove: list[str] | None = None,
    episode: str | None = None,
    profile: list[dict[str, Any]] | None = None,
) -> Reply:
    """A completion carrying an extraction proposal."""
    return completion(
        json.dumps(
            {
                "facts": facts or [],
                "remove": remove or [],
                "episode": episode,
                "profile": profile or [],
            }
        )
    )


def summary_entries(request: RecordedRequest) -> list[dict[str, Any]]:
    """The default summary: per turn, the user's words as question, the replies as answer."""
    entries = []
    for line in request.transcript():
        messages = line["messages"]
        question = " ".join(m["content"] for m in messages if m["role"] == "user")
        answer = " ".join(m["content"] for m in messages if m["role"] != "user")
        entries.append({"question": question, "answer": answer, "refs": [line["id"]]})
    return entries


NEW_MESSAGES_HEADING = "## New messages (extract from these)"


def new_user_messages(request: RecordedRequest) -> list[str]:
    """The contents of the new user messages an extraction request asks about."""
    section = request.user.split(NEW_MESSAGES_HEADING + "\n")[-1]
    lines = [json.loads(line) for line in section.splitlines() if line.startswith("{")]
    return [str(line["content"]) for line in lines if line.get("role") == "user"]


def shown_fact_lines(request: RecordedRequest) -> list[dict[str, Any]]:
    """The current facts an extraction request showed (JSON lines under `## Current facts`)."""
    lines = request.user.split("\n\n")[0].splitlines()[1:]
    return [json.loads(line) for line in lines if line.startswith("{")]


@dataclass
class ScriptedExtraction:
    """An extraction model from a script: for every new user message containing a phrase
    (case-insensitive), the facts listed for it. A fact's `supersedes` holds fragments of
    current facts' texts, answered as the ids shown for the facts containing them."""

    script: list[tuple[str, list[dict[str, Any]]]]

    def __call__(self, request: RecordedRequest) -> Reply:
        if request.schema_name != "memory_extraction":
            return completion(json.dumps({"entries": summary_entries(request)}))
        shown = shown_fact_lines(request)
        facts: list[dict[str, Any]] = []
        for message in new_user_messages(request):
            for phrase, proposed in self.script:
                if phrase.casefold() not in message.casefold():
                    continue
                for proposal in proposed:
                    fragments = proposal.get("supersedes", [])
                    ids = [f["id"] for f in shown for part in fragments if part in f["text"]]
                    facts.append({**proposal, "supersedes": ids})
        return extraction(facts)


@dataclass
class FakeOpenAIServer:
    """Behaviour switches are read per request, so a test may flip them at any time."""

    mode: Mode = "summarize"
    fail_next: int = 0
    hold: bool = False
    reply: Callable[[RecordedRequest], Reply] | None = None
    omit_supersedes: bool = False
    requests: list[RecordedRequest] = field(default_factory=list)
    _released: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _httpd: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> None:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()

    def stop(self) -> None:
        self._released.set()
        assert self._httpd is not None
        self._httpd.shutdown()
        self._httpd.server_close()

    def hold_back(self) -> None:
        """Keep replies back from now until `release()` (also after an earlier release)."""
        self._released.clear()
        self.hold = True

    def release(self) -> None:
        """Let held (and hanging) requests answer."""
        self.hold = False
        self._released.set()

    def respond(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            failing = self.fail_next > 0
            self.fail_next = max(self.fail_next - 1, 0)
        if self.hold or self.mode == "hang":
            self._released.wait(timeout=30)
        if request.headers.get("authorization") != f"Bearer {API_KEY}":
            return 401, {"error": {"message": "Incorrect API key", "type": "invalid_request"}}
        if failing or self.mode == "fail":
            return 500, {"error": {"message": "The server had an error", "type": "server_error"}}
        if self.reply is not None:
            status, payload = self.reply(request)
            if self.omit_supersedes and request.schema_name == "memory_extraction":
                return status, _without_supersedes(payload)
            return status, payload
        match self.mode:
            case "empty":
                return completion(json.dumps({"entries": []}))
            case "malformed":
                return completion('{"entries": [{"question": "unterminated')
            case "schema_violation":
                return completion(
                    json.dumps({"entries": [{"question": "q", "answer": "a", "extra": 1}]})
                )
            case "refusal":
                return completion(None, refusal="I can't help with that.")
            case "truncated":
                return completion('{"entries": [', finish_reason="length")
            case _ if request.schema_name == "memory_extraction":
                return completion(json.dumps(EMPTY_EXTRACTION))
            case _ if request.schema_name == "memory_compaction":
                return completion(json.dumps({"facts": []}))
            case _:
                return completion(json.dumps({"entries": summary_entries(request)}))


def _without_supersedes(payload: dict[str, Any]) -> dict[str, Any]:
    """An extraction completion whose facts name no fact they replace."""
    message = payload["choices"][0]["message"]
    proposal = json.loads(message["content"])
    for proposed in proposal.get("facts", []):
        proposed["supersedes"] = []
    message["content"] = json.dumps(proposal)
    return payload


def _handler_for(server: FakeOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            headers = {name.lower(): value for name, value in self.headers.items()}
            if self.path != "/v1/chat/completions":
                status, payload = 404, {"error": {"message": "no such route"}}
            else:
                status, payload = server.respond(RecordedRequest(self.path, headers, body))
            encoded = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(encoded)))
            # Lets the client's retries proceed at once instead of backing off for seconds.
            self.send_header("retry-after-ms", "1")
            self.end_headers()
            # The client may have given up waiting (the timeout tests).
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(encoded)

        def log_message(self, format: str, *args: Any) -> None:
            """Keep test output quiet."""

    return Handler
