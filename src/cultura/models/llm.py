"""LLM calls through the ``openai`` SDK to any OpenAI-compatible endpoint.

Prompts are Jinja templates in ``templates/prompts/``. Replies are asked for as JSON (``response_format``
``json_schema`` where the endpoint supports it, else ``json_object``, else plain text), validated with
pydantic, and retried with the validation error appended; after ``llm.max_attempts`` failures the raw reply
and the error are stored in ``llm_calls`` and the caller gets ``None`` — one bad reply never ends a run.

Credentials: ``OPENAI_API_KEY`` from the environment, or a 0600 file named by ``OPENAI_API_KEY_FILE``. They
are never stored in the database or logged.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit


from ..db import dumps, now, transaction
from ..errors import CulturaError
from ..names import check_endpoint_url
from ..redact import scrub, strip_userinfo
from ..templates import render_template
from ..lazy import lazy

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ..project import Project

pydantic = lazy("pydantic")  # imported by the first reply checked against a schema (start-up: status counts calls)

T = TypeVar("T", bound="BaseModel")


class LLMUnavailable(CulturaError):
    """No endpoint or key configured, or the endpoint refuses every call."""


def render_prompt(template: str, **variables: Any) -> str:
    """Render ``templates/prompts/<template>`` with strict variables (a missing one is an error)."""
    return render_template(f"prompts/{template}", **variables).strip()


def api_key() -> str:
    """The API key from ``OPENAI_API_KEY`` or the 0600 file at ``OPENAI_API_KEY_FILE``."""
    key = os.environ.get("OPENAI_API_KEY")
    if key:
        return key
    path = os.environ.get("OPENAI_API_KEY_FILE")
    if path:
        p = Path(path).expanduser()
        if not p.exists():
            raise LLMUnavailable(f"OPENAI_API_KEY_FILE={path} does not exist. Point it at a file holding the key.")
        mode = stat.S_IMODE(p.stat().st_mode)
        if mode & 0o077:
            raise LLMUnavailable(f"{path} is readable by others (mode {oct(mode)}). Run 'chmod 600 {path}'.")
        return p.read_text().strip()
    raise LLMUnavailable("No API key: set OPENAI_API_KEY (or OPENAI_API_KEY_FILE to a 0600 file) and, for a "
                         "non-OpenAI server, OPENAI_BASE_URL.")


def base_url(explicit: str | None = None) -> str | None:
    """The endpoint: ``explicit`` (config or option), else ``OPENAI_BASE_URL``, else the SDK default. A URL
    that does not parse is one sentence naming where it came from (:func:`cultura.names.check_endpoint_url`)."""
    if explicit:
        return check_endpoint_url(explicit, source="llm.base_url", param="base_url")
    env = os.environ.get("OPENAI_BASE_URL")
    return check_endpoint_url(env, source="OPENAI_BASE_URL") if env else None


def make_client(url: str | None = None, *, timeout: float = 60.0):
    """An ``openai.OpenAI`` client for any OpenAI-compatible endpoint, with the key from :func:`api_key`."""
    import openai  # deferred: heavy optional dependency, loaded on first use

    return openai.OpenAI(api_key=api_key(), base_url=base_url(url), timeout=timeout, max_retries=2)


class OpenAIEndpoint:
    """Mixin for classes that talk to an OpenAI-compatible endpoint and set ``base_url``, ``timeout`` and
    ``_client``: a lazily created client, and the endpoint's host for model identities."""

    base_url: str | None
    timeout: float
    _client = None

    @property
    def host(self) -> str:

        # the endpoint's host[:port] only: never the user:password@ a base URL may carry
        if not self.base_url:
            return "api.openai.com"
        return urlsplit(strip_userinfo(check_endpoint_url(self.base_url, source="base_url", param="base_url"))).netloc

    @property
    def client(self):
        if self._client is None:
            self._client = make_client(self.base_url, timeout=self.timeout)
        return self._client


_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)


def extract_json(text: str) -> Any:
    """Parse a JSON reply, tolerating a Markdown code fence or prose around one JSON object."""
    t = (text or "").strip()
    m = _FENCE.match(t)
    if m:
        t = m.group(1)
    try:
        return json.loads(t)
    except json.JSONDecodeError:
        start, end = t.find("{"), t.rfind("}")
        if start != -1 and end > start:
            return json.loads(t[start:end + 1])
        raise


