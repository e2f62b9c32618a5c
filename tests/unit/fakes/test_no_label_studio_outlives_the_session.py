"""A Label Studio started under a test session's temporary folder is found and stopped when the session ends
(its own process group keeps it alive after pytest otherwise); one elsewhere is left alone."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.fakes.labelstudio import servers_under, stop_servers_under

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _fake_server(data_dir) -> subprocess.Popen:
    # the argv a started server shows (python ignores the words after -c's program)
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "/x/bin/label-studio", "start",
                             "--data-dir", str(data_dir)], start_new_session=True)


def test_servers_under_a_folder_are_stopped_and_others_are_not(tmp_path):
    inside, outside = _fake_server(tmp_path / "session" / "proj" / "a1"), _fake_server(tmp_path / "elsewhere")
    try:
        assert servers_under(tmp_path / "session") == [inside.pid]
        assert stop_servers_under(tmp_path / "session") == [inside.pid]
        assert inside.wait(timeout=60) is not None and outside.poll() is None
        assert servers_under(tmp_path / "session") == []
    finally:
        for p in (inside, outside):
            p.kill()
            p.wait(timeout=60)
