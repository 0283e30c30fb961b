"""The fault soak: ``python -m compat.faults`` (root; ``make compat-jars`` first).

Until ``--minutes`` have passed (or ``--quorums`` quorums have run), draw a configuration and
``--rounds`` nemeses from ``--seed``, run them on a fresh quorum while the client writes
(:func:`compat.faults.rounds.run_faults`), and print one line per quorum; at the end, a table
per nemesis and configuration: rounds, acknowledged writes (those invoked during the nemesis's
rounds; writes invoked outside every round have a row of their own, ``(between rounds)``; with
``+brokers``, the controller workload's admin requests count the same way and its produced
records have a row ``(produced records)``),
lost and diverged writes, median and max recovery time after the heal, and failed rounds; the
nemeses built from kwire's failpoints (:mod:`compat.faults.failpoints`) have a row on a stock
quorum (or a mixed one) all the same, noted ``n/a (no failpoints in stock Kafka)``. Quorum ``n`` of a run replays
alone with ``--seed S --skip n-1 --quorums 1``.

Examples::

    python -m compat.faults --minutes 180 --seed 7              # every configuration, make nightly
    python -m compat.faults --configs kwire --nemeses pause,one-way --quorums 3 --json
    python -m compat.faults --configs kwire+brokers --each --seed 3 --report /tmp/faults  # then
    python -m compat.faults --configs stock-4.4.0+brokers --each --seed 3 --report /tmp/faults

With ``--report DIR``, each quorum's history is kept in ``DIR`` and ``DIR/index.html`` draws
every quorum kept there (:mod:`compat.faults.report`): runs of one seed on two configurations
share the page, side by side.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
import traceback
from collections import defaultdict
from pathlib import Path
from typing import Any

from compat.faults import report
from compat.faults.cluster import AdminOp, ClusterVerdict
from compat.faults.failpoints import NOT_IN_MIXED, NOT_IN_STOCK
from compat.faults.rounds import (
    BROKER_NEMESES,
    KWIRE_ONLY,
    NEMESES,
    QUORUM_IDS,
    Run,
    available_nemeses,
    configurations,
    recovery_figures,
    run_faults,
)
from compat.harness import KafkaRelease


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m compat.faults", description=__doc__.split("\n\n")[1])
    parser.add_argument("--minutes", type=float, default=None, help="stop drawing quorums after this long")
    parser.add_argument("--quorums", type=int, default=None, help="stop after this many quorums")
    parser.add_argument("--skip", type=int, default=0, help="draw and skip this many quorums first (replay)")
    parser.add_argument("--rounds", type=int, default=5, help="nemeses per quorum (default 5)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--configs", default="all",
                        help="comma-separated configuration ids (kwire, stock-4.4.0, mixed-3.9.2-1-kwire, ..., "
                             "each also with '+brokers': stock brokers under the controller workload) "
                             "or 'all' (default)")
    parser.add_argument("--nemeses", default=",".join(NEMESES + BROKER_NEMESES),
                        help=f"comma-separated, of {', '.join(NEMESES + BROKER_NEMESES)} "
                             f"({', '.join(BROKER_NEMESES)} only with brokers; {', '.join(sorted(KWIRE_ONLY))} on "
                             "kwire nodes only)")
    parser.add_argument("--dir", type=Path, default=None, help="put each quorum's files here (a passing quorum's are removed)")
    parser.add_argument("--each", action="store_true",
                        help="one round of each of --nemeses the configuration can take, in order, instead of "
                             "--rounds drawn at random")
    parser.add_argument("--report", type=Path, default=None,
                        help="keep each quorum's history in this directory and draw them all in its index.html")
    parser.add_argument("--json", action="store_true", help="print the table as JSON")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.minutes is None and args.quorums is None:
        args.quorums = 1
    known = {name + suffix: (release, ids) for name, release, ids in configurations(True) for suffix in ("", BROKERS)}
    names = list(known) if args.configs == "all" else args.configs.split(",")
    unknown = [n for n in names if n not in known]
    nemeses = args.nemeses.split(",")
    bad = [n for n in nemeses if n not in NEMESES + BROKER_NEMESES]
    if unknown or bad:
        print(f"unknown configurations {unknown} or nemeses {bad}; configurations: {', '.join(known)}",
              file=sys.stderr)
        return 2
    rows = table_rows()

    def offered(name: str, kwire: bool) -> list[str]:
        release = known[name][0]
        return [n for n in nemeses if n in available_nemeses(KafkaRelease(release), name.endswith(BROKERS),
                                                             kwire=kwire)]

    def not_applicable(name: str) -> dict[str, str]:
        """The failpoint nemeses asked for that ``name``'s quorum cannot take, and why."""
        ids = known[name][1]
        why = NOT_IN_STOCK if not ids else NOT_IN_MIXED
        return {} if ids >= QUORUM_IDS else {n: why for n in offered(name, True) if n in KWIRE_ONLY}

    def note(name: str) -> None:  # said in the table, not left out
        for n, why in not_applicable(name).items():
            rows[(name, n)]["note"] = why

    takes = {name: offered(name, known[name][1] >= QUORUM_IDS) for name in names}
    for name in [n for n in names if not takes[n]]:  # a stock quorum asked for failpoint nemeses alone
        note(name)
        print(f"{name} can take none of {', '.join(nemeses)}: not run", flush=True)
    names = [n for n in names if takes[n]]
    draw = random.Random(args.seed)
    deadline = None if args.minutes is None else time.monotonic() + args.minutes * 60
    quorums = 0
    index = 0
    while names and (args.quorums is None or quorums < args.quorums) and (deadline is None or time.monotonic() < deadline):
        name = draw.choice(names)
        release, ids = known[name]
        brokers = name.endswith(BROKERS)
        choices = takes[name]
        note(name)
        plan = list(choices) if args.each else [draw.choice(choices) for _ in range(args.rounds)]
        index += 1
        if index <= args.skip:
            continue
        quorums += 1
        root = Path(tempfile.mkdtemp(prefix=f"soak-{index}-", dir=args.dir))
        started = time.monotonic()
        seen: list[Run] = []
        error = ""
        try:
            run_faults(KafkaRelease(release), ids, root, plan, brokers=brokers, seen=seen)
        except Exception as exc:  # a failed check or a quorum that did not recover: reported, the soak goes on
            error = f"{type(exc).__name__}: {str(exc)[:300]}"
            traceback.print_exc()
        run = seen[0] if seen else None
        _account(rows, name, plan, run, error)
        if args.report is not None and run is not None:
            report.save(report.record(run, name, seed=args.seed, plan=plan, index=index, error=error,
                                      not_applicable=not_applicable(name)), args.report)
            print(f"report: {report.write_report(args.report)}", flush=True)
        verdict = "" if run is None or run.verdict is None else run.verdict.summary()
        if run is not None and run.cluster is not None:
            verdict += f"; controller workload: {run.cluster.summary()}"
        passed = (not error and run is not None and run.verdict is not None and run.verdict.ok
                  and (run.cluster is None or run.cluster.ok))
        if passed:  # a failed quorum's files stay for its post-mortem
            shutil.rmtree(root, ignore_errors=True)
        print(f"quorum {index} (seed {args.seed}): {name} {plan} in {time.monotonic() - started:.0f} s: "
              f"{error or 'ok'}; {verdict}" + ("" if passed else f"; files in {root}"), flush=True)
    table = [{"configuration": c, "nemesis": n, **_figures(row)} for (c, n), row in sorted(rows.items())]
    if args.json:
        print(json.dumps(table, indent=2))
    else:
        _print_table(table)
    return 0 if all(r["lost"] == 0 and r["diverged"] == 0 and r["failed_rounds"] == 0 for r in table) else 1


