"""Per-sample logs join the published dataset: a headline number recomputed from the exported tables joined with
the samples by ``item_key`` (the candidates' roles read from the export, not from the log) is the stored one."""
from __future__ import annotations

import pyarrow.parquet as pq

from cultura.benchmark.export import export_benchmark
from cultura.evaluate.results import export_samples
from cultura.evaluate.runner import load_results, run_evaluation
from tests.unit.benchmark.test_export_hub import _photos, photos  # noqa: F401 - shared with the unit tests


def test_m_cr_recomputes_from_the_export_joined_with_the_samples(photos, tmp_path):  # noqa: F811
    [rec] = run_evaluation(photos, ["fake"], "association", options={"n_resamples": 50, "projection": "pca"},
                           log_samples=True)
    assert rec.status == "done", rec.reason
    out = tmp_path / "export"
    export_benchmark(photos, out)
    # the published side: each candidate's role at each position of each trial
    role_at = {(c["benchmark"], c["item_key"], c["position"]): c["role"]
               for c in pq.read_table(out / "candidates.parquet").to_pylist()}
    # the logged side, read back from its typed Parquet file
    export_samples(photos, rec.run_id, tmp_path / "samples.parquet")
    samples = [s for s in pq.read_table(tmp_path / "samples.parquet").to_pylist()
               if s["kind"] == "trial" and s["variant"] == "short"]
    assert samples
    wins = []
    for s in samples:
        best = max(c["score"] for c in s["candidates"])
        positions = [c["position"] for c in s["candidates"] if c["score"] == best]
        roles = [role_at[("association", s["item_key"], p)] for p in positions]   # the join, by item_key
        assert s["target"]["role"] == "cr" and role_at[("association", s["item_key"], s["target"]["position"])] == "cr"
        wins.append(roles.count("cr") / len(roles))   # ties split, as win rates do
    stored = next(r["value"] for r in load_results(photos, suite="association")
                  if r["metric"] == "M_cr" and not r["group"])
    assert sum(wins) / len(wins) == stored
