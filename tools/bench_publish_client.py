"""One third-party MQTT client's side of ``dealer bench publish``, run by its own venv's Python.

Standalone on purpose: it imports nothing of this project (the venv that runs it holds only the
client library, and uvloop), so a client that cannot live beside aiomqtt 2.5 in the backend's
environment (aiomqtt 3 has the same package name) is measured all the same, and the backend's
dependencies do not grow. :mod:`tools.bench_publish` builds the venvs and runs this.

``bench``: connect to a broker, publish ``--n`` QoS 1 messages ``--window`` at a time (as the
in-process paths do: one ``asyncio.wait_for(gather(...), 30)`` per window), each one done only
when its PUBACK has arrived, and print the CPU time of this process per publish (µs, every
thread, ``getrusage``), with the connect and a warm-up left out.

``probe``: connect, publish ``--n`` QoS 1 messages one by one and wait for each PUBACK; print
whether that worked, and why not.

Either prints one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import json
import logging
import os
import resource
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

PAYLOAD = b"x" * 300  # as tools.bench_publish (about a card_registered event)
Send = Callable[[str], Awaitable[Any]]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _versions(*names: str) -> dict[str, str]:
    out = {}
    for n in names:
        try:
            out[n] = importlib.metadata.version(n)
        except importlib.metadata.PackageNotFoundError:
            out[n] = "not installed"
    return out


@contextlib.asynccontextmanager
async def _aiomqtt3(host: str, port: int, cid: str, info: dict[str, Any]) -> AsyncIterator[Send]:
    """aiomqtt 3 (MQTT 5 only, the ``mqtt5`` codec): ``publish`` returns the PUBACK."""
    import aiomqtt

    info.update(library=_versions("aiomqtt", "mqtt5"), protocol="5")
    if not info["library"]["aiomqtt"].startswith("3."):
        raise ImportError(f"aiomqtt {info['library']['aiomqtt']} is installed here, not aiomqtt 3")
    async with aiomqtt.Client(hostname=host, port=port, identifier=cid, clean_start=True) as client:
        ids = client.packet_ids

        def send(topic: str) -> Awaitable[Any]:
            return client.publish(topic, PAYLOAD, qos=aiomqtt.QoS.AT_LEAST_ONCE, packet_id=next(ids))

        yield send


@contextlib.asynccontextmanager
async def _gmqtt(host: str, port: int, cid: str, info: dict[str, Any], v311: bool = False) -> AsyncIterator[Send]:
    """gmqtt: ``publish`` is synchronous and returns nothing; a QoS 1 message stays in the
    client's persistent storage until its PUBACK removes it. A storage of our own (the
    ``persistent_storage`` argument) resolves one future per message there: what a backend
    that must know each message's fate would do."""
    import gmqtt
    from gmqtt.mqtt.constants import MQTTv50, MQTTv311
    from gmqtt.storage import PersistentStorage

    loop = asyncio.get_running_loop()

    class AckStorage(PersistentStorage):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.waiting: dict[int, asyncio.Future[None]] = {}
            self.last: asyncio.Future[None] | None = None

        def push_message(self, mid: int, raw_package: bytes) -> None:
            super().push_message(mid, raw_package)
            self.last = self.waiting[mid] = loop.create_future()

        def remove_message_by_mid(self, mid: int) -> None:
            super().remove_message_by_mid(mid)
            fut = self.waiting.pop(mid, None)
            if fut is not None and not fut.done():
                fut.set_result(None)

    storage = AckStorage()
    client = gmqtt.Client(cid, clean_session=True, persistent_storage=storage)
    # gmqtt's default: MQTT 5, then 3.1.1 if the broker refuses 5 with a CONNACK
    await client.connect(host, port, version=MQTTv311 if v311 else MQTTv50, keepalive=60)
    version = client._connection_state.protocol_version  # which one the broker took
    info.update(library=_versions("gmqtt"), protocol={MQTTv50: "5", MQTTv311: "3.1.1"}.get(version, str(version)))
    try:
        def send(topic: str) -> Awaitable[Any]:
            client.publish(topic, PAYLOAD, qos=1)
            assert storage.last is not None
            fut, storage.last = storage.last, None
            return fut

        yield send
    finally:
        await client.disconnect()