class LLM:
    """A JSON-returning chat client bound to a project (for logging calls in ``llm_calls``)."""

    def __init__(self, project: Project, *, model: str | None = None, client=None):
        self.project = project
        self.cfg = project.config.llm
        self.model = model or self.cfg.model
        self._client = client
        self._json_mode = self.cfg.json_mode

    @property
    def client(self):
        if self._client is None:
            self._client = make_client(self.cfg.base_url, timeout=self.cfg.timeout)
        return self._client

    def _create(self, messages, schema: type[BaseModel] | None, **extra):
        import openai  # deferred: heavy optional dependency, loaded on first use

        modes = [self._json_mode] if self._json_mode != "auto" else ["json_schema", "json_object", "none"]
        last = None
        for mode in modes:
            kwargs = dict(model=self.model, messages=messages, temperature=extra.get("temperature",
                                                                                     self.cfg.temperature))
            if mode == "json_schema" and schema is not None:
                kwargs["response_format"] = {"type": "json_schema", "json_schema": {
                    "name": schema.__name__, "schema": schema.model_json_schema()}}
            elif mode == "json_object":
                kwargs["response_format"] = {"type": "json_object"}
            try:
                resp = self.client.chat.completions.create(**kwargs)
                self._json_mode = mode  # remember what this endpoint accepts
                return resp
            except openai.BadRequestError as e:  # endpoint does not support this response_format
                last = e
                continue
            except openai.AuthenticationError:
                raise LLMUnavailable("The LLM endpoint rejected the API key. Check OPENAI_API_KEY.") from None
            except openai.NotFoundError:
                raise LLMUnavailable(f"The LLM endpoint does not know model {self.model!r}. Set llm.model in "
                                     "cultura.toml or pass --model.") from None
            except openai.APIConnectionError:
                base = strip_userinfo(self.cfg.base_url or os.environ.get("OPENAI_BASE_URL")) or "the OpenAI API"
                raise LLMUnavailable(f"Cannot reach the LLM endpoint at {base}. Check OPENAI_BASE_URL and "
                                     "your network.") from None
        raise last

    def json_call(self, *, stage: str, schema: type[T], template: str | None = None,
                  variables: dict | None = None, messages: list[dict] | None = None,
                  run_id: int | None = None, system: str | None = None) -> tuple[T | None, int]:
        """Ask for a JSON reply matching ``schema``; retry with the validation error; log every call.

        Returns ``(parsed, llm_calls.id)``; ``parsed`` is None when every attempt failed (the raw reply and
        the error are stored in ``llm_calls`` with status ``invalid`` or ``error``).
        """
        import openai  # deferred: heavy optional dependency, loaded on first use

        if messages is None:
            prompt = render_prompt(template, **(variables or {}))
            messages = ([{"role": "system", "content": system}] if system else []) + \
                [{"role": "user", "content": prompt}]
        convo = list(messages)
        reply, error, status = None, None, "error"
        attempts = 0
        for attempts in range(1, self.cfg.max_attempts + 1):
            try:
                resp = self._create(convo, schema)
            except openai.APIError as e:
                error, status = scrub(f"{type(e).__name__}: {e}"), "error"
                continue
            reply = (resp.choices[0].message.content or "") if resp.choices else ""
            try:
                obj = schema.model_validate(extract_json(reply))
            except (json.JSONDecodeError, pydantic.ValidationError, ValueError) as e:
                error, status = _short_error(e), "invalid"
                convo = list(messages) + [
                    {"role": "assistant", "content": reply},
                    {"role": "user", "content": "Your reply was not valid: " + error +
                     "\nReply again with only the corrected JSON."}]
                continue
            return obj, self._log(stage, messages, reply, "ok", None, attempts, run_id)
        return None, self._log(stage, messages, reply, status, error, attempts, run_id)

    def _log(self, stage, messages, reply, status, error, attempts, run_id) -> int:
        db = self.project.db
        messages = _strip_data_urls(messages)
        with transaction(db):
            return db["llm_calls"].insert({
                "run_id": run_id, "stage": stage, "model": self.model,
                "request": dumps({"messages": messages}), "reply": scrub(reply), "status": status,
                "error": scrub(error), "attempts": attempts, "created_at": now()}).last_pk


def _short_error(e: Exception) -> str:
    if isinstance(e, pydantic.ValidationError):
        parts = [f"{'.'.join(map(str, err['loc'])) or 'root'}: {err['msg']}" for err in e.errors()[:5]]
        return "JSON does not match the schema (" + "; ".join(parts) + ")"
    if isinstance(e, json.JSONDecodeError):
        return f"not JSON ({e.msg} at position {e.pos})"
    return str(e)


def _strip_data_urls(obj):
    """Replace inline images (data URLs) by a short placeholder before a request is logged."""

    if isinstance(obj, str) and obj.startswith("data:") and ";base64," in obj[:100]:
        return f"<data-url {len(obj)} chars sha256={hashlib.sha256(obj.encode()).hexdigest()[:16]}>"
    if isinstance(obj, list):
        return [_strip_data_urls(x) for x in obj]
    if isinstance(obj, dict):
        return {k: _strip_data_urls(v) for k, v in obj.items()}
    return obj


# ------------------------------------------------------------------ the call log read back

def call_outcome(db, call_id: int) -> tuple[str | None, int]:
    """``(error, attempts)`` of a logged call (the error is None for a call that succeeded)."""
    row = db.execute("SELECT error, attempts FROM llm_calls WHERE id = ?", [call_id]).fetchone()
    return (row[0], row[1]) if row else (None, 0)


def call_counts(db) -> dict[str, int]:
    """Logged calls per status (``ok``, ``invalid``, ``error``)."""
    return _group(db, "SELECT status, count(*) FROM llm_calls GROUP BY status")


def failed_calls_by_stage(db) -> dict[str, int]:
    """Calls that did not end ``ok``, per stage."""
    return _group(db, "SELECT stage, count(*) FROM llm_calls WHERE status != 'ok' GROUP BY stage")


def _group(db, sql) -> dict:
    return {r[0] if r[0] is not None else "(none)": r[1] for r in db.execute(sql).fetchall()}
