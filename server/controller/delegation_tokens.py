"""Delegation tokens as the committed records leave them, and CreateDelegationToken,
RenewDelegationToken and ExpireDelegationToken on them (Kafka's ``DelegationTokenControlManager``;
KIP-48, in KRaft from metadata.version 3.6-IV2 by KIP-900).

Every node replays DelegationTokenRecord (a token created or renewed: its owner, requester,
renewers, issue, maximum and expiration times and id) and RemoveDelegationTokenRecord into one
:class:`DelegationTokenControlManager`; snapshots write a DelegationTokenRecord per token. A token's
password is its HMAC: HMAC-SHA512 of its id under ``delegation.token.secret.key``; requests
name a token by it.

The rules, as Kafka's controller applies them (the request layer's checks, which principal may
ask at all, are ``server.controller.security_operations``'):

* create: the owner is the requester unless the request names one; the token lives until
  ``now + min(delegation.token.max.lifetime.ms, the request's MaxLifetimeMs when above 0)`` and
  expires at ``min(that, now + delegation.token.expiry.time.ms)``; its id is a random UUID;
* without a secret key every request fails DELEGATION_TOKEN_AUTH_DISABLED, then below
  metadata.version 3.6-IV2 UNSUPPORTED_VERSION;
* a renewer that is not a ``User`` is INVALID_PRINCIPAL_TYPE;
* renew: a token no HMAC names is DELEGATION_TOKEN_NOT_FOUND, one past its maximum or expiry
  DELEGATION_TOKEN_EXPIRED, and only its owner or a renewer may renew
  (DELEGATION_TOKEN_OWNER_MISMATCH); the expiry moves to ``min(max, now + min(expiry.time.ms,
  the period when above 0))``;
* expire: not found, then the owner-or-renewer check; a negative period removes the token at
  once (even an expired one), otherwise an expired token is DELEGATION_TOKEN_EXPIRED and the
  expiry moves to ``min(max, now + period)``;
* every ``delegation.token.expiry.check.interval.ms`` the active controller removes the tokens
  past their maximum or expiry, 1,000 at a time.

No I/O; the clock comes in as ``now_ms``.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kwire.errors import Errors
from kwire.uuid import Uuid
from messages.generated.delegation_token_record import DelegationTokenRecord
from messages.generated.remove_delegation_token_record import RemoveDelegationTokenRecord
from messages.runtime import Message
from server.controller.result import Record

if TYPE_CHECKING:
    import random

__all__ = ["DELEGATION_TOKEN_LEVEL", "DelegationTokenControlManager", "TokenOutcome", "TokenSettings", "token_hmac"]

DELEGATION_TOKEN_LEVEL = 14
"""metadata.version 3.6-IV2: delegation tokens live in the metadata log
(``isDelegationTokenSupported``)."""


@dataclass(frozen=True, slots=True)
class TokenSettings:
    """The node's token settings, with Kafka's keys and defaults: ``delegation.token.secret.key``
    (None: tokens are disabled), ``delegation.token.max.lifetime.ms``,
    ``delegation.token.expiry.time.ms`` and ``delegation.token.expiry.check.interval.ms``."""

    secret_key: str | None = None
    max_lifetime_ms: int = 604_800_000
    expiry_time_ms: int = 86_400_000
    expiry_check_interval_ms: int = 3_600_000


def token_hmac(secret_key: str, token_id: str) -> bytes:
    """A token's HMAC (``DelegationTokenManager.createHmac``): HMAC-SHA512 of the id's UTF-8
    under the secret's UTF-8."""
    return hmac.new(secret_key.encode("utf-8"), token_id.encode("utf-8"), hashlib.sha512).digest()


@dataclass(frozen=True, slots=True)
class TokenOutcome:
    """A token request's result: an error (NONE on success) and, on success, the token's
    record as it now stands (its expiry)."""

    error: Errors
    token: DelegationTokenRecord | None = None
    expiry_ms: int = 0
    hmac: bytes = b""
    """A created token's HMAC."""


