"""Annotators: a Label Studio user each, plus what cultura needs to assign work (country, languages).

No password is ever stored. On a server whose data dir cultura reaches (the project's local one), each
annotator gets a blind account (:mod:`cultura.annotate.accounts`: an own organization, fenced from every
other) and their API token goes to ``.secrets/annotators.json`` (0600); set a password with ``cultura annotate
annotators password NAME`` (:func:`set_password`, run directly by Label Studio's Python on the data dir, ~3 s).
Elsewhere the user is created through the API in the admin's organization (not blind: ``blind`` is False).

>>> # add_annotator(project, "aiko", email="aiko@example.org", country="JP", languages=["ja", "en"])
"""
from __future__ import annotations

import json
import re
import secrets
from typing import TYPE_CHECKING

import httpx

from cultura.db import dumps, now, transaction
from cultura.errors import CulturaError, unknown
from cultura.names import label_name

from .accounts import blind_user, require_local, run_accounts
from .people import ensure_server, personal_servers, revoke, set_person_password
from .pull import pull
from .server import Connection, LabelStudioError, connect

if TYPE_CHECKING:
    from ..project import Project

EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
ROLES = ("annotator", "adjudicator")


def _row_out(r: dict) -> dict:
    return {"name": r["name"], "email": r["email"], "ls_user_id": r["ls_user_id"], "country": r["country"],
            "languages": json.loads(r["languages"] or "[]"), "role": r["role"], "active": bool(r["active"])}


def add_annotator(project: Project, name: str, *, email: str, country: str | None = None,
                  languages: list[str] | None = None, role: str = "annotator",
                  conn: Connection | None = None) -> dict:
    """Create (or find) the Label Studio user for ``email`` and record the annotator. Idempotent for the
    same name and email; reactivates a deactivated annotator."""
    name = label_name(name, what="annotator name", param="name")
    if not EMAIL_RE.match(email or ""):
        raise CulturaError(f"{email!r} is not an e-mail address; Label Studio users need one.", param="email")
    if role not in ROLES:
        raise CulturaError(f"Role {role!r} is not valid; use one of {', '.join(ROLES)}.", param="role")
    if country:
        country = project.registry.country(country).code
    langs = [l.strip().lower() for l in (languages or []) if l.strip()]
    if not langs and country:
        langs = list(project.registry.country(country).languages)
    db = project.db
    existing = list(db["annotators"].rows_where("name = ? or email = ?", [name, email]))
    for r in existing:
        if r["name"] != name or r["email"] != email:
            raise CulturaError(f"Annotator {r['name']!r} already uses e-mail {r['email']!r}; pick another "
                               "name or e-mail.")
    if personal_servers(project):   # a Label Studio server of their own: blind by construction
        # only once the project has its own Label Studio ('annotate server start'): a person's server is started
        # from its seed, and nothing is recorded before the one sentence that says what to run first
        connect(project, check=False)
        uid, url = (existing[0]["ls_user_id"] if existing else None), None
    else:
        conn = conn or connect(project)
        blind = blind_user(project, name, email)
        uid, url = (blind["user_id"] if blind else _ensure_user(conn, name, email)), conn.url
    row = {"name": name, "email": email, "ls_user_id": uid, "ls_url": url, "country": country,
           "languages": dumps(langs), "role": role, "active": 1, "updated_at": now()}
    with transaction(db):
        if existing:
            db["annotators"].update(existing[0]["id"], row)
        else:
            db["annotators"].insert({**row, "created_at": now()})
    out = db["annotators"].get(existing[0]["id"]) if existing else next(db["annotators"].rows_where("name = ?", [name]))
    if personal_servers(project):
        srv = ensure_server(project, out)
        return {**_row_out(out), "blind": True, "server": srv["url"]}
    return {**_row_out(out), "blind": blind is not None}


def set_password(project: Project, name: str, password: str | None = None) -> dict:
    """Set the Label Studio password of annotator ``name`` on the project's local server (its data dir under
    ``PROJECT/labelstudio``), by Label Studio's own Python with Django set up directly (~3 s; ``label-studio
    reset_password`` spent ~30 s starting the whole CLI, most of it before the one hash).
    A random password is generated when none is given; it is returned once and stored nowhere."""
    rows = list(project.db["annotators"].rows_where("name = ?", [name]))
    if not rows:
        known = [r["name"] for r in project.db["annotators"].rows()]
        raise CulturaError(f"No annotator {name!r}. Known: {', '.join(known) or 'none'} (add one with 'cultura "
                           "annotate annotators add NAME --email E').")
    password = password or secrets.token_urlsafe(12)
    if personal_servers(project):
        set_person_password(project, rows[0], password)
        return {"name": name, "email": rows[0]["email"], "password": password,
                "note": "shown once, stored nowhere: give it to the annotator"}
    ddir = require_local(project)
    run_accounts(project, [{"email": rows[0]["email"], "username": re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:150],
                            "password": password}], ddir)
    return {"name": name, "email": rows[0]["email"], "password": password,
            "note": "shown once, stored nowhere: give it to the annotator"}


