"""The real ``cultura`` CLI run on one project through click's CliRunner, as the CLI tests drive it."""
from __future__ import annotations

import csv
import json
from pathlib import Path

from click.testing import CliRunner

from cultura.cli import cli
from cultura.cli.demo import COUNTRIES, PLAN, TERMS, real_photos


class ProjectCli:
    """``cultura --project PROJECT …``: ``run(*args)`` returns the whole output and asserts the exit (``ok=None``
    accepts either); ``run.json(*args)`` adds ``--json`` and parses it."""

    def __init__(self, project: Path, env: dict | None = None):
        self.project, self.env, self.runner = project, env, CliRunner()

    def __call__(self, *args, ok: bool | None = True) -> str:
        args = tuple(map(str, args))
        res = self.runner.invoke(cli, ["--project", str(self.project), *args], env=self.env,
                                 catch_exceptions=False)
        if ok is not None:
            assert (res.exit_code == 0) == ok, \
                f"cultura {' '.join(args)} {'failed' if ok else 'should have failed'}:\n{res.output}"
        # progress lines of a long command go to stderr, never into --json; an error's JSON is on stderr
        self.stdout = res.stdout if res.exit_code == 0 else res.output
        return res.output

    def json(self, *args, ok: bool | None = True):
        self(*args, "--json", ok=ok)
        return json.loads(self.stdout)


def demo_terms_tsv(countries=None) -> str:
    """The demo's native terms as ``cultura concepts set-term --from`` reads them (``countries`` keeps those)."""
    return "concept\tcountry\tterm\n" + "".join(
        f"{k}\t{cc}\t{t}\n" for k, v in TERMS.items() for cc, t in v.items() if countries is None or cc in countries)


def demo_project(proj: Path, photos: Path, terms_file: Path, countries=COUNTRIES,
                 env: dict | None = None) -> ProjectCli:
    """A project made through the CLI for the demo's real photographs in ``photos``: ``init`` for ``countries``,
    the demo's concepts and their native terms, and a folder search; nothing downloaded yet."""
    res = CliRunner().invoke(cli, ["init", str(proj), "--countries", ",".join(countries)])
    assert res.exit_code == 0, res.output
    run = ProjectCli(proj, env)
    run("concepts", "add", *PLAN)
    terms_file.write_text(demo_terms_tsv(countries), encoding="utf-8")
    run("concepts", "set-term", "--from", terms_file)
    run("images", "search", "--provider", f"folder:{photos}")
    return run


def downloaded_demo(tmp: Path) -> ProjectCli:
    """The demo project on the real photographs in ``tmp``, downloaded and deduplicated: its planted copies
    found for several cultures are culture questions (``images flags``)."""
    real_photos(tmp / "photos")
    run = demo_project(tmp / "project", tmp / "photos", tmp / "terms.tsv")
    run.json("images", "download")
    run("images", "dedup")
    return run


def ratings_csv(path: Path, rows) -> Path:
    """A ratings file for ``cultura import ratings``: ``rows`` of (sha256, country, score)."""
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["sha256", "country", "score"])
        w.writerows(rows)
    return path
