"""Cultural attribution of images (seed 004, CAIRe): a user-supplied knowledge base indexed with faiss,
visual entity linking, a 1–5 relevance judge per culture label, an encoder baseline, and evaluation against
the project's own human relevance ratings.

>>> # doctest: +SKIP
>>> from cultura.evaluate.suites.attribution import import_kb, run_attribution, evaluate_attribution, get_judge
>>> import_kb(project, "kb.jsonl")
>>> run_attribution(project, get_embedder("openclip:ViT-B-32/openai"), get_judge("openai:qwen2.5-vl-7b"))
>>> evaluate_attribution(project)
"""
from .baseline import LEVELS, baseline_scores, probe_texts, run_baseline
from .evaluation import (evaluate_attribution, human_ratings, load_scores,
                         relevance_agreement)
from ....models.judges import JudgeResult, OpenAIJudge, RelevanceJudge, StubJudge, get_judge, register_judge
from .kb import KBIndex, build_kb_index, import_kb, list_kb
from .linking import link_image, link_images
from .run import run_attribution

from .suite import SUITE as _suite

#: The folder's suites (report section included), registered by :func:`cultura.evaluate.suites.load_suites`.
SUITES = (_suite,)

__all__ = [
    "import_kb", "list_kb", "build_kb_index", "KBIndex", "link_image", "link_images", "RelevanceJudge",
    "OpenAIJudge", "StubJudge", "JudgeResult", "get_judge", "register_judge", "run_attribution",
    "LEVELS", "probe_texts", "baseline_scores", "run_baseline", "human_ratings", "relevance_agreement",
    "evaluate_attribution", "load_scores",
]
