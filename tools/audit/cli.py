"""``kwire audit DIR...``: audit the metadata logs of a quorum's node directories with Spark.

Exit status: 0 when no invariant is violated (warnings such as a torn tail are allowed), 1 on
any violation (each printed as ``VIOLATION <invariant> node=<node> offset=<offset>: <detail>``),
2 on a usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

from tools.audit.spark import spark_session


def add_parser(subparsers) -> argparse.ArgumentParser:  # noqa: ANN001 - argparse's private type
    """Add the ``audit`` subcommand to ``subparsers``; its handler is :func:`run`."""
    parser = subparsers.add_parser(
        "audit",
        help="check the metadata logs of a quorum's node directories (PySpark)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    configure(parser)
    parser.set_defaults(func=run)
    return parser


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dirs", nargs="+", metavar="DIR",
                        help="node directory (metadata.log.dir or its __cluster_metadata-0), "
                             "optionally name=DIR")
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    parser.add_argument("--out", default=None, metavar="REPORT_DIR",
                        help="write summary.json, violations.jsonl, warnings.jsonl and plots here")
    parser.add_argument("--json", action="store_true", help="print the JSON summary on stdout")
    parser.add_argument("--high-watermark", type=int, default=None,
                        help="the quorum's high watermark (DescribeQuorum); without it the "
                             "committed point of two replicas is the smaller log end offset")
    parser.add_argument("--lagging-ok", action="store_true",
                        help="with --high-watermark, only the last leader and a majority must "
                             "hold the committed prefix")
    parser.add_argument("--split-bytes", type=int, default=None,
                        help="read segments larger than this as several Spark partitions")
    parser.add_argument("--max-violations", type=int, default=10_000)
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


class StageProgress:
    """Prints Spark stage progress to stderr once a second while jobs run."""

    def __init__(self, spark, stream=sys.stderr) -> None:  # noqa: ANN001
        self._tracker = spark.sparkContext.statusTracker()
        self._stream = stream
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._last = ""

    def __enter__(self) -> StageProgress:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)

    def _loop(self) -> None:
        while not self._stop.wait(1.0):
            try:
                parts = []
                for stage_id in self._tracker.getActiveStageIds():
                    info = self._tracker.getStageInfo(stage_id)
                    if info is not None:
                        parts.append(f"stage {stage_id}: {info.numCompletedTasks}/{info.numTasks} tasks")
                line = "; ".join(parts)
                if line and line != self._last:
                    print(f"[audit]   {line}", file=self._stream, flush=True)
                    self._last = line
            except Exception:  # the JVM may be shutting down
                return


def run(args: argparse.Namespace, spark=None) -> int:  # noqa: ANN001
    """Run the audit for parsed ``args``; returns the exit status. A caller may pass its own
    SparkSession (left running); otherwise one is started for ``--master`` and stopped."""
    from tools.audit.jobs import run_audit
    from tools.audit.report import summary, write_report
    from tools.audit.scan import parse_node_dirs

    def progress(message: str) -> None:
        if not args.quiet:
            print(f"[audit] {message}", file=sys.stderr, flush=True)

    try:
        nodes = parse_node_dirs(args.dirs)
    except ValueError as exc:
        print(f"kwire audit: {exc}", file=sys.stderr)
        return 2
    missing = [pdir for _, pdir in nodes if not os.path.isdir(pdir)]
    if missing:
        print(f"kwire audit: no metadata log directory at {', '.join(missing)}", file=sys.stderr)
        return 2
    started = time.monotonic()
    own_session = spark is None
    if own_session:
        progress(f"starting Spark ({args.master})")
        spark = spark_session(args.master)
    try:
        if args.quiet:
            result = run_audit(spark, nodes, high_watermark=args.high_watermark,
                               lagging_ok=args.lagging_ok, split_bytes=args.split_bytes,
                               max_violations=args.max_violations)
        else:
            with StageProgress(spark):
                result = run_audit(spark, nodes, high_watermark=args.high_watermark,
                                   lagging_ok=args.lagging_ok, split_bytes=args.split_bytes,
                                   max_violations=args.max_violations, progress=progress)
    finally:
        if own_session:
            spark.stop()
    elapsed = time.monotonic() - started
    if args.out:
        for path in write_report(result, args.out, elapsed):
            progress(f"wrote {path}")
    for w in result.warnings:
        print(f"WARNING {w['invariant']} node={w['node']} offset={w['offset']}: {w['detail']}",
              file=sys.stderr)
    for v in result.violations:
        print(f"VIOLATION {v['invariant']} node={v['node']} offset={v['offset']}: {v['detail']}",
              file=sys.stderr)
    if args.json:
        print(json.dumps(summary(result, elapsed), indent=2, sort_keys=True))
    else:
        total = sum(result.violation_counts.values())
        print(f"audited {len(result.nodes)} nodes, {result.rows} rows in {elapsed:.1f}s: "
              f"{'OK' if result.ok else f'{total} violations'}, {len(result.warnings)} warnings")
    return 0 if result.ok else 1


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kwire audit", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    configure(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kwire audit", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    configure(parser)
    return run(parser.parse_args(argv))
