"""Stock Apache Kafka from the pinned Maven Central jars: which releases, their classpaths, and
how to run their classes (controllers, ``kafka-*.sh`` tools) the way Kafka's bin scripts do.

Installed with ``tools`` so that the benchmarks (``tools.bench``) can run stock Kafka beside
kwire; the compat harness (``compat/kafka.py``, not installed) imports it rather than keeping a
copy. Nothing here is pinned: the releases are pinned only in ``kafka-versions.properties`` of
the repository's ``compat/`` directory, which ``compat/fetch-kafka.sh`` (``make compat-jars``)
also reads, and fetched into ``compat/.cache/kafka-<version>/``:

    lib/        the runtime classpath (kafka_2.13, kafka-tools, kafka-clients, kafka-metadata,
                kafka-raft, kafka-server-common, dependencies, the release's logging binding)
    tools-lib/  only for a release whose kafka-tools is not on Maven Central: the complete
                classpath of the release named by ``kafka.<version>.tools.version``, whose
                kafka-tools classes (DumpLogSegments from 4.3, MetadataQuorumCommand) stand in
    config/     log4j.properties (3.x) and log4j2.properties (4.x): WARN and above, on stderr
    oracle/     the compiled Java codec oracle (compat only, see compat/oracle.py) and tool
                runner (:data:`TOOL_RUNNER_ENV`); for a matrix release outside
                :data:`PINNED_VERSIONS`, the tool runner only

Two sets of releases: :data:`PINNED_VERSIONS` (``kafka.versions``), what the compat tests and
benchmarks run against and ``make compat-jars`` fetches; :data:`MATRIX_RELEASES`
(``kafka.releases``), the newest patch of every line since 3.3, with each one's
:func:`release_facts` (metadata.version, static or dynamic quorum, ``--bootstrap-controller``,
logging flavour). A matrix release is fetched on demand by :func:`ensure_fetched`.

Where ``compat/`` is: the directory named by the environment variable ``KWIRE_COMPAT_DIR``
(:data:`COMPAT_DIR_ENV`) when set, else ``compat/`` beside the directory holding this package,
which is the repository's in a checkout or an editable install (``pip install -e .``). It is
read once, at import. An installed copy that is not editable has no ``compat/`` beside it: set
``KWIRE_COMPAT_DIR`` to a checkout's ``compat/`` directory, or every function that needs a
release raises :class:`KafkaUnavailable` saying so (importing this module never fails for it).

Errors: every function taking a ``version`` raises ValueError for a release that is not pinned
(in neither set), and KafkaUnavailable when there are no pins or when Java or the jars it needs are missing.

:func:`run_tool` and :func:`tool_class` look a tool up on the release's own classpath first and
then on its tools classpath; :func:`tool_release` says which release actually runs it.

The module is in three: what the releases are (pins, :func:`release_facts`) is
:mod:`tools.stock_releases`, fetching them and locating their jars and tool classes is
:mod:`tools.stock_fetch`, and this module runs them (JVM flags, class data sharing archives,
:func:`run_kafka_class`). It re-exports the other two's public names (``__all__``).

Typical use::

    from tools.stock_kafka import run_tool, start_kafka_class

    out = run_tool("4.4.0", "dump-log", ["--files", str(segment)]).stdout
    proc = start_kafka_class("4.4.0", "kafka.Kafka", [str(properties)])  # terminate it yourself
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from tools import tool_runner
from tools.stock_fetch import (  # re-exported below
    FETCH_SCRIPT,
    TOOL_CLASSES,
    _locate_tool,
    classpath,
    dump_log_segments_class,
    ensure_fetched,
    has_class,
    is_fetched,
    jars,
    kafka_home,
    kafka_jar,
    lib_dir,
    logging_config,
    logging_flags,
    tool_class,
    tool_release,
)
from tools.stock_kafka_cds import CDS_QUIET_FLAGS, Training, make_class_data_archive
from tools.stock_releases import (  # re-exported below
    CACHE_DIR,
    COMPAT_DIR,
    COMPAT_DIR_ENV,
    COVER_RELEASES,
    FETCH_HINT,
    MATRIX_RELEASES,
    PINNED_VERSIONS,
    VERSIONS_FILE,
    KafkaUnavailable,
    ReleaseFacts,
    release_facts,
    tools_version,
    version_tuple,
)

# This module runs stock Kafka (JVM flags, class data sharing archives, tools); what the releases
# are (tools.stock_releases) and where their jars and classes are (tools.stock_fetch) are
# re-exported so that the many callers that import them from here keep working.
__all__ = [
    "CDS_ENV",
    "COMMON_JVM_FLAGS",
    "EXTRA_JVM_FLAGS_ENV",
    "SERVER_JVM_FLAGS",
    "SUBPROCESS_ONLY",
    "TOOL_JVM_FLAGS",
    "TOOL_RUNNER_ENV",
    "KafkaCommandError",
    "class_data_archive",
    "java_command",
    "java_executable",
    "make_class_data_archives",
    "run_kafka_class",
    "run_tool",
    "start_kafka_class",
    "FETCH_SCRIPT",
    "TOOL_CLASSES",
    "classpath",
    "dump_log_segments_class",
    "ensure_fetched",
    "has_class",
    "is_fetched",
    "jars",
    "kafka_home",
    "kafka_jar",
    "lib_dir",
    "logging_config",
    "logging_flags",
    "tool_class",
    "tool_release",
    "CACHE_DIR",
    "COMPAT_DIR",
    "COMPAT_DIR_ENV",
    "COVER_RELEASES",
    "FETCH_HINT",
    "MATRIX_RELEASES",
    "PINNED_VERSIONS",
    "VERSIONS_FILE",
    "KafkaUnavailable",
    "ReleaseFacts",
    "release_facts",
    "tools_version",
    "version_tuple",
]

# JVM settings. Tools are short-lived: a small serial-GC heap and the C1 compiler start fastest.
# A server gets Kafka's own defaults from kafka-run-class.sh / kafka-server-start.sh, scaled to
# the small machines the tests run on.
TOOL_JVM_FLAGS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
SERVER_JVM_FLAGS = (
    "-Xmx512m", "-Xms512m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
)
COMMON_JVM_FLAGS = ("-Djava.awt.headless=true", "-XX:-UsePerfData")
EXTRA_JVM_FLAGS_ENV = "KWIRE_KAFKA_JVM_FLAGS"
"""The environment variable whose flags (split on whitespace) every JVM :func:`java_command`
builds gets after its defaults and before its ``jvm_args``. The test runs set it to
``-XX:TieredStopAtLevel=1``: their controllers and brokers live for seconds, which never pay
back C2's compilations (a 4.4.0 controller used 5.5 CPU-s to its first commit with them, 2.8
without)."""


CDS_ENV = "KWIRE_KAFKA_CDS"
"""When this environment variable is set (to anything but ``""`` or ``0``), every JVM
:func:`java_command` builds maps a class data sharing archive of its classpath (JDK dynamic
AppCDS, :func:`class_data_archive`), made on first use by a short training run (see
:func:`tools.stock_kafka_cds.make_class_data_archive`). The test runs set it: loading and verifying classes is about
half of a stock tool run's CPU time (a 4.4.0 StorageTool format took 1.3 CPU-s, 0.75 with the
archive). The JVM ignores an archive that does not fit (another JDK, another classpath), and
the flags keep it from saying so on stdout."""


TOOL_RUNNER_ENV = "KWIRE_KAFKA_TOOL_RUNNER"
"""When this environment variable is set (to anything but ``""`` or ``0``),
:func:`run_kafka_class` (and so :func:`run_tool`) runs a tool's main class in a long-lived JVM
per command line (:mod:`tools.tool_runner`: same JVM flags and classpath, plus the compiled
``kwire.oracle.ToolRunner`` under :func:`kafka_home`'s ``oracle/``) rather than a JVM of its
own, and answers the same ``CompletedProcess``. The test runs set it: they run some 185 tools,
each about a CPU-second of JVM start-up and class loading. Calls that pass ``input``, ``cwd``,
``env``, ``server``, ``jvm_args`` or ``extra_classpath``, and the classes of
:data:`SUBPROCESS_ONLY`, still get a JVM of their own, as does every call when the runner class
has not been built (jars fetched before it existed: ``make compat-jars`` builds it)."""
SUBPROCESS_ONLY = frozenset({
    "kafka.Kafka", "kafka.tools.TestRaftServer",
    "org.apache.kafka.tools.ConsoleProducer", "kafka.tools.ConsoleProducer",
    "org.apache.kafka.tools.consumer.ConsoleConsumer", "kafka.tools.ConsoleConsumer",
    "org.apache.kafka.shell.MetadataShell",
})
"""Main classes :data:`TOOL_RUNNER_ENV` never routes to a runner: servers; the console clients,
which read stdin and end on a signal or their own shutdown hooks; and MetadataShell, whose
snapshot loader reported a fault on a kwire segment once in a runner that had run other tools
(in a test run on two workers), which it has not reported in a JVM of its own."""


def java_executable() -> str:
    """``$JAVA_HOME/bin/java`` when set, else ``java`` on PATH. Raises KafkaUnavailable."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise KafkaUnavailable("no `java` on PATH (install a JDK 17+, or set JAVA_HOME)")
    return found


def java_command(
    version: str,
    main_class: str,
    args: Sequence[str | os.PathLike[str]] = (),
    *,
    server: bool = False,
    jvm_args: Sequence[str] = (),
    extra_classpath: Iterable[str | os.PathLike[str]] = (),
    logs_dir: str | os.PathLike[str] | None = None,
    tools: bool = False,
) -> list[str]:
    """The ``java -cp ... <main_class> <args>`` command line that runs ``main_class`` of
    ``version`` the way Kafka's ``bin/kafka-run-class.sh`` would (heap flags, logging
    configuration, ``kafka.logs.dir``): :data:`SERVER_JVM_FLAGS` with ``server``, else
    :data:`TOOL_JVM_FLAGS`, then the flags of ``$KWIRE_KAFKA_JVM_FLAGS``
    (:data:`EXTRA_JVM_FLAGS_ENV`). ``jvm_args`` come last among the JVM flags, so they override.
    ``tools`` runs from the tools classpath (see :func:`lib_dir`). Raises KafkaUnavailable when
    Java or the jars are missing."""
    flags = list(COMMON_JVM_FLAGS) + list(SERVER_JVM_FLAGS if server else TOOL_JVM_FLAGS)
    flags += logging_flags(version, tools=tools)
    if logs_dir is not None:
        flags.append(f"-Dkafka.logs.dir={logs_dir}")
    flags += os.environ.get(EXTRA_JVM_FLAGS_ENV, "").split()
    if os.environ.get(CDS_ENV, "").strip() not in ("", "0") and not list(extra_classpath):
        archive = class_data_archive(version, tools=tools)
        if not archive.is_file():
            make_class_data_archive(archive, _training(version, tools=tools))
        if archive.is_file():
            flags += [f"-XX:SharedArchiveFile={archive}", *CDS_QUIET_FLAGS]
    flags += list(jvm_args)
    return [
        java_executable(), *flags, "-cp", classpath(version, extra_classpath, tools=tools),
        main_class, *(str(a) for a in args),
    ]


def make_class_data_archives(versions: Sequence[str] = ()) -> list[Path]:
    """Make every class data sharing archive of ``versions`` (default: every pinned release and
    every one of :data:`COVER_RELEASES`) that is missing -- each release's classpath, and its
    stand-in tools classpath where it has one -- one after another, newest release first;
    returns the archives that exist afterwards (:func:`tools.stock_kafka_cds.make_class_data_archive`).
    ``make test`` runs this (``python -m tools.stock_kafka --class-data-archives``) beside the
    test run's start-up, so that the first tests to start a JVM find the archives made rather
    than each waiting for its own training (a minute of worker time on a fresh clone)."""
    made = []
    for version in sorted(versions or PINNED_VERSIONS + COVER_RELEASES, key=version_tuple, reverse=True):
        for tools in (False, True):
            archive = class_data_archive(version, tools=tools)
            if archive in made:
                continue
            make_class_data_archive(archive, _training(version, tools=tools))
            if archive.is_file():
                made.append(archive)
    return made


def _training(version: str, *, tools: bool) -> Training:
    """The training run of ``version``'s classpath (with ``tools``: its tools classpath)."""
    stand_in = tools and tools_version(version) != version
    return Training(
        java=(java_executable(), *COMMON_JVM_FLAGS, *os.environ.get(EXTRA_JVM_FLAGS_ENV, "").split()),
        tool_flags=TOOL_JVM_FLAGS, server_flags=SERVER_JVM_FLAGS, classpath=classpath(version),
        logging=tuple(logging_flags(version)), storage_class=tool_class(version, "storage"),
        dynamic=version_tuple(version) >= (3, 9),
        tools_classpath=classpath(version, tools=True) if stand_in else None,
        tools_logging=tuple(logging_flags(version, tools=True)) if stand_in else (),
    )


def class_data_archive(version: str, *, tools: bool = False) -> Path:
    """Where the class data sharing archive of ``version``'s classpath (with ``tools``: its
    tools classpath) is kept: ``cds/lib.jsa`` or ``cds/tools-lib.jsa`` under
    :func:`kafka_home`."""
    return kafka_home(version) / "cds" / f"{lib_dir(version, tools=tools).name}.jsa"


def run_kafka_class(
    version: str,
    main_class: str,
    args: Sequence[str | os.PathLike[str]] = (),
    *,
    check: bool = True,
    timeout: float = 120.0,
    input: str | None = None,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    server: bool = False,
    jvm_args: Sequence[str] = (),
    extra_classpath: Iterable[str | os.PathLike[str]] = (),
    tools: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run ``main_class`` of Kafka ``version`` to completion and capture its output as text.

    ``check`` raises :class:`KafkaCommandError` (with stdout and stderr) on a non-zero exit;
    ``timeout`` (seconds) raises ``subprocess.TimeoutExpired``. ``env`` is added to the current
    environment; ``tools`` runs from the tools classpath. With ``$KWIRE_KAFKA_TOOL_RUNNER``
    (:data:`TOOL_RUNNER_ENV`) most calls run in a long-lived JVM, with the same result. Raises
    KafkaUnavailable when Java or the jars are missing.
    """
    extra_classpath = list(extra_classpath)
    command = java_command(
        version, main_class, args, server=server, jvm_args=jvm_args,
        extra_classpath=extra_classpath, tools=tools,
    )
    if (input is None and cwd is None and not env and not server and not jvm_args
            and not extra_classpath and main_class not in SUBPROCESS_ONLY):
        runner = _tool_runner_command(version, command)
        if runner is not None:
            answer = tool_runner.run_main(
                runner, main_class, command[len(runner):], display=command, timeout=timeout,
            )
            if answer is not None:
                if check and answer.returncode != 0:
                    raise KafkaCommandError(version, main_class, answer)
                return answer
    full_env = dict(os.environ)
    full_env.update(env or {})
    result = subprocess.run(
        command, input=input, capture_output=True, text=True, timeout=timeout,
        cwd=cwd, env=full_env, check=False,
    )
    if check and result.returncode != 0:
        raise KafkaCommandError(version, main_class, result)
    return result


def _tool_runner_command(version: str, command: Sequence[str]) -> list[str] | None:
    """The command line of the runner for a tool's ``java_command`` line ``command``: the same
    java, flags and classpath with the oracle classes appended (after the jars, so that a class
    data sharing archive of the jars still applies), and :data:`tools.tool_runner.RUNNER_CLASS`
    in place of the tool's main class and arguments. None when :data:`TOOL_RUNNER_ENV` is unset
    or the runner class has not been built."""
    if os.environ.get(TOOL_RUNNER_ENV, "").strip() in ("", "0"):
        return None
    classes = kafka_home(version) / "oracle"
    if not (classes / Path(*tool_runner.RUNNER_CLASS.split("."))).with_suffix(".class").is_file():
        return None
    at = list(command).index("-cp") + 1
    return [*command[:at], command[at] + os.pathsep + str(classes), tool_runner.RUNNER_CLASS]


def start_kafka_class(
    version: str,
    main_class: str,
    args: Sequence[str | os.PathLike[str]] = (),
    *,
    server: bool = True,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    jvm_args: Sequence[str] = (),
    logs_dir: str | os.PathLike[str] | None = None,
    stdout: int | None = subprocess.PIPE,
    stderr: int | None = subprocess.PIPE,
    start_new_session: bool = False,
    prefix: Sequence[str] = (),
    extra_classpath: Iterable[str | os.PathLike[str]] = (),
) -> subprocess.Popen[bytes]:
    """Start a long-running Kafka process (e.g. ``kafka.Kafka controller.properties``, as
    ``kafka-server-start.sh`` does, or ``kafka.tools.TestRaftServer``) with server JVM settings
    and return it; ``stdout``/``stderr`` are ``subprocess`` targets (default: pipes), ``logs_dir``
    becomes ``-Dkafka.logs.dir``. The caller terminates it (``proc.terminate()``) and waits for
    it; ``start_new_session`` keeps it out of the caller's process group (a terminal's Ctrl-C
    then reaches only the caller, which stops it in its own order); ``prefix`` is a command it
    runs under (e.g. ``ip netns exec NS``); ``extra_classpath`` entries go before the release's
    jars (a plug-in's classes). Raises KafkaUnavailable when Java or the jars are missing."""
    command = list(prefix) + java_command(
        version, main_class, args, server=server, jvm_args=jvm_args, logs_dir=logs_dir,
        extra_classpath=extra_classpath,
    )
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.Popen(
        command, cwd=cwd, env=full_env, stdout=stdout, stderr=stderr, start_new_session=start_new_session
    )


class KafkaCommandError(RuntimeError):
    """A Kafka main class exited with a non-zero status: ``version``, ``main_class`` and the
    completed ``result`` (its stdout and stderr, the last 4000 characters of each in the
    message)."""

    def __init__(self, version: str, main_class: str,
                 result: subprocess.CompletedProcess[str]) -> None:
        self.version = version
        self.main_class = main_class
        self.result = result
        super().__init__(
            f"Kafka {version} {main_class} exited with {result.returncode}\n"
            f"--- stdout ---\n{result.stdout[-4000:]}\n--- stderr ---\n{result.stderr[-4000:]}"
        )


# -- classes in the jars --------------------------------------------------------------------

def run_tool(
    version: str, tool: str, args: Sequence[str | os.PathLike[str]] = (), **kwargs: object
) -> subprocess.CompletedProcess[str]:
    """Run one of TOOL_CLASSES (``tool`` as in ``kafka-<tool>.sh``) through
    :func:`run_kafka_class` (same keyword arguments and errors), from whichever classpath holds
    it. Raises KeyError for an unknown tool."""
    main_class, tools = _locate_tool(version, tool)
    return run_kafka_class(version, main_class, args, tools=tools, **kwargs)  # type: ignore[arg-type]


if __name__ == "__main__":
    import argparse

    _parser = argparse.ArgumentParser(prog="python -m tools.stock_kafka",
                                      description="Prepare the pinned stock Kafka releases' JVM runs.")
    _parser.add_argument("--class-data-archives", action="store_true", required=True,
                         help="make every missing class data sharing archive (see make_class_data_archives)")
    _parser.add_argument("versions", nargs="*", help="pinned releases (default: every one)")
    _options = _parser.parse_args()
    for _archive in make_class_data_archives(_options.versions):
        print(_archive)
