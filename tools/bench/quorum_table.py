"""The quorum section's table and results (:mod:`tools.bench.quorum`): a side's keeping up
with a load and its saturation point, the printed table, and the rows as the runner's
kwire-vs-Kafka :class:`tools.bench.core.Result` figures (latencies, committed rate, CPU per
million records, failover times)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from tools.bench import failover
from tools.bench.core import Result

if TYPE_CHECKING:
    from tools.bench.quorum import Row, Timing


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def keeps_up(row: Row) -> bool:
    """Whether ``row``'s side kept up with its offered load: no record skipped and at least
    :data:`tools.bench.quorum.KEEP_UP_SHARE` of the offered records/s committed in the window."""
    from tools.bench import quorum as q

    return (row.error is None and not row.skipped and row.records_per_s is not None
            and row.records_per_s >= q.KEEP_UP_SHARE * row.load)


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
    from tools.bench import quorum as q

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
            for linger in q.LINGERS_MS:
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
                           f">= {q.KEEP_UP_SHARE:.0%} committed) up to {text}")
    return "\n".join(out)


def to_results(rows: Sequence[Row], timing: Timing) -> list[Result]:
    """The rows as the runner's kwire-vs-reference results (one per figure, load and linger)."""
    from tools.bench import quorum as q

    results: list[Result] = []
    kafka_name = f"Kafka {q.KAFKA_VERSION} TestRaftServer"
    for load, linger, listener in dict.fromkeys((r.load, r.linger_ms, r.listener) for r in rows):
        same = [r for r in rows if (r.load, r.linger_ms, r.listener) == (load, linger, listener)]
        k = next((r for r in same if r.implementation == "kwire"), None)
        ref = next((r for r in same if r.implementation != "kwire"), None)
        if k is None or k.error is not None:
            continue
        ok_ref = ref if ref is not None and ref.error is None else None
        conditions = (f"{q.NODES} nodes, {load} rec/s x {q.RECORD_SIZE} B offered, linger {linger} ms, "
                      f"{timing.description}" + ("" if ok_ref else "; no reference figures (see above)"))
        at = ("" if load == q.THROUGHPUT else f" at {load:,} rec/s") + (" over TLS" if listener == "SSL" else "")
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
                section=q.SECTION, what=f"{what}, linger {linger} ms{at}", unit=unit, kwire=float(kv),
                reference=None if rv is None else float(rv), reference_name=kafka_name,
                conditions=conditions, higher_is_better=higher,
                extra={"kwire_row": _row_dict(k), "reference_row": _row_dict(ref)},
            ))
    return results


def failover_results(rows: Sequence[failover.FailoverRow]) -> list[Result]:
    """The failover medians as kwire-vs-Kafka results (ms from the signal to the new leader's
    first commit; for SIGKILL also the excess over the fetch timeout)."""
    from tools.bench import quorum as q

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
            section=q.SECTION, what=f"failover after {name}: signal to first commit", unit="ms", kwire=kv,
            reference=rv, reference_name=f"Kafka {q.KAFKA_VERSION} TestRaftServer",
            conditions=conditions, higher_is_better=False, extra=extra,
        ))
        if name == "SIGKILL":
            results.append(Result(
                section=q.SECTION, what="failover after SIGKILL: excess over the fetch timeout", unit="ms",
                kwire=kv - failover.FETCH_TIMEOUT_MS,
                reference=None if rv is None else rv - failover.FETCH_TIMEOUT_MS,
                reference_name=f"Kafka {q.KAFKA_VERSION} TestRaftServer",
                conditions=conditions, higher_is_better=False, extra=extra,
            ))
    return results


def _row_dict(row: Row | None) -> dict[str, Any] | None:
    return None if row is None else asdict(row)
