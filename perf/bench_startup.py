"""Benchmark: CPU time of ``cultura --help`` (and a few everyday commands) against ``python -c pass`` and
``sqlite-utils --help``, the start-up a user of a command-line database tool already accepts.

Each tool runs from its own virtualenv, the way its users install it: cultura's entry point from cultura's venv
(``--cultura``, default: the one beside this Python), sqlite-utils from a clean venv of its own
(``--peers-python``, made by ``make peers``): inside cultura's large venv sqlite-utils scans every
installed distribution for plugins and would look several times slower than it is.

Each round runs every command once, one after the other (interleaved, so a change of machine load hits all
alike); a command's CPU time is user + system time of that child process alone (``os.wait4``), which the load
of other processes distorts much less than wall time. Printed: the median CPU and wall seconds of each
command over the rounds, ``cultura --help`` as a ratio to ``python -c pass`` and to ``sqlite-utils --help``,
and the load average. Exit status 1 when the median CPU time of ``cultura --help`` is above the goal: 1.5x
that of ``sqlite-utils --help`` (0.5 s where no sqlite-utils venv is given).

Run::

    .venv/bin/python perf/bench_startup.py --peers-python .venv-sqlite-utils/bin/python   # 15 rounds
    .venv/bin/python perf/bench_startup.py --rounds 5
"""
from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_CPU_S = 0.5
GOAL_RATIO = 1.5
BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parent.parent
#: Every tool runs with Python's bytecode cache on, as installed: with PYTHONDONTWRITEBYTECODE each run would
#: compile the modules it imports from source again (the warm-up round writes the cache).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run_once(argv: list[str], cwd: str) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run of ``argv`` (its own rusage, output discarded)."""
    t = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv)} exited {proc.returncode}")
    return usage.ru_utime + usage.ru_stime, wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--cultura", default=str(BIN / "cultura"),
                    help="the cultura command: its venv's bin/cultura (a command line: 'python -m cultura' too)")
    ap.add_argument("--peers-python", default=str(REPO / ".venv-sqlite-utils" / "bin" / "python"),
                    help="the Python of a clean virtualenv holding sqlite-utils (make peers)")
    args = ap.parse_args()

    cultura = shlex.split(args.cultura)
    if not shutil.which(cultura[0]):
        sys.exit(f"no cultura entry point at {cultura[0]}: pass --cultura VENV/bin/cultura")
    sqlite_utils = shutil.which("sqlite-utils", path=str(Path(args.peers_python).parent))
    if sqlite_utils is None:
        print(f"no sqlite-utils beside {args.peers_python} (make peers): measuring cultura alone")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([*cultura, "init", f"{tmp}/proj", "--countries", "US,JP"], check=True, env=ENV,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "cultura --help": [*cultura, "--help"],
            "cultura status": [*cultura, "status"],
            "cultura images --help": [*cultura, "images", "--help"],
            "cultura evaluate run --help": [*cultura, "evaluate", "run", "--help"],
        }
        if sqlite_utils:
            commands["sqlite-utils --help"] = [sqlite_utils, "--help"]
        for argv in commands.values():  # warm the OS cache and the bytecode cache
            run_once(argv, f"{tmp}/proj")
        load0 = os.getloadavg()[0]
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(args.rounds):
            for name, argv in commands.items():
                times[name].append(run_once(argv, f"{tmp}/proj"))
        load1 = os.getloadavg()[0]

    med = {name: (statistics.median(c for c, _ in t), statistics.median(w for _, w in t)) for name, t in times.items()}
    print(f"{args.rounds} interleaved rounds on {os.cpu_count()} CPUs, load average {load0:.1f} -> {load1:.1f}")
    for name, (cpu, wall) in med.items():
        print(f"  {name:<30} CPU {cpu:6.3f} s   wall {wall:6.3f} s")
    help_cpu = med["cultura --help"][0]
    print(f"cultura --help: {help_cpu / med['python -c pass'][0]:.1f}x the CPU of 'python -c pass'", end="")
    if "sqlite-utils --help" in med:
        ratio = help_cpu / med["sqlite-utils --help"][0]
        met = ratio <= GOAL_RATIO
        print(f", {ratio:.2f}x the CPU of 'sqlite-utils --help'; goal <= {GOAL_RATIO}x 'sqlite-utils --help' (its "
              f"own venv): {'met' if met else 'NOT MET'} ({ratio:.2f}x, load {load0:.1f} -> {load1:.1f})")
    else:
        met = help_cpu <= GOAL_CPU_S
        print(f"; goal <= {GOAL_CPU_S} s CPU: {'met' if met else 'NOT MET'} ({help_cpu:.3f} s)")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
