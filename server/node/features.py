"""The finalized features, as the node reads them from committed metadata records.

A controller's finalized features (``FeaturesImage``) are the levels of the
FeatureLevelRecords committed to the metadata log, starting from the latest snapshot loaded.
:class:`FinalizedFeatureLevels` keeps them for ApiVersions v3+ (FinalizedFeatures and
FinalizedFeaturesEpoch), reading each record's api key before decoding it, since almost no
committed record is a FeatureLevelRecord.
"""

from __future__ import annotations

from collections.abc import Iterable

from kwire.wire import read_uvarint
from messages.generated.api_versions_response import FinalizedFeatureKey
from messages.generated.feature_level_record import FeatureLevelRecord
from messages.metadata import decode_record
from server.net import FinalizedFeatures
from storage.bootstrap import KRAFT_VERSION_FEATURE

__all__ = ["FinalizedFeatureLevels"]


class FinalizedFeatureLevels:
    """``{feature name: level}`` from committed FeatureLevelRecords (level 0 = not finalized)."""

    def __init__(self) -> None:
        self.levels: dict[str, int] = {}

    def reset(self, record_values: Iterable[bytes | None]) -> None:
        """Start again from a snapshot whose data records' values are ``record_values``."""
        self.levels = {}
        for value in record_values:
            self.track(value)

    def track(self, value: bytes | None) -> None:
        """Take the level of one metadata record value if it is a FeatureLevelRecord."""
        # the frame is (frame version, api key, version) varints: peek at the api key before
        # decoding a whole record that cannot be a FeatureLevelRecord
        if value is None or len(value) < 2:
            return
        api_key = value[1] if value[1] < 0x80 else read_uvarint(value, 1)[0]
        if api_key != FeatureLevelRecord.API_KEY:
            return
        message, _ = decode_record(value)
        if isinstance(message, FeatureLevelRecord):
            self.levels[message.name] = message.feature_level

    def finalized(self, high_watermark: int, kraft_version: int) -> FinalizedFeatures:
        """What ApiVersions reports: the finalized levels (kraft.version from the quorum's
        own state, since it lives in control records), and as the epoch the offset of the last
        committed record (high watermark - 1), or -1 while nothing is finalized."""
        levels = {name: level for name, level in self.levels.items() if level > 0}
        if kraft_version > 0:
            levels[KRAFT_VERSION_FEATURE] = kraft_version
        epoch = high_watermark - 1 if levels else -1
        return FinalizedFeatures(
            epoch,
            [
                FinalizedFeatureKey(name=name, max_version_level=level, min_version_level=level)
                for name, level in sorted(levels.items())
            ],
        )
