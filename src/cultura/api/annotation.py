"""``p.annotate``: Label Studio, the team and the campaigns, as the ``cultura annotate`` group."""
from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..annotate.annotators import add_annotator, deactivate_annotator, list_annotators, set_password
from ..annotate.decide import adjudicate
from ..annotate.labels_io import export_labels, import_labels
from ..annotate.pull import pull
from ..annotate.push import push
from ..annotate.report import agreement_report, list_campaigns, set_campaign_status, status
from ..annotate.images import serve_in_thread
from ..annotate.people import label_studio_origins, server_status, start_server, stop_server
from ..annotate.simulate import simulate_annotations
from ..annotate.team import annotator_report
from ..evaluate.suites.attribution.priority import ordering
from ..progress import Progress
from .tables import frame as _frame

if TYPE_CHECKING:
    from pandas import DataFrame

    from ..project import Project

Summary = dict[str, Any]
Reports = list[dict[str, Any]]
PathLike = str | os.PathLike[str]


class Server:
    """The project's local Label Studio (bound to 127.0.0.1; its data in the project folder)."""

    def __init__(self, project: Project):
        self.project = project

    def start(self, *, port: int | None = None, timeout: float = 240, progress: Progress = None) -> Summary:
        """Start it (a fresh data dir adopts cultura's cached migrated database) and every active annotator's own,
        and wait until they answer."""
        return start_server(self.project, port=port, timeout=timeout, progress=progress)

    def stop(self) -> Summary:
        return stop_server(self.project)

    def status(self) -> Summary:
        """Whether it answers, where, and which version (never credentials)."""
        return server_status(self.project)


@dataclass
class ImageServer:
    """The project's images served read-only on 127.0.0.1 from a background thread (``cultura annotate
    serve-images``): ``base_url`` is where annotators' browsers load task images. :meth:`close` stops it."""

    base_url: str
    httpd: ThreadingHTTPServer

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> ImageServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Annotators:
    """The team: each annotator a Label Studio user with a blind account of their own on the local server."""

    def __init__(self, project: Project):
        self.project = project

    def add(self, name: str, *, email: str, country: str | None = None, languages: Iterable[str] | None = None,
            role: str = "annotator") -> Summary:
        """Add an annotator (``role="adjudicator"`` receives the disagreements)."""
        return add_annotator(self.project, name, email=email, country=country,
                             languages=None if languages is None else list(languages), role=role)

    def list(self, *, frame: bool | None = None) -> DataFrame:
        return _frame(list_annotators(self.project), frame)

    def deactivate(self, name: str) -> Summary:
        """Stop assigning new items to ``name`` and end their access now; the next push hands their unanswered
        items to the others (their annotations are kept)."""
        return deactivate_annotator(self.project, name)

    def password(self, name: str, password: str | None = None) -> Summary:
        """Set a password on the local server (a random one when not given; returned once, stored nowhere)."""
        return set_password(self.project, name, password)

    def report(self, campaign: str | None = None, *, progress: Progress = None) -> Reports:
        """Per campaign and annotator: work done, time, agreement, gold accuracy, skill, spammer flag."""
        return annotator_report(self.project, campaign, progress=progress)


class Campaigns:
    """Annotation campaigns: list them; close, archive or open one."""

    def __init__(self, project: Project):
        self.project = project

    def list(self, *, frame: bool | None = None) -> DataFrame:
        return _frame(list_campaigns(self.project), frame)

    def close(self, name: str) -> Summary:
        """No new items are pushed to it; pull and adjudicate still work."""
        return set_campaign_status(self.project, name, "closed")

    def archive(self, name: str) -> Summary:
        """Closed, and left out of pull and status (its decisions stay)."""
        return set_campaign_status(self.project, name, "archived")

    def open(self, name: str) -> Summary:
        return set_campaign_status(self.project, name, "active")


