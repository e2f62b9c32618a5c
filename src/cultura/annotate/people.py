"""A Label Studio server per annotator: blind by construction, whatever routes Label Studio has.

Label Studio Community has no per-user permissions: inside one server every logged-in user reaches routes
nobody listed (drafts of any task, moving any user to another organization, predictions on any task). So each
annotator and adjudicator works on a server of their own — their own process, data dir
(``PROJECT/labelstudio-people/a<ID>/``) and loopback port, started in seconds from cultura's cached migrated
database (:func:`cultura.annotate.server.seed_cache`) — holding only their own projects. No request of theirs
can reach anyone else's data, because nobody else's data is on that server; their login does not exist on
any other server.

cultura holds each server's admin credentials (``.secrets/servers.json``, mode 0600; the manager's e-mail and
password are the same on every server, each server has its own API token) and works there as that admin. The
manager logs into any annotator's server with those credentials and sees that annotator's campaign projects;
``cultura annotate server status`` lists every server. Deactivating an annotator locks their account (inactive,
tokens and sessions deleted) and stops their server: their access ends at once.

Where (``annotator_servers``, a row per annotator, no secrets): data dir, port (kept across restarts, so the
image server's CORS origin stays right), URL, the annotator's user id there, ``active`` or ``revoked``.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import socket
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from cultura.db import now, transaction
from cultura.errors import CulturaError
from cultura.progress import Progress, task, waiting
from cultura.redact import register_secret

from . import server as shared
from .server import (DJANGO_PREAMBLE, QUIET_ENV, Connection, LabelStudioError, _alive, adopt_seed, find_executable,
                     free_port, launch_ready, ls_python, make_private, read_secrets, secrets_path, seed_cache,
                     stop_process, write_private_json)

if TYPE_CHECKING:
    from ..project import Project

PEOPLE_REL = "labelstudio-people"
SERVERS_NAME = "servers.json"
STATE_NAME = "server.json"          # the pid of the running process (no secrets)

#: What a team whose Label Studio cultura does not run gets told at ``annotate server`` and push time.
SHARED_SERVER_NOTE = (
    "Label Studio at {url} is not run by cultura, so every annotator works on that one server. Label Studio "
    "Community has no per-user permissions: any logged-in annotator can read other users' drafts "
    "(/api/tasks/<id>/drafts), move users between organizations and write tasks and predictions into others' "
    "projects, so annotators are NOT blind to each other there, and a deactivated annotator keeps their login "
    "until an admin locks it in Label Studio. What still holds: cultura pulls each project's answers by user, "
    "keeps every version and computes agreement as usual. For blind annotators run 'cultura annotate server "
    "start' on this machine (a Label Studio server per annotator).")

#: Run by Label Studio's Python on one annotator's data dir: make (or update, or lock) the annotator's account
#: as a member of the server's one organization. Reads JSON on stdin, writes JSON on stdout (an API token
#: never leaves the script: cultura works as the server's admin).
MEMBER_SCRIPT = DJANGO_PREAMBLE + r'''
from django.contrib.sessions.models import Session
from django.db import transaction
from organizations.models import Organization
from rest_framework.authtoken.models import Token
from users.models import User

req = json.load(sys.stdin)
with transaction.atomic():
    email = req["email"].lower()
    user = User.objects.filter(email__iexact=email).first()
    if user is None:
        user = User.objects.create_user(email=email, password=req.get("password"), username=req["username"],
                                        first_name=req.get("first_name", ""), last_name=req.get("last_name", ""))
    elif req.get("password"):
        user.set_password(req["password"])
    admin = User.objects.get(email__iexact=req["admin"])
    org = admin.active_organization or Organization.objects.first()
    if org.created_by_id != admin.id:   # a seed's creator is locked; Label Studio exports with the creator's token
        org.created_by = admin
        org.save(update_fields=["created_by"])
    Token.objects.get_or_create(user=admin)
    if not org.has_user(user):
        org.add_user(user)
    user.active_organization = org
    user.is_active = bool(req["active"])
    user.save()
    jwt = org.jwt   # cultura works with the admin's legacy token
    if not (jwt.api_tokens_enabled and jwt.legacy_api_tokens_enabled):
        jwt.api_tokens_enabled = jwt.legacy_api_tokens_enabled = True
        jwt.save()
    if not req["active"]:   # locked out at once: no token, no session, no refresh token
        Token.objects.filter(user=user).delete()
        for s in Session.objects.all():
            if str(s.get_decoded().get("_auth_user_id")) == str(user.id):
                s.delete()
        try:
            from rest_framework_simplejwt.token_blacklist.models import BlacklistedToken, OutstandingToken
            for t in OutstandingToken.objects.filter(user=user):
                BlacklistedToken.objects.get_or_create(token=t)
        except Exception:
            pass
print("@@" + json.dumps({"user_id": user.id}))
'''


# ------------------------------------------------------------------------------------------- where

def personal_servers(project: Project) -> bool:
    """Whether cultura runs Label Studio on this machine for this project (no ``LABEL_STUDIO_URL``; the project's
    own server, or one recorded with its data dir): then every annotator gets a server of their own."""
    if os.environ.get("LABEL_STUDIO_URL"):
        return False
    sec = read_secrets(project) or {}
    return not sec.get("external") or bool(sec.get("data_dir"))


def isolation_note(project: Project) -> str | None:
    """None when annotators are isolated by construction (a server each); else what holds and what does not."""
    if personal_servers(project):
        return None
    url = os.environ.get("LABEL_STUDIO_URL") or (read_secrets(project) or {}).get("url") or "(not configured)"
    return SHARED_SERVER_NOTE.format(url=url)


def _dir(project: Project, annotator_id: int) -> Path:
    return project.root / PEOPLE_REL / f"a{int(annotator_id)}"


def server_row(project: Project, annotator_id: int) -> dict | None:
    if "annotator_servers" not in project.db.table_names():
        return None
    rows = list(project.db["annotator_servers"].rows_where("annotator_id = ?", [annotator_id]))
    return rows[0] if rows else None


# ------------------------------------------------------------------------------------------ secrets

def _servers_path(project: Project) -> Path:
    return secrets_path(project).parent / SERVERS_NAME


def _credentials(project: Project, annotator_id: int) -> dict:
    """The admin credentials of an annotator's server: the manager's e-mail and password (one login for every
    server), an API token of this server's own."""
    p = _servers_path(project)
    data = json.loads(p.read_text(encoding="utf-8")) if p.exists() else {}
    changed = False
    if "manager" not in data:
        main = read_secrets(project) or {}
        data["manager"] = ({"username": main["username"], "password": main["password"]} if main.get("password")
                           else {"username": f"manager@{re.sub(r'[^a-z0-9-]', '-', project.root.name.lower()) or 'cultura'}.local",
                                 "password": secrets.token_urlsafe(18)})
        changed = True
    key = f"a{int(annotator_id)}"
    if key not in data:
        data[key] = {"api_key": secrets.token_hex(20)}
        changed = True
    if changed:
        write_private_json(p, data)
    creds = {**data["manager"], **data[key]}
    register_secret(creds["password"])
    register_secret(creds["api_key"])
    return creds


