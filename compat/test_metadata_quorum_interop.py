"""Stock ``kafka-metadata-quorum`` against a kwire standalone controller.

For every pinned Kafka release: ``python -m tools.cli run-standalone`` runs as a process on a
free loopback port with a fresh data directory (formatted on first use, as
``kafka-storage format --standalone``), and Kafka's own ``MetadataQuorumCommand
--bootstrap-controller host:port describe --status`` / ``describe --replication`` must
succeed and agree with kwire's ``tools.metadata_quorum`` (``describe --status`` sends
DescribeCluster, then DescribeQuorum; ``describe --replication`` DescribeQuorum only): the cluster
id, leader id and epoch, a high watermark of at least 1 that advances from one run to a later
one (the active controller's NoOpRecords), and the voter with its directory id and endpoint.

The advance is waited for: NoOpRecords come every metadata.max.idle.interval.ms (500 ms), so two
runs of the tool may land inside one interval. The test polls kwire's DescribeQuorum view until
its high watermark is above the one the stock tool printed (up to a deadline), and only then runs
the stock tool again, which must print a high watermark at least that high.

Under CI=true the ``kafka_version`` fixture fails instead of skipping when Java or the jars are
missing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from compat.harness import REPO_DIR, START_TIMEOUT_S, KafkaRelease, free_port, wait_listening
from tools.metadata_quorum import status_json
from tools.quorum_client import active_controller, describe

CONFIG = REPO_DIR / "config" / "server.properties"


HWM_ADVANCE_TIMEOUT_S = 60.0
"""How long the high watermark may take to move past a value: many NoOp intervals (500 ms) even
on a loaded machine."""


def _wait_for_high_watermark_above(bootstrap: str, floor: int,
                                   timeout_s: float = HWM_ADVANCE_TIMEOUT_S) -> int:
    """Poll kwire's DescribeQuorum view until its high watermark is above ``floor``; returns
    it. Fails when it is not within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        seen = trio.run(describe, bootstrap).partition.high_watermark
        if seen > floor:
            return seen
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"the high watermark did not advance past {floor} (the stock tool's reading) "
                f"within {timeout_s} s: DescribeQuorum still reports {seen}; the active "
                "controller should append a NoOpRecord every metadata.max.idle.interval.ms"
            )
        time.sleep(0.1)  # poll interval


async def _active_within(bootstrap: str, timeout_s: float) -> None:
    with trio.fail_after(timeout_s):
        await active_controller(bootstrap)


@pytest.fixture
def kwire_controller(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    log_path = tmp_path / "kwire.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "tools.cli", "run-standalone",
                "--config", str(CONFIG), "--data", str(tmp_path / "data"),
                "--override", f"listeners=CONTROLLER://127.0.0.1:{port}",
            ],
            cwd=REPO_DIR, stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        wait_listening(proc, port)
        # Listening comes before leading: until the controller has replayed its metadata.version
        # DescribeCluster answers "There is no finalized MetadataVersion", which the stock tool
        # reports as a failure. Wait as the admin client would, for the active controller.
        trio.run(_active_within, f"127.0.0.1:{port}", START_TIMEOUT_S)
        yield f"127.0.0.1:{port}", proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    print(log_path.read_text(errors="replace"))


def test_stock_metadata_quorum_describes_kwire(
    each_kafka: KafkaRelease, kwire_controller: tuple[str, subprocess.Popen[bytes]]
) -> None:
    bootstrap, proc = kwire_controller
    first = each_kafka.quorum_status(bootstrap)
    ours = trio.run(describe, bootstrap)
    ours_json = status_json(ours)

    assert first["ClusterId"] == ours.cluster_id
    assert int(first["LeaderId"]) == ours.partition.leader_id == 1
    assert int(first["LeaderEpoch"]) == ours.partition.leader_epoch >= 1
    first_hwm = int(first["HighWatermark"])
    assert first_hwm >= 1
    voters = json.loads(first["CurrentVoters"])
    assert voters == ours_json["currentVoters"]
    assert json.loads(first["CurrentObservers"]) == ours_json["currentObservers"] == []
    [voter] = voters
    [our_voter] = ours.partition.current_voters
    assert voter["id"] == our_voter.replica_id == 1
    assert voter["directoryId"] == str(our_voter.replica_directory_id)
    assert voter["directoryId"] != "AAAAAAAAAAAAAAAAAAAAAA"
    assert voter["endpoints"] == [f"CONTROLLER://{bootstrap}"]

    advanced = _wait_for_high_watermark_above(bootstrap, first_hwm)
    second = each_kafka.quorum_status(bootstrap)
    assert int(second["HighWatermark"]) >= advanced > first_hwm
    assert second["LeaderEpoch"] == first["LeaderEpoch"]

    replication = each_kafka.run_tool(
        "metadata-quorum", ["--bootstrap-controller", bootstrap, "describe", "--replication"]
    ).stdout.splitlines()
    header = replication[0].split()
    assert header == [
        "NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
        "LastCaughtUpTimestamp", "Status",
    ]
    [row] = [line.split() for line in replication[1:] if line.strip()]
    assert row[0] == "1"
    assert row[1] == voter["directoryId"]
    assert int(row[2]) >= int(second["HighWatermark"])
    assert row[3] == "0"
    assert row[6] == "Leader"
    assert proc.poll() is None
