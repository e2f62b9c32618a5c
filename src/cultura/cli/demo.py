"""The demo: a researcher's day run through the ``cultura`` command line, on real photographs.

    python -m cultura.cli.demo DIR        (``make demo``)

Every stage is a ``cultura …`` command, printed before it runs, exactly as a user would type it (run in this
process, so torch loads once). The photographs are the sample photos that ship with scikit-image and
scikit-learn, cropped per country and laid out ``photos/<COUNTRY>/<concept>/``, with planted copies; a few
are also served over local HTTP as a ``urls:`` list, with broken URLs, so failures show up as rows.

Honest about what is simulated: the annotators are SIMULATED (``cultura annotate simulate``), the models are
random-init (``openclip:cultura-tiny``, the tiny GPT-2), the portraits are synthetic drawings, the knowledge
base is generated from the project's own images, the CAIRe judge is the deterministic stub. The report says
so in a banner. A stage that fails stops the demo with its error; every report section must have results.
"""
from __future__ import annotations

import contextlib
import functools
import json
import shlex
import shutil
import subprocess
import sys
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from click.testing import CliRunner
from PIL import Image
from rich.console import Console
from sklearn.datasets import load_sample_images

from ..annotate.server import free_port
from ..project import Project
from . import cli

COUNTRIES = ["US", "JP", "TH", "DE"]
#: concept → the sample photos standing for it (each cropped differently per country)
PLAN = {"breakfast": ["coffee", "flower"], "pet": ["chelsea", "astronaut"], "building": ["china", "rocket"]}
TERMS = {"breakfast": {"US": "breakfast", "DE": "Frühstück", "JP": "朝食", "TH": "อาหารเช้า"},
         "pet": {"US": "pet", "DE": "Haustier", "JP": "ペット", "TH": "สัตว์เลี้ยง"},
         "building": {"US": "building", "DE": "Gebäude", "JP": "建物", "TH": "อาคาร"}}
ANNOTATORS = [("sim-ann", "US"), ("sim-bob", "JP"), ("sim-cho", "TH"), ("sim-dan", "DE")]
#: every suite the report must show (a section with no done run fails the demo)
SUITES = ("prevalence", "association", "descriptor", "latent", "social", "llm", "attribution")


class DemoFailed(RuntimeError):
    """A stage of the demo failed; the message names the command and its error."""


# ------------------------------------------------------------------------------------ the photographs

