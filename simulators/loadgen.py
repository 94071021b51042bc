"""Many-table load generator: N scanner gateways dealing one card per second per table.

Runs as its own process (``python -m simulators.loadgen``) so it does not share an event
loop or a core with the backend under test. For each table it follows the dealer-station
prompts over MQTT like a dealer: on ``NEXT`` it publishes the next card's scanner message
no sooner than one second after that table's previous card, and it measures the end-to-end
latency from its publish to the matching ``card_registered`` event arriving back. Tables
start staggered over the first second, like a real studio's unsynchronised tables, and with
``phase="spread"`` (the default) each round's first card goes a random part of a second after
its prompt, as a dealer's hand does: the backend opens every table's rounds on the same
timers, so without it a thousand tables deal in step, about a thousand cards in the same few
milliseconds each second. ``phase="step"`` keeps them in step: the worst burst, on purpose.
Prints one JSON object with its samples summary on stdout when done.

It also reports on itself, so a benchmark can tell a slow generator from a slow backend:
its event loop's lag (a 10 ms ticker's lateness), how late each card went out against the
moment it was due (the prompt's arrival, or one second after the table's previous card,
whichever is later: a late prompt is the backend's delay, a late publish after it is ours),
and its CPU time. Every wait has a deadline: a teardown that does not finish within
:data:`TEARDOWN_S` is reported (what was still running), never waited for.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from dealer.core.cards import STANDARD_52
from drivers.mqtt import MqttBus
from drivers.scanner_json import ScannerMessage
from simulators.feed import Feed
from simulators.settlement import SettlementConsumer


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


#: Seconds the generator's teardown may take before it is reported and abandoned.
TEARDOWN_S = 5.0
#: How the tables' deals lie against each other in time (see the module's docstring).
PHASES = ("spread", "step")
#: The window of the load's burstiness figure (``peak_cards_per_10ms``).
BURST_WINDOW_NS = 10_000_000
#: The lag ticker's period, seconds.
TICK_S = 0.01


def cpu_seconds() -> float:
    """This process's CPU time (user + system, every thread), seconds."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def table_ids(n: int) -> list[tuple[str, str]]:
    return [(f"T{i:04d}", f"R{i:04d}") for i in range(1, n + 1)]


def peak(times_ns: list[int], window_ns: int) -> int:
    """The most of ``times_ns`` within any one window of ``window_ns``: how bursty a load is."""
    s, best, lo = sorted(times_ns), 0, 0
    for hi, t in enumerate(s):
        while t - s[lo] >= window_ns:
            lo += 1
        best = max(best, hi - lo + 1)
    return best


def summarize(samples_ns: list[int]) -> dict[str, float | int]:
    if not samples_ns:
        return {"count": 0}
    s = sorted(samples_ns)

    def q(p: float) -> float:
        return round(s[min(len(s) - 1, int(p * len(s)))] / 1e6, 3)

    return {"count": len(s), "p50": q(0.50), "p99": q(0.99), "max": round(s[-1] / 1e6, 3)}


