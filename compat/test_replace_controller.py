"""``kwire metadata-quorum replace-controller``: a voter whose disk was lost comes back with a new
directory id, in a dynamic quorum of kwire nodes and stock controllers (KIP-853, the KIP-856
scenario).

For the pinned releases (``make test``: the newest replacing a kwire voter, the older a stock one;
``make nightly``: every pair, :func:`compat.kafka.release_matrix`), a three-voter dynamic quorum
(kwire nodes 1 and 3, stock node 2; then kwire node 1 and stock nodes 2 and 3) runs with NoOps as its steady load. Voter 3 is killed with
SIGKILL and its directory deleted; the command then, with voter 3's configuration:

* prints its plan with ``--dry-run`` (remove the old replica key, then wait for the new one and
  add it) and changes nothing;
* formats the new directory itself for a kwire node (``--format``; a stock node is formatted
  by stock ``kafka-storage format --no-initial-controllers``), waits until the restarted node
  has caught up as an observer, removes (3, old directory id), adds (3, new directory id).

Asserted: exit 0; the voters are 1, 2 and (3, new directory id); a leader answers throughout
(checked after every poll while the command runs); every voter's log is the same, byte for byte,
below the final high watermark; no process died.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio

from compat.harness import (
    CLUSTER_ID,
    ELECTION_BOUND_S,
    REPO_DIR,
    START_TIMEOUT_S,
    KafkaRelease,
    Quorum,
    batches_below,
    stop_processes,
)
from compat.kafka import release_matrix
from storage.meta_properties import read_meta_properties
from tools.quorum_client import describe

pytestmark = [pytest.mark.compat, pytest.mark.slow]

COMMAND_TIMEOUT_S = 180.0


@pytest.mark.parametrize(("kafka_version", "replaced_kind"), release_matrix(("kwire", "stock")))
def test_replace_a_voter_whose_disk_was_lost(each_kafka: KafkaRelease, tmp_path: Path, replaced_kind: str) -> None:
    kwire_ids = {1, 3} if replaced_kind == "kwire" else {1}
    quorum = Quorum(each_kafka, tmp_path, kwire_ids, dynamic=True)
    bootstrap = f"localhost:{quorum.ports[1]},localhost:{quorum.ports[2]}"
    props = tmp_path / "3.properties"
    data = tmp_path / "data3"
    proc: subprocess.Popen[bytes] | None = None
    try:
        for i in (1, 2, 3):
            quorum.start(i)
        quorum.wait_leader(START_TIMEOUT_S)
        old_directory = read_meta_properties(data).directory_id  # type: ignore[union-attr]
        quorum.procs[3].send_signal(signal.SIGKILL)
        quorum.procs[3].wait()
        shutil.rmtree(data)
        quorum.wait_leader(ELECTION_BOUND_S, excluded=3)

        command = [sys.executable, "-m", "tools.cli", "metadata-quorum", "--bootstrap-controller", bootstrap,
                   "--command-config", str(props), "replace-controller"]
        if replaced_kind == "stock":
            each_kafka.run_tool("storage", ["format", "-t", CLUSTER_ID, "-c", props, "--no-initial-controllers"])
        else:
            command.append("--format")
        dry = subprocess.run([*command, "--dry-run"], cwd=REPO_DIR, capture_output=True, text=True, timeout=60)
        assert dry.returncode == 0, dry.stderr
        assert dry.stdout.startswith("DRY RUN of:\n1. remove voter 3 with directory id " + str(old_directory))
        assert "2. wait until controller 3" in dry.stdout
        assert (data / "meta.properties").exists() == (replaced_kind == "stock")  # a dry run formats nothing

        with open(tmp_path / "replace.out", "wb") as out:
            proc = subprocess.Popen(command, cwd=REPO_DIR, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + COMMAND_TIMEOUT_S
        started = False
        while proc.poll() is None:
            assert time.monotonic() < deadline, "replace-controller did not finish"
            if not started and (data / "meta.properties").exists():
                quorum.start(3)  # the operator starts the new node once its directory is formatted
                started = True
            quorum.wait_leader(ELECTION_BOUND_S)  # never without a leader for longer than an election
            time.sleep(0.2)  # poll interval
        output = (tmp_path / "replace.out").read_text()
        assert proc.returncode == 0, output
        new_directory = read_meta_properties(data).directory_id  # type: ignore[union-attr]
        assert new_directory != old_directory
        view = trio.run(describe, bootstrap)
        voters = sorted((v.replica_id, v.replica_directory_id) for v in view.partition.current_voters)
        assert [i for i, _ in voters] == [1, 2, 3] and voters[2][1] == new_directory, output
        assert "voters now: " in output

        final_hwm = quorum.settled_high_watermark()
    finally:
        if proc is not None and proc.poll() is None:  # a failed wait: the command is stopped too
            stop_processes([proc], timeout_s=10.0)
        quorum.stop()
    logs = {i: batches_below(tmp_path / f"data{i}", final_hwm) for i in quorum.ports}
    assert logs[1] and logs[1] == logs[2] == logs[3], {i: len(b) for i, b in logs.items()}
