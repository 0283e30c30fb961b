"""The node's own KIP-919 registration with the active controller (Kafka's
``ControllerRegistrationManager``), as a task with its own connection.

Every controller registers its incarnation (a random id per run) with its listeners and
supported features once a metadata.version of 3.7-IV0 or later is replayed, and again whenever
the log lacks that incarnation's registration: after a restart, or when a registration was lost
with a leader. One ControllerRegistration is sent per leader epoch that accepts it (its record
is then on its way to the log); failures back off exponentially from 100 ms to 2 minutes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

import trio

from kwire.errors import Errors
from kwire.negotiation import UnsupportedVersionError
from kwire.uuid import Uuid
from messages.generated.controller_registration_request import (
    ControllerRegistrationRequest,
    Feature,
    Listener,
)
from server.config import KRaftConfig
from server.controller.controller import ControlManagers
from server.controller.features import CONTROLLER_REGISTRATION_LEVEL, supported_features
from server.controller.host import QuorumController
from server.net.sasl import SaslClient
from server.node.security import controller_client_context
from server.raft.core import RaftCore
from server.raft.types import Endpoint

__all__ = ["SECURITY_PROTOCOL_IDS", "ControllerRegistrationManager", "registration_request"]

log = logging.getLogger("kwire.node")

SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
"""``SecurityProtocol`` ids, as registrations carry them."""

BACKOFF_MS = (100, 120_000)
"""``ControllerRegistrationManager``'s resend backoff: 100 ms doubling up to 2 minutes."""


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


class ControllerRegistrationManager:
    """Registers incarnation ``incarnation_id`` of the node ``config`` describes, whose
    controller endpoints ``endpoints()`` gives (bound ports included). The node calls
    :meth:`maybe_register` after every change it made; :meth:`run` is the task that sends."""

    def __init__(self, config: KRaftConfig, incarnation_id: Uuid, endpoints: Callable[[], tuple[Endpoint, ...]]) -> None:
        self.config = config
        self.node_id = config.node_id
        self.incarnation_id = incarnation_id
        self._endpoints = endpoints
        client = config.controller_sasl_client()
        self.sasl = None if client is None else SaslClient(*client)
        """How to log in to the active controller's SASL listener, if it is one."""
        self.ssl_context = controller_client_context(config)
        """The TLS context of connections to the controller listener, if it is a TLS one."""
        self._wakeup = trio.Event()
        self._registered_in_epoch: int | None = None
        """The leader epoch whose controller accepted this registration: no resend while that
        epoch lasts (its record is on its way to the log)."""

    def request(self) -> ControllerRegistrationRequest:
        """This incarnation's registration: its listeners with their security protocols, and
        the features this node supports."""
        protocols = self.config.listener_security_protocol_map
        listeners = [
            (e.name, e.host, e.port, SECURITY_PROTOCOL_IDS.get(protocols.get(e.name, "PLAINTEXT"), 0)) for e in self._endpoints()
        ]
        features = {f.name: (f.min_version, f.max_version) for f in supported_features()}
        return registration_request(self.node_id, self.incarnation_id, listeners, features)

    def _leader(self, core: RaftCore) -> tuple[str, int] | None:
        """The known leader's controller endpoint, None without one."""
        leader_id = core.leader_and_epoch.leader_id
        node = None if leader_id is None else core.voters.get(leader_id)
        endpoint = None if node is None else node.endpoint(self.config.controller_listener_names[0])
        return None if endpoint is None else (endpoint.host, endpoint.port)

    def needed(self, controller: ControlManagers, epoch: int) -> bool:
        """``maybeSendControllerRegistration``: metadata.version 3.7-IV0 or later is known, the
        log lacks this incarnation's registration, and no leader of ``epoch`` accepted one."""
        level = controller.metadata_version
        if level is None or level < CONTROLLER_REGISTRATION_LEVEL:
            return False
        current = controller.controllers.get(self.node_id)
        if current is not None and current.incarnation_id == self.incarnation_id:
            return False
        return epoch != self._registered_in_epoch

    def maybe_register(self, controller: ControlManagers, epoch: int) -> None:
        """Wake the task when a registration is needed."""
        if self.needed(controller, epoch):
            self._wakeup.set()

    async def run(self, core: RaftCore, host: QuorumController) -> None:
        """Send registrations whenever woken and still needed, until cancelled."""
        from server.net.client import KafkaConnectionError, open_connection

        failures = 0
        while True:
            await self._wakeup.wait()
            self._wakeup = trio.Event()
            leader, epoch = self._leader(core), core.epoch
            if leader is None or not self.needed(host.controller, epoch):
                continue
            try:
                conn = await open_connection(*leader, client_id=f"controller-{self.node_id}-registration",
                                             sasl=self.sasl, ssl_context=self.ssl_context)
                try:
                    response = await conn.request(self.request())
                finally:
                    await conn.aclose()
                error = Errors.of(response.error_code)
            except (OSError, KafkaConnectionError, UnsupportedVersionError) as exc:
                # unreachable, gone, or a leader without ControllerRegistration: try again later
                log.debug("controller registration with %s:%d failed: %s", *leader, exc)
                failures += 1
            else:
                if error == Errors.NONE:
                    failures = 0
                    self._registered_in_epoch = epoch  # registered once the record is replayed
                    continue
                log.info("controller registration answered %s", error.name)
                failures += 1
            low, high = BACKOFF_MS
            await trio.sleep(min(high, low * 2 ** min(failures - 1, 20)) / 1000)
            self._wakeup.set()
