"""kwire's generated codecs against Kafka's own generated classes, byte for byte.

For every spec in messages/specs, every version that both kwire and a pinned Kafka release
support, and ``MESSAGES_PER_VERSION`` seeded random messages (tests/messages/randmsg.py; 60 in
``make test``, 1,000 in ``make nightly`` through ``KWIRE_CODEC_MESSAGES``), each message
``m`` at version ``v`` must satisfy, with Kafka's classes driven by the Java oracle
(compat/oracle.py):

1. Kafka's class built from ``m.to_json(v)`` (its ``JsonConverter.read``) writes exactly
   ``m.encode(v)``;
2. kwire decodes those Kafka bytes back to ``m``;
3. Kafka's class reads ``m.encode(v)`` completely, and its ``JsonConverter.write`` gives exactly
   ``m.to_json(v)`` -- except that Kafka writes every non-null ``records`` value as ``""`` (it
   never serialises record contents to JSON: ``JsonConverter.write`` puts an empty binary node in
   their place), where kwire writes the bytes in base64 so that its JSON form round-trips; that
   one difference is allowed for, and only for ``records`` fields.

Against a release whose field names differ from kwire's (3.9's VoteRequest says Candidate* where
4.x says Replica*; see test_spec_fidelity.py), the JSON is re-keyed with that release's names;
the bytes are compared unchanged.

Separately, for every flexible version, messages carrying random unknown tagged fields (what a
newer peer sends) must come back byte for byte from Kafka's classes, which keep such fields, and
kwire must decode them with the fields preserved; and sections that repeat tags or put unknown
tags out of order must be read and written back (or refused) as Kafka's classes do.

A failure names the message, version, index and both byte strings; rerun one spec with
``pytest compat/test_java_byte_identity.py -k VoteRequest``.
"""

from __future__ import annotations

import functools
import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from compat.jarspecs import ABSENT, jar_specs
from compat.kafka import PINNED_VERSIONS, require_kafka
from compat.oracle import JavaOracle, OracleError
from compat.specdiff import compare_specs, intersect, parse_versions, translate_json
from kwire.wire import EncodeError
from messages.generated.fetch_request import FetchRequest
from messages.spec import MessageSpec, load_all
from tests.messages.randmsg import message_class, random_messages, with_unknown_tags

pytestmark = pytest.mark.compat

MESSAGES_PER_VERSION = int(os.environ.get("KWIRE_CODEC_MESSAGES", "60"))
UNKNOWN_TAG_MESSAGES_PER_VERSION = 25
SPECS: list[MessageSpec] = load_all()
MAX_REPORTED = 5


@functools.cache
def _messages(spec_name: str, version: int) -> tuple[Any, ...]:
    """The random messages of one spec version; the same for every Kafka release."""
    spec = next(s for s in SPECS if s.name == spec_name)
    return tuple(random_messages(spec, version, MESSAGES_PER_VERSION, f"{spec_name}/v{version}"))


def _canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, ensure_ascii=False)


