"""Property tests of the feature tables (``MetadataVersion``, ``Feature``).

* Every metadata.version is found again by its level and by its name; a release name alone is
  its last IV; any other text is refused.
* "did metadata change between" is a union of steps: over ``a <= b <= c`` it holds for ``(a, c]``
  exactly when it holds for ``(a, b]`` or ``(b, c]``, and never for an empty interval.
* The feature levels formatting picks by default at any metadata.version never go down as the
  version goes up, and always pass the feature validation (their dependencies are met).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.features import (
    FEATURES,
    METADATA_VERSION_FEATURE,
    METADATA_VERSIONS,
    MetadataVersion,
    default_feature_level,
    metadata_changed_between,
    metadata_version_from_level,
    metadata_version_from_string,
    validate_feature_levels,
)
from tests.properties import examples

versions = st.sampled_from(METADATA_VERSIONS)
levels = st.integers(0, METADATA_VERSIONS[-1].level + 2)


@settings(deadline=None, max_examples=examples(60))
@given(mv=versions)
def test_a_metadata_version_is_found_by_its_level_and_its_name(mv: MetadataVersion) -> None:
    assert metadata_version_from_level(mv.level) == mv
    assert metadata_version_from_string(mv.name) == mv
    assert metadata_version_from_string(f" {mv.name} ") == mv
    last = max((v for v in METADATA_VERSIONS if v.release == mv.release), key=lambda v: v.iv)
    assert metadata_version_from_string(mv.release) == last


def test_levels_and_names_are_unique_and_levels_ascend() -> None:
    assert [mv.level for mv in METADATA_VERSIONS] == sorted({mv.level for mv in METADATA_VERSIONS})
    assert len({mv.name for mv in METADATA_VERSIONS}) == len(METADATA_VERSIONS)


@settings(deadline=None, max_examples=examples(100))
@given(text=st.text(alphabet="0123456789.-IVx ", max_size=10))
def test_text_that_names_no_version_is_refused(text: str) -> None:
    known = {mv.name for mv in METADATA_VERSIONS} | {mv.release for mv in METADATA_VERSIONS}
    if text.strip() in known:
        assert metadata_version_from_string(text).name.startswith(text.strip())
    else:
        with pytest.raises(ValueError, match="Unknown release version"):
            metadata_version_from_string(text)


@settings(deadline=None, max_examples=examples(100))
@given(a=levels, b=levels, c=levels)
def test_metadata_changes_between_levels_compose(a: int, b: int, c: int) -> None:
    a, b, c = sorted((a, b, c))
    assert metadata_changed_between(a, c) == (metadata_changed_between(a, b) or metadata_changed_between(b, c))
    assert not metadata_changed_between(a, a)
    assert not metadata_changed_between(c, a)  # (c, a] is empty


@settings(deadline=None, max_examples=examples(60))
@given(low=versions, high=versions)
def test_default_feature_levels_rise_with_the_version_and_validate(low: MetadataVersion, high: MetadataVersion) -> None:
    low, high = sorted((low, high), key=lambda mv: mv.level)
    for name in FEATURES:
        assert default_feature_level(name, low) <= default_feature_level(name, high)
    for mv in (low, high):
        defaults = {name: default_feature_level(name, mv) for name in FEATURES}
        validate_feature_levels({METADATA_VERSION_FEATURE: mv.level, **defaults})
        assert all(level in {v.level for v in FEATURES[n]} for n, level in defaults.items())