class Annotate:
    """Human annotation in Label Studio: filter, dedup review, relevance, entity, context and translation
    campaigns; agreement and adjudication into the decisions that build reads."""

    def __init__(self, project: Project):
        self.project = project
        self.server = Server(project)
        self.annotators = Annotators(project)
        self.campaigns = Campaigns(project)

    def serve_images(self, *, port: int = 0, save: bool = True) -> ImageServer:
        """Serve the project's images to annotators' browsers until :meth:`ImageServer.close`; ``save``: record
        its address as ``annotate.image_base_url`` (what push and adjudicate put in tasks)."""
        httpd, base = serve_in_thread(self.project.blobs, port, origins=label_studio_origins(self.project))
        if save:
            self.project.config.annotate.image_base_url = base
            self.project.save_config()
        return ImageServer(base, httpd)

    def push(self, kind: str, *, overlap: int = 2, annotators: Iterable[str] | None = None, gold: int | None = None,
             batch: str | None = None, source: PathLike | None = None, other_countries: int | None = None,
             image_base: str | None = None, prioritise: str | None = None, grid: int | None = None,
             adaptive: bool = False, progress: Progress = None) -> Summary:
        """Build ``kind`` items (``filter``, ``dedup-review``, ``relevance``, ``entity``, ``context``,
        ``translation``), assign each to ``overlap`` annotators and send new tasks to their projects (``grid``
        images per task; ``adaptive``: one opinion first, more only where needed)."""
        return push(self.project, kind, overlap=overlap, annotators=None if annotators is None else list(annotators),
                    gold=gold, batch=batch, source=source, other_countries=other_countries, image_base=image_base,
                    prioritise=ordering(prioritise), grid=grid, adaptive=adaptive, progress=progress)

    def pull(self, campaign: str | None = None, *, full: bool = False, progress: Progress = None) -> Summary:
        """Fetch the annotations (append-only: an edited answer becomes a new version): what changed since the
        last pull, or every project's whole export with ``full``."""
        return pull(self.project, campaign=campaign, full=full, progress=progress)

    def agreement(self, campaign: str | None = None, *, progress: Progress = None) -> Reports:
        """Per campaign: percent agreement, Cohen's and Fleiss' κ, Krippendorff's α, consensus, gold accuracy."""
        return agreement_report(self.project, campaign, progress=progress)

    def adjudicate(self, campaign: str | None = None, *, rule: str | None = None, min_agreement: float | None = None,
                   adjudicator: str | None = None, progress: Progress = None) -> Reports:
        """Write the decisions (``rule``: majority, median, dawid-skene, …) and send disagreements on; a kind
        nobody pushed a campaign for has nothing to adjudicate (its summary's ``nothing_to_do`` says why)."""
        return adjudicate(self.project, campaign=campaign, rule_name=rule, min_agreement=min_agreement,
                          adjudicator=adjudicator, progress=progress)

    def export_labels(self, out: PathLike, *, campaign: str | None = None, overwrite: bool = False) -> Summary:
        """The raw (task, worker, label, time) table in crowd-kit's column names, as CSV or Parquet."""
        return export_labels(self.project, Path(out), campaign=campaign, overwrite=overwrite)

    def import_labels(self, path: PathLike, *, source: str | None = None, campaign: str | None = None,
                      annotator: str | None = None) -> Summary:
        """A Label Studio JSON export made elsewhere (unmatched rows are kept as rejects with the reason);
        ``annotator``: the export was taken from that annotator's own server (its user ids are that server's)."""
        return import_labels(self.project, Path(path), source=source, campaign=campaign, annotator=annotator)

    def simulate(self, campaign: str, *, disagreement: float = 0.1, seed: int = 0,
                 purpose: str = "annotate", progress: Progress = None) -> Summary:
        """SIMULATED answers to every open task (a demo and testing aid, never for data you publish)."""
        return simulate_annotations(self.project, campaign, disagreement=disagreement, seed=seed, purpose=purpose,
                                    progress=progress)

    def status(self, *, frame: bool | None = None) -> DataFrame:
        """Per campaign and annotator: assigned, done, remaining, last activity."""
        return _frame(status(self.project), frame)


__all__ = ["Annotate", "Annotators", "Campaigns", "ImageServer", "Server"]
