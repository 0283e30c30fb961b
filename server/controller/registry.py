"""The one table of controller RPCs: for each, its request class (api key and versions), its
operation (``server.controller.cluster_operations``, ``topic_operations``,
``security_operations``) and its answer builder
(``server.controller.responses``). It drives the host's dispatch
(``server.controller.host``) and the controller part of the ApiVersions table the node
advertises, as ``server.raft.registry`` does for the raft RPCs.

A new controller RPC is its spec in ``messages/specs/`` (``make generate``), its operation,
its answer builder, and one line in :data:`CONTROLLER_APIS`.

Versions: each RPC's spec carries the union of the pinned Kafka releases' versions (3.9.2 and
the newest 4.x), and the node advertises all of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from messages.generated.allocate_producer_ids_request import AllocateProducerIdsRequest
from messages.generated.alter_client_quotas_request import AlterClientQuotasRequest
from messages.generated.alter_configs_request import AlterConfigsRequest
from messages.generated.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
)
from messages.generated.alter_partition_request import AlterPartitionRequest
from messages.generated.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
)
from messages.generated.assign_replicas_to_dirs_request import AssignReplicasToDirsRequest
from messages.generated.broker_heartbeat_request import BrokerHeartbeatRequest
from messages.generated.broker_registration_request import BrokerRegistrationRequest
from messages.generated.controller_registration_request import ControllerRegistrationRequest
from messages.generated.create_acls_request import CreateAclsRequest
from messages.generated.create_delegation_token_request import CreateDelegationTokenRequest
from messages.generated.create_partitions_request import CreatePartitionsRequest
from messages.generated.create_topics_request import CreateTopicsRequest
from messages.generated.delete_acls_request import DeleteAclsRequest
from messages.generated.delete_topics_request import DeleteTopicsRequest
from messages.generated.describe_acls_request import DescribeAclsRequest
from messages.generated.describe_cluster_request import DescribeClusterRequest
from messages.generated.describe_configs_request import DescribeConfigsRequest
from messages.generated.describe_delegation_token_request import DescribeDelegationTokenRequest
from messages.generated.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
)
from messages.generated.elect_leaders_request import ElectLeadersRequest
from messages.generated.expire_delegation_token_request import ExpireDelegationTokenRequest
from messages.generated.incremental_alter_configs_request import IncrementalAlterConfigsRequest
from messages.generated.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
)
from messages.generated.renew_delegation_token_request import RenewDelegationTokenRequest
from messages.generated.unregister_broker_request import UnregisterBrokerRequest
from messages.generated.unregister_controller_request import UnregisterControllerRequest
from messages.generated.update_features_request import UpdateFeaturesRequest
from messages.runtime import Message
from server.controller import cluster_operations as cluster_ops
from server.controller import responses as answer
from server.controller import security_operations as security_ops
from server.controller import topic_operations as topic_ops
from server.controller.acls import malformed_acl_request
from server.controller.authorizer import ALTER, ALTER_CONFIGS, CLUSTER_ACTION, DESCRIBE
from server.controller.controller import ControlManagers
from server.controller.errors import ApiError
from server.controller.operation_context import ControllerConfig, OperationContext
from server.controller.result import ControllerResult

__all__ = ["CONTROLLER_APIS", "ControllerApi", "advertised_versions", "find"]


def _whole(request: Message, version: int, outcome: Any) -> Message:
    """The answer of a read whose result is the whole response."""
    return outcome


@dataclass(frozen=True, slots=True)
class ControllerApi:
    """One controller RPC. ``write``: only the active controller runs it, after the writes
    before it committed, and answers once its records commit; otherwise any controller answers
    at once from its image (and ``respond`` gets the whole response). ``on_arrival`` runs
    when the request arrives, before it waits for anything. ``check`` refuses the request
    whole on any controller before anything else (``ControllerApis``' checks ahead of the
    controller, e.g. SECURITY_DISABLED without an authorizer). ``malformed`` says why a decoded
    request is one Kafka's request class refuses to parse (the node then closes the connection,
    as Kafka does), None when it parses."""

    request: type[Message]
    operation: Callable[[OperationContext, Any, int], ControllerResult]
    respond: Callable[[Any, int, Any], Message] = _whole
    write: bool = True
    on_arrival: Callable[[ControlManagers, Any, int], None] | None = None
    check: Callable[[ControllerConfig, Any, int], ApiError | None] | None = None
    malformed: Callable[[Any, int], str | None] | None = None
    cluster_operation: int | None = None

    @property
    def api_key(self) -> int:
        """The RPC's api key."""
        key = self.request.API_KEY
        assert key is not None
        return key

    @property
    def versions(self) -> tuple[int, int]:
        """(lowest, highest) request version served."""
        return (self.request.LOWEST_VERSION, self.request.HIGHEST_VERSION)


