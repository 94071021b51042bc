"""``dealer demo``: a whole studio table on one machine, no broker or database server needed.

A simulated shoe on a real pseudo-terminal feeds the backend over the serial protocol; a
virtual dealer follows the station prompts; the reference settlement consumer places
random bets and applies each result exactly once. The journal, outbox and ledger are
SQLite files in a temporary folder. Faults are injected by default so a RESCAN, a
supervisor alert and a cancelled round (link lost while betting is open) are visible.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any, TextIO

from dealer.edge import topics
from dealer.edge.config import Settings, load_settings
from dealer.core.messages import RoundEvent, RoundResult, StationPrompt
from dealer.core.round import Rejection
from dealer.edge.service import Service
from drivers.bus import Bus, LocalBus
from drivers.mqtt import MqttBus
from simulators.bettors import table_plan
from simulators.pty_port import PtyPort
from simulators.rig import make_dealer, make_players
from simulators.settlement import Payout, SettlementConsumer
from simulators.shoe import FaultPlan, VirtualShoe
from simulators.station import DealerFaults, PtyShoeLink
from tools.demo_games import SEOTDA_REMATCH_DECK, card_text as _card
from tools.games import DemoSetup, GameLog, kit

TABLE = "T1"
READER = "SC1"


class DemoError(Exception):
    """The demo cannot start (a broker that does not answer): one line, exit status 2."""


class RoundLog:
    """Prints what a pit boss would want to see, one line per thing that happened."""

    def __init__(self, out: TextIO, game: str = "teen-patti", stake: Decimal | None = None) -> None:
        self.out = out
        self.game = game
        own = kit(game).demo.log  # a game with its own log lines (Stud, Seotda, Matgo)
        self.game_log: GameLog | None = own(stake if stake is not None else Decimal(10)) if own else None

    def __call__(self, kind: str, msg: Any) -> None:
        if self.game_log is not None:
            lines, handled = self.game_log(msg)
            for line in lines:
                print(line, file=self.out, flush=True)
            if handled:
                return
        line = None
        if isinstance(msg, RoundEvent):
            d, e = msg.data, msg.event
            if e == "round_opened":
                line = f"\n=== {msg.round_id}: betting open"
            elif e == "bet_accepted":
                seat = f" seat {d['seat']}" if d.get("seat") else ""
                line = f"  bet   {d['player_id']:<8} {d['bet_type']:<15} {d['stake']:>8}{seat}"
            elif e == "betting_closed":
                line = f"  no more bets ({d['bets']} accepted); dealing"
            elif e == "card_registered":
                line = f"  card  {d['position']:<4} {_card(d['card'])}"
            elif e == "decisions_open":
                line = f"  players decide: {', '.join(d['players'])}"
            elif e == "decision_made":
                line = f"  {d['player_id']:<8} {d['action']}" + ("  (timer: no answer)" if d["by"] == "timeout" else "")
            elif e == "cards_revealed":
                line = "  reveal " + " ".join(f"{k}={_card(v)}" for k, v in d["cards"].items())
            elif e == "round_result":
                hands = ", ".join(f"{k}: {v}" for k, v in d["hands"].items())
                line = f"  RESULT winner {d['winner']} ({hands})" if d["winner"] else f"  RESULT {hands}"
            elif e in ("round_cancelled", "round_voided"):
                line = f"  {e.removeprefix('round_').upper()}: {d['reason']}"
            elif e in ("link_down", "link_up"):
                line = f"  link  {d['link']} {e.removeprefix('link_')}" + (f" ({d.get('reason')})" if d.get("reason") else "")
        elif isinstance(msg, StationPrompt) and msg.kind in ("RESCAN", "ALERT"):
            line = f"  >>    {msg.message}"
        elif isinstance(msg, Rejection) and msg.event_type not in ("scan_read", "read_failed"):
            line = f"  rejected {msg.event_type}: {msg.reason}"
        if line:
            print(line, file=self.out, flush=True)


def demo_settings(workdir: Path, port: str, *, broker: str | None, betting_seconds: float,
                  game: str = "teen-patti") -> Settings:
    table = dict(kit(game).demo.table)  # the game's demo table (its options, timers, currency)
    return load_settings(
        service={"journal_path": workdir / "journal.sqlite", "metrics_enabled": False, "node_id": "demo"},
        # no broker: the demo's in-process bus, asked for explicitly (dealer run refuses it otherwise)
        mqtt={"url": broker, "client_id": "dealer-demo-backend"} if broker else
        {"in_process": True, "client_id": "dealer-demo-backend"},
        tables=[{
            "currency": "EUR", "minor_unit": "0.01", **table, "id": TABLE, "game": game,
            "betting_seconds": betting_seconds, "pause_seconds": 0.3,
            "scanner": {"kind": "serial", "port": port, "reader_id": READER, "heartbeat_timeout": 3.0},
        }],
    )


async def run_demo(rounds: int = 4, seed: int = 7, broker: str | None = None, faults: bool = True,
                   betting_seconds: float = 0.8, out: TextIO = sys.stdout, cancel_round: int | None = 3,
                   game: str = "teen-patti") -> dict[str, Any]:
    if rounds < 1:
        raise DemoError(f"rounds must be at least 1, got {rounds}")
    if broker:  # a broker that cannot be reached is said at once, not after a silent wait
        from dealer.cli.broker_check import BrokerUnreachable, reach_broker

        try:
            await reach_broker(broker, client_prefix="dealer-demo-probe")
        except BrokerUnreachable as exc:
            raise DemoError(str(exc)) from None
    demo = kit(game).demo
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="dealer-demo-") as tmp:
        work = Path(tmp)
        port = PtyPort(work, "shoe")
        settings = demo_settings(work, port.path, broker=broker, betting_seconds=betting_seconds, game=game)
        backend_bus: Bus
        if broker:
            backend_bus = MqttBus(broker, client_id="dealer-demo-backend", status_topic=topics.backend_status("demo"))
            sim_bus: Bus = MqttBus(broker, client_id="dealer-demo-simulators")
        else:
            backend_bus = sim_bus = LocalBus()
        service = Service(settings, bus=backend_bus, broker_link=True)
        service.add_observer(RoundLog(out, game, stake=Decimal(10)))
        done = asyncio.Event()
        settled: list[str] = []

        def on_payout(result: RoundResult, payouts: list[Payout]) -> None:
            print(f"  settlement {result.idempotency_key} ({result.outcome}):", file=out)
            if demo.payout is not None:
                demo.payout(result, out)
            else:
                print("  " + json.dumps(json.loads(result.model_dump_json()), indent=None, sort_keys=True), file=out)
            for p in payouts:
                print(f"    {p.player_id:<8} {p.bet_type:<15} stake {p.stake:>7}  {p.outcome:<6} returned {p.returned:>9}", file=out)
            settled.append(result.round_id)
            if len(settled) >= rounds:
                done.set()

        bets = table_plan(settings.tables[0])  # player N sits in seat N in the seated games
        consumer = SettlementConsumer(sim_bus, [TABLE], work / "ledger.sqlite", rng=random.Random(seed + 1),
                                      on_payout=on_payout, game=game, plan=bets)
        # the players who act once the cards are out (the game's kit names them: in stud player4
        # goes silent after two actions and in sevenluck player3 never answers, so the timers act
        # for them; in Matgo player1 plays the house AI, the consumer betting its cover)
        if demo.strategies:
            make_players(game, TABLE, sim_bus, bets.players, rng=random.Random(seed + 2),
                         strategies=demo.strategies, silent_after=2)
        # scripted first rounds (Seotda: the calling player at S1 gets the 9·4; Matgo: a redeal)
        scripted = demo.script(DemoSetup(sim_bus, seed, settings, rng, service, TABLE)) if demo.script else []
        plan = FaultPlan(noread=0.04, misread=0.02, garbage=0.03, repeat=0.02, torn=0.01, drop=0.01,
                         script=["", "noread", "noread", "noread"]) if faults else FaultPlan()
        wrong = DealerFaults(script=["", "", "", "foreign", "", "duplicate"]) if faults else DealerFaults()
        dealer = make_dealer(game, TABLE, VirtualShoe(READER), PtyShoeLink(port), rng=rng, faults=plan,
                             dealer_faults=wrong, deal_interval=0.05, heartbeat_interval=0.3, patience=1.0,
                             scripted_rounds=scripted)
        dealer.subscribe(sim_bus)
        cancel_task = None
        if faults and cancel_round and not broker and isinstance(backend_bus, LocalBus):
            cancel_task = asyncio.create_task(_drop_link_during_betting(service, backend_bus, cancel_round, out))
        tasks = [asyncio.create_task(service.run()), asyncio.create_task(dealer.run())]
        if broker:
            tasks += [asyncio.create_task(sim_bus.run())]
        limit = 30 + rounds * 10
        timed_out = False
        try:
            await asyncio.wait_for(done.wait(), timeout=limit)
        except TimeoutError:
            timed_out = True
            print(f"\n!! the demo gave up after {limit} s: {len(settled)} of {rounds} rounds settled", file=out)
        finally:
            for t in tasks + ([cancel_task] if cancel_task else []):
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            port.close()
        summary = {
            "rounds_settled": len(settled),
            "duplicates_ignored": consumer.duplicates,
            "reconciliation_mismatches": consumer.mismatches,
            "balances": {k: str(v) for k, v in consumer.balances().items()},
            "faults_injected": dealer.faults_injected,
            "timed_out": timed_out,
        }
        consumer.close()
        print("\nsummary " + json.dumps(summary, sort_keys=True), file=out)
        return summary


async def _drop_link_during_betting(service: Service, bus: LocalBus, nth: int, out: TextIO) -> None:
    """Simulate the settlement link dropping while round ``nth`` is taking bets."""
    seen = asyncio.Event()

    def watch(kind: str, msg: Any) -> None:
        if isinstance(msg, RoundEvent) and msg.event == "round_opened" and str(msg.round_id).endswith(f"-{nth:06d}"):
            seen.set()

    service.add_observer(watch)
    await seen.wait()
    await asyncio.sleep(0.2)
    print("  !! settlement link lost while betting is open", file=out, flush=True)
    bus.set_connected(False, "settlement link lost (demo)")  # the path a broker disconnect takes
    await asyncio.sleep(0.5)
    print("  !! settlement link back", file=out, flush=True)
    bus.set_connected(True)


__all__ = ["SEOTDA_REMATCH_DECK", "DemoError", "RoundLog", "demo_settings", "run_demo"]
