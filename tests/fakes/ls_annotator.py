"""An annotator working in Label Studio through its HTTP API with their OWN login, not the admin's.

``AnnotatorSession.login(url, email, password)`` logs in through Label Studio's login form (a session cookie
and its CSRF token, as the browser does), so every request afterwards is what that user may do; ``token()``
reads their own API token the way the Account page does. ``answer(task_id, result, lead_time)`` submits an
annotation as that user; ``try_get(path)`` returns the HTTP status of a request typed by hand.

>>> # a = AnnotatorSession.login(ls.url, "ann@x.org", pw); a.my_tasks(); a.answer(t, result, 4.0)
"""
from __future__ import annotations

import re

import httpx


class AnnotatorSession:
    def __init__(self, url: str, client: httpx.Client):
        self.url = url.rstrip("/")
        self.http = client

    @classmethod
    def login(cls, url: str, email: str, password: str) -> "AnnotatorSession":
        c = httpx.Client(base_url=url.rstrip("/"), timeout=120, follow_redirects=False)
        page = c.get("/user/login/")
        m = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        csrf = m.group(1) if m else c.cookies.get("csrftoken", "")
        r = c.post("/user/login/", data={"email": email, "password": password, "csrfmiddlewaretoken": csrf,
                                         "persist_session": "on"},
                   headers={"Referer": url.rstrip("/") + "/user/login/"})
        me = c.get("/api/current-user/whoami")   # a session cookie alone may be an anonymous one
        if me.status_code != 200 or (me.json().get("email") or "").lower() != email.lower():
            c.close()
            raise AssertionError(f"login as {email} failed (HTTP {r.status_code}, whoami {me.status_code})")
        return cls(url, c)

    def _headers(self) -> dict:
        return {"X-CSRFToken": self.http.cookies.get("csrftoken", ""), "Referer": self.url + "/"}

    def get(self, path: str, **params) -> httpx.Response:
        return self.http.get(path, params=params)

    def post(self, path: str, json: dict) -> httpx.Response:
        return self.http.post(path, json=json, headers=self._headers())

    def whoami(self) -> dict:
        return self.get("/api/current-user/whoami").json()

    def token(self) -> str:
        return self.get("/api/current-user/token").json()["token"]

    def projects(self) -> list[dict]:
        r = self.get("/api/projects", page_size=1000)
        r.raise_for_status()
        body = r.json()
        return body["results"] if isinstance(body, dict) else body

    def tasks(self, project_id: int) -> list[dict]:
        r = self.get("/api/tasks", project=project_id, page_size=1000)
        if r.status_code >= 400:
            return []
        body = r.json()
        return body.get("tasks", []) if isinstance(body, dict) else body

    def my_tasks(self) -> list[dict]:
        return [t for p in self.projects() for t in self.tasks(p["id"])]

    def answer(self, task_id: int, result: list, lead_time: float) -> dict:
        r = self.post(f"/api/tasks/{task_id}/annotations", {"result": result, "lead_time": lead_time})
        assert r.status_code == 201, (r.status_code, r.text[:300])
        return r.json()

    def try_get(self, path: str, **params) -> int:
        return self.get(path, **params).status_code

    def close(self) -> None:
        self.http.close()
