"""The record-batch compression codecs: attribute bits 0-2 of a v2 batch.

Mirrors ``org.apache.kafka.common.record.CompressionType`` and the ``compress`` package of
kafka-clients. Only the records section of a batch (from byte 61 to its end) is compressed, as
one stream::

    0 none    the records as they are
    1 gzip    RFC 1952 (java.util.zip.GZIPOutputStream); any number of members on decode
    2 snappy  xerial framing (snappy-java SnappyOutputStream):
                +-----------------------+-----------------+-----------------+
                | "\\x82SNAPPY\\x00" (8) | version int32=1 | compat int32=1  |   16-byte header
                +-----------------------+-----------------+-----------------+
                | length int32 BE | raw snappy block of <= 32 KiB input |  ... repeated
              decode also accepts a concatenated second header and plain raw snappy (as
              SnappyInputStream does when the magic is missing)
    3 lz4     LZ4 frame format (KIP-57), as Kafka's Lz4BlockOutputStream writes it:
              magic 0x184D2204 LE, FLG 0x60 (v1, independent blocks, no checksums, no content
              size), BD 0x40 (64 KiB blocks), HC byte, blocks, 0-length end mark
    4 zstd    zstd frames; Java writes them without a content size, so decoding streams
              across frames instead of asking the frame for its size

All errors on decode raise :class:`CompressionError` (a :class:`kwire.wire.DecodeError`).
"""

from __future__ import annotations

import enum
import gzip
import struct
import zlib

import cramjam
import lz4.frame
import zstandard

from kwire.wire import DecodeError


class CompressionError(DecodeError):
    """Compressed bytes that the codec cannot decode."""


