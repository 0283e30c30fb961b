"""kwire's message specs against the specs inside each pinned Kafka release's jars.

``messages/specs/*.json`` were taken from Kafka 4.4.0, so against 4.4.0 every file must match
its namesake in kafka-clients / kafka-metadata / kafka-raft key by key (only ``about`` differs:
kwire writes its own descriptions).

Against 3.9.2 the comparison is restricted to the versions both sides support (see
compat/specdiff.py): there, everything must agree except the differences listed, with their
reasons, in ``EXPECTED_DIFFERENCES``. A difference that is not listed fails, and so does a listed
one that no longer occurs, so the table is always the exact account of how kwire's protocol
surface differs from that release.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compat.jarspecs import ABSENT, jar_specs, strip_json_comments
from compat.kafka import PINNED_VERSIONS, REPO_DIR, require_kafka
from compat.specdiff import Difference, compare_specs, raw_differences

pytestmark = pytest.mark.compat

SPEC_DIR = REPO_DIR / "messages" / "specs"
SPEC_FILES = sorted(SPEC_DIR.glob("*.json"))

# The release messages/specs were copied from; it must match exactly.
SOURCE_VERSION = "4.4.0"

_ZK = ("ZooKeeper mode, and with it the zkBroker listener, was removed in Kafka 4.0 (KIP-833); "
       "4.x specs list only broker and controller")
_KIP_896 = ("Kafka 4.0 removed the oldest protocol versions (KIP-896)")

# (spec, field path in kwire's names or "" for the message, property) -> (kwire, 3.9.2, reason)
EXPECTED_DIFFERENCES: dict[str, dict[tuple[str, str, str], tuple[Any, Any, str]]] = {
    "3.9.2": {
        # -- versions kwire supports beyond 3.9 ------------------------------------------------
        ("AddRaftVoterRequest", "", "validVersions"): (
            "0-1", "0", "v1 adds AckWhenCommitted (KIP-1186, Kafka 4.2)"),
        ("AddRaftVoterResponse", "", "validVersions"): (
            "0-1", "0", "bumped with the request (KIP-1186)"),
        ("ApiVersionsRequest", "", "validVersions"): (
            "0-5", "0-4", "v5 adds ClusterId and NodeId checks and REBOOTSTRAP_REQUIRED (KIP-1242)"),
        ("ApiVersionsResponse", "", "validVersions"): (
            "0-5", "0-4", "bumped with the request (KIP-1242)"),
        ("BrokerHeartbeatRequest", "", "validVersions"): (
            "0-2", "0-1", "v2 adds the tagged CordonedLogDirs (cordoned log directories, KIP-1066)"),
        ("BrokerHeartbeatResponse", "", "validVersions"): (
            "0-2", "0-1", "bumped with the request; the body is unchanged"),
        ("BrokerRegistrationChangeRecord", "", "validVersions"): (
            "0-3", "0-2", "v3 adds the tagged CordonedLogDirs (KIP-1066)"),
        ("RegisterBrokerRecord", "", "validVersions"): (
            "0-4", "0-3", "v4 adds the tagged CordonedLogDirs (KIP-1066)"),
        ("AlterPartitionReassignmentsRequest", "", "validVersions"): (
            "0-1", "0", "v1 adds AllowReplicationFactorChange (KIP-860, Kafka 4.1)"),
        ("AlterPartitionReassignmentsResponse", "", "validVersions"): (
            "0-1", "0", "v1 echoes AllowReplicationFactorChange (KIP-860)"),
        ("DescribeClusterRequest", "", "validVersions"): (
            "0-2", "0-1", "v2 adds IncludeFencedBrokers (KIP-1073)"),
        ("DescribeClusterResponse", "", "validVersions"): (
            "0-2", "0-1", "v2 adds Brokers[].IsFenced (KIP-1073)"),
        ("FetchRequest", "", "validVersions"): (
            "4-18", "0-17",
            f"{_KIP_896}: v0-3 are gone in 4.x; v18 adds the tagged partition HighWatermark "
            "(KIP-1166)"),
        ("FetchResponse", "", "validVersions"): (
            "4-18", "0-17", f"{_KIP_896}; v18 is unchanged in the response (KIP-1166)"),
        ("MetadataRequest", "", "validVersions"): (
            "0-13", "0-12", "v13 allows a top-level error code in the response (KIP-1102)"),
        ("MetadataResponse", "", "validVersions"): (
            "0-13", "0-12", "v13 adds the top-level ErrorCode (KIP-1102)"),
        ("UpdateFeaturesRequest", "", "validVersions"): (
            "0-2", "0-1", "v2 means the response no longer carries per-feature results"),
        ("UpdateFeaturesResponse", "", "validVersions"): (
            "0-2", "0-1", "v2 drops Results (so it became versions 0-1 and ignorable)"),
        ("VoteRequest", "", "validVersions"): (
            "0-2", "0-1", "v2 adds PreVote (KIP-996)"),
        ("VoteResponse", "", "validVersions"): (
            "0-2", "0-1", "bumped with the request (KIP-996)"),
        # -- versions 3.9 has and kwire does not --------------------------------------------------
        ("RequestHeader", "", "validVersions"): (
            "1-2", "0-2",
            "header v0 only framed ControlledShutdownRequest v0, a ZooKeeper-era API gone in 4.0"),
        ("FetchRequest", "", "deprecatedVersions"): (
            None, "0-3", "3.9 marked v0-3 deprecated; 4.0 removed them (KIP-896)"),
        # -- same wire format, different metadata -------------------------------------------------
        ("RequestHeader", "ClientId", "ignorable"): (
            False, True,
            "ClientId exists in every header version kwire has (1-2), so 4.x dropped the flag; "
            "it only ever mattered for header v0"),
        ("UpdateFeaturesResponse", "Results", "ignorable"): (
            True, False,
            "4.x made Results versions 0-1 and ignorable for v2; within 0-1 the field is present "
            "and the flag has no effect"),
        ("VoteRequest", "Topics/Partitions/ReplicaEpoch", "name"): (
            "ReplicaEpoch", "CandidateEpoch",
            "renamed in 4.0 with KIP-996, as a pre-vote requester is not a candidate; same wire "
            "position and type, but the Kafka JSON key differs"),
        ("VoteRequest", "Topics/Partitions/ReplicaId", "name"): (
            "ReplicaId", "CandidateId", "renamed with KIP-996 (see ReplicaEpoch)"),
        ("VoteRequest", "Topics/Partitions/ReplicaDirectoryId", "name"): (
            "ReplicaDirectoryId", "CandidateDirectoryId", "renamed with KIP-996 (see ReplicaEpoch)"),
        ("AllocateProducerIdsRequest", "", "listeners"): (["controller"], ["zkBroker", "controller"], _ZK),
        ("CreateTopicsRequest", "", "validVersions"): ("2-7", "0-7", _KIP_896),
        ("CreateTopicsRequest", "", "deprecatedVersions"): (None, "0-1", f"{_KIP_896}: nothing left to deprecate"),
        ("CreateTopicsRequest", "", "listeners"): (
            ["broker", "controller"], ["zkBroker", "broker", "controller"], _ZK),
        ("CreateTopicsResponse", "", "validVersions"): ("2-7", "0-7", _KIP_896),
        ("DescribeConfigsRequest", "", "validVersions"): ("1-4", "0-4", _KIP_896),
        ("DescribeConfigsRequest", "", "deprecatedVersions"): (None, "0", f"{_KIP_896}: nothing left to deprecate"),
        ("DescribeConfigsRequest", "", "listeners"): (
            ["broker", "controller"], ["zkBroker", "broker", "controller"], _ZK),
        ("DescribeConfigsResponse", "", "validVersions"): ("1-4", "0-4", _KIP_896),
        ("AlterPartitionReassignmentsRequest", "", "listeners"): (
            ["broker", "controller"], ["broker", "controller", "zkBroker"], _ZK),
        ("ListPartitionReassignmentsRequest", "", "listeners"): (
            ["broker", "controller"], ["broker", "controller", "zkBroker"], _ZK),
        ("ElectLeadersRequest", "", "listeners"): (
            ["broker", "controller"], ["zkBroker", "broker", "controller"], _ZK),
        ("DeleteTopicsRequest", "", "validVersions"): ("1-6", "0-6", _KIP_896),
        ("DeleteTopicsRequest", "", "deprecatedVersions"): (None, "0", f"{_KIP_896}: nothing left to deprecate"),
        ("DeleteTopicsRequest", "", "listeners"): (
            ["broker", "controller"], ["zkBroker", "broker", "controller"], _ZK),
        ("DeleteTopicsResponse", "", "validVersions"): ("1-6", "0-6", _KIP_896),
        ("CreatePartitionsRequest", "", "listeners"): (
            ["broker", "controller"], ["zkBroker", "broker", "controller"], _ZK),
        ("CreateAclsRequest", "", "validVersions"): ("1-3", "0-3", _KIP_896),
        ("CreateAclsRequest", "", "deprecatedVersions"): (None, "0", f"{_KIP_896}: nothing left to deprecate"),
        ("CreateAclsRequest", "", "listeners"): (
            ["broker", "controller"], ["zkBroker", "broker", "controller"], _ZK),
        ("CreateAclsResponse", "", "validVersions"): ("1-3", "0-3", _KIP_896),
        ("DescribeAclsRequest", "", "validVersions"): ("1-3", "0-3", _KIP_896),
        ("DescribeAclsRequest", "", "deprecatedVersions"): (None, "0", f"{_KIP_896}: nothing left to deprecate"),
        ("DescribeAclsRequest", "", "listeners"): (
            ["broker", "controller"], ["zkBroker", "broker", "controller"], _ZK),
        ("DescribeAclsResponse", "", "validVersions"): ("1-3", "0-3", _KIP_896),
        ("DeleteAclsRequest", "", "validVersions"): ("1-3", "0-3", _KIP_896),
        ("DeleteAclsRequest", "", "deprecatedVersions"): (None, "0", f"{_KIP_896}: nothing left to deprecate"),
        ("DeleteAclsRequest", "", "listeners"): (
            ["broker", "controller"], ["zkBroker", "broker", "controller"], _ZK),
        ("DeleteAclsResponse", "", "validVersions"): ("1-3", "0-3", _KIP_896),
        ("AlterClientQuotasRequest", "", "listeners"): (
            ["broker", "controller"], ["zkBroker", "broker", "controller"], _ZK),
        ("AlterUserScramCredentialsRequest", "", "listeners"): (
            ["broker", "controller"], ["zkBroker", "broker", "controller"], _ZK),
        ("DescribeUserScramCredentialsRequest", "", "listeners"): (
            ["broker", "controller"], ["zkBroker", "broker", "controller"], _ZK),
        ("CreateDelegationTokenRequest", "", "validVersions"): ("1-3", "0-3", _KIP_896),
        ("CreateDelegationTokenRequest", "", "deprecatedVersions"): (None, "0", f"{_KIP_896}: nothing left to deprecate"),
        ("CreateDelegationTokenRequest", "", "listeners"): (
            ["broker", "controller"], ["zkBroker", "broker", "controller"], _ZK),
        ("CreateDelegationTokenResponse", "", "validVersions"): ("1-3", "0-3", _KIP_896),
        ("DescribeDelegationTokenRequest", "", "validVersions"): ("1-3", "0-3", _KIP_896),
        ("DescribeDelegationTokenRequest", "", "deprecatedVersions"): (None, "0", f"{_KIP_896}: nothing left to deprecate"),
        ("DescribeDelegationTokenRequest", "", "listeners"): (
            ["broker", "controller"], ["zkBroker", "broker", "controller"], _ZK),
        ("DescribeDelegationTokenResponse", "", "validVersions"): ("1-3", "0-3", _KIP_896),
        ("RenewDelegationTokenRequest", "", "validVersions"): ("1-2", "0-2", _KIP_896),
        ("RenewDelegationTokenRequest", "", "deprecatedVersions"): (None, "0", f"{_KIP_896}: nothing left to deprecate"),
        ("RenewDelegationTokenRequest", "", "listeners"): (
            ["broker", "controller"], ["zkBroker", "broker", "controller"], _ZK),
        ("RenewDelegationTokenResponse", "", "validVersions"): ("1-2", "0-2", _KIP_896),
        ("ExpireDelegationTokenRequest", "", "validVersions"): ("1-2", "0-2", _KIP_896),
        ("ExpireDelegationTokenRequest", "", "deprecatedVersions"): (None, "0", f"{_KIP_896}: nothing left to deprecate"),
        ("ExpireDelegationTokenRequest", "", "listeners"): (
            ["broker", "controller"], ["zkBroker", "broker", "controller"], _ZK),
        ("ExpireDelegationTokenResponse", "", "validVersions"): ("1-2", "0-2", _KIP_896),
        ("AlterPartitionRequest", "", "validVersions"): ("2-3", "0-3", _KIP_896),
        ("AlterPartitionRequest", "", "listeners"): (["controller"], ["zkBroker", "controller"], _ZK),
        ("AlterPartitionResponse", "", "validVersions"): ("2-3", "0-3", _KIP_896),
        ("AlterConfigsRequest", "", "listeners"): (
            ["broker", "controller"], ["zkBroker", "broker", "controller"], _ZK),
        ("IncrementalAlterConfigsRequest", "", "listeners"): (
            ["broker", "controller"], ["zkBroker", "broker", "controller"], _ZK),
        ("ApiVersionsRequest", "", "listeners"): (
            ["broker", "controller"], ["zkBroker", "broker", "controller"], _ZK),
        ("DescribeClusterRequest", "", "listeners"): (
            ["broker", "controller"], ["zkBroker", "broker", "controller"], _ZK),
        ("EnvelopeRequest", "", "listeners"): (["controller"], ["controller", "zkBroker"], _ZK),
        ("FetchRequest", "", "listeners"): (
            ["broker", "controller"], ["zkBroker", "broker", "controller"], _ZK),
        ("MetadataRequest", "", "listeners"): (["broker"], ["zkBroker", "broker"], _ZK),
        ("SaslAuthenticateRequest", "", "listeners"): (
            ["broker", "controller"], ["zkBroker", "broker", "controller"], _ZK),
        ("SaslHandshakeRequest", "", "listeners"): (
            ["broker", "controller"], ["zkBroker", "broker", "controller"], _ZK),
        ("UpdateFeaturesRequest", "", "listeners"): (
            ["broker", "controller"], ["zkBroker", "broker", "controller"], _ZK),
    },
}


def _ours(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module", params=PINNED_VERSIONS)
def version(request: pytest.FixtureRequest) -> str:
    require_kafka(request.param)
    return request.param


def test_spec_files_exist() -> None:
    assert len(SPEC_FILES) >= 40, f"expected kwire's specs under {SPEC_DIR}"


def test_every_pinned_release_has_an_account() -> None:
    """A newly pinned release needs either to be the source or a table of differences."""
    for v in PINNED_VERSIONS:
        assert v == SOURCE_VERSION or v in EXPECTED_DIFFERENCES, v
    assert SOURCE_VERSION in PINNED_VERSIONS


def test_expected_differences_name_real_specs() -> None:
    names = {_ours(p)["name"] for p in SPEC_FILES}
    for v, table in EXPECTED_DIFFERENCES.items():
        assert v in PINNED_VERSIONS, f"table for {v}, which is not pinned"
        for spec, _path, _key in table:
            assert spec in names, f"{v}: table entry for unknown spec {spec}"


def test_every_kwire_spec_is_in_the_jars(version: str) -> None:
    specs = jar_specs(version)
    absent = ABSENT.get(version, {})
    missing = [p.name for p in SPEC_FILES if _ours(p)["name"] not in specs and _ours(p)["name"] not in absent]
    assert not missing, f"Kafka {version} jars have no spec named like {missing}"
    stale = [name for name in absent if name in specs]
    assert not stale, f"Kafka {version} has {stale}, listed as absent"
    for p in SPEC_FILES:
        assert p.stem == _ours(p)["name"], f"{p.name} holds spec {_ours(p)['name']}"


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.stem)
def test_spec_matches_kafka(version: str, path: Path) -> None:
    ours = _ours(path)
    if ours["name"] in ABSENT.get(version, {}):
        assert ours["name"] not in jar_specs(version)
        return
    theirs = jar_specs(version)[ours["name"]]
    if version == SOURCE_VERSION:
        raw = raw_differences(ours, theirs.data)
        assert not raw, (f"{path.name} differs from {theirs.jar.name}!/{theirs.entry}:\n  "
                         + "\n  ".join(raw))
        diffs, _ = compare_specs(ours, theirs.data, restrict=False)
        assert not diffs, "\n".join(map(str, diffs))
        return

    expected = {
        (path_, key): (a, b)
        for (spec, path_, key), (a, b, _why) in EXPECTED_DIFFERENCES[version].items()
        if spec == ours["name"]
    }
    diffs, _ = compare_specs(ours, theirs.data, restrict=True)
    actual = {(d.path, d.key): (d.ours, d.theirs) for d in diffs}
    unexplained = [str(d) for d in diffs if expected.get((d.path, d.key)) != (d.ours, d.theirs)]
    stale = [f"{ours['name']}/{p} {k}: expected kwire={a!r} kafka={b!r}"
             for (p, k), (a, b) in expected.items() if actual.get((p, k)) != (a, b)]
    assert not unexplained and not stale, (
        f"{path.name} vs Kafka {version} ({theirs.jar.name}!/{theirs.entry})\n"
        + "".join(f"  unexplained: {u}\n" for u in unexplained)
        + "".join(f"  listed but not found: {s}\n" for s in stale)
    )


# -- the comparison itself ------------------------------------------------------------------------

_BASE: dict[str, Any] = {
    "apiKey": 99, "type": "request", "name": "ExampleRequest", "validVersions": "0-3",
    "flexibleVersions": "2+",
    "fields": [
        {"name": "A", "type": "int32", "versions": "0+", "about": "ours"},
        {"name": "Items", "type": "[]Item", "versions": "1+", "fields": [
            {"name": "Id", "type": "uuid", "versions": "1+"},
            {"name": "Note", "type": "string", "versions": "2+", "nullableVersions": "2+",
             "taggedVersions": "2+", "tag": 0, "default": "null"},
        ]},
        {"name": "New", "type": "bool", "versions": "3+"},
    ],
}


def _variant(**changes: Any) -> dict[str, Any]:
    spec = json.loads(json.dumps(_BASE))
    note = spec["fields"][1]["fields"][1]
    for key, value in changes.items():
        where, _, prop = key.partition("__")
        target = {"top": spec, "note": note, "a": spec["fields"][0]}[where]
        if value is None:
            target.pop(prop, None)
        else:
            target[prop] = value
    return spec


def test_comparison_ignores_about_and_representation() -> None:
    other = _variant(a__about="theirs", note__tag="0", note__ignorable=False)
    assert compare_specs(_BASE, other, restrict=False) == ([], {})


@pytest.mark.parametrize(("change", "key"), [
    ({"note__tag": 1}, "tag"),
    ({"note__default": "x"}, "default"),
    ({"note__nullableVersions": None}, "nullableVersions"),
    ({"note__taggedVersions": "3+"}, "taggedVersions"),
    ({"note__ignorable": True}, "ignorable"),
    ({"note__entityType": "topicName"}, "entityType"),
    ({"note__zeroCopy": True}, "zeroCopy"),
    ({"note__mapKey": True}, "mapKey"),
    ({"note__flexibleVersions": "none"}, "flexibleVersions"),
    ({"note__type": "bytes"}, "type"),
    ({"note__name": "Text"}, "name"),
    ({"note__somethingNew": 1}, "somethingNew"),
    ({"top__flexibleVersions": "1+"}, "flexibleVersions"),
    ({"top__apiKey": 98}, "apiKey"),
    ({"top__listeners": ["broker"]}, "listeners"),
    ({"top__latestVersionUnstable": True}, "latestVersionUnstable"),
])
def test_comparison_finds_each_property(change: dict[str, Any], key: str) -> None:
    diffs, _ = compare_specs(_BASE, _variant(**change), restrict=False)
    assert [d.key for d in diffs] == [key], diffs
    assert raw_differences(_BASE, _variant(**change))


def test_restricted_comparison_drops_newer_versions_only() -> None:
    older = _variant(top__validVersions="0-2")
    older["fields"].pop()  # "New" (v3+) does not exist in the older release
    diffs, _ = compare_specs(_BASE, older, restrict=True)
    assert diffs == [Difference("ExampleRequest", "", "validVersions", "0-3", "0-2")]
    # ...but a change inside the shared versions is still found.
    older["fields"][1]["fields"][0]["type"] = "int64"
    diffs, _ = compare_specs(_BASE, older, restrict=True)
    assert ("Items/Id", "type") in {(d.path, d.key) for d in diffs}


def test_renames_are_reported_by_path() -> None:
    diffs, renames = compare_specs(_BASE, _variant(note__name="Text"), restrict=True)
    assert renames == {"Items/Note": "Text"}
    assert [str(d) for d in diffs] == ["ExampleRequest/Items/Note name: kwire='Note' kafka='Text'"]


def test_strip_json_comments_keeps_strings() -> None:
    text = '// header\n{ "a": "x // not a comment", /* gone */ "b": "q\\"//", "c": 1 // tail\n}'
    assert json.loads(strip_json_comments(text)) == {"a": "x // not a comment", "b": 'q"//', "c": 1}