def manager_login(project: Project, annotator_id: int) -> dict:
    """The manager's e-mail and password on an annotator's server (the same on every one; for the manager only,
    never logged) and where that server answers."""
    creds = _credentials(project, annotator_id)
    row = server_row(project, annotator_id)
    return {"url": row["url"] if row else None, "username": creds["username"], "password": creds["password"]}


# ------------------------------------------------------------------------------------------ running

def _port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _running(d: Path) -> int | None:
    st = d / STATE_NAME
    if not st.exists():
        return None
    pid = json.loads(st.read_text(encoding="utf-8")).get("pid")
    return pid if _alive(pid) else None


def ensure_server(project: Project, annotator: dict, *, timeout: float = 240, password: str | None = None,
                  progress: Progress = None) -> dict:
    """Start ``annotator``'s own Label Studio (if not running) and make their account there (with ``password``
    when given: one run of Label Studio's Python, not two); returns its row.
    A fresh one adopts cultura's cached migrated database (seconds); only the first server of a Label Studio
    version on a machine migrates."""
    aid = annotator["id"]
    row = server_row(project, aid)
    if row is not None and row["status"] == "revoked" and annotator.get("active"):
        row = None   # reactivated: a fresh account state is written below
    d = _dir(project, aid)
    creds = _credentials(project, aid)
    exe = find_executable(project)
    if _running(d) is None:
        fresh = not (d / "label_studio.sqlite3").exists()
        cache = seed_cache(exe) if fresh else None
        seeded = bool(cache and (cache / "label_studio.sqlite3").exists())
        if seeded:
            adopt_seed(cache, d)
        make_private(d)
        port = row["port"] if row and _port_free(row["port"]) else free_port()
        url = f"http://127.0.0.1:{port}"
        log = d / "server.log"
        proc = launch_ready(exe, d, port, creds, timeout=timeout, log_path=log,
                            what=f"{annotator['name']}'s Label Studio", progress=progress)
        (d / STATE_NAME).write_text(json.dumps({"pid": proc.pid, "port": port, "url": url}), encoding="utf-8")
        if fresh and not seeded and cache is not None:
            try:   # the next server adopts it (every account locked, no token) instead of migrating
                adopt_seed(d, cache)
            except OSError:
                pass
    else:
        st = json.loads((d / STATE_NAME).read_text(encoding="utf-8"))
        port, url = st["port"], st["url"]
    uid = _member(project, d, annotator, creds, active=True, password=password, progress=progress)
    out = {"annotator_id": aid, "data_dir": str(d.relative_to(project.root)), "port": port, "url": url,
           "ls_user_id": uid, "status": "active", "revoked_at": None}
    with transaction(project.db):
        if row is None and server_row(project, aid) is None:
            project.db["annotator_servers"].insert({**out, "created_at": now()})
        else:
            project.db["annotator_servers"].update(aid, out)
    return server_row(project, aid)


