"""The answers of the controller RPCs (Kafka's ``ControllerApis`` response building and each
request class's ``getErrorResponse``), one builder per RPC with one shape::

    respond(request, version, outcome) -> response

``outcome`` is an :class:`~server.controller.errors.ApiError` (the request failed whole: an
operation's refusal, or NOT_CONTROLLER) or the operation's result
(:attr:`ControllerResult.response <server.controller.result.ControllerResult.response>`), which
is None for RPCs whose success carries nothing. ``server.controller.registry`` pairs each
builder with its operation.

Only the active controller writes: elsewhere, and before the active controller has replayed a
metadata.version, a write gets NOT_CONTROLLER ("The active controller appears to be node N" or
"No controller appears to be active.", :func:`not_controller`), which clients answer by
finding the controller again.
"""

from __future__ import annotations

from kwire.errors import Errors
from messages.generated.allocate_producer_ids_response import AllocateProducerIdsResponse
from messages.generated.alter_client_quotas_request import AlterClientQuotasRequest
from messages.generated.alter_client_quotas_response import AlterClientQuotasResponse
from messages.generated.alter_client_quotas_response import EntityData as QuotaEntityData
from messages.generated.alter_client_quotas_response import EntryData as QuotaEntryResult
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
from messages.generated.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
)
from messages.generated.alter_user_scram_credentials_response import (
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)
from messages.generated.assign_replicas_to_dirs_response import AssignReplicasToDirsResponse
from messages.generated.broker_heartbeat_response import BrokerHeartbeatResponse
from messages.generated.broker_registration_response import BrokerRegistrationResponse
from messages.generated.controller_registration_response import ControllerRegistrationResponse
from messages.generated.create_acls_request import CreateAclsRequest
from messages.generated.create_acls_response import AclCreationResult, CreateAclsResponse
from messages.generated.create_delegation_token_request import CreateDelegationTokenRequest
from messages.generated.create_delegation_token_response import CreateDelegationTokenResponse
from messages.generated.create_partitions_request import CreatePartitionsRequest
from messages.generated.create_partitions_response import (
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from messages.generated.create_topics_request import CreateTopicsRequest
from messages.generated.create_topics_response import CreatableTopicResult, CreateTopicsResponse
from messages.generated.delete_acls_request import DeleteAclsRequest
from messages.generated.delete_acls_response import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsResponse,
)
from messages.generated.delete_topics_request import DeleteTopicsRequest
from messages.generated.delete_topics_response import DeletableTopicResult, DeleteTopicsResponse
from messages.generated.describe_acls_request import DescribeAclsRequest
from messages.generated.describe_acls_response import (
    AclDescription,
    DescribeAclsResource,
    DescribeAclsResponse,
)
from messages.generated.describe_cluster_response import DescribeClusterResponse
from messages.generated.describe_configs_request import DescribeConfigsRequest
from messages.generated.describe_configs_response import (
    DescribeConfigsResponse,
    DescribeConfigsResult,
)
from messages.generated.describe_delegation_token_request import DescribeDelegationTokenRequest
from messages.generated.describe_delegation_token_response import DescribeDelegationTokenResponse
from messages.generated.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
)
from messages.generated.describe_user_scram_credentials_response import (
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
)
from messages.generated.elect_leaders_request import ElectLeadersRequest
from messages.generated.elect_leaders_response import (
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)
from messages.generated.expire_delegation_token_request import ExpireDelegationTokenRequest
from messages.generated.expire_delegation_token_response import ExpireDelegationTokenResponse
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
from messages.generated.renew_delegation_token_request import RenewDelegationTokenRequest
from messages.generated.renew_delegation_token_response import RenewDelegationTokenResponse
from messages.generated.unregister_broker_response import UnregisterBrokerResponse
from messages.generated.unregister_controller_response import UnregisterControllerResponse
from messages.generated.update_features_request import UpdateFeaturesRequest
from messages.generated.update_features_response import (
    UpdatableFeatureResult,
    UpdateFeaturesResponse,
)
from messages.runtime import Message
from server.controller.acls import AclBinding
from server.controller.client_quotas import Entity
from server.controller.cluster import BrokerHeartbeatReply
from server.controller.delegation_tokens import TokenOutcome
from server.controller.errors import ApiError
from server.controller.features import UpgradeType
from server.controller.image import PRODUCER_ID_BLOCK_SIZE

