"""Secrets never shown: URL credentials stripped, known secrets scrubbed from errors, model identities, task data,
printed tables and JSON. (Canaries through every stage: tests/integration/reliability/test_secrets_end_to_end.py.)"""
from __future__ import annotations

import json

from click.testing import CliRunner

from cultura.redact import REDACTED, known_secrets, register_secret, scrub, scrub_obj, strip_userinfo
from tests.fakes.image_server import image_server  # noqa: F401 (fixture)

CANARY_KEY = "sk-canaryKEY7f3a9e1b2c4d5e6f"
CANARY_USER = "canaryUSER5d6e"
CANARY_PASS = "canaryPASS91b2c3"
CANARY_TOKEN = "canaryTOKEN0a1b2c3d4e"
CANARY_IMGPASS = "canaryIMGPASS77aa"


def test_strip_userinfo():
    assert strip_userinfo("http://u:p@h.example:81/v1?q=1#f") == "http://h.example:81/v1?q=1#f"
    assert strip_userinfo("https://token@h.example/") == "https://h.example/"
    assert strip_userinfo("http://[::1]:8080/x") == "http://[::1]:8080/x"
    assert strip_userinfo("http://h.example/a@b") == "http://h.example/a@b"   # an @ in the path stays
    assert strip_userinfo(None) is None and strip_userinfo("file:///x@y") == "file:///x@y"


def test_scrub_known_secrets_and_header_shapes(monkeypatch, tmp_path):
    keyfile = tmp_path / "key"
    keyfile.write_text("sk-fromFILE123456789\n")
    keyfile.chmod(0o600)
    monkeypatch.setenv("OPENAI_API_KEY_FILE", str(keyfile))
    monkeypatch.setenv("MY_SERVICE_TOKEN", CANARY_TOKEN)
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://{CANARY_USER}:{CANARY_PASS}@127.0.0.1:9/v1")
    assert {CANARY_TOKEN, CANARY_USER, CANARY_PASS, "sk-fromFILE123456789"} <= set(known_secrets())
    text = (f"500: echo {{'authorization': 'Bearer {CANARY_TOKEN}'}} key sk-fromFILE123456789 "
            f"at http://{CANARY_USER}:{CANARY_PASS}@127.0.0.1:9/v1 pass {CANARY_PASS} x-api-key: abcdefgh1234")
    out = scrub(text)
    assert not any(c in out for c in (CANARY_TOKEN, CANARY_USER, CANARY_PASS, "sk-fromFILE", "abcdefgh1234"))
    assert "http://127.0.0.1:9/v1" in out and REDACTED in out
    # ordinary words are not mistaken for tokens
    assert scrub("max token limitation exceeded; Bearer of bad news", secrets=()) == \
        "max token limitation exceeded; Bearer of bad news"
    register_secret("registeredSECRET42")
    assert "registeredSECRET42" not in scrub("x registeredSECRET42 y", secrets=())
    assert scrub_obj({"u": [f"http://a:{CANARY_PASS}@h/"]}) == {"u": ["http://h/"]}


def test_model_identities_never_carry_base_url_credentials(monkeypatch):
    """attribution_scores.judge, eval_runs.model and result JSON are built from these identities."""
    import cultura.cli  # noqa: F401 (models.scorers imported first hits an import cycle of the new layout)
    from cultura.models.generators import OpenAIChatGenerator
    from cultura.models.judges import OpenAIJudge
    from cultura.models.scorers import OpenAICompletionsScorer

    base = f"http://{CANARY_USER}:{CANARY_PASS}@llm.example:8000/v1"
    for obj in (OpenAIJudge("m", base_url=base), OpenAIChatGenerator("m", base_url=base),
                OpenAICompletionsScorer("m", base_url=base)):
        assert obj.identity.endswith("@llm.example:8000") and CANARY_PASS not in obj.identity
        assert CANARY_USER not in obj.identity


def test_cli_errors_are_scrubbed(project, monkeypatch):
    """A library error that quotes a secret (e.g. a server's echo) is printed without it."""
    from cultura.cli import cli
    from cultura.benchmark import status as status_mod
    from cultura.errors import CulturaError

    monkeypatch.setenv("OPENAI_API_KEY", CANARY_KEY)

    def boom(*a, **k):
        raise CulturaError(f"server said: Authorization: Bearer {CANARY_KEY}")

    monkeypatch.setattr(status_mod, "project_status", boom)
    import cultura.cli.project as cmds
    monkeypatch.setattr(cmds, "project_status", boom, raising=False)
    for args in (["status"], ["status", "--json"]):
        r = CliRunner().invoke(cli, ["--project", str(project.root), *args])
        assert r.exit_code != 0 and "server said" in r.output and CANARY_KEY not in r.output, r.output


def test_label_studio_task_data_never_carries_url_credentials():
    from cultura.annotate.items import image_url

    assert image_url({"url": f"http://u:{CANARY_PASS}@img.example/a.jpg", "path": "blobs/ab/x.jpg"}, None) \
        == "http://img.example/a.jpg"
    assert image_url({"path": "blobs/ab/x.jpg"}, f"http://u:{CANARY_PASS}@127.0.0.1:8081/") \
        == "http://127.0.0.1:8081/blobs/ab/x.jpg"


# ------------------------------------------------------------------------------------------ printed URLs

def test_every_printed_table_and_json_strips_url_credentials(capsys):
    """What any command prints goes through the console: user:password@ never reaches stdout, in a table cell,
    a JSON value or a JSON key; text without a URL is printed exactly."""
    from cultura.cli.console import listing, summary

    url = f"http://{CANARY_USER}:{CANARY_IMGPASS}@127.0.0.1:8081/blobs"
    data = {"image_base": url, "urls": [url, "mailto:a@b.example", "a@b"], url: 1}
    for as_json in (True, False):
        summary("annotate push filter", data, as_json)
        listing("servers", [{"url": url, "note": f"see {url}/x"}], as_json)
        out = capsys.readouterr().out
        assert CANARY_IMGPASS not in out and CANARY_USER not in out, out
        assert "127.0.0.1:8081/blobs" in out and "mailto:a@b.example" in out and "a@b" in out
    assert json.loads(_json_of(lambda: summary("t", data, True), capsys))["image_base"] == \
        "http://127.0.0.1:8081/blobs"


def _json_of(fn, capsys) -> str:
    fn()
    return capsys.readouterr().out
