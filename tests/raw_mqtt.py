"""A bare MQTT 3.1.1 client on a blocking socket, for the broker conformance tests
(tests/test_broker_kinds.py): it acknowledges nothing unless told, can vanish without a
DISCONNECT (the will fires), and shows what a library would hide (the DUP flag, a granted QoS,
the broker closing the connection)."""

from __future__ import annotations

import socket
import struct
import time
from typing import NamedTuple


class Publish(NamedTuple):
    topic: str
    payload: bytes
    qos: int
    dup: bool
    retain: bool
    packet_id: int | None


def _length(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n % 128, n // 128
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _str(x: bytes) -> bytes:
    return struct.pack("!H", len(x)) + x


class RawClient:
    def __init__(self, port: int, client_id: str, *, clean: bool = True,
                 will: tuple[str, bytes, int, bool] | None = None, keepalive: int = 30) -> None:
        """Connect (CONNACK accepted, else ConnectionError). ``will``: (topic, payload, qos, retain)."""
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.packet_id = 0
        flags = 0x02 if clean else 0
        payload = _str(client_id.encode())
        if will is not None:
            topic, message, qos, retain = will
            flags |= 0x04 | (qos << 3) | (0x20 if retain else 0)
            payload += _str(topic.encode()) + _str(message)
        self._send(0x10, _str(b"MQTT") + bytes([4, flags]) + struct.pack("!H", keepalive) + payload)
        kind, body = self.read()
        if kind >> 4 != 2 or body[1] != 0:
            raise ConnectionError(f"connect refused: {kind:#x} {body!r}")
        self.session_present = bool(body[0] & 1)

    def _send(self, first: int, body: bytes) -> None:
        self.sock.sendall(bytes([first]) + _length(len(body)) + body)

    def _recv(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
        return data

    def read(self, timeout: float = 5.0) -> tuple[int, bytes]:
        """The next packet (first byte, body); TimeoutError if none comes in time."""
        self.sock.settimeout(timeout)
        first = self._recv(1)[0]
        mult, n = 1, 0
        while True:
            b = self._recv(1)[0]
            n += (b & 127) * mult
            mult *= 128
            if not b & 128:
                return first, self._recv(n)

    def subscribe(self, topic: str, qos: int = 1) -> int:
        """The QoS the broker granted (0x80: refused)."""
        self.packet_id += 1
        self._send(0x82, struct.pack("!H", self.packet_id) + _str(topic.encode()) + bytes([qos]))
        while True:
            kind, body = self.read()
            if kind >> 4 == 9:
                return body[2]

    def publish(self, topic: str, payload: bytes, qos: int = 1, retain: bool = False) -> int | None:
        """Send a PUBLISH; the packet id (QoS > 0) or None. Does not wait for the answer."""
        pid = None
        body = _str(topic.encode())
        if qos:
            self.packet_id += 1
            pid = self.packet_id
            body += struct.pack("!H", pid)
        self._send(0x30 | (qos << 1) | (1 if retain else 0), body + payload)
        return pid

    def publishes(self, n: int, timeout: float = 3.0) -> list[Publish]:
        """Up to ``n`` PUBLISH packets received within ``timeout`` (none acknowledged)."""
        out: list[Publish] = []
        deadline = time.monotonic() + timeout
        while len(out) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                kind, body = self.read(left)
            except (TimeoutError, socket.timeout):
                break
            if kind >> 4 != 3:
                continue
            qos = (kind >> 1) & 3
            tl = struct.unpack("!H", body[:2])[0]
            topic, rest = body[2:2 + tl].decode(), body[2 + tl:]
            pid = None
            if qos:
                pid, rest = struct.unpack("!H", rest[:2])[0], rest[2:]
            out.append(Publish(topic, rest, qos, bool(kind & 8), bool(kind & 1), pid))
        return out

    def puback(self, packet_id: int) -> None:
        self._send(0x40, struct.pack("!H", packet_id))

    def closed_by_broker(self, timeout: float = 5.0) -> bool:
        """Whether the broker closes the connection within ``timeout`` (packets meanwhile are skipped)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                self.read(left)
            except ConnectionError:
                return True
            except (TimeoutError, socket.timeout):
                return False

    def vanish(self) -> None:
        """Close the socket without a DISCONNECT: to the broker, a client that died."""
        self.sock.close()

    def disconnect(self) -> None:
        try:
            self._send(0xE0, b"")
        finally:
            self.sock.close()
