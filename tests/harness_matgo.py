"""Test harness: a Matgo table through the real service, the test the dealer and (unless a bot is)
the player: scripted decks, the table's moves, and what every finished game must satisfy (money
exact to the cent, only shown cards published, secrets kept, the journal and a replay agreeing)."""

from __future__ import annotations

import json
import random
import re
import sqlite3
from collections.abc import Callable, Iterable
from decimal import Decimal
from pathlib import Path
from typing import Any

from dealer.edge import topics
from dealer.core.cards import HWATU_48
from dealer.edge.config import Settings, load_settings
from dealer.core.events import EVENT_ADAPTER, PlayerAction
from dealer.games.matgo import AI_PLAYER, Matgo
from dealer.games.matgo_engine import MatgoGame, card_value
from dealer.games.matgo_moves import Choose, Decide, Flip, Play
from dealer.games.matgo_rules import MatgoRules, deal_positions
from dealer.core.messages import RoundResult
from dealer.core.round import Phase, Round, TableRules
from dealer.edge.service import Service
from dealer.core.settlement import settle_bet
from dealer.core.table import Table as CoreTable
from simulators.matgo_players import choose
from tests.conftest import wait_until
from tests.harness import HandShoe, PeerTable, Recorder, journal_id, round_id, strings

T = "MG1"
READER = "SC8"
ACT = topics.actions(T)
ALICE = "alice"
AI = AI_PLAYER
DEAL = [name for name, _ in deal_positions(MatgoRules())]  # F.1..F.5 O.1..O.5 L1..L4 F.6.. O.6.. L5..L8
_CODE = re.compile(r"(?<![0-9A-Z])\d\d(?:G|A|R|J1|J2|JD)(?![0-9A-Z])")  # a Hwatu code inside any text
STOCK = re.compile(r"^(?:R\d+\.)?S(\d+)$")


def matgo_settings(tmp: Path, url: str | None, port: str, **table: Any) -> Settings:
    options = {"first_player": "PLAYER"} | table.pop("options", {})
    cfg: dict[str, Any] = {
        "id": T, "game": "matgo", "currency": "EUR", "minor_unit": "0.01", "betting_seconds": 60,
        "pause_seconds": 0.1, "action_seconds": 60, "options": options,
        "scanner": {"kind": "serial", "port": port, "reader_id": READER, "heartbeat_timeout": 30},
    }
    cfg.update(table)
    return load_settings(service={"journal_path": tmp / "journal.sqlite", "metrics_enabled": False},
                         mqtt={"url": url, "client_id": "backend-matgo"}, tables=[cfg])


def core_table(**options) -> CoreTable:
    """A Matgo table on the pure core (no service): the round's own tests and the house player's."""
    return CoreTable(TableRules(table_id="MG1", game=Matgo.from_options(options), action_ms=10_000))


# -- decks ----------------------------------------------------------------------------------------


def deck(F: Iterable[str] = (), O: Iterable[str] = (), L: Iterable[str] = (), S: Iterable[str] = (), *,
         seed: int = 1, setup: str | None = None, prefix: str = "") -> tuple[list[tuple[str, str]], list[str]]:
    """A deal as (position, code) in deal order, and the stock (top first). F's and O's hands
    start with ``F`` and ``O``, the layout with ``L``, the stock with ``S``; the other cards
    are shuffled in from ``seed``, again until the setup checks (matgo.md §2.3) find
    ``setup``: None (an ordinary game), ``CHONGTONG``, ``LAYOUT_QUAD`` or ``BOTH_QUADS``."""
    F, O, L, S = list(F), list(O), list(L), list(S)
    fixed = F + O + L + S
    assert len(set(fixed)) == len(fixed) and set(fixed) <= set(HWATU_48), fixed
    rest = [c for c in HWATU_48 if c not in fixed]
    rng = random.Random(seed)
    for _ in range(1000):
        rng.shuffle(rest)
        it = iter(rest)
        f = F + [next(it) for _ in range(10 - len(F))]
        o = O + [next(it) for _ in range(10 - len(O))]
        lay = L + [next(it) for _ in range(8 - len(L))]
        stock = S + list(it)
        r = MatgoGame.start({"F": f, "O": o}, lay).result
        if (None if r is None else r.details.get("reason", r.kind)) == setup:
            cards = ({f"F.{i}": c for i, c in enumerate(f, 1)} | {f"O.{i}": c for i, c in enumerate(o, 1)}
                     | {f"L{i}": c for i, c in enumerate(lay, 1)})
            return [(prefix + n, cards[n]) for n in DEAL], stock
    raise AssertionError(f"no deck with these cards gives {setup}")


