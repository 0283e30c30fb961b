"""Deleting topics at the active controller (KIP-631): DeleteTopics as Kafka 4.4's
``ControllerApis`` checks it and ``ReplicationControlManager`` writes it.

DeleteTopics
DeleteTopics
    Topics named or given by id (v6), each deleted with one RemoveTopicRecord; unknown names
    answer UNKNOWN_TOPIC_OR_PARTITION, unknown ids UNKNOWN_TOPIC_ID, and with
    ``delete.topic.enable=false`` the whole request fails with TOPIC_DELETION_DISABLED (v3+).
"""

from __future__ import annotations

from kwire.errors import Errors
from kwire.uuid import Uuid
from messages.generated.delete_topics_request import DeleteTopicsRequest
from messages.generated.delete_topics_response import DeletableTopicResult
from messages.generated.remove_topic_record import RemoveTopicRecord
from server.controller.acls import CLUSTER, CLUSTER_NAME, TOPIC
from server.controller.authorizer import (
    DELETE,
    DESCRIBE,
    Authorize,
)
from server.controller.errors import ApiError
from server.controller.image import (
    ReplicationControlManager,
)
from server.controller.result import Record

__all__ = ["delete_topics"]


_UNKNOWN_TOPIC = "This server does not host this topic-partition."
_UNKNOWN_TOPIC_ID = "This server does not host this topic ID."


def delete_topics(
    request: DeleteTopicsRequest, version: int, *, image: ReplicationControlManager, delete_enabled: bool = True,
    authorize: Authorize | None = None,
) -> tuple[list[Record], list[DeletableTopicResult]]:
    """DeleteTopics at the active controller (module docstring): one RemoveTopicRecord per
    deleted topic and one result per requested topic (Kafka shuffles them; these follow the
    request). Raises ApiError TOPIC_DELETION_DISABLED (INVALID_REQUEST before v3) when
    ``delete.topic.enable`` is false.

    With ``authorize`` (``ControllerApis.deleteTopics``): DELETE on the cluster allows every
    topic, else a topic needs DESCRIBE and DELETE on it; a name without DESCRIBE is refused
    whether or not the topic exists, and an id whose topic the principal may not describe is
    answered without the name (TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")."""
    everything = authorize is None or authorize(DELETE, CLUSTER, CLUSTER_NAME, False)

    def describable(name: str) -> bool:
        return everything or authorize is not None and authorize(DESCRIBE, TOPIC, name, True)

    def deletable(name: str) -> bool:
        return everything or authorize is not None and authorize(DELETE, TOPIC, name, True)

    refused = "Topic authorization failed."
    if not delete_enabled:
        if version < 3:
            raise ApiError(Errors.INVALID_REQUEST, "This version does not support topic deletion.")
        raise ApiError(Errors.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
    results: list[DeletableTopicResult] = []

    def answer(name: str | None, topic_id: Uuid, error: Errors = Errors.NONE, message: str | None = None) -> None:
        results.append(DeletableTopicResult(name=name, topic_id=topic_id, error_code=error, error_message=message))

    zero = Uuid()
    names: dict[str, int] = {}
    ids: dict[Uuid, int] = {}
    for name in request.topic_names or ():
        names[name] = names.get(name, 0) + 1
    for state in request.topics or ():
        if state.name is None:
            if state.topic_id == zero:
                answer(None, zero, Errors.INVALID_REQUEST, "Neither topic name nor id were specified.")
            else:
                ids[state.topic_id] = ids.get(state.topic_id, 0) + 1
        elif state.topic_id == zero:
            names[state.name] = names.get(state.name, 0) + 1
        else:
            answer(state.name, state.topic_id, Errors.INVALID_REQUEST, "You may not specify both topic name and topic id.")
    for name, count in names.items():
        if count > 1:
            answer(name, zero, Errors.INVALID_REQUEST, "Duplicate topic name.")
    duplicate_ids = {topic_id for topic_id, count in ids.items() if count > 1}
    for topic_id in ids:
        if topic_id in duplicate_ids:
            answer(None, topic_id, Errors.INVALID_REQUEST, "Duplicate topic id.")
    to_delete: dict[Uuid, str] = {}
    for topic_id, count in ids.items():
        if count > 1:
            continue
        topic = image.topics.get(topic_id)
        if topic is None:
            answer(None, topic_id, Errors.UNKNOWN_TOPIC_ID, _UNKNOWN_TOPIC_ID)
        elif not deletable(topic.name):
            answer(topic.name if describable(topic.name) else None, topic_id, Errors.TOPIC_AUTHORIZATION_FAILED, refused)
        else:
            to_delete[topic_id] = topic.name
    for name, count in names.items():
        if count > 1:
            continue
        found = image.topic_ids.get(name)
        if not describable(name):
            answer(name, zero, Errors.TOPIC_AUTHORIZATION_FAILED, refused)
        elif found is None:
            answer(name, zero, Errors.UNKNOWN_TOPIC_OR_PARTITION, _UNKNOWN_TOPIC)
        elif not deletable(name):
            answer(name, zero, Errors.TOPIC_AUTHORIZATION_FAILED, refused)
        elif found in duplicate_ids or found in to_delete:
            duplicate_ids.add(found)
            to_delete.pop(found, None)
            answer(name, found, Errors.INVALID_REQUEST, "The provided topic name maps to an ID that was already supplied.")
        else:
            to_delete[found] = name
    records: list[Record] = []
    for topic_id, name in to_delete.items():
        records.append((RemoveTopicRecord(topic_id=topic_id), 0))
        answer(name, topic_id)
    return records, results
