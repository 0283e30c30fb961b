"""Property tests of kwire's Uuid, frame decoder, header versions and version negotiation.

* Uuid (``org.apache.kafka.common.Uuid``): 16 bytes, the text form is 22 characters of URL-safe
  base64 and parses back; ``randomUuid`` never yields a reserved id or a leading '-'.
* Frames (``NetworkReceive``): any split of a stream of frames yields the same frames; a size
  above ``socket.request.max.bytes`` or negative is refused on its 4 prefix bytes, before the
  body is buffered.
* Header versions (``ApiMessageType.requestHeaderVersion`` / ``responseHeaderVersion``): request
  header v2 iff the request version is flexible, response header v1 iff the response version is
  flexible except ApiVersions (always v0, KIP-511); checked on the bytes of real frames.
* Negotiation (``NodeApiVersions.latestUsableVersion``): the max of the intersection.
"""

from __future__ import annotations

import base64
import random
import struct

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kwire.api_keys import ApiKey
from kwire.frame import FrameDecoder, FrameError, frame
from kwire.headers import request_header_version, response_header_version
from kwire.negotiation import NodeApiVersions, UnsupportedVersionError, VersionRange
from kwire.uuid import Uuid, intern_uuid
from messages.generated.metadata_request import MetadataRequest, MetadataRequestTopic
from messages.generated.registry import REQUESTS, RESPONSES
from messages.protocol import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    is_flexible,
)
from tests.properties import examples

# ---------------------------------------------------------------------------------------------
# Uuid

raw16 = st.binary(min_size=16, max_size=16)


@settings(deadline=None, max_examples=examples(150))
@given(raw=raw16)
def test_uuid_text_round_trip(raw: bytes) -> None:
    u = Uuid(raw)
    text = str(u)
    assert len(text) == 22 and "=" not in text
    assert set(text) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert Uuid.from_string(text) == u == raw
    assert base64.urlsafe_b64decode(text + "==") == raw
    assert intern_uuid(raw) == u


@settings(deadline=None)
@given(msb=st.integers(-(2**63), 2**64 - 1), lsb=st.integers(-(2**63), 2**64 - 1))
def test_uuid_from_longs_takes_signed_or_unsigned_halves(msb: int, lsb: int) -> None:
    u = Uuid.from_longs(msb, lsb)
    assert u.most_significant_bits == msb % 2**64
    assert u.least_significant_bits == lsb % 2**64
    assert bytes(u) == struct.pack(">QQ", msb % 2**64, lsb % 2**64)


@settings(deadline=None)
@given(raw=st.binary(max_size=40).filter(lambda b: len(b) != 16))
def test_uuid_of_other_than_16_bytes_is_refused(raw: bytes) -> None:
    with pytest.raises(ValueError):
        Uuid(raw)
    with pytest.raises(ValueError):
        Uuid.from_string(base64.urlsafe_b64encode(raw).rstrip(b"=").decode())


@settings(deadline=None)
@given(raw=raw16)
def test_uuid_text_with_padding_parses_and_longer_is_refused(raw: bytes) -> None:
    # Uuid.fromString takes Base64.getUrlDecoder's input: the padded 24 characters too
    assert Uuid.from_string(str(Uuid(raw)) + "==") == raw
    with pytest.raises(ValueError):
        Uuid.from_string(str(Uuid(raw)) + "===")


def _reserved(raw: bytes) -> bool:
    return int.from_bytes(raw[:8], "big") == 0 and int.from_bytes(raw[8:], "big") < 100


class _Scripted(random.Random):
    """A random source whose randbytes(16) yields the given candidates in turn."""

    def __init__(self, candidates: list[bytes]) -> None:
        super().__init__(0)
        self.candidates = list(candidates)

    def randbytes(self, n: int) -> bytes:
        assert n == 16
        return self.candidates.pop(0)


reserved16 = st.integers(0, 99).map(lambda n: n.to_bytes(16, "big"))
dash16 = raw16.map(lambda b: bytes([0xF8 | (b[0] & 0x03)]) + b[1:])  # base64 of 0b111110.. is '-'


@settings(deadline=None, max_examples=examples(80))
@given(rejects=st.lists(reserved16 | dash16, max_size=4), good=raw16)
@example(rejects=[(99).to_bytes(16, "big")], good=(100).to_bytes(16, "big"))  # the bounds
def test_random_uuid_skips_reserved_and_leading_dash_candidates(rejects: list[bytes], good: bytes) -> None:
    if _reserved(good) or str(Uuid(good)).startswith("-"):
        good = b"\x01" + good[1:]
    assert all(_reserved(r) or str(Uuid(r)).startswith("-") for r in rejects)
    source = _Scripted([*rejects, good])
    assert Uuid.random(source) == good
    assert source.candidates == []  # every rejected candidate was drawn and skipped


