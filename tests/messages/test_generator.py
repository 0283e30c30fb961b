"""The generator's rules that the property tests do not reach on their own: version-gated
fields, ignorable fields, tagged-field order and preservation, header selection, staleness."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kwire.uuid import Uuid
from kwire.wire import DecodeError, EncodeError
from messages import generator
from messages.generated.api_versions_response import ApiVersion, ApiVersionsResponse
from messages.generated.describe_quorum_response import DescribeQuorumResponse, ReplicaState
from messages.generated.fetch_request import FetchRequest
from messages.generated.fetch_request import ReplicaState as FetchReplicaState
from messages.generated.request_header import RequestHeader
from messages.generated.vote_request import PartitionData, TopicData, VoteRequest
from messages.protocol import decode_request, encode_request, encode_response
from messages.spec import SpecError, Versions, parse_spec, snake_case


def test_versions_parse():
    assert Versions.parse("0+") == Versions(0, 0x7FFF)
    assert Versions.parse("3-5") == Versions(3, 5)
    assert Versions.parse("7") == Versions(7, 7)
    assert Versions.parse("none").empty
    assert 4 in Versions.parse("3-5") and 6 not in Versions.parse("3-5")


def test_snake_case_names():
    assert snake_case("KRaftVersionFeature") == "kraft_version_feature"
    assert snake_case("ThrottleTimeMs") == "throttle_time_ms"
    assert snake_case("IsMigratingZkBroker") == "is_migrating_zk_broker"
    assert snake_case("TopicId") == "topic_id"


def test_non_default_value_at_version_without_field_raises():
    # PreVote exists from v2 and is not ignorable: Kafka throws UnsupportedVersionException.
    message = VoteRequest(topics=[TopicData("t", [PartitionData(pre_vote=True)])])
    with pytest.raises(EncodeError, match="PreVote"):
        message.encode(1)
    # The default value is fine at every version.
    VoteRequest(topics=[TopicData("t", [PartitionData()])]).encode(0)


def test_ignorable_field_is_dropped_silently():
    # VoterId is v1+ and ignorable: a non-default value simply is not written at v0.
    message = VoteRequest(voter_id=3)
    assert VoteRequest.decode(message.encode(0), 0).voter_id == -1
    assert VoteRequest.decode(message.encode(1), 1).voter_id == 3


def test_tagged_fields_written_only_when_not_default_and_in_tag_order():
    base = FetchRequest(max_wait_ms=500)
    plain = base.encode(15)
    with_tag = FetchRequest(max_wait_ms=500, cluster_id="c",
                            replica_state=FetchReplicaState(replica_id=2, replica_epoch=-1))
    tagged = with_tag.encode(15)
    assert plain[-1] == 0  # no tagged fields: an empty section
    # The top-level tagged section is last: count 2; tag 0 (ClusterId), 2 bytes: compact "c";
    # tag 1 (ReplicaState), 13 bytes: int32 replica id, int64 epoch, its own empty section.
    assert tagged[-20:] == (bytes([2, 0, 2, 2, ord("c"), 1, 13])
                            + (2).to_bytes(4, "big") + (-1).to_bytes(8, "big", signed=True) + b"\0")
    decoded = FetchRequest.decode(tagged, 15)
    assert decoded.cluster_id == "c" and decoded.replica_state.replica_id == 2


def test_unknown_tagged_fields_are_preserved_in_order():
    message = ApiVersionsResponse(
        api_keys=[ApiVersion(18, 0, 4)],
        unknown_tagged_fields=((7, b"\x01\x02"), (9, b"")),
    )
    data = message.encode(3)
    decoded = ApiVersionsResponse.decode(data, 3)
    assert decoded.unknown_tagged_fields == ((7, b"\x01\x02"), (9, b""))
    assert decoded.encode(3) == data


def test_ragged_tagged_field_is_a_decode_error():
    message = DescribeQuorumResponse(error_message=None)
    data = bytearray(message.encode(2))
    data[-1] = 1  # claim one tagged field that is not there
    with pytest.raises(DecodeError):
        DescribeQuorumResponse.decode(bytes(data), 2)


def test_uuid_fields_and_defaults():
    state = ReplicaState(replica_id=1, replica_directory_id=Uuid.from_longs(0, 7))
    assert ReplicaState.decode(state.encode(2), 2) == state
    assert ReplicaState().last_fetch_timestamp == -1


def test_huge_array_count_is_refused_before_allocation():
    # A v0 ApiVersionsResponse: error code, then an int32 count of 2**31-1 entries.
    data = b"\x00\x00" + b"\x7f\xff\xff\xff"
    with pytest.raises(DecodeError, match="overruns"):
        ApiVersionsResponse.decode(data, 0)


def test_request_header_versions():
    from messages.generated.api_versions_request import ApiVersionsRequest
    from messages.generated.begin_quorum_epoch_request import BeginQuorumEpochRequest

    # ApiVersions v3 is flexible: header v2 with tagged fields; v2 is not: header v1.
    assert decode_request(encode_request(ApiVersionsRequest(), 3, 1, "c")).header_version == 2
    assert decode_request(encode_request(ApiVersionsRequest(), 2, 1, "c")).header_version == 1
    # BeginQuorumEpoch v0 is not flexible even though later versions are.
    assert decode_request(encode_request(BeginQuorumEpochRequest(), 0, 1, "c")).header_version == 1
    # The ClientId is a non-compact nullable string even in header v2.
    raw = RequestHeader(18, 3, 5, "abc").encode(2)
    assert raw[8:10] == b"\x00\x03"


def test_api_versions_response_header_is_always_v0():
    body = ApiVersionsResponse(api_keys=[ApiVersion(18, 0, 4)])
    frame = encode_response(body, 3, correlation_id=9)
    # size(4) + correlation id(4), then the body directly: no tagged-field byte in the header.
    assert frame[4:8] == (9).to_bytes(4, "big")
    assert ApiVersionsResponse.decode(bytes(frame[8:]), 3) == body


def test_spec_errors():
    with pytest.raises(SpecError):
        parse_spec({"name": "X", "type": "data", "validVersions": "0", "flexibleVersions": "none",
                    "fields": [{"name": "A", "type": "int32", "versions": "0+",
                                "taggedVersions": "0+", "tag": 0}]})
    with pytest.raises(SpecError):
        parse_spec({"name": "X", "type": "data", "validVersions": "0", "flexibleVersions": "0+",
                    "fields": [{"name": "A", "type": "[]Missing", "versions": "0+"}]})


def test_check_mode_detects_stale_modules(tmp_path: Path):
    out = tmp_path / "generated"
    assert generator.main(["--out", str(out)]) == 0
    assert generator.main(["--check", "--out", str(out)]) == 0
    target = out / "vote_request.py"
    target.write_text(target.read_text() + "\n# edited by hand\n")
    assert generator.main(["--check", "--out", str(out)]) == 1
    target.unlink()
    assert generator.main(["--check", "--out", str(out)]) == 1


def test_every_spec_has_descriptions():
    for path in sorted(Path(generator.SPEC_DIR).glob("*.json")):
        spec = json.loads(path.read_text())
        assert spec.get("about"), path.name


def test_spec_dir_copy_generates_identically(tmp_path: Path):
    specs = tmp_path / "specs"
    shutil.copytree(generator.SPEC_DIR, specs)
    assert generator.render_all(specs) == generator.render_all()


def test_a_tag_of_another_version_is_refused_as_kafka_does():
    from messages.generated.broker_heartbeat_request import BrokerHeartbeatRequest

    # OfflineLogDirs is tag 0 from v1; at v0 Kafka throws "Tag 0 is not valid for version 0".
    data = bytes.fromhex("00000000ffffffffffffffd86c05bfe775eb73c90001010000")
    with pytest.raises(DecodeError, match="not valid for version 0"):
        BrokerHeartbeatRequest.decode(data, 0)