class DelegationTokenControlManager:
    """Tokens by id, each as its latest record, in the order first issued."""

    def __init__(self) -> None:
        self.tokens: dict[str, DelegationTokenRecord] = {}

    def replay(self, message: Message) -> None:
        """Replay a DelegationTokenRecord (issue or renewal) or a RemoveDelegationTokenRecord
        (a removal of a token not held changes nothing, as in Kafka)."""
        if isinstance(message, DelegationTokenRecord):
            self.tokens[message.token_id] = message
        elif isinstance(message, RemoveDelegationTokenRecord):
            self.tokens.pop(message.token_id, None)

    def snapshot_records(self) -> list[Record]:
        """Every token as its DelegationTokenRecord (``DelegationTokenControlManager.write``)."""
        return [(record, 0) for record in self.tokens.values()]

    # ------------------------------------------------------------------ requests

    @staticmethod
    def _refused(settings: TokenSettings, metadata_version: int) -> Errors | None:
        if not settings.secret_key:
            return Errors.DELEGATION_TOKEN_AUTH_DISABLED
        if metadata_version < DELEGATION_TOKEN_LEVEL:
            return Errors.UNSUPPORTED_VERSION
        return None

    def create(
        self, *, owner: str, requester: str, renewers: Sequence[str], max_lifetime_ms: int, now_ms: int,
        settings: TokenSettings, metadata_version: int, rng: random.Random,
    ) -> tuple[list[Record], TokenOutcome]:
        """CreateDelegationToken (``DelegationTokenControlManager.createDelegationToken``)."""
        refused = self._refused(settings, metadata_version)
        if refused is not None:
            return [], TokenOutcome(refused)
        lifetime = settings.max_lifetime_ms if max_lifetime_ms <= 0 else min(settings.max_lifetime_ms, max_lifetime_ms)
        max_ms = _sum(now_ms, lifetime)
        expiry_ms = min(max_ms, _sum(now_ms, settings.expiry_time_ms))
        if any(not renewer.startswith("User:") for renewer in renewers):
            return [], TokenOutcome(Errors.INVALID_PRINCIPAL_TYPE)
        token_id = str(Uuid.random(rng))
        while token_id in self.tokens:
            token_id = str(Uuid.random(rng))
        record = DelegationTokenRecord(
            owner=owner, requester=requester, renewers=list(renewers), issue_timestamp=now_ms, max_timestamp=max_ms,
            expiration_timestamp=expiry_ms, token_id=token_id,
        )
        assert settings.secret_key
        return [(record, 0)], TokenOutcome(Errors.NONE, record, expiry_ms, token_hmac(settings.secret_key, token_id))

    def _find(self, settings: TokenSettings, token_hmac_bytes: bytes) -> DelegationTokenRecord | None:
        assert settings.secret_key
        for record in self.tokens.values():
            if hmac.compare_digest(token_hmac(settings.secret_key, record.token_id), token_hmac_bytes):
                return record
        return None

    def _target(
        self, settings: TokenSettings, metadata_version: int, token_hmac_bytes: bytes
    ) -> DelegationTokenRecord | TokenOutcome:
        """The token a renewal or expiry names, or the refusal: disabled, an old
        metadata.version, or DELEGATION_TOKEN_NOT_FOUND."""
        refused = self._refused(settings, metadata_version)
        if refused is not None:
            return TokenOutcome(refused)
        token = self._find(settings, token_hmac_bytes)
        return TokenOutcome(Errors.DELEGATION_TOKEN_NOT_FOUND) if token is None else token

    def renew(
        self, *, token_hmac_bytes: bytes, period_ms: int, principal: str, now_ms: int, settings: TokenSettings,
        metadata_version: int,
    ) -> tuple[list[Record], TokenOutcome]:
        """RenewDelegationToken (``DelegationTokenControlManager.renewDelegationToken``)."""
        token = self._target(settings, metadata_version, token_hmac_bytes)
        if isinstance(token, TokenOutcome):
            return [], token
        if _expired(token, now_ms):
            return [], TokenOutcome(Errors.DELEGATION_TOKEN_EXPIRED)
        if not _may_renew(token, principal):
            return [], TokenOutcome(Errors.DELEGATION_TOKEN_OWNER_MISMATCH)
        renew = settings.expiry_time_ms if period_ms <= 0 else min(settings.expiry_time_ms, period_ms)
        expiry_ms = min(token.max_timestamp, now_ms + renew)
        record = _with_expiry(token, expiry_ms)
        return [(record, 0)], TokenOutcome(Errors.NONE, record, expiry_ms)

    def expire(
        self, *, token_hmac_bytes: bytes, period_ms: int, principal: str, now_ms: int, settings: TokenSettings,
        metadata_version: int,
    ) -> tuple[list[Record], TokenOutcome]:
        """ExpireDelegationToken (``DelegationTokenControlManager.expireDelegationToken``)."""
        token = self._target(settings, metadata_version, token_hmac_bytes)
        if isinstance(token, TokenOutcome):
            return [], token
        if not _may_renew(token, principal):
            return [], TokenOutcome(Errors.DELEGATION_TOKEN_OWNER_MISMATCH)
        if period_ms < 0:  # at once, even a token already expired
            return [(RemoveDelegationTokenRecord(token_id=token.token_id), 0)], TokenOutcome(Errors.NONE, None, now_ms)
        if _expired(token, now_ms):
            return [], TokenOutcome(Errors.DELEGATION_TOKEN_EXPIRED)
        expiry_ms = min(token.max_timestamp, _sum(now_ms, period_ms))
        record = _with_expiry(token, expiry_ms)
        return [(record, 0)], TokenOutcome(Errors.NONE, record, expiry_ms)

    def expired(self, now_ms: int) -> tuple[list[Record], bool]:
        """The removals of tokens whose maximum or expiry has passed, at most
        :data:`MAX_RECORDS_PER_EXPIRATION`, and whether more may be left
        (``DelegationTokenControlManager.sweepExpiredDelegationTokens``)."""
        records: list[Record] = []
        for token in self.tokens.values():
            if _expired(token, now_ms):
                records.append((RemoveDelegationTokenRecord(token_id=token.token_id), 0))
                if len(records) == MAX_RECORDS_PER_EXPIRATION:
                    return records, True
        return records, False


MAX_RECORDS_PER_EXPIRATION = 1000
"""The most tokens one sweep removes; the next sweep follows at once."""
_LONG_MAX = 2**63 - 1


def _sum(a: int, b: int) -> int:
    """``a + b`` saturating at Java's ``Long.MAX_VALUE``."""
    return min(_LONG_MAX, a + b)


def _expired(token: DelegationTokenRecord, now_ms: int) -> bool:
    return token.max_timestamp < now_ms or token.expiration_timestamp < now_ms


def _may_renew(token: DelegationTokenRecord, principal: str) -> bool:
    return principal == token.owner or principal in token.renewers


def _with_expiry(token: DelegationTokenRecord, expiry_ms: int) -> DelegationTokenRecord:
    return DelegationTokenRecord(
        owner=token.owner, requester=token.requester, renewers=list(token.renewers),
        issue_timestamp=token.issue_timestamp, max_timestamp=token.max_timestamp, expiration_timestamp=expiry_ms,
        token_id=token.token_id,
    )
