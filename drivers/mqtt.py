"""MQTT bus over gmqtt (or aiomqtt/paho-mqtt 2): reconnects with backoff, QoS 1 publish awaits PUBACK.

The connection itself is gmqtt's, spoken in MQTT 3.1.1 (drivers/mqtt_gmqtt.py: a third of
paho's CPU per message); ``client="paho"`` keeps the aiomqtt connection below for a rollback.

Subscriptions are re-made after every reconnect. Connection changes are reported to
listeners (the service turns them into ``link_down``/``link_up`` events for the
``broker`` link). A last-will message marks the backend offline on its status topic; the
status names the connection's ``session`` (``{instance}.{connection}``), which the backend's
retained messages name too, so a client can tell one left by a dead connection.
``mqtts://`` URLs connect over TLS 1.2+ and verify the broker's certificate (CA file,
host name); a client certificate is optional. Several URLs (``[mqtt] broker_urls``): a failed
connect or a lost connection moves to the next, in turn. The same bus runs on Mosquitto,
RabbitMQ's MQTT plugin and NATS's MQTT gateway: it sends no topic that one of them would
refuse or route elsewhere, and no QoS 2 (docs/brokers.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import math
import logging
import socket
import ssl
from pathlib import Path
from urllib.parse import urlparse

from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

import aiomqtt
import paho.mqtt.client as mqtt
import structlog

from drivers.bus import BusError, ConnectionListener, Handler, Router, new_instance
from drivers.mqtt_gmqtt import GmqttLink, LinkError, PubAck

#: The MQTT clients the bus can speak through (``[mqtt] client``): gmqtt by default (a third of
#: paho's CPU per message, docs/benchmarks.md "Issue 31"), paho (aiomqtt 2) for a rollback.
CLIENTS = ("gmqtt", "paho")
#: What a connection of either client raises when it fails.
_LINK_ERRORS = (aiomqtt.MqttError, LinkError)

log = structlog.get_logger("drivers.mqtt")

# paho leaves Nagle's algorithm on. After acknowledging an incoming QoS 1 message, the
# next small PUBLISH then waits for the broker's delayed ACK: ~40 ms per card event.
_SOCKET_OPTIONS = ((socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),)


class _Client(aiomqtt.Client):
    """aiomqtt's client with safe socket registration and O(1) pending-call bookkeeping.

    aiomqtt 2.x scans every pending call twice per publish (a membership test on a
    generator and ``len(list(...))``) and logs a warning whenever more than ten are
    pending. With hundreds of tables publishing concurrently that is quadratic and
    floods the log, so this override keeps the same contract with dict lookups only.
    """

    # -- socket registration -------------------------------------------------------------
    # aiomqtt registers paho's socket with the event loop. Under uvloop two things go wrong
    # after a broker restart, and both were seen in the fault soak:
    # * a TCP reset makes libuv report POLLERR: uvloop then silently closes its poll handle
    #   for that fd but keeps it in its fd table, so every later add_reader/add_writer on
    #   that fd number raises "the handler is closed" (in a callback, so aiomqtt never
    #   hears of it). The next connection usually gets the same fd number: it can never
    #   read its CONNACK, and the client retries forever on a dead fd.
    # * aiomqtt removes only the reader when paho closes a socket; closing an fd whose
    #   writer is still polled can abort the process inside libuv.
    # So: a new socket first purges whatever the loop still holds for its fd number; close
    # removes both directions; deferred registrations skip a socket that closed meanwhile;
    # and a registration that finds a dead poll purges it and registers again, so the
    # reader sees the reset and aiomqtt reconnects.

    def _on_socket_open(self, client: Any, userdata: Any, sock: Any) -> None:
        fd = sock.fileno()

        def readable() -> None:
            try:
                while True:
                    client.loop_read()
                    if hasattr(client._sock, "pending") and client._sock.pending() > 0:
                        continue  # TLS may hold decoded bytes that loop_read has not consumed
                    break
            except Exception as exc:  # a broken connection: aiomqtt reconnects on this
                if not self._disconnected.done():
                    self._disconnected.set_exception(exc)

        def writable() -> None:
            try:
                client.loop_write()
            except Exception as exc:
                if not self._disconnected.done():
                    self._disconnected.set_exception(exc)

        self._socket_callbacks = (sock, readable, writable)

        def register() -> None:
            if sock.fileno() == fd >= 0:
                _purge_fd(self._loop, fd)  # anything the loop still holds for this number is stale
                self._loop.add_reader(fd, readable)

        def create_misc_task() -> None:
            self._misc_task = self._loop.create_task(self._misc_loop())

        self._loop.call_soon_threadsafe(register)
        self._loop.call_soon_threadsafe(create_misc_task)

    def _on_socket_close(self, client: Any, userdata: Any, sock: Any) -> None:
        fd = sock.fileno()
        if fd > -1:
            _purge_fd(self._loop, fd)
        if self._misc_task is not None and not self._misc_task.done():
            self._loop.call_soon_threadsafe(self._misc_task.cancel)

    def _on_socket_register_write(self, client: Any, userdata: Any, sock: Any) -> None:
        fd = sock.fileno()

        def register() -> None:
            callbacks = getattr(self, "_socket_callbacks", None)
            if callbacks is None or callbacks[0] is not sock or sock.fileno() != fd or fd < 0:
                return  # the socket closed (or was replaced) before this ran
            if not client.want_write():
                return  # written meanwhile (a publish writes at once: _write_now): nothing to wait for
            _, readable, writable = callbacks
            try:
                self._loop.add_writer(fd, writable)
            except RuntimeError:  # uvloop closed the poll on a reset: start clean, let the read fail
                log.warning("mqtt socket poll was closed by the loop; re-registering", fd=fd)
                _purge_fd(self._loop, fd)
                self._loop.add_reader(fd, readable)
                self._loop.add_writer(fd, writable)

        self._loop.call_soon_threadsafe(register)

    def _on_socket_unregister_write(self, client: Any, userdata: Any, sock: Any) -> None:
        fd = sock.fileno()
        if fd > -1:
            try:
                self._loop.remove_writer(fd)
            except RuntimeError:
                _purge_fd(self._loop, fd)

    # -- incoming messages -----------------------------------------------------------------------
    # aiomqtt queues each incoming message and its iterator makes a Task and an asyncio.wait per
    # message: a Task per scanner read at a thousand tables. With ``deliver`` set, paho's read
    # hands each message to it at once, in the event loop (paho calls it from loop_read); the
    # queue, never read then, stays empty.

    def __init__(self, *args: Any, deliver: Callable[[str, bytes, bool], None] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: Called with (topic, payload, retained) of each incoming message instead of queueing it
        #: (None: aiomqtt's queue).
        self.deliver = deliver

    @property
    def pending(self) -> int:
        """Publishes waiting for their PUBACK (as :class:`GmqttLink`'s)."""
        return len(self._pending_publishes)

    @property
    def lost(self) -> asyncio.Future[None]:
        """Completes when the connection ends (as :class:`GmqttLink`'s)."""
        return self._disconnected

    def _on_message(self, client: Any, userdata: Any, message: mqtt.MQTTMessage) -> None:
        deliver = self.deliver
        if deliver is None:
            super()._on_message(client, userdata, message)
            return
        try:
            # paho decodes a received PUBLISH from bytes: its payload is bytes (bytearray is for outgoing ones)
            deliver(message.topic, cast(bytes, message.payload) or b"", bool(message.retain))
        except Exception:  # never out into paho's read: that would count as a broken connection
            log.exception("mqtt message delivery failed", topic=repr(getattr(message, "_topic", b""))[:200])

    # -- publish -------------------------------------------------------------------------------
    # aiomqtt waits for a PUBACK with asyncio.wait_for on an Event: on Python 3.11 that makes a
    # Task, a coroutine and an Event per publish, a tenth of the backend's CPU at 1,000 tables.
    # The same contract on a bare future and one timer: the PUBACK (paho's on_publish, through
    # aiomqtt's pending table) resolves it; the timeout fails it with aiomqtt's own error.

    async def publish(self, /, topic: str, payload: Any = None, qos: int = 0, retain: bool = False,
                      properties: Any = None, *args: Any, timeout: float | None = None, **kwargs: Any) -> None:
        if properties is not None or args or kwargs:  # what the backend never passes: the library's own way
            await super().publish(topic, payload, qos, retain, properties, *args, timeout=timeout, **kwargs)
            return
        ack = self.publish_ack(topic, payload, qos, retain, self.timeout if timeout is None else timeout,
                               lambda: aiomqtt.MqttError("Operation timed out"))
        if ack is not None:
            await ack

    def publish_ack(self, topic: str, payload: bytes, qos: int, retain: bool, timeout: float,
                    timed_out: Callable[[], BaseException]) -> asyncio.Future[None] | None:
        """Hand a message to paho now; the future of its PUBACK (failed with ``timed_out()`` after
        ``timeout`` seconds), or None when it is already done (QoS 0). No coroutine, no Task: the
        hot path of a backend with a thousand tables."""
        info = self._client.publish(topic, payload, qos, retain)
        if info.rc != mqtt.MQTT_ERR_SUCCESS:
            if self._disconnected.done() and self._disconnected.exception():
                raise aiomqtt.MqttCodeError(info.rc, "Could not publish message") from self._disconnected.exception()
            raise aiomqtt.MqttCodeError(info.rc, "Could not publish message")
        if info.is_published():
            return None
        mid = info.mid
        if mid in self._pending_publishes or mid in self._pending_subscribes or mid in self._pending_unsubscribes:
            raise RuntimeError(f'There already exists a pending call for message ID "{mid}"')
        ack = PubAck(self._loop.create_future(), timed_out, self._pending_publishes, mid)
        self._pending_publishes[mid] = ack  # type: ignore[assignment]  # aiomqtt's on_publish only calls .set(): a PubAck has it
        if timeout != math.inf:
            ack.timer = self._loop.call_later(timeout, ack.expire)
        self._write_now()
        return ack.future

    def _write_now(self) -> None:
        """Put what paho has queued on the wire now, instead of after the event loop's next turns
        (the writer registered by a deferred callback, then polled): a batch's effects leave as
        they are released, not after the next batch is applied. Not from inside paho's own
        callbacks (paho does not write there either); a socket that cannot take it all keeps the
        rest for the registered writer, as before."""
        paho = self._client
        callbacks = getattr(self, "_socket_callbacks", None)
        if callbacks is None or not paho.want_write() or not paho._in_callback_mutex.acquire(False):
            return
        paho._in_callback_mutex.release()
        callbacks[2]()  # writable(): loop_write, and a broken connection reported as ever

    @contextlib.contextmanager
    def _pending_call(self, mid: int, value: Any, pending_dict: dict[int, Any]) -> Iterator[None]:
        if mid in self._pending_subscribes or mid in self._pending_unsubscribes or mid in self._pending_publishes:
            raise RuntimeError(f'There already exists a pending call for message ID "{mid}"')
        pending_dict[mid] = value
        try:
            yield
        finally:
            pending_dict.pop(mid, None)


class _ClientLog(logging.LoggerAdapter[logging.Logger]):
    """What aiomqtt and paho log for one bus (logger ``aiomqtt``), kept to one line per state change.

    paho reports a lost connection as an error of its own ("failed to receive on socket:
    [Errno 104] Connection reset by peer") just before the bus logs the same change as
    ``mqtt disconnected``: that text goes into the bus's line as its ``cause`` and is logged
    here at debug only. Any other warning or error is logged once per connection; its
    repeats go to debug until the bus connects again.
    """

    _LOSS = ("failed to receive on socket", "timeout on socket")

    def __init__(self) -> None:
        super().__init__(logging.getLogger("aiomqtt"), {})
        self.cause: str | None = None
        self._seen: set[str] = set()

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        if level >= logging.WARNING:
            text = str(msg)
            if text.startswith(self._LOSS):
                if self.cause is None:
                    try:
                        self.cause = text % args if args else text
                    except (TypeError, ValueError):
                        self.cause = text
                level = logging.DEBUG
            elif text in self._seen:
                level = logging.DEBUG
            else:
                self._seen.add(text)
        super().log(level, msg, *args, **kwargs)

    def connected(self) -> None:
        """A new connection: the next loss and each warning are news again."""
        self.cause = None
        self._seen.clear()


def _purge_fd(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    """Remove every registration the loop holds for ``fd``, including a poll uvloop closed.

    uvloop's remove_* raise on a closed poll only while the *other* direction is still set,
    after clearing their own; repeating both therefore always empties the entry.
    """
    for remove in (loop.remove_reader, loop.remove_writer, loop.remove_reader, loop.remove_writer):
        try:
            remove(fd)
        except (RuntimeError, ValueError, OSError):
            pass


#: Characters a topic the bus sends or subscribes to may not hold, and why. The same topic must
#: mean the same thing on every broker the backend supports (docs/brokers.md): NATS 2.9 refuses a
#: '.' or a ' ' in a topic (it closes the connection that publishes one, and refuses a will or a
#: subscription on one), and RabbitMQ's MQTT plugin delivers a '.' as a '/' (another topic level:
#: ``players/ann.state`` reaches the subscribers of ``players/ann/state``). '+' and '#' are
#: wildcards, never part of a topic name; NUL is not allowed by MQTT.
UNPORTABLE = {".": "NATS refuses it, RabbitMQ turns it into a topic level", " ": "NATS refuses it",
              "\x00": "MQTT forbids it"}
WILDCARDS = {"+": "a wildcard", "#": "a wildcard"}
_NAME_UNPORTABLE = {**UNPORTABLE, **WILDCARDS}


@functools.lru_cache(maxsize=65536)  # checked at every publish: a backend has a bounded set of topics
def unportable_topic(topic: str, *, filter: bool = False) -> str | None:
    """Why ``topic`` (a topic name, or a subscription filter when ``filter``) cannot be used
    alike on every supported broker, or None when it can."""
    bad = UNPORTABLE if filter else _NAME_UNPORTABLE
    for ch, why in bad.items():
        if ch in topic:
            return f"topic {topic!r} holds {ch!r} ({why})"
    return None


def status_payload(online: bool, session: str) -> bytes:
    """The retained status of a backend connection (and its last will)."""
    return json.dumps({"online": online, "session": session}).encode()


#: What a TLS failure means to the person who configured it (the ssl module's words are not theirs).
_TLS_WORDS = (
    ("CERTIFICATE_VERIFY_FAILED", "unable to get local issuer",
     "the broker's TLS certificate is not signed by a CA this side trusts: give the CA file that signed it "
     "(ca_file, --ca-file)"),
    ("CERTIFICATE_VERIFY_FAILED", "self-signed",
     "the broker's TLS certificate is self-signed or signed by an unknown CA: give that CA file (ca_file, --ca-file)"),
    ("CERTIFICATE_VERIFY_FAILED", "Hostname mismatch",
     "the broker's TLS certificate is not for this host name: connect by a name the certificate lists"),
    ("CERTIFICATE_VERIFY_FAILED", "expired", "the broker's TLS certificate has expired"),
    ("CERTIFICATE_VERIFY_FAILED", "", "the broker's TLS certificate is not trusted: check ca_file (--ca-file)"),
    ("WRONG_VERSION_NUMBER", "", "the broker did not answer in TLS: is this its plain (mqtt://) port?"),
    ("TLSV1_ALERT_UNKNOWN_CA", "", "the broker does not trust this side's client certificate (its CA is unknown "
     "to the broker)"),
)


def explain(exc: BaseException | str) -> str:
    """One line for a broker connection error: a TLS failure in words that say what to fix
    (with the ssl module's reason kept in brackets), anything else as it is."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    for code, detail, words in _TLS_WORDS:
        if code in text and detail in text:
            return f"{words} [{code}]"
    return text


def parse_broker_url(url: str) -> tuple[str, int, bool]:
    """``mqtt://host:port`` (default port 1883) or ``mqtts://host:port`` (TLS, default port
    8883) -> (host, port, tls); anything else is an error."""
    u = urlparse(url)
    if u.scheme not in ("mqtt", "tcp", "mqtts", "ssl") or not u.hostname:
        raise ValueError(f"broker URL {url!r} must look like mqtt://host:port or mqtts://host:port")
    tls = u.scheme in ("mqtts", "ssl")
    return u.hostname, u.port or (8883 if tls else 1883), tls


def make_tls_context(ca_file: str | Path | None = None, cert_file: str | Path | None = None,
                     key_file: str | Path | None = None) -> ssl.SSLContext:
    """A client TLS context that verifies the broker: its certificate must chain to
    ``ca_file`` (the system's CAs when None) and name the host we connect to. TLS 1.2 is
    the minimum. ``cert_file``/``key_file`` add a client certificate (key in the cert
    file when ``key_file`` is None)."""
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(ca_file) if ca_file else None)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = True
    ctx.verify_mode = ssl.CERT_REQUIRED
    if cert_file:
        ctx.load_cert_chain(str(cert_file), str(key_file) if key_file else None)
    elif key_file:
        raise ValueError("a client key_file needs its cert_file")
    return ctx


class MqttBus:
    def __init__(
        self,
        url: str | Sequence[str],
        *,
        client_id: str,
        status_topic: str | None = None,
        username: str | None = None,
        password: str | None = None,
        keepalive: int = 10,
        publish_timeout: float = 10.0,
        backoff_initial: float = 0.05,
        backoff_max: float = 2.0,
        max_inflight: int = 100,
        persistent_session: bool = False,
        accept_retained: bool = False,
        ca_file: str | Path | None = None,
        cert_file: str | Path | None = None,
        key_file: str | Path | None = None,
        tls_context: ssl.SSLContext | None = None,
        instance: str | None = None,
        client: str = "gmqtt",
    ) -> None:
        self.name = "broker"
        if client not in CLIENTS:
            raise ValueError(f"MQTT client {client!r}: one of {', '.join(CLIENTS)}")
        #: which MQTT client library speaks for the bus (CLIENTS)
        self.client = client
        #: this process's id; ``session`` adds the connection number (1, 2, ... per reconnect)
        self.instance = instance or new_instance()
        self._connects = 0
        self.session = f"{self.instance}.1"
        #: the brokers to try, in turn: a failed connect or a lost connection moves to the next
        self.urls = [url] if isinstance(url, str) else list(url)
        if not self.urls:
            raise ValueError("no broker URL given")
        self._endpoints = [parse_broker_url(u) for u in self.urls]
        tls_any = any(tls for _, _, tls in self._endpoints)
        if tls_context is None and tls_any:
            tls_context = make_tls_context(ca_file, cert_file, key_file)
        elif tls_context is not None and not tls_any:
            raise ValueError(f"a TLS context was given for the plain broker URL {self.urls[0]!r}: use mqtts://")
        self._tls_context = tls_context
        #: which of ``urls`` the bus is connected to, or tries next
        self.url_index = 0
        self.client_id = client_id
        if status_topic is not None and (why := unportable_topic(status_topic)) is not None:
            raise ValueError(f"status topic: {why}")
        self.status_topic = status_topic
        self._auth = (username, password)
        self._keepalive = keepalive
        self._publish_timeout = publish_timeout
        self._backoff = (backoff_initial, backoff_max)
        self._max_inflight = max_inflight
        # A consumer that must not miss a QoS 1 message while it is offline keeps a session.
        self._clean_session = not persistent_session
        # Commands must happen once: a retained action or scanner frame would be replayed
        # to the backend after every reconnect, so retained messages are dropped unless a
        # client (e.g. one watching backend status) asks for them.
        self._accept_retained = accept_retained
        self.retained_dropped = 0
        self._router = Router()
        self._sub_tasks: set[asyncio.Task[None]] = set()  # SUBSCRIBE / UNSUBSCRIBE sent while connected
        self._listeners: list[ConnectionListener] = []
        self._client: _Client | GmqttLink | None = None
        self._connected_evt = asyncio.Event()
        self.reconnects = 0
        self._client_log = _ClientLog()

    @property
    def url(self) -> str:
        """The broker the bus is connected to (or tries next)."""
        return self.urls[self.url_index]

    @property
    def host(self) -> str:
        return self._endpoints[self.url_index][0]

    @property
    def port(self) -> int:
        return self._endpoints[self.url_index][1]

    @property
    def tls(self) -> bool:
        return self._endpoints[self.url_index][2]

    @property
    def connected(self) -> bool:
        return self._client is not None

    async def wait_connected(self) -> None:
        await self._connected_evt.wait()

    def subscribe(self, pattern: str, handler: Handler) -> None:
        """Route ``pattern`` to ``handler``; subscribed at every connect, and at once when the
        bus is connected now (a table adopted at run time; the exact topic of a retained
        message, which RabbitMQ 3.10 does not replay to a wildcard filter: docs/brokers.md)."""
        why = unportable_topic(pattern, filter=True)
        if why is not None:
            raise ValueError(f"cannot subscribe: {why}")
        new = pattern not in self._router
        self._router.add(pattern, handler)
        if new and self._client is not None:
            self._spawn(self._resubscribe(self._client, [pattern], []))

    def unsubscribe(self, pattern: str) -> None:
        """Stop routing ``pattern`` (a table dropped); while connected the broker is told at once."""
        if self._router.remove(pattern) and self._client is not None:
            self._spawn(self._resubscribe(self._client, [], [pattern]))

    async def settled(self) -> None:
        """Return once every SUBSCRIBE and UNSUBSCRIBE sent on the live connection so far has its
        answer (or has failed): from then on the broker routes by the new subscriptions."""
        while self._sub_tasks:
            await asyncio.gather(*self._sub_tasks, return_exceptions=True)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._sub_tasks.add(task)
        task.add_done_callback(self._sub_tasks.discard)

    async def _resubscribe(self, client: _Client | GmqttLink, add: list[str], remove: list[str]) -> None:
        """SUBSCRIBE / UNSUBSCRIBE on a live connection; a failure is logged (the next connect
        subscribes the router's patterns again)."""
        try:
            if add:
                await client.subscribe([(p, 1) for p in add], timeout=self._publish_timeout)
            if remove:
                await client.unsubscribe(remove, timeout=self._publish_timeout)
        except (*_LINK_ERRORS, TimeoutError) as exc:
            if self._client is not client:  # that connection is gone: the next one subscribes the router's
                return
            log.warning("mqtt subscription change failed; the next connect subscribes again", broker=self.url,
                        subscribe=add, unsubscribe=remove, reason=str(exc)[:200])

    def on_connection(self, listener: ConnectionListener) -> None:
        self._listeners.append(listener)

    async def publish(self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = False) -> None:
        """Publish and, at QoS 1, return once the broker acknowledged it. A topic that is not the
        same on every broker (:func:`unportable_topic`) or QoS 2 (NATS 2.9 closes the connection,
        RabbitMQ 3.10 downgrades it) is refused with :class:`BusError` before anything is sent:
        one bad topic must never cost the connection every table shares."""
        await self.publish_nowait(topic, payload, qos=qos, retain=retain)

    def publish_nowait(self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = False) -> asyncio.Future[None]:
        """:meth:`publish` without a coroutine or a Task: a future that resolves at the broker's
        PUBACK (at once for QoS 0) or fails with :class:`BusError`, after the same checks. The
        backend's live and retained messages go this way: a Task per publish was a measurable
        share of its CPU at a thousand tables."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        why = unportable_topic(topic)
        if why is not None:
            fut.set_exception(BusError(f"not published: {why}"))
            return fut
        if qos not in (0, 1):
            fut.set_exception(BusError(f"not published to {topic}: QoS {qos} (the backend uses QoS 0 and 1 only: "
                                       "docs/brokers.md)"))
            return fut
        client = self._client
        if client is None:
            fut.set_exception(BusError(f"not connected to {self.url}"))
            return fut
        try:
            ack = client.publish_ack(topic, payload, qos, retain, self._publish_timeout,
                                     lambda: BusError(f"publish to {topic} failed: Operation timed out"))
        except (*_LINK_ERRORS, RuntimeError) as exc:
            fut.set_exception(BusError(f"publish to {topic} failed: {exc}"))
            return fut
        if ack is None:
            fut.set_result(None)
            return fut
        return ack

    def _notify(self, up: bool, reason: str) -> None:
        for listener in list(self._listeners):
            try:
                listener(up, reason)
            except Exception:  # a listener must never take the bus down
                log.exception("connection listener failed")

    async def run(self) -> None:
        """Connect, subscribe and dispatch until cancelled. A failed connect or a lost connection
        moves to the next of ``urls`` (round-robin) at once; the backoff delay is waited only
        once every broker failed in turn (with one URL: before every retry, as ever)."""
        delay = self._backoff[0]
        first = True
        failed_in_turn = 0  # brokers that failed since the last connection or the last wait
        while True:
            session = f"{self.instance}.{self._connects + 1}"
            reason = "connection closed"
            host, port, tls = self._endpoints[self.url_index]
            early: list[tuple[str, bytes, bool]] = []  # what arrives before the connection is set up: handled then
            try:
                async with self._link(host, port, tls, session,
                                      lambda *message, early=early: early.append(message)) as client:
                    patterns = self._router.patterns
                    for i in range(0, len(patterns), 100):  # one SUBSCRIBE packet per 100 topics
                        await client.subscribe([(p, 1) for p in patterns[i:i + 100]])
                    self._connects += 1
                    self.session = session
                    if self.status_topic:
                        await client.publish(self.status_topic, status_payload(True, session), qos=1, retain=True)
                    self._client = client
                    now = self._router.patterns  # changed during the connect: the difference now
                    await self._resubscribe(client, [p for p in now if p not in patterns],
                                            [p for p in patterns if p not in now])
                    self._connected_evt.set()
                    delay = self._backoff[0]
                    failed_in_turn = 0
                    self._client_log.connected()
                    log.info("mqtt connected", broker=self.url,
                             **({"broker_index": self.url_index} if len(self.urls) > 1 else {}))
                    self._notify(True, "")
                    try:
                        # Python 3.11's asyncio.wait_for (inside aiomqtt's connect, subscribe and
                        # publish) loses a cancellation that lands as its future completes: a stop
                        # during a connect would then wait here for ever. A request still counted
                        # on the task is honoured now.
                        task = asyncio.current_task()
                        if task is not None and task.cancelling():
                            raise asyncio.CancelledError
                        client.deliver = self._receive  # from now on each message as it is read
                        for message in early:
                            self._receive(*message)
                        early.clear()
                        await asyncio.wait((client.lost,))  # not cancelled with this task
                        lost = client.lost
                        ended = None if lost.cancelled() else lost.exception()
                        if isinstance(ended, LinkError):  # gmqtt's: it says why
                            raise ended
                        raise LinkError("Disconnected during message iteration") from ended
                    except asyncio.CancelledError:
                        await self._say_offline(client)
                        raise
            except _LINK_ERRORS as exc:
                reason = explain(exc)
            finally:
                was_up = self._client is not None
                self._client = None
                self._connected_evt.clear()
            if was_up or first:  # one line per change of state, not one per failed attempt
                cause = self._client_log.cause
                log.warning("mqtt disconnected", broker=self.url, reason=reason,
                            **({"cause": cause} if cause and cause != reason else {}))
                self._notify(False, reason)
            first = False
            self.reconnects += 1
            failed_in_turn += 1
            if len(self.urls) > 1:
                failed = self.url
                self.url_index = (self.url_index + 1) % len(self.urls)
                if was_up or failed_in_turn == 1:  # not once per attempt while every broker is down
                    log.warning("mqtt broker failed; trying the next", failed=failed, next=self.url,
                                next_index=self.url_index)
            if failed_in_turn >= len(self.urls):  # every broker failed in turn: back off before the next round
                failed_in_turn = 0
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._backoff[1])

    def _link(self, host: str, port: int, tls: bool, session: str,
              deliver: Callable[[str, bytes, bool], None]) -> contextlib.AbstractAsyncContextManager[_Client | GmqttLink]:
        """One connection to one broker through the bus's client library, not yet connected."""
        will = (self.status_topic, status_payload(False, session)) if self.status_topic else None
        tls_context = self._tls_context if tls else None
        if self.client == "gmqtt":
            return GmqttLink(host, port, client_id=self.client_id, keepalive=self._keepalive,
                             username=self._auth[0], password=self._auth[1], will=will,
                             clean_session=self._clean_session, timeout=self._publish_timeout,
                             tls_context=tls_context, deliver=deliver)
        return _Client(
            host, port, identifier=self.client_id, keepalive=self._keepalive,
            username=self._auth[0], password=self._auth[1],
            will=aiomqtt.Will(will[0], will[1], qos=1, retain=True) if will else None,
            clean_session=self._clean_session, max_inflight_messages=self._max_inflight,
            timeout=self._publish_timeout, socket_options=_SOCKET_OPTIONS, tls_context=tls_context,
            logger=self._client_log,  # aiomqtt calls only the logging methods an adapter has too
            deliver=deliver,
        )

    async def _say_offline(self, client: _Client | GmqttLink) -> None:
        """A clean stop does not fire the last will: say "offline" ourselves."""
        if self.status_topic:
            with contextlib.suppress(*_LINK_ERRORS, TimeoutError):
                await client.publish(self.status_topic, status_payload(False, self.session), qos=1, retain=True,
                                     timeout=1.0)

    def _receive(self, topic: str, payload: bytes, retained: bool) -> None:
        if retained and not self._accept_retained:
            self.retained_dropped += 1
            if self.retained_dropped in (1, 10, 100) or self.retained_dropped % 1000 == 0:
                # one line, not one per table: a wildcard subscription can bring a retained message
                # from every table at once (counted in retained_dropped)
                log.warning("retained message dropped", topic=topic, dropped=self.retained_dropped)
            return
        self._dispatch(topic, payload)

    def _dispatch(self, topic: str, payload: bytes) -> None:
        for handler in self._router.handlers(topic):
            try:
                handler(topic, payload)
            except Exception:  # bad input must never kill the reader task
                log.exception("message handler failed", topic=topic)


async def cancel_and_wait(task: asyncio.Task[object]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


__all__ = ["MqttBus", "explain", "parse_broker_url", "make_tls_context", "cancel_and_wait", "status_payload", "unportable_topic"]
