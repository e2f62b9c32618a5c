"""LLM entity bias (seed 001, Camellia): entity and masked-context tables, LLM scorers, the Cultural Bias
Score per entity type / language / context kind, sentiment association, extractive QA, tokenizer script
coverage, Wikidata and pattern-based entity collection.

Library first: everything the ``cultura entities|contexts`` commands and the ``llm`` suite do is a function
here or in curation, which owns the entity and context tables (:mod:`cultura.curate.entities`,
:mod:`cultura.curate.contexts`; created by the ``llm_bias`` migrations,
:mod:`cultura.evaluate.suites.llm_bias.schema`).
"""
from ....lazy import lazy_attributes

#: Public names, imported on first use (opening a project reads this folder's ``schema`` only).
_PUBLIC = {
    "cbs_by_context": ".cbs:cbs_by_context", "cbs_summary": ".cbs:cbs_summary", "compute_cbs": ".cbs:compute_cbs",
    # the entity and context tables are curated data (collected, reviewed by annotation, evaluated here)
    "add_contexts": "....curate.contexts:add_contexts", "context_counts": "....curate.contexts:context_counts",
    "import_contexts": "....curate.contexts:import_contexts", "list_contexts": "....curate.contexts:list_contexts",
    "split_mask": "....curate.contexts:split_mask",
    "add_entities": "....curate.entities:add_entities", "entity_counts": "....curate.entities:entity_counts",
    "entity_pool": "....curate.entities:entity_pool", "entity_sets": "....curate.entities:entity_sets",
    "export_entity_items": "....curate.entities:export_entity_items",
    "import_entities": "....curate.entities:import_entities", "list_entities": "....curate.entities:list_entities",
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
