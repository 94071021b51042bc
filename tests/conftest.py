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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import hypothesis
import pytest

from dealer.edge.logs import configure_logging
from simulators.broker import MosquittoProcess, free_port
from simulators.pgserver import PgServer

__all__ = ["Broker", "free_port", "wait_until"]

configure_logging("warning", uncaught=False)  # pytest keeps its own hooks for uncaught exceptions

# Tests never assert on time: hypothesis's per-example deadline (200 ms by default) and its
# too-slow health check fail a test on a loaded machine, so neither applies here.
hypothesis.settings.register_profile("untimed", deadline=None,
                                     suppress_health_check=[hypothesis.HealthCheck.too_slow])
hypothesis.settings.load_profile("untimed")

Broker = MosquittoProcess


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    d = tmp_path / "broker"
    d.mkdir()
    b = Broker(d)
    b.start()
    yield b
    b.kill()


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
RESOURCE_FIXTURES = frozenset({"broker", "pty_dir", "secure_broker", "deploy_broker", "tls_broker",
                               "pg_server", "pg", "pg_private"})
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
