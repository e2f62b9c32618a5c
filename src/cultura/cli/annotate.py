"""``cultura annotate …``: Label Studio server, annotators, push, pull, agreement, adjudication, status.
Thin: each command calls one library function of :mod:`cultura.annotate`."""
from __future__ import annotations

import json
import sys
import textwrap

import click
from rich.markup import escape

from ..annotate.annotators import add_annotator, deactivate_annotator, list_annotators, set_password
from ..annotate.decide import MIN_AGREEMENT, adjudicate
from ..annotate.images import make_server
from ..annotate.labels_io import export_labels, import_labels
from ..annotate.people import label_studio_origins, server_status, start_server, stop_server
from ..annotate.pull import pull
from ..annotate.push import GOLD, GRID, OTHER_COUNTRIES, OVERLAP, push
from ..annotate.report import agreement_report, list_campaigns, set_campaign_status, status
from ..annotate.server import SERVER_PORT, START_TIMEOUT
from ..annotate.simulate import simulate_annotations
from ..annotate.team import annotator_report
from ..bounds import PORT, PROBABILITY, SEED
from ..evaluate.suites.attribution.priority import ordering
from .console import (bounded, emit_json, json_option, listing, out, overwrite_option, pass_ctx,
                      serve_until_interrupted, summary, table)


@click.group()
def annotate():
    """Human annotation in Label Studio: filter images, review duplicates, rate cultural relevance, label
    entities and translations; agreement and adjudication on top of Label Studio Community."""


# ---------------------------------------------------------------------------------------------- server

@annotate.group()
def server():
    """Run the project's local Label Studio (bound to 127.0.0.1), or see whether it answers."""


@server.command("start")
@click.option("--port", type=bounded(SERVER_PORT), default=None, help="Port on 127.0.0.1 (default: a free one).")
@click.option("--timeout", type=bounded(START_TIMEOUT), default=240, show_default=True,
              help="Seconds to wait for the first answer (a fresh data dir migrates for ~45 s).")
@json_option
@pass_ctx
def server_start(ctx, port, timeout, as_json):
    """Start Label Studio with its data in PROJECT/labelstudio and admin credentials in
    PROJECT/.secrets/labelstudio.json (mode 0600), and every active annotator's own server
    (PROJECT/labelstudio-people/, credentials in PROJECT/.secrets/servers.json)."""
    summary("annotate server start", start_server(ctx.project, port=port, timeout=timeout), as_json)


@server.command("stop")
@json_option
@pass_ctx
def server_stop(ctx, as_json):
    """Stop the project's local Label Studio and every annotator's own."""
    summary("annotate server stop", stop_server(ctx.project), as_json)


@server.command("status")
@json_option
@pass_ctx
def server_status_cmd(ctx, as_json):
    """Whether Label Studio answers, where, which version, and each annotator's own server (never prints
    credentials); on a Label Studio that cultura does not run, what isolation holds there and what does not."""
    summary("annotate server status", server_status(ctx.project), as_json)


@annotate.command("serve-images")
@click.option("--port", type=bounded(PORT), default=8081, show_default=True, help="Port on 127.0.0.1 (0: a free one).")
@click.option("--save", is_flag=True, help="Also record the printed base URL as annotate.image_base_url in "
              "cultura.toml (read by push and adjudicate).")
@json_option
@pass_ctx
def serve_images(ctx, port, save, as_json):
    """Serve the project's blobs/ read-only over HTTP on 127.0.0.1 (only /blobs/ab/<sha256>.<ext>), so task
    images reach annotators by URL. The printed base URL is what annotate.image_base_url (or push
    --image-base) takes; --save records it. With --json, one JSON line (base_url, blobs, saved) is printed
    when the server is up."""
    httpd = make_server(ctx.project.blobs, port, origins=label_studio_origins(ctx.project))
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    if save:
        ctx.project.config.annotate.image_base_url = base
        ctx.project.save_config()
    if as_json:
        click.echo(json.dumps({"base_url": base, "blobs": str(ctx.project.blobs), "saved": save}), nl=True)
        sys.stdout.flush()
    else:
        out.print(f"Serving {escape(str(ctx.project.blobs))} at {base}/blobs/ (Ctrl-C stops).", soft_wrap=True)
        out.print(f"Image base URL: {base}" + ("  (saved as annotate.image_base_url)" if save else
                  f"  (set it with: [annotate] image_base_url = \"{base}\" in cultura.toml, or --save)"),
                  soft_wrap=True, markup=False)
    serve_until_interrupted(httpd)


