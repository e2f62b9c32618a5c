"""Every figure the report draws, found by reading the suites' code (every function that hands a figure to
``figure_uri``), is drawn from result rows of 16 countries (the size of 3XCM) and passes ``figure_problems``: a
legend where colours must be told apart, labelled axes, no overlapping text, and every country in its own colour
(``country_style``) in every panel and figure; countries sharing a language keep their own legend entries."""
from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

import cultura.evaluate as evaluate_pkg
from cultura.evaluate.figcheck import _handle_colour
from cultura.evaluate.reportkit import collect_figures, country_style, figure_problems
from cultura.evaluate.suites.latent import report as latent
from cultura.evaluate.suites.llm_bias import suite as llm
from cultura.evaluate.suites.retrieval import figures as retrieval
from cultura.evaluate.suites.social import report as social

SIXTEEN = ["AU", "BR", "CN", "DE", "EG", "FR", "GB", "IN", "JP", "KE", "MX", "NG", "RU", "TH", "US", "ZA"]
LANG = {"AU": "en", "GB": "en", "US": "en", "BR": "pt", "CN": "zh", "DE": "de", "EG": "ar", "FR": "fr",
        "IN": "hi", "JP": "ja", "KE": "sw", "MX": "es", "NG": "yo", "RU": "ru", "TH": "th", "ZA": "zu"}
MODELS = ("openclip:ViT-B-32/openai", "mclip:XLM-R")


def figure_functions() -> set[str]:
    """module:function of every function in cultura.evaluate that hands a figure to figure_uri."""
    root = Path(evaluate_pkg.__file__).parent
    out = set()
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef) and fn.name != "figure_uri" and any(
                    isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", None)) == "figure_uri"
                    for n in ast.walk(fn)):
                out.add(f"{path.relative_to(root).with_suffix('').as_posix().replace('/', '.')}:{fn.name}")
    return out


def row(model, metric, value, group=None, **details):
    ci = (value - 0.05, value + 0.05) if isinstance(value, float) and math.isfinite(value) else (None, None)
    return {"model": model, "model_spec": model, "metric": metric, "group": group or {}, "value": value,
            "ci_low": ci[0], "ci_high": ci[1], "n": 120, "details": details, "params": {}}


def retrieval_rows() -> list[dict]:
    rows = []
    for k, m in enumerate(MODELS):
        for i, c in enumerate(SIXTEEN):
            for j, role in enumerate(retrieval.DESC_ROLES):
                rows.append(row(m, f"M_{role}", (0.1 + 0.02 * ((i + j + k) % 5)), {"country": c}))
                rows.append(row(m, "drift_x100", 0.3 * (i - 8) + j, {"role": role, "country": c}))
            sp = math.inf if (i, k) == (3, 0) else 0.6 + 0.05 * i
            rows.append(row(m, "SP", sp, {"country": c}))
            rows.append(row(m, "text_silhouette", -0.1 + 0.02 * ("en pt zh de".find(LANG[c]) % 7), {"country": c}))
            rows.append(row(m, "image_silhouette", -0.2 + 0.03 * i, {"country": c}))
        for kind in ("text", "image"):
            rows.append(row(m, f"pearson_{kind}_silhouette_SP", 0.4 - 0.1 * k))
        # the text points: one English query asked in AU, GB and US, then each country's own queries
        text = [[0.1 * a, 0.2 * a, "en (AU, GB, US)"] for a in range(5)]
        text += [[1 + i + 0.1 * a, (i % 4) + 0.1 * a, f"{LANG[c]} ({c})"] for i, c in enumerate(SIXTEEN)
                 for a in range(4)]
        image = [[i + 0.1 * a, (i % 5) - 0.1 * a, c] for i, c in enumerate(SIXTEEN) for a in range(4)]
        rows.append(row(m, "projection_text", float(len(text)), method="pca", points=text))
        rows.append(row(m, "projection_image", float(len(image)), method="pca", points=image))
        for t, share in zip(retrieval.TIER_ORDER, (0.5, 0.3, 0.15, 0.05)):
            rows.append(row(m, "tier_share", share, {"tier": t}, pool_share=share * 0.9,
                            by_rank=[share] * 10))
    rows.append(row(MODELS[0], "random_SP", 1.0, sp_rounds=[0.9, 1.1, 1.0, "inf", 0.95, 1.05, 1.0, 0.98, 1.02, 1.0]))
    return rows


def latent_rows() -> list[dict]:
    m = MODELS[0]
    rows = []
    in_group = [c in ("AU", "GB", "US", "DE", "FR") for c in SIXTEEN]
    order = sorted(SIXTEEN, key=lambda c: not in_group[SIXTEEN.index(c)])
    for j, concept in enumerate(("wedding", "breakfast")):
        mat = [[0.5 + 0.02 * ((a + b + j) % 7) for b in range(16)] for a in range(16)]
        mat[2][3] = None
        rows.append(row(m, "heatmap", 0.0, {"concept": concept}, matrix=mat, countries=order,
                        in_group=sorted(in_group, reverse=True)))
        rows.append(row(m, "ww_vs_wn", 0.1, {"concept": concept}, p=0.01 * (j + 1)))
        pts = [[0.1 * i + j, 0.05 * (i % 4), "image", c, g] for i, (c, g) in enumerate(zip(SIXTEEN, in_group))]
        pts.append([0.8, 0.1, "caption", None, None])
        rows.append(row(m, "projection", 17.0, {"concept": concept}, method="pca", k=2, points=pts,
                        centroids=[[0.2, 0.0], [1.2, 0.1]]))
    for i, c in enumerate(SIXTEEN):
        rows.append(row(m, "alignment_rank", 1.0 + 0.5 * i, {"country": c, "template": "a photo of {}"},
                        in_group=in_group[i], mean_similarity=0.3))
    rows.append(row(m, "alignment_rank_group_test", 0.7, {"template": "a photo of {}"}, U=40.0, p=0.04,
                    n_in=5, n_out=11))
    return rows


