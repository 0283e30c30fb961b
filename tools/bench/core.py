"""What every benchmark section shares: the result row, the timing loop, the machine header, the
table, and following a process's output (:class:`Tail`).

A section measures kwire and its reference (kafka-python, Kafka, a hand-written floor, ...) in
the same process run, interleaving the two sides run by run so that both see the same machine
noise. Each side is timed as ``runs`` runs of ``loops`` calls with ``time.perf_counter_ns``;
``loops`` is calibrated once so that one run lasts about ``min_time_s``. A :class:`Stat` keeps
the per-run figures; rows report the median of the runs and the best (min time / max rate).

Nothing is pinned (no taskset, no CPU governor changes): the header prints the Python version,
the CPU model and the load average so that a reader can judge the noise.
"""

from __future__ import annotations

import gc
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


class SectionError(Exception):
    """A section cannot produce honest figures (a precondition failed); the message says why."""


@dataclass(frozen=True, slots=True)
class Settings:
    """How hard to measure: ``runs`` timed runs per side of about ``min_time_s`` each."""

    runs: int = 7
    min_time_s: float = 0.2

    @classmethod
    def from_args(cls, args: Any) -> Settings:
        quick = bool(getattr(args, "quick", False))
        runs = getattr(args, "runs", None) or (3 if quick else 7)
        min_time = getattr(args, "min_time", None) or (0.02 if quick else 0.2)
        return cls(runs=int(runs), min_time_s=float(min_time))


@dataclass(slots=True)
class Stat:
    """Per-operation times (ns) of each timed run, and the loop count of a run."""

    per_op_ns: list[float]
    loops: int
    cpu_share: list[float] = field(default_factory=list)  # process CPU time / wall time, per run

    @property
    def median_ns(self) -> float:
        return statistics.median(self.per_op_ns)

    @property
    def median_cpu_share(self) -> float:
        return statistics.median(self.cpu_share) if self.cpu_share else float("nan")

    @property
    def min_ns(self) -> float:
        return min(self.per_op_ns)

    def rate(self, best: bool = False) -> float:
        """Operations per second at the median run (or the fastest run with ``best``)."""
        return 1e9 / (self.min_ns if best else self.median_ns)


@dataclass(slots=True)
class Result:
    """One row of the table.

    ``kwire`` and ``reference`` are figures in ``unit``; ``kwire_best`` and ``reference_best`` the
    best run. ``ratio`` is kwire / reference when ``higher_is_better`` (throughputs) and
    reference / kwire otherwise (latencies), so ratio > 1 always means kwire is ahead.
    ``bytes_per_op``, when known, lets the table add MB/s columns (1 MB = 10**6 bytes).
    """

    section: str
    what: str
    unit: str
    kwire: float
    reference: float | None
    reference_name: str
    conditions: str
    kwire_best: float | None = None
    reference_best: float | None = None
    higher_is_better: bool = True
    bytes_per_op: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        if self.reference is None or self.reference == 0 or self.kwire == 0:
            return None
        if self.higher_is_better:
            return self.kwire / self.reference
        return self.reference / self.kwire

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["ratio"] = self.ratio
        return data


def calibrate(op: Callable[[], object], min_time_s: float) -> int:
    """The loop count for which ``op`` repeated lasts at least ``min_time_s`` (after a warm-up)."""
    op()
    loops = 1
    target_ns = min_time_s * 1e9
    while True:
        t0 = time.perf_counter_ns()
        for _ in range(loops):
            op()
        elapsed = time.perf_counter_ns() - t0
        if elapsed >= target_ns / 4 or loops >= 1 << 24:
            return max(1, int(loops * target_ns / max(elapsed, 1)))
        loops *= 4


def _time_run(op: Callable[[], object], loops: int) -> tuple[float, float]:
    """Wall ns per call, and the share of that wall time this process was on a CPU (a run at
    well under 1.0 was slowed by other processes: the machine is shared)."""
    gc.collect()
    c0 = time.process_time_ns()
    t0 = time.perf_counter_ns()
    for _ in range(loops):
        op()
    wall = time.perf_counter_ns() - t0
    cpu = time.process_time_ns() - c0
    return wall / loops, cpu / max(wall, 1)


