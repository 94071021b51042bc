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
from dealer.core.cards import HWATU_48, parse_card
from dealer.edge.config import Settings, load_settings
from dealer.core.messages import PlayerMessage, RoundEvent, RoundResult, StationPrompt
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

TABLE = "T1"
READER = "SC1"


class DemoError(Exception):
    """The demo cannot start (a broker that does not answer): one line, exit status 2."""


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

    def __init__(self, out: TextIO, game: str = "teen-patti", stake: Decimal | None = None) -> None:
        self.out = out
        self.game = game
        self.seotda: _SeotdaLog | _MatgoLog | None = None
        if game == "seotda":
            self.seotda = _SeotdaLog(stake if stake is not None else Decimal(10))
        elif game == "matgo":
            self.seotda = _MatgoLog()

    def __call__(self, kind: str, msg: Any) -> None:
        if self.seotda is not None:  # a game with its own log (Seotda, Matgo)
            lines, handled = self.seotda(msg)
            for line in lines:
                print(line, file=self.out, flush=True)
            if handled:
                return
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
        if e == "dealer_confirmed" and d["step"] == "LAST_CARD":
            return "  no 7th card exposed: " + ("the window closed" if d.get("by") == "timer" else "the dealer confirms")
        if e == "dealer_confirmed":
            return f"  dealer {_STUD_STEP.get(d['step'], d['step'])} the cards"
        if e == "confirm_window":
            return ""  # the 7th cards are out; the station may report one exposed (the next line says)
        if e == "card_exposed":
            return f"  {d['position']} exposed: {_card(d['card'])} plays face up (seven-card-stud.md §3.5)"
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


