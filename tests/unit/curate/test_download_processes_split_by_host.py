"""How a download is split over processes: every URL of a host in one part (the per-host limit holds), parts
balanced, shares that add up, and one sentence for a count it cannot run with."""
from __future__ import annotations

import collections
import random
import threading

import httpx
import pytest

from cultura.curate import download_shards as shards
from cultura.errors import CulturaError


def _rows(hosts: dict[str, int], seed: int = 0) -> list[dict]:
    rows = [{"id": 0, "url": f"https://{h}/p/{i}.jpg"} for h, n in hosts.items() for i in range(n)]
    random.Random(seed).shuffle(rows)
    for i, r in enumerate(rows):
        r["id"] = i
    return rows


def _host(r: dict) -> str:
    return r["url"].split("/")[2]


@pytest.mark.parametrize("parts", [2, 3, 7])
def test_every_host_lands_in_one_part_and_the_parts_are_balanced(parts):
    sizes = {f"h{k}.example": n for k, n in enumerate([400, 120, 90, 90, 60, 33, 20, 7, 5, 1, 1])}
    rows = _rows(sizes)
    got = shards.partition(rows, parts)
    assert len(got) == parts and all(got)
    owner = {}
    for k, part in enumerate(got):
        for r in part:
            assert owner.setdefault(_host(r), k) == k, f"{_host(r)} split over parts"
    assert sorted(r["id"] for part in got for r in part) == list(range(len(rows)))  # nothing lost or doubled
    for part in got:
        assert [r["id"] for r in part] == sorted(r["id"] for r in part)  # each keeps the candidates' order
    loads = sorted(len(p) for p in got)
    # within the bound of largest-first assignment: 4/3 of the best possible heaviest part
    best = max(max(sizes.values()), len(rows) / parts)
    assert loads[-1] <= (4 / 3 - 1 / (3 * parts)) * best
    if parts == 2:
        assert loads == [413, 414]


def test_never_more_parts_than_hosts_and_one_host_stays_whole():
    rows = _rows({"a.example": 50, "b.example": 3})
    assert [len(p) for p in shards.partition(rows, 8)] == [50, 3]
    one = _rows({"only.example": 40})
    assert shards.partition(one, 4) == [one]
    assert shards.partition([], 4) == [[]]
    # hosts differ by name, not by port or case, and a name in Unicode is its IDNA form: the per-host limit
    # (httpx's host of each URL) counts them the same way
    same = [{"id": 1, "url": "http://A.example:8080/x"}, {"id": 2, "url": "http://a.example/y"}]
    assert len(shards.partition(same, 2)) == 1
    idna = [{"id": 1, "url": "http://bücher.de/a.jpg"}, {"id": 2, "url": "http://xn--bcher-kva.de/b.jpg"},
            {"id": 3, "url": "http://BÜCHER.de/c.jpg"}, {"id": 4, "url": "http://other.example/d.jpg"}]
    assert sorted(len(p) for p in shards.partition(idna, 2)) == [1, 3]
    assert len({httpx.URL(r["url"]).host for r in idna[:3]}) == 1


def test_shares_add_up():
    for total in (1, 5, 32, 33, 64):
        for parts in (1, 2, 3, 16):
            got = shards.split(total, parts)
            assert sum(got) == total and len(got) == parts and max(got) - min(got) <= 1


def test_processes_by_default_one_per_cpu_for_header_checks_and_fewer_for_decoding(monkeypatch):
    many = _rows({f"h{k}.example": shards.PROCESSES_MIN // 4 for k in range(4)})
    few = many[:shards.PROCESSES_MIN - 1]
    monkeypatch.setattr(shards, "foreign_threads", lambda: [])
    linux = shards.forkable()
    assert shards.processes_for(None, many, 32, "header", 16) == (16 if linux else 1)
    assert shards.processes_for(None, few, 32, "header", 16) == 1
    # decoding: the decode processes take the CPUs, one event loop feeds those of four
    assert shards.processes_for(None, many, 32, "decode", 2) == 1
    assert shards.processes_for(None, many, 32, "decode", 16) == (16 // shards.DECODE_CPUS_PER_LOOP if linux else 1)
    assert shards.processes_for(None, many, 4, "header", 16) == (4 if linux else 1)  # a connection each
    assert shards.processes_for(3, few, 32, "decode", 2) == 3  # asked for: as asked, within the connections
    assert shards.processes_for(3, few, 2, "decode", 2) == 2
    assert collections.Counter(len(p) > 0 for p in shards.partition(many, 16)) == {True: 4}
    # from a process with threads of its own (a notebook's kernel) it forks only when asked
    monkeypatch.setattr(shards, "foreign_threads", lambda: ["IOPub"])
    assert shards.processes_for(None, many, 32, "header", 16) == 1
    assert shards.processes_for(2, many, 32, "header", 16) == 2


def test_a_count_it_cannot_run_with_is_one_sentence():
    with pytest.raises(CulturaError, match=r"processes must be 1 or more, got 0; 1 runs one event loop") as e:
        shards.check_processes(0)
    assert e.value.param == "processes"
    shards.check_processes(None)
    shards.check_processes(1)
    if shards.forkable():
        shards.check_processes(4)
    else:  # pragma: no cover - not Linux
        with pytest.raises(CulturaError, match="only Linux"):
            shards.check_processes(4)


def test_the_command_lines_progress_thread_is_not_a_reason_to_stay_in_one_process():
    """The CLI's progress heartbeat runs beside every command: with it alone, the download still forks."""
    stop = threading.Event()
    ours = threading.Thread(target=stop.wait, name="cultura-progress", daemon=True)
    theirs = threading.Thread(target=stop.wait, name="a-notebook-kernel-thread", daemon=True)
    ours.start()
    try:
        assert "cultura-progress" not in shards.foreign_threads()
        theirs.start()
        assert "a-notebook-kernel-thread" in shards.foreign_threads()
    finally:
        stop.set()
        ours.join()
        if theirs.is_alive() or theirs.ident:
            theirs.join()
