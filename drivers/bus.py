"""The message bus the service publishes to and subscribes from.

Two implementations share one small interface: :class:`drivers.mqtt.MqttBus` (aiomqtt,
QoS 1, ``publish`` returns after the broker's PUBACK) and :class:`LocalBus` (in-process,
for the self-contained demo and for unit tests of the service). The service never knows
which one it talks to.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from paho.mqtt.client import topic_matches_sub

Handler = Callable[[str, bytes], None]
ConnectionListener = Callable[[bool, str], None]


class BusError(ConnectionError):
    """Publishing failed: the bus is not connected or the connection broke before the ack."""


class Bus(Protocol):
    name: str

    @property
    def connected(self) -> bool: ...

    def subscribe(self, pattern: str, handler: Handler) -> None: ...

    def on_connection(self, listener: ConnectionListener) -> None: ...

    async def publish(self, topic: str, payload: bytes, *, qos: int = 1) -> None: ...

    async def run(self) -> None: ...


class LocalBus:
    """An in-process bus: delivery is immediate and acknowledged on return.

    ``set_connected(False)`` simulates a lost link (publishes raise :class:`BusError`),
    so the demo can show a cancelled round without a broker.
    """

    name = "local"

    def __init__(self) -> None:
        self._subs: list[tuple[str, Handler]] = []
        self._listeners: list[ConnectionListener] = []
        self._connected = True

    @property
    def connected(self) -> bool:
        return self._connected

    def subscribe(self, pattern: str, handler: Handler) -> None:
        self._subs.append((pattern, handler))

    def on_connection(self, listener: ConnectionListener) -> None:
        self._listeners.append(listener)

    def set_connected(self, up: bool, reason: str = "") -> None:
        if up != self._connected:
            self._connected = up
            for listener in list(self._listeners):
                listener(up, reason)

    async def publish(self, topic: str, payload: bytes, *, qos: int = 1) -> None:
        if not self._connected:
            raise BusError("local bus disconnected")
        for pattern, handler in list(self._subs):
            if topic_matches_sub(pattern, topic):
                handler(topic, payload)

    async def run(self) -> None:
        for listener in list(self._listeners):
            listener(self._connected, "")
        await asyncio.Event().wait()