# ---------------------------------------------------------------------------------------------
# frames


@st.composite
def split_stream(draw: st.DrawFn) -> tuple[list[bytes], list[bytes]]:
    payloads = draw(st.lists(st.binary(max_size=50), max_size=12))
    stream = b"".join(frame(p) for p in payloads)
    cuts = sorted(draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    pieces = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    return payloads, pieces


@settings(deadline=None, max_examples=examples(150))
@given(split=split_stream())
def test_any_split_of_a_stream_yields_the_same_frames(split: tuple[list[bytes], list[bytes]]) -> None:
    payloads, pieces = split
    d = FrameDecoder(max_frame_bytes=50)
    got = []
    fed = 0
    for piece in pieces:
        d.feed(piece)
        fed += len(piece)
        while (f := d.next_frame()) is not None:
            got.append(f)
        # what is held is exactly what was fed and not yet returned (prefixes included)
        assert d.buffered_bytes == fed - sum(4 + len(f) for f in got)
        if d.missing_bytes:
            assert d.missing_bytes == 4 + payloads[len(got)].__len__() - d.buffered_bytes
    assert got == payloads
    assert d.buffered_bytes == 0 and d.missing_bytes == 0


@settings(deadline=None, max_examples=examples(100))
@given(
    limit=st.integers(0, 1000),
    good=st.lists(st.binary(max_size=10), max_size=3),
    split=st.integers(1, 3),
    data=st.data(),
)
def test_oversized_or_negative_size_is_refused_on_its_prefix(
    limit: int, good: list[bytes], split: int, data: st.DataObject
) -> None:
    size = data.draw(st.integers(limit + 1, 2**31 - 1) | st.integers(-(2**31), -1))
    good = [g[:limit] for g in good]
    d = FrameDecoder(max_frame_bytes=limit)
    for g in good:
        d.feed(frame(g))
        assert d.next_frame() == g
    prefix = struct.pack(">i", size)
    d.feed(prefix[:split])  # an incomplete prefix says nothing yet
    with pytest.raises(FrameError):
        d.feed(prefix[split:])
    assert d.buffered_bytes == 4  # nothing of the body was taken in


@settings(deadline=None)
@given(limit=st.integers(0, 200), body=st.binary(max_size=200))
def test_limit_is_inclusive(limit: int, body: bytes) -> None:
    d = FrameDecoder(max_frame_bytes=limit)
    if len(body) <= limit:
        d.feed(frame(body))
        assert d.next_frame() == body
    else:
        with pytest.raises(FrameError):
            d.feed(frame(body))


# ---------------------------------------------------------------------------------------------
# request and response header versions, on the bytes of real frames

REQUEST_VERSIONS = [
    (key, v) for key, cls in sorted(REQUESTS.items())
    for v in range(cls.LOWEST_VERSION, cls.HIGHEST_VERSION + 1)
]
RESPONSE_VERSIONS = [
    (key, v) for key, cls in sorted(RESPONSES.items())
    for v in range(cls.LOWEST_VERSION, cls.HIGHEST_VERSION + 1)
]


def _request_header_bytes(key: int, version: int, correlation_id: int, client_id: str | None,
                          header_version: int) -> bytes:
    out = struct.pack(">hhi", key, version, correlation_id)
    if header_version >= 1:
        raw = None if client_id is None else client_id.encode()
        out += struct.pack(">h", -1) if raw is None else struct.pack(">h", len(raw)) + raw
    if header_version >= 2:
        out += b"\x00"  # an empty tagged-field section
    return out


@settings(deadline=None, max_examples=examples(150))
@given(
    key_version=st.sampled_from(REQUEST_VERSIONS),
    correlation_id=st.integers(-(2**31), 2**31 - 1),
    client_id=st.none() | st.text(max_size=12),
)
def test_request_header_version_follows_flexibility(
    key_version: tuple[int, int], correlation_id: int, client_id: str | None
) -> None:
    key, version = key_version
    cls = REQUESTS[key]
    flexible = is_flexible(cls.SPEC_NAME, version)
    hv = request_header_version(key, version, flexible)
    assert hv == (0 if (key, version) == (ApiKey.CONTROLLED_SHUTDOWN, 0) else 2 if flexible else 1)
    body = cls()
    try:
        frame_body = encode_request(body, version, correlation_id, client_id)
    except ValueError:
        return  # a default body this version cannot carry (a required field left empty)
    if hv == 0:
        return  # ControlledShutdown v0 has no codec for a header without ClientId
    header = _request_header_bytes(key, version, correlation_id, client_id, hv)
    assert frame_body.startswith(header)
    request = decode_request(frame_body)
    assert request.header_version == hv
    assert request.header.correlation_id == correlation_id
    assert request.header.client_id == client_id
    assert request.body == body


@settings(deadline=None, max_examples=examples(150))
@given(key_version=st.sampled_from(RESPONSE_VERSIONS), correlation_id=st.integers(-(2**31), 2**31 - 1))
def test_response_header_version_follows_flexibility(
    key_version: tuple[int, int], correlation_id: int
) -> None:
    key, version = key_version
    cls = RESPONSES[key]
    flexible = is_flexible(cls.SPEC_NAME, version)
    hv = response_header_version(key, version, flexible)
    assert hv == (0 if key == ApiKey.API_VERSIONS else 1 if flexible else 0)
    body = cls()
    try:
        framed = bytes(encode_response(body, version, correlation_id))
    except ValueError:
        return
    assert struct.unpack_from(">i", framed)[0] == len(framed) - 4
    assert struct.unpack_from(">i", framed, 4)[0] == correlation_id
    body_at = 8 + (1 if hv == 1 else 0)
    if hv == 1:
        assert framed[8] == 0  # an empty tagged-field section
    assert framed[body_at:] == body.encode(version)
    header, decoded = decode_response(framed[4:], key, version)
    assert header.correlation_id == correlation_id
    assert decoded == body


# ---------------------------------------------------------------------------------------------
# compact arrays and strings with nulls, through a generated codec

topic_names = st.none() | st.text(max_size=20)
topic_lists = st.none() | st.lists(st.builds(MetadataRequestTopic, name=topic_names), max_size=5)


@settings(deadline=None, max_examples=examples(120))
@given(topics=topic_lists, version=st.integers(0, 13), auto=st.booleans())
def test_metadata_request_nulls_round_trip_where_the_version_allows_them(
    topics: list[MetadataRequestTopic] | None, version: int, auto: bool
) -> None:
    request = MetadataRequest(topics=topics, allow_auto_topic_creation=auto if version >= 4 else True)
    null_array_ok = version >= 1
    null_name_ok = version >= 10
    has_null_name = topics is not None and any(t.name is None for t in topics)
    if (topics is None and not null_array_ok) or (has_null_name and not null_name_ok):
        with pytest.raises(ValueError):
            request.encode(version)
        return
    raw = request.encode(version)
    assert MetadataRequest.decode(raw, version) == request
    if version >= 9:  # flexible: the array count is a uvarint of count + 1, 0 for null
        from kwire.wire import read_uvarint

        assert read_uvarint(raw, 0)[0] == (0 if topics is None else len(topics) + 1)
    else:
        assert struct.unpack_from(">i", raw)[0] == (-1 if topics is None else len(topics))


@settings(deadline=None, max_examples=examples(80))
@given(
    unknown=st.lists(st.tuples(st.integers(0, 1000), st.binary(max_size=10)),
                     max_size=5, unique_by=lambda f: f[0]),
    version=st.integers(9, 13),
)
def test_unknown_tagged_fields_survive_a_generated_codec(
    unknown: list[tuple[int, bytes]], version: int
) -> None:
    # MetadataRequest's top level has no known tagged field: every tag is unknown to it
    request = MetadataRequest(topics=[], unknown_tagged_fields=tuple(sorted(unknown)))
    decoded = MetadataRequest.decode(request.encode(version), version)
    assert decoded.unknown_tagged_fields == tuple(sorted(unknown))
    assert decoded.encode(version) == request.encode(version)


# ---------------------------------------------------------------------------------------------
# version negotiation against a brute-force model

ranges = st.tuples(st.integers(0, 20), st.integers(0, 20)).map(lambda t: (min(t), max(t)))


@settings(deadline=None, max_examples=examples(150))
@given(node=st.dictionaries(st.integers(0, 8), ranges, max_size=8),
       client=st.dictionaries(st.integers(0, 8), st.tuples(st.integers(0, 20), st.integers(-1, 20)),
                              max_size=8))
def test_negotiated_version_is_max_of_intersection(
    node: dict[int, tuple[int, int]], client: dict[int, tuple[int, int]]
) -> None:
    versions = NodeApiVersions({k: VersionRange(*r) for k, r in node.items()})
    chosen = versions.negotiate(client)
    for key, (lo, hi) in client.items():
        common = set(range(lo, hi + 1)) & (set(range(node[key][0], node[key][1] + 1))
                                           if key in node else set())
        if common:
            assert chosen[key] == max(common)
            assert versions.latest_usable_version(key, lo, hi) == max(common)
        else:
            assert key not in chosen
            with pytest.raises(UnsupportedVersionError):
                versions.negotiate(client, required=[key])
