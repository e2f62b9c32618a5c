"""A small local server that speaks the OpenAI chat-completions wire protocol (and /v1/embeddings,
/v1/models), for tests. Set ``stub.responder`` to ``f(request_json) -> str | dict`` (a string is the
assistant's message content; a dict is sent as the whole response body); requests are kept in
``stub.requests``. ``stub.reject_response_format = {"json_schema"}`` makes the server answer 400 to that
mode, like endpoints without structured output. ``stub.echo_headers = True`` makes planted failures echo
the request headers (Authorization included) in the error message, like some proxies do.
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class OpenAIStub:
    def __init__(self):
        self.requests: list[dict] = []
        self.responder = lambda req: "{}"
        self.reject_response_format: set[str] = set()
        self.fail_next: list[int] = []   # HTTP statuses to answer before behaving
        self.api_key = "sk-test-not-a-secret"
        self.echo_headers = False     # planted failures echo the request headers (a hostile server)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._server.shutdown()
        self._server.server_close()

    def chat_requests(self):
        return [r for r in self.requests if r["_path"].endswith("/chat/completions")]

    def _handler(self):
        stub = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, code, body):
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path.endswith("/models"):
                    return self._send(200, {"object": "list", "data": [{"id": "stub", "object": "model"}]})
                self._send(404, {"error": {"message": "not found"}})

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                req = json.loads(self.rfile.read(n) or b"{}")
                req["_path"] = self.path
                req["_auth"] = self.headers.get("Authorization", "")
                stub.requests.append(req)
                if req["_auth"] != f"Bearer {stub.api_key}" and not stub.echo_headers:  # an echoing proxy
                    return self._send(401, {"error": {"message": "bad key", "type": "invalid_request_error"}})
                if stub.fail_next:
                    msg = "planted failure"
                    if stub.echo_headers:
                        msg += "; request headers: " + "; ".join(f"{k}: {v}" for k, v in self.headers.items())
                    return self._send(stub.fail_next.pop(0), {"error": {"message": msg}})
                if self.path.endswith("/embeddings"):
                    inputs = req["input"] if isinstance(req["input"], list) else [req["input"]]
                    data = []
                    for i, x in enumerate(inputs):
                        h = hashlib.sha256(json.dumps(x).encode()).digest()
                        data.append({"object": "embedding", "index": i,
                                     "embedding": [b / 255.0 - 0.5 for b in h[:16]]})
                    return self._send(200, {"object": "list", "data": data, "model": req.get("model"),
                                            "usage": {"prompt_tokens": 0, "total_tokens": 0}})
                rf = (req.get("response_format") or {}).get("type")
                if rf in stub.reject_response_format:
                    return self._send(400, {"error": {"message": f"response_format {rf} not supported",
                                                      "type": "invalid_request_error"}})
                out = stub.responder(req)
                if isinstance(out, dict):
                    return self._send(200, out)
                self._send(200, {
                    "id": "chatcmpl-stub", "object": "chat.completion", "created": int(time.time()),
                    "model": req.get("model", "stub"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": out}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

        return H


def last_user_message(req: dict) -> str:
    """The text of the last user message (string or multi-part content)."""
    for m in reversed(req.get("messages", [])):
        if m["role"] == "user":
            c = m["content"]
            if isinstance(c, list):
                return "\n".join(p.get("text", "") for p in c if p.get("type") == "text")
            return c
    return ""


@pytest.fixture
def openai_stub(monkeypatch):
    """A running stub; OPENAI_BASE_URL and OPENAI_API_KEY point at it for the test."""
    stub = OpenAIStub().start()
    monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", stub.api_key)
    yield stub
    stub.stop()
