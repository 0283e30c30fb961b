"""Property tests of v2 record batches as the log stores them (``DefaultRecordBatch``).

* The CRC-32C covers Attributes to the end of the batch: any single flipped bit there, or in the
  CRC field itself, makes the batch invalid, and so does any burst of up to 32 flipped bits
  (a CRC of degree 32 detects every such burst). BaseOffset and PartitionLeaderEpoch lie outside
  it, so that the log can stamp them without recomputing it (``setLastOffset`` /
  ``setPartitionLeaderEpoch``); a flipped Length or Magic is refused by the framing.
* A run of batches, with any compression, scans back whole; cut anywhere it yields exactly the
  whole batches before the cut and reports the torn tail; damaged anywhere it yields exactly the
  batches before the damaged one.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.batch_builder import build_batch, set_base_offset, set_partition_leader_epoch
from storage.batch_scan import iter_batches, next_offset_after, scan_batches
from storage.compression import CompressionType
from storage.errors import CorruptRecordError
from storage.record_codec import SimpleRecord
from storage.records import RecordBatch
from tests.properties import examples

CRC_AT = 17  # Crc field: bytes 17..20; the CRC covers bytes 21.. (Attributes onwards)
ATTRIBUTES_AT = 21

codecs = st.sampled_from(list(CompressionType))
records_st = st.lists(
    st.builds(
        SimpleRecord,
        value=st.none() | st.binary(max_size=40),
        key=st.none() | st.binary(max_size=10),
        timestamp=st.integers(0, 2**41),
    ),
    min_size=1,
    max_size=6,
)

slow_ok = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def batch_st(draw: st.DrawFn, base_offset: int = 0) -> bytes:
    return build_batch(
        draw(records_st),
        base_offset=base_offset,
        partition_leader_epoch=draw(st.integers(0, 2**31 - 1)),
        compression=draw(codecs),
    )


@st.composite
def run_st(draw: st.DrawFn) -> list[bytes]:
    """1 to 5 consecutive batches from a random base offset."""
    offset = draw(st.integers(0, 2**40))
    out = []
    for _ in range(draw(st.integers(1, 5))):
        raw = draw(batch_st(base_offset=offset))
        out.append(raw)
        offset = RecordBatch(raw).next_offset
    return out


def flip(raw: bytes, bit: int) -> bytearray:
    out = bytearray(raw)
    out[bit // 8] ^= 0x80 >> (bit % 8)
    return out


@settings(slow_ok, max_examples=examples(150))
@given(raw=batch_st(), data=st.data())
def test_any_single_flipped_bit_under_the_crc_is_detected(raw: bytes, data: st.DataObject) -> None:
    assert RecordBatch(raw).is_valid()
    bit = data.draw(st.integers(CRC_AT * 8, len(raw) * 8 - 1))
    batch = RecordBatch(flip(raw, bit))
    assert not batch.is_valid()
    with pytest.raises(CorruptRecordError):
        batch.ensure_valid()


@settings(slow_ok, max_examples=examples(100))
@given(raw=batch_st(), data=st.data())
def test_any_burst_of_up_to_32_bits_is_detected(raw: bytes, data: st.DataObject) -> None:
    length = data.draw(st.integers(1, 32))
    first = data.draw(st.integers(ATTRIBUTES_AT * 8, len(raw) * 8 - length))
    # a burst starts and ends with a flipped bit; the bits between are arbitrary
    inner = data.draw(st.integers(0, 2 ** max(0, length - 2) - 1)) if length > 2 else 0
    pattern = 1 if length == 1 else (1 << (length - 1)) | (inner << 1) | 1
    damaged = bytearray(raw)
    for i in range(length):
        if pattern >> i & 1:
            bit = first + i
            damaged[bit // 8] ^= 0x80 >> (bit % 8)
    assert not RecordBatch(damaged).is_valid()


@settings(slow_ok, max_examples=examples(80))
@given(raw=batch_st(), data=st.data())
def test_base_offset_and_epoch_lie_outside_the_crc(raw: bytes, data: st.DataObject) -> None:
    bit = data.draw(st.sampled_from([*range(0, 64), *range(96, 128)]))
    damaged = RecordBatch(flip(raw, bit))
    assert damaged.is_valid()
    original = RecordBatch(raw)
    if bit < 64:
        assert damaged.base_offset == original.base_offset ^ (1 << (63 - bit)) or (
            bit == 0 and damaged.base_offset == original.base_offset - 2**63
        )
    else:
        assert damaged.partition_leader_epoch != original.partition_leader_epoch


@settings(slow_ok, max_examples=examples(60))
@given(raw=batch_st(), data=st.data())
def test_flipped_length_or_magic_is_refused_by_the_framing(raw: bytes, data: st.DataObject) -> None:
    bit = data.draw(st.sampled_from([*range(64, 96), *range(128, 136)]))
    with pytest.raises(CorruptRecordError):
        RecordBatch(flip(raw, bit))


@settings(slow_ok, max_examples=examples(60))
@given(raw=batch_st(), offset=st.integers(0, 2**62), epoch=st.integers(-1, 2**31 - 1))
def test_stamping_offset_and_epoch_keeps_the_crc(raw: bytes, offset: int, epoch: int) -> None:
    stamped = bytearray(raw)
    set_base_offset(stamped, offset)
    set_partition_leader_epoch(stamped, epoch)
    batch = RecordBatch(stamped)
    batch.ensure_valid()
    assert (batch.base_offset, batch.partition_leader_epoch) == (offset, epoch)
    assert batch.last_offset == offset + RecordBatch(raw).last_offset_delta
    assert stamped[ATTRIBUTES_AT - 4 :] == raw[ATTRIBUTES_AT - 4 :]  # CRC and the rest untouched
    assert [r.value for r in batch.records()] == [r.value for r in RecordBatch(raw).records()]


@settings(slow_ok, max_examples=examples(60))
@given(run=run_st())
def test_a_run_of_batches_scans_back_whole(run: list[bytes]) -> None:
    buf = b"".join(run)
    first = RecordBatch(run[0]).base_offset
    result = scan_batches(buf, expected_offset=first)
    assert [b.to_bytes() for b in result.batches] == run
    assert result.valid_bytes == len(buf) and result.error is None and not result.torn
    assert result.next_offset == next_offset_after(buf) == RecordBatch(run[-1]).next_offset
    assert [b.to_bytes() for b in iter_batches(buf)] == run


@settings(slow_ok, max_examples=examples(80))
@given(run=run_st(), data=st.data())
def test_a_cut_run_keeps_exactly_the_whole_batches_before_the_cut(run: list[bytes], data: st.DataObject) -> None:
    buf = b"".join(run)
    cut = data.draw(st.integers(0, len(buf) - 1))
    kept, end = [], 0
    for raw in run:
        if end + len(raw) > cut:
            break
        kept.append(raw)
        end += len(raw)
    result = scan_batches(buf[:cut], contiguous=True)
    assert [b.to_bytes() for b in result.batches] == kept
    assert result.valid_bytes == end
    assert result.torn == (cut > end)
    assert result.error is None
    assert [b.to_bytes() for b in iter_batches(buf[:cut])] == kept


@settings(slow_ok, max_examples=examples(80))
@given(run=run_st(), data=st.data())
def test_damage_keeps_exactly_the_batches_before_the_damaged_one(run: list[bytes], data: st.DataObject) -> None:
    buf = b"".join(run)
    victim = data.draw(st.integers(0, len(run) - 1))
    start = sum(len(r) for r in run[:victim])
    # a bit anywhere in the victim but its BaseOffset and PartitionLeaderEpoch; with an expected
    # offset, a flipped BaseOffset is caught as well
    bit = data.draw(st.integers(start * 8 + 64, (start + len(run[victim])) * 8 - 1).filter(
        lambda b: not (start * 8 + 96 <= b < start * 8 + 128)))
    result = scan_batches(flip(buf, bit), expected_offset=RecordBatch(run[0]).base_offset)
    assert [b.to_bytes() for b in result.batches] == run[:victim]
    assert result.valid_bytes == start
    # either a named error, or a Length grown past the end that reads as a torn tail
    assert result.error is not None or result.torn


@settings(slow_ok, max_examples=examples(40))
@given(run=run_st(), data=st.data())
def test_a_gap_in_offsets_stops_a_contiguous_scan(run: list[bytes], data: st.DataObject) -> None:
    if len(run) < 2:
        run = run * 2
        second = bytearray(run[1])
        set_base_offset(second, RecordBatch(run[0]).next_offset)
        run[1] = bytes(second)
    at = data.draw(st.integers(1, len(run) - 1))
    moved = bytearray(run[at])
    set_base_offset(moved, RecordBatch(run[at]).base_offset + data.draw(st.integers(1, 100)))
    buf = b"".join([*run[:at], bytes(moved), *run[at + 1 :]])
    result = scan_batches(buf, contiguous=True)
    assert len(result.batches) == at
    assert result.error is not None
