"""LLM entity bias (seed 001, Camellia): entity and masked-context tables, LLM scorers, the Cultural Bias
Score per entity type / language / context kind, sentiment association, extractive QA, tokenizer script
coverage, Wikidata and pattern-based entity collection.

Library first: everything the ``cultura entities|contexts`` commands and the ``llm`` suite do is a function
here. Tables are created by the ``llm_bias`` migrations (:mod:`cultura.evaluate.suites.llm_bias.schema`).
"""
from .cbs import cbs_by_context, cbs_summary, compute_cbs
from .contexts import add_contexts, context_counts, import_contexts, list_contexts, split_mask
from .entities import (add_entities, entity_counts, entity_pool, entity_sets,
                       export_entity_items, import_entities, list_entities)
from ....models.scorers import LogProbScorer, get_scorer, register_scorer

from .suite import SUITE as _suite

#: The folder's suites (report section included), registered by :func:`cultura.evaluate.suites.load_suites`.
SUITES = (_suite,)

__all__ = [
    "add_entities", "import_entities", "list_entities", "entity_sets", "export_entity_items",
    "add_contexts", "import_contexts", "list_contexts", "split_mask",
    "entity_counts", "entity_pool", "context_counts",
    "LogProbScorer", "get_scorer", "register_scorer", "compute_cbs", "cbs_by_context", "cbs_summary",
]
