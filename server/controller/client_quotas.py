"""Client quotas as the committed records leave them, and AlterClientQuotas on them (Kafka's
``ClientQuotaControlManager``; KIP-546).

An entity is a set of ``(type, name)`` parts: ``user`` and/or ``client-id``, or ``ip`` alone; a
null name is the type's default entity. Every node replays ClientQuotaRecord (set or remove one
key of one entity) into one :class:`ClientQuotaControlManager`; snapshots write a ClientQuotaRecord per
quota.

AlterClientQuotas, as Kafka 4.4's controller decides it, entry by entry in request order:

* an entry naming a quota key twice, or an entity already answered in this request, gets
  INVALID_REQUEST "Ignoring duplicate entity ..." (the first mention's records stay);
* the entity must be non-empty, of known types, with no empty name, and ``ip`` not combined with
  the others; an ``ip`` name must be an address (see :func:`ip_entity_error`);
* each key set must be one of the entity's keys (``producer_byte_rate``,
  ``consumer_byte_rate`` (longs), ``request_percentage``, ``controller_mutation_rate``
  (doubles) for users and client ids; ``connection_creation_rate`` (an int) for an ip), finite,
  above 0, and for an integral key whole and within its type; a removal is not checked;
* a set that changes the value and a removal of a key that is set each write a record; the
  entity's records are written only when all its keys pass.

Results come in the order of Kafka's ``HashMap`` of entities; ``validate_only`` writes nothing.
No I/O, no clock.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Iterable
from dataclasses import dataclass

from kwire.errors import Errors
from messages.generated.alter_client_quotas_request import AlterClientQuotasRequest
from messages.generated.client_quota_record import ClientQuotaRecord, EntityData
from messages.runtime import Message
from server.controller.errors import ApiError
from server.controller.java_order import java_hash_order, java_string_hash, java_table_size
from server.controller.result import EXCESSIVE_BATCH, MAX_RECORDS_PER_USER_OP, Record

__all__ = ["ENTITY_KEYS", "ClientQuotaControlManager", "Entity", "entity_text", "ip_entity_error"]

Entity = tuple[tuple[str, str | None], ...]
"""An entity's parts, in the iteration order of Kafka's map of them."""

USER_KEYS = {"producer_byte_rate": "LONG", "consumer_byte_rate": "LONG", "request_percentage": "DOUBLE",
             "controller_mutation_rate": "DOUBLE"}
"""Quota keys of users and client ids and their types (``QuotaConfig.userAndClientQuotaConfigs``)."""
IP_KEYS = {"connection_creation_rate": "INT"}
"""Quota keys of an ip (``QuotaConfig.ipConfigs``)."""
ENTITY_KEYS = {"user": USER_KEYS, "client-id": USER_KEYS, "ip": IP_KEYS}
_LIMITS = {"SHORT": 32767.0, "INT": 2147483647.0, "LONG": 9.223372036854776e18}


def _hash(text: str | None) -> int:
    return 0 if text is None else java_string_hash(text)


def _entity_hash(parts: Entity) -> int:
    """``ClientQuotaEntity.hashCode``: ``Objects.hash(entries)`` of the map of parts."""
    return (31 + sum(java_string_hash(k) ^ _hash(v) for k, v in parts)) & 0xFFFFFFFF


def _map_order(parts: Iterable[tuple[str, str | None]], capacity: int) -> Entity:
    """``parts`` (last one per type wins) in the order a ``HashMap`` of that capacity holds them."""
    by_type = dict(parts)
    types = java_hash_order(list(by_type), java_string_hash, capacity)
    return tuple((t, by_type[t]) for t in types)


def entity_text(entity: Entity) -> str:
    """``ClientQuotaEntity.toString``."""
    inner = ", ".join(f"{t}={'null' if n is None else n}" for t, n in entity)
    return f"ClientQuotaEntity(entries={{{inner}}})"


def ip_entity_error(name: str | None) -> str | None:
    """Why ``name`` is not an ip entity's name, None when it is one: the default (None) or an
    IPv4 or IPv6 address. Kafka also takes a host name its resolver knows
    (``InetAddress.getByName``); a controller without I/O cannot resolve one, so kwire refuses
    host names (DEVIATIONS)."""
    if name is None:
        return None
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return f"{name} is not a valid IP or resolvable host."
    return None


def _entity_error(entity: Entity) -> tuple[str | None, dict[str, str]]:
    """(why the entity is refused, None when it is not; its quota keys and their types)."""
    if not entity:
        return "Invalid empty client quota entity", {}
    for entity_type, name in entity:
        if entity_type not in ENTITY_KEYS:
            return f"Unhandled client quota entity type: {entity_type}", {}
        if name == "":
            return f"Empty {entity_type} not supported", {}
    types = {t for t, _ in entity}
    if "ip" in types:
        if types != {"ip"}:
            return "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId", {}
        return ip_entity_error(dict(entity)["ip"]), IP_KEYS
    return None, USER_KEYS


def _value_error(keys: dict[str, str], key: str, value: float) -> str | None:
    """``ClientQuotaControlManager.validateQuotaKeyValue`` of Kafka 4.4."""
    kind = keys.get(key)
    if kind is None:
        return f"Invalid configuration key {key}"
    if not math.isfinite(value):
        return f"Quota {key} must be a finite number"
    if value <= 0.0:
        return f"Quota {key} must be greater than 0"
    if kind == "DOUBLE":
        return None
    if value > _LIMITS[kind]:
        return f"Proposed value for {key} is too large for {'an' if kind == 'INT' else 'a'} {kind}."
    if abs(math.fmod(value, 1.0)) > 1e-6:
        return f"{key} cannot be a fractional value."
    return None


@dataclass(frozen=True, slots=True)
class QuotaAlteration:
    """One entry of the request: its entity (in the order Kafka's map of the request's parts
    holds them) and its ops as (key, value, remove)."""

    entity: Entity
    ops: tuple[tuple[str, float, bool], ...]


class ClientQuotaControlManager:
    """Quotas by entity (its parts as a frozenset) -> key -> value, in the order first set."""

    def __init__(self) -> None:
        self.quotas: dict[frozenset[tuple[str, str | None]], dict[str, float]] = {}
        self.entities: dict[frozenset[tuple[str, str | None]], Entity] = {}

    def replay(self, message: Message) -> None:
        """Replay a ClientQuotaRecord: set the key, or remove it (and the entity with its last
        key)."""
        if not isinstance(message, ClientQuotaRecord):
            return
        parts = tuple((e.entity_type, e.entity_name) for e in message.entity)
        key = frozenset(parts)
        if message.remove:
            held = self.quotas.get(key)
            if held is not None:
                held.pop(message.key, None)
                if not held:
                    del self.quotas[key]
                    del self.entities[key]
            return
        self.entities.setdefault(key, parts)
        self.quotas.setdefault(key, {})[message.key] = message.value

    def snapshot_records(self) -> list[Record]:
        """Every quota as its ClientQuotaRecord (``ClientQuotasImage.write``)."""
        return [
            (_record(self.entities[entity], key, value, False), 0)
            for entity, quotas in self.quotas.items()
            for key, value in quotas.items()
        ]

    def alter(self, request: AlterClientQuotasRequest) -> tuple[list[Record], list[tuple[Entity, ApiError | None]]]:
        """AlterClientQuotas' records and its ``(entity, error or None)`` results, in Kafka's
        order (module docstring). Raises ApiError POLICY_VIOLATION past 10,000 records."""
        records: list[Record] = []
        results: dict[frozenset[tuple[str, str | None]], tuple[Entity, ApiError | None]] = {}
        for entry in request.entries:
            parts = [(e.entity_type, e.entity_name) for e in entry.entity]
            entity = _map_order(parts, java_table_size(len(entry.entity)))
            key = frozenset(entity)
            duplicate_key = len({op.key for op in entry.ops}) < len(entry.ops)
            if duplicate_key or key in results:
                results[key] = (entity, ApiError(Errors.INVALID_REQUEST, f"Ignoring duplicate entity {entity_text(entity)}"))
                continue
            ops = {op.key: (None if op.remove else op.value) for op in entry.ops}
            refused, own = self._alter_entity(entity, ops, java_table_size(len(entry.ops)))
            if refused is not None:
                results[key] = (entity, ApiError(Errors.INVALID_REQUEST, refused))
                continue
            records += own
            if len(records) > MAX_RECORDS_PER_USER_OP:
                raise ApiError(Errors.POLICY_VIOLATION, EXCESSIVE_BATCH)
            results[key] = (entity, None)
        order = java_hash_order(list(results), lambda k: _entity_hash(results[k][0]))
        return records, [results[k] for k in order]

    def _alter_entity(self, entity: Entity, ops: dict[str, float | None], capacity: int) -> tuple[str | None, list[Record]]:
        refused, keys = _entity_error(entity)
        if refused is not None:
            return refused, []
        written = _map_order([(t, n) for t, n in entity], 4)  # the record's parts: a HashMap(3)
        held = self.quotas.get(frozenset(entity), {})
        own: list[Record] = []
        for key in java_hash_order(list(ops), java_string_hash, capacity):
            value = ops[key]
            if value is None:
                if key in held:
                    own.append((_record(written, key, 0.0, True), 0))
                continue
            reason = _value_error(keys, key, value)
            if reason is not None:
                return reason, []
            if held.get(key) != value:
                own.append((_record(written, key, value, False), 0))
        return None, own


def _record(entity: Entity, key: str, value: float, remove: bool) -> ClientQuotaRecord:
    return ClientQuotaRecord(
        entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity], key=key, value=value, remove=remove
    )
