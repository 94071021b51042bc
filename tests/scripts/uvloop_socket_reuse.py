"""Drive the MQTT client's socket callbacks under uvloop: register a reader and a writer, close
the socket, then reuse its fd number for a new one (as after a broker restart). Run as a
subprocess by tests/test_mqtt_sockets.py, because the failure it guards against aborts the process."""
import asyncio, socket, sys, uvloop, aiomqtt
from drivers.mqtt import _Client
mode = sys.argv[1]
class FakePaho:  # only what the socket callbacks touch
    _sock = None
    def loop_read(self): pass
    def loop_write(self): pass
async def main():
    cls = _Client if mode == "ours" else aiomqtt.Client
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
    print("survived", flush=True)
uvloop.run(main())