# ------------------------------------------------------------------------------------------ annotators

@annotate.group()
def annotators():
    """Add, list and deactivate annotators (each one is a Label Studio user)."""


@annotators.command("add")
@click.argument("name")
@click.option("--email", required=True, help="E-mail of the Label Studio user (created if missing).")
@click.option("--country", default=None, help="Country code of the culture the annotator rates (relevance).")
@click.option("--languages", default=None, help="Comma-separated ISO 639-1 codes spoken (entity, translation); "
              "default: the country's languages.")
@click.option("--role", type=click.Choice(["annotator", "adjudicator"]), default="annotator", show_default=True,
              help="An adjudicator receives the disagreements.")
@json_option
@pass_ctx
def annotators_add(ctx, name, email, country, languages, role, as_json):
    """Create the Label Studio user for NAME and record the annotator (no password is stored: hand out an
    invite link, or for the project's local server set one with 'cultura annotate annotators password NAME').
    On this machine the annotator gets a Label Studio server of their own (blind by construction: nobody
    else's projects, tasks or answers are on it; see docs/annotators.md); elsewhere 'blind' is false."""
    langs = languages.split(",") if languages else None
    summary("annotate annotators add", add_annotator(ctx.project, name, email=email, country=country,
                                                     languages=langs, role=role), as_json)


@annotators.command("list")
@json_option
@pass_ctx
def annotators_list(ctx, as_json):
    """List annotators with country, languages, role and whether they are active."""
    rows = list_annotators(ctx.project)
    listing("annotators", rows, as_json)


@annotators.command("deactivate")
@click.argument("name")
@json_option
@pass_ctx
def annotators_deactivate(ctx, name, as_json):
    """Stop assigning new items to NAME and end their access now (account locked, their server stopped, after
    a last pull); the next push hands their unanswered items to the others. Their annotations are kept."""
    summary("annotate annotators deactivate", deactivate_annotator(ctx.project, name), as_json)


@annotators.command("password")
@click.argument("name")
@click.option("--password", default=None, help="The new password (default: a random one, printed once).")
@json_option
@pass_ctx
def annotators_password(ctx, name, password, as_json):
    """Set NAME's password on the project's local Label Studio (runs Label Studio's reset_password on the
    project's own data dir; the password is printed once and stored nowhere)."""
    summary("annotate annotators password", set_password(ctx.project, name, password), as_json)


@annotators.command("report")
@click.option("--campaign", default=None, help="Only this campaign (default: all).")
@json_option
@pass_ctx
def annotators_report(ctx, campaign, as_json):
    """Per annotator: tasks done, median time per task, agreement with each other annotator and with the
    consensus, gold accuracy (95% CI, n), estimated skill (from 'adjudicate --rule dawid-skene' ...) and a
    spammer flag with the reason; per campaign: progress and what blocks it."""
    reps = annotator_report(ctx.project, campaign)
    if as_json:
        emit_json(reps)
        return
    for r in reps:
        rows = []
        for a in r["annotators"]:
            ci = (f"{a['gold_accuracy']:.2f} [{a['gold_ci_low']:.2f}, {a['gold_ci_high']:.2f}] n={a['gold_n']}"
                  if a["gold_n"] else "-")
            rows.append({"annotator": a["annotator"], "done": f"{a['done']}/{a['assigned']}",
                         "median s": _round(a["median_seconds"], 1),
                         "images/h": _round(a["images_per_hour"], 1),
                         "consensus": _round(a["consensus_agreement"]), "gold (95% CI)": ci,
                         "skill": ", ".join(f"{k} {v:.2f}" for k, v in sorted(a["skill"].items())) or "-",
                         "spammer": ("YES: " + a["reason"]) if a["spammer"] else "no"})
        table(f"annotators · {r['campaign']} ({r['kind']})", rows)
        if r["pairs"]:
            table("agreement between annotators", [{k: _round(v) for k, v in p.items()} for p in r["pairs"]])
        table("progress", [{"what": k, "value": v} for k, v in r["progress"].items()])
        if r["blockers"]:
            table("blockers", r["blockers"])


# ------------------------------------------------------------------------------------------- campaigns

