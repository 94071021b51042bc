"""``dealer bench publish``: CPU per QoS 1 publish on the backend's MQTT path, beside the library's.

Every card costs the backend several QoS 1 publishes (the event, the prompt, the retained
prompt and state), and at a thousand tables paho's per-message work is the largest share of
its CPU. This measures, through one private Mosquitto, in one process, in turns:

* ``aiomqtt``: the library's own ``Client.publish`` (``asyncio.wait_for`` on an Event);
* ``publish``: :meth:`drivers.mqtt.MqttBus.publish` (a bare future and a timer);
* ``publish_nowait``: :meth:`drivers.mqtt.MqttBus.publish_nowait` (no coroutine, no Task: the
  path the backend's live and retained messages take).

``window`` publishes are in flight at a time (as many tables publishing at once); the figure is
CPU time per publish (µs, every thread of the process), the median of ``rounds`` turns.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import resource
import statistics
import tempfile
from pathlib import Path
from typing import Any

import aiomqtt

from drivers.mqtt import MqttBus
from simulators.broker import MosquittoProcess

PAYLOAD = b"x" * 300  # about a card_registered event


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def run_publish_bench(n: int = 20_000, window: int = 50, rounds: int = 3) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="dealer-bench-publish-") as tmp:
        mq = MosquittoProcess(Path(tmp), persistence=False)
        mq.start()
        bus = MqttBus(mq.url, client_id="bench-publish")
        task = asyncio.create_task(bus.run())
        try:
            await asyncio.wait_for(bus.wait_connected(), 10)
            client = bus._client  # the connected aiomqtt client, for the library's own publish
            assert client is not None

            async def library(topic: str) -> None:
                await aiomqtt.Client.publish(client, topic, PAYLOAD, qos=1, timeout=10)

            async def ours(topic: str) -> None:
                await bus.publish(topic, PAYLOAD)

            paths = {"aiomqtt": lambda t: library(t), "publish": lambda t: ours(t),
                     "publish_nowait": lambda t: bus.publish_nowait(t, PAYLOAD)}
            samples: dict[str, list[float]] = {k: [] for k in paths}
            for _ in range(rounds):
                for name, send in paths.items():
                    c0 = _cpu()
                    for k in range(0, n, window):
                        await asyncio.wait_for(asyncio.gather(*(send(f"bench/t{i % 1000}/events")
                                                                for i in range(k, k + window))), 30)
                    samples[name].append((_cpu() - c0) / n * 1e6)
            return {"bench": "publish", "publishes": n, "window": window, "rounds": rounds,
                    "cpu_us_per_publish": {k: round(statistics.median(v), 1) for k, v in samples.items()},
                    "runs_us": {k: [round(x, 1) for x in v] for k, v in samples.items()},
                    "machine": {"python": platform.python_version()}}
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            mq.stop()


def _cmd(args: argparse.Namespace) -> int:
    from dealer.edge.logs import configure_logging
    from dealer.edge.runner import run_loop

    configure_logging("warning")
    result = run_loop(run_publish_bench(args.publishes, args.window, args.rounds), args.loop)
    print(json.dumps(result, sort_keys=True))
    return 0


def register(bsub: argparse._SubParsersAction) -> None:
    """``dealer bench publish`` (added to ``dealer bench`` by :mod:`tools.cli`)."""
    from dealer.cli.args import int_range

    p = bsub.add_parser("publish", help="CPU per QoS 1 publish: the backend's path beside aiomqtt's own")
    p.add_argument("--publishes", type=int_range(100, 10_000_000), default=20_000, metavar="N",
                   help="publishes per path per turn (default 20,000)")
    p.add_argument("--window", type=int_range(1, 10_000), default=50, metavar="W",
                   help="publishes in flight at a time (default 50)")
    p.add_argument("--rounds", type=int_range(1, 100), default=3, metavar="K",
                   help="turns of each path, alternating; the median is reported (default 3)")
    p.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop",
                   help="event loop (default uvloop, as dealer run)")
    p.set_defaults(func=_cmd)
