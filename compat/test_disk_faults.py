"""Disk faults on real processes, kwire beside stock Kafka under the same fault.

A single-voter quorum writes a steady load (``kwire test-raft-server``; Kafka's
``kafka.tools.TestRaftServer`` of the newest release as the control, of every pinned release
with ``KWIRE_FAULT_ALL_CONFIGS=1`` in ``make nightly``) until its metadata log directory fails:

* **a full disk**: the directory is a 1 MiB tmpfs (``compat/faults/disk.py``), so a write
  fails with ENOSPC;
* **fsync failing with EIO**: ``compat/faults/fsync_fault.c`` is preloaded and tripped once the
  load has committed; the failed fsync also drops what it could not write back. Its positive
  control: kwire with the test-only ``kwire.unsafe.test.fsync.interval.ms`` acknowledges
  before it fsyncs, and the check below must report a lost acknowledged offset.

Both stop: Kafka halts with status 1 on a raft I/O error (``ProcessTerminatingFaultHandler``),
and so must kwire, with one FATAL line that names the directory and the error, and no
traceback. Then the fault is healed (the tmpfs grown, the trigger removed) and the same
directory restarts: it recovers and commits again. For kwire the check is that nothing
acknowledged was lost: every record the workload reported committed before the fault is in the
log at its offset, with its epoch and counter, and the workload's records stay in order. Stock
TestRaftServer reports no committed offsets, so for Kafka the check is that its log is whole
(every batch's CRC, offsets contiguous) and grew after the restart.

And **a flipped bit**: one bit of a committed batch in a killed follower's log, found by its CRC
on restart, the log cut there and fetched again from the leader (three kwire voters; three
stock controllers of the newest release as the control).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from compat import kafka as _kafka
from compat.faults.disk import FsyncFault, fsync_fault_library, small_tmpfs
from compat.harness import (
    ELECTION_BOUND_S,
    PARTITION,
    REPO_DIR,
    START_TIMEOUT_S,
    KafkaRelease,
    Quorum,
    batches_below,
    controller_properties,
    format_kwire,
    free_port,
    log_batches,
    newest_pinned_release,
    segment_files,
    wait_until,
)
from kwire.uuid import Uuid
from storage.batch_scan import scan_batches
from tests.quorum_run import read_node_log
from tools.bench.quorum import kafka_server_properties

pytestmark = pytest.mark.compat

TMPFS_BYTES = 1024 * 1024
GROWN_BYTES = 64 * 1024 * 1024
THROUGHPUT = 5_000  # records/s: the 1 MiB disk fills within a second
RECORD_SIZE = 256
HALT_TIMEOUT_S = 60.0
RECOVERY_TIMEOUT_S = 60.0
KAFKA_TOPIC_DIR = "__raft_performance_test-0"  # TestRaftServer's partition


# -- kwire ------------------------------------------------------------------------------------

def _start_kwire(props: Path, out: Path, err: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with out.open("ab") as stdout, err.open("ab") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "tools.cli", "test-raft-server", "--config", str(props), "--json",
             "--throughput", str(THROUGHPUT), "--record-size", str(RECORD_SIZE),
             "--stats-interval-ms", "60000"],
            cwd=REPO_DIR, stdout=stdout, stderr=stderr, env=env,
        )


def _events(out: Path, kind: str) -> list[dict[str, Any]]:
    events = []
    for line in out.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("{"):
            event = json.loads(line)
            if event.get("event") == kind:
                events.append(event)
    return events


def _kwire_halts_and_recovers(tmp_path: Path, data: Path, trip: Callable[[], None] | None,
                              env: dict[str, str] | None, heal: Callable[[], None],
                              extra: str = "") -> tuple[str, list[dict[str, Any]]]:
    """Run the kwire load on ``data`` until it stops (after ``trip``, when given, once the
    load has committed), heal, restart until it commits past what was acknowledged, and check
    the log (``extra``: more server.properties lines). Returns the halted run's stderr and its
    committed reports."""
    props = controller_properties(tmp_path / "server.properties", data, free_port(), extra)
    format_kwire(props, "--standalone")
    out, err = tmp_path / "load.out", tmp_path / "load.err"
    proc = _start_kwire(props, out, err, env)
    try:
        if trip is not None:
            wait_until("a committed report", lambda: _events(out, "committed"), RECOVERY_TIMEOUT_S, alive=[proc])
            trip()
        wait_until("the node to stop", proc.poll, HALT_TIMEOUT_S, ok=lambda rc: rc is not None)
    finally:
        proc.kill()
        proc.wait()
    stderr = err.read_text(encoding="utf-8", errors="replace")
    assert proc.returncode == 1, stderr[-4000:]
    acknowledged = _events(out, "committed")
    assert acknowledged, "the load committed nothing before the fault"
    last = max(report["offset"] for report in acknowledged)

    heal()
    out2 = tmp_path / "restart.out"
    restarted = _start_kwire(props, out2, tmp_path / "restart.err")
    try:
        wait_until(f"a commit past offset {last} after the restart",
                   lambda: [r for r in _events(out2, "committed") if r["offset"] > last],
                   RECOVERY_TIMEOUT_S, alive=[restarted])
    finally:
        restarted.send_signal(signal.SIGTERM)
        restarted.wait(timeout=30)

    records = {r.offset: r for r in read_node_log(data)}
    for report in acknowledged:
        record = records.get(report["offset"])
        assert record is not None, f"acknowledged offset {report['offset']} was lost ({report})"
        assert record.workload is not None and record.workload[:2] == (report["epoch"], report["counter"]), (
            f"acknowledged offset {report['offset']} was lost: it holds {record.workload} ({report})")
    keys = [r.workload[:2] for _, r in sorted(records.items()) if r.workload is not None]
    assert keys == sorted(set(keys)), "the workload's records are out of order"
    return stderr, acknowledged


def _one_fatal_line(stderr: str, *needles: str) -> str:
    fatal = [line for line in stderr.splitlines() if " FATAL " in line]
    assert len(fatal) == 1, stderr[-4000:]
    assert "Traceback" not in stderr, stderr[-4000:]
    for needle in needles:
        assert needle in fatal[0], fatal[0]
    return fatal[0]


def test_kwire_halts_on_a_full_disk_with_one_fatal_line_and_loses_nothing(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "disk", TMPFS_BYTES) as disk:
        data = disk.path / "data"
        stderr, _ = _kwire_halts_and_recovers(tmp_path, data, None, None, lambda: disk.grow(GROWN_BYTES))
    _one_fatal_line(stderr, f"metadata log directory {data} failed", "No space left on device")


def test_the_checker_catches_a_node_that_acknowledges_before_fsync(tmp_path: Path) -> None:
    """The positive control of the EIO test below: with the test-only switch
    ``kwire.unsafe.test.fsync.interval.ms`` a node fsyncs at most once a second and
    acknowledges at once; the failed fsync drops what was never flushed (``fsync_fault.c``), and
    the check that nothing acknowledged was lost must fail."""
    fault = FsyncFault(fsync_fault_library(), tmp_path / "fsync-fails")
    with pytest.raises(AssertionError, match=r"acknowledged offset \d+ was lost") as caught:
        _kwire_halts_and_recovers(tmp_path, tmp_path / "data", fault.trip, fault.env(), fault.heal,
                                  extra="kwire.unsafe.test.fsync.interval.ms=1000\n")
    print("the checker said:", str(caught.value).splitlines()[0])


def test_kwire_halts_when_fsync_fails_and_loses_nothing(tmp_path: Path) -> None:
    fault = FsyncFault(fsync_fault_library(), tmp_path / "fsync-fails")
    data = tmp_path / "data"
    stderr, _ = _kwire_halts_and_recovers(tmp_path, data, fault.trip, fault.env(), fault.heal)
    _one_fatal_line(stderr, f"metadata log directory {data} failed", "Input/output error")


# -- stock Kafka (the control) ----------------------------------------------------------------

def _kafka_props(path: Path, data: Path) -> Path:
    """A single-voter TestRaftServer configuration (the quorum benchmark's), Kafka's default
    append linger."""
    port = free_port()
    path.write_text(kafka_server_properties(1, port, f"1@localhost:{port}", data, linger_ms=25), encoding="utf-8")
    return path


def _start_kafka(kafka: KafkaRelease, props: Path, directory_id: str, logs: Path,
                 env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    logs.mkdir(parents=True, exist_ok=True)
    with (logs / "stdout").open("ab") as stdout, (logs / "stderr").open("ab") as stderr:
        return kafka.start(
            "kafka.tools.TestRaftServer",
            ["--config", props, "--replica-directory-id", directory_id, "--throughput", str(THROUGHPUT),
             "--record-size", str(RECORD_SIZE)],
            logs_dir=logs, stdout=stdout.fileno(), stderr=stderr.fileno(), env=env,
        )


def _whole_log_end(part: Path) -> int:
    """The log end offset of ``part``'s batches, checking each batch's CRC and that offsets
    follow on."""
    batches = log_batches(part) if part.is_dir() else []
    end = 0
    for batch in batches:
        batch.ensure_valid()
        assert batch.base_offset == end, (batch.base_offset, end)
        end = batch.last_offset + 1
    return end


def _kafka_halts_and_recovers(kafka: KafkaRelease, tmp_path: Path, data: Path,
                              trip: Callable[[], None] | None, env: dict[str, str] | None,
                              heal: Callable[[], None]) -> str:
    props = _kafka_props(tmp_path / "server.properties", data)
    directory_id = str(Uuid.random())
    part = data / KAFKA_TOPIC_DIR
    proc = _start_kafka(kafka, props, directory_id, tmp_path / "run-1", env)
    try:
        if trip is not None:
            wait_until("the load's first batches", lambda: part.is_dir() and _whole_log_end(part) > 0,
                       RECOVERY_TIMEOUT_S, alive=[proc])
            trip()
        wait_until("the JVM to halt", proc.poll, HALT_TIMEOUT_S, ok=lambda rc: rc is not None)
    finally:
        proc.kill()
        proc.wait()
    output = (tmp_path / "run-1" / "stdout").read_text(errors="replace")
    output += (tmp_path / "run-1" / "stderr").read_text(errors="replace")
    assert proc.returncode == 1, output[-4000:]

    heal()
    before = _whole_log_end(part)
    restarted = _start_kafka(kafka, props, directory_id, tmp_path / "run-2")
    try:
        wait_until(f"the log to grow past {before} after the restart", lambda: _whole_log_end(part),
                   RECOVERY_TIMEOUT_S, ok=lambda end: end > before, alive=[restarted])
    finally:
        restarted.send_signal(signal.SIGTERM)
        restarted.wait(timeout=30)
    _whole_log_end(part)
    return output


def _releases() -> list[str]:
    """The stock releases of the control: the newest in ``make test``, every pinned one with
    ``KWIRE_FAULT_ALL_CONFIGS=1`` (``make nightly``)."""
    if os.environ.get("KWIRE_FAULT_ALL_CONFIGS") == "1":
        return list(_kafka.PINNED_VERSIONS)
    return [newest_pinned_release().version]


@pytest.fixture(params=_releases(), ids=lambda v: f"kafka-{v}")
def control_kafka(request: pytest.FixtureRequest) -> KafkaRelease:
    _kafka.require_kafka(request.param)
    return KafkaRelease(request.param)


def test_stock_test_raft_server_halts_on_a_full_disk(control_kafka: KafkaRelease, tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "disk", TMPFS_BYTES) as disk:
        output = _kafka_halts_and_recovers(control_kafka, tmp_path, disk.path / "data", None, None,
                                           lambda: disk.grow(GROWN_BYTES))
    assert "Encountered fatal fault" in output and "No space left on device" in output, output[-4000:]


def test_stock_test_raft_server_halts_when_fsync_fails(control_kafka: KafkaRelease, tmp_path: Path) -> None:
    fault = FsyncFault(fsync_fault_library(), tmp_path / "fsync-fails")
    output = _kafka_halts_and_recovers(control_kafka, tmp_path, tmp_path / "data", fault.trip, fault.env(), fault.heal)
    assert "Encountered fatal fault" in output and "Input/output error" in output, output[-4000:]


@pytest.fixture(autouse=True)
def _no_stray_mounts(tmp_path: Path) -> Iterator[None]:
    yield
    with open("/proc/mounts", encoding="utf-8") as mounts:
        assert str(tmp_path) not in mounts.read(), "a tmpfs of the test is still mounted"


# -- a flipped bit in a follower's log --------------------------------------------------------

@pytest.mark.parametrize("kind", ["kwire", "stock"])
def test_a_flipped_bit_in_a_followers_log_is_cut_off_and_fetched_again(kind: str, tmp_path: Path) -> None:
    """Three voters write NoOpRecords; a follower is killed, one bit of a committed batch in
    the middle of its log is flipped, and it restarts: recovery finds the batch's CRC wrong,
    truncates the log there (kwire names the segment and the byte in a WARNING), and the
    follower fetches the rest again from the leader. Afterwards every voter's log holds the
    same batches below the high watermark, so the corrupt bytes were never kept or served.
    The same on three stock controllers of the newest release (Kafka's ``LogLoader`` checks
    every batch of a metadata log whose shutdown was not clean)."""
    kafka = newest_pinned_release()
    kwire_ids = {1, 2, 3} if kind == "kwire" else set()
    quorum = Quorum(kafka, tmp_path, kwire_ids, dynamic=kafka.at_least(4, 0),
                    extra="metadata.max.idle.interval.ms=20\n")
    try:
        for i in (1, 2, 3):
            quorum.start(i)
        quorum.wait_leader(START_TIMEOUT_S)
        wait_until("some committed batches", lambda: quorum.wait_leader(ELECTION_BOUND_S)[2], 60.0,
                   ok=lambda hwm: hwm > 60)
        hwm = quorum.settled_high_watermark()
        leader, _, _ = quorum.wait_leader(ELECTION_BOUND_S)
        follower = next(i for i in (1, 2, 3) if i != leader)
        quorum.kill(follower)
        part = tmp_path / f"data{follower}" / PARTITION
        segment = segment_files(part)[-1]
        flipped_offset, flipped_byte = _flip_a_bit(segment, below=hwm)
        quorum.start(follower)
        # the leader's view of the follower is from before the kill until it fetches again: wait
        # on the follower's own log instead
        target = quorum.wait_leader(ELECTION_BOUND_S)[2]
        leader_dir = tmp_path / f"data{leader}"
        wait_until(f"node {follower}'s log to hold every batch below {target} again",
                   lambda: batches_below(tmp_path / f"data{follower}", target), 60.0,
                   ok=lambda got: got == batches_below(leader_dir, target), alive=[quorum.procs[follower]])
        final_hwm = quorum.settled_high_watermark()
        assert target > flipped_offset
    except BaseException:
        print(quorum.report())
        raise
    finally:
        quorum.stop()
    logs = {i: batches_below(tmp_path / f"data{i}", final_hwm) for i in quorum.ports}
    assert logs[1] and logs[1] == logs[2] == logs[3], {i: len(b) for i, b in logs.items()}
    if kind == "kwire":
        said = f"WARNING storage.log: metadata log recovery in {part}: at byte {flipped_byte}: Record is corrupt"
        out = (tmp_path / f"{follower}.out").read_text(errors="replace")
        assert said in out, [line for line in out.splitlines() if "recovery" in line]


def _flip_a_bit(segment: Path, below: int) -> tuple[int, int]:
    """Flip the lowest bit of the last byte of the middle batch of ``segment`` among those
    ending below offset ``below``; returns that batch's base offset and its position in the
    file."""
    data = bytearray(segment.read_bytes())
    batches = [b for b in scan_batches(bytes(data)).batches if b.last_offset < below]
    assert len(batches) >= 3, len(batches)
    position = 0
    chosen = batches[len(batches) // 2]
    for batch in batches:
        size = len(batch.to_bytes())
        if batch is chosen:
            data[position + size - 1] ^= 0x01
            break
        position += size
    segment.write_bytes(bytes(data))
    return chosen.base_offset, position
