"""The stock Kafka releases kwire is tested against, and what each one is.

Reads ``kafka-versions.properties`` of the ``compat/`` directory (:data:`COMPAT_DIR`:
``$KWIRE_COMPAT_DIR``, else the repository's) once, at import: :data:`PINNED_VERSIONS`
(``kafka.versions``), :data:`MATRIX_RELEASES` (``kafka.releases``, the newest patch of every line
since 3.3), :data:`COVER_RELEASES`, and per release its :func:`release_facts` (metadata.version,
static or dynamic quorum per KIP-853, ``--bootstrap-controller`` per KIP-919, Log4j 2 per
KIP-653) and its kafka-tools stand-in (:func:`tools_version`). Fetching a release and locating its
jars and classes is :mod:`tools.stock_fetch`; running them is :mod:`tools.stock_kafka`, which
re-exports every public name here.

Errors: a function taking a ``version`` raises ValueError for a release that is not pinned, and
:class:`KafkaUnavailable` when there are no pins at all.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import javaproperties

__all__ = [
    "CACHE_DIR", "COMPAT_DIR", "COMPAT_DIR_ENV", "COVER_RELEASES", "FETCH_HINT", "MATRIX_RELEASES",
    "PINNED_VERSIONS", "VERSIONS_FILE", "KafkaUnavailable", "ReleaseFacts", "release_facts",
    "tools_version", "version_tuple",
]


class KafkaUnavailable(RuntimeError):
    """Java or a pinned release's jars are not available on this machine."""


COMPAT_DIR_ENV = "KWIRE_COMPAT_DIR"
"""The environment variable that names the ``compat/`` directory (pins and jar cache)."""


def _compat_dir() -> Path:
    override = os.environ.get(COMPAT_DIR_ENV, "").strip()
    if override:
        return Path(override).expanduser().resolve()
    return Path(__file__).resolve().parent.parent / "compat"


COMPAT_DIR = _compat_dir()
"""The ``compat/`` directory this module reads: ``$KWIRE_COMPAT_DIR``, else the repository's."""
VERSIONS_FILE = COMPAT_DIR / "kafka-versions.properties"
CACHE_DIR = COMPAT_DIR / ".cache"
FETCH_HINT = "run `make compat-jars` (bash compat/fetch-kafka.sh)"


def _properties() -> dict[str, str]:
    with VERSIONS_FILE.open(encoding="utf-8") as fh:
        return dict(javaproperties.load(fh))


def _pinned() -> tuple[str, ...]:
    raw = _properties().get("kafka.versions", "")
    versions = tuple(v.strip() for v in raw.split(",") if v.strip())
    if not versions:
        raise RuntimeError(f"kafka.versions is empty in {VERSIONS_FILE}")
    return versions


PINNED_VERSIONS: tuple[str, ...] = _pinned() if VERSIONS_FILE.is_file() else ()
"""The Kafka releases ``make test`` fetches and the compat tests run against by default, oldest
first (``kafka.versions``); empty when there is no ``kafka-versions.properties`` (see the module
docstring)."""


def _matrix() -> tuple[str, ...]:
    raw = _properties().get("kafka.releases", "")
    listed = tuple(v.strip() for v in raw.split(",") if v.strip())
    return tuple(sorted(set(listed) | set(PINNED_VERSIONS), key=version_tuple))


def version_tuple(version: str) -> tuple[int, ...]:
    """``"4.4.0"`` -> ``(4, 4, 0)``, for comparisons such as ``version_tuple(v) >= (4, 3)``."""
    return tuple(int(part) for part in version.split("."))


MATRIX_RELEASES: tuple[str, ...] = _matrix() if VERSIONS_FILE.is_file() else ()
"""The release matrix (``kafka.releases``, with :data:`PINNED_VERSIONS`): the newest patch of
every Kafka line since 3.3, oldest first. A release outside :data:`PINNED_VERSIONS` is fetched on
demand (:func:`ensure_fetched`)."""


COVER_RELEASES: tuple[str, ...] = tuple(
    v.strip() for v in (_properties().get("kafka.cover.releases", "") if VERSIONS_FILE.is_file() else "").split(",")
    if v.strip()
)
"""The releases of the matrix outside :data:`PINNED_VERSIONS` that ``make test`` uses
(``kafka.cover.releases``): ``make compat-jars`` fetches them, and their class data sharing
archives are made up front with the pinned releases'."""


@dataclass(frozen=True)
class ReleaseFacts:
    """What a stock release of the matrix needs from a quorum and the harness.

    ``metadata_version``: the newest metadata.version of its line (``MetadataVersion`` at the
    release's tag), the ``--release-version`` its quorum is formatted at. ``dynamic_quorum``:
    KIP-853 (kraft.version 1, ``controller.quorum.bootstrap.servers``, ``--standalone`` and
    ``--initial-controllers``) from 3.9; before it a quorum is static
    (``controller.quorum.voters``). ``bootstrap_controller``: its admin tools talk to controllers
    directly (``--bootstrap-controller``, KIP-919) from 3.7; before, only through a broker.
    ``log4j2``: Log4j 2 (KIP-653) from 4.0, configured by ``log4j2.properties``; before, Log4j
    1.x / reload4j with ``log4j.properties``. ``tools_version``: the release whose kafka-tools
    stand in (see :func:`tools_version`)."""

    version: str
    metadata_version: str
    dynamic_quorum: bool
    bootstrap_controller: bool
    log4j2: bool
    tools_version: str

    @property
    def release_version(self) -> str:
        """The ``--release-version`` of its line, ``"3.6"`` for 3.6.2."""
        return ".".join(self.version.split(".")[:2])


def release_facts(version: str) -> ReleaseFacts:
    """The :class:`ReleaseFacts` of a release of the matrix. Raises ValueError for a release
    that is not pinned or has no ``kafka.<version>.metadata.version``."""
    _check_pinned(version)
    level = _properties().get(f"kafka.{version}.metadata.version", "").strip()
    if not level:
        raise ValueError(f"kafka.{version}.metadata.version is missing from {VERSIONS_FILE}")
    v = version_tuple(version)
    return ReleaseFacts(version, level, dynamic_quorum=v >= (3, 9), bootstrap_controller=v >= (3, 7),
                        log4j2=v >= (4,), tools_version=tools_version(version))


def _check_pinned(version: str) -> None:
    if not VERSIONS_FILE.is_file():
        raise KafkaUnavailable(
            f"no Kafka versions are pinned here: {VERSIONS_FILE} is missing (set "
            f"{COMPAT_DIR_ENV} to the compat/ directory of a kwire checkout)"
        )
    if version not in MATRIX_RELEASES:
        raise ValueError(f"Kafka {version} is not pinned in {VERSIONS_FILE} ({MATRIX_RELEASES})")

def tools_version(version: str) -> str:
    """The release whose kafka-tools classes run for ``version``: ``version`` itself unless
    kafka-versions.properties names a stand-in (``kafka.<version>.tools.version``). Raises
    ValueError for a release that is not pinned (in :data:`MATRIX_RELEASES`)."""
    _check_pinned(version)
    return _properties().get(f"kafka.{version}.tools.version", version).strip() or version
