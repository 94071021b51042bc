"""``dealer bench house``: what a thinking house player costs every other table on the host.

The backend serves N Teen Patti tables through a real Mosquitto, dealt one card per second
each by the load generator (:mod:`simulators.loadgen`, its own process), as in ``dealer bench
latency``. A ticker task on the backend's event loop sleeps 1 ms again and again and records
how late it wakes up: the lateness every table's scans, timers and publishes see.

Measured in the same run, in turns (``--rounds`` times each, so drift hits all alike):

* ``no_ai``: nothing else runs (the baseline);
* ``thread``: the Matgo AI (:class:`~dealer.house.matgo.MatgoHousePlayer`, a 100 ms budget)
  decides back to back in a thread of the backend, as before house players had a process
  (``service.house_players = "thread"``): it holds the GIL while it searches;
* ``process``: the same requests through the process pool (:class:`~dealer.edge.house.HouseRunner`,
  ``service.house_players = "process"``, the default).

Each mode's decisions are awaited to the end before the next mode starts, and nothing is
measured for :data:`SWITCH_S` after it: the backlog a mode leaves (the thread mode's starved
loop holds cards for hundreds of milliseconds) drains there, not into the next mode's figures. The requests are mid-game Matgo decisions from seeded deals.
Prints one JSON object (sorted keys): lateness p50/p99/max per mode, the p99 each mode adds to
the baseline, the AI's moves per mode, the scan-to-publish latency of the tables per mode, the
backend process's CPU use per mode (a thread's search counts in it, a worker's does not) and
the host's load average (other work on the host shows in every mode's figures).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from dealer.core.cards import HWATU_48
from dealer.edge.house import HouseRunner, default_workers
from dealer.edge.service import Service
from dealer.games.matgo import MatgoRequest
from dealer.games.matgo_engine import MatgoGame
from dealer.games.matgo_moves import Flip, Phase
from drivers.mqtt import MqttBus
from simulators.loadgen import summarize
from tools.bench import _settings as tables_settings, broker_unreachable, private_broker

TICK_S = 0.001
MODES = ("no_ai", "thread", "process")
#: The added p99 lateness the process pool must stay within (issue 15).
TARGET_ADDED_P99_MS = 1.0
#: Seconds between two modes in which nothing is measured (the previous mode's backlog drains).
SWITCH_S = 3.0


def matgo_requests(n: int, budget_ms: int, seed: int = 1) -> list[MatgoRequest]:
    """``n`` decisions of the house AI from seeded deals, each a few random moves into a game."""
    rng = random.Random(seed)
    out: list[MatgoRequest] = []
    while len(out) < n:
        deck = list(HWATU_48)
        rng.shuffle(deck)
        g = MatgoGame.start({"F": deck[:10], "O": deck[10:20]}, deck[20:28])
        stock = deck[28:]
        for _ in range(rng.randrange(0, 8)):
            if g.result is not None:
                break
            g.apply(Flip(stock.pop(0)) if g.phase == Phase.FLIP else rng.choice(g.legal()))
        if g.result is None and g.phase != Phase.FLIP and len(g.legal()) > 1:
            out.append(MatgoRequest(engine=g.clone(), seat=g.to_move, budget_ms=budget_ms, seed=rng.getrandbits(63)))
    return out


class _Ticker:
    """Sleeps 1 ms on the loop, over and over, and files each wake-up's lateness under the
    mode running now (None: switching, dropped)."""

    def __init__(self) -> None:
        self.mode: str | None = None
        self.samples: dict[str, list[int]] = {m: [] for m in MODES}

    async def run(self) -> None:
        tick_ns = int(TICK_S * 1e9)
        while True:
            t0 = time.perf_counter_ns()
            await asyncio.sleep(TICK_S)
            late = time.perf_counter_ns() - t0 - tick_ns
            if self.mode is not None:
                self.samples[self.mode].append(max(0, late))


async def _think(runner: HouseRunner, requests: list[MatgoRequest], stop: asyncio.Event) -> int:
    """Decide the requests back to back until ``stop``; the moves decided."""
    moves = 0
    while not stop.is_set():
        await runner.decide(requests[moves % len(requests)])
        moves += 1
    return moves


async def run_house_bench(tables: int = 200, seconds: float = 10.0, rounds: int = 2, budget_ms: int = 100,
                          workers: int | None = None, broker: str | None = None, loop: str = "uvloop",
                          settle: float = 10.0) -> dict[str, Any]:
    runners = {"thread": HouseRunner(lambda *a: None, lambda: 0, mode="thread"),
               "process": HouseRunner(lambda *a: None, lambda: 0, mode="process", workers=workers)}
    requests = matgo_requests(16, budget_ms)
    load = [round(os.getloadavg()[0], 2)]  # other work on the host shows in every mode's figures
    with tempfile.TemporaryDirectory(prefix="dealer-bench-house-") as tmpdir:
        tmp = Path(tmpdir)
        mq = None if broker is not None else private_broker(tmp)
        broker = broker if mq is None else mq.url
        service = Service(tables_settings(tmp, broker, tables, True), bus=MqttBus(broker, client_id="bench-backend"))
        service.latency_samples = []
        run = asyncio.create_task(service.run())
        ticker = _Ticker()
        tick = asyncio.create_task(ticker.run())
        proc = None
        moves = {m: 0 for m in MODES}
        scans: dict[str, list[int]] = {m: [] for m in MODES}
        cpu = {m: 0.0 for m in MODES}  # CPU seconds of the backend process (all its threads)
        wall = {m: 0.0 for m in MODES}
        try:
            await asyncio.wait_for(service.ready.wait(), 60)
            await runners["process"].worker_pid()  # the fork server and the worker's imports, before measuring
            await runners["thread"].decide(requests[0])
            total = settle + rounds * len(MODES) * (seconds + SWITCH_S + 1) + 60
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "simulators.loadgen", "--broker", broker, "--tables", str(tables),
                "--seconds", str(total), "--loop", loop, stdout=asyncio.subprocess.DEVNULL)
            await asyncio.sleep(settle)  # every table dealing
            for _ in range(rounds):
                for mode in MODES:
                    stop = asyncio.Event()
                    thinker = (asyncio.create_task(_think(runners[mode], requests, stop))
                               if mode in runners else None)
                    first_scan = len(service.latency_samples)
                    cpu0, wall0 = time.process_time(), time.perf_counter()
                    ticker.mode = mode
                    await asyncio.sleep(seconds)
                    ticker.mode = None
                    cpu[mode] += time.process_time() - cpu0
                    wall[mode] += time.perf_counter() - wall0
                    scans[mode] += service.latency_samples[first_scan:]
                    stop.set()
                    if thinker is not None:
                        moves[mode] += await thinker  # its last decision ends before the next mode starts
                    await asyncio.sleep(SWITCH_S)  # not measured: what this mode left queued drains
        finally:
            tick.cancel()
            if proc is not None and proc.returncode is None:
                proc.terminate()
                await proc.wait()
            for runner in runners.values():
                await runner.close()
            run.cancel()
            await asyncio.gather(tick, run, return_exceptions=True)
            if mq is not None:
                mq.stop()
    lateness = {m: summarize(ticker.samples[m]) for m in MODES}
    added = {m: round(lateness[m]["p99"] - lateness["no_ai"]["p99"], 3) for m in ("thread", "process")}
    return {
        "bench": "house",
        "tables": tables,
        "seconds_per_mode": seconds * rounds,
        "rounds": rounds,
        "loop": loop,
        "house_player": {"game": "matgo", "budget_ms": budget_ms, "process_workers": runners["process"].workers},
        "lateness_ms": lateness,
        "added_p99_ms": added,
        "target_added_p99_ms": TARGET_ADDED_P99_MS,
        "target_met": added["process"] <= TARGET_ADDED_P99_MS,
        "ai_moves": {m: moves[m] for m in ("thread", "process")},
        "scan_to_publish_ms": {m: summarize(scans[m]) for m in MODES},
        "backend_cpu_percent": {m: round(100 * cpu[m] / wall[m], 1) if wall[m] else None for m in MODES},
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "load_average_1m": {"start": load[0], "end": round(os.getloadavg()[0], 2)}},
    }


def _cmd(args: argparse.Namespace) -> int:
    from dealer.cli.args import fail
    from dealer.edge.logs import configure_logging
    from dealer.edge.runner import run_loop

    configure_logging("warning")
    problem = broker_unreachable(args.broker)
    if problem is not None:
        return fail("dealer bench house", problem)
    result = run_loop(run_house_bench(tables=args.tables, seconds=args.seconds, rounds=args.rounds,
                                      budget_ms=args.budget_ms, workers=args.workers, broker=args.broker,
                                      loop=args.loop), args.loop)
    print(json.dumps(result, sort_keys=True))
    return 0


def register(bsub: argparse._SubParsersAction) -> None:
    """``dealer bench house`` (added to ``dealer bench`` by :mod:`tools.cli`)."""
    from dealer.cli.args import broker_url, int_range, seconds

    p = bsub.add_parser("house", help="event-loop lateness at N tables while the Matgo AI thinks: "
                                      "no AI, AI in a thread, AI in the process pool")
    p.add_argument("--tables", type=int_range(1, 10_000), default=200, metavar="N",
                   help="Teen Patti tables dealt one card a second each (default 200)")
    p.add_argument("--seconds", type=seconds(0, 86_400), default=10.0, metavar="S",
                   help="length of each turn of each mode (default 10)")
    p.add_argument("--rounds", type=int_range(1, 1000), default=2, metavar="K",
                   help="turns of each mode, alternating (default 2)")
    p.add_argument("--budget-ms", type=int_range(1, 100), default=100, metavar="MS",
                   help="the AI's thinking budget per move (default 100, the table default)")
    p.add_argument("--workers", type=int_range(1, 64), default=default_workers(), metavar="W",
                   help=f"process pool size (default {default_workers()}, as service.house_workers unset)")
    p.add_argument("--broker", type=broker_url, metavar="URL",
                   help="use this broker instead of starting a private mosquitto")
    p.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop",
                   help="event loop of the backend and the load generator (default uvloop, as dealer run)")
    p.set_defaults(func=_cmd)
