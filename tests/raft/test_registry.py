"""The RPC registry (``server.raft.registry``): a new RPC is its spec, its handler module and
one registry entry; the same table drives the core's dispatch and the node's ApiVersions."""

from __future__ import annotations

import importlib
import pkgutil
import random

import pytest

import server.raft.rpc
from kwire.api_keys import ApiKey
from messages.generated.describe_cluster_request import DescribeClusterRequest
from messages.generated.describe_cluster_response import DescribeClusterResponse
from server.node import api_versions
from server.raft.context import RaftContext
from server.raft.core import RaftCore
from server.raft.events import RequestReceived, Tick
from server.raft.log import MemoryRaftLog
from server.raft.registry import DEFAULT, HANDLERS, Registry, RpcHandler
from server.raft.roles import Leader
from server.raft.types import ReplicaIdentity
from tests.raft.helpers import CLUSTER_ID, Context, static_voters

# ---- a toy RPC: the "handler module" (any generated request the core does not handle) ----

TOY_VERSIONS = (0, 1)


def toy_handle_request(ctx: RaftContext, now_ms: int, event: RequestReceived) -> DescribeClusterResponse:
    """Answers from the context alone: the cluster id and the leader this replica knows."""
    leader = ctx.quorum.leader_and_epoch.leader_id
    return DescribeClusterResponse(
        cluster_id=ctx.identity.cluster_id or "",
        controller_id=-1 if leader is None else leader,
    )


# ---- the one registry line ----
TOY = RpcHandler(ApiKey.DESCRIBE_CLUSTER, TOY_VERSIONS, DescribeClusterRequest, toy_handle_request)


def _context(registry: Registry) -> Context:
    log = MemoryRaftLog()
    core = RaftCore(
        identity=ReplicaIdentity(1, cluster_id=CLUSTER_ID),
        log=log,
        voters=static_voters(1),
        rng=random.Random(1),
        now_ms=0,
        registry=registry,
    )
    context = Context(core, log)
    context.step(Tick())
    return context


def test_a_new_rpc_is_a_handler_and_one_registry_entry() -> None:
    context = _context(Registry((*HANDLERS, TOY)))
    context.tick(3000)
    assert isinstance(context.core.state, Leader)  # a single voter elects itself
    _, response = context.request(DescribeClusterRequest(), version=1)
    assert isinstance(response, DescribeClusterResponse)
    assert response.cluster_id == CLUSTER_ID
    assert response.controller_id == 1  # the single voter leads
    advertised = Registry((*HANDLERS, TOY)).advertised_versions()
    assert advertised[int(ApiKey.DESCRIBE_CLUSTER)] == TOY_VERSIONS


def test_without_its_registry_entry_the_core_refuses_the_request() -> None:
    context = _context(DEFAULT)
    with pytest.raises(ValueError, match="does not handle DescribeClusterRequest"):
        context.request(DescribeClusterRequest(), version=1)


def test_two_entries_for_one_api_key_are_refused() -> None:
    other = RpcHandler(ApiKey.DESCRIBE_CLUSTER, (0, 0), None, None)
    with pytest.raises(ValueError, match="claim the same API key"):
        Registry((*HANDLERS, TOY, other))


