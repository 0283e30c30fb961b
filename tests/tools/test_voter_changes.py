"""Plans of single-voter changes (tools.voter_changes): order, resumption, and the caught-up
majority check before each removal."""

from __future__ import annotations

import pytest

from kwire.uuid import Uuid
from messages.generated.describe_quorum_response import PartitionData, ReplicaState
from tools.quorum_client import QuorumToolError, QuorumView
from tools.voter_changes import (
    Step,
    TargetVoter,
    _check_removal,
    caught_up_voters,
    plan_reassignment,
    plan_replacement,
)

NOW = 1_700_000_000_000
DIRS = {i: Uuid.random() for i in range(1, 8)}
NEW_DIR = Uuid.random()


def _view(voters: dict[int, Uuid], leader: int, lag_ms: dict[int, int] | None = None) -> QuorumView:
    lag_ms = lag_ms or {}
    return QuorumView(
        "cluster",
        PartitionData(
            leader_id=leader,
            leader_epoch=3,
            high_watermark=100,
            current_voters=[
                ReplicaState(replica_id=i, replica_directory_id=d, log_end_offset=100,
                             last_caught_up_timestamp=NOW - lag_ms.get(i, 0) if lag_ms.get(i, 0) >= 0 else -1)
                for i, d in voters.items()
            ],
        ),
        [],
    )


def _target(*ids: int, replaced: int | None = None) -> list[TargetVoter]:
    return [TargetVoter(i, NEW_DIR if i == replaced else DIRS[i], (("CONTROLLER", "localhost", 9000 + i),)) for i in ids]


def _kinds(steps: list[Step]) -> list[tuple[str, int]]:
    return [(s.kind, s.voter_id) for s in steps]


def test_reassignment_adds_first_and_removes_the_leader_last() -> None:
    view = _view({1: DIRS[1], 2: DIRS[2], 3: DIRS[3]}, leader=1)
    assert _kinds(plan_reassignment(view, _target(1, 2, 3, 4, 5))) == [("add", 4), ("add", 5)]
    assert _kinds(plan_reassignment(view, _target(4, 5, 6))) == [
        ("add", 4), ("add", 5), ("add", 6), ("remove", 2), ("remove", 3), ("remove", 1),
    ]
    # a replica key replaced in place: the id is removed before it comes back
    steps = plan_reassignment(view, _target(1, 2, 3, replaced=2))
    assert _kinds(steps) == [("remove", 2), ("add", 2)]
    assert steps[0].directory_id == DIRS[2] and steps[1].directory_id == NEW_DIR


def test_a_plan_run_again_resumes_where_it_stopped() -> None:
    halfway = _view({1: DIRS[1], 2: DIRS[2], 3: DIRS[3], 4: DIRS[4], 5: DIRS[5], 6: DIRS[6]}, leader=1)
    assert _kinds(plan_reassignment(halfway, _target(4, 5, 6))) == [("remove", 2), ("remove", 3), ("remove", 1)]
    done = _view({4: DIRS[4], 5: DIRS[5], 6: DIRS[6]}, leader=5)
    assert plan_reassignment(done, _target(4, 5, 6)) == []


def test_replacement_removes_the_old_directory_then_adds_the_new() -> None:
    view = _view({1: DIRS[1], 2: DIRS[2], 3: DIRS[3]}, leader=1)
    new = TargetVoter(3, NEW_DIR, (("CONTROLLER", "localhost", 9003),))
    assert [(s.kind, s.directory_id) for s in plan_replacement(view, new)] == [("remove", DIRS[3]), ("add", NEW_DIR)]
    replaced = _view({1: DIRS[1], 2: DIRS[2], 3: NEW_DIR}, leader=1)
    assert plan_replacement(replaced, new) == []
    with pytest.raises(QuorumToolError, match="not a voter"):
        plan_replacement(view, TargetVoter(7, NEW_DIR, ()))


def test_bad_targets_are_refused() -> None:
    view = _view({1: DIRS[1]}, leader=1)
    with pytest.raises(QuorumToolError, match="empty"):
        plan_reassignment(view, [])
    with pytest.raises(QuorumToolError, match="twice"):
        plan_reassignment(view, _target(2, 2))


def test_a_removal_that_would_leave_no_caught_up_majority_is_refused() -> None:
    # 5 voters, 3 and 4 lagging: removing 5 leaves {1, 2, 3, 4}, whose majority 3 is not caught up
    view = _view({i: DIRS[i] for i in range(1, 6)}, leader=1, lag_ms={3: 60_000, 4: -1})
    assert caught_up_voters(view, NOW, 10_000) == {1, 2, 5}
    with pytest.raises(QuorumToolError, match="refusing to remove voter 5"):
        _check_removal(view, Step("remove", 5, DIRS[5]), NOW, 10_000)
    # removing a lagging one leaves {1, 2, 4, 5} with 3 caught up: allowed
    _check_removal(view, Step("remove", 3, DIRS[3]), NOW, 10_000)
    alone = _view({1: DIRS[1]}, leader=1)
    with pytest.raises(QuorumToolError, match="refusing"):
        _check_removal(alone, Step("remove", 1, DIRS[1]), NOW, 10_000)
