"""StandardAuthorizer's decisions (server.controller.authorizer) beyond the cluster checks the
differential test (compat/test_authorization.py) drives: resource patterns, implied operations,
principals, hosts, the default, and the not-yet-loaded state."""

from __future__ import annotations

from server.controller.acls import AclBinding
from server.controller.authorizer import StandardAuthorizer

TOPIC, LITERAL, PREFIXED = 2, 3, 4
ALL, READ, WRITE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS = 2, 3, 4, 7, 8, 10, 11
DENY, ALLOW = 2, 3


def _loaded(super_users: tuple[str, ...] = (), allow_everyone: bool = False) -> StandardAuthorizer:
    authorizer = StandardAuthorizer(super_users, allow_everyone)
    authorizer.loaded = True
    return authorizer


def _on_topic(name: str, pattern: int, principal: str, operation: int, permission: int, host: str = "*") -> AclBinding:
    return AclBinding(TOPIC, name, pattern, principal, host, operation, permission)


def test_literal_prefixed_and_wildcard_patterns_apply_to_a_topic() -> None:
    authorizer = _loaded()
    for binding in (_on_topic("orders", LITERAL, "User:a", READ, ALLOW), _on_topic("log", PREFIXED, "User:b", READ, ALLOW),
                    _on_topic("*", LITERAL, "User:c", READ, ALLOW)):
        assert authorizer.authorize([binding], binding.principal, "10.0.0.1", READ, TOPIC, "orders" if binding.principal == "User:a" else "logs").allowed
    assert not authorizer.authorize([_on_topic("orders", LITERAL, "User:a", READ, ALLOW)], "User:a", "h", READ, TOPIC, "orders2").allowed
    assert not authorizer.authorize([_on_topic("logs", PREFIXED, "User:b", READ, ALLOW)], "User:b", "h", READ, TOPIC, "log").allowed


def test_implied_operations_hold_for_allow_only() -> None:
    authorizer = _loaded()
    assert authorizer.authorize([_on_topic("t", LITERAL, "User:a", WRITE, ALLOW)], "User:a", "h", DESCRIBE, TOPIC, "t").allowed
    assert authorizer.authorize([_on_topic("t", LITERAL, "User:a", ALTER_CONFIGS, ALLOW)], "User:a", "h", DESCRIBE_CONFIGS, TOPIC, "t").allowed
    assert not authorizer.authorize([_on_topic("t", LITERAL, "User:a", READ, ALLOW)], "User:a", "h", WRITE, TOPIC, "t").allowed
    both = [_on_topic("t", LITERAL, "User:a", ALL, ALLOW), _on_topic("t", LITERAL, "User:a", READ, DENY)]
    assert authorizer.authorize(both, "User:a", "h", DESCRIBE, TOPIC, "t").allowed  # a DENY of READ implies nothing
    assert not authorizer.authorize(both, "User:a", "h", READ, TOPIC, "t").allowed  # DENY before ALLOW


def test_wildcard_principal_and_host_matching() -> None:
    authorizer = _loaded()
    anyone = [_on_topic("t", LITERAL, "User:*", READ, ALLOW, host="10.0.0.1")]
    assert authorizer.authorize(anyone, "Group:x", "10.0.0.1", READ, TOPIC, "t").allowed
    assert not authorizer.authorize(anyone, "User:x", "10.0.0.2", READ, TOPIC, "t").allowed


def test_the_default_applies_only_to_resources_no_binding_names() -> None:
    authorizer = _loaded(allow_everyone=True)
    alice = [_on_topic("t", LITERAL, "User:alice", READ, ALLOW)]
    assert authorizer.authorize(alice, "User:bob", "h", READ, TOPIC, "other").rule == "DefaultAllow"
    refused = authorizer.authorize(alice, "User:bob", "h", READ, TOPIC, "t")
    assert not refused.allowed and refused.rule == "DefaultDeny"
    assert not _loaded().authorize([], "User:bob", "h", READ, TOPIC, "other").allowed


def test_before_the_acls_load_only_super_users_pass() -> None:
    authorizer = StandardAuthorizer(("User:admin",), True)
    assert authorizer.authorize([], "User:admin", "h", READ, TOPIC, "t").allowed
    waiting = authorizer.authorize([], "User:bob", "h", READ, TOPIC, "t")
    assert not waiting.allowed and not waiting.ready
