"""Random, spec-respecting instances of kwire's generated message classes.

Driven by kwire's spec model (``messages.spec``): for a message spec and one of its versions,
:class:`MessageGenerator` builds objects of the generated classes whose every value is legal at
that version, so Kafka's own classes must accept them and must write the same bytes:

* a field absent at the version keeps its default;
* ``null`` only where ``nullableVersions`` allow it;
* tagged fields are left at their default about a third of the time, set otherwise;
* integers favour their edges (min, max, 0, -1) and small values; strings mix ASCII, JSON
  escapes, Latin-1, CJK and 4-byte UTF-8 (never lone surrogates); uuids include the zero and
  metadata-topic ids; floats are finite;
* arrays (nested too) hold 0-3 elements, fewer the deeper they sit;
* ``records`` fields hold null (where allowed), nothing, or one or two well-formed record batches
  of magic v2 with correct lengths and CRC-32C (:func:`record_batch`), which
  ``MemoryRecords`` accepts.

Generation is reproducible: the same ``random.Random`` seed gives the same messages.
"""

from __future__ import annotations

import copy as _copy
import importlib
import random
import struct
from typing import Any

import crc32c

from kwire.uuid import METADATA_TOPIC_ID, ZERO_UUID, Uuid
from messages.runtime import INT_RANGES
from messages.spec import FieldSpec, FieldType, MessageSpec

_STRING_PIECES = (
    "a", "b", "z", "A", "Q", "0", "7", "_", "-", ".", " ", "/", ":",
    '"', "\\", "\n", "\t", "\x00", "\x1f",
    "é", "ß", "ñ", "Ω", "ж", "中", "文", "€", "\u2028", "\ufeff",
    "🙂", "𝄞", "\U0010fffd",
)
_ASCII = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-."


def message_module(spec: MessageSpec) -> Any:
    """The generated module of ``spec`` (``messages.generated.<snake name>``)."""
    return importlib.import_module(f"messages.generated.{spec.module_name}")


def message_class(spec: MessageSpec) -> type[Any]:
    """The generated top-level class of ``spec`` (named as the spec)."""
    return getattr(message_module(spec), spec.name)  # type: ignore[no-any-return]


def _zigzag_varint(value: int, out: bytearray) -> None:
    v = (value << 1) ^ (value >> 63)
    v &= (1 << 64) - 1
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def record_batch(rng: random.Random, *, base_offset: int | None = None,
                 count: int | None = None) -> bytes:
    """One uncompressed record batch, magic v2, with ``count`` (default 1-3) records of random
    keys (or null), values and no headers; lengths and the CRC-32C are correct.

    Layout: baseOffset int64, batchLength int32, partitionLeaderEpoch int32, magic int8 (2),
    crc uint32 (CRC-32C of everything after it), attributes int16, lastOffsetDelta int32,
    baseTimestamp int64, maxTimestamp int64, producerId int64, producerEpoch int16,
    baseSequence int32, records count int32, then each record: length varint, attributes int8,
    timestampDelta varlong, offsetDelta varint, key length varint (-1 = null), key,
    value length varint, value, header count varint.
    """
    if count is None:
        count = rng.randint(1, 3)
    if base_offset is None:
        base_offset = rng.choice([0, rng.randint(0, 1 << 40)])
    base_ts = rng.randint(1_600_000_000_000, 1_900_000_000_000)
    records = bytearray()
    max_delta = 0
    for i in range(count):
        body = bytearray([0])
        delta = rng.randint(0, 1000)
        max_delta = max(max_delta, delta)
        _zigzag_varint(delta, body)
        _zigzag_varint(i, body)
        if rng.random() < 0.3:
            _zigzag_varint(-1, body)
        else:
            key = rng.randbytes(rng.randint(0, 8))
            _zigzag_varint(len(key), body)
            body += key
        value = rng.randbytes(rng.randint(0, 24))
        _zigzag_varint(len(value), body)
        body += value
        _zigzag_varint(0, body)
        _zigzag_varint(len(body), records)
        records += body
    after_crc = struct.pack(
        ">hiqqqhii", 0, count - 1, base_ts, base_ts + max_delta, -1, -1, -1, count
    ) + bytes(records)
    epoch = rng.randint(0, 50)
    crc = crc32c.crc32c(after_crc)
    batch_length = 4 + 1 + 4 + len(after_crc)  # partitionLeaderEpoch + magic + crc + rest
    return struct.pack(">qiibI", base_offset, batch_length, epoch, 2, crc) + after_crc


