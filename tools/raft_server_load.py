"""``kwire test-raft-server``: a controller node whose leader writes a steady load of records
and reports how fast they commit -- the counterpart of Kafka's ``kafka.tools.TestRaftServer``.

Usage (flags as Kafka's tool, plus ``--record-type``, ``--override``, ``--json`` and
``--stats-interval-ms``)::

    kwire test-raft-server --config server.properties [--throughput 5000] [--record-size 256]
                           [--record-type config|no-op] [--replica-directory-id ID]
                           [--override key=value ...] [--json]

The metadata log directory must be formatted (``kwire storage format``; ``kwire dev-cluster``
does it). While this node is the leader, its :class:`Workload` appends ``--throughput`` records
per second, each a ``--record-size``-byte record value, and measures the commit latency of each
record: from the moment it was due (record ``i`` of a leader's epoch is due ``i / throughput``
seconds after the node learned it leads) to the moment the node learned it committed (the
record's batch below the high watermark). So the latency holds the generator's own tick and any
lateness of the load too: it is at least the time from ``Node.append`` that Kafka's tool
measures. Appends linger for ``controller.quorum.append.linger.ms`` like Kafka's; the generator
wakes every :func:`tick_seconds` of that linger (1 ms at linger 0, 5 ms from linger 25 on).

Each record value is a real metadata record carrying the marker ``<epoch>.<counter>.<node id>.``
padded with ``x``, so ``kafka-dump-log.sh --cluster-metadata-decoder`` decodes the log and a
failover test can check order (within the log, ``(epoch, counter)`` strictly increases). Its type
is ``--record-type``:

* ``config`` (default): a ``ConfigRecord`` for the cluster-wide broker default
  ``kwire.test.raft.workload`` whose value is the marker; every controller replays it into its
  image, and dump-log prints the marker.
* ``no-op``: a ``NoOpRecord`` (KIP-835) whose only content is the marker in a tagged field the
  record does not define (tag 0; readers keep it as an unknown tagged field). No controller,
  kwire's or Kafka's, looks into it: the load is opaque to the state machine, as
  ``TestRaftServer``'s records are to its counting listener, so it times the commit path alone
  (``python -m tools.bench quorum`` uses it).

Output, every ``--stats-interval-ms`` (default 5000) while leader: Kafka's line
``Throughput (bytes/second): %.2f, Latency (ms): %.1f p75 %.1f p99 %.1f p999``; with ``--json``
one JSON object per line instead, keyed by ``event``:

* ``leader``: ``leader_id``, ``epoch`` -- this node learned of a new leader or epoch;
* ``high-watermark``: ``epoch``, ``high_watermark`` -- this leader's high watermark first covers
  its epoch's first batch (its LeaderChange record committed): the moment Kafka's
  ``LeaderState`` logs "High watermark set to ... for the first time for epoch";
* ``first-commit``: ``epoch``, ``offset`` -- the first record this leader appended committed;
* ``committed``: ``epoch``, ``offset``, ``counter`` -- the newest committed record of this
  leader (at most every 100 ms);
* ``stats``: ``records`` committed, ``records_per_s``, ``bytes_per_s``, ``latency_ms``
  (``p50``, ``p75``, ``p99``, ``p999``, ``max``) over the interval, and ``skipped``: records
  not offered since start because a second of load was still uncommitted;
* ``summary`` (on SIGTERM/SIGINT): the same figures over every record this node committed as
  leader since it started.

All carry ``time_ms`` (wall clock). Exit status as ``kwire server-start``.

The module is named for what it provides (the load generator :class:`Workload`, which tests and
``kwire dev-cluster`` use too); the command keeps Kafka's tool's name. The records' format is
:mod:`tools.raft_load_records`, the latency histogram :mod:`tools.latency_histogram`.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tools.latency_histogram import LatencyHistogram
from tools.raft_load_records import (
    RECORD_TYPES,
    record_template,
    workload_values,
)

__all__ = [
    "Workload",
    "add_parser",
    "run",
    "tick_seconds",
]

APPEND_BYTES = 8 * 1024
"""How many bytes of records one append of the load carries at most: a catching-up workload
appends in steps of this size rather than in one batch of the leader's 8 MiB limit."""