class _SeotdaLog:
    """Seotda, as the pit boss follows it: the antes, who is S1, every turn with the buttons
    the player could press (and the chips each adds), every button pressed, reservations, the
    second cards going out, the showdown, and each rematch with its reshuffle."""

    def __init__(self, stake: Decimal) -> None:
        self.stake = stake
        self.seats: dict[str, dict[str, int]] = {}  # round -> player -> seat
        self.shuffles: dict[str, int] = {}  # round -> SHUFFLE confirmations so far
        self.seconds: list[str] = []  # second cards sent, printed together

    def __call__(self, msg: Any) -> tuple[list[str], bool]:
        """The lines to print, and whether the message is handled (else the generic log prints it)."""
        out: list[str] = []
        if self.seconds and not (isinstance(msg, PlayerMessage) and msg.kind == "hole_card"):
            out.append("  second cards go to their owners: " + ", ".join(self.seconds))
            self.seconds = []
        rid = str(msg.round_id) if getattr(msg, "round_id", None) else ""
        if isinstance(msg, PlayerMessage):
            line = self._private(msg, rid)
        elif isinstance(msg, RoundEvent):
            line = self._event(msg, rid)
        elif isinstance(msg, StationPrompt) and msg.kind == "DONE" and msg.reason is None:
            line = ""  # the result says it all
        else:
            line = None
        if line is None:
            return out, False  # not a Seotda line: the generic log prints it (bets, RESCANs ...)
        return out + ([line] if line else []), True

    def _private(self, msg: PlayerMessage, rid: str) -> str | None:
        d, who = msg.data, msg.player_id
        if msg.kind == "hole_card":
            pos = str(d["position"])
            if pos.endswith(".2"):
                self.seconds.append(f"{pos} -> {who}")
                return ""
            line = f"  card  {pos:<8} face down -> {who} only"
            if pos == "S1.1":  # the first game's first card names the first seat
                seat = self.seats.get(rid, {}).get(who, "?")
                line = f"  S1 = seat {seat} ({who}): cards and turns go clockwise from S1\n" + line
            return line
        if msg.kind == "your_turn" and d.get("choice") == "REMATCH_94":
            return (f"    {who:<8} holds the 9·4: {' or '.join(d['actions'])} for the pot of {d.get('pot')}? "
                    f"(timer: {d.get('default')})")
        if msg.kind == "your_turn" and d.get("choice") == "REENTRY":
            return (f"    {who:<8} folded: rejoin rematch {d.get('rematch')} for {d.get('fee')} "
                    f"(half the carried {d.get('carried')})? {' or '.join(d['actions'])}")
        if msg.kind == "your_turn":
            buttons = " | ".join(f"{name} +{b['adds']}" if name not in ("FOLD", "CHECK") else name
                                 for name, b in d.get("buttons", {}).items())
            return f"    {who:<8} to act (pot {d.get('pot')}): {buttons}"
        if msg.kind == "reservation_accepted":
            return f"    {who:<8} reserves {d.get('action')} before their turn"
        if msg.kind == "reservation_cancelled":
            return f"    {who:<8} reservation cancelled: {d.get('reason')}"
        return ""  # replies (accepted, rejected) are in the public events

    def _event(self, msg: RoundEvent, rid: str) -> str | None:
        d, e = msg.data, msg.event
        if e == "bet_accepted" and d.get("seat") is not None:
            self.seats.setdefault(rid, {})[str(d["player_id"])] = int(d["seat"])
            return None
        if e == "dealer_confirmed" and d.get("step") == "SHUFFLE":
            n = self.shuffles[rid] = self.shuffles.get(rid, 0) + 1
            if n == 1:
                players = len(self.seats.get(rid, {}))
                return (f"  antes: {players} players x {self.stake} = pot {players * self.stake}\n"
                        "  dealer shuffles the 20 cards")
            return f"  REMATCH {n - 1}: the carried pot stays in; the dealer reshuffles the 20 cards"
        if e == "card_registered":
            return "" if str(d["position"]).endswith(".1") else f"  card  {d['position']:<8} face down (held back)"
        if e == "betting_round_opened":
            if str(d["street"]).startswith(("REMATCH_CHOICE", "REENTRY")):
                return ""  # a choice, not a betting round: the player's turn says what it is
            if d.get("betting") != "TO_ACT":
                return f"  -- {d['street']}: nobody can bet (all-in)"
            return f"  -- {d['street']}: {d['first']} acts first"
        if e == "player_acted" and d.get("choice"):
            by = "  (timer: no answer)" if d["by"] == "timeout" else ""
            paid = f" (pays {d['added']})" if d["action"] == "REJOIN" else ""
            return f"  {d['player_id']:<8} {d['action']}{paid}{by}"
        if e == "showdown":  # each showdown as it happens, a rematch's too
            game = f" (rematch {d['game']})" if d.get("game") else ""
            hands = "  ".join(f"{k} {'+'.join(h['cards'])} {h['name']}" for k, h in d.get("hands", {}).items())
            return f"  showdown{game}: {hands}"
        if e == "rematch":
            causes = "; ".join(f"{c.get('cause')} by {', '.join(c.get('by', []))} (pot {c['amount']})"
                               for c in d.get("carried", []))
            joined = "".join(f"; {r['player']} rejoins for {r['paid']}" for r in d.get("reentries", []))
            return f"  rematch {d['rematch']} among {', '.join(d['participants'])}: {causes}{joined}"
        if e == "player_acted":
            button = d.get("button") or d["action"]
            what = {"CHECK": "checks", "FOLD": "folds"}.get(d["action"]) or (
                f"+{d['added']} (round total {d['total']}, level {d['level']})" + (", all-in" if d.get("all_in") else ""))
            by = {"timeout": "  (timer: no answer)", "reservation": "  (reserved)"}.get(d["by"], "")
            return f"  {d['player_id']:<8} {button:<8} {what}{by}"
        if e == "uncalled_returned":
            return f"  {d['player_id']:<8} takes back {d['amount']} nobody called"
        if e == "cards_revealed":
            return ""  # every showdown was printed as it happened
        if e == "round_result":
            return f"  RESULT winner {d['winner']}" if d["winner"] else "  RESULT"
        if e in ("turn", "reservation_executed"):
            return ""
        return None


