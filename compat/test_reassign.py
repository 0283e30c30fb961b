"""``kwire metadata-quorum reassign``: a mixed kwire/Kafka dynamic quorum moved to new voter sets by
safe single-voter changes (KIP-853), interrupted once and resumed.

Six controllers (kwire 1, 3, 5; stock 2, 4, 6) of the newest pinned release's line (every
release's in ``make nightly``, :func:`compat.kafka.newest_or_every_release`), voters {1, 2, 3}
at the start, 4, 5 and 6 observers. Asserted:

* ``--dry-run`` prints the plan to {4, 5, 6}: the three additions first, then the three
  removals with the leader's last, and changes nothing;
* ``reassign --voters`` {1, 2, 3, 4, 5} exits 0 with exactly those voters;
* ``reassign --voters`` {4, 5, 6} stopped after two steps (``--max-steps 2``: 6 added, one
  old voter removed), run again and killed (SIGKILL) once it removes a voter, and run a third
  time, each time planning from where the quorum stood (no rerun adds anything), leaves the
  voters {4, 5, 6} with one of them leading;
* a leader answers throughout, the epoch moves only when the old leader removes itself, and the
  new voters' logs are the same byte for byte below the final high watermark.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio

from compat.harness import (
    ELECTION_BOUND_S,
    REPO_DIR,
    START_TIMEOUT_S,
    KafkaRelease,
    Quorum,
    batches_below,
)
from compat.kafka import newest_or_every_release
from storage.meta_properties import read_meta_properties
from tools.quorum_client import describe

pytestmark = [pytest.mark.compat, pytest.mark.slow]

COMMAND_TIMEOUT_S = 240.0


def _voters(bootstrap: str) -> list[int]:
    return sorted(v.replica_id for v in trio.run(describe, bootstrap).partition.current_voters)


def _reassign(quorum: Quorum, bootstrap: str, ids: tuple[int, ...], *extra: str,
              kill_on: str | None = None) -> tuple[int, str]:
    """Run the command to ``ids``; with ``kill_on``, SIGKILL it once that text is printed.
    Returns (exit code, output); polls for a leader while it runs."""
    voters = ",".join(
        f"{i}@localhost:{quorum.ports[i]}:{read_meta_properties(quorum.root / f'data{i}').directory_id}"  # type: ignore[union-attr]
        for i in ids
    )
    out_path = quorum.root / f"reassign-{len(list(quorum.root.glob('reassign-*')))}.out"
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-u", "-m", "tools.cli", "metadata-quorum", "--bootstrap-controller", bootstrap,
             "reassign", "--voters", voters, *extra],
            cwd=REPO_DIR, stdout=out, stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + COMMAND_TIMEOUT_S
    while proc.poll() is None:
        assert time.monotonic() < deadline, "reassign did not finish"
        if kill_on is not None and kill_on in out_path.read_text():
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            break
        quorum.wait_leader(ELECTION_BOUND_S)  # never without a leader for longer than an election
        time.sleep(0.1)  # poll interval
    return proc.returncode, out_path.read_text()


@pytest.mark.parametrize("kafka_version", newest_or_every_release())
def test_reassign_to_new_voter_sets_with_an_interruption(each_kafka: KafkaRelease, tmp_path: Path) -> None:
    quorum = Quorum(each_kafka, tmp_path, {1, 3, 5}, dynamic=True, ids=(1, 2, 3, 4, 5, 6), voter_ids=(1, 2, 3))
    bootstrap = ",".join(f"localhost:{p}" for p in quorum.ports.values())
    try:
        for i in quorum.ports:
            quorum.start(i)
        leader, epoch, _ = quorum.wait_leader(START_TIMEOUT_S)
        deadline = time.monotonic() + START_TIMEOUT_S
        while missing := {4, 5, 6} - {o.replica_id for o in trio.run(describe, bootstrap).partition.observers}:
            assert time.monotonic() < deadline, f"observers {sorted(missing)} did not start fetching"
            time.sleep(0.2)  # poll interval

        code, plan = _reassign(quorum, bootstrap, (4, 5, 6), "--dry-run")
        assert code == 0, plan
        lines = plan.splitlines()
        assert lines[0] == "DRY RUN of:" and len(lines) == 7, plan
        assert [line.split()[1:3] for line in lines[1:4]] == [["wait", "until"]] * 3
        removed = [int(line.split()[3]) for line in lines[4:7]]
        assert sorted(removed) == [1, 2, 3] and removed[-1] == leader, plan
        assert _voters(bootstrap) == [1, 2, 3]

        code, output = _reassign(quorum, bootstrap, (1, 2, 3, 4, 5))
        assert code == 0, output
        assert _voters(bootstrap) == [1, 2, 3, 4, 5]

        # stopped after two of its four steps (add 6, remove one of 1-3), then killed while it
        # runs on (where the kill lands is up to timing), then run to the end
        code, first = _reassign(quorum, bootstrap, (4, 5, 6), "--max-steps", "2")
        assert code == 0 and "stopped after 2 of 4 steps" in first, first
        assert _voters(bootstrap) == sorted({1, 2, 3, 4, 5, 6} - {removed[0]}), first
        code, killed = _reassign(quorum, bootstrap, (4, 5, 6), kill_on="removing voter")
        assert code in (0, -signal.SIGKILL), killed
        assert "adding voter" not in killed, killed  # resumed: 6 was added by the first run
        code, last = _reassign(quorum, bootstrap, (4, 5, 6))
        assert code == 0, first + killed + last
        assert "adding voter" not in last, last
        assert _voters(bootstrap) == [4, 5, 6]
        new_leader, new_epoch, _ = quorum.wait_leader(ELECTION_BOUND_S)
        assert new_leader in (4, 5, 6) and new_epoch > epoch
        final_hwm = quorum.settled_high_watermark()
    except BaseException:
        print(quorum.report())
        raise
    finally:
        quorum.stop()
    logs = {i: batches_below(tmp_path / f"data{i}", final_hwm) for i in (4, 5, 6)}
    assert logs[4] and logs[4] == logs[5] == logs[6], {i: len(b) for i, b in logs.items()}
