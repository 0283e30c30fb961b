"""The controller RPCs the node answers outside the KRaft core, as a Kafka controller's
``ControllerApis`` does: UpdateFeatures (key 57), ControllerRegistration (key 70, KIP-919),
BrokerRegistration (62), BrokerHeartbeat (63), UnregisterBroker (64), AllocateProducerIds
(67), CreateTopics (19), DeleteTopics (20), CreatePartitions (37), AlterPartition (56),
IncrementalAlterConfigs (44), AlterConfigs (33), AssignReplicasToDirs (73), ElectLeaders (43),
AlterPartitionReassignments (45) and ListPartitionReassignments (46); and the node's own
registration (``ControllerRegistrationManager``).

Only the active controller writes: elsewhere, and before the active controller has replayed a
metadata.version, a write gets NOT_CONTROLLER ("The active controller appears to be node N" or
"No controller appears to be active."), which clients answer by finding the controller again.
A write's records go to the log as one batch; the answer leaves once that batch is committed,
and NOT_CONTROLLER if the node loses its leadership first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kwire.errors import Errors
from kwire.uuid import Uuid
from messages.generated.allocate_producer_ids_response import AllocateProducerIdsResponse
from messages.generated.alter_configs_request import AlterConfigsRequest
from messages.generated.alter_configs_response import AlterConfigsResourceResponse as LegacyResult
from messages.generated.alter_configs_response import AlterConfigsResponse
from messages.generated.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
)
from messages.generated.alter_partition_reassignments_response import (
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from messages.generated.alter_partition_response import AlterPartitionResponse
from messages.generated.assign_replicas_to_dirs_response import AssignReplicasToDirsResponse
from messages.generated.broker_heartbeat_response import BrokerHeartbeatResponse
from messages.generated.broker_registration_response import BrokerRegistrationResponse
from messages.generated.controller_registration_request import (
    ControllerRegistrationRequest,
    Feature,
    Listener,
)
from messages.generated.controller_registration_response import ControllerRegistrationResponse
from messages.generated.create_partitions_request import CreatePartitionsRequest
from messages.generated.create_partitions_response import (
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from messages.generated.create_topics_request import CreateTopicsRequest
from messages.generated.create_topics_response import CreatableTopicResult, CreateTopicsResponse
from messages.generated.delete_topics_request import DeleteTopicsRequest
from messages.generated.delete_topics_response import DeletableTopicResult, DeleteTopicsResponse
from messages.generated.elect_leaders_request import ElectLeadersRequest
from messages.generated.elect_leaders_response import (
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)
from messages.generated.incremental_alter_configs_request import IncrementalAlterConfigsRequest
from messages.generated.incremental_alter_configs_response import (
    AlterConfigsResourceResponse as IncrementalResult,
)
from messages.generated.incremental_alter_configs_response import IncrementalAlterConfigsResponse
from messages.generated.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
)
from messages.generated.list_partition_reassignments_response import (
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)
from messages.generated.unregister_broker_response import UnregisterBrokerResponse
from messages.generated.update_features_request import UpdateFeaturesRequest
from messages.generated.update_features_response import (
    UpdatableFeatureResult,
    UpdateFeaturesResponse,
)
from server.controller.cluster import BrokerHeartbeatReply
from server.controller.errors import ApiError
from server.controller.features import UpgradeType

__all__ = [
    "SECURITY_PROTOCOL_IDS",
    "allocate_producer_ids_response",
    "alter_configs_response",
    "alter_partition_reassignments_response",
    "alter_partition_response",
    "assign_replicas_to_dirs_response",
    "incremental_alter_configs_response",
    "broker_heartbeat_response",
    "broker_registration_response",
    "create_partitions_response",
    "create_topics_response",
    "delete_topics_response",
    "elect_leaders_response",
    "list_partition_reassignments_response",
    "unregister_broker_response",
    "feature_updates",
    "not_controller",
    "registration_request",
    "registration_response",
    "update_features_response",
]

SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
"""``SecurityProtocol`` ids, as registrations carry them."""

_FAILED_PREFIX = "The update failed for all features since the following feature had an error: "


def not_controller(leader_id: int | None) -> ApiError:
    """``ControllerExceptions.newWrongControllerException``: NOT_CONTROLLER naming the leader."""
    if leader_id is None:
        return ApiError(Errors.NOT_CONTROLLER, "No controller appears to be active.")
    return ApiError(Errors.NOT_CONTROLLER, f"The active controller appears to be node {leader_id}.")


def feature_updates(request: UpdateFeaturesRequest, version: int) -> dict[str, tuple[int, UpgradeType]]:
    """Feature name -> (target level, upgrade type) of an UpdateFeatures request. v0 has no
    UpgradeType: its default, UPGRADE, holds whatever AllowDowngrade says (Kafka 4.x's
    controller reads the field the same way)."""
    return {
        update.feature: (update.max_version_level, UpgradeType.UPGRADE if version == 0 else UpgradeType.of(update.upgrade_type))
        for update in request.feature_updates
    }


def update_features_response(
    request: UpdateFeaturesRequest, version: int, error: ApiError | None, *, wrong_controller: bool = False
) -> UpdateFeaturesResponse:
    """``QuorumController.updateFeatures``'s answer: an error fails every update (its message
    prefixed as Kafka does, unless the request never reached the feature checks:
    ``wrong_controller``); success at v0-1 lists each feature with NONE and the message
    "NONE" (``Errors.NONE.message()``)."""
    if error is not None:
        message = error.message if wrong_controller else _FAILED_PREFIX + (error.message or "")
        return UpdateFeaturesResponse(error_code=error.error, error_message=message)
    results = (
        [UpdatableFeatureResult(feature=u.feature, error_code=Errors.NONE, error_message="NONE") for u in request.feature_updates]
        if version <= 1
        else []
    )
    return UpdateFeaturesResponse(error_code=Errors.NONE, error_message=None, results=results)


def registration_response(error: ApiError | None) -> ControllerRegistrationResponse:
    """The ControllerRegistration answer: NONE once the record is committed (with an empty
    ErrorMessage, as Kafka sends it), or the error."""
    if error is None:
        return ControllerRegistrationResponse(error_code=Errors.NONE, error_message="")
    return ControllerRegistrationResponse(error_code=error.error, error_message=error.message)


def registration_request(
    node_id: int,
    incarnation_id: Uuid,
    listeners: Sequence[tuple[str, str, int, int]],
    features: Mapping[str, tuple[int, int]],
) -> ControllerRegistrationRequest:
    """``ControllerRegistrationManager.sendControllerRegistration``: this controller's id, the
    incarnation id of this run, its listeners ``(name, host, port, security protocol id)`` and
    supported features (name -> (min, max)); ZkMigrationReady false."""
    return ControllerRegistrationRequest(
        controller_id=node_id,
        incarnation_id=incarnation_id,
        zk_migration_ready=False,
        listeners=[Listener(name=n, host=h, port=p, security_protocol=s) for n, h, p, s in listeners],
        features=[
            Feature(name=name, min_supported_version=low, max_supported_version=high)
            for name, (low, high) in sorted(features.items())
        ],
    )


def broker_registration_response(error: ApiError | None, broker_epoch: int = -1) -> BrokerRegistrationResponse:
    """The BrokerRegistration answer: the broker epoch once the registration is committed, or
    the error code alone (BrokerEpoch -1, no message field), as ``ControllerApis`` builds it."""
    if error is not None:
        return BrokerRegistrationResponse(error_code=error.error, broker_epoch=-1)
    return BrokerRegistrationResponse(error_code=Errors.NONE, broker_epoch=broker_epoch)


def broker_heartbeat_response(answer: ApiError | BrokerHeartbeatReply) -> BrokerHeartbeatResponse:
    """The BrokerHeartbeat answer: the reply's IsCaughtUp, IsFenced and ShouldShutDown, or an
    error code with the fields' defaults (not caught up, fenced)."""
    if isinstance(answer, ApiError):
        return BrokerHeartbeatResponse(error_code=answer.error, is_caught_up=False, is_fenced=True, should_shut_down=False)
    return BrokerHeartbeatResponse(
        error_code=Errors.NONE,
        is_caught_up=answer.is_caught_up,
        is_fenced=answer.is_fenced,
        should_shut_down=answer.should_shut_down,
    )


