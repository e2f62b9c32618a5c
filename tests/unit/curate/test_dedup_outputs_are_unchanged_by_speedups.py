"""Every row dedup stores is what it was before its cluster and flag writing was made cheaper.

A project of real photographs (tests/fakes/real_photos) with planted copies and look-alikes (other crops of
the same photograph), copies found for another country (culture conflicts), for another concept (apart within
a concept, together in global scope), the same bytes found by several queries (multi-linked images), goes
through the steps a project lives: a first dedup; a person resolving a cluster and deciding a culture question;
new copies and links (a cluster grows and supersedes its old self, the decided flag's pairs grow and it
reopens); a link removed (an evidence entry that no longer holds); a global-scope run; a no-op rerun.

After each step :func:`canonical` reads every dedup output (``dedup_runs``, ``dup_clusters``, ``dup_members``,
``culture_conflict`` flags with their status, details and evidence, the change counter, ``dedup_state``, the
``runs`` rows of the dedup stage and the summary returned) into one text; the clock is the test's (one
second a step), so the timestamps are part of it.
``EXPECTED`` holds a digest of each table's text per step as the code wrote them before those speed-ups; a
mismatch names the step and the table (one flag's evidence changing changes ``flags``) and prints the digests
this run got. The images are JPEGs Pillow encodes (sha256 of their bytes enter the rows): a Pillow release
that encodes differently changes every digest at once. Redraw them then, or after an intended change of what
dedup stores, from a run of the code whose rows were checked by other means, pasting the printed ``got``.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json

import numpy as np
import pytest

import cultura
from cultura.curate import clusters as cluster_rows
from cultura.db import now, transaction
from tests.fakes import real_photos
from tests.unit.curate.test_dedup import Builder

class Clock:
    """``cultura.db.now``'s clock, set by the test: every timestamp written during a step is that step's."""

    timezone = dt.timezone

    class datetime:
        at = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)

        @classmethod
        def now(cls, tz=None):
            return cls.at


def canonical(db, summary: dict) -> dict[str, str]:
    """Each dedup output table of ``db`` as one text (rows sorted, JSON columns parsed and the text kept)."""
    tables = {
        "runs": db.execute("SELECT * FROM dedup_runs ORDER BY id").fetchall(),
        "clusters": db.execute("SELECT * FROM dup_clusters ORDER BY id").fetchall(),
        "members": db.execute("SELECT cluster_id, sha256, distance FROM dup_members ORDER BY cluster_id, sha256"
                              ).fetchall(),
        "flags": [{**dict(r), "details": json.loads(r["details"]), "text": r["details"]}
                  for r in db.query("SELECT * FROM image_flags ORDER BY sha256, flag")],
        "counter": db.execute("SELECT name, value FROM change_counters").fetchall(),
        "state": db.execute("SELECT * FROM dedup_state ORDER BY key").fetchall(),
        "stage_runs": [{k: v for k, v in dict(r).items() if k not in ("id", "owner", "pid", "host")}
                       for r in db.query("SELECT * FROM runs WHERE stage = 'dedup' ORDER BY id")],
        "summary": summary,
    }
    return {k: json.dumps(v, sort_keys=True, default=str) for k, v in tables.items()}


def digests(texts: dict[str, str]) -> dict[str, str]:
    return {k: hashlib.sha256(v.encode()).hexdigest()[:16] for k, v in texts.items()}


class ThreeCountries(Builder):
    def query(self, concept: str, country: str) -> int:
        cid = self.concept(concept)
        self.db["queries"].insert({"concept_id": cid, "country": country, "language": "en", "kind": "native",
                                   "text": f"{concept} {country}", "created_at": now()}, ignore=True)
        return self.db.execute("SELECT id FROM queries WHERE concept_id = ? AND country = ?",
                               [cid, country]).fetchone()[0]


def photo_project(tmp_path):
    """The project and its steps (see the module docstring): yields ``(step name, db, summary)`` after each."""
    rng = np.random.default_rng(7)
    photos = list(real_photos.photos().items())[:10]
    countries = ["US", "JP", "DE"]
    p = cultura.init(tmp_path / "p", countries=countries)
    b = ThreeCountries(p)
    kept: dict[str, dict[str, str]] = {}
    for k, (name, im) in enumerate(photos):
        home, away = countries[k % 3], countries[(k + 1) % 3]
        concept = ("market", "festival")[k % 2]
        c = real_photos.copies(im)
        names = sorted(c)
        s = {"original": b.add(real_photos.encode(im), (concept, home))}
        s["copy_home"] = b.add(c[names[k % len(names)]], (concept, home))
        s["copy_away"] = b.add(c[names[(k + 3) % len(names)]], (concept, away))              # a culture conflict
        s["other_concept"] = b.add(c[names[(k + 5) % len(names)]], ("street", home))        # apart within-concept
        s["multi"] = b.add(c[names[(k + 7) % len(names)]], (concept, home), ("street", away))  # two links
        for j, crop in enumerate(real_photos.random_crops([im], 2, rng)):  # look-alikes: other crops
            s[f"lookalike{j}"] = b.add(real_photos.encode(crop), (concept, countries[j % 3]))
        kept[name] = s
    db = p.db
    yield "first", db, p.images.dedup(["sha256", "phash", "dhash"], scope="within-concept")

    first = sorted(kept)[0]
    cid = db.execute("SELECT cluster_id FROM dup_members m JOIN dup_clusters c ON c.id = m.cluster_id WHERE "
                     "m.sha256 = ? AND c.method = 'phash' AND c.status = 'open'",
                     [kept[first]["original"]]).fetchone()[0]
    with transaction(db):
        cluster_rows.resolve_clusters(db, [cid])
    decided = db.execute("SELECT sha256 FROM image_flags WHERE status = 'open' ORDER BY sha256").fetchone()[0]
    p.images.resolve_flags(decided, reason="both cultures")
    for name in sorted(kept)[1:4]:  # a new copy of three photographs, found for a third country
        im = dict(photos)[name]
        smaller = im.resize((im.width * 3 // 4, im.height * 3 // 4))
        b.add(real_photos.encode(smaller), (("market", "festival")[sorted(kept).index(name) % 2], "DE"))
    b.add(b.p.blob_path(db.execute("SELECT path FROM images WHERE sha256 = ?", [decided]).fetchone()[0]
                        ).read_bytes(), ("street", "DE"), ("market", "DE"), ("festival", "DE"))  # its pairs grow
    yield "grown", db, p.images.dedup(["sha256", "phash", "dhash"], scope="within-concept")

    second = sorted(kept)[1]
    with transaction(db):  # the away copy's only link gone: its conflict no longer holds
        db.execute("DELETE FROM search_results WHERE candidate_id IN (SELECT id FROM candidates WHERE sha256 = ?)",
                   [kept[second]["copy_away"]])
    yield "unlinked", db, p.images.dedup(["sha256", "phash", "dhash"], scope="within-concept")
    yield "global", db, p.images.dedup(["phash", "dhash"], scope="global")
    yield "noop", db, p.images.dedup(["phash", "dhash"], scope="global")
    p.close()


#: digests of :func:`canonical` per step, as the code wrote them before its cluster and flag writes were sped up
EXPECTED: dict[str, dict[str, str]] = {
    "first": {
        "runs": "fadc93d804ade839", "clusters": "0a0b964a3cdc7768", "members": "21c5f33d5ceb06c3",
        "flags": "b605358356a8690f", "counter": "baaf53b21ce99933", "state": "eca01a950db60b44",
        "stage_runs": "83d3c22dc7b0f654", "summary": "256da37a4f323560",
    },
    "grown": {
        "runs": "743fb5f433ff7ac0", "clusters": "762a26088308c08e", "members": "dd5b50ea06addea5",
        "flags": "708300e1cee5ecbf", "counter": "fbbd196a138c4fc9", "state": "d76302e7c31b5f59",
        "stage_runs": "530d40cf663b7749", "summary": "24af3aaf2a5c9510",
    },
    "unlinked": {
        "runs": "3e0bf89ac48be552", "clusters": "b9e97be2e5664dac", "members": "1ff05a7250a78a67",
        "flags": "d90d9aa5c141ccce", "counter": "c6505ae7989fe87c", "state": "7a8ed804289574ef",
        "stage_runs": "c0986f907b075782", "summary": "bc57c48780d61f21",
    },
    "global": {
        "runs": "6a69ebc575ece91c", "clusters": "25cdd586dc9eb783", "members": "341a6cf864a60826",
        "flags": "dede86716a382c94", "counter": "737c89aa081e4e16", "state": "2f9f6299801776aa",
        "stage_runs": "eb746ca1328e1e2f", "summary": "75b4415e3cc7ffa4",
    },
    "noop": {
        "runs": "6a69ebc575ece91c", "clusters": "25cdd586dc9eb783", "members": "341a6cf864a60826",
        "flags": "dede86716a382c94", "counter": "737c89aa081e4e16", "state": "2f9f6299801776aa",
        "stage_runs": "a1cd1e762eaa7070", "summary": "ec2a77503fe5c986",
    },
}


def test_every_dedup_output_row_is_what_the_slower_code_wrote(tmp_path, monkeypatch):
    import cultura.db

    monkeypatch.setattr(cultura.db, "dt", Clock)
    monkeypatch.setattr(Clock.datetime, "at", dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc))
    got = {}
    steps = photo_project(tmp_path)
    for k, (step, db, summary) in enumerate(steps):
        Clock.datetime.at = dt.datetime(2026, 1, 1, 0, 0, k + 1, tzinfo=dt.timezone.utc)  # the next step's
        texts = canonical(db, summary)
        got[step] = digests(texts)
        if step == "first":  # the project has what the module docstring promises (the digests cover them)
            flags = json.loads(texts["flags"])
            assert len(flags) > 10 and any(len(f["details"]["evidence"]) == 3 for f in flags)
            assert summary["multi_linked_images"] >= 10 and min(summary["clusters"].values()) >= 10
        if step == "grown":
            assert max(summary["superseded_clusters"].values()) >= 1 and summary["conflicts_new"] >= 1
            assert db.execute("SELECT count(*) FROM image_flags WHERE status = 'open' AND details LIKE "
                              "'%resolution%'").fetchone()[0] == 1  # the decision's flag reopened, kept its why
            assert db.execute("SELECT count(*) FROM dup_clusters WHERE status = 'resolved'").fetchone()[0] >= 1
        if step == "unlinked":
            assert db.execute("SELECT count(*) FROM image_flags WHERE status = 'superseded'").fetchone()[0] >= 1
    assert got["noop"]["summary"] != got["global"]["summary"]  # it said unchanged
    assert got == EXPECTED or pytest.fail("\n".join(
        f"{step}: {table} differs" for step in EXPECTED for table in EXPECTED[step]
        if got.get(step, {}).get(table) != EXPECTED[step][table]) + f"\ngot = {json.dumps(got, indent=4)}")
