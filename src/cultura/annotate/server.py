"""Run a local Label Studio for a project, or connect to an existing one.

A local server runs the ``label-studio`` executable (it lives in its own virtualenv because it pins Django
and openai<2) found in config ``annotate.label_studio_bin``, env ``LABEL_STUDIO_BIN`` or ``PATH``. It binds
to 127.0.0.1 (``--internal-host``; ``--host`` only sets the URL prefix), on a free port that is verified to
answer (Label Studio silently moves to another port when the one asked for is busy), keeps its data in
``<project>/labelstudio/`` and its admin credentials in ``<project>/.secrets/labelstudio.json`` (mode 0600,
never in the database or logs). Network calls home are switched off (version check, Sentry, analytics).

Connecting elsewhere: set ``LABEL_STUDIO_URL`` and ``LABEL_STUDIO_API_KEY`` (a personal access token or a
legacy token; label-studio-sdk 2.x ``LabelStudio(base_url, api_key)`` takes both).

>>> # p = Project("demo"); start_server(p); connect(p).client.projects.list(); stop_server(p)
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from cultura.bounds import Bound, from_field
from cultura.config import AnnotateSection
from cultura.errors import CulturaError
from cultura.files import user_cache
from cultura.names import check_endpoint_url
from cultura.progress import Progress, waiting
from cultura.redact import register_secret

if TYPE_CHECKING:
    from ..project import Project

SECRETS_REL = ".secrets/labelstudio.json"
DATA_REL = "labelstudio"
STATE_NAME = "server.json"           # pid/port/url (no secrets) inside the data dir

QUIET_ENV = {
    "LABEL_STUDIO_LATEST_VERSION_CHECK": "false",
    "LATEST_VERSION_CHECK": "false",
    "SENTRY_DSN": "",
    "FRONTEND_SENTRY_DSN": "",
    "COLLECT_ANALYTICS": "false",
    "LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN": "true",
    "DJANGO_DB": "sqlite",
    # nobody makes an account by themselves: a server's users are the ones cultura creates
    "LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK": "true",
}


#: The start of every script cultura runs with Label Studio's Python (``ls_python``, cwd and
#: ``LABEL_STUDIO_BASE_DATA_DIR`` = a server's data dir): Label Studio's Django set up on that server's database.
DJANGO_PREAMBLE = r'''
import json, os, sys, pathlib, warnings
warnings.simplefilter("ignore")
import label_studio
sys.path.insert(0, str(pathlib.Path(label_studio.__file__).parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "core.settings.label_studio")
import django
django.setup()
'''


class LabelStudioError(CulturaError):
    """Label Studio is missing, unreachable, or answered with an error."""


@dataclass
class Connection:
    """Where a Label Studio answers and how to authenticate (the key is never printed)."""

    url: str
    api_key: str
    local: bool = False

    def __repr__(self) -> str:  # keep the key out of logs and tracebacks
        return f"Connection(url={self.url!r}, local={self.local})"

    @property
    def client(self):
        from label_studio_sdk import LabelStudio  # deferred: heavy optional dependency, loaded on first use

        if not hasattr(self, "_client"):
            self._client = LabelStudio(base_url=self.url, api_key=self.api_key, timeout=120)
        return self._client

    @property
    def headers(self) -> dict:
        return {"Authorization": f"Token {self.api_key}"}

    def get(self, path: str, **params) -> httpx.Response:
        """GET ``path`` on the server; connection failures become :class:`LabelStudioError`."""
        if not hasattr(self, "_http"):   # one client: httpx.get builds a new SSL context (~20 ms CPU) per call
            self._http = httpx.Client(timeout=300)
        try:
            return self._http.get(self.url + path, params=params, headers=self.headers)
        except httpx.HTTPError as e:
            raise unreachable(self.url, e) from None


def unreachable(url: str, err: Exception | None = None) -> LabelStudioError:
    why = f" ({type(err).__name__})" if err else ""
    return LabelStudioError(f"Label Studio at {url} does not answer{why}. Start it with 'cultura annotate "
                            "server start' (or check LABEL_STUDIO_URL), then rerun: the command resumes "
                            "where it stopped.")


# ---------------------------------------------------------------------------------------------- finding

def find_executable(project: Project=None) -> str:
    """The ``label-studio`` executable: config ``annotate.label_studio_bin``, ``LABEL_STUDIO_BIN``, PATH, or
    the checkout's ``.venv-ls`` (made by ``make setup``)."""
    cands = []
    if project is not None:
        cands.append(project.config.annotate.label_studio_bin)
    cands.append(os.environ.get("LABEL_STUDIO_BIN"))
    cands.append(shutil.which("label-studio"))
    # the virtualenv 'make setup' creates beside a source checkout (src/cultura/annotate/server.py)
    cands.append(str(Path(__file__).resolve().parents[3] / ".venv-ls" / "bin" / "label-studio"))
    for c in cands:
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return str(c)
    raise LabelStudioError("No label-studio executable found. Install it in its own virtualenv "
                           "('make setup' creates .venv-ls) and set LABEL_STUDIO_BIN=/path/to/label-studio "
                           "or annotate.label_studio_bin in cultura.toml.")