BETWEEN = "(between rounds)"
"""The table's nemesis for writes invoked outside every round (before the first, or after a
round's recovery): their losses count as any other's."""
BROKERS = "+brokers"
"""The suffix of a configuration with stock brokers under the controller workload
(:mod:`compat.faults.cluster`)."""
RECORDS = "(produced records)"
"""The table's nemesis for the records of a run with brokers: the producer keeps no times, so
its acknowledged records, and those not read back exactly once, have a row of their own."""


def _account(rows: dict[tuple[str, str], dict[str, Any]], name: str, plan: list[str], run: Run | None,
             error: str) -> None:
    """Add one quorum's rounds and history to ``rows``. A round that started and did not
    recover counts as failed; so does the last round when a check after the rounds failed
    (``error`` with every round done), and the first when the quorum did not start."""
    done = [] if run is None else run.rounds
    for this in done:
        row = rows[(name, this.nemesis)]
        row["rounds"] += 1
        row["finished"].append(this)
        if "recovered_s" not in this.figures:
            row["failed_rounds"] += 1
    if error and not done:  # the quorum never started: its first round counts, failed
        rows[(name, plan[0])]["rounds"] += 1
        rows[(name, plan[0])]["failed_rounds"] += 1
    elif error and "recovered_s" in done[-1].figures:  # a check after the rounds failed
        rows[(name, done[-1].nemesis)]["failed_rounds"] += 1
    if run is None or run.verdict is None:
        return
    lost = set(run.verdict.lost)
    diverged = bool(run.verdict.diverged)
    for op in run.ops:
        within = run.round_of(op)
        row = rows[(name, BETWEEN if within is None else within.nemesis)]
        row["acknowledged"] += op.outcome == "ok"
        row["lost"] += op.value in lost
        row["diverged"] += diverged and op.outcome == "ok"
    cluster = run.cluster
    if cluster is None:
        return
    for admin in run.admin_ops:
        within = run.round_of(admin)
        row = rows[(name, BETWEEN if within is None else within.nemesis)]
        row["acknowledged"] += admin.outcome == "ok"
        row["lost"] += admin.outcome == "ok" and _named(admin, cluster)
        row["diverged"] += bool(cluster.diverged) and admin.outcome == "ok"
    records = rows[(name, RECORDS)]
    records["acknowledged"] += cluster.records_acknowledged
    records["lost"] += len(cluster.records)
    if cluster.final or cluster.phantom:  # the state after the rounds is wrong: the last round failed
        rows[(name, done[-1].nemesis)]["failed_rounds"] += 1


