"""One MQTT 3.1.1 connection over gmqtt: the bus's default client (issue 31).

paho (under aiomqtt 2) costs about 59 µs of CPU per QoS 1 publish with its PUBACK on this
host, gmqtt told to speak MQTT 3.1.1 about 17 µs (``dealer bench publish``), and gmqtt passes
every broker the tests run (Mosquitto 2.0, RabbitMQ 3.10's MQTT plugin, NATS 2.9's MQTT
gateway: the last two speak 3.1.1 only). What the bus needs from a connection, and gmqtt does
not give, is added here:

* **A future per PUBACK.** gmqtt keeps each outgoing QoS 1 message in its persistent storage
  until the PUBACK removes it; :class:`PubAckStorage` resolves the publisher's future there.
  A message not acknowledged when the connection ends fails at once (never a silent wait).
* **One connection, no reconnects of its own.** The bus reconnects (backoff, the next broker
  URL, a new session number): gmqtt's own reconnect is switched off, so a lost connection
  ends this link and nothing else.
* **SUBACK and UNSUBACK awaited**, so a subscription is in place before the bus says it is
  connected.

The bus picks this or paho with ``[mqtt] client`` (drivers/mqtt.py); paho stays for a
rollback and for the MQTT 5 reason codes the supervisor tool reads (dealer/cli/supervisor.py
uses aiomqtt directly).
"""

from __future__ import annotations

import asyncio
import logging
import math
import ssl
from collections.abc import Callable
from typing import Any

import gmqtt  # type: ignore[import-untyped]  # gmqtt ships no type information
from gmqtt.mqtt.constants import MQTTv311  # type: ignore[import-untyped]
from gmqtt.storage import PersistentStorage  # type: ignore[import-untyped]

from drivers.bus import BusError

# gmqtt logs each lost connection with its traceback ("[EXC: CONN LOST]") and each refused
# CONNACK: the bus logs one line per change of state itself (drivers/mqtt.py, "mqtt disconnected").
logging.getLogger("gmqtt").setLevel(logging.CRITICAL)


class LinkError(BusError):
    """A failed connect, a lost connection or a publish that cannot be made on it."""