@annotate.group()
def campaigns():
    """List campaigns; close one (no new items; pull and adjudicate still work), archive it (also left out
    of pull and status) or open it again."""


@campaigns.command("list")
@json_option
@pass_ctx
def campaigns_list(ctx, as_json):
    """Every campaign with its kind, overlap, status and numbers of items and projects."""
    listing("annotate campaigns", list_campaigns(ctx.project), as_json)


def _campaign_status_command(status: str, doc: str):
    @click.argument("name")
    @json_option
    @pass_ctx
    def cmd(ctx, name, as_json):
        summary(f"annotate campaigns {status}", set_campaign_status(ctx.project, name, status), as_json)
    cmd.__doc__ = doc
    return cmd


campaigns.command("close")(_campaign_status_command(
    "closed", "Close campaign NAME: push adds no new items to it; pull and adjudicate still work."))
campaigns.command("archive")(_campaign_status_command(
    "archived", "Archive campaign NAME: closed, and left out of pull and status (its decisions stay)."))
campaigns.command("open")(_campaign_status_command("active", "Open campaign NAME again."))


# ------------------------------------------------------------------------------------------------ work

@annotate.command("push")
@click.argument("kind", type=click.Choice(["filter", "dedup-review", "relevance", "entity", "context",
                                           "translation"]))
@click.option("--overlap", type=bounded(OVERLAP), default=2, show_default=True, help="Annotators per item (K).")
@click.option("--annotators", "names", default=None, help="Comma-separated annotator names (default: all active "
              "annotators with role 'annotator').")
@click.option("--gold", type=bounded(GOLD), default=None, help="Gold items (with known answers) mixed into every "
              "annotator's project (default: all gold items available).")
@click.option("--batch", default=None, help="Campaign name (default: KIND). A new name starts a new campaign.")
@click.option("--from", "source", type=click.Path(dir_okay=False), default=None,
              help="JSONL/CSV file: the items for entity/translation (default: the entity table's candidates and "
                   "the LLM-written benchmark queries); gold answers (item_key, gold) for the image kinds.")
@click.option("--other-countries", type=bounded(OTHER_COUNTRIES), default=None,
              help="relevance: other countries each image is rated for besides its own (default: "
                   "annotate.relevance_other_countries or 1).")
@click.option("--image-base", default=None, help="Base URL of 'cultura annotate serve-images' (default: "
              "annotate.image_base_url, else the images' original URLs).")
@click.option("--prioritise", type=click.Choice(["attribution"]), default=None,
              help="relevance: push first the image x culture pairs the automated CAIRe judge is least sure "
                   "about (needs 'cultura attribution run').")
@click.option("--grid", type=bounded(GRID), default=None, help="filter, relevance: images per task, one concept x "
              "country (or culture) per grid, answered with a key per image (default: one image per task).")
@click.option("--adaptive", is_flag=True, default=False, help="One opinion per item first; later pushes ask one "
              "more (up to --overlap) only where the answer is not sure yet: a rare verdict, a disagreement, an "
              "unskilled rater or a failed gold check.")
@json_option
@pass_ctx
def push_cmd(ctx, kind, overlap, names, gold, batch, source, other_countries, image_base, prioritise, grid, adaptive,
             as_json):
    """Build KIND items from the database (or --from FILE), assign each to K annotators (balanced, native
    speakers where needed) and import new tasks into each annotator's own Label Studio project. Rerunning adds
    only new items and resumes an interrupted push without duplicate tasks."""
    res = push(ctx.project, kind, overlap=overlap, annotators=names.split(",") if names else None, gold=gold,
               batch=batch, source=source, other_countries=other_countries, image_base=image_base,
               prioritise=ordering(prioritise), grid=grid, adaptive=adaptive)
    summary(f"annotate push {kind}", {k: v for k, v in res.items() if k != "warning"} if not as_json else res,
            as_json)
    if res.get("warning") and not as_json:
        out.print(f"[yellow]{escape(res['warning'])}[/yellow]")


@annotate.command("pull")
@click.option("--campaign", default=None, help="Only this campaign (default: all).")
@click.option("--full", is_flag=True, help="Re-export every project whole (default: only the tasks changed since "
                                           "the last pull).")
@json_option
@pass_ctx
def pull_cmd(ctx, campaign, full, as_json):
    """Fetch annotations of every campaign project (append-only: an edited annotation becomes a new version):
    only the tasks changed since the last pull. Projects deleted in Label Studio are reported; nothing local is
    lost."""
    summary("annotate pull", pull(ctx.project, campaign=campaign, full=full), as_json)