__all__ = [
    "allocate_producer_ids_response",
    "alter_configs_response",
    "alter_partition_reassignments_response",
    "alter_partition_response",
    "assign_replicas_to_dirs_response",
    "broker_heartbeat_response",
    "broker_registration_response",
    "create_partitions_response",
    "create_topics_response",
    "delete_topics_response",
    "elect_leaders_response",
    "feature_updates",
    "incremental_alter_configs_response",
    "list_partition_reassignments_response",
    "not_controller",
    "registration_response",
    "unregister_broker_response",
    "unregister_controller_response",
    "update_features_response",
]

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


def update_features_response(request: UpdateFeaturesRequest, version: int, error: ApiError | None) -> UpdateFeaturesResponse:
    """``QuorumController.updateFeatures``'s answer: an error fails every update, its message
    prefixed as ``FeatureControlManager`` words a feature's refusal (NOT_CONTROLLER, which comes
    from the event queue, and CLUSTER_AUTHORIZATION_FAILED, from ``ControllerApis``, rather than
    the feature checks, keep their own message); success at v0-1 lists each feature with NONE
    and the message "NONE" (``Errors.NONE.message()``)."""
    if error is not None:
        own = error.error in (Errors.NOT_CONTROLLER, Errors.CLUSTER_AUTHORIZATION_FAILED)
        message = error.message if own else _FAILED_PREFIX + (error.message or "")
        return UpdateFeaturesResponse(error_code=error.error, error_message=message)
    results = (
        [UpdatableFeatureResult(feature=u.feature, error_code=Errors.NONE, error_message="NONE") for u in request.feature_updates]
        if version <= 1
        else []
    )
    return UpdateFeaturesResponse(error_code=Errors.NONE, error_message=None, results=results)


def registration_response(request: Message, version: int, error: ApiError | None) -> ControllerRegistrationResponse:
    """The ControllerRegistration answer: NONE once the record is committed (with an empty
    ErrorMessage, as Kafka sends it), or the error."""
    if error is None:
        return ControllerRegistrationResponse(error_code=Errors.NONE, error_message="")
    return ControllerRegistrationResponse(error_code=error.error, error_message=error.message)


def broker_registration_response(request: Message, version: int, outcome: ApiError | int) -> BrokerRegistrationResponse:
    """The BrokerRegistration answer: the broker epoch (``outcome``) once the registration is
    committed, or the error code alone (BrokerEpoch -1, no message field), as ``ControllerApis``
    builds it."""
    if isinstance(outcome, ApiError):
        return BrokerRegistrationResponse(error_code=outcome.error, broker_epoch=-1)
    broker_epoch = outcome
    return BrokerRegistrationResponse(error_code=Errors.NONE, broker_epoch=broker_epoch)


def broker_heartbeat_response(request: Message, version: int, answer: ApiError | BrokerHeartbeatReply) -> BrokerHeartbeatResponse:
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


def unregister_broker_response(request: Message, version: int, error: ApiError | None) -> UnregisterBrokerResponse:
    """The UnregisterBroker answer (``ControllerApis.handleUnregisterBroker``): NONE with the
    field's default empty message once committed, or the error with its message
    (``UnregisterBrokerRequest.getErrorResponse`` sets ErrorMessage to the exception's)."""
    if error is None:
        return UnregisterBrokerResponse(error_code=Errors.NONE, error_message="")
    return UnregisterBrokerResponse(error_code=error.error, error_message=error.message)


def unregister_controller_response(request: Message, version: int, error: ApiError | None) -> UnregisterControllerResponse:
    """The UnregisterController answer (``ControllerApis.handleUnregisterController``): NONE
    with an empty message once committed (as Kafka 4.4.0 answers it), or the error with its message."""
    if error is None:
        return UnregisterControllerResponse(error_code=Errors.NONE, error_message="")
    return UnregisterControllerResponse(error_code=error.error, error_message=error.message)


def allocate_producer_ids_response(request: Message, version: int, outcome: ApiError | int) -> AllocateProducerIdsResponse:
    """The AllocateProducerIds answer: the block of :data:`PRODUCER_ID_BLOCK_SIZE` ids starting
    at ``outcome`` once its record is committed, or the error code with an empty block."""
    if isinstance(outcome, ApiError):
        return AllocateProducerIdsResponse(error_code=outcome.error, producer_id_start=0, producer_id_len=0)
    return AllocateProducerIdsResponse(
        error_code=Errors.NONE, producer_id_start=outcome, producer_id_len=PRODUCER_ID_BLOCK_SIZE
    )


