"""The metadata partition's fixed names (``org.apache.kafka.common.internals.Topic``): the
KRaft log is partition 0 of the internal topic ``__cluster_metadata``, whose topic id is
:data:`kwire.uuid.METADATA_TOPIC_ID`. Every request, response and directory name that names the
partition takes its values from here."""

from __future__ import annotations

METADATA_TOPIC_NAME = "__cluster_metadata"
"""``Topic.CLUSTER_METADATA_TOPIC_NAME``."""

METADATA_PARTITION = 0
"""``Topic.CLUSTER_METADATA_TOPIC_PARTITION``'s partition index."""

METADATA_PARTITION_DIR = f"{METADATA_TOPIC_NAME}-{METADATA_PARTITION}"
"""The partition's directory under ``metadata.log.dir`` (``<topic>-<partition>``)."""
