"""Static to dynamic on a running mixed quorum: stock ``kafka-features upgrade --feature
kraft.version=1`` (Kafka 4.1+, so the newest pinned release) sent to a kwire leader of a static
quorum (``controller.quorum.voters``; kwire nodes 1 and 2, a stock controller 3).

The leader must have every voter's directory id and supported kraft.version range (each sends
UpdateRaftVoter at kraft.version 0) and, from metadata.version 3.7-IV0, every voter's KIP-919
registration (the stock controller registers with kwire, the kwire nodes with each other).
Asserted:

* the stock tool succeeds ("kraft.version was upgraded to 1.") within a minute of all three
  running (it is retried while registrations and updates are still arriving);
* stock ``kafka-features describe`` through the stock controller reports kraft.version 1
  finalized, and DescribeQuorum lists every voter with its real directory id;
* the quorum goes on after the kwire leader is killed (stock and kwire nodes elect a leader of
  the dynamic quorum); no process dies but the killed one, the stock controller logs no fatal
  fault, and all logs hold the same batches below the high watermark.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
import trio

from compat.harness import ELECTION_BOUND_S, START_TIMEOUT_S, KafkaRelease, Quorum, batches_below
from storage.meta_properties import read_meta_properties
from tools.quorum_client import describe
from tools.stock_kafka import KafkaCommandError

pytestmark = [pytest.mark.compat, pytest.mark.slow]

UPGRADE_TIMEOUT_S = 90.0


def _features(kafka: KafkaRelease, port: int, *args: str) -> str:
    return kafka.run_tool("features", ["--bootstrap-controller", f"localhost:{port}", *args]).stdout


def test_stock_features_tool_upgrades_a_kwire_led_static_quorum(newest_kafka: KafkaRelease, tmp_path: Path) -> None:
    quorum = Quorum(newest_kafka, tmp_path, {1, 2}, dynamic=False)
    try:
        quorum.start(1)
        quorum.start(2)
        leader, _, _ = quorum.wait_leader(START_TIMEOUT_S)  # only kwire nodes run: one of them
        quorum.start(3)
        quorum.settled_high_watermark()
        port = quorum.ports[leader]
        deadline = time.monotonic() + UPGRADE_TIMEOUT_S
        while True:
            try:
                out = _features(newest_kafka, port, "upgrade", "--feature", "kraft.version=1")
                break
            except KafkaCommandError as exc:
                # registrations and UpdateRaftVoter requests still on their way
                assert time.monotonic() < deadline, f"the upgrade never succeeded: {exc}"
                time.sleep(1.0)  # poll interval
        assert "kraft.version was upgraded to 1." in out, out
        finalized = _features(newest_kafka, quorum.ports[3], "describe")
        [line] = [row for row in finalized.splitlines() if row.startswith("Feature: kraft.version")]
        assert "FinalizedVersionLevel: 1" in line, finalized
        directories = {i: read_meta_properties(tmp_path / f"data{i}").directory_id for i in (1, 2, 3)}  # type: ignore[union-attr]
        view = trio.run(describe, f"localhost:{quorum.ports[3]}", 5.0).partition
        assert {v.replica_id: v.replica_directory_id for v in view.current_voters} == directories
        # the dynamic quorum goes on without its old leader
        quorum.settled_high_watermark()
        quorum.procs[leader].send_signal(signal.SIGKILL)
        quorum.procs[leader].wait()
        new_leader, _, _ = quorum.wait_leader(ELECTION_BOUND_S, excluded=leader)
        quorum.start(leader)
        final_hwm = quorum.settled_high_watermark()
        logged = (tmp_path / "3.out").read_text(errors="replace")
    except BaseException:
        print(quorum.report())
        raise
    finally:
        quorum.stop()
    assert "fatal fault" not in logged and "IllegalStateException" not in logged, logged[-3000:]
    assert new_leader != leader
    logs = {i: batches_below(tmp_path / f"data{i}", final_hwm) for i in quorum.ports}
    assert logs[1] == logs[2] == logs[3], {i: len(b) for i, b in logs.items()}