log = logging.getLogger("kwire.test_raft_server")

MIN_TICK_S = 0.001
MAX_TICK_S = 0.005
COMMITTED_REPORT_MS = 100


def tick_seconds(linger_ms: int) -> float:
    """How often the generator appends what is due at ``controller.quorum.append.linger.ms`` =
    ``linger_ms``: a fifth of the linger, between :data:`MIN_TICK_S` and :data:`MAX_TICK_S`.
    Records wait in the accumulator for the linger anyway, so a tick well inside it leaves the
    batches as they were, and saves the leader a wake-up per millisecond (about 0.06 of a core
    at 20,000 records/s); at linger 0 every millisecond's records are appended as they fall
    due, as Kafka's tool appends each record."""
    return min(MAX_TICK_S, max(MIN_TICK_S, linger_ms / 5000))



class Workload:
    """The leader's load generator and commit-latency meter (a ``server.node.RaftListener``).

    ``throughput`` records/s of ``record_size`` bytes while the local node leads, appended every
    ``tick_s`` seconds; latencies in whole milliseconds from each record's due time. ``emit``
    receives each report as a dict (see the module docstring).
    """

    def __init__(
        self,
        node_id: int,
        throughput: int,
        record_size: int,
        emit: Callable[[dict[str, Any]], None],
        *,
        stats_interval_ms: int = 5000,
        record_type: str = "config",
        tick_s: float = MIN_TICK_S,
    ) -> None:
        if throughput <= 0:
            raise ValueError("--throughput must be positive")
        self.node_id = node_id
        self.throughput = throughput
        self.record_size = record_size
        self.record_type = record_type
        self.template = record_template(record_size, record_type)
        self.emit = emit
        self.stats_interval_ms = stats_interval_ms
        self.tick_s = tick_s
        # the records of one append fill at most APPEND_BYTES of a batch (server.raft.accumulator)
        from server.raft.accumulator import BATCH_HEADER_BYTES, record_size_upper_bound

        self.per_append = max(1, (APPEND_BYTES - BATCH_HEADER_BYTES) // record_size_upper_bound(record_size))
        self.node: Any = None
        self.claimed_epoch: int | None = None
        self._counter = 0
        self._generated = 0
        self._start = 0.0
        self._start_ms = 0.0  # wall clock, ms: when record 0 of the epoch was due
        self._tokens: dict[int, tuple[float, int, int]] = {}  # token -> (first due ms, count, first counter)
        self._pending: deque[tuple[int, int, float, int]] = deque()  # (base, last, first due ms, first counter)
        self._first_commit_reported = False
        self._high_watermark_reported = False
        self._leading: Any = None  # a trio.Event the generator waits on while not leading
        self.max_outstanding = max(throughput, self.per_append)
        """At most one second of load appended and not yet committed: beyond it, due records are
        skipped (and counted) instead of queueing without bound behind a slow quorum."""
        self._outstanding = 0
        self._skipped = 0
        self._last_committed_report_ms = 0
        self._last_committed: tuple[int, int] | None = None  # (offset, counter)
        self._window = LatencyHistogram()
        self._window_start_ms = _now_ms()
        self._all = LatencyHistogram()  # every window before the current one

    # --------------------------------------------------------------- RaftListener

    def handle_leader_change(self, leader: Any) -> None:
        """Report the new leader and epoch; when it is this node, start a fresh load for that
        epoch (counter from 0), else stop generating. Outstanding appends are forgotten."""
        self.emit({"event": "leader", "time_ms": _now_ms(), "leader_id": leader.leader_id,
                   "epoch": leader.epoch})
        if leader.leader_id == self.node_id:
            import trio

            self.claimed_epoch = leader.epoch
            self._counter = 0
            self._generated = 0
            self._start = trio.current_time()
            self._start_ms = time.time_ns() / 1_000_000
            self._first_commit_reported = False
            self._high_watermark_reported = False
            if self._leading is not None:
                self._leading.set()
        else:
            self.claimed_epoch = None
        self._tokens.clear()
        self._pending.clear()
        self._outstanding = 0
        self._last_committed = None

    def handle_append_result(self, result: Any) -> None:
        """Note where one of this load's appends landed (its offsets), to time its commit; a
        refused append or one of another epoch only frees its place among the outstanding."""
        entry = self._tokens.pop(result.token, None)
        if entry is None:
            return
        due_ms, count, first_counter = entry
        if result.error_code != 0 or result.epoch != self.claimed_epoch:
            self._outstanding -= count
            return
        self._pending.append((result.base_offset, result.last_offset, due_ms, first_counter))

    def handle_commit(self, batch: Any) -> None:
        """Record the commit latency (ms since its due time) of every record of this epoch's
        load up to ``batch``'s last offset; report the epoch's first committed batch, the load's
        first commit, and the newest committed record at most every 100 ms."""
        if self.claimed_epoch is None or batch.epoch != self.claimed_epoch:
            return
        now = _now_ms()
        if not self._high_watermark_reported:
            self._high_watermark_reported = True
            self.emit({"event": "high-watermark", "time_ms": now, "epoch": self.claimed_epoch,
                       "high_watermark": batch.last_offset + 1})
        if batch.is_control:
            return
        pending = self._pending
        step_ms = 1000 / self.throughput
        while pending and pending[0][1] <= batch.last_offset:
            base, last, due_ms, first_counter = pending.popleft()
            count = last - base + 1
            # the first record's latency; each next one was due a step later
            self._window.add_run(float(now - due_ms), count, step_ms)
            self._outstanding -= count
            self._last_committed = (last, first_counter + count - 1)
            if not self._first_commit_reported:
                self._first_commit_reported = True
                self.emit({"event": "first-commit", "time_ms": now, "epoch": self.claimed_epoch,
                           "offset": base})
        if self._last_committed is not None and now - self._last_committed_report_ms >= COMMITTED_REPORT_MS:
            self._last_committed_report_ms = now
            offset, counter = self._last_committed
            self.emit({"event": "committed", "time_ms": now, "epoch": self.claimed_epoch,
                       "offset": offset, "counter": counter})

    # --------------------------------------------------------------- tasks

    async def run(self, node: Any) -> None:
        """Generate records while ``node`` leads and report stats; runs until cancelled. While
        another node leads, the generator sleeps until this one is elected (no tick)."""
        import trio

        self.node = node
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._report_loop)
            while True:
                if self.claimed_epoch is None:
                    self._leading = trio.Event()
                    await self._leading.wait()
                    continue
                await trio.sleep(self.tick_s)
                if self.claimed_epoch is not None:
                    self._generate(trio.current_time())

    def _generate(self, now: float) -> None:
        due = int((now - self._start) * self.throughput) - self._generated
        if due <= 0:
            return
        if self._outstanding >= self.max_outstanding:
            self._generated += due
            self._skipped += due
            return
        epoch = self.claimed_epoch
        assert epoch is not None
        template, node_id = self.template, self.node_id
        while due > 0:
            n = min(due, self.per_append)
            first = self._counter
            values = workload_values(template, epoch, first, n, node_id)
            token = self.node.append(values, epoch)
            self._tokens[token] = (self._start_ms + self._generated * 1000 / self.throughput, n, first)
            self._counter += n
            self._generated += n
            self._outstanding += n
            due -= n

    async def _report_loop(self) -> None:
        import trio

        while True:
            await trio.sleep(self.stats_interval_ms / 1000)
            self.report_window()

    def report_window(self) -> None:
        """Emit a ``stats`` report over the records committed since the last one, and start a
        new window; nothing when the window is empty and this node does not lead."""
        now = _now_ms()
        elapsed_s = max(1e-3, (now - self._window_start_ms) / 1000)
        window = self._window
        self._window = LatencyHistogram()
        self._all.merge(window)
        self._window_start_ms = now
        if not window and self.claimed_epoch is None:
            return
        self.emit(self._stats("stats", now, window, elapsed_s))

    def summary(self, elapsed_s: float) -> dict[str, Any]:
        """The ``summary`` report: every record committed as leader since start, rates over
        ``elapsed_s`` seconds."""
        every = LatencyHistogram()
        every.merge(self._all)
        every.merge(self._window)
        return self._stats("summary", _now_ms(), every, elapsed_s)

    def _stats(self, event: str, now: int, latencies: LatencyHistogram, elapsed_s: float) -> dict[str, Any]:
        records = len(latencies)
        return {
            "event": event,
            "time_ms": now,
            "epoch": self.claimed_epoch,
            "records": records,
            "skipped": self._skipped,
            "records_per_s": records / elapsed_s,
            "bytes_per_s": records * self.record_size / elapsed_s,
            "latency_ms": latencies.percentiles(),
        }


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def kafka_line(report: dict[str, Any]) -> str | None:
    """Kafka TestRaftServer's summary line for a ``stats`` report."""
    if report["event"] != "stats":
        return None
    lat = report["latency_ms"]
    return (
        f"Throughput (bytes/second): {report['bytes_per_s']:.2f}, Latency (ms): "
        f"{lat['p75']:.1f} p75 {lat['p99']:.1f} p99 {lat['p999']:.1f} p999"
    )


