"""Kafka's 128-bit UUID (org.apache.kafka.common.Uuid).

Layout: 16 bytes, the most significant 64 bits first, both halves big-endian. The text form is
URL-safe base64 without padding (22 characters), e.g. ``AAAAAAAAAAAAAAAAAAAAAQ`` for the metadata
topic id (0, 1).
"""

from __future__ import annotations

import base64
import os
import random


class Uuid(bytes):
    """A Kafka UUID: an immutable 16-byte value whose ``str()`` is Kafka's base64 form.

    Raises ValueError when constructed from anything but exactly 16 bytes.
    """

    __slots__ = ()

    def __new__(cls, value: bytes = b"\0" * 16) -> Uuid:
        if len(value) != 16:
            raise ValueError(f"a Uuid is 16 bytes, got {len(value)}")
        return super().__new__(cls, value)

    @classmethod
    def from_string(cls, text: str) -> Uuid:
        """Parse Kafka's base64 form (``Uuid.fromString``). Raises ValueError when malformed."""
        if len(text) > 24:
            raise ValueError(f"a Uuid string is at most 24 characters: {text!r}")
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        except (ValueError, TypeError) as exc:
            raise ValueError(f"not a base64 Uuid: {text!r}") from exc
        if len(raw) != 16:
            raise ValueError(f"a Uuid string decodes to 16 bytes: {text!r}")
        return cls(raw)

    @classmethod
    def from_longs(cls, most_significant: int, least_significant: int) -> Uuid:
        """Build from the two signed or unsigned 64-bit halves, as Java's ``new Uuid(msb, lsb)``."""
        return cls(
            (most_significant & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "big")
            + (least_significant & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "big")
        )

    @classmethod
    def random(cls, rng: random.Random | None = None) -> Uuid:
        """A random Uuid as ``Uuid.randomUuid()``: never a reserved value, never a leading '-'.
        From ``rng`` when given (a deterministic controller's topic ids), else from
        ``os.urandom``."""
        while True:
            candidate = cls(os.urandom(16) if rng is None else rng.randbytes(16))
            if candidate.most_significant_bits == 0 and candidate.least_significant_bits < 100:
                continue
            if str(candidate).startswith("-"):
                continue
            return candidate

    @property
    def most_significant_bits(self) -> int:
        """The first 8 bytes as an unsigned 64-bit int (Java's ``getMostSignificantBits`` is the
        same bits, signed)."""
        return int.from_bytes(self[:8], "big")

    @property
    def least_significant_bits(self) -> int:
        """The last 8 bytes as an unsigned 64-bit int (Java's ``getLeastSignificantBits`` is
        the same bits, signed)."""
        return int.from_bytes(self[8:], "big")

    def __str__(self) -> str:
        text = _texts.get(self)
        if text is None:
            if len(_texts) >= INTERNED_UUIDS_MAX:
                _texts.clear()
            text = _texts[self] = base64.urlsafe_b64encode(bytes(self)).rstrip(b"=").decode("ascii")
        return text

    def __repr__(self) -> str:
        text = _texts.get(self) or str(self)
        return f"Uuid('{text}')"  # the text is base64: repr() would quote it the same way


# The codecs' Uuids. A quorum sees few distinct ids (a directory id per replica, a topic id per
# topic, one cluster), and a decoded message carries them over and over: the decoders take
# each one from this table instead of making a new bytes subclass for every occurrence. Uuids
# are immutable, so a shared object is indistinguishable from a fresh one. The table is bounded:
# at INTERNED_UUIDS_MAX entries it starts again, so that a peer sending ever-new ids costs a
# miss each, not memory.

INTERNED_UUIDS_MAX = 4096


class _InternTable(dict[bytes, Uuid]):
    """raw 16 bytes -> their Uuid; a missing one is made, and the table started again at
    INTERNED_UUIDS_MAX entries."""

    def __missing__(self, raw: bytes) -> Uuid:
        if len(self) >= INTERNED_UUIDS_MAX:
            self.clear()
        found = self[raw] = bytes.__new__(Uuid, raw)
        return found


_interned = _InternTable()
_texts: dict[bytes, str] = {}
"""Uuid -> its text, bounded as the interned table: logs and traces print the same few ids
over and over, and base64 costs more than a lookup."""

intern_uuid = _interned.__getitem__
"""``intern_uuid(raw)``: the interned Uuid of ``raw``, which the caller guarantees is 16 bytes
(the codecs take it from ``unpack_from('16s')``); made and interned on first use. A C-level
call when the id was seen before, so ``map(intern_uuid, raws)`` makes a run of ids cheaply."""


ZERO_UUID = Uuid(b"\0" * 16)
"""Uuid.ZERO_UUID: no id (also DirectoryId.MIGRATING)."""

METADATA_TOPIC_ID = Uuid.from_longs(0, 1)
"""Uuid.METADATA_TOPIC_ID, the topic id of ``__cluster_metadata``: ``AAAAAAAAAAAAAAAAAAAAAQ``."""