def codes_in(msg: Any) -> set[str]:
    return {c for s in strings(msg) for c in _CODE.findall(s)}


def default_of(turn: dict[str, Any]) -> tuple[str, str | None]:
    """The rulebook's timeout move (matgo.md §8) for a ``your_turn``: the lowest hand card; of
    two layout cards the more valuable (ties: the lower code); STOP."""
    if turn["phase"] == "DECIDE":
        return "STOP", None
    if turn["phase"] == "PLAY":
        return "PLAY", min(turn["cards"])
    return "CHOOSE", max(sorted(turn["cards"]), key=card_value)


# -- the table: the test is the dealer and (unless a bot is) the player ------------------------------


class Table(PeerTable):
    """The Matgo table: one player (``ALICE``) against the house, playing cards (``act``) while
    the dealer turns the stock over as asked (``flip``)."""

    def __init__(self, service: Service, rec: Recorder, shoe: HandShoe, settings: Settings) -> None:
        super().__init__(service, rec, shoe, T)
        self.settings = settings
        self.cover = Decimal(0)
        self.flipped: list[str] = []  # stock positions scanned, with the checks of check_flip done

    @property
    def key(self) -> str:
        assert self.rnd is not None
        return f"{T}:{self.rnd.round_id}"

    def mine(self, player: str = ALICE, kind: str | None = None) -> list[dict[str, Any]]:
        return super().mine(player, kind)

    def acted(self, round_id: str | None = None) -> list[tuple[str, str, str | None, str]]:
        """(player, action, card, by) of every move, in order."""
        round_id = round_id or self.r1
        return [(e["data"]["player_id"], e["data"]["action"], e["data"].get("card"), e["data"]["by"])
                for e in self.rec.events("player_acted") if e["round_id"] == round_id]

    async def sit(self, cover: str = "100.00", round_id: str | None = None) -> None:
        round_id = round_id or self.r1
        await wait_until(lambda: any(e["round_id"] == round_id for e in self.rec.events("round_opened")),
                         what=f"round {round_id} opened")
        await self.rec.command(ACT, {"type": "place_bet", "bet_id": f"{round_id}-{ALICE}", "player_id": ALICE,
                                     "bet_type": "cover", "stake": cover, "seat": 1, "round_id": round_id})
        await wait_until(lambda: any(m["round_id"] == round_id for m in self.mine(ALICE, "bet_accepted")),
                         what="the player seated")
        self.cover = Decimal(cover)
        self.rnd = self.service.tables[T].current
        assert self.rnd is not None and self.rnd.round_id == round_id
        await self.rec.command(ACT, {"type": "close_betting", "by": "dealer"})
        await wait_until(lambda: self.rnd.hand is not None, what="the game started")

    @property
    def letter(self) -> str:
        """The player's seat letter: F plays first."""
        assert self.rnd is not None and self.rnd.hand is not None
        return self.rnd.hand.letter[ALICE]  # type: ignore[attr-defined]

    async def deal(self, cards: Iterable[tuple[str, str]]) -> None:  # type: ignore[override]
        await super().deal(*cards)

    async def deal_blind(self, cards: Iterable[tuple[str, str]]) -> None:  # type: ignore[override]
        await super().deal_blind(*cards)

    def stock_wanted(self) -> str | None:
        """The stock position the station asks for now, if any."""
        rnd = self.rnd
        assert rnd is not None
        pos = rnd.expected_position
        if rnd.phase == Phase.DEALING and pos and STOCK.match(pos) and self.rec.expects(pos, rnd.round_id):
            return pos
        return None

    def check_flip(self, pos: str) -> None:
        """A stock card is asked for alone, right after a hand card, and nobody's timer runs."""
        rnd = self.rnd
        assert rnd is not None and rnd.hand is not None
        n = int(STOCK.match(pos).group(1))  # type: ignore[union-attr]
        prefix = pos[: -len(f"S{n}")]
        assert [p.name for p in rnd.plan if STOCK.match(p.name)] == [f"{prefix}S{k}" for k in range(1, n + 1)]
        assert rnd.plan[-1].name == pos  # nothing beyond the card being turned over
        log = rnd.hand.log  # type: ignore[attr-defined]
        assert sum(m["action"] == "PLAY" for m in log) == n and sum(m["action"] == "FLIP" for m in log) == n - 1
        assert rnd.phase == Phase.DEALING and rnd.hand.to_act is None and rnd.action_deadline is None
        armed = self.service.timers.armed.get(T)
        assert armed is None or armed[0][0] != "act", armed  # the turn timer is not running
        self.flipped.append(pos)

    async def flip(self, code: str, *, check: bool = True) -> str:
        pos = await wait_until(self.stock_wanted, what="a stock card asked for")
        if check:
            self.check_flip(pos)
        assert self.rnd is not None
        n = len(self.rnd.cards)
        self.shoe.scan(code)
        await wait_until(lambda: len(self.rnd.cards) == n + 1, what=f"{pos} registered")
        assert self.rnd.cards[pos] == code
        return pos

    def _open_turn(self, player: str = ALICE) -> dict[str, Any] | None:
        rid = self.rnd.round_id if self.rnd else None
        return next((m for m in self.mine(player, "your_turn")
                     if m["round_id"] == rid and (m["round_id"], m["data"]["turn"]) not in self.answered), None)

    async def turn(self) -> dict[str, Any]:
        """Wait for the player's next ``your_turn``; returns its data (phase, actions, cards)."""
        msg = await wait_until(self._open_turn, what="the player's turn")
        self.answered.add((msg["round_id"], msg["data"]["turn"]))
        return msg["data"]

    async def act(self, action: str, card: str | None = None, *, turn: dict[str, Any] | None = None) -> dict[str, Any]:
        data = turn if turn is not None else await self.turn()
        assert action in data["actions"] and (card is None or card in data["cards"]), (action, card, data)
        n = len(self.mine(ALICE, "action_accepted"))
        await self.rec.command(ACT, self.action(action, card))
        await wait_until(lambda: len(self.mine(ALICE, "action_accepted")) > n, what=f"{action} {card} accepted")
        return data

    def action(self, action: str, card: str | None = None, player: str = ALICE, **extra: Any) -> dict[str, Any]:
        out = {"type": "player_action", "player_id": player, "action": action,
               "round_id": self.rnd.round_id if self.rnd else None, "turn": max(1, self.rnd.turn) if self.rnd else 1}
        return out | ({"card": card} if card is not None else {}) | extra

    async def refused(self, payload: dict[str, Any], contains: str, player: str = ALICE) -> str:
        """Send an action that must be refused; return the reason the player was given."""
        n = len(self.mine(player, "rejected"))
        await self.rec.command(ACT, payload)
        await wait_until(lambda: len(self.mine(player, "rejected")) > n, what=f"{player} told why")
        reason = self.mine(player, "rejected")[n]["data"]["reason"]
        assert contains in reason, reason
        return reason

    async def play_out(self, stock: Iterable[str],
                       answer: Callable[[dict[str, Any]], tuple[str, str | None]] | None = None,
                       check: bool = True) -> dict[str, Any]:
        """Turn the stock over as asked and (with ``answer``) play the player's turns, to the result."""
        cards = iter(stock)
        while True:
            what = await wait_until(lambda: "result" if self.rec.results(self.key) else "flip" if self.stock_wanted()
                                    else "turn" if answer is not None and self._open_turn() else None,
                                    timeout=60, what="the game to go on")
            if what == "result":
                return self.rec.results(self.key)[0]
            if what == "flip":
                await self.flip(next(cards), check=check)
            else:
                data = await self.turn()
                await self.act(*answer(data), turn=data)

    async def next_round(self) -> None:
        """The result was delivered and the table opened the next round."""
        assert self.rnd is not None
        nxt = round_id(self.service, int(self.rnd.round_id.rsplit("-", 1)[1]) + 1, T)
        await wait_until(lambda: self.service.tables[T].undelivered == {}, what="result delivered")
        await wait_until(lambda: any(e["round_id"] == nxt for e in self.rec.events("round_opened")),
                         what="the next round")