def real_photos(root: str | Path) -> dict:
    """Write ``root/<COUNTRY>/<concept>/*.jpg`` from the sample photos of scikit-image and scikit-learn, plus
    planted copies: a re-encoded and a byte-identical copy (same country) and a half-size copy found for
    another country. Returns the counts (``files``, ``distinct`` images)."""
    # deferred: scikit-image and scikit-learn are heavy and only the photographs need them
    import skimage.data as skd

    root = Path(root)
    sk = load_sample_images()
    photos = {"coffee": skd.coffee(), "chelsea": skd.chelsea(), "astronaut": skd.astronaut(),
              "rocket": skd.rocket(), "china": sk.images[0], "flower": sk.images[1]}
    for concept, names in PLAN.items():
        for k, cc in enumerate(COUNTRIES):
            out = root / cc / concept
            out.mkdir(parents=True, exist_ok=True)
            for name in names:
                a = photos[name]
                h, w = a.shape[:2]
                x0, y0 = k * w // 10, k * h // 12
                crop = a[y0:y0 + int(h * 0.6), x0:x0 + int(w * 0.6)]
                Image.fromarray(crop).convert("RGB").save(out / f"{name}-{k}.jpg", quality=92)
    us = root / "US" / "breakfast"
    Image.open(us / "coffee-0.jpg").save(us / "coffee-0-reencoded.jpg", quality=92)
    (us / "coffee-0-exact.jpg").write_bytes((us / "coffee-0.jpg").read_bytes())
    im = Image.open(us / "coffee-0.jpg")
    im.resize((im.width // 2, im.height // 2)).save(root / "JP" / "breakfast" / "coffee-us-resized.jpg")
    return {"files": 27, "distinct": 26}


def url_list(photos: Path, www: Path, host_port: str) -> Path:
    """A ``urls:`` list: a few more crops served over HTTP, plus a 404, an HTML page and a too-small image."""
    www.mkdir(parents=True, exist_ok=True)
    rows = []
    for cc in COUNTRIES:
        src = Image.open(next((photos / cc / "building").glob("china-*.jpg")))
        name = f"temple-{cc}.jpg"
        src.transpose(Image.Transpose.FLIP_LEFT_RIGHT).save(www / name, quality=90)
        rows.append({"url": f"http://{host_port}/{name}", "concept": "building", "country": cc, "rank": 1})
    (www / "page.html").write_text("<html><body>not an image</body></html>")
    Image.new("RGB", (16, 16), (1, 2, 3)).save(www / "tiny.png")
    for name in ("missing.jpg", "page.html", "tiny.png"):
        rows.append({"url": f"http://{host_port}/{name}", "concept": "pet", "country": "US", "rank": 9})
    out = www.parent / "urls.jsonl"
    out.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return out


@contextlib.contextmanager
def serve(directory: str | Path):
    """Serve ``directory`` read-only on a free 127.0.0.1 port; yields ``host:port``."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


# ------------------------------------------------------------------------------------ the CLI

class Cli:
    """Runs ``cultura --project DIR …`` in this process, printing each command; a failure raises DemoFailed."""

    def __init__(self, project_dir: Path, say=print):
        self.project, self.say = project_dir, say

    def __call__(self, *args: str, json_out: bool = True, label: str | None = None):
        args = [str(a) for a in args]
        shown = "cultura " + " ".join(shlex.quote(a) for a in args)
        self.say(f"$ {shown}" + (f"    # {label}" if label else ""))
        t = time.monotonic()
        with _spinner(label or args[0], self.say):
            res = CliRunner().invoke(cli, ["--project", str(self.project), *args, *(["--json"] if json_out else [])],
                                     catch_exceptions=True)
        if res.exit_code != 0:
            detail = res.output.strip() or repr(res.exception)
            raise DemoFailed(f"'{shown}' failed (exit {res.exit_code}): {detail}") from res.exception
        took = time.monotonic() - t
        if took > 5:
            self.say(f"  … {took:.0f} s")
        text = getattr(res, "stdout", res.output)  # progress bars of model loaders go to stderr
        if not json_out:
            return text
        start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=0)
        return json.loads(text[start:])


@contextlib.contextmanager
def _spinner(label: str, say):
    """A rich status spinner on a terminal (long steps: Label Studio start, evaluation); nothing otherwise."""
    if say is not print or not sys.stdout.isatty():
        yield
        return
    with Console().status(f"{label} …"):
        yield


# ------------------------------------------------------------------------------------ the day

def run(target: str | Path, *, say=print, seed_dir: str | Path | None = None) -> dict:
    """The whole demo in ``target`` (the project is ``target/project``). Returns every stage's output."""
    target = Path(target).resolve()
    target.mkdir(parents=True, exist_ok=True)
    proj = target / "project"
    out: dict = {}
    photos = target / "photos"
    planted = real_photos(photos)
    say(f"• {planted['files']} photographs (scikit-image / scikit-learn samples, with planted copies) in {photos}")
    res = CliRunner().invoke(cli, ["init", str(proj), "--countries", ",".join(COUNTRIES), "--name", "cultura-demo"])
    if res.exit_code != 0:
        raise DemoFailed(f"'cultura init' failed: {res.output}")
    say(f"$ cultura init {proj} --countries {','.join(COUNTRIES)} --name cultura-demo")
    c = Cli(proj, say)

    # ---- curation
    c("concepts", "add", *PLAN)
    terms = target / "terms.tsv"
    terms.write_text("concept\tcountry\tterm\n" + "".join(f"{k}\t{cc}\t{t}\n" for k, v in TERMS.items()
                                                          for cc, t in v.items()), encoding="utf-8")
    out["terms"] = c("concepts", "set-term", "--from", terms)
    out["search_folder"] = c("images", "search", "--provider", f"folder:{photos}")
    with serve(target / "www") as host_port:
        c.say(f"• serving a urls: list at http://{host_port}/ (with a 404, an HTML page, a too-small image)")
        urls = url_list(photos, target / "www", host_port)
        cfg = proj / "cultura.toml"
        cfg.write_text(cfg.read_text(encoding="utf-8").replace("allow_hosts = []", f'allow_hosts = ["{host_port}"]'),
                       encoding="utf-8")
        out["search_urls"] = c("images", "search", "--provider", f"urls:{urls}")
        out["download"] = c("images", "download", label="safe download")
    out["failures"] = c("images", "failures")
    out["dedup"] = c("images", "dedup")
    out["flags"] = c("images", "flags")
    out["tag"] = c("images", "tag", "--method", "clip", "--model", "openclip:cultura-tiny", "--top-k", "1",
                   label="tags by a RANDOM-INIT model (offline demo; build refuses them unless told)")

    # ---- annotation in a real Label Studio, with SIMULATED annotators
    if seed_dir is None:
        cand = Path.cwd() / ".cache" / "labelstudio-seed"
        seed_dir = cand if cand.is_dir() else None
    if seed_dir:  # a migrated data dir: Label Studio then starts in seconds instead of ~45 s of migrations
        shutil.copytree(seed_dir, proj / "labelstudio", dirs_exist_ok=True)
    say("• starting Label Studio (a fresh data dir migrates for about a minute) …")
    out["server"] = c("annotate", "server", "start", "--timeout", "600", label="Label Studio start")
    port = free_port()
    images = subprocess.Popen([sys.executable, "-m", "cultura", "--project", str(proj), "annotate", "serve-images",
                               "--port", str(port), "--save"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    try:
        say(f"$ cultura annotate serve-images --port {port} --save    # in the background")
        line = ""
        while "Image base URL" not in line:
            nxt = images.stdout.readline()
            if not nxt:
                raise DemoFailed(f"'cultura annotate serve-images' ended: {line}")
            line += nxt
        deadline = time.monotonic() + 60
        while "image_base_url" not in (proj / "cultura.toml").read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        for name, cc in ANNOTATORS:
            c("annotate", "annotators", "add", name, "--email", f"{name}@demo.invalid", "--country", cc,
              "--languages", "en")
        c("annotate", "annotators", "add", "sim-adj", "--email", "sim-adj@demo.invalid", "--role", "adjudicator")
        out["push_filter"] = c("annotate", "push", "filter", "--overlap", "2", "--grid", "12")  # grid tasks
        out["push_dedup"] = c("annotate", "push", "dedup-review", "--overlap", "2")
        c("annotate", "simulate", "filter", "--disagreement", "0.1", label="SIMULATED annotators")
        c("annotate", "simulate", "dedup-review", "--disagreement", "0", label="SIMULATED annotators")
        c("annotate", "pull")
        out["adjudicate"] = c("annotate", "adjudicate")
        if any(a.get("sent_to_adjudication") for a in out["adjudicate"]):
            c("annotate", "simulate", "filter", "--purpose", "adjudicate", label="SIMULATED adjudicator")
            c("annotate", "pull")
            out["adjudicate"] = c("annotate", "adjudicate")
        out["push_relevance"] = c("annotate", "push", "relevance", "--overlap", "1")
        c("annotate", "simulate", "relevance", "--disagreement", "0.1", label="SIMULATED annotators")
        c("annotate", "pull")
        out["adjudicate_relevance"] = c("annotate", "adjudicate", "--campaign", "relevance")
        out["agreement"] = c("annotate", "agreement")
    finally:
        images.terminate()
        images.wait(timeout=30)
        with contextlib.suppress(DemoFailed):
            c("annotate", "server", "stop")

    # ---- benchmarks and export
    out["association"] = c("build", "association", "--allow-random-tags")
    out["mention_queries"] = c("build", "mention-queries", "--method", "pattern",
                               label="descriptor queries mention_<CC> from each language's pattern")
    out["descriptor"] = c("build", "descriptor", "--allow-random-tags")
    out["export"] = c("export", target / "export")

    # ---- data for the other suites (all labelled as demo data)
    portraits = target / "portraits"
    c("social", "synthetic-portraits", portraits, json_out=False, label="SYNTHETIC portraits (drawings)")
    table = next(p for p in sorted(portraits.iterdir()) if p.suffix in (".csv", ".tsv", ".jsonl", ".parquet"))
    c("social", "import-portraits", table, "--images", portraits, "--dataset", "synthetic-demo", "--synthetic")
    data = Path(__file__).resolve().parents[1] / "data"  # the package's data folder
    c("entities", "import", data / "demo_entities.jsonl", label="DEMO entity list")
    c("contexts", "import", data / "demo_contexts.jsonl", label="DEMO masked contexts")
    kb = demo_kb(proj, target / "demo_kb.jsonl")
    c("kb", "import", kb, "--kb", "demo", label="DEMO knowledge base from the project's own images")

    # ---- evaluation and the report
    opts = ["--option", "n_resamples=200"]
    out["evaluate"] = c("evaluate", "run", "--model", "openclip:cultura-tiny", "--model", "fake", "--suite",
                        "prevalence,association,descriptor,latent,social", *opts, label="evaluation")
    out["evaluate_llm"] = c("evaluate", "run", "--model", "hf:cultura-tiny-gpt2", "--suite", "llm",
                            "--option", "llm.n_entities=2", "--option", "llm.seeds=[0]", *opts,
                            label="LLM entity bias, tiny RANDOM-INIT GPT-2")
    out["evaluate_attribution"] = c("evaluate", "run", "--model", "fake", "--suite", "attribution",
                                    "--option", "attribution.judge=stub", "--option", "attribution.kb=demo",
                                    label="cultural attribution, STUB judge")
    runs = [*out["evaluate"], *out["evaluate_llm"], *out["evaluate_attribution"]]
    missing = [s for s in SUITES if not any(r["suite"] == s and r["status"] == "done" for r in runs)]
    if missing:
        why = "; ".join(f"{r['suite']} × {r['spec']}: {r['status']} — {r.get('reason')}" for r in runs
                        if r["suite"] in missing)
        raise DemoFailed(f"These report sections would be empty: {', '.join(missing)} ({why}).")
    out["report"] = c("evaluate", "report", label="report")
    return out


def demo_kb(project_dir: Path, path: Path, per_entity: int = 2) -> Path:
    """A DEMO knowledge base file: one entity per concept × country of the project's stored images ("pet
    (Japan)"), its text generated here (not from an encyclopedia), its images the first stored images found for
    it. Real use imports a real KB (BabelNet or Wikipedia extracts) with 'cultura kb import'."""
    p = Project(project_dir)
    try:
        rows = p.db.execute(
            "SELECT DISTINCT co.name, l.country, i.path FROM image_links l JOIN images i ON i.sha256 = l.sha256 "
            "JOIN concepts co ON co.id = l.concept_id WHERE i.status = 'ok' ORDER BY co.name, l.country, "
            "i.sha256").fetchall()
        ents: dict[tuple, dict] = {}
        for concept, cc, rel in rows:
            name = p.registry.country(cc).name
            e = ents.setdefault((concept, cc), {
                "id": f"demo:{concept}:{cc}", "lemma": f"{concept} ({name})",
                "gloss": f"{concept}, as found in {name}",
                "text": f"DEMO entity: {concept} as made or seen in {name}. Generated by the demo, not taken "
                        "from an encyclopedia.", "images": []})
            if len(e["images"]) < per_entity:
                e["images"].append(str(p.blob_path(rel)))
    finally:
        p.close()
    path.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in ents.values()), encoding="utf-8")
    return path


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    target = Path(argv[0] if argv else "demo-project")
    if target.exists() and any(target.iterdir()):
        print(f"{target} is not empty: remove it or choose another folder.", file=sys.stderr)
        return 2
    t = time.monotonic()
    try:
        out = run(target)
    except DemoFailed as e:
        print(f"\nThe demo FAILED: {e}", file=sys.stderr)
        return 1
    proj = (target / "project").resolve()
    print(f"\nDone in {time.monotonic() - t:.0f} s. The report: {out['report']['html']}")
    print(f"Open the project with:  .venv/bin/cultura --project {proj} status")
    print("(annotators SIMULATED, models RANDOM-INIT, portraits SYNTHETIC: the numbers exercise the pipeline "
          "and mean nothing)")
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["run", "main", "real_photos", "url_list", "serve", "demo_kb", "DemoFailed", "COUNTRIES", "PLAN"]
