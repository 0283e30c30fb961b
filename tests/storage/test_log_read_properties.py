"""Property tests of reads from the metadata log (``KafkaMetadataLog.read`` / ``LogSegment.read``,
``translateOffset``): the offset index lookup plus the scan from its position, over random logs.

For any start offset in the log, any byte budget and any upper offset:

* the reply is a run of whole batches, as written, from the batch holding the start offset, all
  in one segment, and ``position`` is where that batch starts in its segment;
* it holds at most the budget, or the first batch alone when that is larger (and nothing then
  when ``at_least_one`` is off), and it stops only where the next batch would pass the budget,
  the upper offset or the segment's end;
* every batch in it ends below the upper offset;
* ``read_region`` finds the same bytes without reading them, as a file region or as bytes.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.batch_scan import iter_batches
from storage.fileio import FileRegion
from storage.records import RecordBatch
from storage.segment import LogConfig
from tests.properties import examples
from tests.storage.test_segment_properties import appends, build_log, configs, log_dir

slow = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@settings(slow, max_examples=examples(25))
@given(config=configs, plan=appends(), data=st.data())
def test_a_read_is_the_longest_run_of_whole_batches_within_its_limits(
    config: LogConfig, plan: list[tuple[int, int, int]], data: st.DataObject
) -> None:
    with log_dir() as root:
        log, written = build_log(root, config, plan)
        segments = log.segments

        def segment_of(batch: RecordBatch) -> int:
            return max(s.base_offset for s in segments if s.base_offset <= batch.base_offset)

        for _ in range(4):
            start = data.draw(st.integers(0, log.log_end_offset - 1), label="start")
            first = next(i for i, b in enumerate(written) if b.last_offset >= start)
            # budgets at the edges too: exactly the size of a run of batches from the first, or a byte off
            edges = [sum(b.size_in_bytes for b in written[first:i + 1]) + d
                     for i in range(first, min(first + 4, len(written))) for d in (-1, 0, 1)]
            max_bytes = data.draw(st.integers(1, 3000) | st.sampled_from(edges), label="max bytes")
            max_offset = data.draw(st.none() | st.integers(start, log.log_end_offset + 1), label="max offset")
            at_least_one = data.draw(st.booleans(), label="at least one")
            info = log.read(start, max_bytes, max_offset, at_least_one=at_least_one)
            got = list(iter_batches(info.records))
            assert b"".join(b.to_bytes() for b in got) == info.records  # whole batches only
            home = segment_of(written[first])
            run = [b for b in written[first:] if segment_of(b) == home]
            # what the limits allow, batch by batch, from the first
            allowed = []
            for b in run:
                if max_offset is not None and b.last_offset >= max_offset:
                    break
                if allowed and sum(a.size_in_bytes for a in allowed) + b.size_in_bytes > max_bytes:
                    break
                allowed.append(b)
            if allowed and allowed[0].size_in_bytes > max_bytes and not at_least_one:
                allowed = []
            assert [b.to_bytes() for b in got] == [b.to_bytes() for b in allowed]
            if got:
                assert got[0].base_offset <= start <= got[0].last_offset
                assert info.segment_base_offset == home
                assert info.position == sum(b.size_in_bytes for b in written[:first] if segment_of(b) == home)

            if at_least_one and max_offset is None:
                min_region = data.draw(st.integers(0, 4000), label="min region bytes")
                region = log.read_region(start, max_bytes, min_region_bytes=min_region)
                try:
                    assert bytes(region) == info.records
                    assert isinstance(region, FileRegion) == (len(info.records) >= min_region)
                finally:
                    if isinstance(region, FileRegion):
                        region.close()
        log.close()
