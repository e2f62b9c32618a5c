"""Which Label Studio and which credentials reach an annotator's project (:func:`connection_for`), and the older
organization fence on one shared server.

Where cultura runs Label Studio, each annotator has a server of their own (:mod:`cultura.annotate.people`): that is
what keeps annotators blind, whatever routes Label Studio has. What follows is the fence an older cultura built on
one shared server, kept so that projects made then (``campaign_projects.ls_as = 'annotator'``) stay reachable and
their passwords can be set; it does NOT hold against every route (drafts of any task, moving any user to another
organization, predictions on any task: see docs/annotators.md).

What Label Studio Community 1.23 allows, read from its permission code: every permission is
``is_authenticated``; list endpoints filter by ``user.active_organization``; object endpoints (a task, an
annotation, a project's export by id) check ``Project.has_permission``, which in the open-source edition only
refuses a user whose membership of the project's organization was **revoked** (``OrganizationMember.deleted_at``
set) — "LSO always runs a single organization, so cross-org access does not exist by design". Project
membership (``ProjectMember``) is not checked anywhere in Community. So neither one shared organization nor
memberships keep annotators apart; what holds is:

1. **one organization per annotator**, created with the user and holding only that user (their first
   membership, so Label Studio's login picks it as the active organization): listings show only their own
   projects, tasks and users;
2. **a revoked membership in every other organization** (the admin's and every other blind annotator's):
   Label Studio refuses a task, an annotation or a project requested by id across that fence (404/403), which
   is what holds against a user typing API URLs by hand.

cultura then works in an annotator's projects with that annotator's own API token (kept in
``.secrets/annotators.json``, mode 0600, never in the database), so their projects are created inside their
organization. Adjudicators get the same treatment: they see the earlier labels through the task data of their
own adjudication project, by design.

The accounts are made by a short script run by Label Studio's own Python on the server's data dir (Django
set up directly: ~3 s, where ``label-studio reset_password`` spends ~30 s starting its whole CLI). It needs the
data dir, so it works for the project's local server and for a server recorded with its data dir
(``use_server(..., data_dir=)``); a remote server keeps the shared organization and ``blind`` is reported False.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from cultura.db import transaction
from cultura.errors import CulturaError
from cultura.redact import register_secret

from .people import person_connection, personal_servers
from .server import (DJANGO_PREAMBLE, QUIET_ENV, Connection, LabelStudioError, data_dir, ls_python, read_secrets,
                     secrets_path, write_private_json)

if TYPE_CHECKING:
    from ..project import Project

TOKENS_NAME = "annotators.json"
ORG_PREFIX = "cultura · "

#: Run by Label Studio's Python (its Django settings, the server's data dir). Reads a JSON request on stdin,
#: writes a JSON answer on stdout; the answer holds API tokens, so it never reaches a log.
LS_SCRIPT = DJANGO_PREAMBLE + r'''
from django.db import transaction
from django.utils import timezone
from organizations.models import Organization, OrganizationMember
from rest_framework.authtoken.models import Token
from users.models import User

req = json.load(sys.stdin)
out = {}
with transaction.atomic():
    for p in req.get("people", []):
        email = p["email"].lower()
        user = User.objects.filter(email__iexact=email).first()
        if user is None:
            user = User.objects.create_user(email=email, password=p.get("password"), username=p["username"],
                                            first_name=p.get("first_name", ""), last_name=p.get("last_name", ""))
        elif p.get("password"):
            user.set_password(p["password"])
            user.save(update_fields=["password"])
        if not p.get("blind"):
            out[email] = {"user_id": user.id}
            continue
        title = p["org_title"]
        org = Organization.objects.filter(title=title).first()
        # owned by an inactive placeholder account with an opaque address (one creator per organization):
        # Label Studio shows an organization's creator e-mail to the fenced peers listed in it, and needs a
        # creator to create projects
        if org is None:
            ph = title.split(" ")[-1]
            owner = User.objects.create_user(email=f"owner-{ph}@cultura.invalid", password=None,
                                             username=f"owner-{ph}", is_active=False)
            org = Organization.objects.create(title=title, created_by=owner)
            OrganizationMember.objects.create(user=user, organization=org)
        jwt = org.jwt   # cultura works with the annotator's legacy token, as with the admin's
        if not (jwt.api_tokens_enabled and jwt.legacy_api_tokens_enabled):
            jwt.api_tokens_enabled = jwt.legacy_api_tokens_enabled = True
            jwt.save()
        own = OrganizationMember.objects.get(user=user, organization=org)
        if own.deleted_at is not None:
            own.deleted_at = None
            own.save(update_fields=["deleted_at"])
        # every other membership: removed and written again, revoked, so that the own one is the first
        for m in OrganizationMember.objects.filter(user=user).exclude(organization=org):
            if m.deleted_at is None or m.pk < own.pk:
                m.delete()
        fenced = {m.organization_id for m in OrganizationMember.objects.filter(user=user).exclude(organization=org)}
        for o in Organization.objects.exclude(pk=org.pk).exclude(pk__in=fenced):
            OrganizationMember.objects.create(user=user, organization=o, deleted_at=timezone.now())
        user.active_organization = org
        user.save(update_fields=["active_organization"])
        token, _ = Token.objects.get_or_create(user=user)
        out[email] = {"user_id": user.id, "org_id": org.id, "token": token.key}
    # fence every blind user out of every organization that is not theirs (new ones included)
    blind = OrganizationMember.objects.filter(organization__title__startswith=req["prefix"], deleted_at__isnull=True)
    for uid, oid in blind.values_list("user_id", "organization_id"):
        have = set(OrganizationMember.objects.filter(user_id=uid).values_list("organization_id", flat=True))
        for o in Organization.objects.exclude(pk=oid).exclude(pk__in=have):
            OrganizationMember.objects.create(user_id=uid, organization=o, deleted_at=timezone.now())
json.dump(out, sys.stdout)
'''


def ls_data_dir(project: Project) -> Path | None:
    """The data dir of the project's Label Studio when cultura can reach it: the local server's, or the one
    recorded with ``use_server(..., data_dir=)``."""
    sec = read_secrets(project) or {}
    if sec.get("data_dir"):
        return Path(sec["data_dir"])
    if os.environ.get("LABEL_STUDIO_URL") or sec.get("external"):
        return None
    ddir = data_dir(project)
    return ddir if (ddir / "label_studio.sqlite3").exists() else None


def run_accounts(project: Project, people: list[dict], ddir: Path) -> dict:
    """Create or update Label Studio users (and, for ``blind`` ones, their organization and fence) directly
    in the server's database at ``ddir``. Returns ``{email: {user_id, org_id?, token?}}``."""
    env = {**os.environ, **QUIET_ENV, "LABEL_STUDIO_BASE_DATA_DIR": str(ddir)}
    for p in people:
        if p.get("password"):
            register_secret(p["password"])
    res = subprocess.run([ls_python(project), "-c", LS_SCRIPT], input=json.dumps({"people": people,
                         "prefix": ORG_PREFIX}), env=env, cwd=str(ddir), capture_output=True, text=True,
                         timeout=300)
    if res.returncode != 0:
        tail = (res.stderr or "").strip().splitlines()[-1:] or ["no output"]
        raise LabelStudioError(f"Label Studio's account script failed on {ddir} ({tail[0]}).")
    ans = json.loads(res.stdout)
    for v in ans.values():
        if v.get("token"):
            register_secret(v["token"])
    return ans