def _seotda_payout(result: RoundResult, out: TextIO) -> None:
    """The pots of a Seotda game (rematches included), the hands, what goes back to each."""
    d = result.details
    if result.refund_all:
        return
    for k, seat in d.get("seats", {}).items():
        name = d.get("names", {}).get(k) or "(not shown: folded, or out of the last rematch)"
        print(f"  {k} seat {seat['seat']} {seat['player']:<8} {name}", file=out)
    for a in d.get("awards", []):
        game = f"rematch {a['game']}" if a["game"] else "game"
        if a["result"] in ("WIN", "SPLIT"):
            shares = ", ".join(f"{p} {x}" for p, x in a["shares"].items())
            print(f"  {game}: pot {a['amount']} {a['result']} -> {shares} ({a['reason']})", file=out)
        else:
            print(f"  {game}: pot {a['amount']} {a['result']}: carried into a rematch among "
                  f"{', '.join(a['participants'])} ({a['reason']})", file=out)
    print(f"  rematches {d.get('rematches', 0)}, rake {d.get('rake')}", file=out)


class _MatgoLog:
    """Matgo, as the pit boss follows it: the deal (the player's hand face down to the player
    only, the house AI's hand to nobody, the layout face up), any redeal, every move of the
    player and of the house AI with what it took (pending pairs, choices, Ppuk, Ttadak, Chok,
    Sseul, steals), each stock card turned over, the scores, Go and Stop, and the payment."""

    _REDEAL = {"LAYOUT_QUAD": "four cards of one month on the layout",
               "BOTH_QUADS": "both players hold four cards of one month"}

    def __init__(self) -> None:
        self.names: dict[str, str] = {}  # seat letter (F plays first, O) -> player
        self.mine: dict[str, str] = {}  # the remote player's cards of this deal, by position
        self.layout: list[str] = []
        self.hands: dict[str, int] = {}  # seat letter -> face-down cards dealt this deal
        self.dealing = False
        self.started = False

    def __call__(self, msg: Any) -> tuple[list[str], bool]:
        """The lines to print, and whether the message is handled (else the generic log prints it)."""
        if isinstance(msg, PlayerMessage):
            return self._private(msg), True
        if isinstance(msg, StationPrompt) and msg.kind == "DONE" and msg.announce:
            return [f"  dealer: \"{msg.announce}\""], True
        if not isinstance(msg, RoundEvent):
            return [], False
        d, e = msg.data, msg.event
        if e == "round_opened":
            self.names, self.mine, self.layout, self.hands = {}, {}, [], {}
            self.dealing = self.started = False
            return [], False
        if e == "card_registered":
            pos = str(d["position"])
            name = pos.split(".", 1)[1] if pos.startswith("R") and "." in pos else pos
            if "." in name:  # a hand card: face down (the player's own arrives on its topic)
                self.hands[name[0]] = self.hands.get(name[0], 0) + 1
                self.dealing = True
            elif name.startswith("L"):
                self.layout.append(str(d["card"]))
                self.dealing = True
            return [], True  # stock cards are told with the move that turned them over
        if e == "redeal":
            why = self._REDEAL.get(str(d.get("reason")), str(d.get("reason")))
            return self._dealt() + [f"  REDEAL ({why}): the dealer gathers all 48 cards"], True
        if e == "dealer_confirmed" and d.get("step") == "SHUFFLE":
            return ["  dealer shuffles all 48 cards"], True
        if e == "betting_round_opened":  # the deal stands: the game starts
            out = self._dealt()
            if not self.started:
                self.started = True
                out.append(f"  -- turn 1: {self.names.get('F', 'F')}")
            return out, True
        if e == "turn":
            return [], True
        if e == "player_acted":
            if d.get("by") == "timeout":
                card = f" {d['card']}" if d.get("card") else ""
                return [f"  {d['player_id']:<8} did not answer in time: the timer plays {d['action']}{card}"], True
            return [], True
        if e == "matgo_move":
            return self._move(d), True
        if e == "cards_revealed":
            out = self._dealt()
            ai = next((k for k, p in self.names.items() if p == AI_NAME), None)
            if ai is not None:
                held = [c for p, c in d["cards"].items() if p.split(".")[-2:-1] == [ai]]  # shown ones only
                out.append(f"  the end: {AI_NAME} showed {' '.join(held[-10:]) or 'nothing'}"
                           " (the cards it kept stay in the journal)")
            return out, True
        if e == "round_result":
            return self._dealt() + [f"  RESULT winner {d['winner']}" if d["winner"] else "  RESULT: a draw"], True
        return [], False

    def _private(self, msg: PlayerMessage) -> list[str]:
        d, who = msg.data, msg.player_id
        if msg.kind == "hole_card":
            pos = str(d["position"])
            name = pos.split(".", 1)[1] if pos.startswith("R") else pos
            if name[0] not in self.names:
                self.names[name[0]] = who
                self.names["O" if name[0] == "F" else "F"] = AI_NAME
            self.mine[name] = str(d["card"])
            return []
        if msg.kind == "your_turn":
            phase = d.get("phase")
            if phase == "DECIDE":
                return [f"    {who:<8} to decide: {' or '.join(d.get('actions', []))}"]
            what = "plays one of" if phase == "PLAY" else "chooses between"
            return [f"    {who:<8} {what}: {' '.join(d.get('cards', []))}"]
        if msg.kind == "rejected":
            return [f"    {who:<8} refused: {d.get('reason')}"]
        return []  # replies (bet accepted, move accepted) are in the public events

    def _dealt(self) -> list[str]:
        """The deal just completed, once: who holds what, what lies face up."""
        if not self.dealing:
            return []
        self.dealing = False
        out = []
        for letter in ("F", "O"):
            who = self.names.get(letter, AI_NAME)
            first = " (plays first)" if letter == "F" else ""
            if who == AI_NAME:
                out.append(f"  {letter}: {who}{first} holds {self.hands.get(letter, 0)} cards face down: nobody sees them")
            else:
                cards = [self.mine[k] for k in sorted(self.mine, key=lambda p: int(p.rsplit(".", 1)[1]))]
                out.append(f"  {letter}: {who}{first} holds {' '.join(cards)} (face down, to {who} only)")
        out.append(f"  layout: {' '.join(self.layout)}")
        self.mine, self.layout, self.hands = {}, [], {}
        return out

    def _move(self, d: dict[str, Any]) -> list[str]:
        who = str(d.get("player"))
        for _, ev in d.get("events", []):
            if "seat" in ev and ev["seat"] not in self.names:
                self.names[ev["seat"]] = who
        out: list[str] = []
        parts: list[str] = [f"chooses {d['card']}"] if d.get("action") == "CHOOSE" else []
        for kind, ev in d.get("events", []):
            if kind == "turn":
                continue
            phrase = self._phrase(kind, ev)
            if phrase:
                parts.append(phrase)
        if parts:
            out.append(f"  {who:<8} " + "; ".join(parts))
        for kind, ev in d.get("events", []):
            if kind == "turn":
                out.append(f"  -- turn {ev['turn']}: {self.names.get(ev['seat'], ev['seat'])}")
        return out

    def _phrase(self, kind: str, ev: dict[str, Any]) -> str:
        name = self.names.get
        if kind == "played":
            return f"plays {ev['card']}"
        if kind == "placed":
            return f"{ev['card']} stays on the layout"
        if kind == "pending":
            return "pending pair " + " ".join(ev["cards"])
        if kind == "choice":
            return f"{ev['card']} matches {' and '.join(ev['options'])}: a choice"
        if kind == "flipped":
            return f"turns over {ev['card']}"
        if kind == "paired":
            return f"{ev['cards'][0]} takes {ev['cards'][1]}"
        if kind == "triple":
            maker = f" made by {name(ev['maker'], ev['maker'])}" if ev.get("maker") else ""
            return f"takes all four of month {ev['month']} ({ev['origin'].lower()}{maker}, {ev['units']} junk owed)"
        if kind == "ppuk":
            return f"PPUK: {' '.join(ev['cards'])} stay as a pile (Ppuk {ev['count']})"
        if kind in ("ttadak", "chok", "sseul"):
            bonus = f", {ev['units']} junk owed" if ev["applied"] else ", no bonus on the last turn"
            return f"{kind.upper()}{bonus}"
        if kind == "captured":
            return "captures " + " ".join(ev["cards"])
        if kind == "steal":
            took = " ".join(ev["cards"]) or "nothing (no junk left)"
            return f"steals {took} from {name(ev['from'], ev['from'])}"
        if kind == "score":
            return f"score {name('F', 'F')} {ev['F']} : {name('O', 'O')} {ev['O']}"
        if kind == "decision":
            return f"reaches {ev['score']} points: GO or STOP?"
        if kind == "go":
            return f"GO ({ev['go_count']}) at {ev['score']} points"
        if kind == "stop":
            return f"STOP at {ev['score']} points" + (" (automatic on the last turn)" if ev.get("auto") else "")
        if kind == "immediate_win":
            return f"{ev['kind']}: wins {ev['payment_points']} points at once"
        if kind == "nagari":
            return "NAGARI: the stock is spent and nobody stopped"
        return ""


