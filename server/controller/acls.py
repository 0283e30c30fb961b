"""ACL bindings as the committed records leave them, and CreateAcls, DeleteAcls and DescribeAcls
on them (Kafka's ``AclControlManager`` and the binding and filter rules of
``org.apache.kafka.common.acl``; KIP-290 prefixed patterns, KIP-801 ``StandardAuthorizer``).

Every node replays AccessControlEntryRecord (a binding and the id the controller gave it) and
RemoveAccessControlEntryRecord (that id) into one :class:`AclControlManager`, so a kwire controller that
takes over from a stock one, or starts from a snapshot, holds the same bindings, and its
authorizer (``server.controller.authorizer``) decides on them.

The rules, as Kafka's controller applies them:

* **Create** (``AclControlManager.createAcls``): a binding whose resource type, pattern type,
  operation or permission is not a concrete one, whose resource name is empty or whose
  principal has no ``:`` is refused with INVALID_REQUEST and the reason; a binding equal to one
  already held (or earlier in the same request) succeeds without a record; every other one gets
  an AccessControlEntryRecord under a fresh random id. Before the controller, the request layer
  (``AclApis.handleCreateAcls``) refuses a CLUSTER binding not named ``kafka-cluster`` and an
  empty resource name.
* **Delete** (``AclControlManager.deleteAcls``): a filter with an unknown part is refused with
  INVALID_REQUEST; otherwise every held binding it matches is listed in its result and removed
  by one RemoveAccessControlEntryRecord (a binding several filters match is removed once).
* **Describe** (``AclApis.handleDescribeAcls``): the bindings the filter matches, grouped by
  resource pattern; any controller answers from its own image.

Matching is ``AclBindingFilter.matches``: a resource filter of type ANY matches every type; of
pattern type ANY every pattern type with the exact name; of MATCH, the bindings that would apply
to the named resource (a literal of that name, the literal wildcard ``*``, a prefix of the
name); a null name matches every name. An entry filter's null principal and host match all,
operation and permission ANY match all. No I/O, no clock.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kwire.errors import Errors
from kwire.uuid import Uuid
from messages.generated.access_control_entry_record import AccessControlEntryRecord
from messages.generated.remove_access_control_entry_record import RemoveAccessControlEntryRecord
from messages.runtime import Message
from server.controller.cluster import ReplayError
from server.controller.errors import ApiError
from server.controller.result import EXCESSIVE_BATCH, MAX_RECORDS_PER_USER_OP, Record

if TYPE_CHECKING:
    import random

__all__ = [
    "ACL_OPERATIONS",
    "CIDR_LEVEL",
    "CLUSTER",
    "CLUSTER_NAME",
    "GROUP",
    "MAX_RECORDS_PER_USER_OP",
    "PATTERN_TYPES",
    "PERMISSION_TYPES",
    "RESOURCE_TYPES",
    "TOPIC",
    "USER",
    "WILDCARD",
    "AclBinding",
    "AclControlManager",
    "AclFilter",
    "host_pattern_error",
    "malformed_acl_request",
]

RESOURCE_TYPES = {0: "UNKNOWN", 1: "ANY", 2: "TOPIC", 3: "GROUP", 4: "CLUSTER", 5: "TRANSACTIONAL_ID",
                  6: "DELEGATION_TOKEN", 7: "USER"}
"""``org.apache.kafka.common.resource.ResourceType`` by code."""
PATTERN_TYPES = {0: "UNKNOWN", 1: "ANY", 2: "MATCH", 3: "LITERAL", 4: "PREFIXED"}
"""``org.apache.kafka.common.resource.PatternType`` by code."""
ACL_OPERATIONS = {0: "UNKNOWN", 1: "ANY", 2: "ALL", 3: "READ", 4: "WRITE", 5: "CREATE", 6: "DELETE",
                  7: "ALTER", 8: "DESCRIBE", 9: "CLUSTER_ACTION", 10: "DESCRIBE_CONFIGS",
                  11: "ALTER_CONFIGS", 12: "IDEMPOTENT_WRITE", 13: "CREATE_TOKENS", 14: "DESCRIBE_TOKENS",
                  15: "TWO_PHASE_COMMIT"}
"""``org.apache.kafka.common.acl.AclOperation`` by code."""
PERMISSION_TYPES = {0: "UNKNOWN", 1: "ANY", 2: "DENY", 3: "ALLOW"}
"""``org.apache.kafka.common.acl.AclPermissionType`` by code."""

UNKNOWN, ANY, MATCH, LITERAL, PREFIXED = 0, 1, 2, 3, 4
TOPIC, GROUP, CLUSTER, USER = 2, 3, 4, 7
DENY, ALLOW = 2, 3
WILDCARD = "*"
"""The literal resource name that names every resource of its type
(``ResourcePattern.WILDCARD_RESOURCE``)."""
CLUSTER_NAME = "kafka-cluster"
"""The one name of the CLUSTER resource (``Resource.CLUSTER_NAME``)."""


def _known(table: dict[int, str], code: int) -> int:
    """``code`` when ``table`` names it, else UNKNOWN (the enums' ``fromCode``)."""
    return code if code in table else UNKNOWN


def _name(table: dict[int, str], code: int) -> str:
    return table.get(code, "UNKNOWN")


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One binding (``AclBinding``: a ``ResourcePattern`` and an ``AccessControlEntry``), codes
    as the wire carries them."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int

    @classmethod
    def from_record(cls, record: AccessControlEntryRecord) -> AclBinding:
        """The binding an AccessControlEntryRecord holds."""
        return cls(record.resource_type, record.resource_name, record.pattern_type, record.principal,
                   record.host, record.operation, record.permission_type)

    def to_record(self, acl_id: Uuid) -> AccessControlEntryRecord:
        """The AccessControlEntryRecord of this binding under ``acl_id``."""
        return AccessControlEntryRecord(
            id=acl_id, resource_type=self.resource_type, resource_name=self.resource_name,
            pattern_type=self.pattern_type, principal=self.principal, host=self.host,
            operation=self.operation, permission_type=self.permission_type,
        )

    def constructor_error(self) -> str | None:
        """Why Kafka's ``ResourcePattern`` and ``AccessControlEntry`` constructors refuse these
        codes (a resource type ANY, a pattern type MATCH or ANY, an operation or permission
        ANY), None when they accept them."""
        if self.resource_type == ANY:
            return "resourceType must not be ANY"
        if self.pattern_type in (ANY, MATCH):
            return f"patternType must not be {PATTERN_TYPES[self.pattern_type]}"
        if self.operation == ANY:
            return "operation must not be ANY"
        if self.permission_type == ANY:
            return "permissionType must not be ANY"
        return None

    def creation_error(self, metadata_version: int) -> ApiError | None:
        """Why the controller refuses to hold this binding at ``metadata_version``
        (``AclControlManager.validateNewAcl`` of Kafka 4.4, host patterns included), None
        when it may."""
        reason = self._invalid()
        if reason is not None:
            return ApiError(Errors.INVALID_REQUEST, reason)
        return host_pattern_error(self.host, metadata_version)

    def _invalid(self) -> str | None:
        resource_type = _known(RESOURCE_TYPES, self.resource_type)
        if resource_type in (UNKNOWN, ANY):
            return f"Invalid resourceType {RESOURCE_TYPES[resource_type]}"
        pattern_type = _known(PATTERN_TYPES, self.pattern_type)
        if pattern_type not in (LITERAL, PREFIXED):
            return f"Invalid patternType {PATTERN_TYPES[pattern_type]}"
        operation = _known(ACL_OPERATIONS, self.operation)
        if operation in (UNKNOWN, ANY):
            return f"Invalid operation {ACL_OPERATIONS[operation]}"
        permission = _known(PERMISSION_TYPES, self.permission_type)
        if permission not in (DENY, ALLOW):
            return f"Invalid permissionType {PERMISSION_TYPES[permission]}"
        if not self.resource_name:
            return "Resource name should not be empty"
        if ":" not in self.principal:
            return (f"Could not parse principal from `{self.principal}` (no colon is present "
                    "separating the principal type from the principal name)")
        return None

    def __str__(self) -> str:
        return (f"(pattern=ResourcePattern(resourceType={_name(RESOURCE_TYPES, self.resource_type)}, "
                f"name={self.resource_name}, patternType={_name(PATTERN_TYPES, self.pattern_type)}), "
                f"entry=(principal={self.principal}, host={self.host}, "
                f"operation={_name(ACL_OPERATIONS, self.operation)}, "
                f"permissionType={_name(PERMISSION_TYPES, self.permission_type)}))")


@dataclass(frozen=True, slots=True)
class AclFilter:
    """A binding filter (``AclBindingFilter``): None for a name, principal or host matches any."""

    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission_type: int

    @property
    def unknown_part(self) -> str | None:
        """"patternFilter" or "entryFilter" when that half has an unknown code
        (``AclBindingFilter``'s ``isUnknown``), else None."""
        if UNKNOWN in (_known(RESOURCE_TYPES, self.resource_type), _known(PATTERN_TYPES, self.pattern_type)):
            return "patternFilter"
        if UNKNOWN in (_known(ACL_OPERATIONS, self.operation), _known(PERMISSION_TYPES, self.permission_type)):
            return "entryFilter"
        return None

    def matches(self, binding: AclBinding) -> bool:
        """``AclBindingFilter.matches``: the resource half as ``ResourcePatternFilter.matches``,
        the entry half as ``AccessControlEntryFilter.matches``."""
        return self._matches_pattern(binding) and self._matches_entry(binding)

    def _matches_pattern(self, binding: AclBinding) -> bool:
        if self.resource_type != ANY and self.resource_type != binding.resource_type:
            return False
        if self.pattern_type not in (ANY, MATCH) and self.pattern_type != binding.pattern_type:
            return False
        name = self.resource_name
        if name is None:
            return True
        if self.pattern_type in (ANY, binding.pattern_type):
            return name == binding.resource_name
        if binding.pattern_type == LITERAL:
            return name == binding.resource_name or binding.resource_name == WILDCARD
        if binding.pattern_type == PREFIXED:
            return name.startswith(binding.resource_name)
        return False

    def _matches_entry(self, binding: AclBinding) -> bool:
        if self.principal is not None and self.principal != binding.principal:
            return False
        if self.host is not None and self.host != binding.host:
            return False
        if self.operation != ANY and self.operation != binding.operation:
            return False
        return self.permission_type == ANY or self.permission_type == binding.permission_type


CIDR_LEVEL = 32
"""metadata.version 4.4-IV1: a binding's host may be a CIDR range (``isCidrAclSupported``)."""
_IPV4_CIDR = re.compile(r"(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})/(\d{1,2})")


def host_pattern_error(host: str, metadata_version: int) -> ApiError | None:
    """Why Kafka 4.4 refuses ``host`` as a binding's host (``AclControlManager
    .validateHostPattern``), None when it takes it: empty; a CIDR range (it holds ``/``) below
    metadata.version 4.4-IV1 (UNSUPPORTED_VERSION) or not a valid one. An IPv4 range is checked
    as Kafka's ``SubnetUtils`` checks it (``a.b.c.d/n``, octets 0-255, n 0-32), an IPv6 one by
    Python's ``ipaddress``. Any other text is taken as a host name or address."""
    if not host:
        return ApiError(Errors.INVALID_REQUEST, "Host pattern cannot be null or empty")
    if "/" not in host:
        return None
    if metadata_version < CIDR_LEVEL:
        return ApiError(Errors.UNSUPPORTED_VERSION,
                        "CIDR-based ACL host patterns require metadata version 4.4-IV1 or higher.")
    reason = None
    if ":" in host:
        prefix = host.partition("/")[2]
        if prefix.isdigit() and int(prefix) > 128:
            reason = f"Could not parse [{host}] - prefix length must be between 0 and 128"
        else:
            try:
                ipaddress.IPv6Network(host, strict=False)
            except ValueError:
                reason = f"Could not parse [{host}]"
    else:
        match = _IPV4_CIDR.fullmatch(host)
        if match is None:
            reason = f"Could not parse [{host}]"
        else:
            for value in map(int, match.groups()[:4]):
                if value > 255:
                    reason = f"Value [{value}] not in range [0,255]"
                    break
            else:
                if int(match.group(5)) > 32:
                    reason = f"Value [{int(match.group(5))}] not in range [0,32]"
    return None if reason is None else ApiError(Errors.INVALID_REQUEST, f"Invalid CIDR notation '{host}': {reason}")


def malformed_acl_request(request: Any, version: int) -> str | None:
    """Why a CreateAcls, DescribeAcls or DeleteAcls request does not parse as Kafka's request
    classes read it (``CreateAclsRequest``, ``DescribeAclsRequest``, ``DeleteAclsRequest``
    validation): a resource type, pattern type, operation or permission sent as the UNKNOWN code
    0. Kafka then closes the connection; an unrecognized code (say 99) parses, as UNKNOWN. None
    for a request that parses."""
    parts: list[tuple[str, Any]] = []
    if hasattr(request, "creations"):
        parts = [("creation", c) for c in request.creations]
        fields = ("resource_type", "resource_pattern_type", "operation", "permission_type")
    else:
        parts = [("filter", f) for f in request.filters] if hasattr(request, "filters") else [("filter", request)]
        fields = ("resource_type_filter", "pattern_type_filter", "operation", "permission_type")
    for kind, part in parts:
        for name in fields:
            if getattr(part, name) == UNKNOWN:
                return f"{type(request).__name__}: a {kind} has {name} UNKNOWN (0)"
    return None


class AclControlManager:
    """The bindings by id, in the order they were added (``AclControlManager.idToAcl``)."""

    def __init__(self) -> None:
        self.by_id: dict[Uuid, AclBinding] = {}

    def replay(self, message: Message) -> None:
        """Replay an AccessControlEntryRecord or RemoveAccessControlEntryRecord. Raises
        ReplayError for an id already held or not held."""
        if isinstance(message, AccessControlEntryRecord):
            if message.id in self.by_id:
                raise ReplayError(f"Unable to replay {message}: an ACL with that id already exists")
            self.by_id[message.id] = AclBinding.from_record(message)
        elif isinstance(message, RemoveAccessControlEntryRecord):
            if self.by_id.pop(message.id, None) is None:
                raise ReplayError(f"Unable to replay {message}: no ACL with that id exists")

    def bindings(self) -> Iterable[AclBinding]:
        """Every binding held."""
        return self.by_id.values()

    def create(
        self, bindings: list[AclBinding], rng: random.Random, metadata_version: int
    ) -> tuple[list[Record], list[ApiError | None]]:
        """CreateAcls' records and one result per binding (None: created or already held).
        Raises ApiError POLICY_VIOLATION for more than :data:`MAX_RECORDS_PER_USER_OP` new
        bindings."""
        held = set(self.by_id.values())
        taken = set(self.by_id)
        records: list[Record] = []
        results: list[ApiError | None] = []
        for binding in bindings:
            refused = binding.creation_error(metadata_version)
            if refused is not None:
                results.append(refused)
                continue
            if binding not in held:
                held.add(binding)
                acl_id = Uuid.random(rng)
                while acl_id in taken:
                    acl_id = Uuid.random(rng)
                taken.add(acl_id)
                records.append((binding.to_record(acl_id), 0))
                if len(records) > MAX_RECORDS_PER_USER_OP:
                    raise ApiError(Errors.POLICY_VIOLATION, EXCESSIVE_BATCH)
            results.append(None)
        return records, results

    def delete(self, filters: list[AclFilter]) -> tuple[list[Record], list[list[AclBinding] | ApiError]]:
        """DeleteAcls' records and, per filter, the bindings it matched or why it was refused.
        Raises ApiError INVALID_REQUEST when the filters match more than
        :data:`MAX_RECORDS_PER_USER_OP` bindings."""
        removed: set[Uuid] = set()
        records: list[Record] = []
        results: list[list[AclBinding] | ApiError] = []
        for acl_filter in filters:
            unknown = acl_filter.unknown_part
            if unknown is not None:
                results.append(ApiError(Errors.INVALID_REQUEST, f"Unknown {unknown}."))
                continue
            matched = []
            for acl_id, binding in self.by_id.items():
                if acl_filter.matches(binding):
                    if len(records) >= MAX_RECORDS_PER_USER_OP:
                        raise ApiError(Errors.INVALID_REQUEST,
                                       f"Cannot remove more than {MAX_RECORDS_PER_USER_OP} acls in a single delete operation.")
                    matched.append(binding)
                    if acl_id not in removed:
                        removed.add(acl_id)
                        records.append((RemoveAccessControlEntryRecord(id=acl_id), 0))
            results.append(matched)
        return records, results

    def describe(self, acl_filter: AclFilter) -> list[AclBinding]:
        """The bindings ``acl_filter`` matches, each once."""
        return list(dict.fromkeys(b for b in self.by_id.values() if acl_filter.matches(b)))

    def snapshot_records(self) -> list[Record]:
        """Every binding as its AccessControlEntryRecord (``AclsImage.write``)."""
        return [(binding.to_record(acl_id), 0) for acl_id, binding in self.by_id.items()]