def _member(project: Project, d: Path, annotator: dict, creds: dict, *, active: bool,
            password: str | None = None, progress: Progress = None) -> int:
    first, _, last = annotator["name"].partition(" ")
    req = {"email": annotator["email"], "username": re.sub(r"[^A-Za-z0-9_.-]", "_", annotator["name"])[:150],
           "first_name": first, "last_name": last, "admin": creds["username"], "active": active,
           "password": password}
    if password:
        register_secret(password)
    env = {**os.environ, **QUIET_ENV, "LABEL_STUDIO_BASE_DATA_DIR": str(d)}
    with waiting(f"Label Studio to {'open' if active else 'lock'} {annotator['name']}'s account on their server",
                 progress=progress):
        res = subprocess.run([ls_python(project), "-c", MEMBER_SCRIPT], input=json.dumps(req), env=env,
                             cwd=str(d), capture_output=True, text=True, timeout=300)
    lines = [ln for ln in (res.stdout or "").splitlines() if ln.startswith("@@")]
    if res.returncode != 0 or not lines:
        tail = (res.stderr or "").strip().splitlines()[-1:] or ["no output"]
        raise LabelStudioError(f"Label Studio's account script failed on {d} ({tail[0]}).")
    return json.loads(lines[-1][2:])["user_id"]


def set_person_password(project: Project, annotator: dict, password: str) -> None:
    ensure_server(project, annotator, password=password)


def person_connection(project: Project, annotator: dict) -> Connection:
    """cultura's connection to ``annotator``'s own server (as its admin), started when it is not running. A
    deactivated annotator's server is not started again."""
    row = server_row(project, annotator["id"])
    if row is not None and row["status"] == "revoked":
        raise LabelStudioError(f"Annotator {annotator['name']!r} is deactivated: their Label Studio is stopped "
                               "and their account locked. Add them again with 'cultura annotate annotators add' "
                               "to reopen it.")
    if row is None or _running(project.root / row["data_dir"]) is None:
        row = ensure_server(project, annotator)
    return Connection(row["url"], _credentials(project, annotator["id"])["api_key"], True)


