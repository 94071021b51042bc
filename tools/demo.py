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
import re
import sys
import tempfile
from dataclasses import dataclass, field, replace
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
from simulators.bettors import BetPlan, table_plan
from simulators.pty_port import PtyPort
from simulators.rig import make_dealer, make_players
from simulators.settlement import Payout, SettlementConsumer
from simulators.shoe import FaultPlan, VirtualShoe
from simulators.station import DealerFaults, PtyShoeLink
from tools.demo_games import SEOTDA_REMATCH_DECK, card_text as _card, category_text
from tools.games import DemoSetup, GameLog, kit

TABLE = "T1"
READER = "SC1"


class DemoError(Exception):
    """The demo cannot start (a broker that does not answer): one line, exit status 2."""


@dataclass
class _RoundNotes:
    """What the log has seen of one round: who sits where, how far it got, who folded."""

    seats: dict[str, int] = field(default_factory=dict)  # player -> seat (seated games)
    betting_closed: bool = False
    cards: int = 0  # cards registered
    folds: dict[str, str] = field(default_factory=dict)  # player -> "player" or "timeout"


#: The links a cancelled round names (dealer/core/round.py: "link {link} down before the round
#: started[: why]"), in words.
_LINK_WORDS = {"broker": "the backend's broker link (its way to settlement) went down"}
_CANCEL_REASON = re.compile(r"^link (?P<link>\S+) down before the round started(?:: (?P<why>.*))?$")


