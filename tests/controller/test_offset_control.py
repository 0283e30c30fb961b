"""Offset control (``server.controller.offset_control``): the next write offset, the ledger of
records applied ahead of their commit, and the decisions to go back to the committed image."""

from __future__ import annotations

from kwire.errors import Errors
from messages.generated.fence_broker_record import FenceBrokerRecord
from messages.generated.no_op_record import NoOpRecord
from messages.metadata import encode_record
from server.controller.offset_control import AppliedAhead, OffsetControl
from server.raft.events import AppendResult, CommittedBatch
from storage.batch_builder import build_batch
from storage.record_codec import SimpleRecord

FENCE = encode_record(FenceBrokerRecord(id=1, epoch=2), 0)
NO_OP = encode_record(NoOpRecord(), 0)


def _batch(base_offset: int, values: list[bytes], epoch: int = 3) -> CommittedBatch:
    data = build_batch([SimpleRecord(v) for v in values], base_offset=base_offset, partition_leader_epoch=epoch)
    return CommittedBatch(base_offset, base_offset + len(values) - 1, epoch, False, bytes(data))


def test_the_next_write_offset_counts_the_appends_not_handed_over_yet() -> None:
    offsets = OffsetControl()
    assert offsets.next_write_offset(10) == 10
    offsets.appended(-1, 10, 3, epoch=3, ahead=True)
    assert offsets.next_write_offset(10) == 13, "the core's log end offset does not count them yet"
    assert offsets.write_end == 13 and offsets.uncommitted(10) == 3
    offsets.handed_over()
    assert offsets.next_write_offset(13) == 13


def test_only_appends_applied_ahead_enter_the_ledger() -> None:
    offsets = OffsetControl()
    offsets.appended(-1, 5, 1, epoch=3, ahead=False)  # a NoOp, or a write behind a kraft.version upgrade
    assert not offsets.speculating and offsets.write_end == 6
    offsets.appended(-2, 6, 2, epoch=3, ahead=True)
    assert offsets.speculating and list(offsets.applied) == [AppliedAhead(-2, 6, 7, 3)]


def test_a_committed_batch_replays_only_what_was_not_applied_ahead() -> None:
    offsets = OffsetControl()
    offsets.appended(-1, 11, 2, epoch=3, ahead=True)
    replayed: list[int] = []
    offsets.replay_committed(_batch(10, [FENCE, FENCE, FENCE, NO_OP, FENCE]), lambda value, offset: replayed.append(offset))
    assert replayed == [10, 14], "11-12 were applied when appended; a NoOp is not replayed"
    assert not offsets.speculating, "the entry is retired once its last offset committed"
    assert offsets.misplaced(AppendResult(-1, 99, 100, 3)) is None, "a retired entry is forgotten"


def test_a_batch_ending_inside_an_entry_keeps_it_in_the_ledger() -> None:
    offsets = OffsetControl()
    offsets.appended(-1, 10, 3, epoch=3, ahead=True)
    replayed: list[int] = []
    offsets.replay_committed(_batch(10, [FENCE, FENCE]), lambda value, offset: replayed.append(offset))
    assert replayed == [] and offsets.speculating


def test_the_records_applied_ahead_are_outlived_off_their_epoch() -> None:
    offsets = OffsetControl()
    assert not offsets.outlived(None), "nothing applied: nothing to go back on"
    offsets.appended(-1, 10, 1, epoch=3, ahead=True)
    assert not offsets.outlived(3)
    assert offsets.outlived(4) and offsets.outlived(None)


def test_a_committed_batch_of_another_epoch_where_it_reaches_the_ledger_is_not_ours() -> None:
    offsets = OffsetControl()
    offsets.appended(-1, 10, 2, epoch=3, ahead=True)
    assert offsets.still_ours(3, _batch(10, [FENCE, FENCE], epoch=3))
    assert offsets.still_ours(3, _batch(8, [FENCE, FENCE], epoch=2)), "it ends before the entry"
    assert not offsets.still_ours(3, _batch(9, [FENCE, FENCE], epoch=2))
    assert not offsets.still_ours(None, _batch(10, [FENCE, FENCE], epoch=3)), "off the leader"


def test_an_append_that_lands_elsewhere_or_is_refused_is_misplaced() -> None:
    offsets = OffsetControl()
    offsets.appended(-1, 10, 2, epoch=3, ahead=True)
    offsets.appended(-2, 12, 1, epoch=3, ahead=False)
    assert offsets.misplaced(AppendResult(-1, 10, 11, 3)) is None
    assert offsets.misplaced(AppendResult(-1, 12, 13, 3)) == AppliedAhead(-1, 10, 11, 3)
    refused = AppendResult(-1, -1, -1, 3, Errors.NOT_LEADER_OR_FOLLOWER)
    assert offsets.misplaced(refused) == AppliedAhead(-1, 10, 11, 3)
    assert offsets.misplaced(AppendResult(-2, 40, 40, 3)) is None, "not applied ahead: nothing to revert"
    assert offsets.misplaced(AppendResult(7, 40, 40, 3)) is None, "another writer's append"


def test_clear_and_failed_writes_reset_the_ledger_and_the_write_offset() -> None:
    offsets = OffsetControl()
    offsets.appended(-1, 10, 2, epoch=3, ahead=True)
    offsets.writes_failed()
    assert offsets.write_end == 0 and offsets.uncommitted(12) < 0
    assert offsets.speculating, "the ledger goes only with the image it describes"
    offsets.clear()
    assert not offsets.speculating and offsets.misplaced(AppendResult(-1, 99, 100, 3)) is None


def test_with_nothing_applied_ahead_every_replayed_record_of_the_batch_is_replayed() -> None:
    offsets = OffsetControl()
    replayed: list[int] = []
    offsets.replay_committed(_batch(20, [FENCE, NO_OP, FENCE]), lambda value, offset: replayed.append(offset))
    assert replayed == [20, 22], "a NoOp is passed over"
