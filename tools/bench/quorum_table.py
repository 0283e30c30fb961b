"""The quorum section's rows and table (:mod:`tools.bench.quorum` runs the section): the
workload's constants, a row of figures (:class:`Row`) and a run's timing, a side's keeping up
with a load and its saturation point, the printed table, and the rows as the runner's
kwire-vs-Kafka :class:`tools.bench.core.Result` figures (latencies, committed rate, CPU per
million records, failover times). :mod:`tools.bench.quorum` re-exports every public name."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from tools.bench import failover
from tools.bench.core import Result
from tools.stock_kafka import PINNED_VERSIONS

SECTION = "quorum"
THROUGHPUT = 20_000  # records/s: TestRaftServer's hard-coded workload (Oct 2024 source, 3.9.2 jar)
RECORD_SIZE = 256  # bytes per record value
NODES = 3
LINGERS_MS = (25, 0)
KEEP_UP_SHARE = 0.97
"""A side keeps up with a load when it skips none and commits at least this share of it."""
KAFKA_VERSION = PINNED_VERSIONS[-1] if PINNED_VERSIONS else "(none pinned)"
"""The newest pinned Kafka release (``compat/kafka-versions.properties``, the one place
releases are pinned)."""
KAFKA_SAMPLE_S = 30.0  # MetricConfig's default sample window (2 samples)


@dataclass(frozen=True, slots=True)
class Timing:
    """``window_s``: kwire's report interval (warm-up = the first interval, measure = the second)
    and the CPU window of both sides. ``kafka_report_after_s``: seconds after the Kafka leader's
    first line from which its next line is the one used. ``timeout_s``: give up on a run."""

    window_s: float
    kafka_report_after_s: float
    timeout_s: float
    description: str


FULL = Timing(30.0, 2 * KAFKA_SAMPLE_S + 2, 240.0, "30 s warm-up, 30 s measured")
QUICK = Timing(5.0, KAFKA_SAMPLE_S + 2, 150.0, "quick: 5 s warm-up, 5 s measured")


@dataclass(slots=True)
class Row:
    """One implementation at one linger. Latencies in ms, rates in records/s; ``error`` set when
    the run produced no figures (then the figures are None)."""

    implementation: str
    linger_ms: int
    load: int = THROUGHPUT
    """The offered load asked for, records/s."""
    p50: float | None = None
    p75: float | None = None
    p99: float | None = None
    p999: float | None = None
    records_per_s: float | None = None
    offered_per_s: float | None = None
    skipped: int | None = None
    cpu_s_per_million: float | None = None
    window_s: float | None = None
    note: str = ""
    error: str | None = None
    listener: str = "PLAINTEXT"
    """The controller listener's security protocol: PLAINTEXT or SSL (``--tls``)."""

    @property
    def label(self) -> str:
        """The implementation, with ``over TLS`` on an SSL listener."""
        return self.implementation + (" over TLS" if self.listener == "SSL" else "")


# ---------------------------------------------------------------------------------------------
# table


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def keeps_up(row: Row) -> bool:
    """Whether ``row``'s side kept up with its offered load: no record skipped and at least
    :data:`KEEP_UP_SHARE` of the offered records/s committed in the window."""
    return (row.error is None and not row.skipped and row.records_per_s is not None
            and row.records_per_s >= KEEP_UP_SHARE * row.load)


def saturation(rows: Sequence[Row], label: str, linger_ms: int) -> int | None:
    """The highest offered load (records/s) up to which the rows of ``label`` (``Row.label``:
    the implementation, and its listener when TLS) kept up at ``linger_ms`` at every measured
    load (:func:`keeps_up`); None when they kept up at none."""
    best: int | None = None
    for row in sorted((r for r in rows if r.label == label and r.linger_ms == linger_ms),
                      key=lambda r: r.load):
        if not keeps_up(row):
            break
        best = row.load
    return best


def format_rows(rows: Sequence[Row]) -> str:
    """The section's own table: one line per implementation, offered load and linger."""
    header = ["implementation", "linger", "load rec/s", "p50 ms", "p75 ms", "p99 ms", "p999 ms",
              "committed rec/s", "offered rec/s", "skipped", "CPU-s/M rec", "window s"]
    lines = [header]
    for r in rows:
        if r.error is not None:
            lines.append([r.label, f"{r.linger_ms} ms", f"{r.load:,}"] + ["-"] * (len(header) - 3))
            continue
        lines.append([
            r.label, f"{r.linger_ms} ms", f"{r.load:,}",
            "n/a" if r.p50 is None else _ms(r.p50), _ms(r.p75), _ms(r.p99), _ms(r.p999),
            _rate(r.records_per_s), _rate(r.offered_per_s),
            "-" if r.skipped is None else f"{r.skipped:,}",
            "-" if r.cpu_s_per_million is None else f"{r.cpu_s_per_million:.1f}",
            "-" if r.window_s is None else f"{r.window_s:.1f}",
        ])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = ["  ".join(cell.ljust(widths[i]) if i < 2 else cell.rjust(widths[i])
                     for i, cell in enumerate(line)) for line in lines]
    out.insert(1, "-" * len(out[0]))
    for r in rows:
        text = f"error: {r.error}" if r.error is not None else r.note
        if text:
            out.append(f"  {r.label}, {r.load:,} rec/s, linger {r.linger_ms} ms: {text}")
    if len({r.load for r in rows}) > 1:
        for implementation in dict.fromkeys(r.label for r in rows):
            for linger in LINGERS_MS:
                point = saturation(rows, implementation, linger)
                measured = max((r.load for r in rows if (r.label, r.linger_ms) == (implementation, linger)),
                               default=None)
                if point is None:
                    text = "no measured load"
                elif point == measured:
                    text = f"{point:,} rec/s, the highest measured (its saturation point lies above)"
                else:
                    text = f"{point:,} rec/s (not at the next measured load)"
                out.append(f"  {implementation}, linger {linger} ms: keeps up (no skipped records, "
                           f">= {KEEP_UP_SHARE:.0%} committed) up to {text}")
    return "\n".join(out)