def _first_difference(a: bytes, b: bytes) -> int:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def _shared_versions(spec: MessageSpec, kafka_spec: dict[str, Any]) -> list[int]:
    lo, hi = intersect((spec.valid_versions.lo, spec.valid_versions.hi),
                       parse_versions(kafka_spec.get("validVersions")))
    return list(range(lo, hi + 1))


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
@pytest.mark.parametrize("kafka_version", PINNED_VERSIONS, ids=lambda v: f"kafka-{v}")
def test_byte_identity(kafka_version: str, spec: MessageSpec,
                       java_oracles: dict[str, JavaOracle]) -> None:
    require_kafka(kafka_version)
    if spec.name in ABSENT.get(kafka_version, {}):
        assert spec.name not in jar_specs(kafka_version)  # nothing of that release to compare with
        return
    oracle = java_oracles[kafka_version]
    kafka_spec = jar_specs(kafka_version)[spec.name].data
    ours_raw = json.loads(Path(str(spec.path)).read_text(encoding="utf-8"))
    _, renames = compare_specs(ours_raw, kafka_spec, restrict=True)
    versions = _shared_versions(spec, kafka_spec)
    assert versions, f"{spec.name}: no version shared with Kafka {kafka_version}"
    cls = message_class(spec)

    cases: list[tuple[int, int, Any, bytes, dict[str, Any], dict[str, Any]]] = []
    for v in versions:
        for i, m in enumerate(_messages(spec.name, v)):
            as_json = m.to_json(v)
            cases.append((v, i, m, m.encode(v), translate_json(as_json, ours_raw, renames),
                          translate_json(as_json, ours_raw, renames, blank_records=True)))

    java_bytes = oracle.encode_many((spec.name, v, j) for v, _i, _m, _b, j, _k in cases)
    java_json = oracle.decode_many((spec.name, v, b) for v, _i, _m, b, _j, _k in cases)

    failures: list[str] = []
    for (v, i, m, ours, ours_json, kafka_view), theirs, decoded in zip(cases, java_bytes, java_json,
                                                           strict=True):
        where = f"{spec.name} v{v} #{i} (Kafka {kafka_version})"
        if isinstance(theirs, OracleError):
            failures.append(f"{where}: Kafka could not encode kwire's JSON: {theirs}\n"
                            f"    json={_canonical(ours_json)[:600]}")
        elif theirs != ours:
            at = _first_difference(ours, theirs)
            failures.append(
                f"{where}: bytes differ at offset {at}\n"
                f"    kwire={ours.hex()}\n    kafka={theirs.hex()}\n    message={m!r:.600}")
        else:
            try:
                back = cls.decode(theirs, v)
            except Exception as exc:  # reported with the bytes that caused it
                failures.append(f"{where}: kwire cannot decode Kafka's bytes: {exc!r}\n"
                                f"    kafka={theirs.hex()}")
            else:
                if back != m:
                    failures.append(f"{where}: decoded {back!r:.600}\n    expected {m!r:.600}")
        if isinstance(decoded, OracleError):
            failures.append(f"{where}: Kafka could not decode kwire's bytes: {decoded}\n"
                            f"    kwire={ours.hex()}")
        elif _canonical(decoded) != _canonical(kafka_view):
            failures.append(f"{where}: Kafka's JSON of kwire's bytes differs\n"
                            f"    kafka={_canonical(decoded)[:600]}\n"
                            f"    kwire={_canonical(kafka_view)[:600]}")

    assert not failures, (
        f"{len(failures)} disagreements over {len(cases)} messages "
        f"(versions {versions[0]}-{versions[-1]}):\n" + "\n".join(failures[:MAX_REPORTED])
    )


@pytest.mark.parametrize("kafka_version", PINNED_VERSIONS, ids=lambda v: f"kafka-{v}")
def test_unknown_tagged_fields_survive(kafka_version: str,
                                       java_oracles: dict[str, JavaOracle]) -> None:
    require_kafka(kafka_version)
    oracle = java_oracles[kafka_version]
    cases: list[tuple[str, int, int, Any, bytes]] = []
    for spec in SPECS:
        if spec.name in ABSENT.get(kafka_version, {}):
            continue
        kafka_spec = jar_specs(kafka_version)[spec.name].data
        for v in _shared_versions(spec, kafka_spec):
            if not spec.flexible_in(v):
                continue
            rng = random.Random(f"{spec.name}/v{v}/unknown-tags")
            for i, m in enumerate(_messages(spec.name, v)[:UNKNOWN_TAG_MESSAGES_PER_VERSION]):
                tagged = with_unknown_tags(m, spec, v, rng)
                cases.append((spec.name, v, i, tagged, tagged.encode(v)))
    assert len(cases) > 1000

    failures: list[str] = []
    results = oracle.reencode_many((name, v, raw) for name, v, _i, _m, raw in cases)
    for (name, v, i, m, ours), theirs in zip(cases, results, strict=True):
        where = f"{name} v{v} #{i} with unknown tags (Kafka {kafka_version})"
        if isinstance(theirs, OracleError):
            failures.append(f"{where}: Kafka could not read kwire's bytes: {theirs}\n"
                            f"    kwire={ours.hex()}")
        elif theirs != ours:
            failures.append(f"{where}: Kafka wrote back different bytes "
                            f"(offset {_first_difference(ours, theirs)})\n"
                            f"    kwire={ours.hex()}\n    kafka={theirs.hex()}")
        else:
            back = type(m).decode(ours, v)
            if back != m:
                failures.append(f"{where}: kwire decoded {back!r:.600}\n    expected {m!r:.600}")
    assert not failures, (f"{len(failures)} disagreements over {len(cases)} messages:\n"
                          + "\n".join(failures[:MAX_REPORTED]))


