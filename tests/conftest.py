"""Shared fixtures: a real Mosquitto per test on a free loopback port, PTY shoes, recorders;
and the two test tiers.

The fast tier (``scripts/test --fast``, ``-m "not integration"``) is pure and unit tests; the
``integration`` tier is every test that starts a broker, a PTY or another process (demos,
chaos, soak, the CLI as a subprocess), and the long pure runs marked ``slow`` (exhaustive and
differential checks, thousands of random games). A test is ``integration`` when it uses a
fixture that starts one of them (``RESOURCE_FIXTURES``, however deep in its fixture closure),
when its module says ``pytestmark = pytest.mark.integration`` or the test is marked
``integration`` or ``slow``; a new broker or PTY test lands in its tier without a list to
maintain. The tiers are honest: a test outside the integration tier that starts a process or
opens a PTY fails (``_fast_tier_guard``), so the fast tier never pays for one
(tests/test_tiers.py).
"""

from __future__ import annotations

import _posixsubprocess
import asyncio
import hashlib
import os
import pty
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import hypothesis
import pytest

from dealer.edge.logs import configure_logging
from simulators.broker import MosquittoProcess, free_port
from simulators.brokers import BROKER_KINDS, BrokerProcess, NatsProcess, RabbitMqProcess, RabbitMqShare
from simulators.pgserver import PgServer

__all__ = ["Broker", "free_port", "wait_until"]

configure_logging("warning", uncaught=False)  # pytest keeps its own hooks for uncaught exceptions

# Tests never assert on time: hypothesis's per-example deadline (200 ms by default) and its
# too-slow health check fail a test on a loaded machine, so neither applies here.
hypothesis.settings.register_profile("untimed", deadline=None,
                                     suppress_health_check=[hypothesis.HealthCheck.too_slow])
hypothesis.settings.load_profile("untimed")

Broker = MosquittoProcess

#: The broker of the ``broker`` fixture: ``DEALER_TEST_BROKER=rabbitmq`` (or nats) runs the
#: whole suite on another broker; the default is Mosquitto, the deployed one.
TEST_BROKER = os.environ.get("DEALER_TEST_BROKER", "mosquitto").strip().lower() or "mosquitto"
if TEST_BROKER not in BROKER_KINDS:
    raise pytest.UsageError(f"DEALER_TEST_BROKER={TEST_BROKER!r}: expected one of {', '.join(BROKER_KINDS)}")
#: Marks a test (or module) that runs on every broker kind: its ``broker`` fixture is
#: parametrized over BROKER_KINDS (ids mosquitto, rabbitmq, nats).
ANY_BROKER = "any_broker"


class RabbitMqPool:
    """One private RabbitMQ node for the session (it boots in about 12 s), handing each test a
    vhost of its own on a listener of its own (``RabbitMqProcess.share``): no queue, session or
    retained message of one test reaches another. A test that kills the broker kills the node;
    the next test's share restarts it (about 5 s). A node whose shares are used up is replaced."""

    SIZE = 32

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self.factory = factory
        self.node: RabbitMqProcess | None = None
        self.used = 0

    def share(self) -> RabbitMqShare:
        if self.node is None or self.used == self.SIZE:
            self.close()
            self.node = RabbitMqProcess(self.factory.mktemp("rabbitmq"), vhosts=self.SIZE)
            self.used = 0
        share = self.node.share(self.used)
        self.used += 1
        try:
            share.start()  # (re)starts the node if it is not running
        except RuntimeError:
            # its ports were free while it was down: one may be taken now (eaddrinuse); a
            # node on fresh ports serves the rest (a broker that cannot boot at all fails here)
            self.close()
            self.node = RabbitMqProcess(self.factory.mktemp("rabbitmq"), vhosts=self.SIZE)
            self.used = 1
            share = self.node.share(0)
            share.start()
        return share

    def close(self) -> None:
        if self.node is not None:
            self.node.kill()
            self.node = None


@pytest.fixture(scope="session")
def rabbitmq_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RabbitMqPool]:
    pool = RabbitMqPool(tmp_path_factory)
    yield pool
    pool.close()


def _a_broker(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BrokerProcess]:
    """A started broker of ``kind`` for one test: a fresh Mosquitto or NATS process (each starts
    in milliseconds), or a vhost of the session's RabbitMQ node; killed at the end."""
    if kind == "rabbitmq":
        pool: RabbitMqPool = request.getfixturevalue("rabbitmq_pool")
        yield pool.share()  # the node lives on for the next test
        return
    d = tmp_path / f"broker-{kind}"
    d.mkdir()
    b: BrokerProcess = MosquittoProcess(d) if kind == "mosquitto" else NatsProcess(d)
    b.start()
    yield b
    b.kill()


@pytest.fixture
def broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Broker]:
    """A private broker on a free loopback port: Mosquitto (``DEALER_TEST_BROKER`` says
    otherwise), or each kind in turn for a test marked ``any_broker``."""
    kind = getattr(request, "param", TEST_BROKER)
    yield from _a_broker(kind, request, tmp_path)  # type: ignore[misc]