def stopper(turn: dict[str, Any]) -> tuple[str, str | None]:
    return choose("stopper", turn, random.Random(0))


# -- what every finished game must satisfy ------------------------------------------------------------


def money_exact(res: dict[str, Any], cover: Decimal) -> Decimal:
    """What goes back is the cover ± payment points × point value, a loss limited to the cover;
    a consumer settling the cover (:func:`settle_bet`) gets exactly the same amount."""
    d = res["details"]
    points, value, money = d["payment_points"], Decimal(d["point_value"]), Decimal(d["money"])
    assert res["outcome"] == "COMPLETED" and not res["refund_all"] and money == points * value
    back = Decimal(res["player_bets"][ALICE]["cover"]["returned"])
    assert set(res["player_bets"]) == {ALICE} and set(res["player_bets"][ALICE]) == {"cover"}
    assert settle_bet("cover", cover, RoundResult.model_validate(res), ALICE).returned == back
    assert Decimal(res["accepted_bets"]["stakes"]["cover"]) == cover and res["accepted_bets"]["count"] == 1
    if res["winner"] == "PLAYER":
        assert points > 0 and back == cover + money and d["loss_capped"] is False
    elif res["winner"] == "AI":
        assert points > 0 and back == cover - min(money, cover) >= 0
        assert d["loss_capped"] is (money > cover)
    else:
        assert res["winner"] is None and d["kind"] == "NAGARI" and points == 0 and back == cover
    assert d["rake"] == "0"
    return back


