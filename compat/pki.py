"""The test public key infrastructure of the TLS compat tests: :func:`tools.pki.make_pki` (it
lives in the installed package because the TLS commit-path bench makes one too)."""

from __future__ import annotations

from tools.pki import make_pki

__all__ = ["make_pki"]