class CompressionType(enum.IntEnum):
    """Attribute bits 0-2 (``CompressionType.id``); ``codec_name`` is Kafka's ``name`` field."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def codec_name(self) -> str:
        """The lower-case name Kafka prints (``compresscodec: none``) and configs use."""
        return self.name.lower()

    @classmethod
    def for_id(cls, codec_id: int) -> CompressionType:
        """Raises CompressionError for ids 5-7, as ``CompressionType.forId`` throws."""
        try:
            return cls(codec_id)
        except ValueError:
            raise CompressionError(f"unknown compression type id {codec_id}") from None

    @classmethod
    def for_name(cls, name: str) -> CompressionType:
        """``none|gzip|snappy|lz4|zstd``, case-insensitive. Raises ValueError."""
        try:
            return cls[name.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown compression type {name!r}") from None


Buffer = bytes | bytearray | memoryview

# snappy-java SnappyCodec: MAGIC_HEADER, DEFAULT_VERSION, MINIMUM_COMPATIBLE_VERSION
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_SIZE = 32 * 1024  # SnappyOutputStream.DEFAULT_BLOCK_SIZE
_INT32 = struct.Struct(">i")

GZIP_DEFAULT_LEVEL = 6  # Deflater.DEFAULT_COMPRESSION
ZSTD_DEFAULT_LEVEL = 3  # CompressionType.ZSTD default level


# ---------------------------------------------------------------------------------------------
# snappy (xerial framing)


def snappy_xerial_compress(data: Buffer) -> bytes:
    """``data`` in xerial framing, as snappy-java's ``SnappyOutputStream`` writes it: the
    16-byte header, then for each 32 KiB of input an int32 length and a raw snappy block.
    Empty input gives the header alone. Raises nothing."""
    out = bytearray(XERIAL_HEADER)
    view = memoryview(data).cast("B")
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + XERIAL_BLOCK_SIZE]))
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)


def snappy_xerial_decompress(data: Buffer) -> bytes:
    """The bytes of a xerial-framed stream (headers may repeat, as in concatenated streams), or
    of one raw snappy block when the magic is missing (``SnappyInputStream``'s fallback).
    Raises CompressionError for a truncated header or length, a block running past the end, or
    an invalid snappy block."""
    view = memoryview(data).cast("B")
    if len(view) < len(XERIAL_MAGIC) or bytes(view[:8]) != XERIAL_MAGIC:
        # Not framed: snappy-java reads the whole input as one raw block.
        return _snappy_raw(view)
    out = bytearray()
    pos = 0
    end = len(view)
    while pos < end:
        if end - pos >= 8 and bytes(view[pos : pos + 8]) == XERIAL_MAGIC:
            # a (possibly concatenated) stream header: magic, version, compat
            if end - pos < len(XERIAL_HEADER):
                raise CompressionError("truncated xerial snappy header")
            pos += len(XERIAL_HEADER)
            continue
        if end - pos < 4:
            raise CompressionError("truncated xerial snappy block length")
        (n,) = _INT32.unpack_from(view, pos)
        pos += 4
        if n < 0 or n > end - pos:
            raise CompressionError(f"xerial snappy block of {n} bytes runs past the end")
        out += _snappy_raw(view[pos : pos + n])
        pos += n
    return bytes(out)


def _snappy_raw(block: memoryview) -> bytes:
    try:
        return bytes(cramjam.snappy.decompress_raw(block))
    except Exception as exc:  # cramjam raises its own DecompressionError
        raise CompressionError(f"invalid snappy block: {exc}") from exc


# ---------------------------------------------------------------------------------------------
# the dispatch


def compress(codec: CompressionType, data: Buffer, level: int | None = None) -> bytes:
    """Compress a batch's records section with ``codec`` (``level`` as Kafka's
    ``compression.<codec>.level``; None = gzip 6 and zstd 3 as Kafka, lz4 the python-lz4
    default; snappy has no level and ignores it). NONE returns a copy. Returns one stream in the
    framing drawn at the top of this module (``Compression.wrapForOutput``). Raises ValueError
    for an unknown codec or a level the library refuses."""
    if codec == CompressionType.NONE:
        return bytes(data)
    if codec == CompressionType.GZIP:
        return gzip.compress(
            bytes(data), compresslevel=GZIP_DEFAULT_LEVEL if level is None else level, mtime=0
        )
    if codec == CompressionType.SNAPPY:
        return snappy_xerial_compress(data)
    if codec == CompressionType.LZ4:
        kwargs = {} if level is None else {"compression_level": level}
        return lz4.frame.compress(
            bytes(data),
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            block_checksum=False,
            store_size=False,
            **kwargs,
        )
    if codec == CompressionType.ZSTD:
        compressor = zstandard.ZstdCompressor(level=ZSTD_DEFAULT_LEVEL if level is None else level)
        return compressor.compress(bytes(data))
    raise ValueError(f"unknown codec {codec!r}")


def decompress(codec: CompressionType, data: Buffer) -> bytes:
    """Decompress a batch's records section (``Compression.wrapForInput``); NONE returns a copy.
    Raises CompressionError for malformed or truncated data and for an unknown codec."""
    if codec == CompressionType.NONE:
        return bytes(data)
    try:
        if codec == CompressionType.GZIP:
            return gzip.decompress(bytes(data))
        if codec == CompressionType.SNAPPY:
            return snappy_xerial_decompress(data)
        if codec == CompressionType.LZ4:
            return _lz4_decompress(bytes(data))
        if codec == CompressionType.ZSTD:
            return _zstd_decompress(bytes(data))
    except CompressionError:
        raise
    except (OSError, EOFError, zlib.error, RuntimeError, zstandard.ZstdError, ValueError) as exc:
        raise CompressionError(f"invalid {codec.codec_name} data: {exc}") from exc
    raise CompressionError(f"unknown codec {codec!r}")


def _lz4_decompress(data: bytes) -> bytes:
    # One frame per batch; bytes after its end mark are ignored, as Lz4BlockInputStream stops at
    # the end mark.
    decompressor = lz4.frame.LZ4FrameDecompressor()
    out = decompressor.decompress(data)
    if not decompressor.eof:
        raise CompressionError("truncated lz4 frame")
    return bytes(out)


def _zstd_decompress(data: bytes) -> bytes:
    # Frame by frame, because Java writes frames without a content size (so the one-shot API
    # refuses them) and a streaming reader would return a truncated frame's prefix silently.
    dctx = zstandard.ZstdDecompressor()
    out = bytearray()
    rest = data
    while True:
        dobj = dctx.decompressobj()
        out += dobj.decompress(rest)
        if not dobj.eof:
            raise CompressionError("truncated zstd frame")
        rest = dobj.unused_data
        if not rest:
            return bytes(out)
