"""``kwire health`` against a 3-node quorum of stock controllers (the newest pinned release) and
one of kwire controllers, the same steps on each:

* once every voter has caught up: exit 0 (healthy), and ``--safe-to-restart`` of a follower 0;
* kill -9 of a follower: exit 1 (degraded) once its last catch-up is older than
  ``--caught-up-ms``, naming it; ``--safe-to-restart`` of the other follower is then 1 (the
  quorum would lose its caught-up majority), of the dead one 0;
* kill -9 of the other follower: exit 2 (no quorum) once the leader gives up its leadership;
* a bootstrap address where nothing listens: exit 2.

Each wait polls the tool until its exit status is the one expected, within a deadline.
"""

from __future__ import annotations

import contextlib
import io
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from compat.harness import ELECTION_BOUND_S, REPO_DIR, KafkaRelease, Quorum, free_port
from tools.cli import main

pytestmark = [pytest.mark.compat, pytest.mark.slow]

CAUGHT_UP_MS = 1500
WAIT_S = 60.0


def _health(bootstrap: str, *extra: str, process: bool = False) -> tuple[int, dict[str, Any]]:
    """``kwire health --json``'s exit status and answer: run in this process, or with
    ``process`` as the console command."""
    argv = ["health", "--bootstrap-controller", bootstrap, "--caught-up-ms", str(CAUGHT_UP_MS),
            "--timeout-ms", "5000", "--json", *extra]
    if process:
        done = subprocess.run([sys.executable, "-m", "tools.cli", *argv], cwd=REPO_DIR, capture_output=True,
                              text=True, timeout=60)
        return done.returncode, json.loads(done.stdout)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    return code, json.loads(out.getvalue())


def _until(bootstrap: str, status: int, *extra: str) -> dict[str, Any]:
    """The tool's answer once it exits with ``status`` (within WAIT_S)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        code, answer = _health(bootstrap, *extra)
        if code == status:
            return answer
        assert time.monotonic() < deadline, f"kwire health {' '.join(extra)} still exits {code}: {answer}"
        time.sleep(0.3)  # poll interval


@pytest.mark.parametrize("kind", ["stock", "kwire"])
def test_health_follows_a_quorum_losing_its_followers(newest_kafka: KafkaRelease, tmp_path: Path, kind: str) -> None:
    quorum = Quorum(newest_kafka, tmp_path, {1, 2, 3} if kind == "kwire" else set(), dynamic=True)
    bootstrap = ",".join(f"localhost:{p}" for p in quorum.ports.values())
    try:
        for i in quorum.ports:
            quorum.start(i)
        leader, _, _ = quorum.wait_leader(ELECTION_BOUND_S * 3)
        followers = [i for i in quorum.ports if i != leader]
        healthy = _until(bootstrap, 0)
        assert healthy["status"] == "healthy" and healthy["leader_id"] == leader, healthy
        assert sorted(v["replica_id"] for v in healthy["voters"]) == [1, 2, 3]
        assert _until(bootstrap, 0, "--safe-to-restart", str(followers[0]))["safe_to_restart"]["safe"]

        quorum.procs[followers[0]].send_signal(signal.SIGKILL)
        quorum.procs[followers[0]].wait(30)
        degraded = _until(bootstrap, 1)
        assert degraded["status"] == "degraded", degraded
        assert any(f"voter {followers[0]} is not caught up" in p for p in degraded["problems"]), degraded
        unsafe = _until(bootstrap, 1, "--safe-to-restart", str(followers[1]))
        assert unsafe["safe_to_restart"]["safe"] is False, unsafe
        assert _until(bootstrap, 0, "--safe-to-restart", str(followers[0]))["safe_to_restart"]["safe"]

        quorum.procs[followers[1]].send_signal(signal.SIGKILL)
        quorum.procs[followers[1]].wait(30)
        gone = _until(bootstrap, 2)
        assert gone["status"] == "no quorum", gone
    finally:
        quorum.stop()
    nowhere = f"localhost:{free_port()}"
    code, answer = _health(nowhere, process=True)
    assert code == 2 and answer["status"] == "no quorum", answer
