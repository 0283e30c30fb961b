"""The stock Kafka releases kwire is checked against, and how to run their classes.

The releases are pinned in ``compat/kafka-versions.properties`` and fetched from Maven Central by
``compat/fetch-kafka.sh`` (``make compat-jars``) into ``compat/.cache/kafka-<version>/``. Finding
and running them (pins, classpaths, ``java`` command lines, stock tools and controllers) is
:mod:`tools.stock_kafka`, installed with kwire so that the benchmarks can use it too; this module
re-exports it (and :func:`tools.local_cluster.stop_processes`, for the nodes a test started) for
the tests and adds what only the harness needs: the codec oracle's directory, and
:func:`require_kafka`, which fails a test under CI and skips it elsewhere when Java, the jars or
the oracle are missing.

Typical use from a test::

    from compat.kafka import require_kafka, run_tool

    def test_dump(tmp_path):
        require_kafka("4.4.0")
        out = run_tool("4.4.0", "dump-log", ["--files", str(segment)]).stdout

or through the fixtures of ``compat/conftest.py`` (``each_kafka``, ``newest_kafka``,
``kafka_version``) and the helpers of ``compat/harness.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

from tools.local_cluster import stop_processes
from tools.stock_kafka import (
    CACHE_DIR,
    COMMON_JVM_FLAGS,
    FETCH_HINT,
    MATRIX_RELEASES,
    PINNED_VERSIONS,
    SERVER_JVM_FLAGS,
    TOOL_CLASSES,
    TOOL_JVM_FLAGS,
    VERSIONS_FILE,
    KafkaCommandError,
    KafkaUnavailable,
    ReleaseFacts,
    classpath,
    dump_log_segments_class,
    ensure_fetched,
    has_class,
    jars,
    java_command,
    java_executable,
    kafka_home,
    kafka_jar,
    lib_dir,
    logging_config,
    logging_flags,
    release_facts,
    run_kafka_class,
    run_tool,
    start_kafka_class,
    tool_class,
    tool_release,
    tools_version,
    version_tuple,
)

__all__ = [
    "CACHE_DIR",
    "COMMON_JVM_FLAGS",
    "COMPAT_DIR",
    "FETCH_HINT",
    "FETCH_SCRIPT",
    "MATRIX_RELEASES",
    "PINNED_VERSIONS",
    "RELEASE_MATRIX_ENV",
    "REPO_DIR",
    "SERVER_JVM_FLAGS",
    "TOOL_CLASSES",
    "TOOL_JVM_FLAGS",
    "VERSIONS_FILE",
    "KafkaCommandError",
    "KafkaUnavailable",
    "ReleaseFacts",
    "classpath",
    "dump_log_segments_class",
    "ensure_fetched",
    "has_class",
    "in_ci",
    "jars",
    "java_command",
    "java_executable",
    "kafka_home",
    "kafka_jar",
    "kafka_problem",
    "lib_dir",
    "logging_config",
    "logging_flags",
    "matrix_releases",
    "oracle_dir",
    "release_facts",
    "require_kafka",
    "require_release",
    "run_kafka_class",
    "run_tool",
    "start_kafka_class",
    "stop_processes",
    "tool_class",
    "tool_release",
    "tools_version",
    "version_tuple",
]

COMPAT_DIR = Path(__file__).resolve().parent
REPO_DIR = COMPAT_DIR.parent
FETCH_SCRIPT = COMPAT_DIR / "fetch-kafka.sh"


def oracle_dir(version: str) -> Path:
    """The compiled codec oracle's class directory for ``version``."""
    return kafka_home(version) / "oracle"


# -- availability -----------------------------------------------------------------------------

def in_ci() -> bool:
    """Whether this is a CI run (``CI=true``), where compat tests must run and never skip."""
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def kafka_problem(version: str | None = None) -> str | None:
    """Why Kafka ``version`` (default: every pinned release) cannot run here, or None."""
    try:
        java_executable()
    except KafkaUnavailable as exc:
        return str(exc)
    for v in [version] if version else PINNED_VERSIONS:
        home = kafka_home(v)
        if not (home / "lib.stamp").is_file() or not jars(v):
            return f"Kafka {v} jars are not under {home / 'lib'}; {FETCH_HINT}"
        if not (home / "oracle.stamp").is_file():
            return f"the codec oracle for Kafka {v} is not built; {FETCH_HINT}"
        if tools_version(v) != v and (
            not (home / "tools-lib.stamp").is_file() or not jars(v, tools=True)
        ):
            return (f"the Kafka {tools_version(v)} tools for {v} are not under "
                    f"{home / 'tools-lib'}; {FETCH_HINT}")
        if not logging_config(v).is_file():
            return f"{logging_config(v)} is missing; {FETCH_HINT}"
    return None


