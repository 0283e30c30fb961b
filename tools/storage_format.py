"""Formatting a node's log directories from its server configuration.

``storage.format`` formats directories from explicit values (cluster id, node id, directories,
initial voters); it sits below ``server`` and never reads a ``server.config.KRaftConfig``. This
module is the step above it that the tools share: choosing those values from a node's
configuration.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from server.config import KRaftConfig

__all__ = ["format_standalone"]


def format_standalone(config: KRaftConfig, out: Callable[[str], None] = print) -> bool:
    """Format ``config.metadata_log_dir`` (and ``log.dirs``) as ``kafka-storage format
    --standalone`` (Kafka's ``StorageTool`` with ``createStandaloneDynamicVoters``) does, with a
    random cluster id, unless it is formatted already (it has a ``meta.properties``). This node
    becomes the single initial voter at its first advertised controller listener (an empty host
    is ``localhost``) with a fresh directory id, at kraft.version 1. ``out`` receives each line
    Kafka's tool prints. Returns True when it formatted, False when the directory was formatted
    already.

    Raises FormatError when there is no controller listener, or for a controller listener on
    port 0, which cannot name the initial voter; FormatError or KafkaStorageError from
    :func:`storage.format.format_directories` for directories it cannot format."""
    from kwire.uuid import Uuid
    from storage.errors import FormatError
    from storage.format import DynamicVoter, format_directories
    from storage.meta_properties import generate_directory_id, read_meta_properties

    if read_meta_properties(config.metadata_log_dir) is not None:
        return False
    endpoints = config.controller_endpoints()
    if not endpoints:
        raise FormatError("--standalone needs a controller listener")
    first = endpoints[0]
    if first.port == 0:
        raise FormatError(
            f"--standalone: the controller listener {first} has port 0; the initial voter needs "
            "the port peers and tools will reach"
        )
    voter = DynamicVoter(config.node_id, first.host or "localhost", first.port, generate_directory_id())
    format_directories(
        cluster_id=str(Uuid.random()),
        node_id=config.node_id,
        directories=[*config.log_dirs, config.metadata_log_dir],
        metadata_log_dir=config.metadata_log_dir,
        controller_listener_name=config.controller_listener_names[0],
        initial_controllers=[voter],
        out=out,
    )
    return True
