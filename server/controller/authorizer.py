"""Authorization decisions on the ACL image, as Kafka's ``StandardAuthorizer`` makes them
(``StandardAuthorizerData.authorize``; KIP-801), and the audit line it writes.

A request's principal (``Type:name``; ``User:ANONYMOUS`` on a PLAINTEXT listener, the forwarded
client's inside an Envelope) asking for an operation on one resource (a CLUSTER named
``kafka-cluster``, a TOPIC by name, ...) is decided so:

1. a principal listed in ``super.users`` (the exact ``Type:name`` text) is allowed;
2. before the controller has replayed the log up to the high watermark it knew when it started
   (Kafka's ``completeInitialLoad``), anyone else is refused as not ready;
3. the bindings that apply to the resource are those of its type naming it literally, by a
   prefix of its name, or by the literal wildcard ``*``; of those, the ones for the principal or
   ``User:*``, for the client's host or ``*``, and for the operation match: ``ALL`` matches
   every operation, and an ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE, an ALLOW
   of ALTER_CONFIGS also DESCRIBE_CONFIGS (never for DENY);
4. a matching DENY refuses, else a matching ALLOW allows; when no binding applies to the
   resource at all, ``allow.everyone.if.no.acl.found`` decides; otherwise refused.

No I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from server.controller.acls import (
    ACL_OPERATIONS,
    ALLOW,
    CLUSTER,
    CLUSTER_NAME,
    DENY,
    LITERAL,
    PREFIXED,
    WILDCARD,
    AclBinding,
)

__all__ = [
    "ALL",
    "ALTER",
    "ALTER_CONFIGS",
    "CLUSTER_ACTION",
    "CREATE",
    "CREATE_TOKENS",
    "DELETE",
    "DESCRIBE",
    "DESCRIBE_CONFIGS",
    "Authorize",
    "Decision",
    "StandardAuthorizer",
    "audit_line",
]

ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS = (
    2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
CREATE_TOKENS = 13
"""``AclOperation`` codes."""

Authorize = Callable[[int, int, str, bool], bool]
"""``authorize(operation, resource type, resource name, log_denied) -> allowed`` for one
request's principal (the ACL codes of ``server.controller.acls``); raises ApiError
UNKNOWN_SERVER_ERROR while the ACLs are not loaded (Kafka's ``AuthorizerNotReadyException``)."""
_IMPLY_DESCRIBE = frozenset({DESCRIBE, READ, WRITE, DELETE, ALTER})
_IMPLY_DESCRIBE_CONFIGS = frozenset({DESCRIBE_CONFIGS, ALTER_CONFIGS})
_RESOURCE_NAMES = {2: "Topic", 3: "Group", 4: "Cluster", 5: "TransactionalId", 6: "DelegationToken", 7: "User"}
"""``SecurityUtils.resourceTypeName``."""


@dataclass(frozen=True, slots=True)
class Decision:
    """An authorization's outcome: ``allowed``, or refused (``ready`` False when refused only
    because the ACLs are not loaded yet), and the rule that decided (the audit line's)."""

    allowed: bool
    rule: str
    ready: bool = True


class StandardAuthorizer:
    """``StandardAuthorizer`` over ``bindings`` (the ACL image's, read at each decision)."""

    def __init__(self, super_users: Iterable[str], allow_everyone_if_no_acl_found: bool) -> None:
        self.super_users = frozenset(super_users)
        self.default_allow = allow_everyone_if_no_acl_found
        self.loaded = False
        """The ACLs are loaded (module docstring, step 2)."""

    def authorize(
        self, bindings: Iterable[AclBinding], principal: str, host: str, operation: int, resource_type: int,
        resource_name: str,
    ) -> Decision:
        """Whether ``principal`` from ``host`` may do ``operation`` on the literal resource
        (``resource_type``, ``resource_name``)."""
        if principal in self.super_users:
            return Decision(True, "SuperUser")
        if not self.loaded:
            return Decision(False, "NotReady", ready=False)
        principals = (principal, "User:*")
        applies = False
        allowed = False
        for binding in bindings:
            if binding.resource_type != resource_type or not _names(binding, resource_name):
                continue
            applies = True
            if binding.principal not in principals or binding.host not in ("*", host):
                continue
            if binding.permission_type == DENY:
                if binding.operation in (ALL, operation):
                    return Decision(False, f"MatchingAcl(acl={_acl_text(binding)})")
            elif binding.permission_type == ALLOW and _allows(binding.operation, operation):
                allowed = True
        if allowed:
            return Decision(True, "MatchingAcl")
        if not applies and self.default_allow:
            return Decision(True, "DefaultAllow")
        return Decision(False, "DefaultDeny")

    def authorize_cluster(self, bindings: Iterable[AclBinding], principal: str, host: str, operation: int) -> Decision:
        """:meth:`authorize` on the CLUSTER resource."""
        return self.authorize(bindings, principal, host, operation, CLUSTER, CLUSTER_NAME)


def _names(binding: AclBinding, name: str) -> bool:
    """Whether ``binding``'s pattern names the resource ``name``."""
    if binding.pattern_type == LITERAL:
        return binding.resource_name in (name, WILDCARD)
    return binding.pattern_type == PREFIXED and name.startswith(binding.resource_name)


def _allows(granted: int, wanted: int) -> bool:
    if granted in (ALL, wanted):
        return True
    if wanted == DESCRIBE:
        return granted in _IMPLY_DESCRIBE
    return wanted == DESCRIBE_CONFIGS and granted in _IMPLY_DESCRIBE_CONFIGS


def _acl_text(binding: AclBinding) -> str:
    return (f"StandardAcl[resourceType={_RESOURCE_NAMES.get(binding.resource_type, '?').upper()}, "
            f"resourceName={binding.resource_name}, patternType={'LITERAL' if binding.pattern_type == LITERAL else 'PREFIXED'}, "
            f"principal={binding.principal}, host={binding.host}, operation={ACL_OPERATIONS.get(binding.operation)}, "
            f"permissionType={'DENY' if binding.permission_type == DENY else 'ALLOW'}]")


def audit_line(decision: Decision, principal: str, host: str, operation: int, resource_type: int, resource_name: str,
               request: str) -> str:
    """Kafka's authorizer audit line (``StandardAuthorizerData.buildAuditMessage``)."""
    return (f"Principal = {principal} is {'Allowed' if decision.allowed else 'Denied'} operation = "
            f"{ACL_OPERATIONS.get(operation)} from host = {host} on resource = "
            f"{_RESOURCE_NAMES.get(resource_type, '?')}:LITERAL:{resource_name} for request = {request} with "
            f"resourceRefCount = 1 based on rule {decision.rule}")
