"""MQTT bus over aiomqtt (paho-mqtt 2): reconnects with backoff, QoS 1 publish awaits PUBACK.

Subscriptions are re-made after every reconnect. Connection changes are reported to
listeners (the service turns them into ``link_down``/``link_up`` events for the
``broker`` link). A last-will message marks the backend offline on its status topic.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from urllib.parse import urlparse

import aiomqtt
import structlog

from drivers.bus import BusError, ConnectionListener, Handler

log = structlog.get_logger("drivers.mqtt")


def parse_broker_url(url: str) -> tuple[str, int]:
    """``mqtt://host:port`` (default port 1883) -> (host, port); anything else is an error."""
    u = urlparse(url)
    if u.scheme not in ("mqtt", "tcp") or not u.hostname:
        raise ValueError(f"broker URL {url!r} must look like mqtt://host:port")
    return u.hostname, u.port or 1883


class MqttBus:
    def __init__(
        self,
        url: str,
        *,
        client_id: str,
        status_topic: str | None = None,
        username: str | None = None,
        password: str | None = None,
        keepalive: int = 10,
        publish_timeout: float = 10.0,
        backoff_initial: float = 0.05,
        backoff_max: float = 2.0,
        max_inflight: int = 1000,
        persistent_session: bool = False,
    ) -> None:
        self.name = "broker"
        self.url = url
        self.host, self.port = parse_broker_url(url)
        self.client_id = client_id
        self.status_topic = status_topic
        self._auth = (username, password)
        self._keepalive = keepalive
        self._publish_timeout = publish_timeout
        self._backoff = (backoff_initial, backoff_max)
        self._max_inflight = max_inflight
        # A consumer that must not miss a QoS 1 message while it is offline keeps a session.
        self._clean_session = not persistent_session
        self._subs: list[tuple[str, Handler]] = []
        self._listeners: list[ConnectionListener] = []
        self._client: aiomqtt.Client | None = None
        self._connected_evt = asyncio.Event()
        self.reconnects = 0

    @property
    def connected(self) -> bool:
        return self._client is not None

    async def wait_connected(self) -> None:
        await self._connected_evt.wait()

    def subscribe(self, pattern: str, handler: Handler) -> None:
        self._subs.append((pattern, handler))

    def on_connection(self, listener: ConnectionListener) -> None:
        self._listeners.append(listener)

    async def publish(self, topic: str, payload: bytes, *, qos: int = 1) -> None:
        client = self._client
        if client is None:
            raise BusError(f"not connected to {self.url}")
        try:
            await client.publish(topic, payload, qos=qos, timeout=self._publish_timeout)
        except aiomqtt.MqttError as exc:
            raise BusError(f"publish to {topic} failed: {exc}") from exc

    def _notify(self, up: bool, reason: str) -> None:
        for listener in list(self._listeners):
            try:
                listener(up, reason)
            except Exception:  # a listener must never take the bus down
                log.exception("connection listener failed")

    async def run(self) -> None:
        delay = self._backoff[0]
        first = True
        while True:
            will = (
                aiomqtt.Will(self.status_topic, b'{"online": false}', qos=1, retain=True)
                if self.status_topic else None
            )
            try:
                async with aiomqtt.Client(
                    self.host, self.port, identifier=self.client_id, keepalive=self._keepalive,
                    username=self._auth[0], password=self._auth[1], will=will, clean_session=self._clean_session,
                    max_inflight_messages=self._max_inflight, timeout=self._publish_timeout,
                    logger=logging.getLogger("aiomqtt"),
                ) as client:
                    for pattern in dict.fromkeys(p for p, _ in self._subs):
                        await client.subscribe(pattern, qos=1)
                    if self.status_topic:
                        await client.publish(self.status_topic, b'{"online": true}', qos=1, retain=True)
                    self._client = client
                    self._connected_evt.set()
                    delay = self._backoff[0]
                    log.info("mqtt connected", broker=self.url)
                    self._notify(True, "")
                    async for message in client.messages:
                        self._dispatch(str(message.topic), bytes(message.payload or b""))  # type: ignore[arg-type]
            except aiomqtt.MqttError as exc:
                reason = str(exc) or type(exc).__name__
            finally:
                was_up = self._client is not None
                self._client = None
                self._connected_evt.clear()
            if was_up or first:
                log.warning("mqtt disconnected", broker=self.url, reason=reason)
                self._notify(False, reason)
            first = False
            self.reconnects += 1
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._backoff[1])

    def _dispatch(self, topic: str, payload: bytes) -> None:
        for pattern, handler in self._subs:
            if aiomqtt.Topic(topic).matches(pattern):
                try:
                    handler(topic, payload)
                except Exception:  # bad input must never kill the reader task
                    log.exception("message handler failed", topic=topic)


async def cancel_and_wait(task: asyncio.Task[object]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


__all__ = ["MqttBus", "parse_broker_url", "cancel_and_wait"]
