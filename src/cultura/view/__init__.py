"""The view area: a browsable static site of the project's images, duplicate sets, culture flags, trials and
annotator disagreements (``cultura view``). It reads curation, annotation and build tables; it imports
neither ``annotate`` nor ``evaluate``."""