def create_topics_response(
    request: CreateTopicsRequest, version: int, outcome: ApiError | list[CreatableTopicResult]
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
    request: CreatePartitionsRequest, version: int, outcome: ApiError | list[CreatePartitionsTopicResult]
) -> CreatePartitionsResponse:
    """The CreatePartitions answer: the per-topic results, or one error for every requested
    topic (``CreatePartitionsRequest.getErrorResponse``)."""
    if isinstance(outcome, ApiError):
        outcome = [
            CreatePartitionsTopicResult(name=topic.name, error_code=outcome.error, error_message=outcome.message)
            for topic in request.topics
        ]
    return CreatePartitionsResponse(throttle_time_ms=0, results=outcome)


def elect_leaders_response(request: ElectLeadersRequest, version: int, outcome: ApiError | ElectLeadersResponse) -> ElectLeadersResponse:
    """The ElectLeaders answer, or the error for every named partition and at the top
    (``ElectLeadersRequest.getErrorResponse``). The top-level ErrorCode exists from v1 only:
    the ``ElectLeadersResponse`` constructor sets it from that version, so a v0 answer carries
    the error in its partitions alone."""
    if not isinstance(outcome, ApiError):
        return outcome
    return ElectLeadersResponse(
        throttle_time_ms=0,
        error_code=outcome.error if version >= 1 else Errors.NONE,
        replica_election_results=[
            ReplicaElectionResult(topic=topic.topic, partition_result=[
                PartitionResult(partition_id=index, error_code=outcome.error, error_message=outcome.message)
                for index in topic.partitions
            ])
            for topic in request.topic_partitions or []
        ],
    )


def alter_partition_reassignments_response(
    request: AlterPartitionReassignmentsRequest, version: int, outcome: ApiError | AlterPartitionReassignmentsResponse
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
    request: ListPartitionReassignmentsRequest, version: int, outcome: ApiError | ListPartitionReassignmentsResponse
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


def alter_partition_response(request: Message, version: int, outcome: ApiError | AlterPartitionResponse) -> AlterPartitionResponse:
    """The AlterPartition answer: per partition, or one error code for the whole request and no
    topics (``AlterPartitionRequest.getErrorResponse``)."""
    if isinstance(outcome, ApiError):
        return AlterPartitionResponse(throttle_time_ms=0, error_code=outcome.error, topics=[])
    return outcome


def incremental_alter_configs_response(
    request: IncrementalAlterConfigsRequest, version: int, outcome: ApiError | list[IncrementalResult]
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


def alter_configs_response(request: AlterConfigsRequest, version: int, outcome: ApiError | list[LegacyResult]) -> AlterConfigsResponse:
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


def assign_replicas_to_dirs_response(request: Message, version: int, outcome: ApiError | AssignReplicasToDirsResponse) -> AssignReplicasToDirsResponse:
    """The AssignReplicasToDirs answer: per replica, or one error code for the whole request."""
    if isinstance(outcome, ApiError):
        return AssignReplicasToDirsResponse(throttle_time_ms=0, error_code=outcome.error, directories=[])
    return outcome


def create_acls_response(request: CreateAclsRequest, version: int, outcome: ApiError | list[ApiError | None]) -> CreateAclsResponse:
    """The CreateAcls answer: one result per creation, in order (a success's message is "", as
    ``AclCreationResult``'s default); a whole-request error in each
    (``CreateAclsRequest.getErrorResponse``)."""
    results = [outcome] * len(request.creations) if isinstance(outcome, ApiError) else outcome
    return CreateAclsResponse(throttle_time_ms=0, results=[
        AclCreationResult(error_code=Errors.NONE, error_message="") if result is None
        else AclCreationResult(error_code=result.error, error_message=result.message)
        for result in results
    ])


def delete_acls_response(
    request: DeleteAclsRequest, version: int, outcome: ApiError | list[list[AclBinding] | ApiError]
) -> DeleteAclsResponse:
    """The DeleteAcls answer: per filter, in order, the bindings it removed or its error; a
    whole-request error in each (``DeleteAclsRequest.getErrorResponse``)."""
    results = [outcome] * len(request.filters) if isinstance(outcome, ApiError) else outcome
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
        DeleteAclsFilterResult(error_code=result.error, error_message=result.message, matching_acls=[])
        if isinstance(result, ApiError)
        else DeleteAclsFilterResult(error_code=Errors.NONE, error_message=None, matching_acls=[
            DeleteAclsMatchingAcl(
                error_code=Errors.NONE, error_message=None, resource_type=b.resource_type,
                resource_name=b.resource_name, pattern_type=b.pattern_type, principal=b.principal,
                host=b.host, operation=b.operation, permission_type=b.permission_type,
            )
            for b in result
        ])
        for result in results
    ])


