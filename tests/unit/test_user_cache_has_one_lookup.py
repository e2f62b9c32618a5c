"""Everything cultura keeps in the user cache (the config memo, the Label Studio seed, weights' checksums, model
facts, the tiny language model) is found through one lookup, so ``CULTURA_CACHE_DIR``, ``XDG_CACHE_HOME`` and
``CULTURA_CACHE_DIR=off`` mean the same thing everywhere."""
from __future__ import annotations

import json
import re

from cultura.files import user_cache
from tests import REPO


def test_only_the_one_lookup_reads_the_cache_variables():
    readers = sorted(str(p.relative_to(REPO)) for p in (REPO / "src" / "cultura").rglob("*.py")
                     if re.search(r"environ[^\n]*(CULTURA_CACHE_DIR|XDG_CACHE_HOME)", p.read_text(encoding="utf-8")))
    assert readers == ["src/cultura/files.py"], readers


def test_the_cache_follows_xdg_and_can_be_turned_off(tmp_path, monkeypatch):
    from cultura.models.embedders.base import file_sha256
    from cultura.models.tiny import tiny_lm_dir

    weights = tmp_path / "weights.bin"
    weights.write_bytes(b"\0" * 1024)
    monkeypatch.delenv("CULTURA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert user_cache() == tmp_path / "xdg" / "cultura"
    assert tiny_lm_dir().parent == tmp_path / "xdg" / "cultura"
    file_sha256(weights, memo_min_bytes=1)
    assert (tmp_path / "xdg" / "cultura" / "weights_sha256.json").is_file()

    monkeypatch.setenv("CULTURA_CACHE_DIR", "off")
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")   # "off" is no folder name: nothing may appear here either
    weights.write_bytes(b"\1" * 1024)
    file_sha256(weights, memo_min_bytes=1)
    assert user_cache() is None and not (tmp_path / "home").exists() and not any((tmp_path / "cwd").iterdir())
    assert len(json.loads((tmp_path / "xdg" / "cultura" / "weights_sha256.json").read_text())) == 1  # no new entry
