"""Secrets never reach the project folder, end to end: canary secrets through every stage against local servers,
Label Studio's data dir private and a seed's credentials left behind, push's image base never printed with its
credentials."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from cultura.redact import REDACTED
from tests.fakes.image_server import image_server  # noqa: F401 (fixture)
from tests.fakes.openai_stub import OpenAIStub
from tests.unit.reliability.test_secrets import CANARY_IMGPASS, CANARY_KEY, CANARY_PASS, CANARY_TOKEN, CANARY_USER  # noqa: F401 - shared with the unit tests


CANARIES = [CANARY_KEY, CANARY_USER, CANARY_PASS, CANARY_TOKEN, CANARY_IMGPASS]


def leaks(root: Path, canaries=CANARIES, skip: tuple[str, ...] = ()) -> list[str]:
    """``path: canary`` for every file under ``root`` (but the input folders in ``skip``) that contains a
    canary (raw, URL-quoted, or as Basic auth)."""
    import base64
    import urllib.parse

    basic = base64.b64encode(f"{CANARY_USER}:{CANARY_PASS}".encode())  # an Authorization: Basic echo
    files = [p for p in sorted(Path(root).rglob("*")) if p.is_file() and not p.is_symlink()
             and not any(p.relative_to(root).parts[0] == s for s in skip)]
    found = [f"{p.relative_to(root)}: basic auth" for p in files if basic in p.read_bytes()]
    for p in files:
        data = p.read_bytes()
        for c in canaries:
            for form in {c, urllib.parse.quote(c)}:
                if form.encode() in data:
                    found.append(f"{p.relative_to(root)}: {c}")
    return found


@pytest.fixture
def canary_env(monkeypatch):
    stub = OpenAIStub().start()
    stub.api_key = CANARY_KEY
    stub.echo_headers = True
    monkeypatch.setenv("OPENAI_API_KEY", CANARY_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url.replace("http://", f"http://{CANARY_USER}:{CANARY_PASS}@"))
    monkeypatch.setenv("CULTURA_TEST_ACCESS_TOKEN", CANARY_TOKEN)
    yield stub
    stub.stop()


def test_canary_secrets_never_reach_the_project_folder(project, image_server, canary_env, tmp_path):  # noqa: F811
    from cultura.cli import cli
    from cultura.curate.concepts import generate_concepts
    from cultura.curate.download import download_candidates
    from cultura.curate.search import search_images
    from cultura.evaluate.runner import run_suite
    from cultura.models.embedders.registry import get_embedder

    stub = canary_env
    project.config.llm.max_attempts = 1
    project.config.download.allow_hosts = [image_server.host_port]
    project.save_config()
    # an LLM stage against a server that answers errors echoing the request headers (Authorization)
    stub.fail_next = [400] * 50
    generate_concepts(project, n=2)
    errors = [r[0] for r in project.db.execute("SELECT error FROM llm_calls")]
    assert errors and all("planted failure" in e and REDACTED in e for e in errors)
    # image URLs and source pages with user:password@
    urls = tmp_path / "urls.jsonl"
    rows = [{"url": image_server.url(f"/img/{i}.jpg").replace("http://", f"http://img:{CANARY_IMGPASS}@"),
             "concept": "bus", "country": "JP",
             "source_page": f"https://u:{CANARY_IMGPASS}@pages.example/{i}?token={CANARY_TOKEN}"}
            for i in range(3)]
    urls.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert search_images(project, provider=f"urls:{urls}", progress=False)["results"] == 3
    assert download_candidates(project, workers=2, progress=False)["by_status"] == {"downloaded": 3}
    # an evaluation whose model talks to the base URL with credentials: the run row (model, model_info,
    # error) and the CLI's error output
    emb = get_embedder("openai:canary-embed")
    rec = run_suite(project, emb, "prevalence")
    assert rec.status == "failed"
    r = CliRunner().invoke(cli, ["--project", str(project.root), "evaluate", "run", "--model",
                                 "openai:canary-embed", "--suite", "prevalence"])
    assert not any(c in r.output for c in CANARIES), r.output
    project.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    project.close()
    assert leaks(project.root) == []


@pytest.mark.slow
def test_canary_secrets_through_every_stage(tmp_path, canary_env, monkeypatch):
    """The demo pipeline (search, download, dedup, tag, build, export, evaluate + report) on image URLs and
    source pages carrying canaries, plus an LLM stage and an embedding model behind an echoing server."""
    import tests.fakes.drawn_world as demo
    from cultura.benchmark.build import build_benchmark
    from cultura.benchmark.export import export_benchmark
    from cultura.curate.concepts import generate_concepts
    from cultura.evaluate.report import write_report
    from cultura.evaluate.runner import run_evaluation
    from cultura.project import Project

    stub = canary_env
    localise = demo.localise_urls

    def with_userinfo(world_dir, host_port):
        out = localise(world_dir, host_port)
        rows = [json.loads(x) for x in out.read_text().splitlines()]
        for r in rows:
            r["url"] = r["url"].replace("http://", f"http://img:{CANARY_IMGPASS}@")
            r["source_page"] = f"https://u:{CANARY_IMGPASS}@pages.example/{r['concept']}?token={CANARY_TOKEN}"
        out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        return out

    monkeypatch.setattr(demo, "localise_urls", with_userinfo)
    root = tmp_path / "proj"
    res = demo.run_curation(root, say=lambda *a: None)
    assert res["download"]["by_status"]["downloaded"] > 80  # the userinfo was stripped, not the images
    project = Project(root)
    project.config.llm.max_attempts = 1
    project.save_config()
    stub.fail_next = [400] * 50
    generate_concepts(project, n=2)
    from tests.fakes.world import mention_queries

    mention_queries(project)   # the short descriptor queries set by hand, as a person would
    from cultura.curate.cultures_decide import list_flags, resolve_flags

    for f in list_flags(project.db):  # a person decides the photos found for several cultures: all stay
        resolve_flags(project.db, [f["sha256"]], resolution="checked by hand", by="hand", cultures=f["countries"])
    for kind in ("association", "descriptor"):  # what the demo's build + export stage did
        b = build_benchmark(project, kind, allow_unreviewed=True, allow_random_tags=True)
        dest = project.root / "exports" / f"{b['name']}-v{b['version']}"
        export_benchmark(project, dest, benchmarks=[f"{b['name']}@{b['version']}"])
        assert dest.is_dir()
    stub.fail_next = [400] * 50
    recs = run_evaluation(project, ["fake", "openai:canary-embed"], "prevalence", options={"n_resamples": 20},
                          progress=False)
    write_report(project)
    failed = [r.reason for r in recs if r.status == "failed"]
    assert failed and all(REDACTED in f or "rejected" in f for f in failed), failed
    project.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    project.close()
    assert (root / "reports").is_dir() and (root / "exports").is_dir()
    assert leaks(root, skip=("fixture-world",)) == []  # the demo's input files live in the project folder


def _mode(p: Path) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


@pytest.mark.labelstudio
def test_label_studio_data_dir_is_private_and_seed_credentials_do_not_travel(project, labelstudio, monkeypatch):
    """The project's Label Studio data dir is 0700 with 0600 files (its sqlite holds the admin token); a
    seed data dir is adopted without its creds.json, and the seed's admin token no longer works there."""
    import httpx

    from cultura.annotate.server import data_dir, read_secrets, start_server, stop_server
    from tests.fakes.labelstudio import SEED, _executable

    if not (SEED / "creds.json").exists():
        pytest.skip("no Label Studio seed (the session fixture makes one on its first run)")
    seed_creds = json.loads((SEED / "creds.json").read_text())
    monkeypatch.delenv("LABEL_STUDIO_URL", raising=False)
    monkeypatch.setenv("LABEL_STUDIO_BIN", _executable())
    st = start_server(project, seed_dir=SEED)
    try:
        ddir = data_dir(project)
        assert not (ddir / "creds.json").exists()
        own = read_secrets(project)
        assert own["api_key"] != seed_creds["api_key"] and own["password"] != seed_creds["password"]
        r = httpx.get(st["url"] + "/api/current-user/whoami",
                      headers={"Authorization": f"Token {seed_creds['api_key']}"}, timeout=600)
        assert r.status_code == 401, "the seed's admin token still opens the project's Label Studio"
        r = httpx.get(st["url"] + "/api/current-user/whoami",
                      headers={"Authorization": f"Token {own['api_key']}"}, timeout=600)
        assert r.status_code == 200
        assert _mode(ddir) == 0o700
        for p in ddir.rglob("*"):
            if p.is_file() and not p.is_symlink():
                assert _mode(p) & 0o077 == 0, f"{p} is mode {oct(_mode(p))}"
        assert (ddir / "label_studio.sqlite3").exists()
        assert seed_creds["password"].encode() not in b"".join(
            p.read_bytes() for p in project.root.rglob("*") if p.is_file())
    finally:
        stop_server(project)


