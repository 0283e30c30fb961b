"""Example counts of the property tests, scaled by the loaded Hypothesis profile.

A property test asks for ``examples(n)``: ``n`` examples under Hypothesis's default profile
(``make test``), proportionally more under a profile with a larger ``max_examples`` --
``--hypothesis-profile=nightly`` (conftest.py) runs 20 times as many.
"""

from __future__ import annotations

from hypothesis import settings

DEFAULT_MAX_EXAMPLES = 100
"""Hypothesis's own ``max_examples``: the count of the profile ``make test`` runs under."""


def examples(n: int) -> int:
    """``n`` scaled by the loaded profile's ``max_examples`` against :data:`DEFAULT_MAX_EXAMPLES`
    (at least 1). Read when a test module is imported, after pytest loaded the profile."""
    return max(1, n * settings.default.max_examples // DEFAULT_MAX_EXAMPLES)