def _ensure_user(conn: Connection, name: str, email: str) -> int:
    from label_studio_sdk.core.api_error import ApiError  # deferred: heavy optional dependency, loaded on first use

    try:
        for u in conn.client.users.list():
            if (u.email or "").lower() == email.lower():
                return u.id
        first, _, last = name.partition(" ")
        u = conn.client.users.create(username=re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:150], email=email,
                                     first_name=first, last_name=last)
        return u.id
    except httpx.HTTPError as e:
        raise LabelStudioError(f"Label Studio at {conn.url} does not answer ({type(e).__name__}); start "
                               "it with 'cultura annotate server start'.") from None
    except ApiError as e:
        raise LabelStudioError(f"Label Studio refused to create user {email!r} (HTTP {e.status_code}: "
                               f"{e.body}).") from None


def list_annotators(project: Project, *, include_inactive: bool = True) -> list[dict]:
    where = None if include_inactive else "active = 1"
    return [_row_out(r) for r in project.db["annotators"].rows_where(where, order_by="id")]


def get_annotators(project: Project, names: list[str] | None = None, *, role: str | None = None) -> list[dict]:
    """Active annotator rows (raw, with ids), optionally restricted to ``names``; unknown names fail."""
    rows = list(project.db["annotators"].rows_where("active = 1", order_by="id"))
    if role:
        rows = [r for r in rows if r["role"] == role]
    if names:
        by = {r["name"]: r for r in rows}
        missing = [n for n in names if n not in by]
        if missing:
            raise unknown("active annotator", missing[0], by, hint="Add one with 'cultura annotate "
                          "annotators add NAME --email E'.")
        rows = [by[n] for n in names]
    for r in rows:
        r["languages"] = json.loads(r["languages"] or "[]")
    return rows


def deactivate_annotator(project: Project, name: str) -> dict:
    """Mark an annotator inactive: no new assignments, their unanswered items go to others on the next push,
    and their access ends now (their account locked and their own server stopped, after a last pull of what
    they answered until then); their annotations are kept."""
    rows = list(project.db["annotators"].rows_where("name = ?", [name]))
    if not rows:
        raise unknown("annotator", name, [r["name"] for r in project.db["annotators"].rows])
    srv = revoke(project, rows[0], last_pull=lambda: pull(project, annotator_id=rows[0]["id"]))
    with transaction(project.db):
        project.db["annotators"].update(rows[0]["id"], {"active": 0, "updated_at": now()})
    return {**_row_out(project.db["annotators"].get(rows[0]["id"])), "access": "revoked" if srv else "unchanged"}


def known_annotator(db, *, email: str | None = None, ls_user_id: int | None = None) -> dict | None:
    """The annotator a Label Studio user is, or None: by e-mail first (the same person on any server), else by
    the Label Studio user id recorded when their account was made, but only when no e-mail says otherwise (an
    id alone names a user of this project's server; a different e-mail is a different person)."""
    if email:
        rows = list(db["annotators"].rows_where("lower(email) = ?", [email.lower()], limit=1))
        if rows:
            return rows[0]
    if ls_user_id is not None:
        rows = list(db["annotators"].rows_where("ls_user_id = ?", [int(ls_user_id)], order_by="id", limit=1))
        if rows and (not email or rows[0]["email"].lower() == email.lower()):
            return rows[0]
    return None


def external_annotator(db, email: str) -> dict:
    """The annotator row of a Label Studio user known only by ``email`` (answers imported from elsewhere):
    found, or created inactive with role ``external`` and named after the e-mail (``external-zoe``, a number
    added when that name is taken), so it is never assigned work and never mistaken for a known one."""
    found = known_annotator(db, email=email)
    if found is not None:
        return found
    base = "external-" + re.sub(r"[^A-Za-z0-9_.-]", "_", email.split("@")[0])[:60]
    taken = {r[0] for r in db.execute("SELECT name FROM annotators WHERE name LIKE ?", [base + "%"]).fetchall()}
    name = next(n for n in (base if i == 0 else f"{base}-{i + 1}" for i in range(len(taken) + 1)) if n not in taken)
    name = label_name(name, what="annotator name")
    with transaction(db):
        pk = db["annotators"].insert({"name": name, "email": email, "role": "external", "active": 0,
                                      "languages": "[]", "created_at": now()}).last_pk
    return db["annotators"].get(pk)