@pytest.fixture(params=BROKER_KINDS)
def any_broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker of each kind in turn (ids mosquitto, rabbitmq, nats)."""
    yield from _a_broker(request.param, request, tmp_path)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test marked ``any_broker`` that uses the ``broker`` fixture runs once per broker kind
    (``any_broker(kinds=[...], reason=...)`` on a test narrows its module's marker)."""
    marker = metafunc.definition.get_closest_marker(ANY_BROKER)
    if marker is not None and "broker" in metafunc.fixturenames:
        kinds = [k for k in BROKER_KINDS if k in marker.kwargs.get("kinds", BROKER_KINDS)]
        metafunc.parametrize("broker", kinds, indirect=True, ids=kinds)


def poll_until(pred: Callable[[], Any], timeout: float = 15.0, what: str = "condition", *, step: float = 0.05,
               alive: subprocess.Popen[Any] | None = None, context: Callable[[], str] = lambda: "") -> Any:
    """:func:`wait_until` for code without an event loop (a ``dealer run`` process, a browser):
    poll ``pred`` until it is truthy and return its value; fail naming ``what`` after ``timeout``,
    or at once when the ``alive`` process has exited (``context()``, e.g. its log, in both)."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if alive is not None and alive.poll() is not None:
            raise AssertionError(f"the process exited ({alive.returncode}) before {what}\n{context()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}\n{context()}")
        time.sleep(step)


async def wait_until(pred: Callable[[], Any], timeout: float = 15.0, what: str = "condition") -> Any:
    """Wait for a condition driven by real IO; fail with ``what`` if it never holds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = pred()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def cancel_and_wait(*tasks: "asyncio.Task[Any]") -> None:
    """Cancel ``tasks`` and wait for them, cancelling again while one still runs: on Python 3.11
    ``asyncio.wait_for`` (aiomqtt's publish waits for its PUBACK with it) loses a cancellation that
    arrives as its result does, and a loop around it (a heartbeat) goes on for ever."""
    pending = {t for t in tasks if not t.done()}
    while pending:
        for t in pending:
            t.cancel()
        _, pending = await asyncio.wait(pending, timeout=0.5)
    await asyncio.gather(*tasks, return_exceptions=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One private PostgreSQL server for the session (tests that do not kill or pause it)."""
    server = PgServer()
    server.start()
    yield server
    server.cleanup()


@pytest.fixture
def pg(pg_server: PgServer, request: pytest.FixtureRequest) -> str:
    """The URL of a fresh, empty database on the session's PostgreSQL server."""
    name = "t_" + hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:16] + "_" + str(free_port())
    return pg_server.create_database(name)


@pytest.fixture
def pg_private() -> Iterator[PgServer]:
    """A PostgreSQL server of the test's own (the test may kill, pause or restart it)."""
    server = PgServer()
    server.start()
    yield server
    server.cleanup()


@pytest.fixture
def pty_dir(tmp_path: Path) -> Path:
    d = tmp_path / "dev"
    d.mkdir()
    return d


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault("PYTHONUNBUFFERED", "1")


INTEGRATION = "integration"
# Fixtures that start a broker or open a PTY: a test that uses one, directly or through
# another fixture, is an integration test.
RESOURCE_FIXTURES = frozenset({"broker", "any_broker", "rabbitmq_pool", "pty_dir", "secure_broker", "deploy_broker",
                               "tls_broker", "pg_server", "pg", "pg_private"})
# A long pure run's bound (pyproject's 120 s is for the rest): on a loaded machine the
# differential run against pokerkit alone takes about that long; a bound, not a measure.
SLOW_TIMEOUT = 900


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if RESOURCE_FIXTURES.intersection(getattr(item, "fixturenames", ())) or item.get_closest_marker("slow"):
            item.add_marker(INTEGRATION)
        if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT))


class FastTierViolation(BaseException):
    """Not an Exception: code under test that catches ``Exception`` around a process start
    must not swallow it."""


def _refuse(what: str) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise FastTierViolation(
            f"a fast-tier test {what}: mark its module `pytestmark = pytest.mark.integration`, "
            f"or the test `@pytest.mark.integration`, or use a fixture of RESOURCE_FIXTURES")
    return refuse


@pytest.fixture(autouse=True)
def _fast_tier_guard(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail a test outside the integration tier that starts a process (a broker, the CLI, a
    subprocess, a fork) or opens a PTY."""
    if request.node.get_closest_marker(INTEGRATION) is not None:
        return
    started = _refuse("started a process")
    monkeypatch.setattr(_posixsubprocess, "fork_exec", started)  # multiprocessing's spawn and forkserver
    monkeypatch.setattr(subprocess, "_fork_exec", started)  # subprocess (and asyncio's) keeps its own reference
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, started)
    monkeypatch.setattr(os, "openpty", _refuse("opened a PTY"))
    monkeypatch.setattr(pty, "openpty", _refuse("opened a PTY"))
    monkeypatch.setattr(pty, "fork", started)