class RoundLog:
    """Prints what a pit boss would want to see, one line per thing that happened."""

    def __init__(self, out: TextIO, game: str = "teen-patti", stake: Decimal | None = None) -> None:
        self.out = out
        self.game = game
        own = kit(game).demo.log  # a game with its own log lines (Stud, Seotda, Matgo)
        self.game_log: GameLog | None = own(stake if stake is not None else Decimal(10)) if own else None
        self.rounds: dict[str, _RoundNotes] = {}

    def notes(self, round_id: str | None) -> _RoundNotes:
        """What was seen of ``round_id`` (nothing yet: empty notes)."""
        if round_id is None:
            return _RoundNotes()
        notes = self.rounds.get(str(round_id))
        if notes is None:
            notes = self.rounds[str(round_id)] = _RoundNotes()
            while len(self.rounds) > 16:  # the rounds before are settled
                del self.rounds[next(iter(self.rounds))]
        return notes

    def folds(self, round_id: str) -> dict[str, str]:
        """The players who folded in ``round_id``: player -> ``player`` or ``timeout`` (the timer)."""
        return dict(self.notes(round_id).folds)

    def _note(self, msg: Any) -> None:
        if not isinstance(msg, RoundEvent):
            return
        d, e, notes = msg.data, msg.event, self.notes(msg.round_id)
        if e == "bet_accepted" and d.get("seat") is not None:
            notes.seats[str(d["player_id"])] = int(d["seat"])
        elif e == "betting_closed":
            notes.betting_closed = True
        elif e == "card_registered":
            notes.cards += 1
        elif e in ("decision_made", "player_acted") and d.get("action") == "FOLD":
            notes.folds[str(d["player_id"])] = str(d.get("by") or "player")
        elif e == "player_acted" and d.get("action") == "REJOIN":  # Seotda: back in for the rematch
            notes.folds.pop(str(d["player_id"]), None)

    def __call__(self, kind: str, msg: Any) -> None:
        self._note(msg)
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
                seats = self.notes(msg.round_id).seats
                who = ", ".join(f"{p} (P{seats[p]})" if p in seats else p for p in d["players"])
                line = f"  players decide, PLAY or FOLD: {who}"
            elif e == "decision_made":
                seat = self.notes(msg.round_id).seats.get(str(d["player_id"]))
                at = f"P{seat} " if seat is not None else ""
                verb = {"FOLD": "FOLDS", "PLAY": "PLAYS"}.get(d["action"], d["action"])
                line = f"  {d['player_id']:<8} {at}{verb}" + ("  (timer: no answer)" if d["by"] == "timeout" else "")
            elif e == "cards_revealed":
                line = "  reveal " + " ".join(f"{k}={_card(v)}" for k, v in d["cards"].items())
            elif e in ("round_cancelled", "round_voided"):
                line = self._refunded(msg)
            elif e in ("link_down", "link_up"):
                line = f"  link  {d['link']} {e.removeprefix('link_')}" + (f" ({d.get('reason')})" if d.get("reason") else "")
        elif isinstance(msg, RoundResult) and not msg.refund_all and self.game_log is None:
            line = self._result(msg)
        elif isinstance(msg, StationPrompt) and msg.kind in ("RESCAN", "ALERT"):
            line = f"  >>    {msg.message}"
        elif isinstance(msg, Rejection) and msg.event_type not in ("scan_read", "read_failed"):
            line = f"  rejected {msg.event_type}: {msg.reason}"
        if line:
            print(line, file=self.out, flush=True)

    def _refunded(self, msg: RoundEvent) -> str:
        """A cancelled or voided round: what happened, and when (the core's reason says "before
        the round started", which is the rulebook's boundary, decks.md §5.3: betting may well
        have been open)."""
        reason = str(msg.data.get("reason") or "")
        if msg.event == "round_voided":
            return f"  VOIDED: {reason}; every bet is refunded"
        notes = self.notes(msg.round_id)
        if not notes.betting_closed:
            when = "while betting was open"
        elif notes.cards == 0:
            when = "after betting closed, before the first card"
        else:
            when = "before the round started"
        m = _CANCEL_REASON.match(reason)
        if m is None:
            return f"  CANCELLED {when}: {reason}; every bet is refunded"
        link = m["link"]
        what = _LINK_WORDS.get(link) or (f"the scanner {link.split(':', 1)[1]}'s link went down"
                                         if link.startswith("scanner:") else f"link {link} went down")
        why = f": {m['why']}" if m["why"] else ""
        return f"  CANCELLED {when}: {what}{why}; every bet is refunded (decks.md §5.3)"

    def _result(self, result: RoundResult) -> str:
        """The RESULT line, from the result as published (only the hands it shows)."""
        d = result.details
        if "dealer_qualifies" in d:
            return self._against_dealer(result)
        hands = ", ".join(f"{k}: {category_text(h.category)}" for k, h in result.hands.items())
        if result.winner:
            return f"  RESULT winner {result.winner}" + (f" ({hands})" if hands else "")
        return f"  RESULT {hands}"

    def _against_dealer(self, result: RoundResult) -> str:
        """Players against the dealer (Sevenluck): whether the dealer qualifies, then every
        player: folded (the hand goes to the muck unseen), or played and how it compares, or a
        Pair Plus alone (no decision)."""
        d = result.details
        dealer = result.hands.get("D")
        shown = f"{category_text(dealer.category)} ({' '.join(_card(c) for c in dealer.cards)})" if dealer else "?"
        played = any(dec.action == "PLAY" for dec in result.decisions.values())
        if d["dealer_qualifies"]:
            out = [f"  RESULT dealer {shown}: qualifies"]
        else:
            out = [f"  RESULT dealer {shown}: does not qualify" + (" (a played Ante is paid even money, the Play "
                                                                   "returned)" if played else "")]
        seats = dict(self.notes(result.round_id).seats)
        for player, dec in result.decisions.items():
            if dec.seat is not None:
                seats.setdefault(player, dec.seat)
        shared = "P" in result.hands
        versus = {"PLAYER": "beats the dealer", "DEALER": "loses to the dealer", "TIE": "ties the dealer"}
        for player, seat in sorted(seats.items(), key=lambda ps: ps[1]):
            label = "P" if shared else f"P{seat}"
            dec = result.decisions.get(player)
            hand = result.hands.get(label)
            if dec is not None and dec.action == "FOLD":
                what = "folded" + (" (by the timer: no answer)" if dec.by == "timeout" else "") + \
                       ": the hand goes to the muck unseen"
            elif hand is None:
                what = "(hand not shown)"
            elif dec is None:
                what = f"{category_text(hand.category)} (Pair Plus only: no decision)"
            else:
                cmp = d.get("comparison", {}).get(label)
                vs = f", {versus[cmp]}" if cmp in versus and d["dealer_qualifies"] else ""
                what = f"played {category_text(hand.category)}{vs}"
            out.append(f"    {label:<3} {player:<8} {what}")
        return "\n".join(out)


