"""Many-table load generator: N scanner gateways dealing one card per second per table.

Runs as its own process (``python -m simulators.loadgen``) so it does not share an event
loop or a core with the backend under test. For each table it follows the dealer-station
prompts over MQTT like a dealer: on ``NEXT`` it publishes the next card's scanner message
no sooner than one second after that table's previous card, and it measures the end-to-end
latency from its publish to the matching ``card_registered`` event arriving back. Tables
start staggered over the first second, like a real studio's unsynchronised tables.
Prints one JSON object with its samples summary on stdout when done.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
from dataclasses import dataclass, field

from dealer.core.cards import STANDARD_52
from drivers.mqtt import MqttBus
from drivers.scanner_json import ScannerMessage


@dataclass
class _Table:
    table_id: str
    reader: str
    deck: list[str] = field(default_factory=list)
    seq: int = 0
    last_card_ns: int = 0
    round_id: str | None = None
    step_sent: int = 0
    sent: dict[str, int] = field(default_factory=dict)  # card -> publish time (ns)


def table_ids(n: int) -> list[tuple[str, str]]:
    return [(f"T{i:04d}", f"R{i:04d}") for i in range(1, n + 1)]


def summarize(samples_ns: list[int]) -> dict[str, float | int]:
    if not samples_ns:
        return {"count": 0}
    s = sorted(samples_ns)

    def q(p: float) -> float:
        return round(s[min(len(s) - 1, int(p * len(s)))] / 1e6, 3)

    return {"count": len(s), "p50": q(0.50), "p99": q(0.99), "max": round(s[-1] / 1e6, 3)}


async def run_loadgen(url: str, n_tables: int, seconds: float, *, card_interval: float = 1.0,
                      heartbeat: float = 3.0, seed: int = 1) -> dict[str, object]:
    rng = random.Random(seed)
    bus = MqttBus(url, client_id=f"loadgen-{seed}")
    tables = {tid: _Table(tid, reader) for tid, reader in table_ids(n_tables)}
    latencies: list[int] = []
    cards_sent = 0
    queue: asyncio.Queue[tuple[str, dict]] = asyncio.Queue()

    def on_msg(topic: str, payload: bytes) -> None:
        now = time.monotonic_ns()
        msg = json.loads(payload)
        if topic.endswith("/events") and msg.get("event") == "card_registered":
            t = tables.get(msg["table_id"])
            sent = t.sent.pop(msg["data"].get("card"), None) if t else None
            if sent is not None:
                latencies.append(now - sent)
        elif topic.endswith("/prompts"):
            queue.put_nowait((msg["table_id"], msg))

    bus.subscribe("studio/v1/tables/+/prompts", on_msg)
    bus.subscribe("studio/v1/tables/+/events", on_msg)
    bus_task = asyncio.create_task(bus.run())
    await asyncio.wait_for(bus.wait_connected(), 10)

    async def publish(t: _Table, status: str, payload: str = "", advance: bool = True) -> None:
        if advance:
            t.seq += 1
        msg = ScannerMessage(reader=t.reader, seq=t.seq, status=status, payload=payload)  # type: ignore[arg-type]
        await bus.publish(f"studio/v1/tables/{t.table_id}/scanner", msg.model_dump_json().encode(), qos=1)

    async def deal(t: _Table, step: int) -> None:
        nonlocal cards_sent
        wait = t.last_card_ns + int(card_interval * 1e9) - time.monotonic_ns()
        if wait > 0:
            await asyncio.sleep(wait / 1e9)
        card = t.deck.pop()
        t.last_card_ns = time.monotonic_ns()
        t.sent[card] = t.last_card_ns
        cards_sent += 1
        await publish(t, "OK", card)

    async def heartbeats(t: _Table, delay: float) -> None:
        await asyncio.sleep(delay)
        await publish(t, "BOOT", "loadgen", advance=False)
        while True:
            await publish(t, "HB", advance=False)
            await asyncio.sleep(heartbeat)

    for t in tables.values():
        t.seq = 0
    hb_tasks = [asyncio.create_task(heartbeats(t, rng.uniform(0, 1.0))) for t in tables.values()]
    deadline = time.monotonic() + seconds
    pending: set[asyncio.Task[None]] = set()
    try:
        while time.monotonic() < deadline:
            try:
                async with asyncio.timeout(max(0.01, deadline - time.monotonic())):
                    tid, p = await queue.get()
            except TimeoutError:
                break
            t = tables[tid]
            if p["round_id"] != t.round_id and p["round_id"] is not None:
                t.round_id, t.step_sent, t.sent = p["round_id"], 0, {}
                t.deck = list(STANDARD_52)
                rng.shuffle(t.deck)
            if p["kind"] in ("NEXT", "RESCAN") and p["step"] is not None and p["step"] > t.step_sent:
                t.step_sent = p["step"]
                task = asyncio.create_task(deal(t, p["step"]))
                pending.add(task)
                task.add_done_callback(pending.discard)
    finally:
        for task in hb_tasks + list(pending):
            task.cancel()
        await asyncio.gather(*hb_tasks, *pending, return_exceptions=True)
        bus_task.cancel()
        await asyncio.gather(bus_task, return_exceptions=True)
    return {"cards_sent": cards_sent, "end_to_end_ms": summarize(latencies)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--broker", required=True)
    ap.add_argument("--tables", type=int, required=True)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--loop", choices=["uvloop", "asyncio"], default="asyncio")
    args = ap.parse_args()
    from dealer.edge.logs import configure_logging
    from dealer.edge.runner import run_loop

    configure_logging("warning")
    result = run_loop(run_loadgen(args.broker, args.tables, args.seconds), args.loop)
    print(json.dumps(result, sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
