"""Property tests of the code tables of the wire layer: error codes (``Errors``) and API keys
(``ApiKeys``).

* Any int16 maps to an error member without raising: its own where kwire knows the code,
  UNKNOWN_SERVER_ERROR otherwise (``Errors.forCode``).
* The retriable flag of every code agrees with kafka-python's table, an implementation written
  apart from kwire's (each of its error classes carries ``errno`` and ``retriable``); NONE is not
  an error and not retriable.
* Every error but NONE has a readable one-sentence message made of its name's words.
* Every API key's spec name is the name its request and response specs start with, and the
  request and response registries hold the same keys.
"""

from __future__ import annotations

import kafka.errors
from hypothesis import given, settings
from hypothesis import strategies as st

from kwire.api_keys import ApiKey
from kwire.errors import Errors
from messages.generated.registry import REQUESTS, RESPONSES
from tests.properties import examples

KNOWN = {member.value for member in Errors}

KAFKA_PYTHON = {
    cls.errno: cls
    for cls in vars(kafka.errors).values()
    if isinstance(cls, type) and issubclass(cls, kafka.errors.BrokerResponseError) and isinstance(
        getattr(cls, "errno", None), int)
}


@settings(deadline=None, max_examples=examples(100))
@given(code=st.integers(-(2**15), 2**15 - 1) | st.sampled_from(sorted(KNOWN)))
def test_any_int16_maps_to_its_error_or_the_unknown_server_error(code: int) -> None:
    member = Errors.of(code)
    if code in KNOWN:
        assert member.value == code and Errors[member.name] is member
    else:
        assert member is Errors.UNKNOWN_SERVER_ERROR


def test_the_codes_kafka_python_knows_are_nearly_all_of_kwire_s() -> None:
    shared = KNOWN & set(KAFKA_PYTHON)
    assert len(shared) >= len(KNOWN) - 10, sorted(KNOWN - set(KAFKA_PYTHON))


@settings(deadline=None, max_examples=examples(100))
@given(member=st.sampled_from([m for m in Errors if m.value in KAFKA_PYTHON]))
def test_retriable_agrees_with_kafka_python(member: Errors) -> None:
    assert member.retriable == bool(KAFKA_PYTHON[member.value].retriable), member.name


@settings(deadline=None, max_examples=examples(100))
@given(member=st.sampled_from(list(Errors)))
def test_every_error_has_a_sentence_of_its_name(member: Errors) -> None:
    if member is Errors.NONE:
        assert member.message == "" and not member.retriable
        return
    text = member.message
    assert text.endswith(".") and text[0].isupper()
    assert text[:-1].lower().split(" ") == member.name.lower().split("_")


@settings(deadline=None, max_examples=examples(100))
@given(key=st.sampled_from(sorted(REQUESTS)))
def test_an_api_key_names_its_request_and_response_specs(key: int) -> None:
    name = ApiKey(key).spec_name
    assert REQUESTS[key].SPEC_NAME == name + "Request"
    assert RESPONSES[key].SPEC_NAME == name + "Response"
    assert REQUESTS[key].API_KEY == RESPONSES[key].API_KEY == key


def test_requests_and_responses_cover_the_same_api_keys() -> None:
    assert set(REQUESTS) == set(RESPONSES)
    assert all(
        (REQUESTS[k].LOWEST_VERSION, REQUESTS[k].HIGHEST_VERSION) == (RESPONSES[k].LOWEST_VERSION, RESPONSES[k].HIGHEST_VERSION)
        for k in REQUESTS
    )
