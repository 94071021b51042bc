"""Test harness: what each audience may see, for every game. A scripted round on the core
(``Script``) and the same round run through the real service over a broker (``Run``), with
every message recorded, so that a test can check what went where."""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from dealer.core import visibility
from dealer.core.cards import HWATU_48, SEOTDA_20, STANDARD_52
from dealer.edge.config import load_settings
from dealer.core.events import (
    ActionTimeout,
    CardExposed,
    CloseBetting,
    DealerConfirm,
    DecisionTimeout,
    Event,
    LinkDown,
    OpenRound,
    PlaceBet,
    PlayerAction,
    PlayerDecision,
    ReadFailed,
    ScanRead,
    SupervisorExpose,
    SupervisorVoid,
)
from dealer.games.matgo import AI_PLAYER, AI_SEAT
from dealer.core.messages import PlayerMessage, RoundEvent, RoundResult, StationPrompt
from dealer.core.round import ACTIVE, Phase, Rejection, Round, Step
from dealer.core.table import Table
from dealer.core.visibility import Visibility

GAMES = ("teen-patti", "sevenluck", "stud", "seotda", "matgo")

DECKS = {"teen-patti": STANDARD_52, "sevenluck": STANDARD_52, "stud": STANDARD_52, "seotda": SEOTDA_20,
         "matgo": HWATU_48}

FOREIGN = {"teen-patti": "01G", "sevenluck": "01G", "stud": "01G", "seotda": "11G", "matgo": "AS"}

T = "T1"

R1 = "T1-000001"


def make_table(game: str, options: Mapping[str, Any] | None = None) -> Table:
    s = load_settings(service={"metrics_enabled": False},
                      tables=[{"id": T, "game": game, "options": dict(options or {}),
                               "scanner": {"kind": "mqtt", "reader_id": "SC1"}}])
    return Table(s.tables[0].rules())


def codes_rx(game: str) -> re.Pattern[str]:
    """The test's own card finder (not the module's): any code of the game's deck as a token."""
    alts = "|".join(sorted(DECKS[game], key=len, reverse=True))
    return re.compile(f"(?<![0-9A-Za-z])(?:{alts})(?![0-9A-Za-z])")


class Script:
    """One round through the pure core, the test being the dealer and every player."""

    def __init__(self, game: str, options: Mapping[str, Any] | None = None) -> None:
        self.t = make_table(game, options)
        self.at = 1_000
        self.effects: list[Any] = []
        self.step(OpenRound(round_id=R1))

    @property
    def r(self) -> Round:
        assert self.t.current is not None
        return self.t.current

    def step(self, ev: Event) -> Step:
        self.at += 10
        step = self.t.handle(ev.model_copy(update={"at": self.at}))
        self.effects += step.effects
        return step

    def bet(self, player: str, bet_type: str, stake: str, seat: int | None = None) -> None:
        assert self.step(PlaceBet(bet_id=f"{player}-{bet_type}", player_id=player, bet_type=bet_type,
                                  stake=Decimal(stake), seat=seat)).accepted

    def close(self) -> None:
        assert self.step(CloseBetting(by="dealer")).accepted

    def deal(self, *codes: str) -> None:
        """Scan ``codes`` at the next positions, confirming WASH / SHUFFLE steps on the way."""
        for code in codes:
            while self.r.plan[self.r.next_index].confirm:
                assert self.step(DealerConfirm(step=self.r.plan[self.r.next_index].name)).accepted
            step = self.step(ScanRead(reader="SC1", code=code))
            assert step.accepted and not any(isinstance(e, RoundEvent) and e.event == "scan_rejected"
                                             for e in step.effects), step.effects

    def act(self, player: str, action: str, amount: str | None = None, card: str | None = None) -> Step:
        step = self.step(PlayerAction(player_id=player, action=action, round_id=R1, turn=self.r.turn,  # type: ignore[arg-type]
                                      amount=Decimal(amount) if amount else None, card=card))
        assert step.accepted, step.effects
        return step

    def passive(self, folds: Sequence[str] = ()) -> None:
        """Stud: everyone to act checks, brings in the least or calls; ``folds`` fold instead."""
        while self.r.phase == Phase.ACTION:
            hand = self.r.hand
            assert hand is not None and hand.to_act is not None
            who, opts = hand.to_act, hand.turn_options()
            if who in folds and "FOLD" in opts["actions"]:
                self.act(who, "FOLD")
            elif "CHECK" in opts["actions"]:
                self.act(who, "CHECK")
            elif "BRING_IN" in opts["actions"]:
                self.act(who, "BRING_IN", opts["bet"]["min"])
            else:
                self.act(who, "CALL")

    def seen(self) -> dict[str, str]:
        """Position -> ``P``, ``H``, ``O:player``, ``J`` or ``J:player`` (journal only, owner kept)."""
        short = {Visibility.PUBLIC: "P", Visibility.HIDDEN: "H", Visibility.OWNER: "O", Visibility.JOURNAL_ONLY: "J"}
        return {k: short[s.visibility] + (f":{s.owner}" if s.owner and s.visibility != Visibility.PUBLIC else "")
                for k, s in visibility.view(self.r).items()}

    def events(self, name: str) -> list[RoundEvent]:
        return [e for e in self.effects if isinstance(e, RoundEvent) and e.event == name]

    def holes(self, player: str) -> list[tuple[str, str]]:
        return [(m.data["position"], m.data["card"]) for m in self.effects
                if isinstance(m, PlayerMessage) and m.player_id == player and m.kind == "hole_card"]


