"""The URL a download requests, when the project stores only its display form.

A candidate's ``url`` is what may be stored, printed and exported (:func:`cultura.redact.display_url`): no
``user:password@``, no known secret, no value of a ``token``/``key``/``api_key``/``access_token``/``password``/
``secret`` query parameter. The request, though, must carry the URL as given: a signed or keyed URL (a CDN's
``?token=``, a cloud bucket's signature) answers 403 without its secret. Secrets never enter the project folder,
so the exact URL is read again from where the user keeps it, the row of the ``urls:`` file it came from:

- ``images search --provider urls:FILE`` records, for each URL whose display form differs from it, the
  file's absolute path and the row (``candidate_url_sources``; no secret in either);
- each ``images download`` (a first run, a resume after a kill, ``--retry-failed``) reads those rows again and
  requests the URL found there, when it is the one behind the display form (:func:`cultura.redact.shown_as`).
  A file regenerated with fresh signatures (they expire) is therefore used as it is now; rows that moved are
  found by their display form;
- a URL whose secret cannot be read again (the file is gone or no longer has the row; a web search or a plugin
  gave it, so there is no file) fails as ``secret_not_stored`` without a request, and the detail says what to
  do: put the file back (or search it again) and rerun with ``--retry-failed``. A URL that only lost its
  ``user:password@`` is requested without it, as before, when its file cannot be read.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from .. import db as dbmod
from ..db.readers import ERROR, TableReadError, iter_rows
from ..redact import REDACTED, display_url, shown_as

__all__ = ["Unavailable", "record_sources", "request_urls"]


@dataclass(frozen=True)
class Unavailable:
    """No URL to request for a candidate: ``detail`` says why and what to do."""
    detail: str


def record_sources(db, entries: list[tuple[str, str, int]]) -> int:
    """Record where the exact URL of each candidate is read again: ``entries`` of ``(display url, absolute path
    of the urls: file, row number)``. The latest file wins (it holds the freshest signatures). Call it inside
    the caller's transaction; returns the rows written."""
    now = dbmod.now()
    cur = db.conn.executemany(
        "INSERT INTO candidate_url_sources (candidate_id, source, line, updated_at) "
        "SELECT id, ?, ?, ? FROM candidates WHERE url = ? "
        "ON CONFLICT (candidate_id) DO UPDATE SET source = excluded.source, line = excluded.line, "
        "updated_at = excluded.updated_at", [(source, line, now, display) for display, source, line in entries])
    return max(cur.rowcount, 0)


def _missing(display: str, why: str) -> Unavailable:
    return Unavailable(f"{why}; the project stores {display!r} without its secret, so the URL to request is read "
                       "again from the urls: file it came from: put that file back (or run 'cultura images search "
                       "--provider urls:FILE' with it) and rerun 'cultura images download --retry-failed'")


def request_urls(db, rows: list[dict]) -> dict[int, str | Unavailable]:
    """The URL to request for each candidate of ``rows`` (``id``, ``url``) whose stored URL is not the one to
    request: the exact URL read again from its ``urls:`` file, or :class:`Unavailable`. Candidates absent from
    the result are requested as stored."""
    wanted = {r["id"]: r["url"] for r in rows}
    by_file: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for cid, source, line in db.execute("SELECT candidate_id, source, line FROM candidate_url_sources"):
        if cid in wanted:
            by_file[source][line].append(cid)
    out: dict[int, str | Unavailable] = {}
    for source, lines in by_file.items():
        out.update(_read_again(source, lines, wanted))
    for cid, url in wanted.items():
        if cid not in out and REDACTED in url:
            out[cid] = _missing(url, "no file is known for this URL (it came from a web search, a plugin or an "
                                     "earlier version of cultura)")
    return out


def _read_again(source: str, lines: dict[int, list[int]], wanted: dict[int, str]) -> dict[int, str | Unavailable]:
    """One pass over the ``urls:`` file ``source``: each candidate's row by its number, else the first row whose
    display form (secrets by pattern only) is the stored one."""
    found: dict[int, str] = {}
    by_display: dict[str, list[int]] = defaultdict(list)
    for ids in lines.values():
        for cid in ids:
            by_display[wanted[cid]].append(cid)
    problem, total = None, sum(len(ids) for ids in lines.values())
    try:
        for i, row in enumerate(iter_rows(Path(source)), start=1):
            if len(found) == total:
                break  # every candidate of this file has its URL: the rest of a long file is not read
            url = row.get("url") if ERROR not in row else None
            if not isinstance(url, str):
                continue
            url = url.strip()
            for cid in lines.get(i, ()):
                if cid not in found and shown_as(wanted[cid], url):
                    found[cid] = url
            for cid in by_display.get(display_url(url, secrets=()), ()):
                found.setdefault(cid, url)
    except TableReadError as e:
        problem = f"the urls: file cannot be read ({e})"
    except OSError as e:
        problem = f"the urls: file {source} cannot be read ({e.strerror or e})"
    out: dict[int, str | Unavailable] = {}
    for ids in lines.values():
        for cid in ids:
            if cid in found:
                out[cid] = found[cid]
            elif REDACTED in wanted[cid]:  # only userinfo was removed: requested as stored, as before
                out[cid] = _missing(wanted[cid], problem or f"{source} no longer has this URL")
    return out
