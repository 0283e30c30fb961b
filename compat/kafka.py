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
    PINNED_VERSIONS,
    SERVER_JVM_FLAGS,
    TOOL_CLASSES,
    TOOL_JVM_FLAGS,
    VERSIONS_FILE,
    KafkaCommandError,
    KafkaUnavailable,
    classpath,
    dump_log_segments_class,
    has_class,
    jars,
    java_command,
    java_executable,
    kafka_home,
    kafka_jar,
    lib_dir,
    logging_config,
    logging_flags,
    run_kafka_class,
    run_tool,
    start_kafka_class,
    tool_class,
    tool_release,
    tools_version,
    version_tuple,
)

__all__ = [
    "CACHE_DIR", "COMMON_JVM_FLAGS", "COMPAT_DIR", "FETCH_HINT", "FETCH_SCRIPT", "PINNED_VERSIONS",
    "REPO_DIR", "SERVER_JVM_FLAGS", "TOOL_CLASSES", "TOOL_JVM_FLAGS", "VERSIONS_FILE",
    "KafkaCommandError", "KafkaUnavailable", "classpath", "dump_log_segments_class", "has_class",
    "in_ci", "java_command", "java_executable", "jars", "kafka_home", "kafka_jar", "kafka_problem",
    "lib_dir", "logging_config", "logging_flags", "oracle_dir", "require_kafka", "run_kafka_class",
    "run_tool", "start_kafka_class", "stop_processes", "tool_class", "tool_release", "tools_version",
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
