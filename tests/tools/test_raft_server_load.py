"""``kwire test-raft-server``'s workload: both record types are exactly ``--record-size`` bytes,
carry a marker the failover checks read back, and are (config) or are not (no-op) replayed by the
controller; the high-watermark event marks a new leader's first committed batch, control batches
included; the generator idles while another node leads."""

from __future__ import annotations

import math
import time
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from messages.generated.config_record import ConfigRecord
from messages.generated.no_op_record import NoOpRecord
from messages.metadata import decode_record
from server.controller.controller import ControlManagers
from server.raft.events import AppendResult, CommittedBatch
from server.raft.types import LeaderAndEpoch
from tools.latency_histogram import LatencyHistogram
from tools.raft_load_records import (
    WORKLOAD_CONFIG_NAME,
    parse_workload_record,
    record_template,
    workload_value,
    workload_values,
)
from tools.raft_server_load import Workload, tick_seconds


@pytest.mark.parametrize("record_type", ["config", "no-op"])
def test_values_made_together_each_carry_their_marker(record_type: str) -> None:
    """Across a change of the counter's digit count, each value keeps the record's size."""
    values = workload_values(record_template(256, record_type), 4, 9_995, 10, 2)
    assert [len(v) for v in values] == [256] * 10
    assert [parse_workload_record(decode_record(v)[0]) for v in values] == [(4, c, 2) for c in range(9_995, 10_005)]


@pytest.mark.parametrize("record_type", ["config", "no-op"])
@pytest.mark.parametrize("size", [100, 256, 1000])
def test_records_have_the_size_and_carry_the_marker(record_type: str, size: int) -> None:
    template = record_template(size, record_type)
    value = workload_value(template, 12, 34_567, 3)
    assert len(value) == size
    record, _ = decode_record(value)
    assert isinstance(record, ConfigRecord if record_type == "config" else NoOpRecord)
    assert parse_workload_record(record) == (12, 34_567, 3)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="too small"):
        record_template(30, "no-op")
    with pytest.raises(ValueError, match="--record-type"):
        record_template(256, "raw")
    assert parse_workload_record(NoOpRecord()) is None
    assert parse_workload_record(ConfigRecord(resource_type=4, resource_name="", name="other", value="1.2.3.")) is None


def test_the_controller_replays_config_records_and_skips_no_op_ones() -> None:
    controller = ControlManagers(bootstrap=[])
    controller.replay(workload_value(record_template(256, "no-op"), 1, 0, 1), 5)
    assert controller.replication.configs == {}
    controller.replay(workload_value(record_template(256, "config"), 1, 0, 1), 6)
    [(key, entries)] = controller.replication.configs.items()
    assert key == (4, "") and list(entries) == [WORKLOAD_CONFIG_NAME]


class _Node:
    def __init__(self) -> None:
        self.appends: list[tuple[int, int]] = []  # (token, records)
        self.epochs: set[int] = set()

    def append(self, values: tuple[bytes, ...], epoch: int) -> int:
        self.epochs.add(epoch)
        self.appends.append((len(self.appends), len(values)))
        return len(self.appends) - 1


