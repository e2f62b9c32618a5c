"""cultura: build cultural-bias benchmarks and evaluate models on them.

In Python (a notebook, a script)::

    import cultura

    p = cultura.init("mybench", countries=["US", "JP", "TH"])   # or cultura.open("mybench")
    p.concepts.load("3xcm")
    p.images.search()
    p.images.download()
    p.images.dedup()
    p.benchmarks.build("association")
    p.evaluate.run("openclip:ViT-B-32/openai", "association")
    p.evaluate.results()                                          # a pandas DataFrame

The handles (``p.concepts``, ``p.images``, ``p.annotate``, ``p.benchmarks``, ``p.imports``, ``p.evaluate``,
``p.view``) are the command line's groups (``docs/python-api.md``). Importing ``cultura`` is light: the library
loads on first use of a name below.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import lazy_attributes

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .api import Project, init, open
    from .errors import CulturaError
    from .progress import Event

__getattr__ = lazy_attributes(__name__, {
    "init": ".api:init", "open": ".api:open", "Project": ".api:Project",
    "CulturaError": ".errors:CulturaError", "Event": ".progress:Event",
})

__all__ = ["init", "open", "Project", "CulturaError", "Event", "__version__"]
