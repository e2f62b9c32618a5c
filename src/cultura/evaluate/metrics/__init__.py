"""The metric suite: pure functions, arrays in, numbers out (spec: /work/shared/spec/metrics.md).

Each function validates its input and raises `MetricInputError` (a `ValueError` and a `CulturaError`) naming
the offending argument; undefined values are ``inf`` or ``nan`` as documented, never a silent 0. Every public
name below is catalogued with its properties in ``tests/unit/evaluate/test_metric_catalogue.py``.

Submodules: `retrieval` (seed 000 §3.1), `association` (seed 000 §3.2, seed 002), `social` (seed 003),
`llm` (seeds 001 and 004), `resampling` (bootstrap intervals). Statistical tests live in
`cultura.evaluate.stats`, annotation agreement in `cultura.annotate.agreement`.
"""
from __future__ import annotations

from ._common import MetricInputError
from .association import (
    PairedChi2,
    c_asc,
    paired_chi2,
    random_baseline,
    self_preference,
    silhouette_by_label,
    similarity_drift,
    win_rates,
    win_rates_ci,
)
from .llm import argmax_score, cultural_bias_score, expected_score
from .resampling import BootstrapCI, bootstrap_ci
from .retrieval import accuracy_at_k, dlbkl, lbkl, lbkl_per_query, ndcg_at_k, retrieval_frequency
from .social import harm_rate, label_shares, max_skew, mean_max_skew, symmetric_kl

__all__ = [
    "MetricInputError",
    "BootstrapCI",
    "PairedChi2",
    # retrieval / prevalence bias (seed 000 §3.1)
    "accuracy_at_k",
    "ndcg_at_k",
    "lbkl",
    "dlbkl",
    "lbkl_per_query",
    "retrieval_frequency",
    # association bias (seed 000 §3.2) and latent probes (seed 002)
    "win_rates",
    "win_rates_ci",
    "self_preference",
    "random_baseline",
    "similarity_drift",
    "paired_chi2",
    "silhouette_by_label",
    "c_asc",
    # social bias audit (seed 003)
    "max_skew",
    "mean_max_skew",
    "symmetric_kl",
    "harm_rate",
    "label_shares",
    # LLM entity bias (seed 001) and judge scores (seed 004)
    "cultural_bias_score",
    "expected_score",
    "argmax_score",
    # resampling
    "bootstrap_ci",
]
