"""A Python client for the Java codec oracle (compat/oracle/src/kwire/oracle/Oracle.java).

One JVM per Kafka release, started once and fed newline-delimited JSON requests. Requests are
pipelined: :meth:`JavaOracle.call_many` writes a whole batch from a helper thread while reading
the answers, so thousands of messages take a few seconds rather than thousands of round trips.

    with JavaOracle("4.4.0") as oracle:
        raw = oracle.encode("VoteRequest", 2, message.to_json(2))      # Kafka's bytes
        data = oracle.decode("VoteRequest", 2, raw)                    # Kafka's JSON form

Message classes are named by spec name (``VoteRequest`` -> ``...message.VoteRequestData``,
``TopicRecord`` -> ``...metadata.TopicRecord``; see compat/jarspecs.py) or fully qualified.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Sequence
from typing import IO, Any

from compat.jarspecs import jar_specs
from compat.kafka import (
    KafkaUnavailable,
    classpath,
    java_executable,
    logging_flags,
    oracle_dir,
)

MAIN_CLASS = "kwire.oracle.Oracle"


class OracleError(RuntimeError):
    """The oracle refused one request (Kafka's classes threw), or the JVM died."""


class JavaOracle:
    """A running codec oracle for one pinned Kafka release. Not thread-safe across calls
    (one batch at a time); close it, or use it as a context manager."""

    def __init__(self, version: str, *, heap: str = "512m") -> None:
        self.version = version
        classes = oracle_dir(version)
        if not (classes / "kwire" / "oracle" / "Oracle.class").is_file():
            raise KafkaUnavailable(
                f"the codec oracle for Kafka {version} is not built; run `make compat-jars`")
        self._stderr: IO[bytes] = tempfile.TemporaryFile()
        command = [
            java_executable(), f"-Xmx{heap}", "-XX:+UseSerialGC", "-XX:-UsePerfData",
            "-Djava.awt.headless=true", *logging_flags(version),
            "-cp", classpath(version, [classes]), MAIN_CLASS,
        ]
        self._proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
        )
        self._lock = threading.Lock()
        try:
            pong = self.call_many([{"op": "ping"}])[0]
            if pong.get("kafka") != version:
                raise OracleError(f"oracle for {version} loaded kafka-clients {pong.get('kafka')}")
        except BaseException:
            self.close()
            raise

    # -- plumbing ---------------------------------------------------------------------------

    def _stderr_tail(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read()[-4000:].decode("utf-8", "replace")

    def call_many(self, requests: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Send every request, return every answer (dicts with ``ok`` and ``hex``/``json`` or
        ``error``), in order. Raises OracleError when the JVM is gone."""
        if not requests:
            return []
        payload = b"".join(
            json.dumps(r, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
            for r in requests
        )
        with self._lock:
            proc = self._proc
            if proc.poll() is not None or proc.stdin is None or proc.stdout is None:
                raise OracleError(f"the Kafka {self.version} oracle has exited:\n"
                                  f"{self._stderr_tail()}")
            stdin, stdout = proc.stdin, proc.stdout
            failure: list[BaseException] = []

            def feed() -> None:
                try:
                    stdin.write(payload)
                    stdin.flush()
                except BaseException as exc:  # reported below, with the JVM's stderr
                    failure.append(exc)

            writer = threading.Thread(target=feed, name=f"oracle-{self.version}-feed",
                                      daemon=True)
            writer.start()
            answers: list[dict[str, Any]] = []
            for _ in requests:
                line = stdout.readline()
                if not line:
                    writer.join(timeout=5)
                    raise OracleError(
                        f"the Kafka {self.version} oracle exited mid-batch "
                        f"({failure or proc.poll()}):\n{self._stderr_tail()}")
                answers.append(json.loads(line))
            writer.join()
            if failure:
                raise OracleError(f"writing to the oracle failed: {failure[0]!r}")
            return answers

    def java_class(self, name: str) -> str:
        """The generated Java class for a spec name; a dotted name is returned as it is."""
        if "." in name:
            return name
        spec = jar_specs(self.version).get(name)
        if spec is None or spec.java_class is None:
            raise OracleError(f"Kafka {self.version} has no generated class for spec {name}")
        return spec.java_class

    # -- codec questions ----------------------------------------------------------------------

    def encode_many(
        self, items: Iterable[tuple[str, int, dict[str, Any]]]
    ) -> list[bytes | OracleError]:
        """For each ``(spec or class, version, Kafka JSON)``: the bytes Kafka writes, or the
        error it raised."""
        requests = [{"op": "encode", "class": self.java_class(name), "version": version,
                     "json": data} for name, version, data in items]
        return [bytes.fromhex(a["hex"]) if a.get("ok") else OracleError(a.get("error"))
                for a in self.call_many(requests)]

    def decode_many(
        self, items: Iterable[tuple[str, int, bytes]]
    ) -> list[dict[str, Any] | OracleError]:
        """For each ``(spec or class, version, bytes)``: Kafka's JSON form of the message its
        class reads from those bytes, or the error it raised. Bytes the class leaves unread are
        an error."""
        requests = [{"op": "decode", "class": self.java_class(name), "version": version,
                     "hex": bytes(data).hex()} for name, version, data in items]
        out: list[dict[str, Any] | OracleError] = []
        for a in self.call_many(requests):
            if not a.get("ok"):
                out.append(OracleError(a.get("error")))
            elif a.get("remaining"):
                out.append(OracleError(f"{a['remaining']} bytes left unread"))
            else:
                out.append(a["json"])
        return out

    def reencode_many(
        self, items: Iterable[tuple[str, int, bytes]]
    ) -> list[bytes | OracleError]:
        """For each ``(spec or class, version, bytes)``: what Kafka's class writes back after
        reading those bytes (it keeps unknown tagged fields), or the error it raised. Bytes the
        class leaves unread are an error."""
        requests = [{"op": "reencode", "class": self.java_class(name), "version": version,
                     "hex": bytes(data).hex()} for name, version, data in items]
        out: list[bytes | OracleError] = []
        for a in self.call_many(requests):
            if not a.get("ok"):
                out.append(OracleError(a.get("error")))
            elif a.get("remaining"):
                out.append(OracleError(f"{a['remaining']} bytes left unread"))
            else:
                out.append(bytes.fromhex(a["hex"]))
        return out

    def encode(self, name: str, version: int, data: dict[str, Any]) -> bytes:
        result = self.encode_many([(name, version, data)])[0]
        if isinstance(result, OracleError):
            raise result
        return result

    def decode(self, name: str, version: int, data: bytes) -> dict[str, Any]:
        result = self.decode_many([(name, version, data)])[0]
        if isinstance(result, OracleError):
            raise result
        return result

    def config_def(self, cls: str, member: str) -> list[dict[str, Any]]:
        """The keys of the ``ConfigDef`` the static method or field ``member`` of ``cls`` holds,
        in definition order: ``{"name", "type", "default" (absent: none), "internal"}``."""
        return list(self._one({"op": "configdef", "class": cls, "member": member})["keys"])

    def names(self, cls: str, member: str) -> list[str]:
        """The strings the static collection ``member`` of ``cls`` holds, sorted."""
        return list(self._one({"op": "names", "class": cls, "member": member})["names"])

    def _one(self, request: dict[str, Any]) -> dict[str, Any]:
        answer = self.call_many([request])[0]
        if not answer.get("ok"):
            raise OracleError(answer.get("error", "no answer"))
        return answer

    # -- lifetime -------------------------------------------------------------------------------

    def close(self) -> None:
        proc = self._proc
        if proc.stdin is not None and not proc.stdin.closed:
            try:
                proc.stdin.close()
            except OSError:
                pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        self._stderr.close()

    def __enter__(self) -> JavaOracle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
