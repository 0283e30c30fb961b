"""The answers of the controller RPCs (``server.controller.responses``): for each builder
``respond(request, version, outcome)``, the error form (as ``ControllerApis`` and each request
class's ``getErrorResponse`` build it: one error per requested topic, partition or resource,
or one top-level error) and the success form."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kwire.errors import Errors
from kwire.uuid import ZERO_UUID, Uuid
from messages.generated.allocate_producer_ids_request import AllocateProducerIdsRequest
from messages.generated.alter_configs_request import AlterConfigsRequest
from messages.generated.alter_configs_request import AlterConfigsResource as LegacyResource
from messages.generated.alter_configs_response import AlterConfigsResourceResponse as LegacyResult
from messages.generated.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from messages.generated.alter_partition_request import AlterPartitionRequest
from messages.generated.alter_partition_response import (
    AlterPartitionResponse,
    PartitionData,
    TopicData,
)
from messages.generated.assign_replicas_to_dirs_request import AssignReplicasToDirsRequest
from messages.generated.assign_replicas_to_dirs_response import (
    AssignReplicasToDirsResponse,
    DirectoryData,
)
from messages.generated.broker_heartbeat_request import BrokerHeartbeatRequest
from messages.generated.broker_registration_request import BrokerRegistrationRequest
from messages.generated.controller_registration_request import ControllerRegistrationRequest
from messages.generated.create_partitions_request import (
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from messages.generated.create_partitions_response import CreatePartitionsTopicResult
from messages.generated.create_topics_request import CreatableTopic, CreateTopicsRequest
from messages.generated.create_topics_response import CreatableTopicResult
from messages.generated.delete_topics_request import DeleteTopicsRequest, DeleteTopicState
from messages.generated.delete_topics_response import DeletableTopicResult
from messages.generated.elect_leaders_request import ElectLeadersRequest, TopicPartitions
from messages.generated.elect_leaders_response import ElectLeadersResponse
from messages.generated.incremental_alter_configs_request import (
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from messages.generated.incremental_alter_configs_response import (
    AlterConfigsResourceResponse as IncrementalResult,
)
from messages.generated.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsTopics,
)
from messages.generated.list_partition_reassignments_response import (
    ListPartitionReassignmentsResponse,
)
from messages.generated.unregister_broker_request import UnregisterBrokerRequest
from messages.generated.update_features_request import FeatureUpdateKey, UpdateFeaturesRequest
from messages.generated.update_features_response import UpdatableFeatureResult
from messages.runtime import Message
from server.controller import responses
from server.controller.cluster import BrokerHeartbeatReply
from server.controller.errors import ApiError
from server.controller.features import UpgradeType

T1, T2 = Uuid.from_longs(1, 11), Uuid.from_longs(2, 22)
ERROR = ApiError(Errors.NOT_CONTROLLER, "The active controller appears to be node 3001.")


def _create_topics() -> CreateTopicsRequest:
    return CreateTopicsRequest(topics=[CreatableTopic(name="a", num_partitions=1), CreatableTopic(name="b", num_partitions=2)])


def _update_features() -> UpdateFeaturesRequest:
    return UpdateFeaturesRequest(feature_updates=[
        FeatureUpdateKey(feature="metadata.version", max_version_level=21),
        FeatureUpdateKey(feature="group.version", max_version_level=1),
    ])


# ---------------------------------------------------------------------- NOT_CONTROLLER


def test_not_controller_names_the_leader_when_there_is_one() -> None:
    error = responses.not_controller(3001)
    assert (error.error, error.message) == (Errors.NOT_CONTROLLER, "The active controller appears to be node 3001.")
    assert responses.not_controller(0).message == "The active controller appears to be node 0."


def test_not_controller_without_a_leader() -> None:
    error = responses.not_controller(None)
    assert (error.error, error.message) == (Errors.NOT_CONTROLLER, "No controller appears to be active.")


# ---------------------------------------------------------------------- UpdateFeatures


def test_update_features_v0_has_no_upgrade_type_and_is_an_upgrade() -> None:
    request = UpdateFeaturesRequest(feature_updates=[
        FeatureUpdateKey(feature="group.version", max_version_level=0, allow_downgrade=True, upgrade_type=3)
    ])
    assert responses.feature_updates(request, 0) == {"group.version": (0, UpgradeType.UPGRADE)}


@pytest.mark.parametrize(
    ("code", "upgrade"),
    [(1, UpgradeType.UPGRADE), (2, UpgradeType.SAFE_DOWNGRADE), (3, UpgradeType.UNSAFE_DOWNGRADE),
     (0, UpgradeType.UNKNOWN), (9, UpgradeType.UNKNOWN)],
)
def test_update_features_v1_reads_the_upgrade_type(code: int, upgrade: UpgradeType) -> None:
    request = UpdateFeaturesRequest(feature_updates=[FeatureUpdateKey(feature="x", max_version_level=2, upgrade_type=code)])
    assert responses.feature_updates(request, 1) == {"x": (2, upgrade)}
    assert responses.feature_updates(request, 2) == {"x": (2, upgrade)}


def test_an_update_features_error_is_prefixed_and_fails_every_feature() -> None:
    refused = ApiError(Errors.INVALID_UPDATE_VERSION, "Invalid update version 99 for feature metadata.version.")
    for version in (0, 1, 2):
        response = responses.update_features_response(_update_features(), version, refused)
        assert response.error_code == Errors.INVALID_UPDATE_VERSION and response.results == []
        assert response.error_message == (
            "The update failed for all features since the following feature had an error: "
            "Invalid update version 99 for feature metadata.version."
        )


def test_an_update_features_error_without_a_message_still_gets_the_prefix() -> None:
    response = responses.update_features_response(_update_features(), 1, ApiError(Errors.INVALID_UPDATE_VERSION))
    assert response.error_message == "The update failed for all features since the following feature had an error: "


def test_not_controller_keeps_its_own_message_in_update_features() -> None:
    response = responses.update_features_response(_update_features(), 1, responses.not_controller(None))
    assert (response.error_code, response.error_message, response.results) == (
        Errors.NOT_CONTROLLER, "No controller appears to be active.", []
    )


@pytest.mark.parametrize("version", [0, 1])
def test_update_features_success_before_v2_lists_each_feature(version: int) -> None:
    response = responses.update_features_response(_update_features(), version, None)
    assert (response.error_code, response.error_message) == (Errors.NONE, None)
    assert response.results == [
        UpdatableFeatureResult(feature="metadata.version", error_code=0, error_message="NONE"),
        UpdatableFeatureResult(feature="group.version", error_code=0, error_message="NONE"),
    ]


def test_update_features_success_at_v2_lists_no_features() -> None:
    response = responses.update_features_response(_update_features(), 2, None)
    assert (response.error_code, response.error_message, response.results) == (Errors.NONE, None, [])


# ---------------------------------------------------------------------- registrations and heartbeats


def test_controller_registration_answers() -> None:
    request = ControllerRegistrationRequest(controller_id=3000)
    ok = responses.registration_response(request, 0, None)
    assert (ok.error_code, ok.error_message) == (Errors.NONE, "")
    refused = responses.registration_response(
        request, 0, ApiError(Errors.UNSUPPORTED_VERSION, "The current MetadataVersion is too old to support controller registrations.")
    )
    assert (refused.error_code, refused.error_message) == (
        Errors.UNSUPPORTED_VERSION, "The current MetadataVersion is too old to support controller registrations."
    )


def test_broker_registration_answers_the_epoch_or_the_error_alone() -> None:
    request = BrokerRegistrationRequest(broker_id=1)
    ok = responses.broker_registration_response(request, 4, 1234)
    assert (ok.error_code, ok.broker_epoch) == (Errors.NONE, 1234)
    refused = responses.broker_registration_response(request, 4, ApiError(Errors.DUPLICATE_BROKER_REGISTRATION, "x"))
    assert (refused.error_code, refused.broker_epoch, refused.throttle_time_ms) == (Errors.DUPLICATE_BROKER_REGISTRATION, -1, 0)


@pytest.mark.parametrize(
    "reply",
    [
        BrokerHeartbeatReply(is_caught_up=True, is_fenced=False, in_controlled_shutdown=False, should_shut_down=False),
        BrokerHeartbeatReply(is_caught_up=False, is_fenced=True, in_controlled_shutdown=False, should_shut_down=False),
        BrokerHeartbeatReply(is_caught_up=True, is_fenced=False, in_controlled_shutdown=True, should_shut_down=False),
        BrokerHeartbeatReply(is_caught_up=True, is_fenced=True, in_controlled_shutdown=False, should_shut_down=True),
    ],
)
def test_a_heartbeat_answer_carries_the_reply(reply: BrokerHeartbeatReply) -> None:
    response = responses.broker_heartbeat_response(BrokerHeartbeatRequest(broker_id=1), 1, reply)
    assert (response.error_code, response.is_caught_up, response.is_fenced, response.should_shut_down) == (
        Errors.NONE, reply.is_caught_up, reply.is_fenced, reply.should_shut_down
    )


def test_a_heartbeat_error_has_the_fields_defaults() -> None:
    response = responses.broker_heartbeat_response(
        BrokerHeartbeatRequest(broker_id=1), 1, ApiError(Errors.STALE_BROKER_EPOCH, "Expected broker epoch 5")
    )
    assert (response.error_code, response.is_caught_up, response.is_fenced, response.should_shut_down) == (
        Errors.STALE_BROKER_EPOCH, False, True, False
    )


def test_unregister_broker_success_has_an_empty_message() -> None:
    response = responses.unregister_broker_response(UnregisterBrokerRequest(broker_id=2), 0, None)
    assert (response.error_code, response.error_message) == (Errors.NONE, "")


def test_unregister_broker_error_carries_the_code() -> None:
    response = responses.unregister_broker_response(
        UnregisterBrokerRequest(broker_id=2), 0, ApiError(Errors.BROKER_ID_NOT_REGISTERED, "Broker ID 2 is not currently registered")
    )
    assert response.error_code == Errors.BROKER_ID_NOT_REGISTERED


def test_unregister_broker_error_carries_its_message_as_kafka_sends_it() -> None:
    # ControllerApis.handleUnregisterBroker answers a failure with
    # UnregisterBrokerRequest.getErrorResponse, which sets ErrorMessage to the exception's message
    response = responses.unregister_broker_response(
        UnregisterBrokerRequest(broker_id=2), 0, ApiError(Errors.BROKER_ID_NOT_REGISTERED, "Broker ID 2 is not currently registered")
    )
    assert response.error_message == "Broker ID 2 is not currently registered"


def test_allocate_producer_ids_answers_a_block_of_1000_or_an_empty_one() -> None:
    request = AllocateProducerIdsRequest(broker_id=1, broker_epoch=5)
    ok = responses.allocate_producer_ids_response(request, 0, 4000)
    assert (ok.error_code, ok.producer_id_start, ok.producer_id_len) == (Errors.NONE, 4000, 1000)
    refused = responses.allocate_producer_ids_response(request, 0, ApiError(Errors.STALE_BROKER_EPOCH))
    assert (refused.error_code, refused.producer_id_start, refused.producer_id_len) == (Errors.STALE_BROKER_EPOCH, 0, 0)


# ---------------------------------------------------------------------- topics and partitions


def test_create_topics_error_gives_every_requested_topic_the_error() -> None:
    response = responses.create_topics_response(_create_topics(), 7, ERROR)
    assert response.throttle_time_ms == 0
    assert response.topics == [
        CreatableTopicResult(name="a", error_code=Errors.NOT_CONTROLLER, error_message=ERROR.message),
        CreatableTopicResult(name="b", error_code=Errors.NOT_CONTROLLER, error_message=ERROR.message),
    ]
    assert response.topics[0].topic_id == ZERO_UUID and response.topics[0].num_partitions == -1


def test_create_topics_success_lists_the_results_as_given() -> None:
    results = [CreatableTopicResult(name="a", topic_id=T1, num_partitions=1, replication_factor=1)]
    response = responses.create_topics_response(_create_topics(), 7, results)
    assert response.topics == results


@pytest.mark.parametrize("version", [1, 5])
def test_delete_topics_error_before_v6_names_each_topic_without_a_message(version: int) -> None:
    request = DeleteTopicsRequest(topic_names=["a", "b"])
    response = responses.delete_topics_response(request, version, ERROR)
    assert response.responses == [
        DeletableTopicResult(name="a", topic_id=ZERO_UUID, error_code=Errors.NOT_CONTROLLER, error_message=None),
        DeletableTopicResult(name="b", topic_id=ZERO_UUID, error_code=Errors.NOT_CONTROLLER, error_message=None),
    ]


def test_delete_topics_error_at_v6_gives_each_topic_its_name_and_id() -> None:
    request = DeleteTopicsRequest(topics=[DeleteTopicState(name="a"), DeleteTopicState(name=None, topic_id=T2)])
    response = responses.delete_topics_response(request, 6, ERROR)
    assert response.responses == [
        DeletableTopicResult(name="a", topic_id=ZERO_UUID, error_code=Errors.NOT_CONTROLLER),
        DeletableTopicResult(name=None, topic_id=T2, error_code=Errors.NOT_CONTROLLER),
    ]
    assert all(r.error_message is None for r in response.responses)


def test_delete_topics_success_lists_the_results_as_given() -> None:
    results = [DeletableTopicResult(name="a", topic_id=T1)]
    assert responses.delete_topics_response(DeleteTopicsRequest(topic_names=["a"]), 5, results).responses == results


def test_create_partitions_error_gives_every_requested_topic_the_error() -> None:
    request = CreatePartitionsRequest(topics=[CreatePartitionsTopic(name="a", count=3), CreatePartitionsTopic(name="b", count=4)])
    response = responses.create_partitions_response(request, 3, ApiError(Errors.INVALID_REQUEST, "bad"))
    assert response.results == [
        CreatePartitionsTopicResult(name="a", error_code=Errors.INVALID_REQUEST, error_message="bad"),
        CreatePartitionsTopicResult(name="b", error_code=Errors.INVALID_REQUEST, error_message="bad"),
    ]
    ok = [CreatePartitionsTopicResult(name="a")]
    assert responses.create_partitions_response(request, 3, ok).results == ok


def test_elect_leaders_error_is_set_at_the_top_and_for_every_partition() -> None:
    request = ElectLeadersRequest(topic_partitions=[TopicPartitions(topic="a", partitions=[0, 2]), TopicPartitions(topic="b", partitions=[1])])
    response = responses.elect_leaders_response(request, 2, ERROR)
    assert response.error_code == Errors.NOT_CONTROLLER
    assert [(t.topic, [(p.partition_id, p.error_code, p.error_message) for p in t.partition_result])
            for t in response.replica_election_results] == [
        ("a", [(0, Errors.NOT_CONTROLLER, ERROR.message), (2, Errors.NOT_CONTROLLER, ERROR.message)]),
        ("b", [(1, Errors.NOT_CONTROLLER, ERROR.message)]),
    ]


def test_elect_leaders_error_for_all_partitions_lists_none() -> None:
    request = ElectLeadersRequest(topic_partitions=None)
    response = responses.elect_leaders_response(request, 2, ERROR)
    assert (response.error_code, response.replica_election_results) == (Errors.NOT_CONTROLLER, [])


def test_elect_leaders_success_is_the_operation_s_response() -> None:
    answer = ElectLeadersResponse(error_code=0)
    assert responses.elect_leaders_response(ElectLeadersRequest(), 2, answer) is answer


def test_alter_partition_reassignments_error_is_at_the_top_and_for_every_partition() -> None:
    request = AlterPartitionReassignmentsRequest(topics=[
        ReassignableTopic(name="a", partitions=[ReassignablePartition(partition_index=0, replicas=[1, 2]),
                                                ReassignablePartition(partition_index=3, replicas=None)]),
    ])
    response = responses.alter_partition_reassignments_response(request, 1, ERROR)
    assert (response.error_code, response.error_message) == (Errors.NOT_CONTROLLER, ERROR.message)
    assert response.allow_replication_factor_change is True
    ((topic,),) = [response.responses]
    assert topic.name == "a"
    assert [(p.partition_index, p.error_code, p.error_message) for p in topic.partitions] == [
        (0, Errors.NOT_CONTROLLER, ERROR.message), (3, Errors.NOT_CONTROLLER, ERROR.message)
    ]


def test_list_partition_reassignments_error_lists_the_requested_partitions_bare() -> None:
    request = ListPartitionReassignmentsRequest(topics=[ListPartitionReassignmentsTopics(name="a", partition_indexes=[1, 0])])
    response = responses.list_partition_reassignments_response(request, 0, ERROR)
    assert (response.error_code, response.error_message) == (Errors.NOT_CONTROLLER, ERROR.message)
    assert [(t.name, [(p.partition_index, p.replicas, p.adding_replicas, p.removing_replicas) for p in t.partitions])
            for t in response.topics] == [("a", [(1, [], [], []), (0, [], [], [])])]
    everything = responses.list_partition_reassignments_response(ListPartitionReassignmentsRequest(topics=None), 0, ERROR)
    assert everything.topics == []


def test_list_partition_reassignments_success_is_the_operation_s_response() -> None:
    answer = ListPartitionReassignmentsResponse()
    assert responses.list_partition_reassignments_response(ListPartitionReassignmentsRequest(), 0, answer) is answer


def test_alter_partition_error_is_one_code_without_topics() -> None:
    response = responses.alter_partition_response(AlterPartitionRequest(broker_id=1), 3, ApiError(Errors.STALE_BROKER_EPOCH, "x"))
    assert (response.error_code, response.topics, response.throttle_time_ms) == (Errors.STALE_BROKER_EPOCH, [], 0)
    answer = AlterPartitionResponse(topics=[TopicData(topic_id=T1, partitions=[PartitionData(partition_index=0)])])
    assert responses.alter_partition_response(AlterPartitionRequest(), 3, answer) is answer


def test_assign_replicas_to_dirs_error_is_one_code_without_directories() -> None:
    response = responses.assign_replicas_to_dirs_response(AssignReplicasToDirsRequest(), 0, ApiError(Errors.UNSUPPORTED_VERSION))
    assert (response.error_code, response.directories) == (Errors.UNSUPPORTED_VERSION, [])
    answer = AssignReplicasToDirsResponse(directories=[DirectoryData(id=T1)])
    assert responses.assign_replicas_to_dirs_response(AssignReplicasToDirsRequest(), 0, answer) is answer


# ---------------------------------------------------------------------- configs


def test_incremental_alter_configs_error_gives_every_resource_the_error() -> None:
    request = IncrementalAlterConfigsRequest(resources=[
        AlterConfigsResource(resource_type=2, resource_name="a"), AlterConfigsResource(resource_type=4, resource_name="1"),
    ])
    response = responses.incremental_alter_configs_response(request, 1, ERROR)
    assert response.responses == [
        IncrementalResult(error_code=Errors.NOT_CONTROLLER, error_message=ERROR.message, resource_type=2, resource_name="a"),
        IncrementalResult(error_code=Errors.NOT_CONTROLLER, error_message=ERROR.message, resource_type=4, resource_name="1"),
    ]
    ok = [IncrementalResult(resource_type=2, resource_name="a")]
    assert responses.incremental_alter_configs_response(request, 1, ok).responses == ok


def test_alter_configs_error_gives_every_resource_the_error() -> None:
    request = AlterConfigsRequest(resources=[LegacyResource(resource_type=4, resource_name="")])
    response = responses.alter_configs_response(request, 2, ApiError(Errors.INVALID_REQUEST, "nope"))
    assert response.responses == [
        LegacyResult(error_code=Errors.INVALID_REQUEST, error_message="nope", resource_type=4, resource_name="")
    ]
    ok = [LegacyResult(resource_type=4, resource_name="")]
    assert responses.alter_configs_response(request, 2, ok).responses == ok


# ---------------------------------------------------------------------- every error form encodes


_ERROR_FORMS: list[tuple[Callable[[Any, int, Any], Message], Message, tuple[int, int]]] = [
    (responses.registration_response, ControllerRegistrationRequest(), (0, 0)),
    (responses.update_features_response, _update_features(), (0, 2)),
    (responses.broker_registration_response, BrokerRegistrationRequest(), (0, 4)),
    (responses.broker_heartbeat_response, BrokerHeartbeatRequest(), (0, 2)),
    (responses.unregister_broker_response, UnregisterBrokerRequest(), (0, 0)),
    (responses.allocate_producer_ids_response, AllocateProducerIdsRequest(), (0, 0)),
    (responses.create_topics_response, _create_topics(), (2, 7)),
    (responses.create_partitions_response, CreatePartitionsRequest(topics=[CreatePartitionsTopic(name="a")]), (0, 3)),
    (responses.elect_leaders_response, ElectLeadersRequest(topic_partitions=[TopicPartitions(topic="a", partitions=[0])]), (0, 2)),
    (responses.alter_partition_reassignments_response,
     AlterPartitionReassignmentsRequest(topics=[ReassignableTopic(name="a", partitions=[ReassignablePartition(partition_index=0)])]), (0, 1)),
    (responses.list_partition_reassignments_response,
     ListPartitionReassignmentsRequest(topics=[ListPartitionReassignmentsTopics(name="a", partition_indexes=[0])]), (0, 0)),
    (responses.alter_partition_response, AlterPartitionRequest(), (2, 3)),
    (responses.incremental_alter_configs_response,
     IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(resource_type=2, resource_name="a")]), (0, 1)),
    (responses.alter_configs_response, AlterConfigsRequest(resources=[LegacyResource(resource_type=2, resource_name="a")]), (0, 2)),
    (responses.assign_replicas_to_dirs_response, AssignReplicasToDirsRequest(), (0, 0)),
]


@pytest.mark.parametrize(("build", "request_", "versions"), _ERROR_FORMS, ids=[b.__name__ for b, _, _ in _ERROR_FORMS])
def test_every_error_form_encodes_at_every_version_and_decodes_unchanged(
    build: Callable[[Any, int, Any], Message], request_: Message, versions: tuple[int, int]
) -> None:
    error = ApiError(Errors.NOT_CONTROLLER, "No controller appears to be active.")
    for version in range(versions[0], versions[1] + 1):
        response = build(request_, version, error)
        assert type(response).decode(response.encode(version), version) == response


def test_elect_leaders_v0_error_form_has_no_top_level_error() -> None:
    request = ElectLeadersRequest(topic_partitions=[TopicPartitions(topic="a", partitions=[0])])
    response = responses.elect_leaders_response(request, 0, ERROR)
    assert response.error_code == Errors.NONE
    assert response.replica_election_results[0].partition_result[0].error_code == Errors.NOT_CONTROLLER
    assert type(response).decode(response.encode(0), 0) == response


def test_delete_topics_error_forms_encode_at_their_versions() -> None:
    for version, request in ((1, DeleteTopicsRequest(topic_names=["a"])), (6, DeleteTopicsRequest(topics=[DeleteTopicState(topic_id=T1)]))):
        response = responses.delete_topics_response(request, version, ERROR)
        decoded = type(response).decode(response.encode(version), version)
        assert [r.error_code for r in decoded.responses] == [Errors.NOT_CONTROLLER]
