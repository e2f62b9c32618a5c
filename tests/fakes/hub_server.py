"""A local stand-in for the Hugging Face Hub: the endpoints ``HfApi.create_repo`` and ``upload_folder`` call.

Speaks, on 127.0.0.1, what ``huggingface_hub`` sends when it creates a dataset repo and uploads a folder:

- ``POST /api/repos/create`` (409 when it exists: ``exist_ok`` then reads on);
- ``POST /api/validate-yaml`` (the card's YAML; errors when ``license``/``configs`` are missing);
- ``POST /api/datasets/{owner}/{name}/preupload/{revision}``: every file is uploaded ``regular``
  (inline base64 in the commit; no LFS/Xet round trip);
- ``POST /api/datasets/{owner}/{name}/commit/{revision}``: the NDJSON commit (header + files), stored in
  ``repos[repo][path] = bytes``.

Every request is recorded (method, path, Authorization header) so a test can check the token was sent and
never appears anywhere else. Requests without the expected bearer token get 401.
"""
from __future__ import annotations

import base64
import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import yaml


class HubState:
    def __init__(self, token: str):
        self.token = token
        self.repos: dict[str, dict[str, bytes]] = {}
        self.private: dict[str, bool] = {}
        self.requests: list[dict] = []
        self.commits: list[dict] = []


def _handler(state: HubState):
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):  # quiet
            pass

        def _body(self) -> bytes:
            n = int(self.headers.get("Content-Length") or 0)
            if n:
                return self.rfile.read(n)
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                out = b""
                while True:
                    size = int(self.rfile.readline().strip() or b"0", 16)
                    if size == 0:
                        self.rfile.readline()
                        return out
                    out += self.rfile.read(size)
                    self.rfile.readline()
            return b""

        def _send(self, code: int, obj) -> None:
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _auth_ok(self) -> bool:
            return self.headers.get("Authorization") == f"Bearer {state.token}"

        def do_GET(self):  # noqa: N802
            body = self._body()
            state.requests.append({"method": "GET", "path": self.path, "auth": self.headers.get("Authorization"),
                                   "body": body})
            self._send(404, {"error": f"not served by the fake Hub: GET {self.path}"})

        def do_POST(self):  # noqa: N802
            body = self._body()
            path = self.path.split("?")[0]
            state.requests.append({"method": "POST", "path": path, "auth": self.headers.get("Authorization"),
                                   "body": body})
            if not self._auth_ok():
                return self._send(401, {"error": "Invalid credentials in Authorization header"})
            base = f"http://{self.headers.get('Host')}"
            if path == "/api/repos/create":
                req = json.loads(body)
                repo = f"{req.get('organization') or 'user'}/{req['name']}"
                if req.get("type") != "dataset":
                    return self._send(400, {"error": "this fake Hub serves dataset repos only"})
                if repo in state.repos:
                    return self._send(409, {"error": "You already created this dataset repo",
                                            "url": f"{base}/datasets/{repo}"})
                state.repos[repo] = {}
                state.private[repo] = bool(req.get("private")) or req.get("visibility") == "private"
                return self._send(200, {"url": f"{base}/datasets/{repo}", "name": repo, "id": repo})
            if path == "/api/validate-yaml":
                req = json.loads(body)
                text = req["content"]
                errors = []
                if not text.startswith("---\n"):
                    errors.append({"message": "no YAML header"})
                else:
                    meta = yaml.safe_load(text.split("---\n")[1]) or {}
                    for key in ("license", "configs", "language"):
                        if key not in meta:
                            errors.append({"message": f"missing {key}"})
                return self._send(400 if errors else 200, {"errors": errors, "warnings": []})
            parts = path.strip("/").split("/")
            # /api/datasets/{owner}/{name}/{preupload|commit}/{revision}
            if len(parts) >= 6 and parts[:2] == ["api", "datasets"]:
                repo, action = f"{parts[2]}/{parts[3]}", parts[4]
                if repo not in state.repos:
                    return self._send(404, {"error": "Repository not found"})
                if action == "preupload":
                    files = json.loads(body)["files"]
                    return self._send(200, {"files": [{"path": f["path"], "uploadMode": "regular",
                                                       "shouldIgnore": False} for f in files]})
                if action == "commit":
                    lines = [json.loads(x) for x in body.decode().splitlines() if x.strip()]
                    header = next(x["value"] for x in lines if x["key"] == "header")
                    n = 0
                    for x in lines:
                        if x["key"] == "file":
                            v = x["value"]
                            state.repos[repo][v["path"]] = base64.b64decode(v["content"])
                            n += 1
                        elif x["key"] in ("lfsFile", "deletedFile", "deletedFolder"):
                            return self._send(400, {"error": f"{x['key']} is not served by the fake Hub"})
                    oid = hashlib.sha1(body).hexdigest()
                    state.commits.append({"repo": repo, "summary": header.get("summary"), "files": n, "oid": oid})
                    return self._send(200, {"commitUrl": f"{base}/datasets/{repo}/commit/{oid}",
                                            "commitOid": oid, "pullRequestUrl": None})
            self._send(404, {"error": f"not served by the fake Hub: POST {path}"})

    return H


class FakeHub:
    """``with FakeHub(token) as hub:`` → ``hub.url`` (set ``HF_ENDPOINT`` to it), ``hub.state``."""

    def __init__(self, token: str = "hf_fake_token_0123456789"):
        self.state = HubState(token)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.state))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeHub:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