def tokens_path(project: Project) -> Path:
    return secrets_path(project).parent / TOKENS_NAME


def read_tokens(project: Project) -> dict:
    p = tokens_path(project)
    if not p.exists():
        return {}
    data = json.loads(p.read_text(encoding="utf-8"))
    for t in data.values():
        register_secret(t)
    return data


def save_token(project: Project, email: str, token: str) -> None:
    """Keep an annotator's API token in ``.secrets/annotators.json`` (mode 0600)."""
    data = read_tokens(project)
    data[email.lower()] = token
    write_private_json(tokens_path(project), data)


def connection_for(project: Project, annotator: dict | None, admin: Connection, prow: dict | None = None) -> Connection:
    """The connection cultura uses for an annotator's project ``prow``: the admin of the annotator's own server
    (:mod:`cultura.annotate.people`) for a project that lives there (``ls_as = 'server'``, or not created yet on
    a machine where cultura runs Label Studio: then it is marked so before it is created); otherwise, on the
    shared server, their own token when the project lives in their organization (``ls_as = 'annotator'``, made
    by an older cultura), else the admin's."""
    if annotator is None:
        return admin
    if prow is not None and (prow.get("ls_as") == "server" or (
            not prow.get("ls_project_id") and personal_servers(project))):
        if prow.get("ls_as") != "server" and prow.get("id"):
            with transaction(project.db):
                project.db["campaign_projects"].update(prow["id"], {"ls_as": "server"})
            prow["ls_as"] = "server"
        return person_connection(project, annotator)
    tok = read_tokens(project).get((annotator.get("email") or "").lower())
    if not tok:
        return admin
    if prow is not None:
        if prow.get("ls_project_id") and prow.get("ls_as") != "annotator":
            return admin
        if not prow.get("ls_project_id") and prow.get("ls_as") != "annotator" and prow.get("id"):
            with transaction(project.db):
                project.db["campaign_projects"].update(prow["id"], {"ls_as": "annotator"})
            prow["ls_as"] = "annotator"
    return Connection(admin.url, tok, admin.local)


def blind_user(project: Project, name: str, email: str, *, password: str | None = None) -> dict | None:
    """Make (or update) ``email``'s blind account; None when the server's data dir is out of reach."""
    ddir = ls_data_dir(project)
    if ddir is None:
        return None
    first, _, last = name.partition(" ")
    person = {"email": email, "username": re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:150], "first_name": first,
              "last_name": last, "blind": True,
              # opaque: fenced peers see the titles of the organizations they are fenced out of
              "org_title": ORG_PREFIX + hashlib.sha256(email.lower().encode()).hexdigest()[:16], "password": password}
    ans = run_accounts(project, [person], ddir)[email.lower()]
    save_token(project, email, ans["token"])
    return {"user_id": ans["user_id"], "org_id": ans["org_id"]}


def require_local(project: Project) -> Path:
    ddir = ls_data_dir(project)
    if ddir is None:
        raise CulturaError("This project's Label Studio is not one whose data dir cultura can reach (the local "
                           "one started by 'cultura annotate server start'), so its passwords are set in Label "
                           "Studio itself (an invite link, or the admin's user settings).")
    return ddir
