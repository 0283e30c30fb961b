"""The frame around a metadata record value in the ``__cluster_metadata`` log
(Kafka's ``AbstractApiMessageSerde`` / ``MetadataRecordSerde``).

Layout::

    +-------------------------+--------------------+---------------------+----------------------+
    | frame version: uvarint  | api key: uvarint   | version: uvarint    | body (flexible form) |
    | (always 1)              | (MetadataRecordType)| (record version)   |                      |
    +-------------------------+--------------------+---------------------+----------------------+

Trailing bytes after the body are an error.
"""

from __future__ import annotations

import re

from kwire.wire import DecodeError, EncodeError, read_uvarint, write_uvarint
from messages.generated.registry import METADATA_RECORDS
from messages.runtime import Buffer, Message

FRAME_VERSION = 1


def encode_record(record: Message, version: int) -> bytes:
    """The framed value of ``record`` at ``version``. Raises EncodeError for a non-metadata
    message or a version it lacks."""
    if record.API_KEY is None or METADATA_RECORDS.get(record.API_KEY) is not type(record):
        raise EncodeError(f"{type(record).__name__} is not a metadata record")
    out = bytearray()
    write_uvarint(out, FRAME_VERSION)
    write_uvarint(out, record.API_KEY)
    write_uvarint(out, version)
    record.write(out, version)
    return bytes(out)


def decode_record(buf: Buffer) -> tuple[Message, int]:
    """``(record, version)`` from a framed value. Raises DecodeError for an unknown frame
    version or api key, or malformed bytes."""
    # the three header varints are one byte each for every record type there is: read inline
    if len(buf) >= 3 and buf[0] < 0x80 and buf[1] < 0x80 and buf[2] < 0x80:
        frame_version, api_key, version, pos = buf[0], buf[1], buf[2], 3
    else:
        frame_version, pos = read_uvarint(buf, 0)
        api_key, pos = read_uvarint(buf, pos)
        version, pos = read_uvarint(buf, pos)
    if frame_version != FRAME_VERSION:
        raise DecodeError(f"unknown metadata record frame version {frame_version}")
    cls = METADATA_RECORDS.get(api_key)
    if cls is None:
        raise DecodeError(f"unknown metadata record api key {api_key}")
    record, end = cls.read(buf, pos, version)
    if end != len(buf):
        raise DecodeError(f"{len(buf) - end} trailing bytes after {cls.__name__}")
    return record, version


def record_type_name(api_key: int) -> str:
    """Kafka's MetadataRecordType name, e.g. 12 -> ``FEATURE_LEVEL_RECORD``; ``UNKNOWN`` when
    kwire has no spec for the key."""
    cls = METADATA_RECORDS.get(api_key)
    if cls is None:
        return "UNKNOWN"
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", cls.SPEC_NAME).upper()