@annotate.command("agreement")
@click.option("--campaign", default=None, help="Only this campaign (default: all).")
@json_option
@pass_ctx
def agreement_cmd(ctx, campaign, as_json):
    """Percent agreement, Cohen's κ per pair (quadratic for Likert), Fleiss' κ, Krippendorff's α, leave-one-out
    consensus, gold accuracy, throughput, workload and per-country breakdown."""
    reps = agreement_report(ctx.project, campaign)
    if as_json:
        emit_json(reps)
        return
    for r in reps:
        flat = {k: v for k, v in r.items() if not isinstance(v, (list, dict))}
        table(f"agreement · {r['campaign']}", [{"what": k, "value": _round(v)} for k, v in flat.items()])
        if r.get("pairwise_kappa"):
            table("Cohen's κ per pair", [{k: _round(v) for k, v in p.items()}
                                         for p in (r.get("pairwise_kappa_quadratic") or r["pairwise_kappa"])])
        if r.get("loo_consensus"):
            table("leave-one-out consensus", r["loo_consensus"])
        if r.get("gold_accuracy"):
            table("gold accuracy", [{"annotator": k, **v} for k, v in r["gold_accuracy"].items()])
        if r.get("throughput"):
            table("throughput", [{"annotator": k, **v} for k, v in r["throughput"].items()])
        table("workload", r["workload"])


def _round(v, digits: int = 3):
    """Agreement figures as people read them (JSON keeps full precision)."""
    return round(v, digits) if isinstance(v, float) else v


@annotate.command("adjudicate")
@click.option("--campaign", default=None, help="Only this campaign (default: all).")
@click.option("--rule", "rule_name", type=click.Choice(["majority", "unanimity", "dawid-skene", "one-coin-dawid-skene",
                                                       "glad", "mace", "wawa", "zero-based-skill", "gold-majority",
                                                       "median", "mean", "severity"]), default=None,
              help="Decision rule (default: majority for labels, median for Likert). dawid-skene, glad, mace, wawa, "
                   "... (crowd-kit) weight annotators by estimated skill, for labels; severity corrects each "
                   "rater's harshness on 1-5 ratings. Skill estimates are stored per annotator.")
@click.option("--min-agreement", type=bounded(MIN_AGREEMENT), default=None,
              help="Items below this agreement go to adjudication (default 1.0 for labels, 0.75 for Likert); "
                   "with a model rule, a minimum posterior probability (default 0).")
@click.option("--adjudicator", default=None, help="Annotator who resolves disagreements (default: the one with "
              "role adjudicator).")
@json_option
@pass_ctx
def adjudicate_cmd(ctx, campaign, rule_name, min_agreement, adjudicator, as_json):
    """Write final decisions (read by build: removed images, resolved duplicate clusters, relevance scores) and
    send disagreements to an adjudication project showing the earlier labels. A kind nobody pushed a campaign
    for (--campaign relevance after 'cultura import ratings') has nothing to adjudicate: it says why, and which
    culture questions are still open."""
    res = adjudicate(ctx.project, campaign=campaign, rule_name=rule_name, min_agreement=min_agreement,
                     adjudicator=adjudicator)
    if as_json:
        return emit_json(res)
    if not res:
        return out.print("[dim]annotate adjudicate: no campaign yet[/dim]")
    for line in adjudication_lines(res):
        out.print(escape(line), soft_wrap=False)


