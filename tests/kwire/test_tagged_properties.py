"""Property tests of repeated and misplaced tags in tagged-field sections, against Kafka.

Writing (``RawTaggedFieldWriter``): preserved unknown fields must come in strictly ascending tag
order, so a tag given twice or out of order is refused, and none may use a tag that a field of
the struct defines, whether that field is written or left at its default.

Reading (the ``read`` methods ``MessageDataGenerator`` generates): a known tag seen twice is read
twice and the last value kept; an unknown tag is appended to the unknown fields each time it
comes, in wire order, duplicates and disorder included.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kwire.wire import EncodeError, read_unknown_tagged, write_tagged, write_uvarint
from messages.generated.fetch_request import FetchRequest
from messages.spec import MessageSpec, load_all
from tests.messages.randmsg import message_class, random_messages
from tests.properties import examples

tags = st.integers(0, 2**31 - 1)
datas = st.binary(max_size=6)


def _section(fields: list[tuple[int, bytes]]) -> bytes:
    out = bytearray()
    write_uvarint(out, len(fields))
    for tag, data in fields:
        write_uvarint(out, tag)
        write_uvarint(out, len(data))
        out += data
    return bytes(out)


# ---------------------------------------------------------------------------------------------
# kwire.wire.write_tagged


@settings(deadline=None, max_examples=examples(80))
@given(unknown=st.lists(st.tuples(tags, datas), min_size=1, max_size=6, unique_by=lambda f: f[0]),
       data=st.data())
def test_an_unknown_tag_given_twice_is_refused(
    unknown: list[tuple[int, bytes]], data: st.DataObject
) -> None:
    unknown.sort()
    twice = data.draw(st.sampled_from(unknown))
    at = unknown.index(twice) + 1
    fields = [*unknown[:at], (twice[0], data.draw(datas)), *unknown[at:]]
    with pytest.raises(EncodeError, match=f"tag {twice[0]} comes after tag {twice[0]}"):
        write_tagged(bytearray(), [], fields)


@settings(deadline=None, max_examples=examples(80))
@given(unknown=st.lists(st.tuples(tags, datas), min_size=2, max_size=6, unique_by=lambda f: f[0]),
       seed=st.integers(0, 2**32))
def test_unknown_tags_out_of_order_are_refused(unknown: list[tuple[int, bytes]], seed: int) -> None:
    random.Random(seed).shuffle(unknown)
    if unknown == sorted(unknown):
        unknown.reverse()
    with pytest.raises(EncodeError, match="is not higher than it"):
        write_tagged(bytearray(), [], unknown)


@settings(deadline=None, max_examples=examples(80))
@given(defined=st.frozensets(st.integers(0, 40), min_size=1, max_size=6), data=st.data())
def test_an_unknown_tag_that_a_field_defines_is_refused(
    defined: frozenset[int], data: st.DataObject
) -> None:
    clash = data.draw(st.sampled_from(sorted(defined)))
    # The defined fields written: any subset of them, the clashing one included or not.
    known = sorted((t, b"k") for t in data.draw(st.frozensets(st.sampled_from(sorted(defined)))))
    others = data.draw(st.frozensets(st.integers(41, 90), max_size=3))
    unknown = sorted([(clash, b"u"), *((t, b"") for t in others)])
    with pytest.raises(EncodeError, match=f"uses tag {clash}"):
        write_tagged(bytearray(), known, unknown, defined)


# ---------------------------------------------------------------------------------------------
# generated messages: every spec whose top-level struct has tagged fields

SPECS = [s for s in load_all() if any(f.tag is not None for f in s.fields)]


def _flexible_versions(spec: MessageSpec) -> list[int]:
    return [n for n in range(spec.valid_versions.lo, spec.valid_versions.hi + 1)
            if spec.flexible_in(n)]


@settings(deadline=None, max_examples=examples(60))
@given(spec=st.sampled_from(SPECS), data=st.data())
def test_generated_writer_refuses_an_unknown_tag_that_a_field_defines(
    spec: MessageSpec, data: st.DataObject
) -> None:
    version = data.draw(st.sampled_from(_flexible_versions(spec)))
    message: Any = random_messages(spec, version, 1, seed=str(data.draw(st.integers(0, 99))))[0]
    defined = sorted({f.tag for f in spec.fields if f.tag is not None})
    clash = data.draw(st.sampled_from(defined))
    message.unknown_tagged_fields = ((clash, b"\x00"),)
    with pytest.raises(EncodeError, match=f"uses tag {clash}"):
        message.encode(version)
    # A tag no field defines is preserved and read back as it was.
    free = max(defined) + 1 + data.draw(st.integers(0, 1000))
    message.unknown_tagged_fields = ((free, b"\x00"),)
    decoded = message_class(spec).decode(message.encode(version), version)
    assert decoded.unknown_tagged_fields == ((free, b"\x00"),)


# ---------------------------------------------------------------------------------------------
# generated readers: FetchRequest v15 defines tag 0 (ClusterId, a compact nullable string) and
# tag 1 (ReplicaState) at the top level; tags 2 and up are unknown to it.

_FETCH_VERSION = 15
_FETCH_BODY = FetchRequest(max_wait_ms=500).encode(_FETCH_VERSION)[:-1]  # all but the count

cluster_ids = st.text(st.characters(codec="utf-8"), max_size=5)
unknown_fields = st.tuples(st.integers(2, 9), datas)


def _compact_string(value: str) -> bytes:
    raw = value.encode()
    out = bytearray()
    write_uvarint(out, len(raw) + 1)
    return bytes(out + raw)


@settings(deadline=None, max_examples=examples(100))
@given(ids=st.lists(cluster_ids, min_size=1, max_size=3), unknown=st.lists(unknown_fields, max_size=5),
       seed=st.integers(0, 2**32))
def test_reader_keeps_the_last_known_value_and_every_unknown_field_in_wire_order(
    ids: list[str], unknown: list[tuple[int, bytes]], seed: int
) -> None:
    # ClusterId given len(ids) times, mixed with unknown fields (repeats and disorder allowed),
    # the whole section in an arbitrary order.
    fields = [(0, _compact_string(i)) for i in ids] + unknown
    random.Random(seed).shuffle(fields)
    decoded = FetchRequest.decode(_FETCH_BODY + _section(fields), _FETCH_VERSION)
    by_bytes = {_compact_string(i): i for i in ids}
    assert decoded.cluster_id == [by_bytes[d] for t, d in fields if t == 0][-1]
    assert decoded.unknown_tagged_fields == tuple(f for f in fields if f[0] != 0)
    tags_in = [t for t, _ in decoded.unknown_tagged_fields]
    if tags_in == sorted(set(tags_in)):
        again = FetchRequest.decode(decoded.encode(_FETCH_VERSION), _FETCH_VERSION)
        assert again == decoded
    else:
        # Kafka's RawTaggedFieldWriter refuses to write such a list back; so does kwire.
        with pytest.raises(EncodeError, match="is not higher than it"):
            decoded.encode(_FETCH_VERSION)


@settings(deadline=None, max_examples=examples(60))
@given(section=st.lists(st.tuples(tags, datas), max_size=6))
def test_unknown_only_section_is_read_as_it_comes(section: list[tuple[int, bytes]]) -> None:
    # A struct with no tagged field at all keeps every field, repeated tags included.
    raw = _section(section)
    assert read_unknown_tagged(raw + b"\xee", 0) == (tuple(section), len(raw))