def journal_round(settings: Settings, round_id: str) -> Round:
    """The round rebuilt from the journal on a fresh core: it holds every registered card (the
    result carries only the cards that were shown; the journal keeps the rest, for recall)."""
    path = settings.service.journal_path
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        bodies = [b for (b,) in db.execute("SELECT body FROM events WHERE table_id = ? ORDER BY id", (T,))]
    core = CoreTable(settings.tables[0].rules(), series=journal_id(settings))  # as the service replays
    found = None
    for b in bodies:
        core.handle(EVENT_ADAPTER.validate_json(b))
        rnd = core.undelivered.get(round_id) or core.current
        if rnd is not None and rnd.round_id == round_id:
            found = rnd
    assert found is not None and found.result is not None, f"the journal does not hold round {round_id}"
    return found


def shown_only(res: dict[str, Any], dealt: dict[str, str]) -> None:
    """The result's cards are the registered cards that were shown: the layout and the stock
    turned over, the hand cards played and a chongtong's four cards; never a hand card kept."""
    d = res["details"]
    prefix = f"R{d['deals'] - 1}." if d["deals"] > 1 else ""
    played = {m["card"] for m in d["moves"] if m["action"] == "PLAY"}
    quad = set(d["result"].get("months", ())) if d["kind"] == "CHONGTONG" else set()
    winner = next((k for k, p in d["seats"].items() if (p == ALICE) == (res["winner"] == "PLAYER")), None)

    def shown(pos: str, code: str) -> bool:
        current = pos.startswith(prefix)
        name = pos[len(prefix):] if current else pos
        if "." not in name:  # the layout and the stock turned over, of every deal
            return True
        if not current:  # the hands of a deal that was redealt
            return False
        return code in played or (name[0] == winner and int(code[:2]) in quad)

    assert res["cards"] == {p: c for p, c in dealt.items() if shown(p, c)}


