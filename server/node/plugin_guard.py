"""A time limit on the controller's plug-ins (``kwire.plugin.timeout.ms``): each call of a
policy's ``validate`` or a placer's ``place`` runs on a worker thread of its own plug-in, and the
controller waits for it at most that long.

Kafka calls its policies on the controller's one event thread, so a policy that hangs stops the
controller (and, in combined mode, nothing answers the brokers' heartbeats). In kwire the
controller's thread is also the node's Trio event loop, which answers the quorum's fetches: a
wait there beyond ``controller.quorum.fetch.timeout.ms`` (2 s by default) makes the followers
start an election. So the limit is kwire's own key, a bound on how long the whole controller may
wait, not the client's ``timeoutMs`` (which is 30 s or more for the admin tools); its default,
:data:`DEFAULT_TIMEOUT_MS`, is half the fetch timeout and far below ``broker.session.timeout.ms``
(9 s), so neither followers nor brokers notice a plug-in that hangs.

A call that takes longer is answered as the plug-in's refusal, naming the plug-in and the limit:

* a policy: POLICY_VIOLATION "create.topic.policy.class.name m:C did not answer within 1000 ms
  (kwire.plugin.timeout.ms); refused" -- the change was not validated, so it is not made;
* a placer: INVALID_REPLICATION_FACTOR with the same words (after Kafka's "Unable to replicate
  the partition N time(s): ").

The call goes on in its thread (Python cannot interrupt it); until it returns, every further
call of that plug-in is refused at once ("... is still in a call that passed the limit ..."),
so a hung plug-in costs the controller one wait, not one per request. Its late answer is
logged and dropped. A placer still running after its limit may read the controller's cluster
as later requests change it and draw from the controller's random source: its answer is thrown
away, but a placement replayed from a seed is no longer the same.

An exception from the call is raised in the controller's thread as the plug-in raised it (a
``SystemExit`` or other ``BaseException`` as a RuntimeError, so that a plug-in calling
``sys.exit()`` fails its request, not the node). The limit is per call: a CreateTopics of many topics calls the create-topic policy once per
topic, each with the whole limit. ``configure`` runs at start-up without a limit (nothing else
waits on it then); ``close`` runs with the limit when the node stops, and a plug-in still in a
call is not closed. kwire's own :class:`~server.controller.placement.StripedReplicaPlacer` is
not guarded.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from kwire.errors import Errors
from server.config import ConfigError
from server.controller.errors import ApiError

__all__ = ["DEFAULT_TIMEOUT_MS", "TIMEOUT_KEY", "GuardedPlacer", "GuardedPolicy", "PluginWorker", "timeout_ms"]

TIMEOUT_KEY = "kwire.plugin.timeout.ms"
DEFAULT_TIMEOUT_MS = 1000
"""Half of Kafka's default ``controller.quorum.fetch.timeout.ms`` (module docstring)."""


def timeout_ms(configs: Mapping[str, str]) -> int:
    """``kwire.plugin.timeout.ms`` of the node's properties (default :data:`DEFAULT_TIMEOUT_MS`),
    a positive number of ms. Raises ConfigError."""
    text = str(configs.get(TIMEOUT_KEY, "")).strip()
    if not text:
        return DEFAULT_TIMEOUT_MS
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(TIMEOUT_KEY, f"{text!r} is not a number of milliseconds") from None
    if value < 1:
        raise ConfigError(TIMEOUT_KEY, f"{value} must be at least 1")
    return value


class _Job:
    __slots__ = ("args", "done", "error", "fn", "result", "started")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.fn, self.args = fn, args
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None
        self.started = time.monotonic()


class PluginWorker:
    """One plug-in's worker thread (a daemon: a plug-in that never returns does not keep the
    process alive) and the limit on each call. ``key`` and ``name`` (the config key and its
    ``module:Class``) name the plug-in in messages and log lines."""

    def __init__(self, key: str, name: str, limit_ms: int, log: logging.Logger) -> None:
        self.key, self.name, self.limit_ms, self.log = key, name, limit_ms, log
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._stuck: _Job | None = None

    @property
    def stuck(self) -> bool:
        """A call passed the limit and has not returned yet."""
        return self._stuck is not None and not self._stuck.done.is_set()

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                job.result = job.fn(*job.args)
            except BaseException as exc:  # handed to the waiting caller
                job.error = exc
            job.done.set()
            if job is self._stuck:
                self.log.warning("%s %s returned after %d ms, past its limit of %d ms (%s); its answer was dropped",
                                 self.key, self.name, (time.monotonic() - job.started) * 1000, self.limit_ms,
                                 TIMEOUT_KEY)

    def call(self, refusal: Errors, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on the worker, its result or exception; ApiError ``refusal`` when it
        does not return within the limit, or at once while an earlier call is still running."""
        if self.stuck:
            raise ApiError(refusal, f"{self.key} {self.name} is still in a call that passed its limit of "
                                    f"{self.limit_ms} ms ({TIMEOUT_KEY}); refused until it returns")
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"kwire-plugin {self.name}", daemon=True)
            self._thread.start()
        job = _Job(fn, args)
        self._jobs.put(job)
        if not job.done.wait(self.limit_ms / 1000):
            self._stuck = job
            self.log.error("%s %s did not answer within %d ms (%s): the request is refused, and so is every "
                           "call until it returns", self.key, self.name, self.limit_ms, TIMEOUT_KEY)
            raise ApiError(refusal, f"{self.key} {self.name} did not answer within {self.limit_ms} ms "
                                    f"({TIMEOUT_KEY}); refused")
        if isinstance(job.error, Exception):
            raise job.error
        if job.error is not None:  # SystemExit and kin: the plug-in's failure, not the node's
            raise RuntimeError(f"{type(job.error).__name__} in {self.name}: {job.error}") from job.error
        return job.result

    def close(self, plugin: object) -> None:
        """Call ``plugin.close()``, if it has one, within the limit; a plug-in still in a call,
        or whose ``close`` passes the limit, is left as it is (logged)."""
        close = getattr(plugin, "close", None)
        if not callable(close):
            return
        if self.stuck:
            self.log.error("%s %s is still in a call that passed its limit: not closed", self.key, self.name)
            return
        try:
            self.call(Errors.UNKNOWN_SERVER_ERROR, close)
        except ApiError:
            pass  # logged by call()


class GuardedPolicy:
    """A policy whose ``validate`` runs under :class:`PluginWorker`'s limit; past it, POLICY_VIOLATION."""

    def __init__(self, policy: Any, worker: PluginWorker) -> None:
        self.policy, self.worker = policy, worker

    def validate(self, request: object) -> Any:
        """The policy's ``validate(request)`` within the limit (module docstring)."""
        return self.worker.call(Errors.POLICY_VIOLATION, self.policy.validate, request)

    def close(self) -> None:
        """The policy's ``close()`` within the limit."""
        self.worker.close(self.policy)


class GuardedPlacer:
    """A placer whose ``place`` runs under :class:`PluginWorker`'s limit; past it,
    INVALID_REPLICATION_FACTOR."""

    def __init__(self, placer: Any, worker: PluginWorker) -> None:
        self.placer, self.worker = placer, worker

    def place(self, spec: Any, cluster: Any) -> Any:
        """The placer's ``place(spec, cluster)`` within the limit (module docstring)."""
        return self.worker.call(Errors.INVALID_REPLICATION_FACTOR, self.placer.place, spec, cluster)

    def close(self) -> None:
        """The placer's ``close()`` within the limit."""
        self.worker.close(self.placer)
