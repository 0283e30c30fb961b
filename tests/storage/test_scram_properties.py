"""Property tests of SCRAM credentials as ``kafka-storage format --add-scram`` makes them
(``ScramParser``, ``ScramFormatter``; RFC 5802).

* Any user, password, salt and iteration count gives the credential scramp computes, an
  implementation written apart from kwire's: the same salt, StoredKey, ServerKey and count.
* The salted-password form gives the same credential as the password it was salted from.
* The order of the components and double quotes around values do not change the credential.
* An iteration count outside Kafka's bounds is refused with Kafka's message.
"""

from __future__ import annotations

import base64
import hashlib

import pytest
import scramp
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.scram_args import (
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    ScramArgumentError,
    parse_scram_argument,
)
from tests.properties import examples

mechanisms = st.sampled_from(sorted(MECHANISMS))
# names and passwords without the argument syntax's separators; passwords in printable ASCII,
# where scramp's SASLprep changes nothing (Kafka's ScramFormatter applies none)
names = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FF, blacklist_characters=',="[]'),
                min_size=1, max_size=12)
passwords = st.text(st.characters(min_codepoint=33, max_codepoint=126, blacklist_characters=',="[]'),
                    min_size=1, max_size=12)
salts = st.binary(min_size=12, max_size=32)
iterations = st.sampled_from([MIN_ITERATIONS, MIN_ITERATIONS + 1, 5000, MAX_ITERATIONS])


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


@settings(deadline=None, max_examples=examples(12))
@given(mechanism=mechanisms, name=names, password=passwords, salt=salts, count=iterations,
       order=st.permutations(range(4)), quoted=st.booleans())
def test_a_password_credential_is_scramp_s_in_any_component_order(
    mechanism: str, name: str, password: str, salt: bytes, count: int, order: list[int], quoted: bool
) -> None:
    q = '"' if quoted else ""
    parts = [f"name={q}{name}{q}", f"password={q}{password}{q}", f"salt={b64(salt)}", f"iterations={count}"]
    record = parse_scram_argument(f"{mechanism}=[{','.join(parts[i] for i in order)}]")
    theirs_salt, stored_key, server_key, their_count = scramp.ScramMechanism(mechanism).make_auth_info(
        password, iteration_count=count, salt=salt)
    assert (record.name, record.mechanism) == (name, MECHANISMS[mechanism][0])
    assert (record.salt, record.iterations) == (salt, count) == (theirs_salt, their_count)
    assert (record.stored_key, record.server_key) == (stored_key, server_key)


@settings(deadline=None, max_examples=examples(12))
@given(mechanism=mechanisms, password=passwords, salt=salts, count=iterations)
def test_a_salted_password_gives_the_credential_of_its_password(
    mechanism: str, password: str, salt: bytes, count: int
) -> None:
    digest = MECHANISMS[mechanism][1]
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), salt, count)
    from_salted = parse_scram_argument(
        f"{mechanism}=[name=u,saltedpassword={b64(salted)},salt={b64(salt)},iterations={count}]")
    from_password = parse_scram_argument(f"{mechanism}=[name=u,password={password},salt={b64(salt)},iterations={count}]")
    assert from_salted == from_password


@settings(deadline=None, max_examples=examples(40))
@given(mechanism=mechanisms, count=st.integers(-(2**31), MIN_ITERATIONS - 1) | st.integers(MAX_ITERATIONS + 1, 2**31))
def test_iterations_outside_kafka_s_bounds_are_refused(mechanism: str, count: int) -> None:
    bound = f">= {MIN_ITERATIONS}" if count < MIN_ITERATIONS else f"<= {MAX_ITERATIONS}"
    with pytest.raises(ScramArgumentError, match=f"must be {bound} for add-scram using {MECHANISMS[mechanism][2]}"):
        parse_scram_argument(f"{mechanism}=[name=u,password=p,iterations={count}]")
