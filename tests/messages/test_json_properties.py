"""Property tests of Kafka's JSON form of messages (``JsonConverter``; kwire reads the
``quorum-state`` file with it) on input that is not what the writer gives.

* A field given a value of any other JSON shape (null, a boolean, an integer in or out of its
  type's range, a float, a string, an array, an object) is refused with ValueError, or read into
  a message that encodes at that version and reads back the same: what the reader accepts, the
  writer can write.
* A field that is mandatory at the version (present and not tagged) cannot be left out: the
  error names it.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from messages.generated.registry import METADATA_RECORDS, REQUESTS, RESPONSES
from messages.spec import load_all
from tests.messages.randmsg import MessageGenerator
from tests.properties import examples

SPECS = {spec.name: spec for spec in load_all()}
CLASSES = sorted({*REQUESTS.values(), *RESPONSES.values(), *METADATA_RECORDS.values()}, key=lambda c: c.SPEC_NAME)
slow = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

other_shapes = st.sampled_from([None, True, False, 0, 1, -1, 255, 2**15, 2**31, 2**32, -(2**63) - 1, 2**64,
                                1.5, float("inf"), "", "x", "AAAA", "not base64!", "00000000-0000", [], [1], {}, {"a": 1}])


@st.composite
def json_messages(draw: st.DrawFn) -> tuple[type[Any], int, dict[str, Any]]:
    cls = draw(st.sampled_from(CLASSES), label="message")
    version = draw(st.integers(cls.LOWEST_VERSION, cls.HIGHEST_VERSION), label="version")
    message = MessageGenerator(SPECS[cls.SPEC_NAME], random.Random(draw(st.integers(0, 2**32)))).message(version)
    return cls, version, message.to_json(version)


@settings(slow, max_examples=examples(200))
@given(case=json_messages(), value=other_shapes, data=st.data())
def test_a_field_of_another_shape_is_refused_or_read_into_a_message_that_encodes(
    case: tuple[type[Any], int, dict[str, Any]], value: Any, data: st.DataObject
) -> None:
    cls, version, doc = case
    if not doc:
        return
    key = data.draw(st.sampled_from(sorted(doc)), label="field")
    try:
        message = cls.from_json({**doc, key: value}, version)
    except ValueError:
        return  # refused, with the one exception type the reader promises
    assert cls.decode(message.encode(version), version) == message


@settings(slow, max_examples=examples(100))
@given(case=json_messages(), data=st.data())
def test_a_mandatory_field_cannot_be_left_out(case: tuple[type[Any], int, dict[str, Any]], data: st.DataObject) -> None:
    cls, version, doc = case
    mandatory = [f.json_name for f in cls._FIELDS
                 if f.versions[0] <= version <= f.versions[1] and not f.tagged[0] <= version <= f.tagged[1]]
    if not mandatory:
        return
    key = data.draw(st.sampled_from(mandatory), label="field")
    with pytest.raises(ValueError, match=repr(key)):
        cls.from_json({k: v for k, v in doc.items() if k != key}, version)