def replayed(res: dict[str, Any], settings: Settings) -> MatgoGame:
    """The journaled moves, replayed on a fresh engine from the registered cards (the journal
    holds them all), give the same events and the same result; each stock card is the next
    one turned over (S1, S2, ...)."""
    d = res["details"]
    cards = journal_round(settings, res["round_id"]).cards
    shown_only(res, cards)
    prefix = f"R{d['deals'] - 1}." if d["deals"] > 1 else ""
    g = MatgoGame.start({s: [cards[f"{prefix}{s}.{i}"] for i in range(1, 11)] for s in ("F", "O")},  # type: ignore[misc]
                        [cards[f"{prefix}L{i}"] for i in range(1, 9)])
    flips = []
    for m in d["moves"]:
        kind = {"PLAY": Play, "CHOOSE": Choose, "FLIP": Flip}.get(m["action"])
        move = kind(m["card"]) if kind is not None else Decide(m["action"] == "GO")
        assert m["player"] == d["seats"][g.to_move], (m, g.to_move)
        assert json.loads(json.dumps(g.apply(move))) == m["events"], m
        if m["action"] == "FLIP":
            flips.append(m["card"])
    assert flips == [cards[f"{prefix}S{i}"] for i in range(1, len(flips) + 1)]
    assert not any(STOCK.match(p) and p not in {f"{prefix}S{i}" for i in range(1, len(flips) + 1)} for p in cards)
    r = g.result
    assert r is not None and r.kind == d["kind"] and r.payment_points == d["payment_points"]
    winner = None if r.winner is None else ("PLAYER" if d["seats"][r.winner] == ALICE else "AI")
    assert winner == res["winner"]
    return g


def secrets_kept(rec: Recorder, res: dict[str, Any], cards: dict[str, str]) -> None:
    """Nobody is shown a card of the AI's hand it has not played (not even once the game is
    over), nor a stock card before it is turned over; the player's hand goes to the player's
    topic only; nothing at all is published for the house AI."""
    d, rid = res["details"], res["round_id"]
    assert d["deals"] == 1
    me_ = next(k for k in ("F", "O") if d["seats"][k] == ALICE)
    ai_ = next(k for k in ("F", "O") if d["seats"][k] == AI)
    ai_hand = {cards[f"{ai_}.{i}"] for i in range(1, 11)}
    stock = {c for p, c in cards.items() if STOCK.match(p)}
    played: set[str] = set()
    turned: set[str] = set()
    mine = topics.player(T, ALICE)
    holes = []
    shown: set[str] = set()  # the AI's cards seen once played (the check is not vacuous)
    for topic, msg in rec.messages:
        assert not topic.endswith(f"/players/{AI}"), msg
        if msg.get("round_id") != rid:
            continue
        # protocol 2: a state shows what the events it carries did (listed after it by the recorder)
        for ev in msg.get("events") or [] if topic.endswith("/state") else [msg] if topic.endswith("/events") else []:
            if ev["event"] == "player_acted" and ev["data"]["player_id"] == AI and ev["data"]["action"] == "PLAY":
                played.add(ev["data"]["card"])
            if ev["event"] == "card_registered":
                pos = ev["data"]["position"]
                assert (ev["data"]["card"] is None) == ("." in pos), ev  # hands face down, layout and stock up
                if STOCK.match(pos):
                    turned.add(ev["data"]["card"])
        if msg.get("kind") == "hole_card":
            assert topic == mine, (topic, msg)
            holes.append((msg["data"]["position"], msg["data"]["card"]))
        seen = codes_in(msg)
        assert not (seen & ai_hand) - played, (topic, msg, (seen & ai_hand) - played)
        shown |= seen & ai_hand
        assert not (seen & stock) - turned, (topic, msg)
    assert holes == [(p, cards[p]) for p in DEAL if p.startswith(f"{me_}.")]
    assert shown and shown == played


def journal_agrees(settings: Settings, res: dict[str, Any]) -> None:
    """The AI's moves are in the journal as ordinary ``player_action`` events from ``house-ai``,
    and replaying the journal on a fresh core rebuilds exactly the published result."""
    path = settings.service.journal_path
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        bodies = [b for (b,) in db.execute("SELECT body FROM events WHERE table_id = ? ORDER BY id", (T,))]
    events = [EVENT_ADAPTER.validate_json(b) for b in bodies]
    rid = res["round_id"]
    ai_sent = [(e.action, e.card) for e in events if isinstance(e, PlayerAction) and e.player_id == AI]
    ai_moves = [(m["action"], m["card"]) for m in res["details"]["moves"] if m["player"] == AI and m["action"] != "FLIP"]
    assert ai_sent == ai_moves
    core = CoreTable(settings.tables[0].rules(), series=journal_id(settings))  # as the service replays
    for ev in events:
        core.handle(ev)
        rnd = core.undelivered.get(rid) or core.current
        if rnd is not None and rnd.round_id == rid and rnd.result is not None:
            assert json.loads(rnd.result.model_dump_json()) == res
            return
    raise AssertionError("the journal does not rebuild the result")
