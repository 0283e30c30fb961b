"""Claiming and renouncing the active controller (``server.controller.leadership``), over a
hand-moved raft role, the host's replay as a plain object, and a real controller, offsets
ledger and write queue."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from kwire.errors import Errors
from messages.generated.feature_level_record import FeatureLevelRecord
from messages.metadata import encode_record
from server.controller.controller import ControlManagers
from server.controller.errors import ApiError
from server.controller.leadership import Leadership
from server.controller.offset_control import OffsetControl
from server.controller.outbox import RaftView
from server.controller.write_queue import DeferredWriteQueue
from server.raft.roles import EpochState, Leader
from server.raft.types import LeaderAndEpoch, ReplicaKey, VoterSet

METADATA_VERSION = (FeatureLevelRecord(name="metadata.version", feature_level=21), 0)


class _Follower(EpochState):
    name = "Follower"


@dataclass
class _Raft:
    state: EpochState
    leader_id: int | None

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_and_epoch(self) -> LeaderAndEpoch:
        return LeaderAndEpoch(self.leader_id, self.state.epoch)


@dataclass
class _Host:
    replayed_offset: int = 0
    stopping: bool = False
    loading: bool = False
    lines: list[str] = field(default_factory=list)

    @property
    def log(self) -> Any:
        host = self

        class Log:
            def info(self, msg: str, *args: Any) -> None:
                host.lines.append(msg % args)

            def error(self, msg: str, *args: Any) -> None:
                host.lines.append(msg % args)

        return Log()


def _leader(epoch: int, epoch_start_offset: int) -> Leader:
    return Leader(epoch, ReplicaKey(1), VoterSet.static({1: ("host1", 9001), 2: ("host2", 9002)}),
                  epoch_start_offset, {1, 2}, 0, 2000)


class Fixture:
    def __init__(self, state: EpochState, *, metadata_version: bool = True) -> None:
        self.raft = _Raft(state, 1 if isinstance(state, Leader) else 2)
        self.controller = ControlManagers(bootstrap=[METADATA_VERSION])
        if metadata_version:
            self.controller.replay(encode_record(*METADATA_VERSION), 0)
        self.host = _Host()
        self.offsets = OffsetControl()
        self.queue: DeferredWriteQueue[Any] = DeferredWriteQueue()
        self.events: list[str] = []
        self.leadership = Leadership(1, cast(RaftView, self.raft), self.controller, self.host, self.offsets,
                                     self.queue, revert=lambda now_ms, reason: self.events.append(f"revert: {reason}"))

    def pending_write(self, last_offset: int) -> list[ApiError | None]:
        answers: list[ApiError | None] = []

        def answer(error: ApiError | None) -> None:
            self.events.append("write answered")
            answers.append(error)

        self.queue.add(-1, answer, last_offset=last_offset)
        return answers


def test_the_epoch_is_claimed_once_everything_before_its_start_offset_is_replayed() -> None:
    fixture = Fixture(_leader(3, 10))
    fixture.host.replayed_offset = 4
    leadership = fixture.leadership
    assert leadership.follow(100) is None
    assert not leadership.claimed() and leadership.active_controller() is None
    assert leadership.not_controller().message == "No controller appears to be active.", "it leads, not active yet"
    fixture.host.replayed_offset = 10
    activation = leadership.follow(250)
    assert activation is not None
    assert leadership.claimed() and leadership.active_controller() is fixture.controller
    assert fixture.controller.active_epoch == 3
    assert fixture.host.lines == ["node 1: the active controller of epoch 3, 150 ms after its election "
                                  "(6 committed records replayed meanwhile up to the epoch start offset 10)"]
    assert leadership.follow(300) is None, "an epoch is claimed once"


def test_no_claim_while_stopping_or_while_an_image_is_rebuilt() -> None:
    fixture = Fixture(_leader(3, 0))
    fixture.host.replayed_offset = 5
    fixture.host.stopping = True
    assert fixture.leadership.follow(0) is None
    fixture.host.stopping, fixture.host.loading = False, True
    assert fixture.leadership.follow(0) is None
    assert fixture.controller.active_epoch is None
    fixture.host.loading = False
    assert fixture.leadership.follow(0) is not None


def test_a_claimed_epoch_without_a_metadata_version_is_not_yet_the_active_controller() -> None:
    fixture = Fixture(_leader(2, 0), metadata_version=False)
    activation = fixture.leadership.follow(0)
    assert activation is not None and activation.records, "the bootstrap records go first"
    assert fixture.leadership.claimed() and fixture.leadership.active_controller() is None


def test_off_the_leader_the_controller_renounces_and_every_write_gets_not_controller() -> None:
    fixture = Fixture(_leader(3, 0))
    assert fixture.leadership.follow(0) is not None
    answers = fixture.pending_write(7)
    fixture.offsets.appended(-1, 5, 3, 3, ahead=False)
    fixture.raft.state, fixture.raft.leader_id = _Follower(4), 2
    assert fixture.leadership.follow(10) is None
    assert fixture.controller.active_epoch is None and not fixture.leadership.claimed()
    [error] = answers
    assert error is not None and error.error == Errors.NOT_CONTROLLER
    assert error.message == "The active controller appears to be node 2."
    assert not fixture.queue.pending and fixture.offsets.write_end == 0
    assert fixture.events == ["write answered"], "nothing was applied ahead: no revert"


def test_records_applied_ahead_in_a_lost_epoch_send_the_image_back_before_the_writes_fail() -> None:
    fixture = Fixture(_leader(3, 0))
    assert fixture.leadership.follow(0) is not None
    fixture.pending_write(7)
    fixture.offsets.appended(-1, 5, 3, 3, ahead=True)
    fixture.raft.state = _leader(5, 8)  # this node leads again, in a later epoch
    fixture.host.replayed_offset = 8
    activation = fixture.leadership.follow(20)
    assert fixture.events == ["revert: the leadership of the epoch it was appended in was lost", "write answered"]
    assert activation is not None and fixture.controller.active_epoch == 5


def test_claiming_a_later_epoch_fails_the_writes_of_an_earlier_one() -> None:
    fixture = Fixture(_leader(3, 0))
    assert fixture.leadership.follow(0) is not None
    answers = fixture.pending_write(7)
    fixture.raft.state = _leader(4, 9)  # never seen off the leader in between
    fixture.host.replayed_offset = 9
    assert fixture.leadership.follow(30) is not None
    [error] = answers
    assert error is not None and error.error == Errors.NOT_CONTROLLER
    assert fixture.events == ["write answered"]
    assert fixture.leadership.leader_epoch() == 4 and fixture.controller.active_epoch == 4
