"""Stock Kafka tools against a 3-node kwire quorum, for every pinned release.

One quorum per module: ``kwire dev-cluster`` (three ``kwire test-raft-server`` processes, the
leader writing 200 records/s), whose leader is killed with SIGKILL and restarted once before
the tests, so the quorum has a restarted follower and a second epoch.

* ``kafka-metadata-quorum --bootstrap-controller <all three> describe --status`` and
  ``describe --replication`` (Kafka's MetadataQuorumCommand) print the cluster id, the leader
  and epoch, a high watermark that advances, the three voters with their directory ids and
  endpoints, and the followers' lag -- equal to kwire's own view of the same moment (taken just
  before and after, for values that move).
* After the quorum stops, Kafka's DumpLogSegments with ``--cluster-metadata-decoder`` reads every
  node's segments and checkpoints: every batch ``isvalid: true``, no invalid bytes, and the same
  lines ``kwire dump-log`` prints for them.

Cost: about 25 s for the quorum, 3-5 s per stock tool run.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator

import pytest
import trio

from compat.harness import KafkaRelease
from tools.local_cluster import DevCluster
from tools.metadata_quorum import replication_json, status_json
from tools.quorum_client import QuorumView, describe

pytestmark = pytest.mark.compat


@pytest.fixture(scope="module")
def quorum(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    cluster = DevCluster.create(
        tmp_path_factory.mktemp("quorum") / "dev-cluster", 3, base_port=None, workload=(200, 256)
    )
    try:
        cluster.start()
        leader, epoch = cluster.wait_for_leader(60.0)
        cluster.kill(leader, signal.SIGKILL)
        cluster.wait_for_leader(30.0, exclude=[leader], min_epoch=epoch + 1)
        cluster.start([leader])
        yield cluster
    finally:
        cluster.stop()


def _view(cluster: DevCluster) -> QuorumView:
    return trio.run(describe, cluster.bootstrap_controllers)


def _wait_all_voters_caught_up(cluster: DevCluster) -> None:
    """Until the restarted node fetches again (its last fetch time is known to the leader)."""
    import time

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        voters = _view(cluster).partition.current_voters
        if len(voters) == 3 and all(v.last_fetch_timestamp > 0 for v in voters):
            return
        time.sleep(0.2)
    raise AssertionError("a voter never fetched from the leader")


def test_stock_describe_status_of_a_three_node_quorum(each_kafka: KafkaRelease, quorum: DevCluster) -> None:
    _wait_all_voters_caught_up(quorum)
    before = _view(quorum)
    stock = each_kafka.quorum_status(quorum.bootstrap_controllers)
    after = _view(quorum)
    ours = status_json(after)

    assert stock["ClusterId"] == quorum.cluster_id == after.cluster_id
    assert int(stock["LeaderId"]) == after.partition.leader_id == before.partition.leader_id
    assert int(stock["LeaderEpoch"]) == after.partition.leader_epoch >= 2
    hwm = int(stock["HighWatermark"])
    assert before.partition.high_watermark <= hwm <= after.partition.high_watermark
    assert int(stock["MaxFollowerLag"]) >= 0
    voters = json.loads(stock["CurrentVoters"])
    assert voters == ours["currentVoters"]
    expected = {
        (n.node_id, n.directory_id, f"CONTROLLER://localhost:{n.port}") for n in quorum.nodes.values()
    }
    assert {(v["id"], v["directoryId"], v["endpoints"][0]) for v in voters} == expected
    assert all(len(v["endpoints"]) == 1 for v in voters)
    assert json.loads(stock["CurrentObservers"]) == ours["currentObservers"] == []

    # the leader's NoOps (every 500 ms) move the high watermark on: ask again until they did,
    # as two runs of the tool can both fall inside one interval
    deadline = time.monotonic() + 30
    later = each_kafka.quorum_status(quorum.bootstrap_controllers)
    while int(later["HighWatermark"]) <= hwm and time.monotonic() < deadline:
        time.sleep(0.2)
        later = each_kafka.quorum_status(quorum.bootstrap_controllers)
    assert int(later["HighWatermark"]) > hwm
    assert later["LeaderEpoch"] == stock["LeaderEpoch"]


def test_stock_describe_replication_of_a_three_node_quorum(each_kafka: KafkaRelease, quorum: DevCluster) -> None:
    _wait_all_voters_caught_up(quorum)
    before = replication_json(_view(quorum))
    stock = each_kafka.run_tool(
        "metadata-quorum", ["--bootstrap-controller", quorum.bootstrap_controllers, "describe", "--replication"]
    ).stdout.splitlines()
    after_view = _view(quorum)
    after = replication_json(after_view)
    assert stock[0].split() == [
        "NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
        "LastCaughtUpTimestamp", "Status",
    ]
    rows = {int(r[0]): r for r in (line.split() for line in stock[1:] if line.strip())}
    assert set(rows) == {1, 2, 3}
    leader = after_view.partition.leader_id
    for node_id, row in rows.items():
        node = quorum.nodes[node_id]
        low = next(r for r in before if r["nodeId"] == node_id)
        high = next(r for r in after if r["nodeId"] == node_id)
        assert row[1] == node.directory_id == high["directoryId"]
        assert low["logEndOffset"] <= int(row[2]) <= high["logEndOffset"]
        assert int(row[3]) >= 0  # lag: leader's end offset minus this replica's
        assert low["lastFetchTimestamp"] <= int(row[4]) <= high["lastFetchTimestamp"]
        assert row[6] == ("Leader" if node_id == leader else "Follower")
    assert rows[leader][3] == "0"


def test_stock_dump_log_reads_every_node_after_the_run(each_kafka: KafkaRelease, quorum: DevCluster) -> None:
    quorum.stop()
    for node in quorum.nodes.values():
        files = sorted(node.partition_dir.glob("*.log")) + sorted(node.partition_dir.glob("*.checkpoint"))
        assert any(f.suffix == ".log" for f in files)
        stock = each_kafka.run_tool("dump-log", ["--cluster-metadata-decoder", "--files", ",".join(map(str, files))])
        lines = stock.stdout.splitlines()
        batches = [line for line in lines if line.startswith("baseOffset:")]
        assert len(batches) > 10, f"node {node.node_id}: {len(batches)} batches"
        assert all(line.endswith("isvalid: true") for line in batches), node.node_id
        assert "invalid bytes" not in stock.stdout + stock.stderr
        assert not [line for line in lines if "Error" in line or "Exception" in line]
        assert sum("kwire.test.raft.workload" in line for line in lines) > 100
        assert each_kafka.kwire_dump(files, cluster_metadata_decoder=True)[0].splitlines() == lines