async def run_loadgen(url: str, n_tables: int, seconds: float, *, card_interval: float = 1.0,
                      heartbeat: float = 3.0, seed: int = 1, settle: bool = True,
                      phase: str = "spread") -> dict[str, object]:
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {PHASES}, not {phase!r}")
    rng = random.Random(seed)
    bus = MqttBus(url, client_id=f"loadgen-{seed}")
    tables = {tid: _Table(tid, reader) for tid, reader in table_ids(n_tables)}
    ledger_dir = tempfile.TemporaryDirectory(prefix="dealer-loadgen-ledger-")
    # settlement acknowledges every result, as a studio's does: without it every result stays in
    # the backend's outbox, is sent again and again, and its round is never settled
    consumer = (SettlementConsumer(bus, list(tables), Path(ledger_dir.name) / "ledger.sqlite", place_bets=False)
                if settle else None)
    latencies: list[int] = []
    lags: list[int] = []  # the ticker's lateness (ns)
    delays: list[int] = []  # how late each card went out after it was due (ns)
    hands: list[int] = []  # phase "spread": each round's first card's chosen delay after its prompt (ns)
    sent_at: list[int] = []  # every card's publish time (ns): the load's burstiness
    cards_sent = 0
    queue: asyncio.Queue[tuple[str, dict, int]] = asyncio.Queue()

    feed = Feed()

    def registered(ev: dict, now: int) -> None:
        if ev.get("event") == "card_registered":
            t = tables.get(ev["table_id"])
            sent = t.sent.pop(ev["data"].get("card"), None) if t else None
            if sent is not None:
                latencies.append(now - sent)

    def on_state(topic: str, payload: bytes) -> None:
        """A table's state (protocol 2): the card_registered events it carries end a card's round
        trip; its prompts tell the dealer what to deal next."""
        now = time.monotonic_ns()
        news = feed.read(payload)
        for ev in news.events:
            registered(ev, now)
        for prompt in news.prompts:
            queue.put_nowait((prompt["table_id"], prompt, now))

    def on_live(topic: str, payload: bytes) -> None:
        """Protocol 1's live events and prompts: the same load drives a backend from before
        protocol 2 (``dealer bench against`` an older commit); a protocol-2 backend sends only
        refusals on ``events`` and nothing on ``prompts``."""
        now = time.monotonic_ns()
        msg = json.loads(payload)
        if topic.endswith("/events"):
            registered(msg, now)
        elif topic.endswith("/prompts"):
            queue.put_nowait((msg["table_id"], msg, now))

    bus.subscribe("studio/v1/tables/+/state", on_state)
    bus.subscribe("studio/v1/tables/+/prompts", on_live)
    bus.subscribe("studio/v1/tables/+/events", on_live)
    bus_task = asyncio.create_task(bus.run(), name="bus")
    try:
        await asyncio.wait_for(bus.wait_connected(), 10)
    except TimeoutError:
        bus_task.cancel()
        return {"error": f"the load generator could not connect to {url} within 10 s"}

    async def publish(t: _Table, status: str, payload: str = "", advance: bool = True) -> None:
        if advance:
            t.seq += 1
        msg = ScannerMessage(reader=t.reader, seq=t.seq, status=status, payload=payload)  # type: ignore[arg-type]  # pydantic validates the status text against ScannerMessage's literals
        await bus.publish(f"studio/v1/tables/{t.table_id}/scanner", msg.model_dump_json().encode(), qos=1)

    async def deal(t: _Table, first: bool, prompted_ns: int) -> None:
        nonlocal cards_sent
        due = max(prompted_ns, t.last_card_ns + int(card_interval * 1e9))
        hand = 0
        if first and phase == "spread":  # the dealer's hand, not a delay: due only after it
            hand = int(rng.uniform(0, card_interval) * 1e9)
            due = max(due, prompted_ns + hand)
        wait = due - time.monotonic_ns()
        if wait > 0:
            await asyncio.sleep(wait / 1e9)
        card = t.deck.pop()
        t.last_card_ns = time.monotonic_ns()
        delays.append(max(0, t.last_card_ns - due))
        t.sent[card] = t.last_card_ns
        sent_at.append(t.last_card_ns)
        if first and phase == "spread":
            hands.append(hand)
        cards_sent += 1
        await publish(t, "OK", card)

    async def heartbeats(t: _Table, delay: float) -> None:
        await asyncio.sleep(delay)
        await publish(t, "BOOT", "loadgen", advance=False)
        while True:
            await publish(t, "HB", advance=False)
            await asyncio.sleep(heartbeat)

    async def ticker() -> None:
        expected = time.monotonic_ns() + int(TICK_S * 1e9)
        while True:
            await asyncio.sleep(TICK_S)
            now = time.monotonic_ns()
            lags.append(max(0, now - expected))
            expected = now + int(TICK_S * 1e9)

    for t in tables.values():
        t.seq = 0
    background = [asyncio.create_task(heartbeats(t, rng.uniform(0, 1.0)), name=f"heartbeats-{t.table_id}")
                  for t in tables.values()]
    background.append(asyncio.create_task(ticker(), name="ticker"))
    cpu0, wall0 = cpu_seconds(), time.monotonic()
    deadline = wall0 + seconds
    pending: set[asyncio.Task[None]] = set()
    try:
        while time.monotonic() < deadline:
            try:
                async with asyncio.timeout(max(0.01, deadline - time.monotonic())):
                    tid, p, arrived = await queue.get()
            except TimeoutError:
                break
            t = tables[tid]
            if p["round_id"] != t.round_id and p["round_id"] is not None:
                t.round_id, t.step_sent, t.sent = p["round_id"], 0, {}
                t.deck = list(STANDARD_52)
                rng.shuffle(t.deck)
            if p["kind"] in ("NEXT", "RESCAN") and p["step"] is not None and p["step"] > t.step_sent:
                first, t.step_sent = t.step_sent == 0, p["step"]
                task = asyncio.create_task(deal(t, first, arrived), name=f"deal-{tid}")
                pending.add(task)
                task.add_done_callback(pending.discard)
    finally:
        cpu_s, wall_s = cpu_seconds() - cpu0, time.monotonic() - wall0
        tasks = [*background, *pending, bus_task]
        for task in tasks:
            task.cancel()
        _, stuck = await asyncio.wait(tasks, timeout=TEARDOWN_S)
        if consumer is not None:
            consumer.db.close()
        ledger_dir.cleanup()
    return {
        "results_acknowledged": consumer.acks_sent if consumer is not None else None,
        "cards_sent": cards_sent,
        "phase": phase,
        "hand_delay_ms": summarize(hands),
        "peak_cards_per_10ms": peak(sent_at, BURST_WINDOW_NS),
        "end_to_end_ms": summarize(latencies),
        "loop_lag_ms": summarize(lags),
        "deal_delay_ms": summarize(delays),
        "cpu_s": round(cpu_s, 3),
        "wall_s": round(wall_s, 3),
        "cpu_share": round(cpu_s / wall_s, 3) if wall_s > 0 else None,
        "teardown": "clean" if not stuck else
                    f"still running after {TEARDOWN_S:g} s: {sorted(t.get_name() for t in stuck)[:10]}",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--broker", required=True)
    ap.add_argument("--tables", type=int, required=True)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--loop", choices=["uvloop", "asyncio"], default="asyncio")
    ap.add_argument("--phase", choices=PHASES, default="spread")
    args = ap.parse_args()
    from dealer.edge.logs import configure_logging
    from dealer.edge.runner import run_loop

    configure_logging("warning")

    async def run_and_print() -> None:
        # printed from inside the loop: a task that ignores its cancellation would otherwise hold
        # the loop's own shutdown (which waits for every task) and the figures with it
        result = await run_loadgen(args.broker, args.tables, args.seconds, phase=args.phase)
        print(json.dumps(result, sort_keys=True), flush=True)
        if result.get("teardown", "clean") != "clean":
            sys.stderr.flush()
            os._exit(0)  # the figures are out; what would not stop is reported in them, not waited for

    run_loop(run_and_print(), args.loop)


if __name__ == "__main__":
    main()
