"""The processes a test run left running: those whose environment carries the run's mark.

``make test`` exports ``KWIRE_TEST_RUN=<a random id>`` before it starts anything, so every
process of the run -- pytest and its workers, kwire nodes, stock JVMs, tool runners, Spark --
inherits it (the harness starts its processes with the parent's environment). When the run is
over it calls::

    python -m tools.leftovers           # the id from $KWIRE_TEST_RUN
    python -m tools.leftovers --run-id ID [--grace-s 5] [--kill-after-s 10] [--json]

which reads ``/proc/<pid>/environ`` of every process it may read and lists each that carries
``KWIRE_TEST_RUN=ID`` and is still alive ``--grace-s`` seconds later (a process exiting as the
run ends is not left over): pid, parent pid, age and command line. It then stops them --
SIGTERM, and SIGKILL to any still alive ``--kill-after-s`` seconds later -- and exits 1; 0 when
none was left. Only processes with the mark are touched: another run's have another id, and a
process not started by the run (the calling shell, other users' work) has none. Itself and its
ancestors are never listed. A process the run started with an environment of its own (not the
parent's) carries no mark and is not seen: none of the project's do.

The environment is the one a process was started with (``/proc/<pid>/environ``), which is what
a child inherits; zombies, whose environment is gone, are not listed (their parent reaps them).
Linux only (it needs ``/proc``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["RUN_ENV", "Leftover", "find_marked", "main", "stop"]

RUN_ENV = "KWIRE_TEST_RUN"
"""The environment variable that marks a test run's processes."""
PROC = Path("/proc")


@dataclass(frozen=True)
class Leftover:
    """A marked process: its pid, parent pid, seconds since it started, and command line."""

    pid: int
    ppid: int
    age_s: float
    command: str


def _ancestors(pid: int) -> set[int]:
    """``pid`` and every process above it."""
    seen = set()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        try:
            pid = _stat(pid)[0]
        except OSError:
            break
    return seen


def _stat(pid: int) -> tuple[int, int]:
    """(parent pid, start time in clock ticks since boot) from ``/proc/<pid>/stat``."""
    fields = (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1]), int(fields[19])


def find_marked(run_id: str, *, exclude: Iterable[int] = ()) -> list[Leftover]:
    """The live processes whose starting environment holds ``KWIRE_TEST_RUN=run_id``, less
    ``exclude`` and this process and its ancestors, by pid. Raises ValueError for an empty id."""
    if not run_id:
        raise ValueError(f"{RUN_ENV} is empty: no run to look for")
    mark = f"{RUN_ENV}={run_id}".encode()
    skip = set(exclude) | _ancestors(os.getpid())
    ticks = os.sysconf("SC_CLK_TCK")
    uptime = float((PROC / "uptime").read_text().split()[0])
    found = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) in skip:
            continue
        pid = int(entry.name)
        try:
            if mark not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            ppid, started = _stat(pid)
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if not command:  # a zombie (or a kernel thread): nothing left to stop
            continue
        found.append(Leftover(pid, ppid, round(uptime - started / ticks, 1), command))
    return sorted(found, key=lambda p: p.pid)


def stop(leftovers: Sequence[Leftover], kill_after_s: float) -> list[int]:
    """SIGTERM each of ``leftovers``, then SIGKILL those still alive ``kill_after_s`` seconds
    later; returns the pids that needed the SIGKILL."""
    for p in leftovers:
        _signal(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + kill_after_s
    alive = [p.pid for p in leftovers]
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)  # poll interval
        alive = [pid for pid in alive if _alive(pid)]
    for pid in alive:
        _signal(pid, signal.SIGKILL)
    return alive


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie does not: it has exited)."""
    try:
        state = (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.leftovers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-id", default=os.environ.get(RUN_ENV, ""),
                        help=f"the run's mark (default: ${RUN_ENV})")
    parser.add_argument("--grace-s", type=float, default=5.0,
                        help="seconds a marked process may take to exit before it counts as left over")
    parser.add_argument("--kill-after-s", type=float, default=10.0, help="seconds from SIGTERM to SIGKILL")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args(argv)
    if not args.run_id:
        parser.error(f"no run id: pass --run-id or set {RUN_ENV}")
    deadline = time.monotonic() + args.grace_s
    left = find_marked(args.run_id)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)  # poll interval
        left = find_marked(args.run_id)
    killed = stop(left, args.kill_after_s) if left else []
    if args.json:
        print(json.dumps({"run_id": args.run_id, "left": [asdict(p) for p in left], "killed": killed}))
    elif left:
        print(f"leftovers: {len(left)} process(es) of test run {args.run_id} still running, now stopped:")
        for p in left:
            how = "SIGKILL" if p.pid in killed else "SIGTERM"
            print(f"  pid {p.pid} (parent {p.ppid}, {p.age_s:.0f} s old, {how}): {p.command[:300]}")
    else:
        print(f"leftovers: no process of test run {args.run_id} left running")
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
