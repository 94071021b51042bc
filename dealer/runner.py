"""Production entry point behind ``dealer run``: build the bus, serve metrics, run the service."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine
from typing import Any, TypeVar

import structlog

from dealer import topics
from dealer.config import Settings
from dealer.metrics import Metrics
from dealer.service import Service
from drivers.bus import Bus, LocalBus
from drivers.mqtt import MqttBus

T = TypeVar("T")
log = structlog.get_logger("dealer.runner")


def run_loop(main: Coroutine[Any, Any, T], loop: str = "uvloop") -> T:
    """Run ``main`` on uvloop (libuv: measurably less loop overhead at hundreds of tables)
    or on the standard asyncio loop."""
    if loop == "uvloop":
        try:
            import uvloop
        except ImportError:  # not on Linux: the standard loop is fine
            return asyncio.run(main)
        return uvloop.run(main)
    return asyncio.run(main)


def mqtt_password(settings: Settings) -> str | None:
    """The broker password: the content of ``mqtt.password_file`` when set (without the
    trailing newline), else ``mqtt.password``."""
    m = settings.mqtt
    if m.password_file is not None:
        return m.password_file.read_text(encoding="utf-8").rstrip("\r\n")
    return m.password


def build_bus(settings: Settings) -> Bus:
    m = settings.mqtt
    if m.url is None:
        return LocalBus()
    return MqttBus(m.url, client_id=m.client_id, username=m.username, password=mqtt_password(settings),
                   keepalive=m.keepalive, status_topic=topics.backend_status(settings.service.node_id),
                   ca_file=m.ca_file, cert_file=m.cert_file, key_file=m.key_file)


async def run_service(settings: Settings) -> None:
    metrics = Metrics()
    if settings.service.metrics_enabled:
        port = metrics.serve(settings.service.metrics_port, settings.service.metrics_addr)
        log.info("metrics serving", addr=settings.service.metrics_addr, port=port, path="/metrics")
    service = Service(settings, bus=build_bus(settings), metrics=metrics)
    task = asyncio.create_task(service.run())
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    log.info("backend started", node=settings.service.node_id, tables=list(service.tables),
             journal=str(settings.service.journal_path))
    try:
        await task
    except asyncio.CancelledError:
        log.info("backend stopped")