def test_every_spec_has_a_shared_version_with_each_release() -> None:
    for version in PINNED_VERSIONS:
        require_kafka(version)
        specs = jar_specs(version)
        for spec in SPECS:
            if spec.name not in ABSENT.get(version, {}):
                assert _shared_versions(spec, specs[spec.name].data), (spec.name, version)


def test_oracle_reports_errors_without_dying(java_oracles: dict[str, JavaOracle]) -> None:
    version = PINNED_VERSIONS[-1]
    require_kafka(version)
    oracle = java_oracles[version]
    results = oracle.decode_many([("VoteRequest", 1, b"\x00"),        # truncated
                                  ("VoteRequest", 1, bytes(64))])     # trailing bytes
    assert all(isinstance(r, OracleError) for r in results), results
    bad = oracle.call_many([{"op": "nope"}, {"op": "encode", "class": "no.Such", "version": 0,
                                             "json": {}}])
    assert [a["ok"] for a in bad] == [False, False]
    assert oracle.encode("VoteRequest", 1, {"clusterId": None, "voterId": 7, "topics": []}) \
        == bytes.fromhex("00" "00000007" "01" "00")


@pytest.mark.parametrize("kafka_version", PINNED_VERSIONS, ids=lambda v: f"kafka-{v}")
def test_repeated_and_disordered_tags_are_handled_as_kafka_does(
    kafka_version: str, java_oracles: dict[str, JavaOracle]
) -> None:
    """FetchRequest v15 sections mixing its tag 0 (ClusterId), given 0-2 times, with unknown
    tags 5-8 in any order and number: Kafka's generated reader keeps the last ClusterId and
    every unknown field in wire order, and its ``RawTaggedFieldWriter`` refuses to write back
    unknown tags that are repeated or out of order. kwire must write back the same bytes, or
    refuse (EncodeError) exactly where Kafka throws."""
    require_kafka(kafka_version)
    oracle = java_oracles[kafka_version]
    body = FetchRequest(max_wait_ms=500).encode(15)[:-1]  # all but the empty section's count
    rng = random.Random("repeated-tags")
    frames = []
    for _ in range(150):
        fields = [(0, bytes([2, rng.choice(b"abc")])) for _ in range(rng.randint(0, 2))]
        fields += [(rng.randint(5, 8), rng.randbytes(rng.randint(0, 2)))
                   for _ in range(rng.randint(0, 3))]
        rng.shuffle(fields)
        section = bytearray([len(fields)])
        for tag, data in fields:
            section += bytes([tag, len(data)]) + data
        frames.append(body + bytes(section))
    refused = 0
    for frame, theirs in zip(frames, oracle.reencode_many(("FetchRequest", 15, f) for f in frames),
                             strict=True):
        decoded = FetchRequest.decode(frame, 15)
        if isinstance(theirs, OracleError):
            assert "Invalid raw tag field list" in str(theirs), frame.hex()
            with pytest.raises(EncodeError, match="is not higher than it"):
                decoded.encode(15)
            refused += 1
        else:
            assert decoded.encode(15) == theirs, frame.hex()
    assert 0 < refused < len(frames)
