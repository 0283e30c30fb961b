"""The controller's security operations, one function per RPC of Kafka's ``QuorumController``
and ``ControllerApis``: ACLs (KIP-801's ``StandardAuthorizer``), SCRAM credentials (KIP-554)
and delegation tokens (KIP-48), each ``operation(ctx, request, version) -> ControllerResult``
over an :class:`~server.controller.operation_context.OperationContext`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kwire.errors import Errors
from messages.generated.access_control_entry_record import AccessControlEntryRecord
from messages.generated.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
)
from messages.generated.create_acls_request import CreateAclsRequest
from messages.generated.create_delegation_token_request import CreateDelegationTokenRequest
from messages.generated.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from messages.generated.describe_acls_request import DescribeAclsRequest
from messages.generated.describe_delegation_token_request import DescribeDelegationTokenRequest
from messages.generated.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
)
from messages.generated.expire_delegation_token_request import ExpireDelegationTokenRequest
from messages.generated.remove_user_scram_credential_record import RemoveUserScramCredentialRecord
from messages.generated.renew_delegation_token_request import RenewDelegationTokenRequest
from server.controller.acls import CLUSTER, CLUSTER_NAME, USER, AclBinding, AclFilter
from server.controller.authorizer import CREATE_TOKENS
from server.controller.delegation_tokens import TokenOutcome
from server.controller.errors import ApiError
from server.controller.operation_context import ControllerConfig, OperationContext
from server.controller.result import ControllerResult, Record

# ---------------------------------------------------------------------- ACLs (KIP-801)


def check_acl_request(config: ControllerConfig, request: Any, version: int) -> ApiError | None:
    """What ``AclApis`` refuses on any controller before the controller sees a request:
    SECURITY_DISABLED without an authorizer ("... on the broker" for DescribeAcls, Kafka's
    text even on a controller); a creation that Kafka's ``AclBinding`` constructors refuse
    (:meth:`~server.controller.acls.AclBinding.constructor_error`) fails every creation with
    UNKNOWN_SERVER_ERROR and no message."""
    if not config.authorizer:
        if isinstance(request, DescribeAclsRequest):
            return ApiError(Errors.SECURITY_DISABLED, "No Authorizer is configured on the broker")
        return ApiError(Errors.SECURITY_DISABLED, "No Authorizer is configured.")
    if isinstance(request, CreateAclsRequest) and any(b.constructor_error() for b in _bindings(request)):
        return ApiError(Errors.UNKNOWN_SERVER_ERROR, None)
    return None


def _bindings(request: CreateAclsRequest) -> list[AclBinding]:
    return [
        AclBinding(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                   c.operation, c.permission_type)
        for c in request.creations
    ]


def create_acls(ctx: OperationContext, request: CreateAclsRequest, version: int) -> ControllerResult:
    """CreateAcls (``AclApis.handleCreateAcls``, ``AclControlManager.createAcls``; rules in
    ``server.controller.acls``): the result is one ApiError or None per creation, in order."""
    bindings = _bindings(request)
    refused: dict[AclBinding, ApiError] = {}
    valid: list[AclBinding] = []
    for binding in bindings:
        if binding.resource_type == CLUSTER and binding.resource_name != CLUSTER_NAME:
            refused[binding] = ApiError(Errors.INVALID_REQUEST, f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        elif not binding.resource_name:
            refused[binding] = ApiError(Errors.INVALID_REQUEST, "Invalid empty resource name")
        else:
            valid.append(binding)
    records, results = ctx.controller.acls.create(valid, ctx.rng, ctx.metadata_version)
    first = {binding: results[i] for i, binding in reversed(list(enumerate(valid)))}
    outcome = [refused[b] if b in refused else first[b] for b in bindings]
    for record, _ in records:
        assert isinstance(record, AccessControlEntryRecord)
        ctx.log.info("creating ACL %s with id %s", AclBinding.from_record(record), record.id)
    return ControllerResult(records, outcome)


def _filter(f: DescribeAclsRequest | DeleteAclsFilter) -> AclFilter:
    return AclFilter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter, f.principal_filter,
                     f.host_filter, f.operation, f.permission_type)


def delete_acls(ctx: OperationContext, request: DeleteAclsRequest, version: int) -> ControllerResult:
    """DeleteAcls (``AclControlManager.deleteAcls``): per filter, the bindings it matched (all
    removed) or its ApiError."""
    records, results = ctx.controller.acls.delete([_filter(f) for f in request.filters])
    for result in results:
        if not isinstance(result, ApiError):
            for binding in result:
                ctx.log.info("deleting ACL %s", binding)
    return ControllerResult(records, results)


def describe_acls(ctx: OperationContext, request: DescribeAclsRequest, version: int) -> ControllerResult:
    """DescribeAcls (``AclApis.handleDescribeAcls``) from this node's image: the matching
    bindings (none for a filter with an unrecognized code, which matches nothing)."""
    return ControllerResult((), ctx.controller.acls.describe(_filter(request)))


# ---------------------------------------------------------------------- SCRAM (KIP-554)


def alter_user_scram_credentials(
    ctx: OperationContext, request: AlterUserScramCredentialsRequest, version: int
) -> ControllerResult:
    """AlterUserScramCredentials (``ScramControlManager.alterCredentials``; rules in
    ``server.controller.scram``): the result is ``[(user, ApiError or None)]``."""
    records, results = ctx.controller.scram.alter(request, ctx.metadata_version)
    for record, _ in records:
        ctx.log.info("%s SCRAM credential of user %s (mechanism %d)",
                     "removing" if isinstance(record, RemoveUserScramCredentialRecord) else "setting",
                     record.name, record.mechanism)  # type: ignore[attr-defined]
    return ControllerResult(records, results)


def describe_user_scram_credentials(
    ctx: OperationContext, request: DescribeUserScramCredentialsRequest, version: int
) -> ControllerResult:
    """DescribeUserScramCredentials on a controller: Kafka's controller lists it in ApiVersions
    but has no handler (``ControllerApis.handle``'s default case), so every request fails with
    UNKNOWN_SERVER_ERROR; brokers answer it from their image."""
    return ControllerResult((), ApiError(Errors.UNKNOWN_SERVER_ERROR, None))

# ---------------------------------------------------------------------- delegation tokens (KIP-48)


def _principal_parts(principal: str) -> tuple[str, str]:
    kind, _, name = principal.partition(":")
    return kind, name


def create_delegation_token(ctx: OperationContext, request: CreateDelegationTokenRequest, version: int) -> ControllerResult:
    """CreateDelegationToken (``ControllerApis.handleCreateDelegationTokenRequest``, then
    ``DelegationTokenControlManager.createDelegationToken``): the result is ``(error, owner,
    requester, TokenOutcome or None)``."""
    requester = ctx.principal
    owner = requester
    if request.owner_principal_name:
        if request.owner_principal_type is None:  # Kafka's KafkaPrincipal refuses a null type
            raise ApiError(Errors.UNKNOWN_SERVER_ERROR, None)
        owner = f"{request.owner_principal_type}:{request.owner_principal_name}"
    if not ctx.token_requests_allowed:
        return ControllerResult((), (Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, owner, requester, None))
    if owner != requester and ctx.authorize is not None and not ctx.authorize(CREATE_TOKENS, USER, owner, True):
        return ControllerResult((), (Errors.DELEGATION_TOKEN_AUTHORIZATION_FAILED, owner, requester, None))
    records, outcome = ctx.controller.delegation_tokens.create(
        owner=owner, requester=requester, renewers=[f"{r.principal_type}:{r.principal_name}" for r in request.renewers],
        max_lifetime_ms=request.max_lifetime_ms, now_ms=ctx.now_ms, settings=ctx.config.tokens,
        metadata_version=ctx.metadata_version, rng=ctx.rng,
    )
    if outcome.token is not None:
        ctx.log.info("created delegation token %s of %s for %s", outcome.token.token_id, owner, requester)
    return ControllerResult(records, (outcome.error, owner, requester, outcome))


def renew_delegation_token(ctx: OperationContext, request: RenewDelegationTokenRequest, version: int) -> ControllerResult:
    """RenewDelegationToken: the result is a :class:`TokenOutcome`."""
    return _token_change(ctx, ctx.controller.delegation_tokens.renew, request.hmac, request.renew_period_ms)


def expire_delegation_token(ctx: OperationContext, request: ExpireDelegationTokenRequest, version: int) -> ControllerResult:
    """ExpireDelegationToken: the result is a :class:`TokenOutcome`."""
    return _token_change(ctx, ctx.controller.delegation_tokens.expire, request.hmac, request.expiry_time_period_ms)


def _token_change(
    ctx: OperationContext, change: Callable[..., tuple[list[Record], TokenOutcome]], token_hmac: bytes, period_ms: int
) -> ControllerResult:
    """A renewal or expiry: refused with DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (expiry -1) where
    the request layer refuses token requests, else the controller's ``change``."""
    if not ctx.token_requests_allowed:
        return ControllerResult((), TokenOutcome(Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, None, -1))
    records, outcome = change(
        token_hmac_bytes=bytes(token_hmac), period_ms=period_ms, principal=ctx.principal, now_ms=ctx.now_ms,
        settings=ctx.config.tokens, metadata_version=ctx.metadata_version,
    )
    return ControllerResult(records, outcome)


def describe_delegation_token(ctx: OperationContext, request: DescribeDelegationTokenRequest, version: int) -> ControllerResult:
    """DescribeDelegationToken on a controller: listed in ApiVersions but not handled
    (``ControllerApis.handle``'s default case): UNKNOWN_SERVER_ERROR; brokers describe tokens."""
    return ControllerResult((), ApiError(Errors.UNKNOWN_SERVER_ERROR, None))