def ls_python(project: Project=None) -> str:
    """The Python of Label Studio's virtualenv (cultura runs short account scripts with it)."""
    exe = Path(find_executable(project))
    for name in ("python", "python3"):
        if (exe.parent / name).exists():
            return str(exe.parent / name)
    raise LabelStudioError(f"No Python beside {exe}; cultura runs Label Studio's own Python to manage accounts.")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------------------------------- secrets

def secrets_path(project: Project) -> Path:
    return project.root / SECRETS_REL


def read_secrets(project: Project) -> dict | None:
    p = secrets_path(project)
    if not p.exists():
        return None
    return json.loads(p.read_text(encoding="utf-8"))


def label_studio_origins(project: Project) -> list[str]:
    """The shared Label Studio that shows this project's tasks (``LABEL_STUDIO_URL``, else the project's own
    server); :func:`cultura.annotate.people.label_studio_origins` adds every annotator's own server."""
    url = os.environ.get("LABEL_STUDIO_URL") or (read_secrets(project) or {}).get("url")
    return [url] if url else []


def write_private_json(p: Path, data: dict) -> Path:
    """Write ``data`` as JSON to ``p`` with mode 0600, in a folder of mode 0700 that git ignores (the
    project's ``.secrets/``: credentials and annotator tokens)."""
    p.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(p.parent, 0o700)
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)
    os.chmod(p, 0o600)
    gi = p.parent / ".gitignore"
    if not gi.exists():
        gi.write_text("*\n", encoding="utf-8")
    return p


def write_secrets(project: Project, data: dict) -> Path:
    """Write credentials to ``.secrets/labelstudio.json`` with mode 0600 (folder 0700)."""
    return write_private_json(secrets_path(project), data)


def use_server(project: Project, url: str, api_key: str, *, data_dir: str | Path | None = None) -> Connection:
    """Record an existing server (e.g. a shared one, or a test fixture's) as this project's Label Studio.
    ``data_dir``: its data dir, when on this machine: annotators then get blind accounts
    (:mod:`cultura.annotate.accounts`)."""
    data = read_secrets(project) or {}
    data.update({"url": url.rstrip("/"), "api_key": api_key, "external": True})
    if data_dir is not None:
        data["data_dir"] = str(Path(data_dir).resolve())
    write_secrets(project, data)
    return Connection(url.rstrip("/"), api_key)


