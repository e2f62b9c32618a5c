"""Shared fixtures. No network: hub downloads are off, servers are local, and the environment's API keys
are replaced by test values."""
from __future__ import annotations

import os
import sys
import shutil

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ.pop("CULTURA_PROJECT", None)

import pytest  # noqa: E402

pytest_plugins = ["tests.fixtures"]


@pytest.fixture(scope="session")
def _fresh_project(tmp_path_factory):
    """One project made by ``init_project`` per test session: each test copies its folder (a migrated database
    in a few milliseconds instead of a third of a second)."""
    from cultura.project import init_project

    p = init_project(tmp_path_factory.mktemp("template") / "proj", countries=["US", "JP", "TH", "DE"])
    p.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    p.close()
    return p.root


@pytest.fixture
def project(tmp_path, _fresh_project):
    """A fresh project with four countries (two Western, two not)."""
    from cultura.project import Project

    shutil.copytree(_fresh_project, tmp_path / "proj")
    p = Project(tmp_path / "proj")
    yield p
    p.close()


@pytest.fixture(scope="session", autouse=True)
def _no_label_studio_outlives_the_session(tmp_path_factory):
    """Every Label Studio a test started under this session's temporary folder (the project's, each
    annotator's) is stopped when the session ends, whichever test forgot it: they run in process groups of
    their own, so nothing else would."""
    yield
    if sys.platform.startswith("linux"):
        from tests.fakes.labelstudio import stop_servers_under

        stop_servers_under(tmp_path_factory.getbasetemp())