class Oracle:
    """What each audience may know, learnt from the messages as they go out, each reveal checked
    against the rules on its own (not by asking the policy)."""

    def __init__(self, game: str) -> None:
        self.game = game
        self.rx = codes_rx(game)
        self.public: set[str] = set()
        self.told: dict[str, set[str]] = {}
        self.folded: set[tuple[str, int]] = set()  # (player, game number: Seotda rematches)
        self.played: set[str] = set()  # Matgo hand cards played
        self.results: list[RoundResult] = []

    def named(self, text: str, rnd: Round) -> set[str]:
        return set(self.rx.findall(text)) & set(rnd.cards.values())

    def owner(self, rnd: Round, name: str) -> str | None:
        pos = next(p for p in rnd.plan if p.name == name)
        if self.game == "matgo" and pos.seat == AI_SEAT:
            return AI_PLAYER
        return rnd.seat_owner.get(pos.seat) if pos.seat is not None else None

    def check(self, rnd: Round, step: Step) -> None:
        if self.game == "matgo":
            self.told[AI_PLAYER] = {c for p in rnd.plan if p.seat == AI_SEAT and (c := rnd.cards.get(p.name))}
        for e in step.effects:
            self.learn(rnd, e)
            if isinstance(e, Rejection):
                audiences = [(visibility.PUBLIC, e.reason)]
            else:
                text = e.model_dump_json()
                who = {RoundEvent: visibility.PUBLIC, StationPrompt: visibility.STATION,
                       RoundResult: visibility.SETTLEMENT}.get(type(e))
                audiences = [(who or visibility.player(e.player_id), text)]
                if who == visibility.PUBLIC:
                    audiences.append((visibility.OPS, text))
            for audience, text in audiences:
                allowed = self.public | (self.told.get(audience[len("player:"):], set())
                                         if audience.startswith("player:") else set())
                leaked = self.named(text, rnd) - allowed
                assert not leaked, (audience, leaked, e)
                assert visibility.leaks(rnd, audience, text) == [], (audience, e)  # the net stays silent

    def learn(self, rnd: Round, e: Any) -> None:
        byname = {p.name: p for p in rnd.plan}
        if isinstance(e, PlayerMessage) and e.kind == "hole_card":
            pos = byname[e.data["position"]]
            assert rnd.cards[pos.name] == e.data["card"] and pos.face == "DOWN" and not pos.burn
            assert self.owner(rnd, pos.name) == e.player_id, e
            if self.game == "seotda" and pos.name.endswith(".2"):  # §3.2: once every second card is dealt
                assert all(q.name in rnd.cards for q in rnd.plan if q.deck == pos.deck and q.name.endswith(".2"))
            self.told.setdefault(e.player_id, set()).add(e.data["card"])
        if not isinstance(e, RoundEvent):
            return
        d = e.data
        if e.event == "card_registered" and d["card"] is not None:
            pos = byname[d["position"]]
            assert pos.face == "UP" and not pos.burn and rnd.cards[pos.name] == d["card"]
            self.public.add(d["card"])
        elif e.event == "card_exposed":
            assert self.game == "stud" and d["position"].endswith(".7") and rnd.cards[d["position"]] == d["card"]
            self.public.add(d["card"])
        elif e.event == "player_acted":
            if d["action"] == "FOLD":
                m = re.search(r"rematch (\d+)", str(d.get("street")))
                self.folded.add((d["player_id"], int(m.group(1)) if m else 0))
            if self.game == "matgo" and d["action"] == "PLAY":
                hand = rnd.hand
                assert hand is not None
                mine = {rnd.cards[p.name] for p in rnd.plan if p.name in rnd.cards and p.deck == hand.deals - 1  # type: ignore[attr-defined]
                        and p.face == "DOWN" and self.owner(rnd, p.name) == d["player_id"]}
                assert d["card"] in mine, d
                self.played.add(d["card"])
                self.public.add(d["card"])
        elif e.event == "decision_made" and d["action"] == "FOLD":
            self.folded.add((d["player_id"], 0))
        elif e.event == "cards_revealed":
            for name, code in d["cards"].items():
                assert rnd.cards[name] == code
                if code not in self.public:
                    self.check_reveal(rnd, byname[name], code)
            self.public |= set(d["cards"].values())
        elif e.event in ("showdown", "rematch") and "hands" in d:  # Seotda: each showdown shows its hands
            assert self.game == "seotda"
            for hand in d["hands"].values():
                for name, code in zip(hand["positions"], hand["cards"], strict=True):
                    assert rnd.cards[name] == code
                    if code not in self.public:
                        self.check_reveal(rnd, byname[name], code, showdown=True)
                self.public |= set(hand["cards"])

    def check_reveal(self, rnd: Round, pos: Any, code: str, showdown: bool = False) -> None:
        """A face-down card shown now must be one the rules show."""
        assert not pos.burn and (rnd.phase == Phase.RESULT or showdown), pos
        owner = self.owner(rnd, pos.name)
        assert (owner, pos.deck if self.game == "seotda" else 0) not in self.folded, (pos, "folded")
        hand: Any = rnd.hand
        if self.game == "stud":
            assert len(hand.betting.live) > 1, "an uncontested winner does not show"
        elif self.game == "seotda" and pos.deck == hand.game.number:
            assert len(hand.game.betting.live) > 1, "an uncontested winner does not show"
        elif self.game == "matgo":
            result = hand.engine.result
            quad = result is not None and result.kind == "CHONGTONG" and int(code[:2]) in result.details["months"]
            assert code in self.played or (quad and owner == hand.seat_of[result.winner]), (pos, code)