def connect(project: Project=None, *, check: bool = True) -> Connection:
    """The project's Label Studio: ``LABEL_STUDIO_URL``/``LABEL_STUDIO_API_KEY`` if set, else the server
    recorded in ``.secrets/labelstudio.json``. With ``check``, verify that it answers and accepts the key."""
    url, key, local = os.environ.get("LABEL_STUDIO_URL"), os.environ.get("LABEL_STUDIO_API_KEY"), False
    if not (url and key) and project is not None:
        s = read_secrets(project) or {}
        url, key, local = s.get("url"), s.get("api_key"), not s.get("external", False)
    if not (url and key):
        raise LabelStudioError("No Label Studio configured. Run 'cultura annotate server start', or set "
                               "LABEL_STUDIO_URL and LABEL_STUDIO_API_KEY to use an existing server.")
    register_secret(key)  # scrubbed from every error text from now on
    check_endpoint_url(url, source="LABEL_STUDIO_URL" if os.environ.get("LABEL_STUDIO_URL") else
                       "The recorded Label Studio URL")  # one sentence, never an httpx.InvalidURL traceback
    conn = Connection(url.rstrip("/"), key, local)
    if check:
        r = conn.get("/api/current-user/whoami")
        if r.status_code in (401, 403):
            raise LabelStudioError(f"Label Studio at {conn.url} refused the API key (HTTP {r.status_code}). "
                                   "Set LABEL_STUDIO_API_KEY to a valid personal access or legacy token.")
        if r.status_code >= 400:
            raise LabelStudioError(f"Label Studio at {conn.url} answered HTTP {r.status_code} to whoami; "
                                   "is this a Label Studio server?")
    return conn


# ------------------------------------------------------------------------------------------- running

def launch(executable: str, data_dir: Path, port: int, *, username: str, password: str, token: str,
           log_path: Path) -> subprocess.Popen:
    """Start ``label-studio start`` bound to 127.0.0.1:port in a new process group; returns the process."""
    make_private(data_dir)
    # credentials travel in the environment, not argv (argv is visible to every local user in `ps`)
    env = {**os.environ, **QUIET_ENV, "LABEL_STUDIO_BASE_DATA_DIR": str(data_dir),
           "LABEL_STUDIO_USERNAME": username, "LABEL_STUDIO_PASSWORD": password,
           "LABEL_STUDIO_USER_TOKEN": token}
    cmd = [executable, "start", "--internal-host", "127.0.0.1", "--port", str(port), "--no-browser",
           "--data-dir", str(data_dir), "--enable-legacy-api-token", "--log-level", "WARNING"]
    log = os.fdopen(os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab")
    # umask 077: Label Studio's database (which holds the admin token), media and logs are private
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=env, cwd=str(data_dir), start_new_session=True, umask=0o077)


def wait_ready(url: str, token: str, proc: subprocess.Popen | None = None, *, timeout: float = 240,
               log_path: Path | None = None) -> None:
    """Poll until the server at ``url`` accepts ``token``; fail early if the process died."""
    deadline = time.monotonic() + timeout
    # one client for every poll: httpx.get builds an SSL context per call (~20 ms CPU), which over a 2-minute
    # first start cost ~7 s of CPU taken from Label Studio's migrations on a small machine
    with httpx.Client(timeout=5, headers={"Authorization": f"Token {token}"}) as http:
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                tail = log_path.read_text(errors="replace")[-1500:] if log_path and log_path.exists() else ""
                raise LabelStudioError(f"label-studio exited with code {proc.returncode} before answering on "
                                       f"{url}. Its log ends with:\n{tail}")
            try:
                if http.get(url + "/api/current-user/whoami").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
    raise LabelStudioError(f"Label Studio did not answer on {url} within {timeout:.0f} s; see "
                           f"{log_path or 'its log'}.")


def launch_ready(executable: str, data_dir: Path, port: int, creds: dict, *, timeout: float,
                 log_path: Path, what: str = "the project's Label Studio", progress: Progress = None) -> subprocess.Popen:
    """:func:`launch` with ``creds`` (username, password, api_key) and :func:`wait_ready` on 127.0.0.1:port; a
    server that does not come up is stopped before the error is raised (no orphan holds the port). Every start
    of a server comes here: ``progress`` hears that it waits for ``what`` to answer."""
    proc = launch(executable, data_dir, port, username=creds["username"], password=creds["password"],
                  token=creds["api_key"], log_path=log_path)
    try:
        with waiting(f"{what} to answer on 127.0.0.1:{port} (a first start migrates its database for about a "
                     "minute)", progress=progress):
            wait_ready(f"http://127.0.0.1:{port}", creds["api_key"], proc, timeout=timeout, log_path=log_path)
    except LabelStudioError:
        stop_process(proc.pid)
        raise
    return proc


