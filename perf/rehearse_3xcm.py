"""A 3XCM-sized rehearsal: a 16-country project (the ``3xcm`` preset) built from generated images through the
command line, each stage a process of its own, and what each stage cost.

The images are drawn here (each one distinct: a colour field with a pattern seeded by its index), served by a
local HTTP server in a process of its own and listed in a ``urls:`` file, one row per image with the concept,
the country and the project's English query text. The stages: init, concepts (the preset loaded, then all but
``--concepts`` removed with one ``concepts remove --from``), native terms (``set-term --from``; the
English-speaking countries take the concept's name), search (the ``urls:`` list: rows in = stored + rejected is
checked), download, dedup, then annotation in a real Label Studio as a team would do it (:func:`annotate`): the
project's server started, a native rater per country of the preset and an adjudicator added (each on a server of
their own), the filter campaign pushed (overlap 2), answered by SIMULATED annotators, pulled and adjudicated (the
disagreements answered by the adjudicator, pulled and adjudicated again), then the relevance campaign likewise
(each image rated for its own country and one other); then the association and descriptor builds on those
decisions (every language's short descriptor query from its pattern), export, evaluation with the fake embedder,
the report, the view (cold, then warm) and status; the servers are stopped at the end. ``--no-annotate`` is the
quick path: ratings imported for the culture questions of look-alike images (when there are any) and the builds
made with ``--allow-unreviewed --allow-unrated``.

For each stage it prints wall time, CPU time (the stage's process and its children, plus the image server's),
peak resident memory of the stage's process tree, the cost per image and the longest time its stderr said
nothing (a stage silent for more than :data:`SILENCE_LIMIT_S` is flagged ``SILENT`` and listed; what each stage
said and when is kept in ``WORKDIR/logs/``); a stage's CPU includes every Label Studio server's it ran beside.
``--json`` prints the same as JSON.

    python perf/rehearse_3xcm.py --images 12000 --concepts 40 --workdir /tmp/rehearsal
    python perf/rehearse_3xcm.py --images 64 --concepts 2 --no-annotate --json   # the tiny run CI makes
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_download import proc_cpu  # noqa: E402  (a script beside this one, found through the path above)

from cultura.annotate.people import PEOPLE_REL, _running  # noqa: E402
from cultura.annotate.server import DATA_REL, free_port  # noqa: E402

PYTHON = sys.executable
#: A stage is flagged when its stderr says nothing for longer than this: off a terminal the command line's
#: reporter repeats a task's line every 5 s without news (and names what a server start waits for), so a stage
#: that reports stays well under it.
SILENCE_LIMIT_S = 10.0
PRESET = "3xcm"
#: The simulated annotators' disagreement rate (some items go to the adjudicator).
DISAGREEMENT = 0.1
#: Where the rehearsal's Label Studio runs: cultura's own servers, never one named by the environment.
_FOREIGN_SERVER = ("LABEL_STUDIO_URL", "LABEL_STUDIO_API_KEY")


class Stages:
    """Runs ``cultura --project P …`` as a child process per stage and records its cost."""

    def __init__(self, project: Path, n_images: int, server_pid: int | None, *, say=print, logs: Path | None = None):
        self.project, self.n, self.server_pid, self.say, self.logs = project, n_images, server_pid, say, logs
        self.rows: list[dict] = []
        self.env = {k: v for k, v in os.environ.items() if k not in _FOREIGN_SERVER}

    def _server_pids(self) -> list[int]:
        """The image server and every Label Studio server the project runs now (their CPU is the stage's too)."""
        return [self.server_pid] * bool(self.server_pid) + label_studio_pids(self.project)

    def __call__(self, stage: str, *args, json_out: bool = True, project: bool = True):
        argv = [PYTHON, "-m", "cultura", *(["--project", str(self.project)] if project else []), *map(str, args),
                *(["--json"] if json_out else [])]
        before = {pid: proc_cpu(pid) for pid in self._server_pids()}
        t0 = time.monotonic()
        with tempfile.TemporaryFile("w+") as fo:
            proc = subprocess.Popen(argv, stdout=fo, stderr=subprocess.PIPE, text=True,
                                    env={**self.env, "COLUMNS": "200"})
            told: list[float] = [t0]   # when each stderr line came: the stage's longest silence
            err_lines: list[str] = []

            def read_stderr():
                for line in proc.stderr:
                    told.append(time.monotonic())
                    err_lines.append(line)
            reader = threading.Thread(target=read_stderr, daemon=True)
            reader.start()
            # wait4's usage is the child's and that of every descendant it waited for (loaders, workers)
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            wall = time.monotonic() - t0
            reader.join()
            fo.seek(0)
            out, err = fo.read(), "".join(err_lines)
        told.append(t0 + wall)
        silence = max(b - a for a, b in zip(told, told[1:]))
        if self.logs is not None:   # what the stage said and when: where a silence was
            self.logs.mkdir(parents=True, exist_ok=True)
            (self.logs / f"{len(self.rows):02d}-{stage.replace(' ', '_').replace('/', '_')}.err").write_text(
                "".join(f"{t - t0:8.2f}  {line}" for t, line in zip(told[1:], err_lines)), encoding="utf-8")
        # servers running before and after (a server the stage started counts from zero)
        srv = sum(proc_cpu(pid) - before.get(pid, 0.0) for pid in self._server_pids())
        if proc.returncode != 0:
            raise SystemExit(f"stage {stage!r} failed (exit {proc.returncode}): {' '.join(argv[3:])}\n{out}\n{err}")
        cpu = usage.ru_utime + usage.ru_stime + srv
        peak = round(usage.ru_maxrss / 1024, 1)  # KiB on Linux
        row = {"stage": stage, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "peak_mb": peak,
               "ms_per_image": round(1000 * wall / max(self.n, 1), 3), "longest_silence_s": round(silence, 2)}
        self.rows.append(row)
        self.say(f"  {stage:<22} wall {wall:7.2f} s  cpu {cpu:7.2f} s  peak {peak:7.0f} MB  "
                 f"{row['ms_per_image']:8.3f} ms/image  silent {silence:6.2f} s"
                 f"{'  SILENT' if silence > SILENCE_LIMIT_S else ''}")
        if not json_out:
            return out
        start = min((i for i in (out.find("{"), out.find("[")) if i >= 0), default=0)
        return json.loads(out[start:])


def label_studio_pids(project: Path) -> list[int]:
    """The running Label Studio servers of ``project``: its own and every annotator's (their state files, where
    cultura keeps them)."""
    out = []
    for d in [project / DATA_REL, *sorted(p for p in (project / PEOPLE_REL).glob("*") if p.is_dir())]:
        try:
            pid = _running(d)
        except (OSError, ValueError):  # a state file being written
            continue
        if pid:
            out.append(pid)
    return out


def annotate(run: Stages, codes: list[str]) -> dict:
    """The annotation stages as a team runs them (README, *Annotation and review*), with SIMULATED answers: the
    filter and relevance campaigns pushed, answered, pulled and adjudicated until every item is decided."""
    run("annotate server start", "annotate", "server", "start")
    for cc in codes:   # a native rater per culture: relevance asks each image of natives only
        run(f"annotators add {cc}", "annotate", "annotators", "add", f"rater-{cc.lower()}", "--email",
            f"rater-{cc.lower()}@rehearsal.invalid", "--country", cc)
    run("annotators add adj", "annotate", "annotators", "add", "adjudicator", "--email", "adj@rehearsal.invalid",
        "--role", "adjudicator")
    out = {}
    for campaign, overlap in (("filter", 2), ("relevance", 1)):
        pushed = run(f"push {campaign}", "annotate", "push", campaign, "--overlap", overlap)
        run(f"simulate {campaign}", "annotate", "simulate", campaign, "--disagreement", DISAGREEMENT)
        run(f"pull {campaign}", "annotate", "pull", "--campaign", campaign)
        (first,) = run(f"adjudicate {campaign}", "annotate", "adjudicate", "--campaign", campaign)
        last = first
        if first.get("sent_to_adjudication"):
            run(f"simulate {campaign} adj.", "annotate", "simulate", campaign, "--purpose", "adjudicate")
            run(f"pull {campaign} adj.", "annotate", "pull", "--campaign", campaign)
            (last,) = run(f"adjudicate {campaign} again", "annotate", "adjudicate", "--campaign", campaign)
        out[campaign] = {"items": pushed["items"], "tasks": pushed["tasks_created"],
                         "disagreements": first["disagreements"],
                         "sent_to_adjudication": first.get("sent_to_adjudication", 0),
                         "decided": last["decided"] + last["adjudicated"] + last["gold"], "pending": last["pending"],
                         "unresolved": last.get("unresolved", 0)}
    return out


def draw_images(www: Path, n: int, seed: int = 0) -> list[str]:
    """``n`` distinct small JPEG files in ``www`` (a colour field and a seeded pattern each); their names."""
    from PIL import Image, ImageDraw

    rng = random.Random(seed)
    www.mkdir(parents=True, exist_ok=True)
    names = []
    for i in range(n):
        img = Image.new("RGB", (96, 96), (rng.randrange(256), rng.randrange(256), rng.randrange(256)))
        d = ImageDraw.Draw(img)
        for _ in range(6):  # shapes at seeded places: no two images share a perceptual hash by chance
            x, y = rng.randrange(80), rng.randrange(80)
            d.rectangle([x, y, x + rng.randrange(8, 40), y + rng.randrange(8, 40)],
                        fill=(rng.randrange(256), rng.randrange(256), rng.randrange(256)))
        name = f"img-{i:06d}.jpg"
        img.save(www / name, quality=85)
        names.append(name)
    return names


def _preset_concepts() -> list[str]:
    import csv
    from importlib import resources

    text = resources.files("cultura.data").joinpath("concepts_3xcm.csv").read_text("utf-8")
    return [r["concept"] if "concept" in r else next(iter(r.values())) for r in csv.DictReader(text.splitlines())]


def rehearse(workdir: Path, n_images: int, n_concepts: int, *, report: bool = True, annotation: bool = True,
             say=print) -> dict:
    from cultura.countries import registry

    reg = registry()
    codes = reg.presets[PRESET]["countries"]
    countries = [reg.countries[c] for c in codes]
    www, proj = workdir / "www", workdir / "project"
    say(f"• drawing {n_images} images in {www}")
    names = draw_images(www, n_images)
    port = free_port()
    server = subprocess.Popen([PYTHON, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory",
                               str(www)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run = Stages(proj, n_images, server.pid, say=say, logs=workdir / "logs")
    campaigns: dict = {}
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        say(f"• serving them at http://127.0.0.1:{port}/; the stages:")
        run("init", "init", proj, "--preset", PRESET, "--name", "rehearsal", project=False)
        cfg = proj / "cultura.toml"
        cfg.write_text(cfg.read_text(encoding="utf-8").replace(
            "allow_hosts = []", f'allow_hosts = ["127.0.0.1:{port}"]'), encoding="utf-8")
        run("concepts load", "concepts", "load", "--preset", PRESET)
        listed = [r["name"] for r in run("concepts list", "concepts", "list")]
        keep = sorted(listed)[:n_concepts]
        (workdir / "drop.txt").write_text("\n".join(n for n in listed if n not in keep) + "\n", encoding="utf-8")
        run("concepts remove", "concepts", "remove", "--from", workdir / "drop.txt", "--reason", "rehearsal scope")
        (workdir / "terms.tsv").write_text("concept\tcountry\tterm\n" + "".join(
            f"{k}\t{c.code}\t{k}-{c.code.lower()}\n" for k in keep for c in countries if c.language != "en"),
            encoding="utf-8")
        run("concepts set-term", "concepts", "set-term", "--from", workdir / "terms.tsv")
        # one row per image: concept × country cells in turn, ranked within their query
        rows, rank = [], {}
        for i, name in enumerate(names):
            k, c = keep[i % len(keep)], countries[(i // len(keep)) % len(countries)]
            rank[(k, c.code)] = rank.get((k, c.code), 0) + 1
            rows.append({"url": f"http://127.0.0.1:{port}/{name}", "concept": k, "country": c.code,
                         "language": "en", "query": f"{k} {c.name}", "rank": rank[(k, c.code)]})
        urls = workdir / "urls.jsonl"
        urls.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        search = run("images search", "images", "search", "--provider", f"urls:{urls}")
        accounted = search["rows"] == search["stored"] + search["rejected"] == len(rows)
        download = run("images download", "images", "download")
        run("images dedup", "images", "dedup")
        # drawn images that look alike across countries are culture questions: the relevance campaign decides
        # them, or (the quick path) ratings imported for every country of each, as a campaign's would
        flags = run("images flags", "images", "flags")
        if annotation:
            campaigns = annotate(run, codes)
            open_flags = run("images flags (after)", "images", "flags")
            if open_flags:
                raise SystemExit(f"{len(open_flags)} culture questions still open after the relevance campaign")
            loose = []
        else:
            if flags:
                ratings = workdir / "ratings.csv"
                ratings.write_text("sha256,country,score\n" + "".join(
                    f"{f['sha256']},{cc},4\n" for f in flags for cc in f["countries"]), encoding="utf-8")
                run("import ratings", "import", "ratings", ratings)
            loose = ["--allow-unreviewed", "--allow-unrated"]  # nothing reviewed or rated on the quick path
        assoc = run("build association", "build", "association", *loose)
        desc = run("build descriptor", "build", "descriptor", *loose)
        run("export", "export", workdir / "export", "--format", "jsonl")
        evals = run("evaluate run", "evaluate", "run", "--model", "fake", "--suite", "prevalence,association,descriptor",
                    "--option", "n_resamples=200")
        if report:  # the figures dominate a tiny run's time; a CI run may leave them out
            run("evaluate report", "evaluate", "report")
        run("view (cold)", "view", json_out=False)
        run("view (warm)", "view", json_out=False)
        run("status", "status")
    finally:
        if label_studio_pids(proj):   # the project's Label Studio and every annotator's: stopped, timed too
            try:
                run("annotate server stop", "annotate", "server", "stop")
            except SystemExit as e:   # a failed stage's message comes first; this one is only said
                say(str(e))
        server.terminate()
        server.wait(timeout=10)
    descriptor_countries = sorted({it["query_country"] for it in _jsonl(workdir / "export" / "items.jsonl")
                                   if it.get("descriptor_country")})
    return {"images": n_images, "concepts": len(keep), "countries": len(countries), "stages": run.rows,
            "culture_questions": len(flags), "annotation": campaigns,
            "all_decided": all(c["pending"] == c["unresolved"] == 0 for c in campaigns.values()),
            "search": search, "rows_accounted": accounted, "downloaded": download.get("new_images"),
            "association_trials": assoc["n_items"], "descriptor_trials": desc["n_items"],
            "descriptor_query_countries": descriptor_countries,
            "evaluations": [{"suite": r["suite"], "status": r["status"]} for r in evals],
            "silent_stages": [r["stage"] for r in run.rows if r["longest_silence_s"] > SILENCE_LIMIT_S],
            "total_wall_s": round(sum(r["wall_s"] for r in run.rows), 2)}


def _jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=int, default=12_000, help="How many images (default 12000).")
    ap.add_argument("--concepts", type=int, default=40, help="How many concepts of the preset (default 40).")
    ap.add_argument("--workdir", type=Path, help="Where to build (default: a temporary folder, removed after).")
    ap.add_argument("--no-report", action="store_true", help="Leave out 'evaluate report' (its figures).")
    ap.add_argument("--no-annotate", action="store_true",
                    help="The quick path: no Label Studio; ratings imported for the culture questions and the builds "
                         "made with --allow-unreviewed --allow-unrated.")
    ap.add_argument("--json", action="store_true", help="Print the result as JSON (stages on stderr).")
    a = ap.parse_args(argv)
    work = a.workdir or Path(tempfile.mkdtemp(prefix="rehearse-3xcm-"))
    work.mkdir(parents=True, exist_ok=True)
    say = (lambda s: print(s, file=sys.stderr)) if a.json else print
    try:
        res = rehearse(work, a.images, a.concepts, report=not a.no_report, annotation=not a.no_annotate, say=say)
    finally:
        if a.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    if a.json:
        print(json.dumps(res, indent=2, ensure_ascii=False))
    else:
        s = res["search"]
        print(f"rows in {s['rows']} = stored {s['stored']} + rejected {s['rejected']}: "
              f"{'yes' if res['rows_accounted'] else 'NO'}; downloaded {res['downloaded']}; association "
              f"{res['association_trials']} trials; descriptor {res['descriptor_trials']} trials over "
              f"{len(res['descriptor_query_countries'])} query countries; total {res['total_wall_s']} s; "
              f"silent for more than {SILENCE_LIMIT_S:.0f} s: {', '.join(res['silent_stages']) or 'no stage'}")
        for name, c in res["annotation"].items():
            print(f"{name}: {c['items']} items in {c['tasks']} tasks, {c['disagreements']} disagreements "
                  f"({c['sent_to_adjudication']} to the adjudicator), {c['decided']} decided, {c['pending']} "
                  f"waiting, {c['unresolved']} unresolved")
    return 0 if res["rows_accounted"] and not res["silent_stages"] and res["all_decided"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