def describe_acls_response(request: DescribeAclsRequest, version: int, outcome: ApiError | list[AclBinding]) -> DescribeAclsResponse:
    """The DescribeAcls answer: the bindings grouped by resource pattern (in the order each
    pattern first occurs; Kafka's order is a hash order) and the message "", or the error and no
    resources."""
    if isinstance(outcome, ApiError):
        return DescribeAclsResponse(throttle_time_ms=0, error_code=outcome.error, error_message=outcome.message, resources=[])
    grouped: dict[tuple[int, str, int], list[AclDescription]] = {}
    for b in outcome:
        grouped.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(
            AclDescription(principal=b.principal, host=b.host, operation=b.operation, permission_type=b.permission_type)
        )
    return DescribeAclsResponse(throttle_time_ms=0, error_code=Errors.NONE, error_message="", resources=[
        DescribeAclsResource(resource_type=key[0], resource_name=key[1], pattern_type=key[2], acls=acls)
        for key, acls in grouped.items()
    ])


_KAFKA_DEFAULT_MESSAGES = {
    Errors.UNKNOWN_SERVER_ERROR: "The server experienced an unexpected error when processing the request.",
    Errors.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
    Errors.NOT_CONTROLLER: "This is not the correct controller for this cluster.",
    Errors.POLICY_VIOLATION: "Request parameters do not satisfy the configured policy.",
}
"""Kafka's default message of the errors that fail a whole AlterClientQuotas request
(``Errors``' texts), which its error response carries instead of the exception's."""


def alter_user_scram_credentials_response(
    request: AlterUserScramCredentialsRequest, version: int, outcome: ApiError | list[tuple[str, ApiError | None]]
) -> AlterUserScramCredentialsResponse:
    """The AlterUserScramCredentials answer: one result per user named, in the operation's
    order; a whole-request error goes to every distinct user, sorted by name
    (``AlterUserScramCredentialsRequest.getErrorResponse``)."""
    if isinstance(outcome, ApiError):
        users = sorted({d.name for d in request.deletions} | {u.name for u in request.upsertions})
        outcome = [(user, outcome) for user in users]
    return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=[
        AlterUserScramCredentialsResult(user=user, error_code=Errors.NONE, error_message=None) if error is None
        else AlterUserScramCredentialsResult(user=user, error_code=error.error, error_message=error.message)
        for user, error in outcome
    ])


def describe_user_scram_credentials_response(
    request: DescribeUserScramCredentialsRequest, version: int, outcome: ApiError
) -> DescribeUserScramCredentialsResponse:
    """The error a controller answers DescribeUserScramCredentials with
    (``DescribeUserScramCredentialsRequest.getErrorResponse``): the code at the top and in one
    result per requested user, whose name it leaves empty."""
    return DescribeUserScramCredentialsResponse(
        throttle_time_ms=0, error_code=outcome.error, error_message=outcome.message,
        results=[
            DescribeUserScramCredentialsResult(user="", error_code=outcome.error, error_message=outcome.message,
                                               credential_infos=[])
            for _ in request.users or []
        ],
    )


def alter_client_quotas_response(
    request: AlterClientQuotasRequest, version: int, outcome: ApiError | list[tuple[Entity, ApiError | None]]
) -> AlterClientQuotasResponse:
    """The AlterClientQuotas answer: one entry per entity in the operation's order, its parts
    in the order Kafka's map of them iterates; a whole-request error goes to every entry of the
    request as sent, with Kafka's default message for the code
    (``AlterClientQuotasRequest.getErrorResponse``)."""
    if isinstance(outcome, ApiError):
        message = _KAFKA_DEFAULT_MESSAGES.get(outcome.error, outcome.message)
        return AlterClientQuotasResponse(throttle_time_ms=0, entries=[
            QuotaEntryResult(error_code=outcome.error, error_message=message, entity=[
                QuotaEntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity
            ])
            for entry in request.entries
        ])
    return AlterClientQuotasResponse(throttle_time_ms=0, entries=[
        QuotaEntryResult(
            error_code=Errors.NONE if error is None else error.error,
            error_message=None if error is None else error.message,
            entity=[QuotaEntityData(entity_type=t, entity_name=n) for t, n in entity],
        )
        for entity, error in outcome
    ])


