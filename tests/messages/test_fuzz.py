"""Fuzzing every generated decoder (requests, responses, metadata records): each takes
``KWIRE_FUZZ_INPUTS`` generated inputs (default 300 per spec in ``make test``; ``make nightly``
gives each 10^6) and may answer them only with a message or DecodeError -- never another
exception, whatever the bytes.

Three inputs in four are mutations of valid encodings of random messages of the spec's
versions (tests/messages/randmsg.py): bytes flipped, set to 0x00 or 0xff (lengths and varints
at their extremes), inserted, deleted, duplicated, or cut off; the fourth is random bytes. Each
spec seeds its own generator with its name, so a crash names the spec, the version and the
input's hex and replays exactly. The server's side (a connection sending such frames is closed
and the server goes on) is tests/server/test_net_robustness.py.
"""

from __future__ import annotations

import os
import random

import pytest

from kwire.wire import DecodeError
from messages.spec import MessageSpec, load_all
from tests.messages.randmsg import MessageGenerator, message_class

SPECS = load_all()
FUZZ_INPUTS = int(os.environ.get("KWIRE_FUZZ_INPUTS", "300"))
SEEDS_PER_VERSION = 3


def mutate(data: bytes, rng: random.Random) -> bytes:
    """``data`` with one to three random edits."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(6)
        at = rng.randrange(len(out) + 1)
        if op == 0 and out:
            out[min(at, len(out) - 1)] ^= rng.randint(1, 255)
        elif op == 1 and out:
            out[min(at, len(out) - 1)] = rng.choice((0x00, 0xFF, 0x7F, 0x80))
        elif op == 2:
            out[at:at] = rng.randbytes(rng.randint(1, 8))
        elif op == 3:
            del out[at:at + rng.randint(1, 8)]
        elif op == 4:
            piece = out[at:at + rng.randint(1, 16)]
            out[at:at] = piece
        else:
            del out[at:]
    return bytes(out)


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_decoder_answers_any_input_with_a_message_or_decode_error(spec: MessageSpec) -> None:
    rng = random.Random(f"fuzz-{spec.name}")
    cls = message_class(spec)
    generator = MessageGenerator(spec, rng)
    seeds = [(v, generator.message(v).encode(v)) for v in spec.valid_versions for _ in range(SEEDS_PER_VERSION)]
    decoded = rejected = 0
    for n in range(FUZZ_INPUTS):
        version, base = seeds[n % len(seeds)]
        data = mutate(base, rng) if n % 4 else rng.randbytes(rng.randrange(48))
        try:
            cls.decode(data, version)
            decoded += 1
        except DecodeError:
            rejected += 1
        except Exception as exc:  # the failure being tested for
            raise AssertionError(f"{spec.name} v{version}, input {n}: {type(exc).__name__}: {exc} "
                                 f"from {data.hex()}") from exc
    # the inputs reach the decoder's checks: some are refused (most valid encodings of a spec
    # without fields still decode after a mutation, so no such floor for the decoded ones)
    assert rejected > 0, (spec.name, decoded)