def adjudication_lines(res: list[dict], width: int = 80) -> list[str]:
    """The adjudication summaries as short sentences, one block per campaign, wrapped at ``width`` columns."""
    lines = []
    for r in res:
        if r.get("nothing_to_do"):  # a kind nobody pushed a campaign for
            lines += textwrap.wrap(r["nothing_to_do"], width=width, subsequent_indent="  ")
            continue
        lines.append(f"{r['campaign']} ({r['kind']}): rule {r['rule']}, min agreement {r['min_agreement']:g}")
        decided = r["decided"] + r["adjudicated"] + r["gold"]
        parts = [f"{decided} item{'s' if decided != 1 else ''} decided ({r['decided']} by the rule, "
                 f"{r['adjudicated']} by an adjudicator, {r['gold']} gold), {r['unchanged']} of them as before"]
        waiting = [f"{r['pending']} waiting for annotations"] if r["pending"] else []
        if r["disagreements"]:
            waiting.append(f"{r['disagreements']} disagreement{'s' if r['disagreements'] != 1 else ''}")
        if r.get("sent_to_adjudication"):
            waiting.append(f"{r['sent_to_adjudication']} sent to {r.get('adjudicator', 'the adjudicator')}")
        if r.get("unresolved"):
            waiting.append(f"{r['unresolved']} unresolved")
        parts.append("open: " + (", ".join(waiting) if waiting else "nothing"))
        for k, what in (("flags_resolved", "culture questions decided by the ratings"),
                        ("written_back", "rows written back")):
            if r.get(k):
                parts.append(f"{r[k]} {what}")
        if r.get("culture_questions_open"):
            n = r["culture_questions_open"]
            parts.append(f"{n} culture question{'s' if n != 1 else ''} still open (images found for several "
                         "cultures; a dedup review decides copies, not cultures): rate them with 'cultura annotate "
                         "push relevance' or decide with 'cultura images flags --resolve'; build waits for them")
        if r.get("note"):
            parts.append(r["note"])
        for p in parts:
            lines += textwrap.wrap(p, width=width, initial_indent="  ", subsequent_indent="    ")
    return lines


@annotate.command("export-labels")
@click.option("--out", required=True, type=click.Path(dir_okay=False),
              help="File to write: .csv or .parquet.")
@click.option("--campaign", default=None, help="Only this campaign (default: all).")
@overwrite_option
@json_option
@pass_ctx
def export_labels_cmd(ctx, out, campaign, overwrite, as_json):
    """Write the raw labels as a (task, worker, label, value, time, gold, campaign) table in crowd-kit's column
    names: one row per item and annotator (their current answer), for any aggregation tool."""
    summary("annotate export-labels", export_labels(ctx.project, out, campaign=campaign, overwrite=overwrite), as_json)


@annotate.command("import-labels")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--source", default=None, help="Name of where the export comes from (default: the file name); "
              "importing the same source again adds only what changed.")
@click.option("--campaign", default=None, help="Match tasks only to this campaign's items (default: any).")
@click.option("--annotator", default=None, help="The export was taken from this annotator's own Label Studio "
              "server: its user ids are that server's.")
@json_option
@pass_ctx
def import_labels_cmd(ctx, file, source, campaign, annotator, as_json):
    """Read FILE, a Label Studio JSON export made elsewhere: tasks are matched to items by the item_key cultura
    put in their data, annotators by e-mail; tasks and annotations that match nothing are recorded as rejected
    rows with the reason (import_rows)."""
    summary("annotate import-labels", import_labels(ctx.project, file, source=source, campaign=campaign,
                                                    annotator=annotator), as_json)


@annotate.command("simulate")
@click.argument("campaign")
@click.option("--disagreement", type=bounded(PROBABILITY), default=0.1, show_default=True,
              help="Probability that a simulated annotator departs from the plausible answer.")
@click.option("--seed", type=bounded(SEED), default=0, show_default=True, help="Random seed.")
@click.option("--purpose", type=click.Choice(["annotate", "adjudicate"]), default="annotate", show_default=True,
              help="Annotate the campaign's tasks, or its adjudication tasks.")
@json_option
@pass_ctx
def simulate_cmd(ctx, campaign, disagreement, seed, purpose, as_json):
    """DEMO/TESTING AID, NOT FOR REAL DATA: answer every open task of CAMPAIGN in Label Studio as the assigned
    annotators would, with SIMULATED answers (so pull, agreement and adjudication can be tried end to end).
    Simulated annotations are recorded in Label Studio under the annotators' accounts; never use this on a
    project whose decisions you will publish."""
    res = simulate_annotations(ctx.project, campaign, disagreement=disagreement, seed=seed, purpose=purpose)
    if not as_json:
        out.print("[bold yellow]SIMULATED annotations (a demo/testing aid): not human judgements.[/bold yellow]")
    summary("annotate simulate", res, as_json)


@annotate.command("status")
@json_option
@pass_ctx
def status_cmd(ctx, as_json):
    """Per campaign and annotator: assigned, done, remaining, last activity; projects missing in Label Studio."""
    rows = status(ctx.project)
    listing("annotate status", rows, as_json)


COMMANDS = [annotate]