@pytest.mark.labelstudio
def test_push_image_base_credentials_are_never_printed(project, labelstudio):
    """``annotate push --image-base http://user:pass@host:port`` printed the credentials in its summary; the
    tasks already got the stripped URL. Now neither the table, nor --json, nor the tasks carry them."""
    import uuid

    from cultura.annotate import annotators as ann_mod
    from cultura.annotate.server import use_server
    from cultura.cli import cli
    from tests.fakes.labelstudio import add_images

    use_server(project, labelstudio.url, labelstudio.api_key)
    tag = uuid.uuid4().hex[:6]
    add_images(project, "rice", "JP", 2)
    ann_mod.add_annotator(project, "ann", email=f"ann.{tag}@example.org", country="JP")
    base = f"http://{CANARY_USER}:{CANARY_IMGPASS}@127.0.0.1:8081"
    for extra in ([], ["--json"]):
        r = CliRunner().invoke(cli, ["--project", str(project.root), "annotate", "push", "filter", "--overlap",
                                     "1", "--batch", f"b{len(extra)}", "--image-base", base, *extra])
        assert r.exit_code == 0, r.output
        assert CANARY_IMGPASS not in r.output and CANARY_USER not in r.output, r.output
        assert "127.0.0.1:8081" in r.output
    assert json.loads(r.stdout)["image_base"] == "http://127.0.0.1:8081"
    assert leaks(project.root, [CANARY_USER, CANARY_IMGPASS]) == []
