"""Each game's part of ``dealer demo``: what the pit boss reads of it (its log lines and
payout lines) and the scripted first rounds that show its rules at work. The games' kits
(:mod:`tools.games`) name these; :mod:`tools.demo` runs them."""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any, TextIO

from dealer.core.cards import HWATU_48, parse_card
from dealer.core.messages import PlayerMessage, RoundEvent, RoundResult, StationPrompt


def card_text(code: str | None) -> str:
    """A card as the log shows it (its display form; ``(hidden)`` for a card not shown)."""
    if code is None:
        return "(hidden)"
    try:
        return parse_card(code).display
    except ValueError:
        return code


_card = card_text

_STUD_VERB = {"BRING_IN": "brings in {total}", "BET": "bets {total}", "RAISE": "raises to {total} (+{increment})",
              "CALL": "calls {total}", "CHECK": "checks", "FOLD": "folds", "ALL_IN": "is all-in for {total}"}
_STUD_STEP = {"WASH": "washes", "SHUFFLE": "shuffles"}


def _stud_line(msg: Any) -> str | None:
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
        hands = ", ".join(f"{k}: {category_text(v)}" for k, v in d["hands"].items())
        return f"  RESULT winner {d['winner']}" + (f" ({hands})" if hands else " (everyone else folded)")
    return None


def category_text(category: str | None) -> str:
    """A hand category as words (``one_pair`` -> ``one pair``)."""
    return (category or "?").replace("_", " ")


def stud_log(msg: Any) -> tuple[list[str], bool]:
    """Seven-Card Stud: the dealer's steps, the streets, every action, the showdown."""
    line = _stud_line(msg)
    return ([], False) if line is None else ([line] if line else [], True)


def stud_payout(result: RoundResult, out: TextIO) -> None:
    """The rake, the pots of a stud hand (after the rake), and what goes back to each player."""
    d = result.details
    if result.refund_all:
        return
    why = "" if d.get("raked") else " (the hand ended before the 7th card: no rake)"
    print(f"  in the pot {d.get('total_pot')}, rake {d['rake']}{why}", file=out)
    for pot in d.get("pots", []):
        shares = ", ".join(f"{p} {a}" for p, a in pot["shares"].items())
        name = "main pot" if pot["pot"] == 0 else f"side pot {pot['pot']}"
        print(f"  {name} {pot['amount']} among {', '.join(pot['eligible'])} -> {shares}", file=out)


class SeotdaLog:
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


def seotda_payout(result: RoundResult, out: TextIO) -> None:
    """The pots of a Seotda game (rematches included), the hands, what goes back to each."""
    d = result.details
    if result.refund_all:
        return
    won = {p for a in d.get("awards", []) if a["result"] in ("WIN", "SPLIT") for p in a.get("shares", {})}
    for k, seat in d.get("seats", {}).items():
        name = d.get("names", {}).get(k) or ("(not shown: won without a showdown)" if seat["player"] in won
                                             else "(not shown: folded, or out of the last rematch)")
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


class MatgoLog:
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
            # The station's announcement names the payment points as if they were the score
            # ("The house wins 38 points" for a Stop at 18): the RESULT line says both instead.
            return [], True
        if isinstance(msg, RoundResult):
            return ([] if msg.refund_all else [matgo_result_line(msg)]), True
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
            return self._dealt(), True  # the RESULT line comes with the result (score and payment)
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


_MATGO_END = {"STOP": "stopped", "CHONGTONG": "chongtong (four cards of one month dealt)",
              "THREE_PPUK": "three Ppuks", "NAGARI": "Nagari (a draw)"}
_AT_ONCE = {"CHONGTONG": "chongtong, four cards of one month dealt (matgo.md §2.3)",
            "THREE_PPUK": "a third Ppuk (matgo.md §4.3)"}


def _matgo_names(result: RoundResult) -> tuple[dict[str, str], str | None]:
    """Seat letter -> who sits there, and the winner's seat letter (None: nobody won)."""
    seats = {str(k): str(v) for k, v in result.details.get("seats", {}).items()}
    if result.winner is None:
        return seats, None
    house = result.winner == "AI"
    return seats, next((k for k, v in seats.items() if (v == AI_NAME) == house), None)


def matgo_payment(result: RoundResult) -> str:
    """How the payment follows from the score (matgo.md §7): the stopper's score, the Go
    adjustment, each multiplier, then the point value."""
    d = result.details
    r = d.get("result", {})
    pp = d.get("payment_points") or 0
    if not pp:
        return "none"
    if d.get("kind") == "STOP":
        points, adjusted = r.get("points"), r.get("go_adjusted")
        seats, win = _matgo_names(result)
        go = r.get("go_count", {}).get(win, 0) if win else 0
        how = f"{points} points"
        if go in (1, 2):
            how += f" + {go} for {go} Go = {adjusted}"
        elif go >= 3:
            how += f" x {2 ** (go - 2)} for {go} Go = {adjusted}"
    else:  # an immediate win: 5 points, no Go adjustment (§7.4)
        how = f"{r.get('points', 5)} points"
    mult = r.get("multipliers") or []
    if mult:
        how += "".join(f" x 2 ({m})" for m in mult) + f" = {pp} points"
    money = f"{pp} points x {d.get('point_value')} = {d.get('money')}"
    return money if how == f"{pp} points" else f"{how}; {money}"


