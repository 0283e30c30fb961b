"""The table of controller RPCs (``server.controller.registry``): each RPC once, at its spec's
versions, with its operation and answer builder; reads apart from writes; and no API key shared
with the raft core's table."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kwire.api_keys import ApiKey
from messages.generated.api_versions_request import ApiVersionsRequest
from messages.generated.broker_heartbeat_request import BrokerHeartbeatRequest
from messages.generated.broker_registration_request import BrokerRegistrationRequest
from messages.generated.create_topics_request import CreateTopicsRequest
from messages.generated.describe_cluster_request import DescribeClusterRequest
from messages.generated.describe_configs_request import DescribeConfigsRequest
from messages.generated.describe_quorum_request import DescribeQuorumRequest
from messages.generated.fetch_request import FetchRequest
from messages.generated.vote_request import VoteRequest
from server.controller import responses
from server.controller.registry import CONTROLLER_APIS, ControllerApi, advertised_versions, find
from server.raft.registry import DEFAULT, HANDLERS

SPECS = Path(__file__).resolve().parents[2] / "messages" / "specs"

# every RPC a stock broker, admin client or controller sends a KRaft controller (besides raft's)
EXPECTED = {
    ApiKey.CONTROLLER_REGISTRATION,
    ApiKey.UPDATE_FEATURES,
    ApiKey.BROKER_REGISTRATION,
    ApiKey.BROKER_HEARTBEAT,
    ApiKey.UNREGISTER_BROKER,
    ApiKey.ALLOCATE_PRODUCER_IDS,
    ApiKey.CREATE_TOPICS,
    ApiKey.DELETE_TOPICS,
    ApiKey.CREATE_PARTITIONS,
    ApiKey.ALTER_PARTITION,
    ApiKey.INCREMENTAL_ALTER_CONFIGS,
    ApiKey.ALTER_CONFIGS,
    ApiKey.ASSIGN_REPLICAS_TO_DIRS,
    ApiKey.ELECT_LEADERS,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS,
    ApiKey.LIST_PARTITION_REASSIGNMENTS,
    ApiKey.DESCRIBE_CLUSTER,
    ApiKey.DESCRIBE_CONFIGS,
}

# the union of the pinned releases' versions (3.9.2 and 4.x), for the RPCs where they differ
UNION_VERSIONS = {
    ApiKey.BROKER_REGISTRATION: (0, 4),
    ApiKey.BROKER_HEARTBEAT: (0, 2),
    ApiKey.UPDATE_FEATURES: (0, 2),
    ApiKey.DESCRIBE_CLUSTER: (0, 2),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 1),
    ApiKey.CONTROLLER_REGISTRATION: (0, 0),
    ApiKey.ALLOCATE_PRODUCER_IDS: (0, 0),
    ApiKey.ASSIGN_REPLICAS_TO_DIRS: (0, 0),
    ApiKey.UNREGISTER_BROKER: (0, 0),
}


def _spec(name: str) -> dict[str, object]:
    text = (SPECS / f"{name}.json").read_text()
    return json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.MULTILINE))  # type: ignore[no-any-return]


def _versions(valid: str) -> tuple[int, int]:
    low, _, high = valid.partition("-")
    return int(low), int(high or low)


def test_every_controller_rpc_appears_once() -> None:
    keys = [api.api_key for api in CONTROLLER_APIS]
    assert len(keys) == len(set(keys))
    assert len({api.request for api in CONTROLLER_APIS}) == len(CONTROLLER_APIS)
    assert EXPECTED <= set(keys)


@pytest.mark.parametrize("api", CONTROLLER_APIS, ids=lambda api: api.request.__name__)
def test_each_rpc_serves_its_spec_s_versions(api: ControllerApi) -> None:
    spec = _spec(api.request.__name__)
    assert spec["type"] == "request" and spec["apiKey"] == api.api_key
    assert api.versions == _versions(str(spec["validVersions"]))
    assert "controller" in spec["listeners"]  # type: ignore[operator]


@pytest.mark.parametrize(("key", "versions"), sorted(UNION_VERSIONS.items()))
def test_versions_are_the_union_of_the_pinned_releases(key: ApiKey, versions: tuple[int, int]) -> None:
    assert advertised_versions()[key] == versions


def test_alter_partition_and_the_topic_rpcs_start_where_4x_starts() -> None:
    versions = advertised_versions()
    assert versions[ApiKey.ALTER_PARTITION] == (2, 3)
    assert versions[ApiKey.CREATE_TOPICS] == (2, 7)
    assert versions[ApiKey.DELETE_TOPICS] == (1, 6)
    assert versions[ApiKey.DESCRIBE_CONFIGS] == (1, 4)


def test_only_the_describes_are_reads() -> None:
    reads = {api.api_key for api in CONTROLLER_APIS if not api.write}
    assert reads == {
        ApiKey.DESCRIBE_CLUSTER, ApiKey.DESCRIBE_CONFIGS, ApiKey.DESCRIBE_ACLS, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
        ApiKey.DESCRIBE_DELEGATION_TOKEN,
    }


def test_every_write_answers_through_a_response_builder() -> None:
    for api in CONTROLLER_APIS:
        if api.write:
            assert getattr(responses, api.respond.__name__) is api.respond, api.request.__name__


def test_a_read_s_result_is_its_whole_response() -> None:
    api = find(DescribeClusterRequest())
    assert api is not None
    marker = object()
    assert api.respond(DescribeClusterRequest(), 1, marker) is marker


def test_only_a_heartbeat_counts_on_arrival() -> None:
    assert [api.api_key for api in CONTROLLER_APIS if api.on_arrival is not None] == [ApiKey.BROKER_HEARTBEAT]


@pytest.mark.parametrize(
    "request_",
    [BrokerRegistrationRequest(), BrokerHeartbeatRequest(), CreateTopicsRequest(), DescribeConfigsRequest()],
    ids=lambda r: type(r).__name__,
)
def test_find_gives_the_entry_of_a_controller_request(request_: object) -> None:
    api = find(request_)  # type: ignore[arg-type]
    assert api is not None and api.request is type(request_)


@pytest.mark.parametrize(
    "request_",
    [VoteRequest(), FetchRequest(), DescribeQuorumRequest(), ApiVersionsRequest()],
    ids=lambda r: type(r).__name__,
)
def test_find_gives_none_for_a_request_that_is_not_a_controller_rpc(request_: object) -> None:
    assert find(request_) is None  # type: ignore[arg-type]


def test_advertised_versions_list_every_rpc() -> None:
    assert advertised_versions() == {api.api_key: api.versions for api in CONTROLLER_APIS}


def test_no_api_key_is_shared_with_the_raft_core() -> None:
    controller_keys = set(advertised_versions())
    assert not controller_keys & set(DEFAULT.advertised_versions())
    assert not controller_keys & {int(handler.api_key) for handler in HANDLERS}
