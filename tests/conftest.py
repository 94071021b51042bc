"""Shared fixtures: a real Mosquitto per test on a free loopback port, PTY shoes, recorders."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dealer.edge.logs import configure_logging
from simulators.broker import MosquittoProcess, free_port

__all__ = ["Broker", "free_port", "wait_until"]

configure_logging("warning", uncaught=False)  # pytest keeps its own hooks for uncaught exceptions

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


@pytest.fixture
def pty_dir(tmp_path: Path) -> Path:
    d = tmp_path / "dev"
    d.mkdir()
    return d


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