AI_NAME = "house-ai"


def _matgo_payout(result: RoundResult, out: TextIO) -> None:
    """How a Matgo game ended and what the player's cover brings back."""
    d = result.details
    if result.refund_all:
        return
    seats = d.get("seats", {})
    r = d.get("result", {})
    how = {"STOP": "stopped", "CHONGTONG": "chongtong (four of a month dealt)", "THREE_PPUK": "three Ppuks",
           "NAGARI": "Nagari (a draw)"}.get(str(d.get("kind")), str(d.get("kind")))
    print(f"  {how}; deals {d.get('deals')}; F = {seats.get('F')}, O = {seats.get('O')}", file=out)
    if r.get("scores"):
        go = ", ".join(f"{seats.get(k, k)} {v}" for k, v in r.get("go_count", {}).items())
        scores = ", ".join(f"{seats.get(k, k)} {v}" for k, v in r["scores"].items())
        print(f"  scores {scores}; Go calls {go}" + (f"; multipliers {', '.join(r['multipliers'])}"
                                                     if r.get("multipliers") else ""), file=out)
    if d.get("payment_points"):
        capped = " (the loss is limited to the cover)" if d.get("loss_capped") else ""
        print(f"  payment: {d['payment_points']} points x {d['point_value']} = {d['money']}{capped}", file=out)
    else:
        print("  payment: none", file=out)


