"""Drive the MQTT client's socket callbacks under uvloop the way paho does around a broker
restart. Run as a subprocess by tests/test_mqtt_sockets.py (one failure mode is a SIGABRT).

``python uvloop_socket_reuse.py {ours|aiomqtt} {reuse|reset}``; prints ``survived`` when the
client came through with no error in the loop's exception handler.

* ``reuse``: a socket registered for reading and writing is closed, and a new socket gets
  the same fd number (as a reconnect does).
* ``reset``: the broker resets the TCP connection (uvloop closes its poll silently); paho
  then wants to write (its keep-alive ping): the client must notice the dead connection,
  and after the reconnect, on the same fd number, read again.
"""

import asyncio
import socket
import struct
import sys

import aiomqtt
import uvloop

from drivers.mqtt import _Client


class FakePaho:
    """Only what the socket callbacks touch."""

    def __init__(self, sock: socket.socket | None = None) -> None:
        self._sock = sock
        self.reads = 0

    def loop_read(self) -> None:
        self.reads += 1
        if self._sock is not None and not self._sock.recv(64):
            raise ConnectionResetError("connection closed by the broker")

    def loop_write(self) -> None:
        pass

    def want_write(self) -> bool:
        return True  # always something to write: the writer is registered


async def reuse(cls: type) -> bool:
    c = cls(hostname="127.0.0.1", port=1)
    paho = FakePaho()
    a, b = socket.socketpair()
    fd = a.fileno()
    c._on_socket_open(paho, None, a)
    c._on_socket_register_write(paho, None, a)
    await asyncio.sleep(0.05)
    c._on_socket_close(paho, None, a)
    a.close()
    await asyncio.sleep(0.1)
    x, y = socket.socketpair()
    s = x if x.fileno() == fd else y
    assert s.fileno() == fd
    c._on_socket_open(paho, None, s)
    c._on_socket_register_write(paho, None, s)
    await asyncio.sleep(0.1)
    c._on_socket_close(paho, None, s)
    return True


async def reset(cls: type) -> bool:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    c = cls(hostname="127.0.0.1", port=1)
    sock = socket.create_connection(srv.getsockname())
    sock.setblocking(False)
    conn, _ = srv.accept()
    fd = sock.fileno()
    paho = FakePaho(sock)
    c._on_socket_open(paho, None, sock)
    await asyncio.sleep(0.05)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()  # RST
    await asyncio.sleep(0.2)
    c._on_socket_register_write(paho, None, sock)  # paho's keep-alive ping
    await asyncio.sleep(0.2)
    if not c._disconnected.done():
        print("the reset went unnoticed", flush=True)
        return False
    assert isinstance(c._disconnected.exception(), OSError)  # what aiomqtt reconnects on
    c._on_socket_close(paho, None, sock)
    sock.close()
    # the reconnect: a new connection on the same fd number must read again
    sock2 = socket.create_connection(srv.getsockname())
    sock2.setblocking(False)
    conn2, _ = srv.accept()
    assert sock2.fileno() == fd, "the new socket did not reuse the fd number"
    paho2 = FakePaho(sock2)
    c._disconnected = asyncio.get_running_loop().create_future()
    c._on_socket_open(paho2, None, sock2)
    await asyncio.sleep(0.05)
    conn2.sendall(b"\x20\x02\x00\x00")  # a CONNACK
    await asyncio.sleep(0.2)
    if paho2.reads == 0:
        print("the new connection never reads", flush=True)
        return False
    c._on_socket_close(paho2, None, sock2)
    return True


async def main(mode: str, scenario: str) -> None:
    loop = asyncio.get_running_loop()
    errors: list[object] = []
    loop.set_exception_handler(lambda _loop, ctx: errors.append(ctx.get("exception") or ctx.get("message")))
    cls = _Client if mode == "ours" else aiomqtt.Client
    ok = await (reuse if scenario == "reuse" else reset)(cls)
    if errors:
        print(f"loop errors: {errors}", flush=True)
    if ok and not errors:
        print("survived", flush=True)


uvloop.run(main(sys.argv[1], sys.argv[2]))