class PubAck:
    """A publish waiting for its PUBACK, on either client: ``set`` (the PUBACK: gmqtt's in-flight
    store, or aiomqtt's on_publish after taking it out of its pending table) resolves it and
    cancels its timer; ``expire`` (the timer) takes it out of ``pending`` and fails it with
    ``timed_out()``; ``fail`` (the connection ended) fails it at once. A bare future and one
    timer, no Task and no done-callback of its own: the backend's hot path."""

    __slots__ = ("future", "timed_out", "pending", "mid", "timer")

    def __init__(self, future: asyncio.Future[None], timed_out: Callable[[], BaseException],
                 pending: dict[int, Any], mid: int) -> None:
        self.future = future
        self.timed_out = timed_out
        self.pending = pending
        self.mid = mid
        self.timer: asyncio.TimerHandle | None = None

    def set(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if not self.future.done():
            self.future.set_result(None)

    def fail(self, exc: BaseException) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if not self.future.done():
            self.future.set_exception(exc)

    def expire(self) -> None:
        if self.pending.get(self.mid) is self:
            del self.pending[self.mid]
        if not self.future.done():
            self.future.set_exception(self.timed_out())


class PubAckStorage(PersistentStorage):
    """gmqtt's in-flight store, resolving a future when a PUBACK takes a message out."""

    def __init__(self) -> None:
        super().__init__()
        self.acks: dict[int, PubAck] = {}
        self.last_mid = 0

    def push_message(self, mid: int, raw_package: bytes) -> None:
        self._messages[mid] = raw_package
        self.last_mid = mid

    def remove_message_by_mid(self, mid: int) -> None:
        if self._messages.pop(mid, None) is not None and not self._messages:
            self._check_empty()
        ack = self.acks.pop(mid, None)
        if ack is not None:
            ack.set()

    def fail_all(self, exc: Callable[[], BaseException]) -> None:
        acks, self.acks = self.acks, {}
        for ack in acks.values():
            ack.fail(exc())


async def _no_reconnect(delay: bool = False) -> None:
    """gmqtt's reconnect, switched off: the bus reconnects (drivers/mqtt.py ``MqttBus.run``)."""


class GmqttLink:
    """One connection to one broker, as an async context manager; ``lost`` completes when it ends."""

    def __init__(self, host: str, port: int, *, client_id: str, keepalive: int, username: str | None,
                 password: str | None, will: tuple[str, bytes] | None, clean_session: bool, timeout: float,
                 tls_context: ssl.SSLContext | None,
                 deliver: Callable[[str, bytes, bool], None]) -> None:
        self._host, self._port, self._tls = host, port, tls_context
        self._keepalive = keepalive
        self.timeout = timeout
        #: called with (topic, payload, retained) for each message, in the event loop
        self.deliver = deliver
        self._loop = asyncio.get_running_loop()
        self.lost: asyncio.Future[None] = self._loop.create_future()
        self._storage = PubAckStorage()
        self._waiting: dict[int, asyncio.Future[Any]] = {}  # SUBACK / UNSUBACK by packet id
        self._out: list[bytes] = []  # packets written in this turn of the event loop, not sent yet
        self._cause: BaseException | None = None  # what ended the connection, when the transport said
        self._write_now: Callable[[bytes], None] = lambda data: None  # the connection's own write
        will_message = gmqtt.Message(will[0], will[1], qos=1, retain=True) if will else None
        client = gmqtt.Client(client_id, clean_session=clean_session, optimistic_acknowledgement=True,
                              will_message=will_message, persistent_storage=self._storage)
        client._package_handler._reconnect_callback = _no_reconnect  # the bus reconnects, not gmqtt
        if username is not None:
            client.set_auth_credentials(username, password)
        client.on_message = self._on_message
        client.on_disconnect = self._on_disconnect
        client.on_subscribe = self._on_suback
        client.on_unsubscribe = self._on_suback
        self._client = client

    # -- connection ------------------------------------------------------------------------------

    async def __aenter__(self) -> GmqttLink:
        connect = asyncio.ensure_future(self._client.connect(
            self._host, self._port, ssl=self._tls or False, keepalive=self._keepalive, version=MQTTv311))
        try:
            done, _ = await asyncio.wait((connect, self.lost), timeout=self.timeout,
                                         return_when=asyncio.FIRST_COMPLETED)
            if connect in done:
                exc = connect.exception()
                if exc is not None:
                    raise LinkError(str(exc) or type(exc).__name__) from exc
                if not self.lost.done():
                    protocol = self._client._connection._protocol
                    self._write_now = protocol.write_data
                    protocol.write_data = self._write  # every packet from now on: coalesced
                    lost = protocol.connection_lost

                    def connection_lost(exc: BaseException | None) -> None:
                        self._cause = exc  # why, for the bus's "mqtt disconnected" line
                        lost(exc)

                    protocol.connection_lost = connection_lost
                    return self
            if self.lost.done():
                raise LinkError("the broker closed the connection before accepting it")
            raise LinkError("Operation timed out")
        except BaseException:
            connect.cancel()
            await self._close()
            raise

    async def __aexit__(self, *exc_info: object) -> None:
        await self._close()

    # -- writes, coalesced -----------------------------------------------------------------------
    # Each packet written at once costs a send() and wakes the broker once: with a batch of tables
    # released together (their states, the PUBACKs of the scans read in one go) that was most of
    # the kernel's share per message. Packets written in one turn of the event loop leave together
    # at its end, in order: one send() for the lot, a few microseconds later.

    def _write(self, data: bytes) -> None:
        if not self._out:
            self._loop.call_soon(self._flush)
        self._out.append(data)

    def _flush(self) -> None:
        out, self._out = self._out, []
        if out:
            self._write_now(out[0] if len(out) == 1 else b"".join(out))

    async def _close(self) -> None:
        self._flush()  # what was written before the stop goes before the DISCONNECT
        self._ended(LinkError("connection closed"))
        client = self._client
        if client._connection is not None and not client._connection.is_closing():
            try:
                await asyncio.wait_for(client.disconnect(), timeout=1.0)
            except (OSError, TimeoutError, LinkError):
                pass

    def _on_disconnect(self, client: Any, packet: Any, exc: Any = None) -> None:
        cause = self._cause
        self._ended(LinkError(f"the connection to the broker was lost: {cause}" if cause is not None and str(cause)
                              else "the broker closed the connection"))

    def _ended(self, exc: LinkError) -> None:
        """Nothing more will be acknowledged on this connection: every waiter fails now."""
        if not self.lost.done():
            self.lost.set_exception(exc)
            self.lost.exception()  # read here: the bus may be stopping and never look
        self._storage.fail_all(lambda: LinkError(f"no PUBACK: {exc}"))
        waiting, self._waiting = self._waiting, {}
        for fut in waiting.values():
            if not fut.done():
                fut.set_exception(LinkError(str(exc)))

    @property
    def pending(self) -> int:
        """Publishes waiting for their PUBACK."""
        return len(self._storage.acks)

    @property
    def is_connected(self) -> bool:
        return not self.lost.done() and bool(self._client.is_connected)

    # -- incoming --------------------------------------------------------------------------------

    def _on_message(self, client: Any, topic: str, payload: bytes, qos: int, properties: dict[str, Any]) -> int:
        try:
            self.deliver(topic, payload, bool(properties.get("retain")))
        except Exception:  # never out into gmqtt's reader
            logging.getLogger("drivers.mqtt").exception("mqtt message delivery failed")
        return 0

    def _on_suback(self, client: Any, mid: int, *args: Any) -> None:
        fut = self._waiting.pop(mid, None)
        if fut is not None and not fut.done():
            fut.set_result(args[0] if args else None)

    async def _acked(self, mid: int, timeout: float | None) -> None:
        fut = self._waiting[mid] = self._loop.create_future()  # nothing is read before this await: no SUBACK yet
        try:
            await asyncio.wait_for(fut, timeout=self.timeout if timeout is None else timeout)
        except TimeoutError:
            self._waiting.pop(mid, None)
            raise LinkError("Operation timed out") from None

    async def subscribe(self, topics: list[tuple[str, int]], timeout: float | None = None) -> None:
        if not self.is_connected:
            raise LinkError("not connected")
        mid = self._client.subscribe([gmqtt.Subscription(t, qos=q) for t, q in topics])
        await self._acked(mid, timeout)

    async def unsubscribe(self, topics: list[str], timeout: float | None = None) -> None:
        if not self.is_connected:
            raise LinkError("not connected")
        mid = self._client.unsubscribe(topics)
        await self._acked(mid, timeout)

    # -- outgoing --------------------------------------------------------------------------------

    def publish_ack(self, topic: str, payload: bytes, qos: int, retain: bool, timeout: float,
                    timed_out: Callable[[], BaseException]) -> asyncio.Future[None] | None:
        """Hand a message to the connection now; the future of its PUBACK (failed with
        ``timed_out()`` after ``timeout`` seconds, or at once when the connection ends), or None
        for QoS 0."""
        if not self.is_connected:
            raise LinkError("not connected")
        storage = self._storage
        self._client.publish(topic, payload, qos=qos, retain=retain)
        if qos == 0:
            return None
        mid = storage.last_mid
        ack = PubAck(self._loop.create_future(), timed_out, storage.acks, mid)
        storage.acks[mid] = ack
        if timeout != math.inf:
            ack.timer = self._loop.call_later(timeout, ack.expire)
        return ack.future

    async def publish(self, topic: str, payload: bytes, qos: int = 0, retain: bool = False,
                      timeout: float | None = None) -> None:
        ack = self.publish_ack(topic, payload, qos, retain, self.timeout if timeout is None else timeout,
                               lambda: LinkError("Operation timed out"))
        if ack is not None:
            await ack
