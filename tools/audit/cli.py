"""``kwire audit DIR...``: audit a cluster's directories.

Each DIR (a directory, ``name=DIR``, or a glob) is told apart by what it holds:

* a metadata log directory (``__cluster_metadata-0``, a controller's): its metadata log is
  audited with Spark (Raft's safety properties across the quorum's copies);
* a broker log directory (a directory of ``log.dirs``: topic-partition directories, offset
  checkpoints): every partition's copies are audited against each other and against the
  metadata log's history (``--metadata``, else the furthest-reaching metadata log among the
  DIRs, a broker's own copy included): agreement below the committed point, leader-epoch
  lineage, acknowledged records lost to an unclean election or a lost disk, stray and orphan
  directories, corrupt batches.

Every directory's ``meta.properties`` gives its node id (a broker log directory's broker id),
also when it is named ``name=DIR``; directories whose ids disagree with each other or with their
names are findings of their own (``duplicate_node_id``, ``node_name_mismatch``,
``cluster_id_mismatch``).

``--json`` prints the summary with the violations and warnings themselves and the replica
audit's partition table (a row per copy of a partition), each capped at ``--json-limit``
entries with the number left out; ``--out`` writes them all, the plots, and an ``index.html``
that opens from the file system.

Exit status: 0 when no invariant is violated (warnings such as a torn tail are allowed), 1 on
any violation (each printed as ``VIOLATION <invariant> ...: <detail>``), 2 on a usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

from tools.audit.broker_dirs import AuditDir, classify_dirs
from tools.audit.replica_report import JSON_LIMIT
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
                        help="a metadata log directory (or its __cluster_metadata-0) or a broker log "
                             "directory, optionally name=DIR, or a glob")
    parser.add_argument("--metadata", default=None, metavar="DIR",
                        help="the metadata log directory whose history the replica audit judges by")
    parser.add_argument("--master", default=None,
                        help="Spark master: local[N], or spark://HOST:PORT for a standalone cluster (the "
                             "metadata-log audit's default is local[*]; the replica audit runs in this "
                             "process unless a master is given)")
    parser.add_argument("--out", default=None, metavar="REPORT_DIR",
                        help="write the report here: the summary, the findings and (replica audit) the "
                             "partition table as JSON lines, the plots, and an index.html linking them")
    parser.add_argument("--json", action="store_true",
                        help="print the JSON summary on stdout, with the findings and the partition table")
    parser.add_argument("--json-limit", type=int, default=JSON_LIMIT, metavar="N",
                        help=f"--json carries at most N violations, N warnings and N partition-table rows, "
                             f"and says how many it left out (default {JSON_LIMIT}; 0: no limit)")
    parser.add_argument("--high-watermark", type=int, default=None,
                        help="the quorum's high watermark (DescribeQuorum); without it the "
                             "committed point of two replicas is the smaller log end offset")
    parser.add_argument("--lagging-ok", action="store_true",
                        help="with --high-watermark, only the last leader and a majority must "
                             "hold the committed prefix")
    parser.add_argument("--split-bytes", type=int, default=None,
                        help="read segments larger than this as several Spark partitions (the replica "
                             "audit also packs small partitions into tasks of about this size; default: "
                             "four tasks per core, 64 MiB to 1 GiB each)")
    parser.add_argument("--deep", action="store_true",
                        help="replica audit: also decompress and decode every batch's records (every codec, "
                             "control markers); by default batches are checked by their CRC")
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

    def progress(message: str) -> None:
        if not args.quiet:
            print(f"[audit] {message}", file=sys.stderr, flush=True)

    try:
        dirs = classify_dirs(args.dirs)
        history_dirs = [d.metadata_dir for d in dirs if d.metadata_dir] if args.metadata is None else [
            d.metadata_dir for d in classify_dirs([args.metadata]) if d.metadata_dir]
    except ValueError as exc:
        print(f"kwire audit: {exc}", file=sys.stderr)
        return 2
    if any(d.broker for d in dirs):
        return _run_replicas(args, dirs, history_dirs, progress, spark)
    nodes = [(d.name, d.metadata_dir) for d in dirs if d.metadata_dir is not None]
    started = time.monotonic()
    own_session = spark is None
    if own_session:
        progress(f"starting Spark ({args.master or 'local[*]'})")
        spark = spark_session(args.master or "local[*]")
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
    if getattr(args, "identity", True):  # not when the replica audit has reported them
        _add_identity_findings(result, dirs)
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
        print(json.dumps(summary(result, elapsed, args.json_limit), indent=2, sort_keys=True))
    else:
        total = sum(result.violation_counts.values())
        print(f"audited {len(result.nodes)} nodes, {result.rows} rows in {elapsed:.1f}s: "
              f"{'OK' if result.ok else f'{total} violations'}, {len(result.warnings)} warnings")
    return 0 if result.ok else 1


def _run_replicas(args: argparse.Namespace, dirs: list[AuditDir], history_dirs: list[str],
                  progress, spark) -> int:  # noqa: ANN001
    """The replica audit of the broker log directories among ``dirs`` (in this process, or on
    Spark when a master or a session is given); the metadata-log audit too, of those that are
    metadata log directories only (controllers'), when there are any."""
    from tools.audit.history import newest_history
    from tools.audit.replica_report import json_summary, write_replica_report
    from tools.audit.replicas import audit_replicas, format_finding

    own_session = args.master is not None and spark is None
    if own_session:
        progress(f"starting Spark ({args.master})")
        spark = spark_session(args.master)
    started = time.monotonic()  # after Spark's start-up
    try:
        history = newest_history(history_dirs)
        progress("no metadata log: checks against the metadata are skipped" if history is None
                 else f"metadata history from {history.source} (up to offset {history.end_offset})")
        if spark is None:
            result = audit_replicas(dirs, history, progress, deep=args.deep)
        else:
            from tools.audit.replica_spark import audit_replicas_spark

            result = audit_replicas_spark(spark, dirs, history, args.split_bytes, progress, deep=args.deep)
    finally:
        if own_session:
            spark.stop()
            spark = None
    elapsed = time.monotonic() - started
    controllers = [d for d in dirs if not d.broker]
    if args.out:
        for path in write_replica_report(result, args.out, elapsed,
                                         os.path.join("metadata-log", "index.html") if controllers else None):
            progress(f"wrote {path}")
    for finding in result.warnings + result.violations:
        print(format_finding(finding), file=sys.stderr)
    status = 0 if result.ok else 1
    summary: dict = {"replicas": json_summary(result, elapsed, args.json_limit)}
    if controllers:  # their own lines and report; the JSON carries their exit status
        inner = argparse.Namespace(**{**vars(args), "dirs": [f"{d.name}={d.path}" for d in controllers],
                                      "json": False, "identity": False,
                                      "out": None if args.out is None else os.path.join(args.out, "metadata-log")})
        metadata_status = run(inner, spark)
        summary["metadata_log"] = {"ok": metadata_status == 0, "nodes": [d.name for d in controllers]}
        status = max(status, metadata_status)
    if args.json:
        print(json.dumps(summary, indent=2, sort_keys=True))
    else:
        print(f"audited {len(result.partitions)} partitions, {result.batches} batches "
              f"({result.bytes_read / 2**20:.1f} MiB) in {elapsed:.1f}s: "
              f"{'OK' if result.ok else f'{len(result.violations)} violations'}, {len(result.warnings)} warnings")
    return status


def _add_identity_findings(result, dirs: list[AuditDir]) -> None:  # noqa: ANN001 - a jobs.AuditResult
    """The metadata-log audit's copy of :func:`tools.audit.identity.identity_findings` for
    ``dirs``, in its own finding shape."""
    from tools.audit.identity import identity_findings

    for f in identity_findings(dirs):
        row = {"invariant": f.invariant, "node": f.node, "offset": None, "other_node": None, "detail": f.detail}
        if f.severity == "violation":
            result.violations.append(row)
            result.violation_counts[f.invariant] = result.violation_counts.get(f.invariant, 0) + 1
        else:
            result.warnings.append(row)


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
