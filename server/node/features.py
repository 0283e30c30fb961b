"""ApiVersions' finalized features (v3+), from the controller's replayed feature levels.

A controller's finalized features (``FeaturesImage``) are the levels of the FeatureLevelRecords
committed to the metadata log, starting from the latest snapshot loaded
(:class:`server.controller.controller.ControlManagers` replays them), plus kraft.version,
which lives in the quorum's control records.
"""

from __future__ import annotations

from collections.abc import Mapping

from messages.generated.api_versions_response import FinalizedFeatureKey
from server.net import FinalizedFeatures
from storage.features import KRAFT_VERSION_FEATURE

__all__ = ["finalized_features"]


def finalized_features(
    levels: Mapping[str, int], high_watermark: int, kraft_version: int
) -> FinalizedFeatures:
    """What ApiVersions reports for feature ``levels`` (name -> level, 0 = not finalized): the
    levels above 0 with kraft.version from the quorum's own state, and as the epoch the offset
    of the last committed record (high watermark - 1), or -1 while nothing is finalized."""
    finalized = {name: level for name, level in levels.items() if level > 0}
    if kraft_version > 0:
        finalized[KRAFT_VERSION_FEATURE] = kraft_version
    epoch = high_watermark - 1 if finalized else -1
    return FinalizedFeatures(
        epoch,
        [
            FinalizedFeatureKey(name=name, max_version_level=level, min_version_level=level)
            for name, level in sorted(finalized.items())
        ],
    )
