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
from pathlib import Path
from typing import Any, TextIO

from dealer import topics
from dealer.cards import STANDARD_52, parse_card
from dealer.config import Settings, load_settings
from dealer.messages import RoundEvent, RoundResult, StationPrompt
from dealer.round import Rejection
from dealer.service import Service
from drivers.bus import Bus, LocalBus
from drivers.mqtt import MqttBus
from simulators.pty_port import PtyPort
from simulators.settlement import Payout, SettlementConsumer
from simulators.shoe import FaultPlan, VirtualShoe
from simulators.station import DealerFaults, PtyShoeLink, VirtualDealer

TABLE = "T1"
READER = "SC1"


def _card(code: str | None) -> str:
    if code is None:
        return "(hidden)"
    try:
        return parse_card(code).display
    except ValueError:
        return code


_STUD_VERB = {"BRING_IN": "brings in {total}", "BET": "bets {total}", "RAISE": "raises to {total} (+{increment})",
              "CALL": "calls {total}", "CHECK": "checks", "FOLD": "folds", "ALL_IN": "is all-in for {total}"}
_STUD_STEP = {"WASH": "washes", "SHUFFLE": "shuffles"}


class RoundLog:
    """Prints what a pit boss would want to see, one line per thing that happened."""

    def __init__(self, out: TextIO, game: str = "teen-patti") -> None:
        self.out = out
        self.game = game

    def __call__(self, kind: str, msg: Any) -> None:
        line = self._stud(msg) if self.game == "stud" else None
        if line is not None:
            print(line, file=self.out, flush=True)
            return
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

    @staticmethod
    def _stud(msg: Any) -> str | None:
        """Seven-Card Stud: the dealer's steps, the streets, every action, the showdown."""
        if isinstance(msg, StationPrompt) and msg.kind == "DONE" and msg.announce:
            return f"  dealer: \"{msg.announce}\""
        if not isinstance(msg, RoundEvent):
            return None
        d, e = msg.data, msg.event
        if e == "dealer_confirmed":
            return f"  dealer {_STUD_STEP.get(d['step'], d['step'])} the cards"
        if e == "betting_round_opened":
            if d.get("betting") != "TO_ACT":
                return f"  -- {d['street']} street: \"{d['announce']}\" (no betting: all-in)"
            verb = "brings in" if d["street"] == "3rd" else "opens"
            return f"  -- {d['street']} street: \"{d['announce']}\", {d['first']} {verb}"
        if e == "player_acted":
            what = _STUD_VERB.get(d["action"], d["action"]).format(**d)
            return f"  {d['player_id']:<8} {what}" + ("  (timer: no answer)" if d["by"] == "timeout" else "")
        if e == "uncalled_returned":
            return f"  {d['player_id']:<8} takes back {d['amount']} nobody called"
        if e == "cards_revealed":
            return "  showdown: " + " ".join(f"{k}={_card(v)}" for k, v in d["cards"].items())
        if e == "round_result":
            hands = ", ".join(f"{k}: {v}" for k, v in d["hands"].items())
            return f"  RESULT winner {d['winner']}" + (f" ({hands})" if hands else " (everyone else folded)")
        return None


def _stud_payout(result: RoundResult, out: TextIO) -> None:
    """The pots of a stud hand, the rake, and what goes back to each player."""
    d = result.details
    for pot in d.get("pots", []):
        shares = ", ".join(f"{p} {a}" for p, a in pot["shares"].items())
        print(f"  pot {pot['pot']}: {pot['amount']} among {', '.join(pot['eligible'])} -> {shares}", file=out)
    if not result.refund_all:
        print(f"  rake {d['rake']}" + ("" if d.get("raked") else " (the hand ended before the 7th card)"), file=out)


def demo_settings(workdir: Path, port: str, *, broker: str | None, betting_seconds: float,
                  game: str = "teen-patti") -> Settings:
    table: dict[str, Any] = {"limits": {"tie": {"min": "1", "max": "100"}}} if game == "teen-patti" else {
        "options": {"seats": 3}, "decision_seconds": 1.0}
    if game == "stud":  # four seats; a silent player's turn is decided by the timer after a second
        table = {"options": {"seats": 4}, "action_seconds": 1.0}
    return load_settings(
        service={"journal_path": workdir / "journal.sqlite", "metrics_enabled": False, "node_id": "demo"},
        mqtt={"url": broker, "client_id": "dealer-demo-backend"},
        tables=[{
            **table, "id": TABLE, "game": game, "currency": "EUR", "minor_unit": "0.01",
            "betting_seconds": betting_seconds, "pause_seconds": 0.3,
            "scanner": {"kind": "serial", "port": port, "reader_id": READER, "heartbeat_timeout": 3.0},
        }],
    )