#: Matgo's first game: the first deal puts all four January cards on the layout (L1..L4), so it
#: is redealt (matgo.md §2.3); the dealer then shuffles all 48 cards again.
MATGO_LAYOUT_QUAD = ["01G", "01J1", "01J2", "01R"]


#: Seotda's first game: whoever is S1 gets 9·4 (04R 09R), everyone else a hand between 6 points
#: and Al-li (no pair), so if anyone stays to the showdown the 9·4 forces a rematch (seotda.md §5).
SEOTDA_REMATCH_DECK = ["04R", "01G", "01R", "10A", "09R", "04A", "06A", "06R"]


def demo_settings(workdir: Path, port: str, *, broker: str | None, betting_seconds: float,
                  game: str = "teen-patti") -> Settings:
    table: dict[str, Any] = {"limits": {"tie": {"min": "1", "max": "100"}}} if game == "teen-patti" else {
        "options": {"seats": 3}, "decision_seconds": 1.0}
    if game == "stud":  # four seats; a silent player's turn is decided by the timer after a second
        table = {"options": {"seats": 4}, "action_seconds": 1.0}
    if game == "seotda":  # room stake 10 (whole chips), four seats, a one-second turn timer
        table = {"options": {"stake": 10, "seats": 4}, "action_seconds": 1.0, "currency": "KRW", "minor_unit": "1"}
    if game == "matgo":  # one remote player against the house AI; 1.00 a point, a two-second turn timer
        table = {"options": {"point_value": "1.00", "min_cover_points": 50}, "action_seconds": 2.0}
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
            if game == "stud":
                _stud_payout(result, out)
            elif game == "seotda":
                _seotda_payout(result, out)
            elif game == "matgo":
                _matgo_payout(result, out)
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
        # the players who act once the cards are out: in stud player4 goes silent after two
        # actions and in sevenluck player3 never answers (the timers act for them); in Matgo
        # player1 plays the house AI (the consumer bets its cover)
        demo_strategies = {"stud": ("calling", "random", "aggressive", "disconnect"),
                           "sevenluck": ("q64", "random", "disconnect"), "matgo": ("random",)}
        if game in demo_strategies:
            make_players(game, TABLE, sim_bus, bets.players, rng=random.Random(seed + 2),
                         strategies=demo_strategies[game], silent_after=2)
        scripted: list[list[str]] = []
        if game == "seotda":  # the calling player sits at game 1's S1 and gets the 9·4 of a scripted deck
            scripted = _seotda_players(sim_bus, seed, settings, rng, service)
        if game == "matgo":  # game 1 is redealt: four cards of one month on the layout
            scripted = [_matgo_redeal_deck(rng)]
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