def test_the_node_advertises_the_registry_plus_the_controller_rpcs() -> None:
    advertised = api_versions()
    node_only = {
        int(ApiKey.DESCRIBE_CLUSTER),
        int(ApiKey.UPDATE_FEATURES),
        int(ApiKey.CONTROLLER_REGISTRATION),
        int(ApiKey.BROKER_REGISTRATION),
        int(ApiKey.BROKER_HEARTBEAT),
        int(ApiKey.UNREGISTER_BROKER),
        int(ApiKey.ENVELOPE),
        int(ApiKey.ALLOCATE_PRODUCER_IDS),
        int(ApiKey.CREATE_TOPICS),
        int(ApiKey.DELETE_TOPICS),
        int(ApiKey.CREATE_PARTITIONS),
        int(ApiKey.ALTER_PARTITION),
        int(ApiKey.INCREMENTAL_ALTER_CONFIGS),
        int(ApiKey.ALTER_CONFIGS),
        int(ApiKey.ASSIGN_REPLICAS_TO_DIRS),
        int(ApiKey.DESCRIBE_CONFIGS),
        int(ApiKey.ELECT_LEADERS),
        int(ApiKey.ALTER_PARTITION_REASSIGNMENTS),
        int(ApiKey.LIST_PARTITION_REASSIGNMENTS),
        int(ApiKey.UNREGISTER_CONTROLLER),
        int(ApiKey.SASL_HANDSHAKE),
        int(ApiKey.SASL_AUTHENTICATE),
        int(ApiKey.CREATE_ACLS),
        int(ApiKey.DELETE_ACLS),
        int(ApiKey.DESCRIBE_ACLS),
        int(ApiKey.ALTER_USER_SCRAM_CREDENTIALS),
        int(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS),
        int(ApiKey.ALTER_CLIENT_QUOTAS),
        int(ApiKey.CREATE_DELEGATION_TOKEN),
        int(ApiKey.RENEW_DELEGATION_TOKEN),
        int(ApiKey.EXPIRE_DELEGATION_TOKEN),
        int(ApiKey.DESCRIBE_DELEGATION_TOKEN),
    }
    assert advertised[int(ApiKey.SASL_HANDSHAKE)] == (0, 1)
    assert advertised[int(ApiKey.SASL_AUTHENTICATE)] == (0, 2)
    assert advertised[int(ApiKey.CREATE_ACLS)] == (1, 3)  # 3.9.2 has 0-3, 4.4.0 1-3 (KIP-896)
    assert advertised[int(ApiKey.UPDATE_FEATURES)] == (0, 2)  # 3.9.2 has 0-1, 4.4.0 0-2
    assert advertised[int(ApiKey.CONTROLLER_REGISTRATION)] == (0, 0)
    assert advertised[int(ApiKey.BROKER_REGISTRATION)] == (0, 4)
    assert advertised[int(ApiKey.BROKER_HEARTBEAT)] == (0, 2)  # 3.9.2 has 0-1, 4.4.0 0-2
    assert advertised[int(ApiKey.UNREGISTER_BROKER)] == (0, 0)
    assert advertised[int(ApiKey.CREATE_TOPICS)] == (2, 7)  # 3.9.2 has 0-7, 4.4.0 2-7 (KIP-896)
    assert advertised[int(ApiKey.DELETE_TOPICS)] == (1, 6)
    assert advertised[int(ApiKey.DESCRIBE_CONFIGS)] == (1, 4)  # 3.9.2 has 0-4, 4.4.0 1-4 (KIP-896)
    assert advertised[int(ApiKey.ELECT_LEADERS)] == (0, 2)
    assert advertised[int(ApiKey.ALTER_PARTITION_REASSIGNMENTS)] == (0, 1)  # 3.9.2 has 0, 4.4.0 0-1 (KIP-860)
    assert advertised[int(ApiKey.LIST_PARTITION_REASSIGNMENTS)] == (0, 0)
    assert advertised[int(ApiKey.UNREGISTER_CONTROLLER)] == (0, 0)  # 4.4.0 only
    assert {k: v for k, v in advertised.items() if k not in node_only} == DEFAULT.advertised_versions()
    assert set(advertised) - set(DEFAULT.advertised_versions()) == node_only


def test_every_handler_module_is_registered_with_its_versions() -> None:
    modules = []
    for info in pkgutil.iter_modules(server.raft.rpc.__path__):
        module = importlib.import_module(f"server.raft.rpc.{info.name}")
        versions = getattr(module, "VERSIONS", None)
        if versions is None:
            continue
        modules.append(info.name)
        handlers = [h for h in HANDLERS if getattr(h.handle_request, "__module__", None) == module.__name__]
        assert len(handlers) == 1, f"{info.name} defines VERSIONS but is not in HANDLERS"
        assert handlers[0].versions == versions, info.name
    # vote, begin/end quorum epoch, fetch, fetch snapshot, describe quorum, three voter changes
    assert len(modules) == 9, modules
