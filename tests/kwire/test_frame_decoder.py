"""kwire.frame.FrameDecoder edge cases: split prefixes, many frames per feed, and sizes refused
before anything is allocated for the body."""

from __future__ import annotations

import struct
import tracemalloc

import pytest

from kwire.frame import DEFAULT_MAX_FRAME_BYTES, FrameDecoder, FrameError, frame


def test_size_prefix_split_across_feeds() -> None:
    data = frame(b"hello world") + frame(b"") + frame(b"x" * 300)
    d = FrameDecoder()
    out = []
    for i in range(len(data)):
        d.feed(data[i : i + 1])
        while (f := d.next_frame()) is not None:
            out.append(f)
    assert out == [b"hello world", b"", b"x" * 300]
    assert d.buffered_bytes == 0


@pytest.mark.parametrize("cut", range(1, 4))
def test_prefix_cut_at_every_byte(cut: int) -> None:
    data = frame(b"abc")
    d = FrameDecoder()
    d.feed(data[:cut])
    assert d.next_frame() is None
    d.feed(data[cut:])
    assert d.next_frame() == b"abc"


def test_many_frames_in_one_feed() -> None:
    payloads = [bytes([i % 256]) * (i % 17) for i in range(1000)]
    d = FrameDecoder()
    d.feed(b"".join(frame(p) for p in payloads) + b"\x00\x00")
    got = []
    while (f := d.next_frame()) is not None:
        got.append(f)
    assert got == payloads
    assert d.buffered_bytes == 2  # half a size prefix waits for more


@pytest.mark.parametrize("size", [-1, -(2**31), 1001, 2**31 - 1])
def test_bad_sizes_refused_on_the_prefix(size: int) -> None:
    d = FrameDecoder(max_frame_bytes=1000)
    with pytest.raises(FrameError):
        d.feed(struct.pack(">i", size))


def test_bad_size_after_a_good_frame() -> None:
    d = FrameDecoder(max_frame_bytes=10)
    with pytest.raises(FrameError):
        # The second prefix is checked as soon as the first frame is complete.
        d.feed(frame(b"ok") + struct.pack(">i", 11))
        d.next_frame()


def test_limit_is_inclusive() -> None:
    d = FrameDecoder(max_frame_bytes=10)
    d.feed(frame(b"0123456789"))
    assert d.next_frame() == b"0123456789"


def test_no_allocation_for_a_declared_size() -> None:
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        decoders = []
        for _ in range(100):
            d = FrameDecoder()
            d.feed(struct.pack(">i", DEFAULT_MAX_FRAME_BYTES) + b"abc")  # allowed, body pending
            assert d.next_frame() is None
            decoders.append(d)
        with pytest.raises(FrameError):
            FrameDecoder().feed(struct.pack(">i", DEFAULT_MAX_FRAME_BYTES + 1))
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    grown = sum(s.size_diff for s in after.compare_to(before, "filename"))
    # 100 decoders each holding 7 bytes: far below one declared 100 MiB frame.
    assert grown < 200_000, grown


def test_missing_bytes_counts_down_to_the_end_of_the_frame_being_read() -> None:
    decoder = FrameDecoder()
    data = frame(b"x" * 1000) + frame(b"y" * 10)
    assert decoder.missing_bytes == 0  # no size prefix yet
    decoder.feed(data[:2])
    assert decoder.missing_bytes == 0
    decoder.feed(data[2:300])
    assert decoder.missing_bytes == 1004 - 300
    decoder.feed(data[300:1010])
    assert decoder.next_frame() == b"x" * 1000
    assert decoder.missing_bytes == 14 - 6  # the next frame's prefix and 2 of its bytes are in
    decoder.feed(data[1010:])
    assert decoder.next_frame() == b"y" * 10 and decoder.missing_bytes == 0
