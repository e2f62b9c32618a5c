"""LLM entity bias (seed 001, Camellia): entity and masked-context tables, LLM scorers, the Cultural Bias
Score per entity type / language / context kind, sentiment association, extractive QA, tokenizer script
coverage, Wikidata and pattern-based entity collection.

Library first: everything the ``cultura entities|contexts`` commands and the ``llm`` suite do is a function
here. Tables are created by the ``llm_bias`` migrations (:mod:`cultura.evaluate.suites.llm_bias.schema`).
"""
from ....lazy import lazy_attributes

#: Public names, imported on first use (opening a project reads this folder's ``schema`` only).
_PUBLIC = {
    "cbs_by_context": ".cbs:cbs_by_context", "cbs_summary": ".cbs:cbs_summary", "compute_cbs": ".cbs:compute_cbs",
    "add_contexts": ".contexts:add_contexts", "context_counts": ".contexts:context_counts",
    "import_contexts": ".contexts:import_contexts", "list_contexts": ".contexts:list_contexts",
    "split_mask": ".contexts:split_mask",
    "add_entities": ".entities:add_entities", "entity_counts": ".entities:entity_counts",
    "entity_pool": ".entities:entity_pool", "entity_sets": ".entities:entity_sets",
    "export_entity_items": ".entities:export_entity_items", "import_entities": ".entities:import_entities",
    "list_entities": ".entities:list_entities",
    "LogProbScorer": "....models.scorers:LogProbScorer", "get_scorer": "....models.scorers:get_scorer",
    "register_scorer": "....models.scorers:register_scorer",
    #: The folder's suites (report section included), registered by :func:`cultura.evaluate.suites.load_suites`.
    "SUITES": ".suite:SUITES",
}
__getattr__ = lazy_attributes(__name__, _PUBLIC)

__all__ = [
    "add_entities", "import_entities", "list_entities", "entity_sets", "export_entity_items",
    "add_contexts", "import_contexts", "list_contexts", "split_mask",
    "entity_counts", "entity_pool", "context_counts",
    "LogProbScorer", "get_scorer", "register_scorer", "compute_cbs", "cbs_by_context", "cbs_summary",
]
