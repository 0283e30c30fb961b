"""Delegation tokens (server.controller.delegation_tokens) where the differential test against a
stock controller (compat/test_security_rpcs.py) does not reach: tokens disabled, old
metadata.versions, expired tokens, the sweep, and times near Java's Long.MAX_VALUE."""

from __future__ import annotations

import random

from kwire.errors import Errors
from server.controller.delegation_tokens import (
    DELEGATION_TOKEN_LEVEL,
    DelegationTokenControlManager,
    TokenSettings,
    token_hmac,
)

ON = TokenSettings(secret_key="s", max_lifetime_ms=10_000, expiry_time_ms=1_000)
NOW = 1_000_000


def _issued(image: DelegationTokenControlManager, settings: TokenSettings = ON, now_ms: int = NOW) -> bytes:
    records, outcome = image.create(owner="User:a", requester="User:a", renewers=["User:b"], max_lifetime_ms=-1,
                                    now_ms=now_ms, settings=settings, metadata_version=DELEGATION_TOKEN_LEVEL,
                                    rng=random.Random(3))
    for record, _ in records:
        image.replay(record)
    assert outcome.token is not None and outcome.hmac == token_hmac("s", outcome.token.token_id)
    return outcome.hmac


def test_without_a_secret_key_tokens_are_disabled_before_any_version_check() -> None:
    _, outcome = DelegationTokenControlManager().create(
        owner="User:a", requester="User:a", renewers=[], max_lifetime_ms=-1, now_ms=NOW, settings=TokenSettings(),
        metadata_version=DELEGATION_TOKEN_LEVEL - 1, rng=random.Random(1))
    assert outcome.error == Errors.DELEGATION_TOKEN_AUTH_DISABLED
    _, outcome = DelegationTokenControlManager().create(
        owner="User:a", requester="User:a", renewers=[], max_lifetime_ms=-1, now_ms=NOW, settings=ON,
        metadata_version=DELEGATION_TOKEN_LEVEL - 1, rng=random.Random(1))
    assert outcome.error == Errors.UNSUPPORTED_VERSION


def test_an_expired_token_cannot_be_renewed_but_can_be_ended_and_is_swept() -> None:
    image = DelegationTokenControlManager()
    token = _issued(image)
    later = NOW + ON.expiry_time_ms + 1
    kwargs = {"token_hmac_bytes": token, "now_ms": later, "settings": ON, "metadata_version": DELEGATION_TOKEN_LEVEL}
    assert image.renew(period_ms=1, principal="User:x", **kwargs)[1].error == Errors.DELEGATION_TOKEN_EXPIRED  # type: ignore[arg-type]
    assert image.expire(period_ms=5, principal="User:x", **kwargs)[1].error == Errors.DELEGATION_TOKEN_OWNER_MISMATCH  # type: ignore[arg-type]
    assert image.expire(period_ms=5, principal="User:b", **kwargs)[1].error == Errors.DELEGATION_TOKEN_EXPIRED  # type: ignore[arg-type]
    removal, outcome = image.expire(period_ms=-1, principal="User:a", **kwargs)  # type: ignore[arg-type]
    assert outcome.error == Errors.NONE and outcome.expiry_ms == later and len(removal) == 1
    swept, more = image.expired(later)
    assert [type(r).__name__ for r, _ in swept] == ["RemoveDelegationTokenRecord"] and not more
    assert image.expired(NOW) == ([], False)


def test_a_sweep_removes_a_thousand_tokens_at_a_time() -> None:
    image = DelegationTokenControlManager()
    for i in range(1001):
        _issued(image, now_ms=NOW + i)
    swept, more = image.expired(NOW + 100_000)
    assert len(swept) == 1000 and more


def test_lifetimes_saturate_at_javas_largest_long() -> None:
    huge = TokenSettings(secret_key="s", max_lifetime_ms=2**63 - 1, expiry_time_ms=2**63 - 1)
    image = DelegationTokenControlManager()
    _, outcome = image.create(owner="User:a", requester="User:a", renewers=[], max_lifetime_ms=-1, now_ms=NOW,
                              settings=huge, metadata_version=DELEGATION_TOKEN_LEVEL, rng=random.Random(1))
    assert outcome.token is not None and outcome.token.max_timestamp == outcome.token.expiration_timestamp == 2**63 - 1