def unregister_broker_response(error: ApiError | None) -> UnregisterBrokerResponse:
    """The UnregisterBroker answer: NONE with an empty message once committed, or the error
    with its message."""
    if error is None:
        return UnregisterBrokerResponse(error_code=Errors.NONE, error_message="")
    return UnregisterBrokerResponse(error_code=error.error, error_message=error.message)


def allocate_producer_ids_response(error: ApiError | None, start: int = 0, length: int = 0) -> AllocateProducerIdsResponse:
    """The AllocateProducerIds answer: the block once its record is committed, or the error
    code with an empty block."""
    if error is not None:
        return AllocateProducerIdsResponse(error_code=error.error, producer_id_start=0, producer_id_len=0)
    return AllocateProducerIdsResponse(error_code=Errors.NONE, producer_id_start=start, producer_id_len=length)


def create_topics_response(
    request: CreateTopicsRequest, outcome: ApiError | list[CreatableTopicResult]
) -> CreateTopicsResponse:
    """The CreateTopics answer: the per-topic results, or one error for every requested topic
    (``CreateTopicsRequest.getErrorResponse``: a request over the partition bound, or
    NOT_CONTROLLER)."""
    if isinstance(outcome, ApiError):
        outcome = [
            CreatableTopicResult(name=topic.name, error_code=outcome.error, error_message=outcome.message)
            for topic in request.topics
        ]
    return CreateTopicsResponse(throttle_time_ms=0, topics=outcome)