def revoke(project: Project, annotator: dict, last_pull: Callable[[], object] | None = None) -> dict | None:
    """Lock ``annotator``'s account on their server (inactive, tokens and sessions deleted), run ``last_pull``
    (what they answered until now, and nothing after) and stop the server: their access ends now. Their
    projects and answers stay in its data dir."""
    row = server_row(project, annotator["id"])
    if row is None:
        return None
    d = project.root / row["data_dir"]
    _member(project, d, annotator, _credentials(project, annotator["id"]), active=False)
    pid = _running(d)
    if pid and row["status"] == "active" and last_pull is not None:
        last_pull()
    if pid:
        stop_process(pid)
    with transaction(project.db):
        project.db["annotator_servers"].update(annotator["id"], {"status": "revoked", "revoked_at": now()})
    return server_row(project, annotator["id"])


def stop_all(project: Project) -> list[dict]:
    """Stop every annotator's server (their data dirs are kept)."""
    out = []
    for row in _rows(project):
        pid = _running(project.root / row["data_dir"])
        out.append({"annotator": row["name"], "url": row["url"], "stopped": bool(pid and stop_process(pid))})
    return out


def start_all(project: Project, *, timeout: float = 240, progress: Progress = None) -> list[dict]:
    """Start the server of every active annotator who has one (``progress`` is told each one, and what it waits
    for while one starts)."""
    rows = [r for r in _rows(project) if r["status"] == "active" and r["active"]]
    with task("starting the annotators' Label Studio servers", len(rows), progress=progress) as bar:
        for row in rows:
            ensure_server(project, {"id": row["annotator_id"], "name": row["name"], "email": row["email"],
                                    "active": 1}, timeout=timeout, progress=progress)
            bar.advance()
    return status_all(project)


def status_all(project: Project) -> list[dict]:
    """Each annotator's server: where it answers, whether it runs, whether access is revoked (no secrets)."""
    return [{"annotator": r["name"], "role": r["role"], "url": r["url"], "status": r["status"],
             "running": _running(project.root / r["data_dir"]) is not None, "data_dir": r["data_dir"]}
            for r in _rows(project)]


def _rows(project: Project) -> list[dict]:
    if "annotator_servers" not in project.db.table_names():
        return []
    cur = project.db.execute("SELECT s.*, a.name, a.email, a.role, a.active FROM annotator_servers s "
                             "JOIN annotators a ON a.id = s.annotator_id ORDER BY s.annotator_id")
    cols = [c[0] for c in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def origins(project: Project) -> list[str]:
    """Every annotator server's origin (the image server answers credentialed requests from each)."""
    return [r["url"] for r in _rows(project) if r["status"] == "active"]


def require_personal(project: Project) -> None:
    if not personal_servers(project):
        raise CulturaError("This project's Label Studio is not run by cultura (LABEL_STUDIO_URL, or a server "
                           "recorded without its data dir), so its passwords are set in Label Studio itself (an "
                           "invite link, or the admin's user settings).")


# ----------------------------------------------------------------- the project's servers, all together

def start_server(project: Project, *, port: int | None = None, timeout: float = 240, seed_dir=None,
                 progress: Progress = None) -> dict:
    """Start the project's Label Studio (:func:`cultura.annotate.server.start_server`) and every active
    annotator's own; returns their status. ``progress`` (:mod:`cultura.progress`) is told what each start waits
    for (a fresh data dir without a cached seed migrates for about a minute) and the annotators' servers started."""
    out = shared.start_server(project, port=port, timeout=timeout, seed_dir=seed_dir, progress=progress)
    start_all(project, timeout=timeout, progress=progress)
    return {**out, **_servers(project)}


def stop_server(project: Project) -> dict:
    """Stop every annotator's own Label Studio and the project's."""
    stop_all(project)
    return {**shared.stop_server(project), **_servers(project)}


def server_status(project: Project) -> dict:
    """The project's Label Studio and each annotator's own (no secrets); where cultura does not run Label
    Studio, what isolation holds there and what does not."""
    return {**shared.server_status(project), **_servers(project)}


def _servers(project: Project) -> dict:
    note = isolation_note(project)
    return {"annotator_servers": status_all(project), **({"isolation": note} if note else {})}


def label_studio_origins(project: Project) -> list[str]:
    """Every Label Studio that shows this project's tasks (the shared one and each annotator's own): the origins
    the image server answers credentialed requests from."""
    base = shared.label_studio_origins(project)
    return base + [o for o in origins(project) if o not in base]
