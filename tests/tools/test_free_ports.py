"""tools.local_cluster.free_ports: a port is handed out once per process.

Each call checks its ports by binding them and releases them before returning, so without a
memory two calls could return the same port -- two servers drawn one port at a time
(``{i: free_port() for i in ids}``) would then meet when the second binds it, or, run in a
network namespace of their own, only there.
"""

from __future__ import annotations

import pytest

from tools import local_cluster
from tools.local_cluster import PORT_SLICE_ENV, free_ports


def test_one_port_at_a_time_never_repeats_until_the_slice_is_used_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_cluster, "_HANDED_OUT", set())
    monkeypatch.setenv(PORT_SLICE_ENV, "1000/2000")  # a slice of about a dozen ports
    low, _ = local_cluster._ephemeral_range()
    size = len(local_cluster._port_slice(range(10_000, low)))
    assert 5 <= size <= 20, size
    drawn = [free_ports(1)[0] for _ in range(size)]
    # drawn one at a time at random, a dozen draws would repeat a port almost surely
    assert len(set(drawn)) == size, drawn
    again = free_ports(2)  # every port handed out once: the memory starts again
    assert len(set(again)) == 2 and set(again) <= set(drawn)