class Run:
    """One random round of ``game``: random players, bets, deal, scanner faults, actions,
    refusals, voids and cancellations; every step checked by :class:`Oracle`."""

    def __init__(self, game: str, seed: int) -> None:
        self.game = game
        self.rng = rng = random.Random(seed)
        self.passive = rng.random() < 0.4  # nobody folds: showdowns, deck exhaustion, rematches
        self.faults = rng.random() < 0.7
        self.full = game == "stud" and self.passive and rng.random() < 0.6  # seven to the 7th street
        self.options = self._options()
        self.t = make_table(game, self.options)
        self.oracle = Oracle(game)
        self.at = 1_700_000_000_000
        self.journal: list[Event] = []
        self.decks: dict[int, list[str]] = {}
        self.forced: dict[str, str] = {}
        if game == "seotda" and rng.random() < 0.4:  # a 1·2 draw between S1 and S2: a rematch if they stay in
            self.forced = {"S1.1": "01G", "S2.1": "01R", "S1.2": "02A", "S2.2": "02R"}
        if game == "matgo" and rng.random() < 0.15:  # four Januaries on the layout: a redeal of all 48 cards
            self.forced = {"L1": "01G", "L2": "01R", "L3": "01J1", "L4": "01J2"}

    def _options(self) -> dict[str, Any]:
        rng, g = self.rng, self.game
        if g == "teen-patti":
            return {"burn_cards": rng.choice((0, 1)), "deal_order": rng.choice(("ALTERNATE", "BLOCK"))}
        if g == "sevenluck":
            return {"hand_mode": rng.choice(("SEATED", "SEATED", "SHARED"))}
        if g == "stud":  # seven players to the 7th street exhaust the deck: burn cards are dealt again
            return {"deck_exhaustion": "RESHUFFLE_BURNS" if self.full else rng.choice(("COMMUNITY_CARD",
                                                                                        "RESHUFFLE_BURNS"))}
        if g == "matgo":
            return {"first_player": rng.choice(("PLAYER", "AI"))}
        if g == "seotda":  # the holder's choice of a 9·4 rematch, a folded player rejoining one
            return {"rematch_94_mode": rng.choice(("AUTO_BEST", "PROMPT")),
                    "rematch_reentry": rng.choice(("NONE", "HALF_POT"))}
        return {}

    @property
    def r(self) -> Round:
        assert self.t.current is not None
        return self.t.current

    def feed(self, ev: Event) -> Step:
        self.at += 13
        ev = ev.model_copy(update={"at": self.at})
        step = self.t.handle(ev)
        if step.journal:
            self.journal.append(ev)
        if self.t.current is not None:
            self.oracle.check(self.t.current, step)
        return step

    def play(self) -> None:
        rng = self.rng
        self.feed(OpenRound(round_id=R1, betting_closes_at=self.at + 15_000))
        self._bets()
        if rng.random() < 0.04:
            self.feed(LinkDown(link="scanner:SC1", reason="cable"))  # before the round started: cancelled
        if self.r.phase == Phase.BETTING_OPEN:
            self.feed(CloseBetting(by="timer"))
        void_after = rng.randrange(0, 120) if rng.random() < 0.12 else None
        n = 0
        while self.r.phase in ACTIVE:
            n += 1
            assert n < 5000, "the round never ends"
            if void_after is not None and n > void_after:
                assert self.feed(SupervisorVoid(supervisor="sup-1", reason="shoe dropped")).accepted
                break
            if self.r.phase == Phase.ACTION:
                self._turn()
            elif self.r.phase == Phase.DECISION:
                self._decide()
            else:
                self._card()
        assert self.r.result is not None

    def _bets(self) -> None:
        rng, g = self.rng, self.game
        n = {"teen-patti": rng.randint(1, 3), "sevenluck": rng.randint(1, 4), "stud": 7 if self.full else rng.randint(2, 8),
             "seotda": rng.randint(2, 5), "matgo": 1}[g]
        seats = rng.sample(range(1, self.r.rules.game.seat_count + 1), n) if self.r.rules.game.seat_count else [None] * n
        for k, seat in enumerate(seats):
            player = f"p{k + 1}"
            if g == "teen-patti":
                kinds = rng.sample(("player_a", "player_b", "tie", "pair_plus_a"), 2)
            elif g == "sevenluck":
                kinds = ["ante"] + (["pair_plus"] if rng.random() < 0.4 else [])
            else:
                kinds = list(self.r.rules.game.bet_types)
            stake = {"stud": "100", "seotda": "1000", "matgo": "100"}.get(g, "10")
            for kind in kinds:
                self.feed(PlaceBet(bet_id=f"b{k}-{kind}", player_id=player, bet_type=kind, stake=Decimal(stake),
                                   seat=seat, round_id=R1))

    def _registered(self) -> list[str]:
        return [c for c in self.r.cards.values()]

    def _card(self) -> None:
        rng, r = self.rng, self.r
        pos = r.plan[r.next_index]
        if pos.confirm:
            if self.faults and rng.random() < 0.3 and r.cards:  # a card while a confirmation is expected
                assert not self.feed(ScanRead(reader="SC1", code=rng.choice(self._registered()))).accepted
            assert self.feed(DealerConfirm(step=pos.name)).accepted
            return
        sevenths = [name for name in r.cards if name.endswith(".7")]
        if self.game == "stud" and sevenths and rng.random() < 0.4:  # a 7th card flashed: reported ...
            flashed = rng.choice(sevenths)
            self.feed(CardExposed(position=flashed))
            if rng.random() < 0.7:  # ... and the supervisor names it (or another card): it plays face up
                seat, right = int(flashed[1:-2]), r.cards[flashed]
                card = right if rng.random() < 0.8 else rng.choice([c for c in DECKS["stud"] if c != right])
                self.feed(SupervisorExpose(supervisor="sup-1", seat=seat, card=card))
        if self.faults and rng.random() < 0.2:
            fault = rng.randrange(4)
            same = [r.cards[p.name] for p in r.plan if p.deck == pos.deck and p.name in r.cards]
            if fault == 0 and same and not pos.from_burns:  # a duplicate (of a card face down or up)
                self.feed(ScanRead(reader="SC1", code=rng.choice(same)))
            elif fault == 1 and r.cards:  # a misread that spells a card already dealt
                self.feed(ReadFailed(reader="SC1", reason="misread", detail=rng.choice(self._registered())))
            elif fault == 2:
                self.feed(ScanRead(reader="SC1", code=FOREIGN[self.game]))
            elif r.cards:  # the dealer reports a card exposed (stud: a 7th card plays face up)
                self.feed(CardExposed(position=rng.choice(list(r.cards))))
            if r is not self.t.current or self.r.phase not in ACTIVE or self.r.plan[self.r.next_index] is not pos:
                return
        code = self._code(pos)
        step = self.feed(ScanRead(reader="SC1", code=code))
        assert step.accepted and not any(isinstance(e, RoundEvent) and e.event == "scan_rejected"
                                         for e in step.effects), (pos, code, step.effects)

    def _code(self, pos: Any) -> str:
        r = self.r
        if pos.from_burns:  # stud RESHUFFLE_BURNS: the burn cards, shuffled, dealt again
            burns = [r.cards[p.name] for p in r.plan if p.burn and p.name in r.cards]
            again = {r.cards[p.name] for p in r.plan if p.from_burns and p.name in r.cards}
            return next(c for c in burns if c not in again)
        deck = self.decks.get(pos.deck)
        if deck is None:
            fixed = set(self.forced.values()) if pos.deck == 0 else set()
            deck = self.decks[pos.deck] = [c for c in self.rng.sample(sorted(DECKS[self.game]), len(DECKS[self.game]))
                                           if c not in fixed]
        if pos.deck == 0 and pos.name in self.forced:
            return self.forced[pos.name]
        return deck.pop()

    def _decide(self) -> None:
        rng, r = self.rng, self.r
        for player in sorted(set(r.deciders) - set(r.decisions)):
            if rng.random() < 0.7:
                assert self.feed(PlayerDecision(player_id=player, action=rng.choice(("PLAY", "FOLD")))).accepted
            if r.phase != Phase.DECISION:
                return
        if r.phase == Phase.DECISION:
            assert self.feed(DecisionTimeout()).accepted

    def _turn(self) -> None:
        rng, r = self.rng, self.r
        hand = r.hand
        assert hand is not None and hand.to_act is not None
        actor, opts = hand.to_act, hand.turn_options()
        if self.faults and rng.random() < 0.12:  # refused: the wrong player, or a card the actor does not hold
            other = rng.choice([p for p in set(r.seat_owner.values()) | {AI_PLAYER} if p != actor] or [actor])
            card = rng.choice(self._registered()) if self.game == "matgo" else None
            action = "PLAY" if self.game == "matgo" else rng.choice(("CHECK", "CALL", "FOLD"))
            self.feed(PlayerAction(player_id=rng.choice((actor, other)), action=action, card=card,  # type: ignore[arg-type]
                                   round_id=R1, turn=r.turn))
            return  # refused, or (a card the actor holds) played: the next turn is asked again
        if not self.passive and rng.random() < 0.1:
            assert self.feed(ActionTimeout(turn=r.turn)).accepted
            return
        ev = PlayerAction(player_id=actor, round_id=R1, turn=r.turn, **self._choose(opts))  # type: ignore[arg-type]
        assert self.feed(ev).accepted, (ev, opts)

    def _choose(self, opts: dict[str, Any]) -> dict[str, Any]:
        rng = self.rng
        if self.game == "matgo":
            action = rng.choice(opts["actions"])
            return {"action": action, "card": rng.choice(opts["cards"]) if opts.get("cards") else None}
        if self.game == "seotda" and "choice" in opts:  # REMATCH / PLAY_ON, REJOIN / SIT_OUT
            return {"action": rng.choice(opts["actions"])}
        if self.game == "seotda":
            buttons = list(opts["buttons"])
            calm = [b for b in ("CHECK", "CALL") if b in buttons]
            if self.passive and calm:
                return {"action": calm[0]}
            return {"action": rng.choice(buttons)}
        acts = opts["actions"]
        calm = [a for a in ("CHECK", "BRING_IN", "CALL") if a in acts]
        action = calm[0] if self.passive and calm else rng.choice(acts)
        if action in ("BET", "BRING_IN"):
            return {"action": action, "amount": Decimal(opts["bet"]["min"])}
        if action == "RAISE":
            return {"action": action, "amount": Decimal(opts["raise"]["min"])}
        return {"action": action}

    def replay(self) -> Round:
        """The journal alone rebuilds every card (the hidden ones too) and the same result."""
        t = make_table(self.game, self.options)
        for ev in self.journal:
            t.handle(ev)
        assert t.current is not None
        return t.current
