"""Strict configuration and project discovery: one clear sentence that names the fix."""
import json

import pytest
from click.testing import CliRunner

from cultura.cli import cli
from cultura.config import load_config, parse_config
from cultura.errors import ConfigError, ProjectNotFound
from cultura.project import Project, find_project, init_project


def test_unknown_key_names_path_and_suggestion(tmp_path):
    p = tmp_path / "cultura.toml"
    p.write_text('[download]\nworkerz = 3\n')
    with pytest.raises(ConfigError, match=r"unknown key 'download.workerz'. Did you mean 'workers'\?"):
        load_config(p)
    p.write_text('[downlaod]\nworkers = 3\n')
    with pytest.raises(ConfigError, match=r"unknown key 'downlaod'. Did you mean 'download'\?"):
        load_config(p)
    p.write_text('[download]\nworkers = "many"\n')
    with pytest.raises(ConfigError, match="'download.workers'"):
        load_config(p)
    p.write_text('[download\n')
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(p)


def test_init_and_discovery(tmp_path, monkeypatch):
    p = init_project(tmp_path / "a", preset="caire", countries=["NZ"])
    assert len(p.countries) == 11 and p.db_path.exists() and p.blobs.is_dir()
    assert p.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    sub = p.root / "blobs"
    assert find_project(sub).root == p.root
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ProjectNotFound, match="cultura init"):
        find_project()
    monkeypatch.setenv("CULTURA_PROJECT", str(p.root))
    assert find_project().root == p.root
    with pytest.raises(Exception, match="already exists"):
        init_project(tmp_path / "a", countries=["US"])
    assert Project(p.root).config.project.countries[-1] == "NZ"


def test_cli_errors_are_one_sentence(tmp_path, monkeypatch):
    r = CliRunner()
    res = r.invoke(cli, ["init", str(tmp_path / "x"), "--countries", "US,JPN"])
    assert res.exit_code == 1 and "Unknown country code 'JPN'" in res.output
    res = r.invoke(cli, ["init", str(tmp_path / "x"), "--preset", "3xmc"])
    assert "Did you mean '3xcm'" in res.output
    monkeypatch.chdir(tmp_path)
    res = r.invoke(cli, ["status"])
    assert res.exit_code == 1 and "cultura init" in res.output and "Traceback" not in res.output
    res = r.invoke(cli, ["init", str(tmp_path / "ok"), "--countries", "US,JP", "--json"])
    assert res.exit_code == 0, res.output
    res = r.invoke(cli, ["--project", str(tmp_path / "ok"), "status", "--json"])
    assert res.exit_code == 0 and '"countries"' in res.output


def test_countries_table_follows_the_config(tmp_path):
    p = init_project(tmp_path / "c", countries=["US", "JP"])
    assert {r["code"] for r in p.db["countries"].rows} == {"US", "JP"}
    p.close()
    text = (p.root / "cultura.toml").read_text().replace('"JP",', '"JP",\n    "TH",')
    (p.root / "cultura.toml").write_text(text)
    q = Project(p.root)
    assert {r["code"] for r in q.db["countries"].rows} == {"US", "JP", "TH"}
    assert q.db["countries"].get("TH")["native_name"] == "ประเทศไทย"
    q.close()


def test_annotate_config_is_typed():
    cfg = parse_config({"annotate": {"image_base_url": "http://127.0.0.1:8081", "relevance_other_countries": 2}})
    assert cfg.annotate.image_base_url == "http://127.0.0.1:8081" and cfg.annotate.relevance_other_countries == 2
    with pytest.raises(ConfigError, match="image_base_url"):
        parse_config({"annotate": {"image_base_url": "file:///x"}})
    with pytest.raises(ConfigError, match="Did you mean 'image_base_url'"):
        parse_config({"annotate": {"image_base": "http://x"}})
    with pytest.raises(ConfigError, match="Valid keys here: association"):
        parse_config({"evaluate": {"bogus": {}}})


def test_country_hint_names_the_registry_file_and_alpha3(tmp_path):
    res = CliRunner().invoke(cli, ["init", str(tmp_path / "p"), "--countries", "US,JPN", "--json"])
    assert res.exit_code != 0
    err = json.loads(res.output)
    assert "Did you mean 'JP'" in err["error"] and "countries.toml" in err["error"]


def test_the_bytes_remembered_as_valid_are_the_bytes_that_were_validated(tmp_path, monkeypatch):
    """A file edited while it is being checked: what is noted as valid (so that later opens skip pydantic) is
    exactly what the validator read, never the file as it was a moment before or after."""
    from pathlib import Path

    from cultura.config_file import known_valid

    monkeypatch.setenv("CULTURA_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "cultura.toml"
    bad = b'[project]\nname = "p"\ncountrys = ["JP"]\n'
    good = b'[project]\nname = "p"\ncountries = ["JP"]\n'
    path.write_bytes(bad)
    read = Path.read_bytes

    def edited_right_after_reading(self):
        data = read(self)
        if self == path:
            path.write_bytes(good)   # someone saves the fixed file just after this read
        return data

    monkeypatch.setattr(Path, "read_bytes", edited_right_after_reading)
    with pytest.raises(ConfigError, match="countrys"):
        load_config(path)            # what was read (the bad file) is what is judged
    monkeypatch.setattr(Path, "read_bytes", read)
    path.write_bytes(bad)
    assert not known_valid(path)     # and the bad bytes were never noted as valid
    path.write_bytes(good)
    assert load_config(path).project.countries == ["JP"] and known_valid(path)