def readable_json(value: Any, indent: str = "", width: int = 110) -> str:
    """``value`` as JSON a person can read: null fields left out, an object or array on one
    line when it fits in ``width``, else one member per line (arrays of plain values packed)."""
    value = _without_nulls(value)
    return _layout(value, indent, width)


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _layout(value: Any, indent: str, width: int, lead: str = "") -> str:
    flat = json.dumps(value, ensure_ascii=False, sort_keys=True)
    if not isinstance(value, (dict, list)) or not value or len(indent) + len(lead) + len(flat) <= width:
        return flat
    inner = indent + "  "
    if isinstance(value, dict):
        members = [f"{inner}{json.dumps(k)}: " + _layout(v, inner, width, f"{json.dumps(k)}: ")
                   for k, v in sorted(value.items())]
        return "{\n" + ",\n".join(members) + f"\n{indent}}}"
    if all(not isinstance(v, (dict, list)) for v in value):  # plain values: as many to a line as fit
        lines, line = [], ""
        for item in (json.dumps(v, ensure_ascii=False) for v in value):
            if line and len(inner) + len(line) + len(item) + 2 > width:
                lines.append(line + ",")
                line = ""
            line = f"{line}, {item}" if line else item
        lines.append(line)
        return "[\n" + "\n".join(inner + x for x in lines) + f"\n{indent}]"
    return "[\n" + ",\n".join(inner + _layout(v, inner, width) for v in value) + f"\n{indent}]"


def _quantized(amount: Any, result: RoundResult) -> Decimal:
    """An amount of a result's details in the table's money unit (``"0"`` -> ``0.00``)."""
    unit = result.money.minor_unit
    return Decimal(str(amount)).quantize(unit) if unit < 1 else Decimal(str(amount))


def _money(x: Decimal) -> str:
    return f"+{x}" if x > 0 else str(x) if x < 0 else str(abs(x))


def payout_lines(result: RoundResult, payouts: list[Payout], folds: dict[str, str] | None = None) -> list[str]:
    """One line per settled bet: what the player put in, what came back, the net.

    A bet against the house (Teen Patti, Sevenluck) shows its stake and outcome. In a game
    where players play each other (Stud, Seotda) or bring a cover (Matgo) the "bet" is the
    chips brought to the table: the backend computes what goes back (``returned``), and the
    line says what was brought, what went into the pot (when the result says), what came back,
    the net, and whether the player won, lost or folded (and whether the timer folded them)."""
    folds = folds or {}
    put_in = result.details.get("contributions", {}) if isinstance(result.details, dict) else {}
    out = []
    for p in payouts:
        net = p.returned - p.stake
        res = result.player_bets.get(p.player_id, {}).get(p.bet_type) or result.bets.get(p.bet_type)
        fold = folds.get(p.player_id)
        folded = ("folded by the timer" if fold == "timeout" else "folded") if fold else ""
        head = f"    {p.player_id:<8} {p.bet_type:<15}"
        if res is not None and res.returned is not None:  # chips brought to a players' game
            pot = f"  in the pot {_quantized(put_in[p.player_id], result):>8}" if p.player_id in put_in else ""
            status = folded or ("won" if net > 0 else "lost" if net < 0 else "even")
            out.append(f"{head} brought {p.stake:>9}{pot}  back {p.returned:>9}  net {_money(net):>9}  {status}")
        else:
            status = p.outcome + (f" ({folded})" if folded and p.outcome != "REFUND" else "")
            out.append(f"{head} stake {p.stake:>11}  back {p.returned:>9}  net {_money(net):>9}  {status}")
    return out


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
        log = RoundLog(out, game, stake=Decimal(10))
        service.add_observer(log)
        done = asyncio.Event()
        settled: list[str] = []

        def on_payout(result: RoundResult, payouts: list[Payout]) -> None:
            print(f"  settlement {result.idempotency_key} ({result.outcome}):", file=out)
            if demo.payout is not None:
                demo.payout(result, out)
            else:  # the result as published, readable, its null fields left out
                print("  result " + readable_json(json.loads(result.model_dump_json()), indent="  "), file=out)
            for line in payout_lines(result, payouts, log.folds(result.round_id)):
                print(line, file=out)
            settled.append(result.round_id)
            if len(settled) >= rounds:
                done.set()

        bets = demo_plan(settings, demo.strategies)  # player N sits in seat N in the seated games
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


def demo_plan(settings: Settings, strategies: tuple[str, ...] = ()) -> BetPlan:
    """What the demo's players bet: the table's plan, where a player who never answers (the
    ``disconnect`` strategy) always places the bet that asks for a decision (Sevenluck: an
    Ante), so every round shows the decision timer acting for it."""
    plan = table_plan(settings.tables[0])
    silent = tuple(f"player{n}" for n in range(1, plan.players + 1)
                   if strategies and strategies[(n - 1) % len(strategies)] == "disconnect")
    return replace(plan, deciders=silent)


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


__all__ = ["SEOTDA_REMATCH_DECK", "DemoError", "RoundLog", "category_text", "demo_plan", "demo_settings",
           "payout_lines", "readable_json", "run_demo"]