CONTROLLER_APIS: tuple[ControllerApi, ...] = (
    ControllerApi(ControllerRegistrationRequest, cluster_ops.register_controller, answer.registration_response,
                  cluster_operation=CLUSTER_ACTION),
    ControllerApi(UnregisterControllerRequest, cluster_ops.unregister_controller, answer.unregister_controller_response,
                  cluster_operation=ALTER),
    ControllerApi(UpdateFeaturesRequest, cluster_ops.update_features_op, answer.update_features_response, cluster_operation=ALTER),
    ControllerApi(BrokerRegistrationRequest, cluster_ops.register_broker, answer.broker_registration_response,
                  cluster_operation=CLUSTER_ACTION),
    ControllerApi(BrokerHeartbeatRequest, cluster_ops.broker_heartbeat, answer.broker_heartbeat_response, on_arrival=cluster_ops.track_heartbeat,
                  cluster_operation=CLUSTER_ACTION),
    ControllerApi(UnregisterBrokerRequest, cluster_ops.unregister_broker, answer.unregister_broker_response, cluster_operation=ALTER),
    ControllerApi(AllocateProducerIdsRequest, cluster_ops.allocate_producer_ids, answer.allocate_producer_ids_response,
                  cluster_operation=CLUSTER_ACTION),
    ControllerApi(CreateTopicsRequest, topic_ops.create_topics, answer.create_topics_response),
    ControllerApi(DeleteTopicsRequest, topic_ops.delete_topics, answer.delete_topics_response),
    ControllerApi(CreatePartitionsRequest, topic_ops.create_partitions, answer.create_partitions_response),
    ControllerApi(AlterPartitionRequest, topic_ops.alter_partition, answer.alter_partition_response, cluster_operation=CLUSTER_ACTION),
    ControllerApi(IncrementalAlterConfigsRequest, topic_ops.incremental_alter_configs, answer.incremental_alter_configs_response),
    ControllerApi(AlterConfigsRequest, topic_ops.alter_configs, answer.alter_configs_response),
    ControllerApi(AssignReplicasToDirsRequest, topic_ops.assign_replicas_to_dirs, answer.assign_replicas_to_dirs_response,
                  cluster_operation=CLUSTER_ACTION),
    ControllerApi(ElectLeadersRequest, topic_ops.elect_leaders, answer.elect_leaders_response, cluster_operation=ALTER),
    ControllerApi(AlterPartitionReassignmentsRequest, topic_ops.alter_partition_reassignments,
                  answer.alter_partition_reassignments_response, cluster_operation=ALTER),
    ControllerApi(ListPartitionReassignmentsRequest, topic_ops.list_partition_reassignments,
                  answer.list_partition_reassignments_response, cluster_operation=DESCRIBE),
    ControllerApi(DescribeClusterRequest, cluster_ops.describe_cluster, answer.describe_cluster_response, write=False,
                  cluster_operation=ALTER),
    ControllerApi(DescribeConfigsRequest, topic_ops.describe_configs, answer.describe_configs_response, write=False),
    ControllerApi(CreateAclsRequest, security_ops.create_acls, answer.create_acls_response, check=security_ops.check_acl_request,
                  malformed=malformed_acl_request, cluster_operation=ALTER),
    ControllerApi(DeleteAclsRequest, security_ops.delete_acls, answer.delete_acls_response, check=security_ops.check_acl_request,
                  malformed=malformed_acl_request, cluster_operation=ALTER),
    ControllerApi(DescribeAclsRequest, security_ops.describe_acls, answer.describe_acls_response, write=False,
                  check=security_ops.check_acl_request, malformed=malformed_acl_request, cluster_operation=DESCRIBE),
    ControllerApi(AlterUserScramCredentialsRequest, security_ops.alter_user_scram_credentials, answer.alter_user_scram_credentials_response,
                  cluster_operation=ALTER),
    ControllerApi(DescribeUserScramCredentialsRequest, security_ops.describe_user_scram_credentials,
                  answer.describe_user_scram_credentials_response, write=False),
    ControllerApi(AlterClientQuotasRequest, topic_ops.alter_client_quotas, answer.alter_client_quotas_response,
                  cluster_operation=ALTER_CONFIGS),
    ControllerApi(CreateDelegationTokenRequest, security_ops.create_delegation_token, answer.create_delegation_token_response),
    ControllerApi(RenewDelegationTokenRequest, security_ops.renew_delegation_token, answer.renew_delegation_token_response),
    ControllerApi(ExpireDelegationTokenRequest, security_ops.expire_delegation_token, answer.expire_delegation_token_response),
    ControllerApi(DescribeDelegationTokenRequest, security_ops.describe_delegation_token, answer.describe_delegation_token_response,
                  write=False),
)
"""Every controller RPC (module docstring)."""

_BY_TYPE: dict[type[Message], ControllerApi] = {api.request: api for api in CONTROLLER_APIS}


def find(request: Message) -> ControllerApi | None:
    """The entry serving ``request``'s type, None for a request that is not a controller RPC."""
    return _BY_TYPE.get(type(request))


def advertised_versions() -> dict[int, tuple[int, int]]:
    """``{api key: (lowest, highest) version}`` of every controller RPC."""
    return {api.api_key: api.versions for api in CONTROLLER_APIS}
