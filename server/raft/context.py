"""What an RPC handler may use of the core: the :class:`RaftContext` protocol.

Handlers (one module per RPC, registered in :mod:`server.raft.registry`) receive this narrow
view instead of the core, so that no handler imports the core and the core reaches handlers
only through the registry: the import graph of ``server.raft`` has no cycle.
"""

from __future__ import annotations

from typing import Any, Protocol

from kwire.api_keys import ApiKey
from server.raft.control_state import ControlRecordStateMachine
from server.raft.log import RaftLog
from server.raft.log_view import LogView
from server.raft.quorum_state import QuorumState
from server.raft.requests import RequestManager
from server.raft.types import Endpoint, QuorumConfig, ReplicaIdentity


class RaftContext(Protocol):
    """The core as its handlers see it (implemented by :class:`server.raft.core.RaftCore`).

    ``quorum`` is the role and its transitions, ``control`` the voter set and kraft.version,
    ``view`` the log with this step's staged changes and the high watermark, ``requests`` the
    outbound requests in flight, ``log`` the log as the driver last applied it.
    """

    identity: ReplicaIdentity
    config: QuorumConfig
    log: RaftLog
    quorum: QuorumState
    control: ControlRecordStateMachine
    view: LogView
    requests: RequestManager

    def send(
        self, now_ms: int, destination_id: int, api_key: ApiKey, request: Any, endpoint: Endpoint | None = None
    ) -> int:
        """Queue a request in this step's Outbox; returns its correlation id."""
        ...

    def reply(self, request_id: int, response: Any) -> None:
        """Queue the response to the received request ``request_id``."""
        ...
