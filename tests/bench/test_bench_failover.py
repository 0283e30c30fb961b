"""The quorum section's failover rounds: Kafka's raft log lines read at ms resolution, the table
and results, and one kwire round per signal (three ``kwire test-raft-server`` processes, ~10-15 s
with the 2 s fetch timeout) whose processes are all gone afterwards. Figures are never asserted
on beyond what a correct run implies (a crash costs about the fetch timeout at least)."""

from __future__ import annotations

from pathlib import Path

from tests.bench import leftover_processes
from tools.bench import failover, quorum

# lines as Kafka 4.4.0's TestRaftServer logs them under failover.kafka_log4j2_config()
KAFKA_LINES = [
    "1795664537869 INFO [RaftManager id=3] Completed transition to UnattachedState(epoch=1, "
    "leaderId=OptionalInt.empty, votedKey=Optional.empty, voters=[1, 2, 3], electionTimeoutMs=534, "
    "highWatermark=Optional.empty) from UnattachedState(epoch=0) (org.apache.kafka.raft.QuorumState)",
    "1795664538159 INFO [RaftManager id=3] High watermark set to LogOffsetMetadata(offset=2, "
    "metadata=Optional[(segmentBaseOffset=0,relativePositionInSegment=162)]) for the first time for "
    "epoch 1 based on indexOfHw 1 and voters [ReplicaState(replicaKey=ReplicaKey(id=3, "
    "directoryId=<undefined>), endOffset=Optional[LogOffsetMetadata(offset=2)])] "
    "(org.apache.kafka.raft.LeaderState)",
    "1795664541026 INFO [RaftManager id=3] Completed transition to FollowerState(fetchTimeoutMs=2000, "
    "epoch=2, leader=1, leaderEndpoints=Endpoints(...), votedKey=Optional.empty, voters=[1, 2, 3], "
    "highWatermark=Optional.empty, fetchingSnapshot=Optional.empty) from ResignedState(...) "
    "(org.apache.kafka.raft.QuorumState)",
    "1795664541030 WARN [RaftManager id=3] High watermark set to 5 for the first time for epoch 9 "
    "(org.apache.kafka.raft.LeaderState)",  # not INFO: not the line LeaderState writes
]


def test_kafka_log_gives_first_commits_and_follower_transitions() -> None:
    commits, follows = failover.parse_kafka_log(KAFKA_LINES)
    assert commits == [(1, 1795664538159)]
    assert follows == [1795664541026]
    config = failover.kafka_log4j2_config()
    assert "%d{UNIX_MILLIS}" in config and "logger.leader.name = org.apache.kafka.raft.LeaderState" in config


def test_table_and_results_give_medians_and_the_crash_excess() -> None:
    def rounds(term: list[int], kill: list[int]) -> list[failover.Round]:
        return ([failover.Round("SIGTERM", 1, 1, 2, 2, ms) for ms in term]
                + [failover.Round("SIGKILL", 2, 2, 3, 3, ms) for ms in kill])

    rows = [
        failover.FailoverRow("kwire", rounds([30, 20, 25], [2010, 2100, 2030])),
        failover.FailoverRow("Kafka 4.4.0", rounds([200, 220, 210], [2090, 2080, 2500])),
    ]
    text = failover.format_rows(rows)
    assert "kwire        SIGTERM: median 25  (rounds: 30, 20, 25)" in text
    assert "Kafka 4.4.0  SIGKILL: median 2,090  (rounds: 2090, 2080, 2500); excess over the fetch timeout 90" in text
    results = {r.what: (r.kwire, r.reference) for r in quorum.failover_results(rows)}
    assert results == {
        "failover after SIGTERM: signal to first commit": (25.0, 210.0),
        "failover after SIGKILL: signal to first commit": (2030.0, 2090.0),
        "failover after SIGKILL: excess over the fetch timeout": (30.0, 90.0),
    }
    failed = [rows[0], failover.FailoverRow("Kafka 4.4.0", error="not run: no java")]
    assert "Kafka 4.4.0: error: not run: no java" in failover.format_rows(failed)
    assert all(r.reference is None for r in quorum.failover_results(failed))


def test_one_kwire_round_per_signal(tmp_path: Path) -> None:
    quorum_ = failover.KwireQuorum(tmp_path / "q", 25)
    try:
        rounds = failover.run_rounds(quorum_, 1, settle_s=0.5)
    finally:
        quorum_.close()
    assert [r.signal_name for r in rounds] == ["SIGTERM", "SIGKILL"]
    for r in rounds:
        assert r.new_leader != r.stopped and r.new_epoch > r.old_epoch and r.recovery_ms >= 0
    crash = rounds[1]
    # a follower starts an election only a fetch timeout after its last answer, and under load
    # an answer is never older than the leader's longest fetch wait (500 ms) at the kill
    assert crash.recovery_ms >= failover.FETCH_TIMEOUT_MS - 500
    assert leftover_processes(tmp_path) == []
