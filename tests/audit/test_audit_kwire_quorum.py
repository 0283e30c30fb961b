"""The audit over directories written by a real 3-node kwire quorum with failovers
(``tests.quorum_run``: three processes, the leader killed with SIGKILL three times under load).

The untouched directories pass, and the timeline names the leader of every epoch that took
over. A copy with three kinds of damage -- one record's bytes altered on node-2 (CRC recomputed,
so only a comparison with the other replicas can tell), one batch's leader epoch rewritten on
node-3, node-1's log cut below the commit point -- fails, and each damage is reported with its
node, offset and invariant.

Cost: the quorum run about 17 s, started in the background when the first audit test starts
(tests/audit/conftest.py), so it overlaps the synthetic-log tests; two audits of 2-3 s on the
shared Spark session.
"""

from __future__ import annotations

import shutil
import struct
from concurrent.futures import Future
from pathlib import Path

import pytest

from storage.batch_layout import ATTRIBUTES_OFFSET, CRC_OFFSET
from storage.batch_scan import iter_batches
from tests.quorum_run import FailoverRun
from tools.audit.jobs import run_audit

pytestmark = pytest.mark.spark

PARTITION = "__cluster_metadata-0"
SEGMENT = "00000000000000000000.log"


@pytest.fixture(scope="module")
def failover_run(failover_run_future: Future[FailoverRun]) -> FailoverRun:
    """The run, started in the background by tests/audit/conftest.py; re-raises its failure."""
    return failover_run_future.result()


def _nodes(root: Path) -> list[tuple[str, str]]:
    return [(f"node-{i}", str(root / f"node-{i}" / "data" / PARTITION)) for i in (1, 2, 3)]


def _committed_end(run: FailoverRun) -> int:
    return max(c["offset"] for c in run.committed) + 1


def _data_batches(segment: Path) -> list[tuple[int, int, int, int]]:
    """``(position, base offset, last offset, size)`` of every data batch of a segment."""
    data = segment.read_bytes()
    out, position = [], 0
    for batch in iter_batches(data):
        if not batch.is_control:
            out.append((position, batch.base_offset, batch.last_offset, batch.size_in_bytes))
        position += batch.size_in_bytes
    return out


def test_a_kwire_failover_run_passes_with_its_epochs_in_the_timeline(spark, failover_run: FailoverRun) -> None:
    root = failover_run.cluster.root
    result = run_audit(spark, _nodes(root), high_watermark=_committed_end(failover_run))
    assert result.ok, result.violations[:5]
    assert result.rows > 1000
    epochs = {e["epoch"]: e for e in result.timeline["epochs"]}
    for failover in failover_run.failovers:
        assert epochs[failover.new_epoch]["leader"] == failover.new_leader, epochs[failover.new_epoch]
        assert failover.killed_epoch in epochs


def test_damaged_copies_of_a_kwire_run_are_named(spark, failover_run: FailoverRun, tmp_path: Path) -> None:
    copy = tmp_path / "q"
    for i in (1, 2, 3):
        shutil.copytree(failover_run.cluster.root / f"node-{i}", copy / f"node-{i}")
    committed = _committed_end(failover_run)
    segments = {i: copy / f"node-{i}" / "data" / PARTITION / SEGMENT for i in (1, 2, 3)}
    batches = [b for b in _data_batches(segments[1]) if b[1] < committed]
    assert len(batches) > 30

    # node-2: one padding byte of a record value altered, the batch CRC recomputed
    position, altered_base, altered_last, size = batches[len(batches) // 4]
    data = bytearray(segments[2].read_bytes())
    batch_bytes = data[position:position + size]
    at = batch_bytes.rindex(b"x")
    data[position + at] = ord("y")
    from crc32c import crc32c

    struct.pack_into(">I", data, position + CRC_OFFSET, crc32c(bytes(data[position + ATTRIBUTES_OFFSET:position + size])))
    segments[2].write_bytes(bytes(data))

    # node-3: one batch's partition leader epoch rewritten (the field lies outside the CRC)
    position, rewritten_base, _, _ = batches[len(batches) // 2]
    data = bytearray(segments[3].read_bytes())
    (epoch,) = struct.unpack_from(">i", data, position + 12)
    struct.pack_into(">i", data, position + 12, epoch + 1000)
    segments[3].write_bytes(bytes(data))

    # node-1: the log cut at a batch boundary below the commit point
    position, cut_offset, _, _ = batches[3 * len(batches) // 4]
    with segments[1].open("r+b") as f:
        f.truncate(position)

    result = run_audit(spark, _nodes(copy), high_watermark=committed, timeline=False)
    assert not result.ok
    named = {(v["invariant"], v["node"], v["offset"]) for v in result.violations}
    altered_offsets = {v["offset"] for v in result.violations if v["node"] == "node-2"}
    assert ("log_matching", "node-2", None) not in named
    # the record holding the altered byte, whatever the batch's size (a loaded leader's batch
    # has held 44 records)
    assert altered_offsets and all(altered_base <= o <= altered_last for o in altered_offsets), named
    assert any(inv == "log_matching" and node == "node-2" for inv, node, _ in named), named
    assert any(node == "node-3" and offset == rewritten_base for _, node, offset in named), named
    assert ("committed_entry_missing", "node-1", cut_offset) in named, named
    assert {v["node"] for v in result.violations} <= {"node-1", "node-2", "node-3"}