def stop_process(pid: int, timeout: float = 20) -> bool:
    """Terminate the process group ``pid`` (SIGTERM, then SIGKILL). True if something was stopped."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    except PermissionError:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return True
        try:  # reap if it is our child
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.2)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return True


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def data_dir(project: Project) -> Path:
    return project.root / DATA_REL


def make_private(path: Path) -> None:
    """Create ``path`` if needed and make it and everything in it private (folders 0700, files 0600):
    Label Studio's data dir holds its database, and with it the admin token."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    for root, dirs, files in os.walk(path):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o700, follow_symlinks=False)
        for f in files:
            p = os.path.join(root, f)
            if not os.path.islink(p):
                os.chmod(p, 0o600)


def adopt_seed(seed_dir: str | Path, data: Path) -> None:
    """Copy a migrated Label Studio database from ``seed_dir`` into ``data`` (startup then takes seconds
    instead of ~45 s of migrations) WITHOUT the seed's credentials: only ``label_studio.sqlite3`` is copied
    (never a ``creds.json``), and every account already in it is locked (unusable password, inactive, API
    tokens and sessions deleted, renamed to ``locked-ID@seed.invalid``), so the project's own admin, created at
    start under any name, is the only way in."""
    src = Path(seed_dir) / "label_studio.sqlite3"
    make_private(data)
    dst = Path(data) / "label_studio.sqlite3"
    tmp = dst.with_name(dst.name + f".seed-tmp{os.getpid()}")  # two processes may fill one cache at once
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.close(fd)
    a, b = sqlite3.connect(src), sqlite3.connect(tmp)
    try:
        with b:
            a.backup(b)
        tables = {r[0] for r in b.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        with b:
            if "htx_user" in tables:
                # renamed as well as locked: Label Studio skips making its admin (and that admin's token) when
                # the name exists, so a seed from a project of the same name would leave the server unusable
                b.execute("UPDATE htx_user SET password = '!' || hex(randomblob(16)), is_active = 0, "
                          "email = 'locked-' || id || '@seed.invalid', username = 'locked-' || id")
            for t in ("authtoken_token", "django_session", "token_blacklist_outstandingtoken",
                      "jwt_auth_personalaccesstoken"):
                if t in tables:
                    b.execute(f"DELETE FROM {t}")
    finally:
        a.close()
        b.close()
    os.replace(tmp, dst)


def seeded_credentials(data: Path, seed_dir: str | Path | None, username: str) -> tuple[dict, bool]:
    """Admin credentials for a fresh server in ``data``: a migrated database and its admin copied from
    ``seed_dir`` when it holds both (the server then starts in seconds), else new random ones.
    Returns ``(credentials, seeded)``."""
    seed = Path(seed_dir) if seed_dir else None
    if seed and (seed / "label_studio.sqlite3").exists() and (seed / "creds.json").exists():
        shutil.copy(seed / "label_studio.sqlite3", Path(data) / "label_studio.sqlite3")
        return json.loads((seed / "creds.json").read_text()), True
    return {"username": username, "password": secrets.token_urlsafe(12), "api_key": secrets.token_hex(20)}, False


def seed_cache(executable: str) -> Path | None:
    """Where cultura keeps a migrated, account-free Label Studio database for this Label Studio version
    (``$CULTURA_CACHE_DIR``, else ``$XDG_CACHE_HOME/cultura`` or ``~/.cache/cultura``; ``CULTURA_CACHE_DIR=off``
    disables it). None when the version cannot be read from the executable's virtualenv."""
    base = user_cache()
    if base is None:
        return None
    venv = Path(executable).resolve().parent.parent
    info = sorted(venv.glob("lib/python*/site-packages/label_studio-*.dist-info"))
    if not info:
        return None
    return base / "labelstudio-seed" / info[-1].name.removesuffix(".dist-info")


#: The port of the project's Label Studio: the range of annotate.port.
SERVER_PORT = from_field(AnnotateSection, "port")
#: Seconds to wait for a starting Label Studio's first answer (a day at most).
START_TIMEOUT = Bound(0, 86_400, float, open_low=True)


def start_server(project: Project, *, port: int | None = None, timeout: float = 240,
                 seed_dir: str | Path | None = None, progress: Progress = None) -> dict:
    """Start (or find running) the project's local Label Studio; returns its status (url, pid, port).

    ``seed_dir``: a migrated Label Studio data dir copied in when the project has none yet (startup then
    takes seconds instead of the minutes of a first migration). Without one, cultura uses its own cache of
    the first migrated database of this Label Studio version (:func:`seed_cache`), written after the first
    fresh start with every account locked and every token and session removed (:func:`adopt_seed`): only a
    project's first server ever pays for the migrations."""
    port, timeout = SERVER_PORT.check_optional(port, "port"), START_TIMEOUT.check(timeout, "timeout")
    st = server_status(project)
    if st["running"]:
        return {**st, "started": False}
    exe = find_executable(project)
    ddir = data_dir(project)
    fresh = not (ddir / "label_studio.sqlite3").exists()
    cache = seed_cache(exe) if fresh and seed_dir is None else None
    if cache is not None and (cache / "label_studio.sqlite3").exists():
        seed_dir = cache
    seeded = bool(fresh and seed_dir and (Path(seed_dir) / "label_studio.sqlite3").exists())
    if seeded:
        adopt_seed(seed_dir, ddir)
    sec = read_secrets(project) or {}
    if sec.get("external") or not sec.get("password"):
        sec = {"username": f"admin@{project.root.name.lower() or 'cultura'}.local".replace(" ", "-"),
               "password": secrets.token_urlsafe(18), "api_key": secrets.token_hex(20)}
    cfg_port = project.config.annotate.port
    port = int(port or cfg_port or free_port())
    url = f"http://127.0.0.1:{port}"
    log_path = ddir / "server.log"
    make_private(ddir)
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", port)) == 0:
            raise LabelStudioError(f"Port {port} on 127.0.0.1 is already in use; give a free port (Label Studio "
                                   "would silently move to another one).", param="port")
    proc = launch_ready(exe, ddir, port, sec, timeout=timeout, log_path=log_path, progress=progress)
    write_secrets(project, {**sec, "url": url, "external": False})
    (ddir / STATE_NAME).write_text(json.dumps({"pid": proc.pid, "port": port, "url": url}), encoding="utf-8")
    make_private(ddir)
    if fresh and not seeded and cache is not None:
        try:   # the next project's first start adopts it (locked accounts, no tokens) instead of migrating
            adopt_seed(ddir, cache)
        except (OSError, sqlite3.Error):
            pass   # a cache is an optimisation: a failure to write it changes nothing else
    return {**server_status(project), "started": True, "seeded": seeded}


def server_status(project: Project) -> dict:
    """Whether the project's local server runs, where, and whether it answers (no secrets)."""
    ddir = data_dir(project)
    state = {}
    if (ddir / STATE_NAME).exists():
        state = json.loads((ddir / STATE_NAME).read_text(encoding="utf-8"))
    sec = read_secrets(project) or {}
    url = os.environ.get("LABEL_STUDIO_URL") or sec.get("url") or state.get("url")
    answering = False
    version = None
    if url:
        try:
            r = httpx.get(url.rstrip("/") + "/api/version", timeout=3)
            answering = r.status_code == 200
            version = r.json().get("release") if answering else None
        except (httpx.HTTPError, ValueError):
            pass
    pid = state.get("pid")
    return {"url": url, "pid": pid if _alive(pid) else None, "running": bool(answering),
            "version": version, "data_dir": str(ddir), "external": bool(sec.get("external")
                                                                       or os.environ.get("LABEL_STUDIO_URL")),
            "secrets_file": str(secrets_path(project)) if sec else None}


def stop_server(project: Project) -> dict:
    """Stop the project's local Label Studio (no-op when it is not running)."""
    ddir = data_dir(project)
    state_file = ddir / STATE_NAME
    stopped = False
    if state_file.exists():
        pid = json.loads(state_file.read_text(encoding="utf-8")).get("pid")
        if pid and _alive(pid):
            stopped = stop_process(pid)
        state_file.unlink()
    return {**server_status(project), "stopped": stopped}
