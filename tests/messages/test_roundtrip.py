"""Property tests: for every spec and every version, decode(encode(m)) == m, and malformed bytes
raise DecodeError and nothing else."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kwire.wire import DecodeError
from messages.spec import load_all
from tests.messages.strategies import message_class, message_strategy

SPECS = load_all()
CASES = [(s, v) for s in SPECS for v in s.valid_versions]
IDS = [f"{s.name}-v{v}" for s, v in CASES]
COMMON = settings(max_examples=12, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize(("spec", "version"), CASES, ids=IDS)
@COMMON
@given(data=st.data())
def test_round_trip(spec, version, data):
    cls = message_class(spec)
    message = data.draw(message_strategy(spec, version))
    encoded = message.encode(version)
    assert cls.decode(encoded, version) == message
    # Decoding from a memoryview at an offset reads the same message and stops at its end.
    framed = memoryview(b"\xaa\xbb" + encoded + b"\xcc")
    decoded, end = cls.read(framed, 2, version)
    assert decoded == message
    assert end == 2 + len(encoded)


@pytest.mark.parametrize(("spec", "version"), CASES, ids=IDS)
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_truncated_or_corrupted_bytes_raise_decode_error(spec, version, data):
    cls = message_class(spec)
    encoded = data.draw(message_strategy(spec, version)).encode(version)
    if encoded:
        cut = data.draw(st.integers(0, len(encoded) - 1))
        with pytest.raises(DecodeError):
            cls.decode(encoded[:cut], version)
        at = data.draw(st.integers(0, len(encoded) - 1))
        flipped = bytearray(encoded)
        flipped[at] ^= data.draw(st.integers(1, 255))
        try:
            cls.decode(bytes(flipped), version)
        except DecodeError:
            pass


@pytest.mark.parametrize(("spec", "version"), CASES, ids=IDS)
@settings(max_examples=6, deadline=None)
@given(data=st.data())
def test_json_round_trip(spec, version, data):
    cls = message_class(spec)
    message = data.draw(message_strategy(spec, version))
    message.unknown_tagged_fields = ()  # Kafka's JSON form has no place for unknown tags
    _strip_unknown(message)
    assert cls.from_json(message.to_json(version), version) == message


def _strip_unknown(obj):
    for name in obj.__slots__:
        value = getattr(obj, name)
        if name == "unknown_tagged_fields":
            setattr(obj, name, ())
        elif isinstance(value, list):
            for item in value:
                if hasattr(item, "unknown_tagged_fields"):
                    _strip_unknown(item)
        elif hasattr(value, "unknown_tagged_fields"):
            _strip_unknown(value)
