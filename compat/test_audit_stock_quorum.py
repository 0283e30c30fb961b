"""``kwire audit`` over the metadata logs of a stock 3-controller Kafka quorum, for the newest
pinned release in ``make test`` and every one in ``make nightly``
(:func:`compat.kafka.newest_or_every_release`).

Three stock KRaft controllers (``process.roles=controller``, ``kafka.Kafka`` from the pinned
jars) are formatted with the release's own ``kafka-storage format`` and run on loopback ports:

* 4.x: a dynamic quorum (KIP-853), ``--initial-controllers 1@host:port:dirid,...`` and
  ``controller.quorum.bootstrap.servers`` -- kraft.version 1, so the logs carry KRaftVersion and
  Voters control records and the bootstrap checkpoint holds the voter set;
* 3.9: a static quorum, ``controller.quorum.voters`` -- kraft.version 0.

During the run, stock ``kafka-metadata-quorum --bootstrap-controller <all three> describe
--status`` (MetadataQuorumCommand; for 4.4 the 4.3.1 tools, see tools/stock_kafka.py) is run once
per leader epoch and its LeaderId, LeaderEpoch and HighWatermark recorded (in between, kwire's
own DescribeQuorum client, tools.quorum_client, polls cheaply for the next leader or for the
followers to catch up). Two leader changes
are forced: the first leader is killed with SIGKILL (an unclean stop: its unreplicated tail must
be truncated when it rejoins) and restarted, then the second leader is stopped with SIGTERM (a
graceful resignation, EndQuorumEpoch) and restarted; the stock tool samples each new epoch while
the stopped controller restarts. Once the restarted controllers have caught up, a last status is
recorded, the followers are stopped (together), then the leader (so no deposed leader keeps an
uncommitted tail), and the audit runs over the three directories on the shared Spark
session (tests/audit/session.py) with the strict committed point (``min-leo``: every pair of
replicas must agree on everything both hold).

Asserted: no violation and no warning; every (epoch, leader) the stock tool printed is an epoch of
the audit's timeline with that leader, starting below the high watermark the tool printed in that
epoch (a KRaft leader exposes a high watermark only past its epoch's start offset); every
replica's log reaches the last high watermark the tool printed; each of those epochs' LeaderChange
names the three controllers as voters, and (4.x) the voter set the timeline reads from the
bootstrap checkpoint is the three controllers.

Kafka's logs are the reference: a violation found here is a bug of the audit.

The quorum runs of all releases start together when the module's first test starts
(:func:`stock_runs`), and the controllers' JVMs compile with C1 only (:data:`CONTROLLER_JVM`).
Cost (2 shared cores, load 2-3): 25-28 s per release for the quorum alone (three formats, five
controller starts, four stock tool runs; about 30 CPU-s), about 42 s for both at once; then 2 s
per audit on the warm shared Spark session. Run alone, Spark's start-up overlaps the quorum
runs, and the first audit of the session takes about 15 s more.
Under CI=true a missing Java, jar or pyspark fails the test instead of skipping it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio

from compat.harness import KafkaRelease, free_port
from compat.kafka import kafka_problem, newest_or_every_release
from kwire.uuid import Uuid
from tests.audit.session import shared_spark
from tools.quorum_client import QuorumView, describe

pytestmark = [pytest.mark.compat, pytest.mark.spark, pytest.mark.slow]

NODES = (1, 2, 3)
CLUSTER_ID = str(Uuid(b"kwire-audit-test"))  # any fixed 16 bytes: Kafka's base64 text form
PARTITION = "__cluster_metadata-0"
CONTROLLER_JVM = ["-XX:TieredStopAtLevel=1"]
"""Extra JVM flags of the controllers: C1 only. A short run on a small machine never pays back
C2's compilations; they were about a third of the controllers' CPU time."""


@pytest.fixture(scope="module")
def spark() -> Any:
    return shared_spark()


@dataclass
class Sample:
    """One ``describe --status`` of the stock tool."""

    leader: int
    epoch: int
    high_watermark: int
    text: str


class StockQuorum:
    """Three stock controllers of one release in ``root/node<N>`` (log dirs) with their logs in
    ``root/node<N>.out``."""

    def __init__(self, kafka: KafkaRelease, root: Path) -> None:
        self.kafka = kafka
        self.root = root
        self.ports = {n: free_port() for n in NODES}
        self.dynamic = kafka.at_least(4)
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.bootstrap = ",".join(f"127.0.0.1:{self.ports[n]}" for n in NODES)
        root.mkdir(parents=True, exist_ok=True)
        for n in NODES:
            lines = [
                "process.roles=controller",
                f"node.id={n}",
                "controller.listener.names=CONTROLLER",
                f"listeners=CONTROLLER://127.0.0.1:{self.ports[n]}",
                "listener.security.protocol.map=CONTROLLER:PLAINTEXT",
                f"log.dirs={self.log_dir(n)}",
                "controller.quorum.election.timeout.ms=1000",
                "controller.quorum.fetch.timeout.ms=2000",
            ]
            if self.dynamic:
                lines.append(f"controller.quorum.bootstrap.servers={self.bootstrap}")
            else:
                lines.append("controller.quorum.voters=" + ",".join(
                    f"{m}@127.0.0.1:{self.ports[m]}" for m in NODES))
            self.config(n).write_text("\n".join(lines) + "\n")

    def log_dir(self, n: int) -> Path:
        return self.root / f"node{n}"

    def config(self, n: int) -> Path:
        return self.root / f"controller{n}.properties"

    def format(self) -> None:
        """``kafka-storage format`` of the three log dirs, in parallel."""
        args = ["format", "--cluster-id", CLUSTER_ID]
        if self.dynamic:
            initial = ",".join(f"{n}@127.0.0.1:{self.ports[n]}:{Uuid.random()}" for n in NODES)
            args += ["--initial-controllers", initial]
        with ThreadPoolExecutor(len(NODES)) as pool:
            done = list(pool.map(
                lambda n: self.kafka.run_tool("storage", [*args, "--config", str(self.config(n))]),
                NODES))
        assert all(r.returncode == 0 for r in done)

    def start(self, n: int) -> None:
        """Start controller ``n`` (Kafka's server JVM flags, but C1 only: see CONTROLLER_JVM)."""
        with (self.root / f"node{n}.out").open("ab") as out:
            self.procs[n] = self.kafka.start(
                "kafka.Kafka", [self.config(n)], jvm_args=CONTROLLER_JVM, stdout=out,
                stderr=subprocess.STDOUT)

    def stop(self, n: int, sig: int = signal.SIGTERM, timeout_s: float = 60.0) -> None:
        self.stop_many([n], sig, timeout_s)

    def stop_many(self, ns: list[int], sig: int = signal.SIGTERM, timeout_s: float = 60.0) -> None:
        """Send ``sig`` to controllers ``ns`` at once, then wait for each (SIGKILL after
        ``timeout_s``)."""
        procs = [self.procs.pop(n) for n in ns]
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(sig)
        for proc in procs:
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def stop_all(self) -> None:
        self.stop_many(list(self.procs))

    def view(self) -> QuorumView | None:
        """kwire's DescribeQuorum through the running controllers (cheap, for waiting), or None
        while no leader is known or reachable."""
        live = ",".join(f"127.0.0.1:{self.ports[n]}" for n in self.procs)
        try:
            view = trio.run(describe, live, 5.0)
        except Exception:  # not listening yet, no active controller yet, a timed-out request
            return None
        return view if view.partition.leader_id >= 0 else None

    def wait(self, what: str, ok: Any, timeout_s: float = 90.0) -> QuorumView:
        """Poll :meth:`view` until ``ok(view)``; fails when a controller exits or on timeout."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for n, proc in self.procs.items():
                if proc.poll() is not None:
                    raise AssertionError(f"controller {n} exited with {proc.returncode}:\n"
                                         + self.output(n))
            view = self.view()
            if view is not None and ok(view):
                return view
            time.sleep(0.3)
        raise AssertionError(f"timed out waiting for {what}\n"
                             + "\n".join(self.output(n) for n in NODES))

    def output(self, n: int) -> str:
        path = self.root / f"node{n}.out"
        text = path.read_text(errors="replace") if path.exists() else ""
        return f"--- controller {n} ---\n{text[-3000:]}"

    def stock_status(self) -> Sample:
        """Stock ``kafka-metadata-quorum --bootstrap-controller <all> describe --status``."""
        out = self.kafka.run_tool(
            "metadata-quorum", ["--bootstrap-controller", self.bootstrap, "describe", "--status"],
            timeout=120.0,
        ).stdout
        fields = {}
        for line in out.splitlines():
            name, sep, value = line.partition(":")
            if sep:
                fields[name.strip()] = value.strip()
        assert fields["ClusterId"] == CLUSTER_ID, out
        return Sample(int(fields["LeaderId"]), int(fields["LeaderEpoch"]),
                      int(fields["HighWatermark"]), out)


def _elected(view: QuorumView, min_epoch: int = 0) -> bool:
    p = view.partition
    return p.leader_epoch >= min_epoch and p.leader_id >= 0 and p.high_watermark > 0


def _caught_up(view: QuorumView) -> bool:
    """Every voter has fetched up to the current high watermark."""
    p = view.partition
    return p.high_watermark > 0 and len(p.current_voters) == len(NODES) and all(
        v.log_end_offset >= p.high_watermark for v in p.current_voters)


def run_stock_quorum(kafka: KafkaRelease, root: Path) -> tuple[StockQuorum, list[Sample]]:
    """Run a quorum of ``kafka`` in ``root`` through two leader changes and stop it; returns it
    (stopped) and the stock tool's samples, one per leader epoch plus a last one. Raises
    AssertionError when a controller exits or a step times out (see :meth:`StockQuorum.wait`)."""
    quorum = StockQuorum(kafka, root)
    samples: list[Sample] = []
    # the stock tool (a JVM start, 1-2 s) samples a new epoch while the stopped leader restarts
    with ThreadPoolExecutor(1) as tool:
        try:
            quorum.format()
            for n in NODES:
                quorum.start(n)
            quorum.wait("a first leader", _elected)
            samples.append(quorum.stock_status())
            for sig in (signal.SIGKILL, signal.SIGTERM):
                leader, epoch = samples[-1].leader, samples[-1].epoch
                quorum.stop(leader, sig)
                quorum.wait(f"a leader after {leader} stopped",
                            lambda v, e=epoch: _elected(v, e + 1))
                status = tool.submit(quorum.stock_status)
                quorum.start(leader)
                quorum.wait(f"controller {leader} to catch up", _caught_up)
                samples.append(status.result())
            samples.append(quorum.stock_status())
            view = quorum.wait("all voters caught up before the stop", _caught_up)
            leader = view.partition.leader_id
            quorum.stop_many([n for n in NODES if n != leader])
            quorum.stop(leader)
        finally:
            quorum.stop_all()
    return quorum, samples


@pytest.fixture(scope="module")
def stock_runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Future[tuple[StockQuorum, list[Sample]]]]]:
    """``{version: future of run_stock_quorum(...)}`` for the releases the collected tests of
    this module ask for, all started at once, each in its own thread, when the first of those
    tests starts: a run is mostly JVM start-ups, elections and stock tool runs, so the releases
    overlap well. Releases Kafka cannot run here are left out (their tests fail or skip through
    the ``each_kafka`` fixture). Waits for every run (each stops its controllers) at the end."""
    versions = sorted({
        item.callspec.params["kafka_version"]
        for item in request.session.items
        if getattr(item, "module", None) is request.module
        and "kafka_version" in getattr(getattr(item, "callspec", None), "params", {})
    })
    runnable = [v for v in versions if kafka_problem(v) is None]
    pool = ThreadPoolExecutor(max(1, len(runnable)))
    try:
        yield {
            v: pool.submit(run_stock_quorum, KafkaRelease(v),
                           tmp_path_factory.mktemp(f"kafka-{v}") / "quorum")
            for v in runnable
        }
    finally:
        pool.shutdown(wait=True)


@pytest.fixture
def stock_run(
    each_kafka: KafkaRelease, stock_runs: dict[str, Future[tuple[StockQuorum, list[Sample]]]]
) -> tuple[StockQuorum, list[Sample]]:
    """This release's run (see :func:`stock_runs`): the stopped quorum and the stock samples."""
    quorum, samples = stock_runs[each_kafka.version].result()
    for s in samples:
        print(f"stock describe --status: leader {s.leader} epoch {s.epoch} "
              f"high watermark {s.high_watermark}")
    return quorum, samples


@pytest.mark.parametrize("kafka_version", newest_or_every_release())
def test_audit_passes_on_stock_quorum_logs_and_matches_the_stock_timeline(
    stock_run: tuple[StockQuorum, list[Sample]], spark: Any
) -> None:
    from tools.audit.jobs import run_audit

    quorum, samples = stock_run
    epochs_seen = {s.epoch for s in samples}
    assert len(epochs_seen) >= 3, [s.text for s in samples]  # two leader changes happened

    nodes = [(f"node{n}", str(quorum.log_dir(n) / PARTITION)) for n in NODES]
    result = run_audit(spark, nodes)
    assert result.violations == [], result.violations[:10]
    assert result.warnings == [], result.warnings[:10]
    assert result.commit_basis == "min-leo" and result.invalid_rows == 0
    assert [n["node_id"] for n in result.nodes] == list(NODES)  # read from meta.properties

    timeline = {e["epoch"]: e for e in result.timeline["epochs"]}
    for s in samples:
        epoch = timeline.get(s.epoch)
        assert epoch is not None, (s.text, sorted(timeline))
        assert (epoch["leader"], epoch["leaders"]) == (s.leader, [s.leader]), (s.text, epoch)
        assert epoch["start_offset"] < s.high_watermark, (s.text, epoch)
        assert epoch["voters"] == list(NODES)
    last = samples[-1]
    assert all(n["log_end_offset"] >= last.high_watermark for n in result.nodes), (
        last.text, result.nodes)
    assert all(n["last_epoch"] >= last.epoch for n in result.nodes), result.nodes
    assert max(timeline) >= last.epoch

    first = result.timeline["epochs"][0]
    assert first["start_offset"] == 0 and first["records"] > 0
    assert first["record_types"].get("LEADER_CHANGE") == 1
    if quorum.dynamic:
        # the bootstrap checkpoint written by --initial-controllers holds the voter set
        assert result.timeline["voter_changes"][0]["voters"] == list(NODES)
        assert result.timeline["voter_changes"][0]["source"] == "snapshot"
    for n in NODES:
        assert os.path.isfile(quorum.log_dir(n) / "meta.properties")
