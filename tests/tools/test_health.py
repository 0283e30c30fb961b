"""``kwire health``'s judgement (``tools.health.assess``) over DescribeQuorum answers; the tool
runs against stock and kwire quorums in ``compat/test_health.py``."""

from __future__ import annotations

from kwire.uuid import Uuid
from messages.generated.describe_quorum_response import PartitionData, ReplicaState
from tools.health import DEGRADED, HEALTHY, NO_QUORUM, assess
from tools.quorum_client import QuorumView

NOW = 1_700_000_000_000


def _view(leader: int, *voters: tuple[int, int, int]) -> QuorumView:
    """Voters as (id, log end offset, last caught up ms before NOW; -1: never)."""
    states = [
        ReplicaState(
            replica_id=i, replica_directory_id=Uuid.from_longs(0, i), log_end_offset=leo,
            last_fetch_timestamp=NOW, last_caught_up_timestamp=-1 if ago < 0 else NOW - ago,
        )
        for i, leo, ago in voters
    ]
    partition = PartitionData(leader_id=leader, leader_epoch=3, high_watermark=100, current_voters=states, observers=[])
    return QuorumView("cluster", partition, [])


def test_every_voter_caught_up_is_healthy() -> None:
    result = assess(_view(1, (1, 100, 0), (2, 100, 200), (3, 99, 900)), caught_up_ms=1000)
    assert result.status == HEALTHY and result.problems == []
    assert [v.lag for v in result.voters] == [0, 0, 1]


def test_a_voter_behind_for_too_long_degrades_and_is_named() -> None:
    result = assess(_view(1, (1, 100, 0), (2, 100, 0), (3, 40, 5000)), caught_up_ms=1000)
    assert result.status == DEGRADED
    assert result.problems == ["voter 3 is not caught up: last caught up 5000 ms ago, 60 records behind"]
    never = assess(_view(1, (1, 100, 0), (2, 0, -1), (3, 100, 0)), caught_up_ms=1000)
    assert never.status == DEGRADED and "never caught up" in never.problems[0]


def test_no_leader_is_no_quorum() -> None:
    assert assess(_view(-1, (1, 100, 0), (2, 100, 0), (3, 100, 0))).status == NO_QUORUM


def test_a_restart_is_safe_only_while_a_caught_up_majority_remains() -> None:
    view = _view(1, (1, 100, 0), (2, 100, 0), (3, 40, 9000))
    assert assess(view, caught_up_ms=1000, restart_id=3).safe_to_restart["safe"] is True  # type: ignore[index]
    assert assess(view, caught_up_ms=1000, restart_id=2).safe_to_restart["safe"] is False  # type: ignore[index]
    assert assess(view, caught_up_ms=1000, restart_id=1).safe_to_restart["safe"] is False  # type: ignore[index]
    assert assess(view, caught_up_ms=1000, restart_id=7).safe_to_restart["safe"] is True  # type: ignore[index]
    five = _view(1, (1, 100, 0), (2, 100, 0), (3, 100, 0), (4, 100, 0), (5, 0, -1))
    assert assess(five, caught_up_ms=1000, restart_id=4).safe_to_restart["safe"] is True  # type: ignore[index]