# ------------------------------------------------------------------------------ command


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "test-raft-server", help="a controller whose leader writes a steady load (Kafka's TestRaftServer)"
    )
    p.add_argument("--config", required=True, metavar="server.properties")
    p.add_argument("--throughput", type=int, default=5000, metavar="records/sec",
                   help="records per second the leader writes (default 5000)")
    p.add_argument("--record-size", type=int, default=256, metavar="bytes",
                   help="the size of each record value (default 256)")
    p.add_argument("--record-type", choices=RECORD_TYPES, default="config",
                   help="config: ConfigRecords the controller replays (default); no-op: NoOpRecords "
                        "carrying the payload, opaque to every controller as TestRaftServer's records")
    p.add_argument("--replica-directory-id", metavar="ID",
                   help="the directory id of the replica (checked against meta.properties)")
    p.add_argument("--override", action="append", default=[], metavar="key=value",
                   help="a property that overrides the file's value (repeatable)")
    p.add_argument("--json", action="store_true", help="one JSON report per line")
    p.add_argument("--stats-interval-ms", type=int, default=5000, metavar="ms",
                   help="how often to print throughput and latency (default 5000)")


def run(args: argparse.Namespace) -> int:
    import trio

    from server.config import ConfigError, load_config
    from server.node import Node, NodeStartupError
    from server.node.fatal import name_fatal_level, run_or_halt
    from storage.errors import FormatError, StorageError

    name_fatal_level()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")

    def emit(report: dict[str, Any]) -> None:
        if args.json:
            line: str | None = json.dumps(report, separators=(",", ":"))
        else:
            line = kafka_line(report)
        if line is not None:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    try:
        config = load_config(args.config, list(args.override))
        if args.replica_directory_id is not None:
            from storage.meta_properties import read_meta_properties

            meta = read_meta_properties(config.metadata_log_dir)
            if meta is None or str(meta.directory_id) != args.replica_directory_id:
                raise FormatError(
                    f"--replica-directory-id {args.replica_directory_id} is not the directory id "
                    f"of {Path(config.metadata_log_dir)}"
                )
        workload = Workload(config.node_id, args.throughput, args.record_size, emit,
                            stats_interval_ms=args.stats_interval_ms, record_type=args.record_type,
                            tick_s=tick_seconds(config.controller_quorum_append_linger_ms))
        started = time.monotonic()
        status = run_or_halt(lambda: trio.run(_serve, config, workload, Node), config, log)
        if status:
            return status
        if args.json:
            emit(workload.summary(time.monotonic() - started))
    except ValueError as exc:
        print(f"kwire test-raft-server: {exc}", file=sys.stderr)
        return 1
    except (ConfigError, FormatError, StorageError, NodeStartupError, OSError) as exc:
        print(f"kwire test-raft-server: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    return 0


async def _serve(config: Any, workload: Workload, node_class: Any) -> None:
    import trio

    node = node_class(config, listener=workload)
    async with trio.open_nursery() as nursery:
        await nursery.start(node.run)
        log.info("kwire test raft server %d serving %s", config.node_id,
                 ", ".join(f"{e.name}://{e.host}:{e.port}" for e in node.endpoints))
        workload_scope = trio.CancelScope()

        async def run_workload() -> None:
            with workload_scope:
                await workload.run(node)

        nursery.start_soon(run_workload)

        async def on_signal() -> None:
            with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    workload_scope.cancel()
                    await node.shutdown()
                    return

        nursery.start_soon(on_signal)
