"""Human annotation on Label Studio Community: server (``server``), annotators (``annotators``), items
(``items``), templates and kinds (``kinds``), push (``push``), pull (``pull``), agreement reports
(``report``, statistics in ``agreement``), adjudication and decisions (``decide``), image serving
(``images``), simulated annotators for demos (``simulate``). CLI: ``cultura annotate --help``."""
