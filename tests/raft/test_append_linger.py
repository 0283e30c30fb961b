"""The leader's append accumulator (``controller.quorum.append.linger.ms``, Kafka's
BatchAccumulator): records linger, leave as one batch at the promised offsets, full batches leave
at once, oversized appends are refused, and lingering records die with the epoch."""

from __future__ import annotations

from kwire.errors import Errors
from server.raft.accumulator import MAX_BATCH_SIZE_BYTES, BatchAccumulator
from server.raft.events import ClientAppend
from server.raft.roles import Leader, Unattached
from storage.batch_scan import iter_batches
from storage.control import read_kraft_batch
from storage.records import RecordBatch
from tests.raft.helpers import begin_epoch_request, elect_local_leader, make_context


def _data_batches(out_appends: list[bytes]) -> list[tuple[int, list[bytes]]]:
    result = []
    for data in out_appends:
        for batch in iter_batches(data):
            if not batch.is_control:
                records = read_kraft_batch(RecordBatch(bytes(batch.buffer)), validate_crc=True).records
                result.append((batch.base_offset, [bytes(r) for r in records]))  # type: ignore[arg-type]
    return result


def test_records_linger_then_leave_as_one_batch_at_the_promised_offsets() -> None:
    context = make_context(append_linger_ms=25)
    leader = elect_local_leader(context)
    end = context.core.view.log_end_offset()
    start = context.now
    out1 = context.step(ClientAppend(1, (b"a", b"b")))
    context.now += 10
    out2 = context.step(ClientAppend(2, (b"c",)))
    assert not out1.appends and not out2.appends
    assert [(r.token, r.base_offset, r.last_offset, r.epoch) for r in out1.append_results + out2.append_results] == [
        (1, end, end + 1, leader.epoch),
        (2, end + 2, end + 2, leader.epoch),
    ]
    assert out2.next_deadline_ms == start + 25
    context.now = start + 24
    assert not context.tick().appends
    context.now = start + 25
    out = context.tick()
    assert _data_batches(out.appends) == [(end, [b"a", b"b", b"c"])]
    assert out.flush
    assert context.core.view.log_end_offset() == end + 3


def test_a_held_append_lingers_from_the_time_it_was_made() -> None:
    """``ClientAppend.appended_ms`` (an append a driver held): the linger runs from then, so an
    append handed over as its linger ends leaves in that step, and one made 10 ms ago leaves
    15 ms later."""
    context = make_context(append_linger_ms=25)
    elect_local_leader(context)
    end = context.core.view.log_end_offset()
    out = context.step(ClientAppend(1, (b"late",), appended_ms=context.now - 25))
    assert _data_batches(out.appends) == [(end, [b"late"])]
    out = context.step(ClientAppend(2, (b"held",), appended_ms=context.now - 10))
    assert not out.appends and out.next_deadline_ms == context.now + 15


def test_an_append_that_must_not_linger_leaves_with_what_lingered_before() -> None:
    """``ClientAppend.drain_now`` (a controller write, which nothing can join): the open batch,
    with the records lingering before it, is appended in the same step."""
    context = make_context(append_linger_ms=1000)
    elect_local_leader(context)
    end = context.core.view.log_end_offset()
    assert not context.step(ClientAppend(1, (b"noop",))).appends
    out = context.step(ClientAppend(2, (b"write", b"more"), drain_now=True))
    assert _data_batches(out.appends) == [(end, [b"noop", b"write", b"more"])]


def test_linger_zero_appends_in_the_same_step() -> None:
    context = make_context(append_linger_ms=0)
    elect_local_leader(context)
    end = context.core.view.log_end_offset()
    out = context.step(ClientAppend(1, (b"x",)))
    assert _data_batches(out.appends) == [(end, [b"x"])]


def test_linger_zero_appends_handed_over_together_leave_as_one_batch() -> None:
    """``RaftCore.step_many``: appends that queued while the driver waited on the disk reach
    the core in one step and leave together, each with its own offsets."""
    context = make_context(append_linger_ms=0)
    leader = elect_local_leader(context)
    end = context.core.view.log_end_offset()
    out = context.core.step_many(context.now, [ClientAppend(1, (b"x",)), ClientAppend(2, (b"y", b"z"))])
    assert _data_batches(out.appends) == [(end, [b"x", b"y", b"z"])]
    assert [(r.token, r.base_offset, r.last_offset, r.epoch) for r in out.append_results] == [
        (1, end, end, leader.epoch), (2, end + 1, end + 2, leader.epoch),
    ]
    assert out.flush


