"""A tiny OpenAI-compatible `/v1/embeddings` server on 127.0.0.1, run in a thread.

It answers with deterministic vectors derived from each input's text, records every request,
and can be told to fail, to hang until released, or to return vectors of another size.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

API_KEY = "test-key"


def fake_vector(text: str, dims: int) -> list[float]:
    """The raw (not unit-length) vector the server returns for `text`."""
    digest = hashlib.sha256(text.encode()).digest()
    return [float(digest[i % len(digest)] - 100 + i) for i in range(dims)]


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class FakeEmbeddingsServer:
    """Behaviour switches are read per request, so a test may flip them at any time."""

    native_dims: int = 8
    fail_next: int = 0
    fail_always: bool = False
    hang: bool = False
    requests: list[RecordedRequest] = field(default_factory=list)
    released: threading.Event = field(default_factory=threading.Event)
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
        # A short poll keeps shutdown() (which waits for the next poll) from slowing each test.
        threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()

    def stop(self) -> None:
        self.released.set()
        assert self._httpd is not None
        self._httpd.shutdown()
        self._httpd.server_close()

    def respond(self, request: RecordedRequest) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append(request)
            failing = self.fail_always or self.fail_next > 0
            self.fail_next = max(self.fail_next - 1, 0)
        if self.hang:
            self.released.wait(timeout=30)
        if request.headers.get("authorization") != f"Bearer {API_KEY}":
            return 401, {"error": {"message": "Incorrect API key", "type": "invalid_request"}}
        if failing:
            return 500, {"error": {"message": "The server had an error", "type": "server_error"}}
        inputs = request.body["input"]
        if any(text == "" for text in inputs):
            return 400, {"error": {"message": "'$.input' is invalid", "type": "invalid_request"}}
        dims = request.body.get("dimensions", self.native_dims)
        data = [
            {"object": "embedding", "index": index, "embedding": fake_vector(text, dims)}
            for index, text in enumerate(inputs)
        ]
        # Out of order on purpose: clients must place vectors by their index.
        data.reverse()
        usage = {"prompt_tokens": len(inputs), "total_tokens": len(inputs)}
        return 200, {
            "object": "list",
            "data": data,
            "model": request.body["model"],
            "usage": usage,
        }


def _handler_for(server: FakeEmbeddingsServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            headers = {name.lower(): value for name, value in self.headers.items()}
            if self.path != "/v1/embeddings":
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
            # The client may have given up waiting (the timeout test).
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(encoded)

        def log_message(self, format: str, *args: Any) -> None:
            """Keep test output quiet."""

    return Handler