def describe_cluster_response(request: Message, version: int, outcome: ApiError | DescribeClusterResponse) -> DescribeClusterResponse:
    """The DescribeCluster answer, or its error with every other field at its default
    (``DescribeClusterRequest.getErrorResponse``)."""
    if isinstance(outcome, ApiError):
        return DescribeClusterResponse(error_code=outcome.error, error_message=outcome.message)
    return outcome


def describe_configs_response(
    request: DescribeConfigsRequest, version: int, outcome: ApiError | DescribeConfigsResponse
) -> DescribeConfigsResponse:
    """The DescribeConfigs answer, or its error in every resource's result
    (``DescribeConfigsRequest.getErrorResponse``)."""
    if not isinstance(outcome, ApiError):
        return outcome
    return DescribeConfigsResponse(results=[
        DescribeConfigsResult(error_code=outcome.error, error_message=outcome.message, resource_type=r.resource_type,
                              resource_name=r.resource_name)
        for r in request.resources
    ])


def create_delegation_token_response(
    request: CreateDelegationTokenRequest, version: int,
    outcome: ApiError | tuple[Errors, str, str, TokenOutcome | None],
) -> CreateDelegationTokenResponse:
    """The CreateDelegationToken answer: the token, or the error with the owner and requester
    and no token: times -1 for a refusal of the request layer
    (``CreateDelegationTokenResponse.prepareResponse``), 0 for one of the controller's; a
    whole-request error names ``User:ANONYMOUS`` for both (``getErrorResponse``)."""
    if isinstance(outcome, ApiError):
        outcome = (outcome.error, "User:ANONYMOUS", "User:ANONYMOUS", None)
    error, owner, requester, token_outcome = outcome
    owner_type, _, owner_name = owner.partition(":")
    requester_type, _, requester_name = requester.partition(":")
    # the request layer's refusals (ControllerApis, getErrorResponse) say -1; the controller's leave the defaults
    unset = -1 if token_outcome is None else 0
    response = CreateDelegationTokenResponse(
        error_code=error, principal_type=owner_type, principal_name=owner_name,
        token_requester_principal_type=requester_type, token_requester_principal_name=requester_name,
        issue_timestamp_ms=unset, expiry_timestamp_ms=unset, max_timestamp_ms=unset, token_id="", hmac=b"",
    )
    token = None if token_outcome is None else token_outcome.token
    if token is not None:
        response.issue_timestamp_ms = token.issue_timestamp
        response.expiry_timestamp_ms = token.expiration_timestamp
        response.max_timestamp_ms = token.max_timestamp
        response.token_id = token.token_id
        response.hmac = token_outcome.hmac  # type: ignore[union-attr]
    return response


def renew_delegation_token_response(
    request: RenewDelegationTokenRequest, version: int, outcome: ApiError | TokenOutcome
) -> RenewDelegationTokenResponse:
    """The RenewDelegationToken answer: the error and the token's new expiry (0 with a
    whole-request error, ``getErrorResponse``)."""
    error, expiry = _token_change_answer(outcome)
    return RenewDelegationTokenResponse(error_code=error, expiry_timestamp_ms=expiry)


def expire_delegation_token_response(
    request: ExpireDelegationTokenRequest, version: int, outcome: ApiError | TokenOutcome
) -> ExpireDelegationTokenResponse:
    """The ExpireDelegationToken answer, as :func:`renew_delegation_token_response`."""
    error, expiry = _token_change_answer(outcome)
    return ExpireDelegationTokenResponse(error_code=error, expiry_timestamp_ms=expiry)


def _token_change_answer(outcome: ApiError | TokenOutcome) -> tuple[int, int]:
    if isinstance(outcome, ApiError):
        return outcome.error, 0
    return outcome.error, outcome.expiry_ms


def describe_delegation_token_response(
    request: DescribeDelegationTokenRequest, version: int, outcome: ApiError
) -> DescribeDelegationTokenResponse:
    """The error a controller answers DescribeDelegationToken with (``getErrorResponse``)."""
    return DescribeDelegationTokenResponse(error_code=outcome.error, tokens=[])
