"""``kwire dev-cluster --brokers N``: a kwire quorum with stock brokers of a pinned release on it.

One controller and one stock broker of the newest pinned release: the command prints the
brokers' bootstrap servers once every broker runs (the broker answers Metadata listing itself),
and a Ctrl-C to the whole process group (as a terminal sends it) stops the broker first, with a
controlled shutdown against the live quorum, then the controller; nothing is left running.
The controller runs a create-topic policy given with ``--create-topic-policy``
(``compat.example_policies:StallingMinPartitionsPolicy``, its settings with ``--override``):
stock ``kafka-topics --create`` of a one-partition topic through the broker, which forwards
CreateTopics to kwire, is refused with the policy's message; a topic the policy throws on gets
Kafka's UNKNOWN_SERVER_ERROR; a topic the policy holds longer
than ``kwire.plugin.timeout.ms`` is refused with POLICY_VIOLATION naming the policy and the
limit, and once the held call returns the next topic is created: the controller kept serving.
Cost: one broker JVM and a few tool runs in one tool JVM, a few seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compat.harness import REPO_DIR, KafkaRelease, free_port, wait_until
from tools.stock_brokers import BrokerNode, StockBrokers

pytestmark = pytest.mark.compat

START_TIMEOUT_S = 150.0
POLICY = "compat.example_policies:StallingMinPartitionsPolicy"
LIMIT_MS = 1000
"""The plug-in time limit: Kafka's own policies answer within it even on a loaded machine,
while the stalled one (held 3 s) passes it."""


def test_dev_cluster_runs_stock_brokers_and_stops_them_first(newest_kafka: KafkaRelease, tmp_path: Path) -> None:
    version = newest_kafka.version
    root = tmp_path / "cluster"
    base = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tools.cli", "dev-cluster", "--nodes", "1", "--brokers", "1", "--dir", str(root),
         "--base-port", str(base), "--create-topic-policy", POLICY, "--override", "policy.min.partitions=2",
         "--override", f"kwire.plugin.timeout.ms={LIMIT_MS}", "--override", "policy.stall.ms=3000"],
        cwd=REPO_DIR, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not any(line.startswith("Ctrl-C stops every node") for line in lines):
            line = proc.stdout.readline()
            assert line and time.monotonic() < deadline, f"dev-cluster did not come up: {lines}"
            lines.append(line.rstrip("\n"))
        [running] = [line for line in lines if "brokers, all running" in line]
        assert f"1 stock Kafka {version} brokers" in running and f"--bootstrap-server localhost:{base + 100}" in running
        broker = BrokerNode(101, base + 100, root / "broker-101")
        assert StockBrokers(root, version, [broker]).listed_by(101) == {101}
        refused = newest_kafka.run_tool("topics", [
            "--bootstrap-server", f"localhost:{base + 100}", "--create", "--topic", "tiny", "--partitions", "1",
            "--replication-factor", "1"], check=False)
        assert refused.returncode != 0, refused
        assert ("org.apache.kafka.common.errors.PolicyViolationException: Topic tiny refused: numPartitions=1, "
                "replicationFactor=1, replicasAssignments=null, configs={}; at least 2 partitions required."
                ) in refused.stdout + refused.stderr, (refused.stdout, refused.stderr)
        bootstrap = ["--bootstrap-server", f"localhost:{base + 100}"]
        create = [*bootstrap, "--create", "--partitions", "2", "--replication-factor", "1", "--topic"]
        # a policy that raises: Kafka's answer, UNKNOWN_SERVER_ERROR without a message
        crashed = newest_kafka.run_tool("topics", [*create, "crash"], check=False)
        assert crashed.returncode != 0, crashed
        assert ("org.apache.kafka.common.errors.UnknownServerException: The server experienced an unexpected error "
                "when processing the request.") in crashed.stdout + crashed.stderr, (crashed.stdout, crashed.stderr)
        stalled = newest_kafka.run_tool("topics", [*create, "stall"], check=False)
        assert stalled.returncode != 0, stalled
        assert (f"org.apache.kafka.common.errors.PolicyViolationException: create.topic.policy.class.name {POLICY} "
                f"did not answer within {LIMIT_MS} ms (kwire.plugin.timeout.ms); refused"
                ) in stalled.stdout + stalled.stderr, (stalled.stdout, stalled.stderr)
        # refused at once while the policy is still held, then created once it returns
        deadline = time.monotonic() + 30
        while (after := newest_kafka.run_tool("topics", [*create, "after"], check=False)).returncode != 0:
            assert "is still in a call that passed its limit" in after.stdout + after.stderr, (after.stdout, after.stderr)
            assert time.monotonic() < deadline, "the controller did not serve after the stalled policy returned"
            time.sleep(0.1)
        # the broker lists a topic once it has fetched its records, a moment after CreateTopics answered
        wait_until("the broker lists exactly the topic created after the stall",
                   lambda: newest_kafka.run_tool("topics", [*bootstrap, "--list"]).stdout.split(),
                   30.0, ok=lambda listed: listed == ["after"], interval_s=0.5)
    finally:
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C reaches the whole group
        code = proc.wait(90)
    rest = proc.stdout.read()
    assert code == 0, lines + [rest]
    # the broker's controlled shutdown reached the controller, which fenced it and answered
    # ShouldShutDown (the broker's own log of it is not reliable: its logging may already be
    # shut down by then)
    server_log = (root / "node-1" / "server.log").read_text(encoding="utf-8", errors="replace")
    assert "fenced=1" in server_log, server_log[-3000:]
    leftovers = subprocess.run(["pgrep", "-f", str(root)], capture_output=True, text=True).stdout.split()
    assert leftovers == [], leftovers