def _matgo_redeal_deck(rng: random.Random) -> list[str]:
    """Game 1's shoe: the 28 dealt cards in deal order (F.1-5, O.1-5, L1-4, F.6-10, O.6-10,
    L5-8) with the four January cards at L1..L4, then the stock."""
    rest = [c for c in HWATU_48 if c not in MATGO_LAYOUT_QUAD]
    rng.shuffle(rest)
    return rest[:10] + MATGO_LAYOUT_QUAD + rest[10:]


def _seotda_players(bus: Bus, seed: int, settings: Settings, rng: random.Random,
                    service: Service) -> list[list[str]]:
    """Four Seotda players (one never folds, one random who reserves, one plays its cards, one
    goes silent after two actions); returns the scripted deck of the first game: the player
    who never folds sits at S1 and gets the 9·4, so game 1 shows a rematch.

    S1 is drawn at random when game 1 opens, from the round's secret draw (seotda.md §3.1):
    nothing outside the backend can know it. The demo runs the backend in-process, so once
    the round is open it reads the draw from the core and hands out the strategies (before
    any card is dealt or any player acts)."""
    from dealer.core.cards import SEOTDA_20
    from dealer.games import game_class
    from simulators.seotda_players import SeotdaPlayer

    table = settings.tables[0]
    game = game_class("seotda").from_options(table.options)
    seats = {s: f"player{s}" for s in range(1, 5)}
    players = {s: SeotdaPlayer(TABLE, pid, bus, "calling", rng=random.Random(seed + 2 + s), silent_after=2)
               for s, pid in seats.items()}

    def deal_out_strategies(kind: str, msg: Any) -> None:
        rnd = service.tables[TABLE].current
        if not (isinstance(msg, RoundEvent) and msg.event == "round_opened" and msg.round_id is not None
                and service.tables[TABLE].round_seq(msg.round_id) == 1
                and rnd is not None and rnd.round_id == msg.round_id):
            return
        first = game.start_hand(seats, {p: Decimal(600) for p in seats.values()}, 1, table.minor_unit,
                                rnd.context, draw=rnd.draw).first_seat  # type: ignore[attr-defined]
        others = iter(("random", "hand", "disconnect"))
        for s, player in players.items():
            player.strategy = "calling" if s == first else next(others)  # type: ignore[assignment]

    service.add_observer(deal_out_strategies)
    rest = [c for c in SEOTDA_20 if c not in SEOTDA_REMATCH_DECK]
    rng.shuffle(rest)
    return [SEOTDA_REMATCH_DECK + rest]


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
