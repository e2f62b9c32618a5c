"""Shared fixtures. No network: hub downloads are off, servers are local, and the environment's API keys
are replaced by test values."""
from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ.pop("CULTURA_PROJECT", None)

import pytest  # noqa: E402

pytest_plugins = ["tests.fixtures"]


@pytest.fixture
def project(tmp_path):
    """A fresh project with four countries (two Western, two not)."""
    from cultura.project import init_project

    p = init_project(tmp_path / "proj", countries=["US", "JP", "TH", "DE"])
    yield p
    p.close()
