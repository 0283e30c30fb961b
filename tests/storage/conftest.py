"""Shared fixtures for the storage tests."""

from __future__ import annotations

import types

import cramjam
import kafka.codec
import pytest

import storage.fileio


def _install_kafka_python_snappy() -> None:
    # kafka-python frames xerial snappy itself but needs a raw-block codec module named
    # `snappy`; cramjam's raw functions are that codec.
    if kafka.codec.snappy is None:
        kafka.codec.snappy = types.SimpleNamespace(  # type: ignore[attr-defined]
            compress=lambda data: bytes(cramjam.snappy.compress_raw(bytes(data))),
            decompress=lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data))),
        )


_install_kafka_python_snappy()


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Replace the fsync system call with a recorder: recovery logic does not depend on it,
    and real fsyncs make every reopen cost tens of milliseconds."""
    calls: list[int] = []
    monkeypatch.setattr(storage.fileio, "_fsync", calls.append)
    return calls
