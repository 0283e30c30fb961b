"""Property tests of the frames around message bodies: request and response headers
(``RequestHeader`` / ``ResponseHeader``, ``RequestContext``) and the metadata record frame
(``AbstractApiMessageSerde``).

* Any request of any API and version, with any correlation id and client id (null included),
  decodes back to the same header, at the header version its flexibility asks for, and the same
  body; a byte after it or any cut of it is a DecodeError, never another exception.
* A request of an API key or version kwire has no codec for is refused with UnknownApiError that
  still carries the header's correlation id and client id, so the caller can answer it.
* Any response frame counts its own size and decodes back to its correlation id and body.
* Any metadata record of any version round-trips through its frame; its header varints read
  alike inline and padded (the general reader); another frame version, an unknown record type
  and trailing bytes are refused.
"""

from __future__ import annotations

import random
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kwire.headers import request_header_version, response_header_version
from kwire.wire import DecodeError, write_uvarint
from messages.generated.registry import METADATA_RECORDS, REQUESTS, RESPONSES
from messages.metadata import FRAME_VERSION, decode_record, encode_record, record_type_name
from messages.protocol import (
    UnknownApiError,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
)
from messages.spec import MessageSpec, load_all
from tests.messages.randmsg import MessageGenerator
from tests.properties import examples

SPECS = {spec.name: spec for spec in load_all()}
slow = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def spec_of(cls: type[Any]) -> MessageSpec:
    return SPECS[cls.SPEC_NAME]


@st.composite
def messages_of(draw: st.DrawFn, registry: dict[int, type[Any]]) -> tuple[Any, int]:
    """A random message of a random class of ``registry`` at a random valid version."""
    cls = registry[draw(st.sampled_from(sorted(registry)), label="api key")]
    version = draw(st.integers(cls.LOWEST_VERSION, cls.HIGHEST_VERSION), label="version")
    rng = random.Random(draw(st.integers(0, 2**32), label="seed"))
    return MessageGenerator(spec_of(cls), rng).message(version), version


correlation_ids = st.integers(-(2**31), 2**31 - 1)
client_ids = st.none() | st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)


@settings(slow, max_examples=examples(150))
@given(message=messages_of(REQUESTS), correlation_id=correlation_ids, client_id=client_ids, data=st.data())
def test_any_request_frame_decodes_to_its_header_and_body(
    message: tuple[Any, int], correlation_id: int, client_id: str | None, data: st.DataObject
) -> None:
    body, version = message
    frame = encode_request(body, version, correlation_id, client_id)
    request = decode_request(frame)
    header = request.header
    assert (header.request_api_key, header.request_api_version) == (body.API_KEY, version)
    assert (header.correlation_id, header.client_id) == (correlation_id, client_id)
    flexible = spec_of(type(body)).flexible_in(version)
    assert request.header_version == request_header_version(body.API_KEY, version, flexible)
    assert request.body == body
    # the body starts where the header ends
    _, _, position = decode_request_header(frame)
    assert frame[position:] == body.encode(version)
    with pytest.raises(DecodeError, match="trailing"):
        decode_request(frame + b"\0")
    cut = data.draw(st.integers(0, len(frame) - 1), label="cut")
    try:
        decode_request(frame[:cut])
    except DecodeError:
        pass  # the only exception a cut frame may raise (it may also read as a shorter body)


@settings(slow, max_examples=examples(100))
@given(api_key=st.integers(-(2**15), 2**15 - 1), version=st.integers(-(2**15), 2**15 - 1),
       correlation_id=correlation_ids, client_id=client_ids)
def test_a_request_kwire_has_no_codec_for_is_refused_with_its_header(
    api_key: int, version: int, correlation_id: int, client_id: str | None
) -> None:
    cls = REQUESTS.get(api_key)
    if cls is not None and cls.LOWEST_VERSION <= version <= cls.HIGHEST_VERSION:
        version = cls.HIGHEST_VERSION + 1
    frame = struct.pack(">hhi", api_key, version, correlation_id)
    raw = None if client_id is None else client_id.encode()
    frame += struct.pack(">h", -1) if raw is None else struct.pack(">h", len(raw)) + raw
    with pytest.raises(UnknownApiError) as caught:
        decode_request(frame + b"body bytes")
    assert (caught.value.api_key, caught.value.api_version) == (api_key, version)
    assert caught.value.header is not None
    assert (caught.value.header.correlation_id, caught.value.header.client_id) == (correlation_id, client_id)


@settings(slow, max_examples=examples(150))
@given(message=messages_of(RESPONSES), correlation_id=correlation_ids)
def test_any_response_frame_counts_its_size_and_decodes_back(message: tuple[Any, int], correlation_id: int) -> None:
    body, version = message
    out = encode_response(body, version, correlation_id)
    frame = bytes(out)
    assert b"".join(bytes(part) for part in out.parts()) == frame
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4 == out.nbytes - 4
    header, decoded = decode_response(frame[4:], body.API_KEY, version)
    assert header.correlation_id == correlation_id and decoded == body
    flexible = spec_of(type(body)).flexible_in(version)
    header_version = response_header_version(body.API_KEY, version, flexible)
    assert frame[4:8] == struct.pack(">i", correlation_id)
    # a flexible header (v1) adds its tagged fields, an empty section of one byte; then the body
    assert frame[8:] == (b"\0" if header_version >= 1 else b"") + body.encode(version)
    with pytest.raises(DecodeError, match="trailing"):
        decode_response(frame[4:] + b"\0", body.API_KEY, version)


def padded(value: int, extra: int) -> bytes:
    """``value`` as an unsigned varint with ``extra`` redundant continuation bytes."""
    out = bytearray()
    write_uvarint(out, value)
    if extra:
        out[-1] |= 0x80
        out += b"\x80" * (extra - 1) + b"\0"
    return bytes(out)


@settings(slow, max_examples=examples(150))
@given(message=messages_of(METADATA_RECORDS), pads=st.tuples(*[st.integers(0, 2)] * 3))
def test_any_metadata_record_round_trips_through_its_frame(message: tuple[Any, int], pads: tuple[int, int, int]) -> None:
    record, version = message
    framed = encode_record(record, version)
    assert framed[:3] == bytes([FRAME_VERSION, record.API_KEY, version])  # every key and version is < 128
    assert decode_record(framed) == (record, version)
    # the same header with padded varints goes through the general reader to the same record
    body = framed[3:]
    repadded = padded(FRAME_VERSION, pads[0]) + padded(record.API_KEY, pads[1]) + padded(version, pads[2]) + body
    assert decode_record(repadded) == (record, version)
    with pytest.raises(DecodeError, match="trailing"):
        decode_record(framed + b"\0")
    with pytest.raises(DecodeError, match="frame version"):
        decode_record(bytes([FRAME_VERSION + 1]) + framed[1:])
    assert record_type_name(record.API_KEY).replace("_", "") == type(record).SPEC_NAME.upper()


@settings(slow, max_examples=examples(60))
@given(api_key=st.integers(0, 2**20).filter(lambda k: k not in METADATA_RECORDS), tail=st.binary(max_size=8))
def test_an_unknown_metadata_record_type_is_refused(api_key: int, tail: bytes) -> None:
    out = bytearray()
    write_uvarint(out, FRAME_VERSION)
    write_uvarint(out, api_key)
    out += b"\0" + tail
    with pytest.raises(DecodeError, match="unknown metadata record api key"):
        decode_record(bytes(out))
    assert record_type_name(api_key) == "UNKNOWN"
