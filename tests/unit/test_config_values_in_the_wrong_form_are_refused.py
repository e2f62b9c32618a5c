"""A setting given in the form of another is refused when it is set, with one sentence naming the form, and a
``config set`` changes the value only: the line's inline comment and the rest of the file stay as written.

Every key of cultura.toml is enumerated from the model: a key that holds an address declares its form
(``host:port`` or ``url``, the field's ``form``), and the other form is refused for it; a key whose name says it
holds an address but declares no form fails the test, so a new one cannot slip past."""
from __future__ import annotations

import pytest
from click.testing import CliRunner
from pydantic import BaseModel

from cultura.cli import cli
from cultura.config import Config, load_config

URL, HOST_PORT = "http://127.0.0.1:18700/", "127.0.0.1:18700"
ADDRESS_WORDS = ("url", "host", "proxy", "address", "endpoint", "server")


def _keys(model=Config, prefix=""):
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            yield from _keys(ann, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", field


FORMS = {key: (f.json_schema_extra or {}).get("form") for key, f in _keys()}
#: the keys that take text (a string or a list of strings): the only ones a URL or a host:port can be set to
TEXT_KEYS = {key for key, f in _keys() if "str" in repr(f.annotation)}


def config_set(project, key: str, value: str):
    return CliRunner().invoke(cli, ["--project", str(project.root), "config", "set", key, value])


def test_every_address_key_declares_its_form():
    undeclared = [k for k, form in FORMS.items() if form is None and k in TEXT_KEYS
                  and any(w in k.rpartition(".")[2].lower() for w in ADDRESS_WORDS)]
    assert not undeclared, f"keys that hold an address but declare no form (host:port or url): {undeclared}"
    assert len(TEXT_KEYS) > 10 and FORMS["download.allow_hosts"] == "host:port" and FORMS["annotate.image_base_url"] == "url"


@pytest.mark.parametrize("key", [k for k, form in FORMS.items() if form is not None])
def test_the_other_form_is_refused_naming_the_right_one(project, key):
    path = project.root / "cultura.toml"
    before = path.read_text()
    wrong, words = (URL, "host:port") if FORMS[key] == "host:port" else (HOST_PORT, "http://")
    r = config_set(project, key, wrong)
    assert r.exit_code == 1 and words in r.output and "Traceback" not in r.output, r.output
    assert "Nothing was written" in r.output and path.read_text() == before


def test_a_url_in_allow_hosts_is_refused_with_its_host_port(project):
    r = config_set(project, "download.allow_hosts", URL)
    assert r.exit_code == 1 and "is a URL" in r.output and f"write {HOST_PORT}" in r.output, r.output
    r = config_set(project, "download.allow_hosts", "https://images.example.org/photos")
    assert r.exit_code == 1 and "write images.example.org:443" in r.output, r.output
    r = config_set(project, "download.allow_hosts", "localhost")
    assert r.exit_code == 1 and "has no port" in r.output, r.output
    assert config_set(project, "download.allow_hosts", HOST_PORT).exit_code == 0
    assert config_set(project, "download.allow_hosts", "[::1]:8080").exit_code == 0
    assert load_config(project.root / "cultura.toml").download.allow_hosts == ["[::1]:8080"]


def test_a_hand_edited_url_in_allow_hosts_is_refused_on_load(project):
    path = project.root / "cultura.toml"
    path.write_text(path.read_text().replace("allow_hosts = []", f'allow_hosts = ["{URL}"]'))
    r = CliRunner().invoke(cli, ["--project", str(project.root), "images", "download"])
    assert r.exit_code == 1 and "download.allow_hosts" in r.output and f"write {HOST_PORT}" in r.output, r.output


def test_set_keeps_the_inline_comment_and_every_other_line(project):
    path = project.root / "cultura.toml"
    text = path.read_text()
    assert "workers = 32\n" in text
    text = text.replace("workers = 32\n", "workers = 32   # one per core on the lab machine\n", 1)
    text = text.replace("[download]\n", "[download]\n# downloads go through the lab's proxy\n", 1)
    text = text.replace('user_agent = "', 'user_agent = "#not-a-comment ', 1)
    path.write_text(text)
    assert config_set(project, "download.workers", "8").exit_code == 0
    after = path.read_text()
    assert after == text.replace("workers = 32   # one per core on the lab machine\n",
                                 "workers = 8  # one per core on the lab machine\n", 1)
    # a '#' inside a string is not taken for a comment
    assert config_set(project, "download.user_agent", "lab-crawler/1.0").exit_code == 0
    assert 'user_agent = "lab-crawler/1.0"\n' in path.read_text()
    assert load_config(path).download.workers == 8