async def run_demo(rounds: int = 4, seed: int = 7, broker: str | None = None, faults: bool = True,
                   betting_seconds: float = 0.8, out: TextIO = sys.stdout, cancel_round: int | None = 3,
                   game: str = "teen-patti") -> dict[str, Any]:
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
        service.add_observer(RoundLog(out, game))
        done = asyncio.Event()
        settled: list[str] = []

        def on_payout(result: RoundResult, payouts: list[Payout]) -> None:
            print(f"  settlement {result.idempotency_key} ({result.outcome}):", file=out)
            if game == "stud":
                _stud_payout(result, out)
            else:
                print("  " + json.dumps(json.loads(result.model_dump_json()), indent=None, sort_keys=True), file=out)
            for p in payouts:
                print(f"    {p.player_id:<8} {p.bet_type:<15} stake {p.stake:>7}  {p.outcome:<6} returned {p.returned:>9}", file=out)
            settled.append(result.round_id)
            if len(settled) >= rounds:
                done.set()

        consumer_class = _StudSeats if game == "stud" else SettlementConsumer
        consumer = consumer_class(sim_bus, [TABLE], work / "ledger.sqlite", rng=random.Random(seed + 1),
                                  on_payout=on_payout, game=game)
        if game == "stud":  # player4 goes silent after two actions: the turn timer acts for it
            from simulators.stud_players import StudPlayer

            for i, strategy in enumerate(("calling", "random", "aggressive", "disconnect"), start=1):
                StudPlayer(TABLE, f"player{i}", sim_bus, strategy, rng=random.Random(seed + 2 + i),  # type: ignore[arg-type]
                           silent_after=2)
        if game == "sevenluck":  # player3 goes silent: the decision timer folds it
            from simulators.players import VirtualPlayer

            for pid, strategy in (("player1", "q64"), ("player2", "random"), ("player3", "disconnect")):
                VirtualPlayer(TABLE, pid, sim_bus, strategy, rng=random.Random(seed + 2))  # type: ignore[arg-type]
        plan = FaultPlan(noread=0.04, misread=0.02, garbage=0.03, repeat=0.02, torn=0.01, drop=0.01,
                         script=["", "noread", "noread", "noread"]) if faults else FaultPlan()
        wrong = DealerFaults(script=["", "", "", "foreign", "", "duplicate"]) if faults else DealerFaults()
        dealer = VirtualDealer(TABLE, VirtualShoe(READER), PtyShoeLink(port), deck=STANDARD_52, rng=rng,
                               faults=plan, dealer_faults=wrong, deal_interval=0.05, heartbeat_interval=0.3,
                               patience=1.0)
        dealer.subscribe(sim_bus)
        cancel_task = None
        if faults and cancel_round and not broker and isinstance(backend_bus, LocalBus):
            cancel_task = asyncio.create_task(_drop_link_during_betting(service, backend_bus, cancel_round, out))
        tasks = [asyncio.create_task(service.run()), asyncio.create_task(dealer.run())]
        if broker:
            tasks += [asyncio.create_task(sim_bus.run())]
        try:
            await asyncio.wait_for(done.wait(), timeout=30 + rounds * 10)
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
        }
        consumer.close()
        print("\nsummary " + json.dumps(summary, sort_keys=True), file=out)
        return summary


class _StudSeats(SettlementConsumer):
    """Stud: player N sits in seat N, bringing a random amount of chips to each hand."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, players=4, stakes=("4.00", "10.00", "20.00", "40.00"), **kw)

    def _random_bets(self) -> list[tuple[str, str, int | None]]:
        return [(f"player{p}", "chips", p) for p in range(1, self.players + 1)]


async def _drop_link_during_betting(service: Service, bus: LocalBus, nth: int, out: TextIO) -> None:
    """Simulate the settlement link dropping while round ``nth`` is taking bets."""
    seen = asyncio.Event()

    def watch(kind: str, msg: Any) -> None:
        if isinstance(msg, RoundEvent) and msg.event == "round_opened" and str(msg.round_id).endswith(f"{nth:06d}"):
            seen.set()

    service.add_observer(watch)
    await seen.wait()
    await asyncio.sleep(0.2)
    print("  !! settlement link lost while betting is open", file=out, flush=True)
    bus.set_connected(False, "settlement link lost (demo)")  # the path a broker disconnect takes
    await asyncio.sleep(0.5)
    print("  !! settlement link back", file=out, flush=True)
    bus.set_connected(True)