def matgo_result_line(result: RoundResult) -> str:
    """RESULT: who won, with what score (the points of the combinations, §5) and what that
    pays (the payment points, §7: score, Go adjustment, multipliers, times the point value)."""
    d = result.details
    r = d.get("result", {})
    seats, win = _matgo_names(result)
    kind = str(d.get("kind"))
    if win is None:
        return "  RESULT Nagari: nobody stopped before the stock ran out; a draw, nothing is paid"
    who = seats.get(win, win)
    pays = f"payment {d.get('payment_points')} points = {d.get('money')}"
    if kind == "STOP":
        go = r.get("go_count", {}).get(win, 0)
        after = f" after {go} Go" if go else ""
        auto = " (automatic on the last turn)" if r.get("auto") else ""
        return f"  RESULT {who} wins: stops at a score of {r.get('points')} points{after}{auto}; {pays}"
    return f"  RESULT {who} wins at once: {_AT_ONCE.get(kind, kind.lower())}; {pays}"


def matgo_payout(result: RoundResult, out: TextIO) -> None:
    """How a Matgo game ended and what the player's cover brings back."""
    d = result.details
    if result.refund_all:
        return
    seats, win = _matgo_names(result)
    r = d.get("result", {})
    deals = int(d.get("deals") or 1)
    redeals = f" ({deals - 1} redeal{'s' if deals > 2 else ''})" if deals > 1 else ""
    how = _MATGO_END.get(str(d.get("kind")), str(d.get("kind")))
    who = f"{seats.get(win, win)} " if win and d.get("kind") == "STOP" else ""
    print(f"  {who}{how}; {deals} deal{'s' if deals > 1 else ''}{redeals}; F = {seats.get('F')}, O = {seats.get('O')}",
          file=out)
    if r.get("scores") and d.get("kind") in ("STOP", "NAGARI"):
        go = ", ".join(f"{seats.get(k, k)} {v}" for k, v in r.get("go_count", {}).items())
        scores = ", ".join(f"{seats.get(k, k)} {v}" for k, v in r["scores"].items())
        print(f"  scores {scores}; Go calls {go}", file=out)
    capped = " (the loss is limited to the cover)" if d.get("loss_capped") else ""
    print(f"  payment: {matgo_payment(result)}{capped}", file=out)


#: Matgo's first game: the first deal puts all four January cards on the layout (L1..L4), so it
#: is redealt (matgo.md §2.3); the dealer then shuffles all 48 cards again.
MATGO_LAYOUT_QUAD = ["01G", "01J1", "01J2", "01R"]


#: Seotda's first game: whoever is S1 gets 9·4 (04R 09R), everyone else a hand between 6 points
#: and Al-li (no pair), so if anyone stays to the showdown the 9·4 forces a rematch (seotda.md §5).
SEOTDA_REMATCH_DECK = ["04R", "01G", "01R", "10A", "09R", "04A", "06A", "06R"]


def matgo_script(setup: Any) -> list[list[str]]:
    """Game 1 is redealt: four cards of one month on the layout."""
    return [_matgo_redeal_deck(setup.rng)]


def _matgo_redeal_deck(rng: random.Random) -> list[str]:
    """Game 1's shoe: the 28 dealt cards in deal order (F.1-5, O.1-5, L1-4, F.6-10, O.6-10,
    L5-8) with the four January cards at L1..L4, then the stock."""
    rest = [c for c in HWATU_48 if c not in MATGO_LAYOUT_QUAD]
    rng.shuffle(rest)
    return rest[:10] + MATGO_LAYOUT_QUAD + rest[10:]


def seotda_script(setup: Any) -> list[list[str]]:
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

    service, tid = setup.service, setup.table_id
    table = setup.settings.tables[0]
    game = game_class("seotda").from_options(table.options)
    seats = {s: f"player{s}" for s in range(1, 5)}
    players = {s: SeotdaPlayer(tid, pid, setup.bus, "calling", rng=random.Random(setup.seed + 2 + s), silent_after=2)
               for s, pid in seats.items()}

    def deal_out_strategies(kind: str, msg: Any) -> None:
        rnd = service.tables[tid].current
        if not (isinstance(msg, RoundEvent) and msg.event == "round_opened" and msg.round_id is not None
                and service.tables[tid].round_seq(msg.round_id) == 1
                and rnd is not None and rnd.round_id == msg.round_id):
            return
        first = game.start_hand(seats, {p: Decimal(600) for p in seats.values()}, 1, table.minor_unit,  # type: ignore[attr-defined]  # a Seotda game (its strategies below): it starts its hands
                                rnd.context, draw=rnd.draw).first_seat
        others = iter(("random", "hand", "disconnect"))
        for s, player in players.items():
            player.strategy = "calling" if s == first else next(others)

    service.add_observer(deal_out_strategies)
    rest = [c for c in SEOTDA_20 if c not in SEOTDA_REMATCH_DECK]
    setup.rng.shuffle(rest)
    return [SEOTDA_REMATCH_DECK + rest]
