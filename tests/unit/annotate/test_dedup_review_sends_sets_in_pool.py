"""The dedup review's items are duplicate sets judged as sets: every member is checked against the pool (a
member a decision took out is never sent) and a set is reviewed while two or more members are in the pool,
whichever is the representative."""
from __future__ import annotations

from cultura.annotate.items import build_items
from cultura.annotate.push import _out_of_pool, sets_in_pool
from tests.fakes.world import decide, dup_cluster, make_world


def _sent(project):
    items = build_items(project, "dedup-review")
    return sets_in_pool(items, _out_of_pool(project.db, "dedup-review"))


def test_members_out_of_the_pool_are_never_sent_and_a_removed_representative_hides_nothing(project):
    w = make_world(project, per_cell=3)
    a, b, c = w["images"][("bus", "JP")]
    x, y = w["images"][("temple", "US")][:2]
    dup_cluster(project, [a, b, c])      # a: the representative
    dup_cluster(project, [x, y])
    items, left = _sent(project)
    assert left == 0 and sorted(len(i["payload"]["members"]) for i in items) == [2, 3]

    decide(project, "filter", a, label="remove")       # the representative leaves the pool
    decide(project, "filter", y, label="remove")       # the only other member of a pair leaves it
    items, left = _sent(project)
    assert left == 2 and len(items) == 1
    (it,) = items
    assert sorted(m["sha256"] for m in it["payload"]["members"]) == sorted([b, c])
    assert it["sha256"] in (b, c)                       # a member in the pool stands for the item
