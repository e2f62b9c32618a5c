"""Cultural attribution of images (seed 004, CAIRe): a user-supplied knowledge base indexed with faiss,
visual entity linking, a 1–5 relevance judge per culture label, an encoder baseline, and evaluation against
the project's own human relevance ratings.

>>> # doctest: +SKIP
>>> from cultura.evaluate.suites.attribution import import_kb, run_attribution, evaluate_attribution, get_judge
>>> import_kb(project, "kb.jsonl")
>>> run_attribution(project, get_embedder("openclip:ViT-B-32/openai"), get_judge("openai:qwen2.5-vl-7b"))
>>> evaluate_attribution(project)
"""
from ....lazy import lazy_attributes

#: Public names, imported on first use (opening a project reads this folder's ``schema`` only).
_PUBLIC = {
    "LEVELS": ".baseline:LEVELS", "baseline_scores": ".baseline:baseline_scores",
    "probe_texts": ".baseline:probe_texts", "run_baseline": ".baseline:run_baseline",
    "evaluate_attribution": ".evaluation:evaluate_attribution", "human_ratings": ".evaluation:human_ratings",
    "load_scores": ".evaluation:load_scores", "relevance_agreement": ".evaluation:relevance_agreement",
    "JudgeResult": "....models.judges:JudgeResult", "OpenAIJudge": "....models.judges:OpenAIJudge",
    "RelevanceJudge": "....models.judges:RelevanceJudge", "StubJudge": "....models.judges:StubJudge",
    "get_judge": "....models.judges:get_judge", "register_judge": "....models.judges:register_judge",
    "KBIndex": ".kb:KBIndex", "build_kb_index": ".kb:build_kb_index", "import_kb": ".kb:import_kb",
    "list_kb": ".kb:list_kb", "link_image": ".linking:link_image", "link_images": ".linking:link_images",
    "run_attribution": ".run:run_attribution", "judge_uncertainty": ".priority:judge_uncertainty",
    #: The folder's suites (report section included), registered by :func:`cultura.evaluate.suites.load_suites`.
    "SUITES": ".suite:SUITES",
}
__getattr__ = lazy_attributes(__name__, _PUBLIC)

__all__ = [
    "import_kb", "list_kb", "build_kb_index", "KBIndex", "link_image", "link_images", "RelevanceJudge",
    "OpenAIJudge", "StubJudge", "JudgeResult", "get_judge", "register_judge", "run_attribution",
    "LEVELS", "probe_texts", "baseline_scores", "run_baseline", "human_ratings", "relevance_agreement",
    "evaluate_attribution", "load_scores", "judge_uncertainty",
]