@contextlib.asynccontextmanager
async def _amqtt(host: str, port: int, cid: str, info: dict[str, Any]) -> AsyncIterator[Send]:
    """amqtt's client (MQTT 3.1.1): ``publish`` returns once the PUBACK has arrived."""
    from amqtt.client import MQTTClient

    info.update(library=_versions("amqtt"), protocol="3.1.1")
    client = MQTTClient(client_id=cid, config={"auto_reconnect": False})
    await client.connect(f"mqtt://{host}:{port}/", cleansession=True)
    try:
        def send(topic: str) -> Awaitable[Any]:
            return client.publish(topic, PAYLOAD, qos=1)

        yield send
    finally:
        await client.disconnect()


def _gmqtt311(host: str, port: int, cid: str, info: dict[str, Any]) -> contextlib.AbstractAsyncContextManager[Send]:
    return _gmqtt(host, port, cid, info, v311=True)


CLIENTS = {"aiomqtt3": _aiomqtt3, "gmqtt": _gmqtt, "gmqtt311": _gmqtt311, "amqtt": _amqtt}


class _LastWarning(logging.Handler):
    """The library's own last warning (its reason for a refused connect, say), for the JSON."""

    last: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        _LastWarning.last = f"{record.name}: {record.getMessage()}"[:200]


async def _bench(args: argparse.Namespace, info: dict[str, Any]) -> None:
    async def windows(send: Send, start: int, count: int) -> None:
        for k in range(start, start + count, args.window):
            await asyncio.wait_for(asyncio.gather(*(send(f"bench/t{i % 1000}/events")
                                                    for i in range(k, min(k + args.window, start + count)))), 30)

    async with CLIENTS[args.client]("127.0.0.1", args.port, f"bench-{args.client}-{os.getpid()}", info) as send:
        await asyncio.wait_for(windows(send, 0, args.warmup), 60)
        c0 = _cpu()
        await windows(send, 0, args.n)
        info["cpu_us_per_publish"] = (_cpu() - c0) / args.n * 1e6


async def _probe(args: argparse.Namespace, info: dict[str, Any]) -> None:
    cid = f"probe-{args.client}-{os.getpid()}"
    step = "connect"
    t0 = time.monotonic()
    try:
        async with asyncio.timeout(args.timeout):
            async with CLIENTS[args.client]("127.0.0.1", args.port, cid, info) as send:
                info["connect_s"] = round(time.monotonic() - t0, 2)
                for i in range(args.n):
                    step = f"QoS 1 publish {i + 1} (waiting for its PUBACK)"
                    await send(f"bench/probe/{i}")
                step = "disconnect"
        info["ok"] = True
    except TimeoutError:
        seen = f" (the library's last warning: {_LastWarning.last})" if _LastWarning.last else ""
        info.update(ok=False, error=f"{step}{_over(info)}: no answer within {args.timeout:.0f} s{seen}")
    except Exception as e:  # noqa: BLE001 - the reason is the answer
        info.update(ok=False, error=f"{step}{_over(info)}: {type(e).__name__}: {e}"[:300])


def _over(info: dict[str, Any]) -> str:
    return f" (MQTT {info['protocol']})" if "protocol" in info else ""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=["bench", "probe"])
    p.add_argument("--client", choices=sorted(CLIENTS), required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--n", type=int, default=3)
    p.add_argument("--window", type=int, default=50)
    p.add_argument("--warmup", type=int, default=0)
    p.add_argument("--timeout", type=float, default=20.0)
    p.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop")
    args = p.parse_args(argv)
    # amqtt and gmqtt log every refusal: kept (the last one) for the JSON, not printed
    logging.getLogger().setLevel(logging.WARNING)
    logging.getLogger().addHandler(_LastWarning(logging.WARNING))
    info: dict[str, Any] = {"python": sys.version.split()[0]}
    run = _bench if args.mode == "bench" else _probe
    if args.loop == "uvloop":
        try:
            import uvloop
        except ImportError:
            info["loop"] = "asyncio (uvloop is not installed in this venv)"
            asyncio.run(run(args, info))
        else:
            info["loop"] = "uvloop"
            uvloop.run(run(args, info))
    else:
        info["loop"] = "asyncio"
        asyncio.run(run(args, info))
    print(json.dumps(info, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
