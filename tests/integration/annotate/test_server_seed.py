"""A project's first Label Studio start adopts cultura's cached migrated database (accounts locked, tokens and
sessions gone) instead of migrating for minutes; only the first project on a machine pays for migrations."""
from __future__ import annotations

import sqlite3

import httpx
import pytest

from cultura.annotate.server import adopt_seed, read_secrets, seed_cache, start_server, stop_server
from tests.fakes.labelstudio import _executable, labelstudio  # noqa: F401

pytestmark = pytest.mark.labelstudio


def test_second_project_starts_from_the_cached_seed_without_its_credentials(project, labelstudio, tmp_path,
                                                                             monkeypatch):
    monkeypatch.delenv("LABEL_STUDIO_URL", raising=False)
    monkeypatch.setenv("LABEL_STUDIO_BIN", _executable())
    monkeypatch.setenv("CULTURA_CACHE_DIR", str(tmp_path / "cache"))
    cache = seed_cache(_executable())
    assert cache is not None and "label_studio-" in cache.name
    adopt_seed(labelstudio.data_dir, cache)   # what a first fresh start leaves behind
    db = sqlite3.connect(cache / "label_studio.sqlite3")
    assert db.execute("SELECT COUNT(*) FROM htx_user WHERE is_active = 1 OR password NOT LIKE '!%'").fetchone()[0] == 0
    assert db.execute("SELECT COUNT(*) FROM authtoken_token").fetchone()[0] == 0
    assert {e for (e,) in db.execute("SELECT email FROM htx_user")} == {
        f"locked-{i}@seed.invalid" for (i,) in db.execute("SELECT id FROM htx_user")}
    # a seed left by a project of the same name (as caches written before accounts were renamed are): its
    # locked admin carries this project's admin name, yet the project's server starts with its own token
    same = f"admin@{project.root.name.lower()}.local"
    with db:
        db.execute("UPDATE htx_user SET email = ?, username = ? WHERE id = (SELECT MIN(id) FROM htx_user)",
                   (same, same))
    db.close()

    st = start_server(project)
    try:
        assert st["started"] and st["seeded"] and st["running"]
        # the seed's admin token does not open the new server; the project's own one does
        who = st["url"] + "/api/current-user/whoami"
        assert httpx.get(who, headers={"Authorization": f"Token {labelstudio.api_key}"}).status_code == 401
        key = read_secrets(project)["api_key"]
        assert httpx.get(who, headers={"Authorization": f"Token {key}"}).status_code == 200
    finally:
        stop_server(project)


def test_cache_can_be_switched_off(monkeypatch):
    monkeypatch.setenv("CULTURA_CACHE_DIR", "off")
    assert seed_cache(_executable() or "/nonexistent/bin/label-studio") is None