def table_rows() -> defaultdict[tuple[str, str], dict[str, Any]]:
    """The table's rows, by (configuration, nemesis), each created empty on first use: counts of
    rounds, acknowledged, lost and diverged writes and failed rounds, the finished rounds, and a
    note (why a configuration could not take a nemesis)."""
    return defaultdict(lambda: {"rounds": 0, "acknowledged": 0, "lost": 0, "diverged": 0, "failed_rounds": 0,
                                "finished": [], "note": ""})


def _named(op: AdminOp, cluster: ClusterVerdict) -> bool:
    """Whether a finding of ``cluster`` names ``op``: lost or reordered, or its topic invisible
    or created twice."""
    keyed = [*cluster.lost, *(k for pair in cluster.reordered for k in pair)]
    if any(entry == op.key or entry.startswith(op.key + " (") for entry in keyed):
        return True
    return op.kind == "create" and (op.topic in cluster.invisible
                                    or any(e.startswith(op.topic + " (") for e in cluster.reappeared))


def _figures(row: dict[str, Any]) -> dict[str, Any]:
    figures = recovery_figures(row["finished"]) or (None, None)
    return {"rounds": row["rounds"], "acknowledged": row["acknowledged"], "lost": row["lost"],
            "diverged": row["diverged"], "failed_rounds": row["failed_rounds"],
            "recovery_median_s": figures[0], "recovery_max_s": figures[1], "note": row["note"]}


def _print_table(table: list[dict[str, Any]]) -> None:
    header = ("configuration", "nemesis", "rounds", "acknowledged", "lost", "diverged", "failed_rounds",
              "recovery_median_s", "recovery_max_s", "note")
    widths = [max(len(h), *(len(str(r[h])) for r in table)) if table else len(h) for h in header]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for r in table:
        print("  ".join(str(r[h]).ljust(w) for h, w in zip(header, widths, strict=True)))


if __name__ == "__main__":
    sys.exit(main())