def delete_topics_response(
    request: DeleteTopicsRequest, version: int, outcome: ApiError | list[DeletableTopicResult]
) -> DeleteTopicsResponse:
    """The DeleteTopics answer: the per-topic results, or one error for every requested topic
    (``DeleteTopicsRequest.getErrorResponse``: names, or names and ids at v6; no message)."""
    if isinstance(outcome, ApiError):
        error = outcome.error
        if version < 6:
            outcome = [DeletableTopicResult(name=name, error_code=error) for name in request.topic_names]
        else:
            outcome = [
                DeletableTopicResult(name=topic.name, topic_id=topic.topic_id, error_code=error)
                for topic in request.topics
            ]
    return DeleteTopicsResponse(throttle_time_ms=0, responses=outcome)


def create_partitions_response(
    request: CreatePartitionsRequest, outcome: ApiError | list[CreatePartitionsTopicResult]
) -> CreatePartitionsResponse:
    """The CreatePartitions answer: the per-topic results, or one error for every requested
    topic (``CreatePartitionsRequest.getErrorResponse``)."""
    if isinstance(outcome, ApiError):
        outcome = [
            CreatePartitionsTopicResult(name=topic.name, error_code=outcome.error, error_message=outcome.message)
            for topic in request.topics
        ]
    return CreatePartitionsResponse(throttle_time_ms=0, results=outcome)


def elect_leaders_response(request: ElectLeadersRequest, outcome: ApiError | ElectLeadersResponse) -> ElectLeadersResponse:
    """The ElectLeaders answer, or one error at the top and for every named partition
    (``ElectLeadersRequest.getErrorResponse``)."""
    if not isinstance(outcome, ApiError):
        return outcome
    return ElectLeadersResponse(
        throttle_time_ms=0,
        error_code=outcome.error,
        replica_election_results=[
            ReplicaElectionResult(topic=topic.topic, partition_result=[
                PartitionResult(partition_id=index, error_code=outcome.error, error_message=outcome.message)
                for index in topic.partitions
            ])
            for topic in request.topic_partitions or []
        ],
    )


def alter_partition_reassignments_response(
    request: AlterPartitionReassignmentsRequest, outcome: ApiError | AlterPartitionReassignmentsResponse
) -> AlterPartitionReassignmentsResponse:
    """The AlterPartitionReassignments answer, or one error at the top and for every requested
    partition (``AlterPartitionReassignmentsRequest.getErrorResponse``)."""
    if not isinstance(outcome, ApiError):
        return outcome
    return AlterPartitionReassignmentsResponse(
        throttle_time_ms=0,
        error_code=outcome.error,
        error_message=outcome.message,
        responses=[
            ReassignableTopicResponse(name=topic.name, partitions=[
                ReassignablePartitionResponse(
                    partition_index=partition.partition_index, error_code=outcome.error, error_message=outcome.message
                )
                for partition in topic.partitions
            ])
            for topic in request.topics
        ],
    )


def list_partition_reassignments_response(
    request: ListPartitionReassignmentsRequest, outcome: ApiError | ListPartitionReassignmentsResponse
) -> ListPartitionReassignmentsResponse:
    """The ListPartitionReassignments answer, or one error at the top with every requested
    partition listed bare (``ListPartitionReassignmentsRequest.getErrorResponse``)."""
    if not isinstance(outcome, ApiError):
        return outcome
    return ListPartitionReassignmentsResponse(
        throttle_time_ms=0,
        error_code=outcome.error,
        error_message=outcome.message,
        topics=[
            OngoingTopicReassignment(name=topic.name, partitions=[
                OngoingPartitionReassignment(partition_index=index) for index in topic.partition_indexes
            ])
            for topic in request.topics or []
        ],
    )


def alter_partition_response(outcome: ApiError | AlterPartitionResponse) -> AlterPartitionResponse:
    """The AlterPartition answer: per partition, or one error code for the whole request and no
    topics (``AlterPartitionRequest.getErrorResponse``)."""
    if isinstance(outcome, ApiError):
        return AlterPartitionResponse(throttle_time_ms=0, error_code=outcome.error, topics=[])
    return outcome


def incremental_alter_configs_response(
    request: IncrementalAlterConfigsRequest, outcome: ApiError | list[IncrementalResult]
) -> IncrementalAlterConfigsResponse:
    """The IncrementalAlterConfigs answer: per resource, or one error for every resource."""
    if isinstance(outcome, ApiError):
        outcome = [
            IncrementalResult(
                error_code=outcome.error, error_message=outcome.message, resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
            for r in request.resources
        ]
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=outcome)


def alter_configs_response(request: AlterConfigsRequest, outcome: ApiError | list[LegacyResult]) -> AlterConfigsResponse:
    """The AlterConfigs answer: per resource, or one error for every resource."""
    if isinstance(outcome, ApiError):
        outcome = [
            LegacyResult(
                error_code=outcome.error, error_message=outcome.message, resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
            for r in request.resources
        ]
    return AlterConfigsResponse(throttle_time_ms=0, responses=outcome)


def assign_replicas_to_dirs_response(outcome: ApiError | AssignReplicasToDirsResponse) -> AssignReplicasToDirsResponse:
    """The AssignReplicasToDirs answer: per replica, or one error code for the whole request."""
    if isinstance(outcome, ApiError):
        return AssignReplicasToDirsResponse(throttle_time_ms=0, error_code=outcome.error, directories=[])
    return outcome