class MessageGenerator:
    """Random messages of one spec. ``max_array`` bounds array lengths at the top level; each
    level of nesting allows one element fewer (at least one level always may hold one)."""

    def __init__(self, spec: MessageSpec, rng: random.Random, *, max_array: int = 3) -> None:
        self.spec = spec
        self.rng = rng
        self.max_array = max_array
        self.module = message_module(spec)
        self.top = getattr(self.module, spec.name)
        self._structs = spec.structs

    def message(self, version: int) -> Any:
        """A random instance of the spec's top-level class, legal at ``version``."""
        if version not in self.spec.valid_versions:
            raise ValueError(f"{self.spec.name} has no version {version}")
        return self._struct(self.spec.name, version, depth=0)

    # -- structure ------------------------------------------------------------------------------

    def _struct(self, name: str, version: int, depth: int) -> Any:
        cls = getattr(self.module, name)
        kwargs: dict[str, Any] = {}
        for f in self._structs[name].fields:
            if not f.present_in(version):
                continue
            if f.tagged_in(version) and self.rng.random() < 0.35:
                continue  # the default, which is not written at all
            kwargs[f.attr] = self._field(f, version, depth)
        return cls(**kwargs)

    def _field(self, f: FieldSpec, version: int, depth: int) -> Any:
        if f.nullable_in(version) and self.rng.random() < 0.2:
            return None
        t = f.type
        if t.is_array:
            limit = max(1, self.max_array - depth)
            n = self.rng.choice([0, *range(1, limit + 1)])
            element = t.element
            if element.is_struct:
                return [self._struct(element.text, version, depth + 1) for _ in range(n)]
            return [self._primitive(element, version) for _ in range(n)]
        if t.is_struct:
            return self._struct(t.text, version, depth + 1)
        return self._primitive(t, version)

    # -- primitives -------------------------------------------------------------------------------

    def _primitive(self, t: FieldType, version: int) -> Any:
        rng = self.rng
        kind = t.text
        if kind == "bool":
            return rng.random() < 0.5
        if kind in INT_RANGES:
            lo, hi = INT_RANGES[kind]
            roll = rng.random()
            if roll < 0.3:
                return rng.choice([v for v in (lo, hi, 0, 1, -1) if lo <= v <= hi])
            if roll < 0.6:
                return rng.randint(max(lo, -100), min(hi, 100))
            return rng.randint(lo, hi)
        if kind == "float64":
            return rng.choice([
                0.0, -0.0, 1.5, -2.25, 1e300, -1e-300, 5e-324,
                rng.uniform(-1e12, 1e12), rng.random(),
            ])
        if kind == "string":
            return self._string()
        if kind == "bytes":
            return rng.randbytes(rng.choice([0, 1, rng.randint(2, 40)]))
        if kind == "uuid":
            roll = rng.random()
            if roll < 0.1:
                return ZERO_UUID
            if roll < 0.15:
                return METADATA_TOPIC_ID
            return Uuid(rng.randbytes(16))
        if kind == "records":
            roll = rng.random()
            if roll < 0.25:
                return b""
            batches = [record_batch(rng) for _ in range(1 if roll < 0.8 else 2)]
            return b"".join(batches)
        raise ValueError(f"no generator for type {kind}")

    def _string(self) -> str:
        rng = self.rng
        roll = rng.random()
        if roll < 0.1:
            return ""
        if roll < 0.5:
            return "".join(rng.choice(_ASCII) for _ in range(rng.randint(1, 16)))
        return "".join(rng.choice(_STRING_PIECES) for _ in range(rng.randint(1, 12)))


def random_messages(spec: MessageSpec, version: int, count: int, seed: str) -> list[Any]:
    """``count`` random messages of ``spec`` at ``version``; the same ``seed`` (any string)
    gives the same messages."""
    gen = MessageGenerator(spec, random.Random(seed))
    return [gen.message(version) for _ in range(count)]


_UNKNOWN_TAG_CANDIDATES = (*range(0, 8), 31, 127, 128, 1000, 16384, 70000)


def with_unknown_tags(message: Any, spec: MessageSpec, version: int,
                      rng: random.Random) -> Any:
    """A copy of ``message`` in which about half of the structs (the top level included) carry
    random unknown tagged fields, as a newer peer would send: distinct tags that no field of that
    struct has at any version, in ascending order, with 0-8 arbitrary bytes each. ``version``
    must be flexible."""
    if not spec.flexible_in(version):
        raise ValueError(f"{spec.name} v{version} has no tagged fields")
    copy = _copy.deepcopy(message)
    structs = spec.structs

    def visit(obj: Any, name: str) -> None:
        fields = structs[name].fields
        for f in fields:
            if not f.present_in(version):
                continue
            t = f.type.element if f.type.is_array else f.type
            if not t.is_struct:
                continue
            value = getattr(obj, f.attr)
            for element in (value or []) if f.type.is_array else [value]:
                if element is not None:
                    visit(element, t.text)
        if rng.random() < 0.5:
            # Kafka's readers refuse a tag that belongs to a field of the struct at any version
            # ("Tag 0 is not valid for version 0"), so unknown means unused by every version.
            known = {f.tag for f in fields if f.tag is not None}
            free = [t for t in _UNKNOWN_TAG_CANDIDATES if t not in known]
            tags = sorted(rng.sample(free, rng.randint(1, 3)))
            obj.unknown_tagged_fields = tuple((t, rng.randbytes(rng.randint(0, 8))) for t in tags)

    visit(copy, spec.name)
    return copy