def to_results(rows: Sequence[Row], timing: Timing) -> list[Result]:
    """The rows as the runner's kwire-vs-reference results (one per figure, load and linger)."""
    results: list[Result] = []
    kafka_name = f"Kafka {KAFKA_VERSION} TestRaftServer"
    for load, linger, listener in dict.fromkeys((r.load, r.linger_ms, r.listener) for r in rows):
        same = [r for r in rows if (r.load, r.linger_ms, r.listener) == (load, linger, listener)]
        k = next((r for r in same if r.implementation == "kwire"), None)
        ref = next((r for r in same if r.implementation != "kwire"), None)
        if k is None or k.error is not None:
            continue
        ok_ref = ref if ref is not None and ref.error is None else None
        conditions = (f"{NODES} nodes, {load} rec/s x {RECORD_SIZE} B offered, linger {linger} ms, "
                      f"{timing.description}" + ("" if ok_ref else "; no reference figures (see above)"))
        at = ("" if load == THROUGHPUT else f" at {load:,} rec/s") + (" over TLS" if listener == "SSL" else "")
        figures: list[tuple[str, str, float | None, float | None, bool]] = [
            ("commit latency p50", "ms", k.p50, None, False),
            ("commit latency p75", "ms", k.p75, ok_ref.p75 if ok_ref else None, False),
            ("commit latency p99", "ms", k.p99, ok_ref.p99 if ok_ref else None, False),
            ("committed records/s", "rec/s", k.records_per_s,
             ok_ref.records_per_s if ok_ref else None, True),
            ("CPU-s per million records", "s", k.cpu_s_per_million,
             ok_ref.cpu_s_per_million if ok_ref else None, False),
        ]
        for what, unit, kv, rv, higher in figures:
            if kv is None:
                continue
            results.append(Result(
                section=SECTION, what=f"{what}, linger {linger} ms{at}", unit=unit, kwire=float(kv),
                reference=None if rv is None else float(rv), reference_name=kafka_name,
                conditions=conditions, higher_is_better=higher,
                extra={"kwire_row": _row_dict(k), "reference_row": _row_dict(ref)},
            ))
    return results


def failover_results(rows: Sequence[failover.FailoverRow]) -> list[Result]:
    """The failover medians as kwire-vs-Kafka results (ms from the signal to the new leader's
    first commit; for SIGKILL also the excess over the fetch timeout)."""
    k = next((r for r in rows if r.implementation == "kwire" and r.error is None), None)
    ref = next((r for r in rows if r.implementation != "kwire" and r.error is None), None)
    if k is None:
        return []
    conditions = (f"{failover.NODES} nodes, {failover.THROUGHPUT} rec/s, fetch timeout "
                  f"{failover.FETCH_TIMEOUT_MS} ms, median of {len(k.recoveries('SIGTERM'))} rounds")
    results = []
    for name, _sig in failover.SIGNALS:
        kv, rv = k.median(name), ref.median(name) if ref is not None else None
        if kv is None:
            continue
        extra = {"kwire_ms": k.recoveries(name), "reference_ms": ref.recoveries(name) if ref else None}
        results.append(Result(
            section=SECTION, what=f"failover after {name}: signal to first commit", unit="ms", kwire=kv,
            reference=rv, reference_name=f"Kafka {KAFKA_VERSION} TestRaftServer",
            conditions=conditions, higher_is_better=False, extra=extra,
        ))
        if name == "SIGKILL":
            results.append(Result(
                section=SECTION, what="failover after SIGKILL: excess over the fetch timeout", unit="ms",
                kwire=kv - failover.FETCH_TIMEOUT_MS,
                reference=None if rv is None else rv - failover.FETCH_TIMEOUT_MS,
                reference_name=f"Kafka {KAFKA_VERSION} TestRaftServer",
                conditions=conditions, higher_is_better=False, extra=extra,
            ))
    return results


def _row_dict(row: Row | None) -> dict[str, Any] | None:
    return None if row is None else asdict(row)