def draw_every_figure() -> dict[str, list]:
    """module:function → the figures it drew: (name, problems, legend entries as (text, colour))."""
    import matplotlib
    import matplotlib.pyplot as plt

    matplotlib.use("Agg")
    drawn: dict[str, list] = {}
    rr = retrieval_rows()
    lr = latent_rows()
    social_idx = {(m, "crime_rate", "portraits", lang, a): row(m, "crime_rate", 0.1 + 0.01 * i)
                  for m in MODELS for i, lang in enumerate(sorted(set(LANG.values()))) for a in social.AXES}
    cbs = [row(m, metric, 0.2 + 0.09 * i - 0.15 * k * (metric == "cbs_mean"),
               {"language": lang, **({"kind": "grounded"} if metric == "cbs_mean" else {})})
           for k, m in enumerate(MODELS) for i, lang in enumerate(sorted(set(LANG.values()))[:8])
           for metric in ("script_coverage", "cbs_mean")]
    calls = {
        "suites.retrieval.figures:win_rate_bars": lambda: retrieval.win_rate_bars(
            rr, list(MODELS), retrieval.ASSOC_ROLES, SIXTEEN, "Win rates by query country", "win-rates-seed000-fig5"),
        "suites.retrieval.figures:tier_figure": lambda: retrieval.tier_figure(rr, list(MODELS),
                                                                               list(retrieval.TIER_ORDER)),
        "suites.retrieval.figures:silhouette_figure": lambda: retrieval.silhouette_figure(rr, list(MODELS), SIXTEEN),
        "suites.retrieval.figures:random_baseline_figure": lambda: retrieval.random_baseline_figure(
            next(r for r in rr if r["metric"] == "random_SP")),
        "suites.retrieval.figures:projection_figure": lambda: retrieval.projection_figure(rr, list(MODELS)),
        "suites.retrieval.figures:drift_heatmap": lambda: retrieval.drift_heatmap(rr, list(MODELS), SIXTEEN),
        "suites.latent.report:heatmap_figure": lambda: latent.heatmap_figure(lr, MODELS[0]),
        "suites.latent.report:alignment_figure": lambda: latent.alignment_figure(lr, MODELS[0]),
        "suites.latent.report:alignment_map": lambda: latent.alignment_map(lr, MODELS[0]),
        "suites.latent.report:projection_figure": lambda: latent.projection_figure(lr, MODELS[0]),
        "suites.social.report:partition_figure": lambda: social.partition_figure(
            social_idx, list(MODELS), "portraits", "crime_rate",
            {"high resource": ["de", "en", "fr", "ja", "ru", "zh"], "low resource": ["sw", "yo", "zu", "th"]},
            "Crime rate by language", "crime-rate-seed003-fig1"),
        "suites.llm_bias.suite:cbs_vs_coverage": lambda: llm.cbs_vs_coverage(cbs, lambda r: r["model"]),
    }
    assert set(calls) == figure_functions(), "a figure function is not drawn here: add it to calls"
    current: list = []

    def spy(fig, name=None):
        legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
        entries = [(t.get_text(), _handle_colour(h)) for lg in legends
                   for h, t in zip(lg.legend_handles, lg.get_texts())]
        current.append((name, figure_problems(fig), entries))
        plt.close(fig)
        return "data:image/png;base64,"

    mp = pytest.MonkeyPatch()
    for mod in (retrieval, latent, social, llm):
        mp.setattr(mod, "figure_uri", spy)
    try:
        with collect_figures("figures"):
            for key, call in calls.items():
                current = drawn.setdefault(key, [])
                call()
    finally:
        mp.undo()
    return drawn


@pytest.fixture(scope="module")
def drawn():
    return draw_every_figure()


def test_every_figure_the_report_draws_is_fit_at_sixteen_countries(drawn):
    assert all(drawn.values()), [k for k, v in drawn.items() if not v]  # every function drew its figure
    bad = {f"{key} {name}": problems for key, figs in drawn.items() for name, problems, _ in figs if problems}
    assert not bad, bad


def test_every_country_is_drawn_in_its_own_colour_with_its_own_legend_entry(drawn):
    (_, _, sil), = drawn["suites.retrieval.figures:silhouette_figure"]
    assert {t for t, _ in sil} == set(SIXTEEN)
    assert all(colour == country_style(t)[0].lower() for t, colour in sil)
    (_, _, proj), = drawn["suites.retrieval.figures:projection_figure"]
    texts = [t for t, _ in proj]
    # countries that share a language keep their entries (a text asked in all three is drawn in each)
    assert {"en (AU)", "en (GB)", "en (US)"} <= set(texts) and not [t for t in texts if "," in t]
    assert all(colour == country_style(t[-3:-1] if t.endswith(")") else t)[0].lower() for t, colour in proj)
    assert set(SIXTEEN) <= set(texts)  # the image panels: one entry per culture
