"""Codec tests: round trips, Kafka's framings, and error behaviour on bad input."""

from __future__ import annotations

import gzip
import os
import struct

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.compression import (
    XERIAL_BLOCK_SIZE,
    XERIAL_HEADER,
    CompressionError,
    CompressionType,
    compress,
    decompress,
)
from tests.properties import examples

ALL = list(CompressionType)


@pytest.mark.parametrize("codec", ALL)
@pytest.mark.parametrize("size", [0, 1, 100, XERIAL_BLOCK_SIZE, 3 * XERIAL_BLOCK_SIZE + 7, 300_000])
def test_round_trip_sizes(codec: CompressionType, size: int) -> None:
    data = (os.urandom(size // 2) + b"kraft" * (size // 10))[:size]
    assert decompress(codec, compress(codec, data)) == data


@settings(max_examples=examples(60), deadline=None)
@given(codec=st.sampled_from(ALL), data=st.binary(max_size=5000))
def test_round_trip_property(codec: CompressionType, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


def test_codec_ids_and_names() -> None:
    assert [(c.value, c.codec_name) for c in CompressionType] == [
        (0, "none"),
        (1, "gzip"),
        (2, "snappy"),
        (3, "lz4"),
        (4, "zstd"),
    ]
    assert CompressionType.for_name("ZSTD") is CompressionType.ZSTD
    with pytest.raises(CompressionError):
        CompressionType.for_id(5)
    with pytest.raises(ValueError):
        CompressionType.for_name("brotli")


def test_snappy_uses_xerial_framing_with_32k_blocks() -> None:
    data = os.urandom(2 * XERIAL_BLOCK_SIZE + 10)
    framed = compress(CompressionType.SNAPPY, data)
    assert framed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) == XERIAL_HEADER
    pos, blocks = 16, []
    while pos < len(framed):
        (n,) = struct.unpack_from(">i", framed, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(framed[pos + 4 : pos + 4 + n])))
        pos += 4 + n
    assert [len(b) for b in blocks] == [XERIAL_BLOCK_SIZE, XERIAL_BLOCK_SIZE, 10]
    assert b"".join(blocks) == data


def test_snappy_decodes_raw_blocks_and_concatenated_streams() -> None:
    raw = bytes(cramjam.snappy.compress_raw(b"hello raw snappy"))
    assert decompress(CompressionType.SNAPPY, raw) == b"hello raw snappy"
    two = compress(CompressionType.SNAPPY, b"one") + compress(CompressionType.SNAPPY, b"two")
    assert decompress(CompressionType.SNAPPY, two) == b"onetwo"


def test_lz4_frame_descriptor_matches_kafka() -> None:
    frame = compress(CompressionType.LZ4, b"x" * 100_000)
    assert frame[:4] == bytes.fromhex("04224d18")  # magic, little-endian
    assert frame[4] == 0x60  # version 01, independent blocks, no checksums, no content size
    assert frame[5] == 0x40  # 64 KiB maximum block size
    assert frame[-4:] == b"\x00\x00\x00\x00"  # end mark, no content checksum
    # and a frame written by another encoder with other options decodes too
    other = lz4.frame.compress(b"abc" * 1000, content_checksum=True, store_size=True)
    assert decompress(CompressionType.LZ4, other) == b"abc" * 1000


def test_zstd_frames_without_content_size_and_multiple_frames() -> None:
    java_like = zstandard.ZstdCompressor(write_content_size=False)
    frame = java_like.compress(b"metadata" * 5000)
    assert decompress(CompressionType.ZSTD, frame + frame) == b"metadata" * 10000


def test_gzip_multiple_members() -> None:
    data = gzip.compress(b"a") + gzip.compress(b"b")
    assert decompress(CompressionType.GZIP, data) == b"ab"


@pytest.mark.parametrize("codec", ALL[1:])
def test_truncated_input_raises(codec: CompressionType) -> None:
    encoded = compress(codec, os.urandom(3000) + b"z" * 3000)
    for cut in (1, 5, len(encoded) // 2, len(encoded) - 1):
        with pytest.raises(CompressionError):
            decompress(codec, encoded[:cut])


@settings(max_examples=examples(200), deadline=None)
@given(codec=st.sampled_from(ALL[1:]), garbage=st.binary(max_size=200))
def test_garbage_raises_only_compression_error(codec: CompressionType, garbage: bytes) -> None:
    try:
        decompress(codec, garbage)
    except CompressionError:
        pass