def test_a_full_batch_is_drained_without_waiting_for_the_linger() -> None:
    context = make_context(append_linger_ms=1000, max_batch_size_bytes=8 * 1024)
    elect_local_leader(context)
    end = context.core.view.log_end_offset()
    value = b"v" * 900
    outs = [context.step(ClientAppend(token, (value, value))) for token in range(1, 6)]
    # 2 x 923 bytes per append: the fifth no longer fits in the first 8 KiB batch
    assert all(not o.appends for o in outs[:4])
    batches = _data_batches(outs[4].appends)
    assert [(base, len(values)) for base, values in batches] == [(end, 8), (end + 8, 2)]
    assert [r.base_offset for o in outs for r in o.append_results] == [end + 2 * i for i in range(5)]


def test_an_append_bigger_than_a_batch_is_refused() -> None:
    context = make_context(append_linger_ms=0)
    elect_local_leader(context)
    out = context.step(ClientAppend(7, (b"z" * MAX_BATCH_SIZE_BYTES,)))  # 8 MiB, plus framing
    assert [(r.token, r.error_code) for r in out.append_results] == [(7, Errors.RECORD_LIST_TOO_LARGE)]
    assert not out.appends


def test_lingering_records_are_dropped_with_the_epoch() -> None:
    context = make_context(append_linger_ms=25)
    leader = elect_local_leader(context)
    end = context.core.view.log_end_offset()
    context.step(ClientAppend(1, (b"lost",)))
    out, _ = context.request(begin_epoch_request(2, leader.epoch + 1), 1)
    assert not isinstance(context.core.state, Leader)
    assert not _data_batches(out.appends)
    context.now += 100
    assert not _data_batches(context.tick().appends)
    assert context.core.view.log_end_offset() == end


def test_appends_after_losing_leadership_are_refused() -> None:
    context = make_context(append_linger_ms=25)
    out = context.step(ClientAppend(3, (b"x",)))
    assert isinstance(context.core.state, Unattached)
    assert [r.error_code for r in out.append_results] == [Errors.NOT_LEADER_OR_FOLLOWER]


def test_an_append_for_another_epoch_is_refused() -> None:
    """A state machine that has not yet seen the epoch change (a node restarted as a former
    leader is told of its old epoch while Resigned, then leads the next) appends for the old
    epoch: refused, as ``KafkaRaftClient.prepareAppend`` refuses a stale epoch, so its records
    never reach the new epoch's log. The leader's own epoch, or none given, is accepted."""
    context = make_context(append_linger_ms=0)
    leader = elect_local_leader(context)
    end = context.core.view.log_end_offset()
    out = context.step(ClientAppend(1, (b"stale",), epoch=leader.epoch - 1))
    assert [(r.error_code, r.epoch) for r in out.append_results] == [(Errors.NOT_LEADER_OR_FOLLOWER, leader.epoch)]
    assert not _data_batches(out.appends)
    out2 = context.step(ClientAppend(2, (b"current",), epoch=leader.epoch))
    out3 = context.step(ClientAppend(3, (b"unchecked",)))
    assert [r.error_code for r in out2.append_results + out3.append_results] == [Errors.NONE, Errors.NONE]
    context.now += 1
    written = out2.appends + out3.appends + context.tick().appends
    values = [v for _, batch in _data_batches(written) for v in batch]
    assert values == [b"current", b"unchecked"]
    assert context.core.view.log_end_offset() == end + 2


def test_accumulator_groups_are_all_or_nothing() -> None:
    acc = BatchAccumulator(epoch=3, linger_ms=5, max_batch_bytes=250)
    assert acc.deadline_ms is None and not acc.needs_drain(0)
    assert acc.append([b"a" * 50, b"b" * 50], now_ms=10)
    assert acc.deadline_ms == 15 and not acc.needs_drain(14) and acc.needs_drain(15)
    assert acc.append([b"c" * 50], now_ms=11)  # does not fit with the first group: new batch
    assert acc.needs_drain(11) and len(acc) == 3
    assert acc.drain() == [[b"a" * 50, b"b" * 50], [b"c" * 50]]
    assert len(acc) == 0 and acc.deadline_ms is None and acc.drain() == []
    assert not acc.append([b"d" * 200], now_ms=20)
    assert len(acc) == 0 and acc.deadline_ms is None