def measure_pair(
    kwire_op: Callable[[], object],
    reference_op: Callable[[], object] | None,
    settings: Settings,
) -> tuple[Stat, Stat | None]:
    """Time both sides in the same run, alternating kwire and reference run by run.

    The garbage collector stays enabled (as in a server); it is emptied before each run.
    """
    k_loops = calibrate(kwire_op, settings.min_time_s)
    r_loops = calibrate(reference_op, settings.min_time_s) if reference_op else 0
    k = Stat([], k_loops)
    r = Stat([], r_loops)
    for _ in range(settings.runs):
        for stat, op in ((k, kwire_op), (r, reference_op)):
            if op is not None:
                per_op, share = _time_run(op, stat.loops)
                stat.per_op_ns.append(per_op)
                stat.cpu_share.append(share)
    return k, (r if reference_op else None)


# ---------------------------------------------------------------------------------------------
# machine header


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment() -> dict[str, Any]:
    try:
        load = list(os.getloadavg())
    except OSError:
        load = []
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "loadavg": load,
        "platform": platform.platform(),
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def format_environment(env: dict[str, Any]) -> str:
    load = " ".join(f"{x:.2f}" for x in env["loadavg"]) or "n/a"
    return (
        f"{env['implementation']} {env['python']} | {env['cpu']} x{env['cpus']} | "
        f"load average {load} | {env['platform']} | {env['time_utc']}"
    )


# ---------------------------------------------------------------------------------------------
# table


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 1e6:
        return f"{value / 1e6:,.3f}M"
    if value >= 1e4:
        return f"{value / 1e3:,.1f}k"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _mbs(rate: float | None, size: int | None) -> str:
    if rate is None or size is None:
        return "-"
    return f"{rate * size / 1e6:,.1f}"


def format_table(results: Sequence[Result]) -> str:
    """Rows as aligned text: figures are medians with the best run in brackets."""
    header = ["section", "what", "kwire (best)", "reference (best)", "ratio", "unit",
              "kwire MB/s", "ref MB/s", "conditions"]
    rows = [header]
    for r in results:
        ratio = r.ratio
        rows.append([
            r.section,
            r.what,
            f"{_num(r.kwire)} ({_num(r.kwire_best)})",
            f"{_num(r.reference)} ({_num(r.reference_best)})" if r.reference is not None else "-",
            f"{ratio:.2f}x" if ratio is not None else "-",
            r.unit,
            _mbs(r.kwire, r.bytes_per_op),
            _mbs(r.reference, r.bytes_per_op),
            f"ref={r.reference_name}; {r.conditions}",
        ])
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    lines = []
    for n, row in enumerate(rows):
        cells = [row[i].ljust(widths[i]) if i < 2 else row[i].rjust(widths[i])
                 for i in range(len(widths))]
        lines.append("  ".join(cells) + "  " + row[-1])
        if n == 0:
            lines.append("-" * (sum(widths) + 2 * len(widths) + len("conditions")))
    return "\n".join(lines)


def write_json(path: str, env: dict[str, Any], results: Sequence[Result]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"environment": env, "results": [r.to_json() for r in results]}, f, indent=2)
        f.write("\n")


class Tail:
    """The complete lines appended to a file since the last call of :meth:`lines` (a file that
    does not exist yet has none): for following a process's output while it runs."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pos = 0
        self.rest = b""

    def lines(self) -> list[str]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.pos)
                data = f.read()
        except FileNotFoundError:
            return []
        self.pos += len(data)
        *complete, self.rest = (self.rest + data).split(b"\n")
        return [line.decode("utf-8", "replace") for line in complete]


def tail_text(path: Path, limit: int = 1500) -> str:
    """The last ``limit`` characters of a text file (a process's log, for an error message);
    empty when it cannot be read."""
    try:
        return path.read_text(errors="replace")[-limit:].strip()
    except OSError:
        return ""
