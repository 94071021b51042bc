"""The message bus the service publishes to and subscribes from.

Two implementations share one small interface: :class:`drivers.mqtt.MqttBus` (aiomqtt,
QoS 1, ``publish`` returns after the broker's PUBACK) and :class:`LocalBus` (in-process,
for the self-contained demo and for unit tests of the service). The service never knows
which one it talks to.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from typing import Protocol

from paho.mqtt.client import topic_matches_sub

Handler = Callable[[str, bytes], None]
ConnectionListener = Callable[[bool, str], None]


def new_instance() -> str:
    """An id for one backend process (8 random hex digits): with the connection number it makes
    the broker ``session`` that the backend's status and retained messages name."""
    return secrets.token_hex(4)


class BusError(ConnectionError):
    """Publishing failed: the bus is not connected or the connection broke before the ack."""


class Router:
    """Topic -> handlers. Exact topics are a dict lookup; only wildcard patterns are matched
    one by one (a backend subscribes to a few exact topics per table, so a linear scan over
    every subscription per message would dominate the CPU at hundreds of tables)."""

    def __init__(self) -> None:
        self._exact: dict[str, list[Handler]] = {}
        self._wild: list[tuple[str, Handler]] = []

    def add(self, pattern: str, handler: Handler) -> None:
        if "+" in pattern or "#" in pattern:
            self._wild.append((pattern, handler))
        else:
            self._exact.setdefault(pattern, []).append(handler)

    def remove(self, pattern: str) -> bool:
        """Drop every handler of ``pattern``; False when it had none."""
        if pattern in self._exact:
            del self._exact[pattern]
            return True
        kept = [(p, h) for p, h in self._wild if p != pattern]
        found = len(kept) != len(self._wild)
        self._wild = kept
        return found

    def __contains__(self, pattern: str) -> bool:
        return pattern in self._exact or any(p == pattern for p, _ in self._wild)

    @property
    def patterns(self) -> list[str]:
        return list(self._exact) + list(dict.fromkeys(p for p, _ in self._wild))

    def handlers(self, topic: str) -> list[Handler]:
        found = list(self._exact.get(topic, ()))
        found += [h for p, h in self._wild if topic_matches_sub(p, topic)]
        return found


class Bus(Protocol):
    name: str
    #: ``{instance}.{connection}`` of the current (or last) connection (docs/mqtt-topics.md §8)
    session: str

    @property
    def connected(self) -> bool: ...

    def subscribe(self, pattern: str, handler: Handler) -> None: ...

    def unsubscribe(self, pattern: str) -> None: ...

    def on_connection(self, listener: ConnectionListener) -> None: ...

    async def publish(self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = False) -> None: ...

    async def run(self) -> None: ...


class LocalBus:
    """An in-process bus: delivery is immediate and acknowledged on return.

    ``set_connected(False)`` simulates a lost link (publishes raise :class:`BusError`),
    so the demo can show a cancelled round without a broker.
    """

    name = "local"

    def __init__(self) -> None:
        self.instance = new_instance()
        self.session = f"{self.instance}.1"
        self._router = Router()
        self._listeners: list[ConnectionListener] = []
        self._connected = True

    @property
    def connected(self) -> bool:
        return self._connected

    def subscribe(self, pattern: str, handler: Handler) -> None:
        self._router.add(pattern, handler)

    def unsubscribe(self, pattern: str) -> None:
        self._router.remove(pattern)

    def on_connection(self, listener: ConnectionListener) -> None:
        self._listeners.append(listener)

    def set_connected(self, up: bool, reason: str = "") -> None:
        if up != self._connected:
            self._connected = up
            for listener in list(self._listeners):
                listener(up, reason)

    async def publish(self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = False) -> None:
        if not self._connected:
            raise BusError("local bus disconnected")
        for handler in self._router.handlers(topic):
            handler(topic, payload)

    async def run(self) -> None:
        for listener in list(self._listeners):
            listener(self._connected, "")
        await asyncio.Event().wait()
