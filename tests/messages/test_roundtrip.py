"""Property tests over every spec and every version it has: decode(encode(m)) == m, read from a
buffer at an offset stops at the message's end, the JSON form round-trips, and cut or corrupted
bytes raise DecodeError and nothing else.

The messages come from the seeded generator of tests/messages/randmsg.py (edge values, every
kind of string, nulls where allowed, tagged fields set or left out, nested arrays, well-formed
record batches, and unknown tagged fields on flexible versions). Each case seeds its own
generator with its id, so a failure names the case and the example and replays exactly.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from kwire.wire import DecodeError
from messages.spec import MessageSpec, load_all
from tests.messages.randmsg import MessageGenerator, message_class, with_unknown_tags

SPECS = load_all()
CASES = [(s, v) for s in SPECS for v in s.valid_versions]
IDS = [f"{s.name}-v{v}" for s, v in CASES]
EXAMPLES = 24
"""Messages per (spec, version) and property."""


def _examples(spec: MessageSpec, version: int, purpose: str, *, unknown_tags: bool) -> Iterator[Any]:
    """``EXAMPLES`` messages of ``spec`` at ``version``; with ``unknown_tags``, every other one of a
    flexible version carries unknown tagged fields (as a newer peer's would)."""
    rng = random.Random(f"{spec.name}-v{version}-{purpose}")
    generator = MessageGenerator(spec, rng)
    flexible = spec.flexible_in(version)
    for i in range(EXAMPLES):
        message = generator.message(version)
        if unknown_tags and flexible and i % 2:
            message = with_unknown_tags(message, spec, version, rng)
        yield message


@pytest.mark.parametrize(("spec", "version"), CASES, ids=IDS)
def test_round_trip(spec: MessageSpec, version: int) -> None:
    cls = message_class(spec)
    for i, message in enumerate(_examples(spec, version, "bytes", unknown_tags=True)):
        encoded = message.encode(version)
        assert cls.decode(encoded, version) == message, f"example {i}: {message!r}"
        # Decoding from a memoryview at an offset reads the same message and stops at its end.
        framed = memoryview(b"\xaa\xbb" + encoded + b"\xcc")
        decoded, end = cls.read(framed, 2, version)
        assert decoded == message, f"example {i}: {message!r}"
        assert end == 2 + len(encoded), f"example {i}: {message!r}"


@pytest.mark.parametrize(("spec", "version"), CASES, ids=IDS)
def test_truncated_or_corrupted_bytes_raise_decode_error(spec: MessageSpec, version: int) -> None:
    cls = message_class(spec)
    rng = random.Random(f"{spec.name}-v{version}-cuts")
    for i, message in enumerate(_examples(spec, version, "corrupt", unknown_tags=True)):
        encoded = message.encode(version)
        if not encoded:
            continue
        for cut in {0, len(encoded) - 1, rng.randrange(len(encoded))}:
            with pytest.raises(DecodeError):
                cls.decode(encoded[:cut], version)
        for _ in range(3):
            flipped = bytearray(encoded)
            flipped[rng.randrange(len(encoded))] ^= rng.randint(1, 255)
            try:
                cls.decode(bytes(flipped), version)
            except DecodeError:
                pass  # the only exception a corrupt message may raise
            except Exception as exc:  # pragma: no cover - the failure being tested for
                raise AssertionError(f"example {i}: {type(exc).__name__} from {bytes(flipped).hex()}") from exc


@pytest.mark.parametrize(("spec", "version"), CASES, ids=IDS)
def test_json_round_trip(spec: MessageSpec, version: int) -> None:
    # Kafka's JSON form has no place for unknown tagged fields: the messages carry none.
    cls = message_class(spec)
    for i, message in enumerate(_examples(spec, version, "json", unknown_tags=False)):
        assert cls.from_json(message.to_json(version), version) == message, f"example {i}: {message!r}"
