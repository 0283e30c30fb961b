"""The text of ``kwire metadata-quorum describe`` is Kafka's, byte for byte."""

from __future__ import annotations

from kwire.uuid import ZERO_UUID, Uuid
from messages.generated.describe_quorum_response import Listener, Node, PartitionData, ReplicaState
from tools.metadata_quorum import (
    format_replication,
    format_status,
    replication_json,
    status_json,
)
from tools.quorum_client import QuorumView

DIR1 = Uuid.from_longs(1, 1)
DIR2 = Uuid.from_longs(2, 2)


def _view() -> QuorumView:
    partition = PartitionData(
        partition_index=0,
        leader_id=1,
        leader_epoch=5,
        high_watermark=120,
        current_voters=[
            ReplicaState(1, DIR1, 130, 1_000, 1_000),
            ReplicaState(2, DIR2, 100, 990, 900),
            ReplicaState(3, ZERO_UUID, 100, -1, -1),
        ],
        observers=[ReplicaState(7, ZERO_UUID, 90, 980, 950)],
    )
    nodes = [Node(1, [Listener("CONTROLLER", "localhost", 9093)]),
             Node(2, [Listener("CONTROLLER", "::1", 9094)])]
    return QuorumView("MkU3OEVBNTcwNTJENDM2Qk", partition, nodes)


def test_status_text():
    assert format_status(_view()) == "\n".join([
        "ClusterId:              MkU3OEVBNTcwNTJENDM2Qk",
        "LeaderId:               1",
        "LeaderEpoch:            5",
        "HighWatermark:          120",
        "MaxFollowerLag:         30",
        "MaxFollowerLagTimeMs:   100",
        'CurrentVoters:          [{"id": 1, "directoryId": "AAAAAAAAAAEAAAAAAAAAAQ", '
        '"endpoints": ["CONTROLLER://localhost:9093"]}, '
        '{"id": 2, "directoryId": "AAAAAAAAAAIAAAAAAAAAAg", "endpoints": ["CONTROLLER://[::1]:9094"]}, '
        '{"id": 3, "directoryId": null}]',
        'CurrentObservers:       [{"id": 7, "directoryId": null}]',
    ])


def test_lag_time_is_zero_when_the_leader_is_the_least_advanced():
    view = _view()
    view.partition.current_voters = [ReplicaState(1, DIR1, 10, 5, 5)]
    assert "MaxFollowerLagTimeMs:   0" in format_status(view)


def test_replication_table_pads_and_ends_every_cell_with_a_tab():
    lines = format_replication(_view(), human_readable=False, now_ms=2_000).split("\n")
    assert lines[0] == ("NodeId\tDirectoryId           \tLogEndOffset\tLag\tLastFetchTimestamp"
                        "\tLastCaughtUpTimestamp\tStatus  \t")
    assert lines[1] == "1     \tAAAAAAAAAAEAAAAAAAAAAQ\t130         \t0  \t1000              \t1000                 \tLeader  \t"
    assert lines[3].startswith("3     \tAAAAAAAAAAAAAAAAAAAAAA\t100         \t30 \t-1 ")
    assert lines[4].endswith("Observer\t")


def test_human_readable_timestamps():
    text = format_replication(_view(), human_readable=True, now_ms=2_000)
    assert "1000 ms ago" in text and "\t-1 " in text


def test_json_forms_agree_with_the_text():
    status = status_json(_view())
    assert status["maxFollowerLag"] == 30 and status["currentVoters"][2]["directoryId"] is None
    rows = replication_json(_view())
    assert [r["status"] for r in rows] == ["Leader", "Follower", "Follower", "Observer"]
    assert rows[3]["lag"] == 40