def require_kafka(version: str | None = None) -> None:
    """Make the calling test depend on Kafka ``version`` (default: every pinned release).

    When Java or the jars are missing, the test fails under CI (``CI=true``) and is skipped, with
    the reason and the fix, elsewhere.
    """
    import pytest

    problem = kafka_problem(version)
    if problem is None:
        return
    if in_ci():
        pytest.fail(f"compat tests must run in CI, but {problem}", pytrace=False)
    pytest.skip(problem)


def require_release(version: str) -> None:
    """Make the calling test depend on ``version``, a release of the matrix
    (:data:`MATRIX_RELEASES`): fetched on demand into the cache (``compat/fetch-kafka.sh
    VERSION``) when it is not there. When Java or the fetch fails, the test fails under CI and
    is skipped, with the script's words, elsewhere."""
    import pytest

    try:
        java_executable()
        ensure_fetched(version)
    except KafkaUnavailable as exc:
        if in_ci():
            pytest.fail(f"compat tests must run in CI, but {exc}", pytrace=False)
        pytest.skip(str(exc))


RELEASE_MATRIX_ENV = "KWIRE_RELEASE_MATRIX"
"""``all`` (``make nightly``) or comma-separated releases: which releases of the matrix
``compat/test_release_matrix.py`` runs; unset, that module is not collected."""


def matrix_releases() -> tuple[str, ...]:
    """The releases :data:`RELEASE_MATRIX_ENV` names (``all``: every one of
    :data:`MATRIX_RELEASES`), oldest first; empty when it is unset. Raises ValueError for a
    release that is not pinned."""
    wanted = os.environ.get(RELEASE_MATRIX_ENV, "").strip()
    if not wanted:
        return ()
    if wanted == "all":
        return MATRIX_RELEASES
    chosen = tuple(v.strip() for v in wanted.split(",") if v.strip())
    unknown = [v for v in chosen if v not in MATRIX_RELEASES]
    if unknown:
        raise ValueError(f"${RELEASE_MATRIX_ENV} names {unknown}, not in kafka.releases {MATRIX_RELEASES}")
    return tuple(sorted(chosen, key=version_tuple))


FULL_MATRIX_ENV = "KWIRE_COMPAT_FULL_MATRIX"
"""With ``1`` (``make nightly``), :func:`release_matrix` gives every pair."""


def release_matrix(variants: tuple[str, ...]) -> list[object]:
    """``pytest.param(release, variant)`` for a test that runs each pinned release against each
    of ``variants`` (ids ``kafka-<release>-<variant>``).

    With ``$KWIRE_COMPAT_FULL_MATRIX=1`` (:data:`FULL_MATRIX_ENV`, ``make nightly``): every
    pair. Otherwise, for the time ``make test`` has, a cover of both: each release with one
    variant and each variant with one release, the newest release with the first variant (two
    releases and two variants: two runs instead of four)."""
    import pytest

    if os.environ.get(FULL_MATRIX_ENV) == "1":
        pairs = [(r, v) for r in PINNED_VERSIONS for v in variants]
    else:
        newest_first = PINNED_VERSIONS[::-1]
        count = max(len(newest_first), len(variants))
        pairs = [(newest_first[i % len(newest_first)], variants[i % len(variants)]) for i in range(count)]
    return [pytest.param(r, v, id=f"kafka-{r}-{v}") for r, v in pairs]


def newest_or_every_release() -> list[object]:
    """``pytest.param(release)`` (id ``kafka-<release>``) for the ``kafka_version`` of a test
    whose older-release runs only ``make nightly`` has time for: every pinned release with
    ``$KWIRE_COMPAT_FULL_MATRIX=1`` (:data:`FULL_MATRIX_ENV`), else the newest."""
    import pytest

    chosen = PINNED_VERSIONS if os.environ.get(FULL_MATRIX_ENV) == "1" else PINNED_VERSIONS[-1:]
    return [pytest.param(r, id=f"kafka-{r}") for r in chosen]