async def test_high_watermark_event_marks_the_first_committed_batch_of_the_epoch() -> None:
    events: list[dict[str, Any]] = []
    workload = Workload(1, 1000, 256, events.append)
    workload.handle_leader_change(LeaderAndEpoch(1, 4))
    workload.handle_commit(CommittedBatch(9, 9, 3, True, b""))  # an older epoch's batch
    workload.handle_commit(CommittedBatch(10, 10, 4, True, b""))  # this epoch's LeaderChange
    workload._tokens[0] = (time.time_ns() // 1_000_000, 2, 0)  # as _generate notes an append
    workload.handle_append_result(AppendResult(0, 11, 12, 4))
    workload.handle_commit(CommittedBatch(11, 12, 4, False, b""))
    kinds = [e["event"] for e in events]
    assert kinds == ["leader", "high-watermark", "first-commit", "committed"]
    assert events[1]["epoch"] == 4 and events[1]["high_watermark"] == 11
    assert events[2]["offset"] == 11 and events[3]["counter"] == 1
    workload.handle_leader_change(LeaderAndEpoch(2, 5))  # another leader: no event of its commits
    workload.handle_commit(CommittedBatch(13, 13, 5, True, b""))
    assert [e["event"] for e in events][4:] == ["leader"]


async def test_the_generator_idles_until_this_node_leads(autojump_clock: trio.testing.MockClock) -> None:
    workload = Workload(1, 1000, 256, lambda _e: None, stats_interval_ms=3_600_000)
    node = _Node()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(workload.run, node)
        workload.handle_leader_change(LeaderAndEpoch(2, 1))
        await trio.sleep(5)
        assert node.appends == []
        workload.handle_leader_change(LeaderAndEpoch(1, 2))
        await trio.sleep(0.5)
        assert 400 <= sum(n for _t, n in node.appends) <= 1000
        assert node.epochs == {2}  # appended as leader of the epoch it was told of
        nursery.cancel_scope.cancel()


def test_the_tick_is_a_fifth_of_the_linger_between_one_and_five_ms() -> None:
    assert [tick_seconds(ms) for ms in (0, 1, 5, 10, 25, 500)] == [0.001, 0.001, 0.001, 0.002, 0.005, 0.005]


async def test_latency_counts_from_each_records_due_time() -> None:
    """Three records due 1 ms apart, the first 50 ms ago, committed together: 50, 49 and 48 ms
    (a millisecond less or a few more each: the clock reads whole milliseconds, and time passes), each from its own due time, not
    one figure for the whole append."""
    workload = Workload(1, 1000, 256, lambda _e: None)
    workload.handle_leader_change(LeaderAndEpoch(1, 4))
    before = time.time_ns() / 1_000_000
    workload._tokens[0] = (before - 50, 3, 0)  # as _generate notes an append of records due then
    workload.handle_append_result(AppendResult(0, 11, 13, 4))
    workload.handle_commit(CommittedBatch(11, 13, 4, False, b""))
    elapsed = time.time_ns() / 1_000_000 - before
    first = len(workload._window.counts) - 1  # the highest latency recorded
    assert _expanded(workload._window) == [first - 2, first - 1, first]  # one commit time, due 1 ms apart
    assert 49 <= first <= 50 + elapsed  # the commit time is read in whole milliseconds


async def test_records_due_after_their_commit_count_zero() -> None:
    """An append's later records may be due after the batch committed (the generator ran
    ahead of the clock): their latency is 0, never negative, and the earlier ones keep theirs."""
    workload = Workload(1, 1000, 256, lambda _e: None)
    workload.handle_leader_change(LeaderAndEpoch(1, 4))
    before = time.time_ns() / 1_000_000
    workload._tokens[0] = (before - 2, 200, 0)  # due 2 ms ago, then every 1 ms: the last 197 ms ahead
    workload.handle_append_result(AppendResult(0, 20, 219, 4))
    workload.handle_commit(CommittedBatch(20, 219, 4, False, b""))
    latencies = _expanded(workload._window)
    assert len(latencies) == 200 and latencies[-1] >= 1  # the clock reads whole milliseconds
    assert latencies[:197] == [0] * 197  # due at or after the commit: 0, never negative


def _sorted_percentiles(latencies: list[int]) -> dict[str, float]:
    """The reference: nearest-rank percentiles of the sorted list (rank ceil(q * n), 1-based)."""
    values = sorted(latencies)
    if not values:
        return {"p50": 0.0, "p75": 0.0, "p99": 0.0, "p999": 0.0, "max": 0.0}
    n = len(values)
    ranked = {name: float(values[max(1, math.ceil(q * n - 1e-9)) - 1])
              for name, q in (("p50", 0.5), ("p75", 0.75), ("p99", 0.99), ("p999", 0.999))}
    return ranked | {"max": float(values[-1])}


def _expanded(histogram: LatencyHistogram) -> list[int]:
    """Every latency a histogram holds, ascending."""
    return [ms for ms, count in enumerate(histogram.counts) for _ in range(count)]


@given(
    st.lists(
        st.tuples(
            st.floats(min_value=-50, max_value=5_000, allow_nan=False),
            st.integers(min_value=0, max_value=400),
            st.sampled_from([1000 / t for t in (1, 7, 1_000, 3_000, 20_000, 160_000, 240_000)]),
        ),
        max_size=8,
    )
)
def test_a_run_lands_where_each_record_alone_would(runs: list[tuple[float, int, float]]) -> None:
    """Per millisecond, a histogram of runs holds what listing each record's latency gives,
    so its percentiles are exactly those of the sorted latencies."""
    histogram = LatencyHistogram()
    one_by_one: list[int] = []
    for late_ms, count, step_ms in runs:
        histogram.add_run(late_ms, count, step_ms)
        one_by_one += [max(0, int(late_ms - k * step_ms)) for k in range(count)]
    assert _expanded(histogram) == sorted(one_by_one)
    assert len(histogram) == len(one_by_one)
    assert histogram.percentiles() == _sorted_percentiles(one_by_one)


def test_merged_windows_give_the_percentiles_of_both() -> None:
    first, second, both = LatencyHistogram(), LatencyHistogram(), LatencyHistogram()
    first.add_run(30.5, 1_000, 0.01)  # 30 .. 21 ms
    second.add_run(900.0, 10, 1.0)  # 900 .. 891 ms
    both.merge(first)
    both.merge(second)
    assert len(both) == 1_010
    assert both.percentiles() == _sorted_percentiles(_expanded(first) + _expanded(second))
    assert both.percentiles()["p99"] == 30.0 and both.percentiles()["p999"] == 899.0  # ranks 1,000 and 1,009
