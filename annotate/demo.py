"""The demo's annotation stage: a real local Label Studio, three SIMULATED annotators (clearly labelled),
the filter campaign pushed with overlap 2, pulled, agreement computed, decisions written."""
from __future__ import annotations

from pathlib import Path

from ..errors import CulturaError

ANNOTATORS = [("sim-ann", "ann@demo.invalid", "US"), ("sim-bob", "bob@demo.invalid", "JP"),
              ("sim-cho", "cho@demo.invalid", "TH")]


def annotate_demo(project) -> dict:
    """Run the filter campaign end to end; skipped (with the reason) when no Label Studio is installed."""
    from .decide import adjudicate
    from .pull import pull
    from .push import push
    from .report import agreement_report
    from .server import find_executable, start_server, stop_server
    from .annotators import add_annotator
    from .simulate import simulate_annotations

    try:
        find_executable(project)
    except CulturaError as e:
        return {"skipped": str(e)}
    seed = Path.cwd() / ".cache" / "labelstudio-seed"
    start_server(project, seed_dir=seed if seed.is_dir() else None)
    try:
        for name, email, country in ANNOTATORS:
            add_annotator(project, name, email=email, country=country, languages=["en"])
        pushed = push(project, "filter", overlap=2, annotators=[a[0] for a in ANNOTATORS])
        simulated = simulate_annotations(project, "filter", disagreement=0.1, seed=0)
        pulled = pull(project)
        report = agreement_report(project, "filter")
        decided = adjudicate(project, campaign="filter")
    finally:
        stop_server(project)
    rep = report[0] if report else {}
    keep = {k: rep.get(k) for k in ("percent_agreement", "fleiss_kappa", "krippendorff_alpha_nominal",
                                   "n_items", "n_annotations") if k in rep}
    return {"note": "annotators are SIMULATED (cultura.annotate.simulate)", "pushed": pushed,
            "simulated": simulated, "pulled": pulled, "agreement": keep or rep, "decisions": decided}
