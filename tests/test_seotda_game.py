"""A whole Seotda game through ``Table.handle`` (`seotda.md` §2, §3, §6, §7.2; `decks.md` §2-§5).

Every test drives the table with plain events, as the service would: ``OpenRound``, one
``PlaceBet`` of ``chips`` per seat, ``CloseBetting``, ``DealerConfirm`` for each SHUFFLE,
``ScanRead`` in deal order, ``PlayerAction`` with Seotda's buttons (``reserve=True`` for a
reservation) and ``ActionTimeout``. Hands are forced by scanning chosen codes at chosen
positions (``S{k}.{n}``, ``R{r}.S{k}.{n}`` in rematch ``r``); any position not named gets the
first code of the 20 not yet used in that deal.
"""

from __future__ import annotations

import copy
import hashlib
import random
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from dealer.core.cards import SEOTDA_20
from dealer.core.events import (
    ActionTimeout,
    CloseBetting,
    DealerConfirm,
    LinkDown,
    LinkUp,
    OpenRound,
    PlaceBet,
    PlayerAction,
    ReadFailed,
    ScanRead,
)
from dealer.core.game_records import Face
from dealer.games.seotda import Seotda, SeotdaOptions, first_seat_drawn
from dealer.core.messages import PlayerMessage, RoundEvent, RoundResult, StationPrompt
from dealer.core.round import Phase, Step, TableRules
from dealer.core.settlement import settle_bet
from dealer.core.table import Table

D = Decimal
ONE = D("1")


def new_table(**options: Any) -> Table:
    return Table(TableRules(table_id="T1", game=Seotda.from_options(options), minor_unit=ONE, action_ms=10_000))


class Play:
    """One table and the events fed to it (everything journaled is kept for replays)."""

    def __init__(self, table: Table | None = None, **options: Any) -> None:
        self.t = table if table is not None else new_table(**options)
        self.at = 1_000
        self.fed: list[Any] = []
        self.journal: list[Any] = []
        self.effects: list[Any] = []
        self.steps: list[tuple[Any, Step]] = []
        self.cards: dict[str, str] = {}  # forced codes by position name
        self.shoe: dict[int, list[str]] = {}  # deal -> the order unforced codes come in (default: SEOTDA_20)

    # -- feeding ----------------------------------------------------------------------------

    def feed(self, ev: Any) -> Step:
        step = self.t.handle(ev)
        self.fed.append(ev)
        if step.journal:
            self.journal.append(ev)
        self.effects += step.effects
        self.steps.append((ev, step))
        return step

    def tick(self) -> int:
        self.at += 10
        return self.at

    @property
    def r(self):
        return self.t.current

    @property
    def hand(self):
        return self.t.current.hand

    @property
    def b(self):
        return self.t.current.hand.betting

    # -- a round ------------------------------------------------------------------------------

    def open(self, seq: int = 1, context: Mapping[str, Any] | None = None, draw: str | None = None) -> Step:
        return self.feed(OpenRound(round_id=f"T1-{seq:06d}", at=self.tick(), betting_closes_at=self.at + 100,
                                   context=dict(context or {}), draw=draw))

    def bring(self, seat: int, player: str, chips: int | str) -> Step:
        return self.feed(PlaceBet(bet_id=f"b-{player}-{len(self.fed)}", player_id=player, bet_type="chips",
                                  stake=str(chips), seat=seat, at=self.tick()))

    def close(self) -> Step:
        return self.feed(CloseBetting(by="timer", at=self.tick()))

    def start(self, seats: Mapping[int, tuple[str, int]], cards: Mapping[str, str] | None = None,
              context: Mapping[str, Any] | None = None, seq: int = 1, draw: str | None = None) -> "Play":
        """Open, seat everyone (seat -> (player, chips)), close and deal up to the first turn."""
        self.cards.update(cards or {})
        assert self.open(seq, {"winner_seat": min(seats)} if context is None else context, draw).accepted
        for seat, (player, chips) in seats.items():
            step = self.bring(seat, player, chips)
            assert step.accepted, step.effects
        assert self.close().accepted
        self.deal()
        return self

    def next_code(self, deck: int) -> str:
        prefix = f"R{deck}." if deck else ""
        taken = {self.r.cards[p.name] for p in self.r.plan if p.deck == deck and p.name in self.r.cards}
        forced = {c for k, c in self.cards.items() if (k.startswith(prefix) if deck else not k.startswith("R"))}
        return next(c for c in self.shoe.get(deck, SEOTDA_20) if c not in taken and c not in forced)

    def deal(self, stop_at: str | None = None) -> None:
        """Confirm shuffles and scan cards (forced ones where named) until betting or the result."""
        while self.r.phase in (Phase.BETTING_CLOSED, Phase.DEALING):
            pos = self.r.plan[self.r.next_index]
            if pos.name == stop_at:
                return
            if pos.confirm:
                assert self.feed(DealerConfirm(step=pos.name, at=self.tick())).accepted
                continue
            code = self.cards.get(pos.name) or self.next_code(pos.deck)
            step = self.feed(ScanRead(reader="R", code=code, at=self.tick()))
            assert any(isinstance(e, RoundEvent) and e.event == "card_registered" for e in step.effects), step.effects

    def act(self, player: str, button: str, reserve: bool = False, amount: str | None = None,
            deal: bool = True) -> Step:
        step = self.feed(PlayerAction(player_id=player, action=button, reserve=reserve, amount=amount, at=self.tick()))
        if deal:
            self.deal()
        return step

    def timeout(self, deal: bool = True) -> Step:
        step = self.feed(ActionTimeout(turn=self.r.turn, at=self.tick()))
        if deal:
            self.deal()
        return step

    def acts(self, *moves: str) -> None:
        """``acts("A BET", "B CALL")``: each must be accepted."""
        for m in moves:
            player, button = m.split()
            step = self.act(player, button)
            assert step.accepted, (m, step.effects)

    # -- reading ------------------------------------------------------------------------------

    @property
    def result(self) -> RoundResult:
        assert self.r.phase == Phase.RESULT, self.r.phase
        return self.r.result

    @property
    def returned(self) -> dict[str, D]:
        return {p: D(v) for p, v in self.result.details["returned"].items()}

    @property
    def awards(self) -> list[dict[str, Any]]:
        return self.result.details["awards"]

    def events(self, name: str) -> list[RoundEvent]:
        return [e for e in self.effects if isinstance(e, RoundEvent) and e.event == name]

    def told(self, player: str | None = None, kind: str | None = None) -> list[PlayerMessage]:
        return [e for e in self.effects if isinstance(e, PlayerMessage)
                and (player is None or e.player_id == player) and (kind is None or e.kind == kind)]

    def acted(self) -> list[dict[str, Any]]:
        return [e.data for e in self.events("player_acted")]

    def positions(self) -> list[str]:
        return [p.name for p in self.r.plan]

    def to_act(self) -> str | None:
        return self.b.to_act


def rejected(step: Step) -> str:
    assert not step.accepted
    rej = step.rejection
    assert rej is not None
    return rej.reason


THREE = {1: ("A", 600), 2: ("B", 600), 3: ("C", 600)}
TWO = {1: ("A", 600), 2: ("B", 600)}


def check_all(play: Play, players: str) -> None:
    """Everyone in ``players`` (in turn order) checks once."""
    for p in players:
        assert play.act(p, "CHECK").accepted, p


def hands(**by_label: str) -> dict[str, str]:
    """``hands(S1="01G 02A", R1_S2="03G 08G")`` -> {"S1.1": "01G", "S1.2": "02A", "R1.S2.1": ...}."""
    out = {}
    for label, codes in by_label.items():
        a, b = codes.split()
        name = label.replace("_", ".")
        out[f"{name}.1"], out[f"{name}.2"] = a, b
    return out


def strings(obj: Any) -> list[str]:
    """Every string value (and key) inside a JSON-like structure."""
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, Mapping):
        return [s for k, v in obj.items() for s in strings(k) + strings(v)]
    if isinstance(obj, (list, tuple)):
        return [s for v in obj for s in strings(v)]
    return []


# --- §2: rooms, minimum chips -----------------------------------------------------------------


def test_min_chips_a_chips_bet_below_60_times_the_stake_is_refused_with_a_reason_every_game():
    for stake, least in (("10", 600), ("100", 6000), ("5", 300)):
        p = Play(stake=stake)
        p.open(context={"players": ["A"]})  # EVERY_GAME: having played before changes nothing
        step = p.bring(1, "A", least - 1)
        reason = rejected(step)
        assert str(least) in reason and "60" in reason
        assert p.events("bet_rejected")[-1].data["reason"] == reason
        assert not p.r.bets
        assert p.bring(1, "A", least).accepted


def test_min_chips_join_only_lets_a_player_of_the_previous_game_bring_less():
    p = Play(min_chips_check="JOIN_ONLY")
    p.open(context={"players": ["A", "Z"], "winner_seat": 1})
    assert p.bring(1, "A", 100).accepted  # played the previous game: may play on with less
    assert "600" in rejected(p.bring(2, "B", 100))  # a newcomer still needs 60 x the stake
    assert p.bring(2, "B", 600).accepted
    p.close()
    p.deal()
    assert p.hand.brought == {"A": D(100), "B": D(600)}


def test_min_chips_join_only_remembers_the_players_of_the_last_game_on_the_table():
    p = Play(min_chips_check="JOIN_ONLY")
    p.start(TWO)
    p.acts("A BET", "B FOLD")
    assert p.t.memory["players"] == ["A", "B"]
    p.cards.clear()
    p.open(seq=2, context=p.t.memory)
    assert p.bring(1, "A", 250).accepted and p.bring(2, "B", 10).accepted
    assert "600" in rejected(p.bring(3, "C", 599))


def test_min_chips_stake_must_be_a_room_stake_and_never_a_float():
    for stake in (5, "10", D("20"), "50", 100):
        assert SeotdaOptions(stake=stake).min_chips == D(stake) * 60
    for stake in (0, 1, 7, 15, 25, 200, "10.5", -10):
        with pytest.raises(ValidationError, match="room stake"):
            SeotdaOptions(stake=stake)
    for stake in (10.0, 5.0):
        with pytest.raises(ValidationError, match="float"):
            SeotdaOptions(stake=stake)
    with pytest.raises(ValidationError):
        Seotda.from_options({"stake": 20.0})
    with pytest.raises(ValidationError):
        Seotda.from_options({"stake": 30})


def test_min_chips_chips_are_brought_once_and_never_added_during_a_game():
    p = Play()
    p.open(context={"winner_seat": 1})
    assert p.bring(1, "A", 600).accepted
    assert "once" in rejected(p.bring(1, "A", 600))
    assert "seat" in rejected(p.bring(7, "B", 600))  # the table has 5 seats
    assert "taken" in rejected(p.bring(1, "B", 600))


# --- §3: antes and the deal -------------------------------------------------------------------


@pytest.mark.parametrize("posts,ante", [("ONE_POST", 10), ("TWO_POSTS", 20)])
def test_ante_posted_by_every_seat(posts, ante):
    p = Play(ante_and_blind=posts).start(THREE)
    assert p.hand.pot() == 3 * ante
    assert all(q.total == ante and q.stack == 600 - ante and q.street == 0 for q in p.b.players)
    assert p.b.level == 0  # the ante is not a bet of BET_1: the first player may CHECK
    assert "CHECK" in p.hand.turn_options()["buttons"]
    p.acts("A BET", "B FOLD", "C FOLD")
    assert p.result.details["antes"] == {"A": str(ante), "B": str(ante), "C": str(ante)}
    assert p.returned == {"A": D(600 + 2 * ante), "B": D(600 - ante), "C": D(600 - ante)}


def test_ante_a_player_with_less_than_the_ante_is_all_in_for_what_they_have():
    p = Play(min_chips_check="JOIN_ONLY", ante_and_blind="TWO_POSTS")
    p.start({1: ("A", 600), 2: ("B", 15)}, context={"players": ["B"], "winner_seat": 1},
            cards=hands(S1="10A 10R", S2="01G 02A"))
    assert p.hand.antes == {"A": D(20), "B": D(15)}
    assert p.r.phase == Phase.RESULT  # nobody can bet: both cards are dealt, showdown
    assert p.positions() == ["SHUFFLE", "S1.1", "S2.1", "S1.2", "S2.2"]
    assert p.returned == {"A": D(615), "B": D(0)}


def test_deal_order_is_s1_s2_from_the_first_seat_clockwise():
    p = Play()
    p.start({2: ("B", 600), 4: ("D", 600), 5: ("E", 600)}, context={"winner_seat": 4})
    assert [(x.name, x.seat, x.face) for x in p.r.plan] == [
        ("SHUFFLE", None, Face.UP), ("S1.1", 4, Face.DOWN), ("S2.1", 5, Face.DOWN), ("S3.1", 2, Face.DOWN)]
    assert p.hand.game.number == 0 and p.r.plan[0].confirm
    assert p.to_act() == "D"  # betting uses the same order
    p.acts("D CHECK", "E CHECK", "B CHECK")
    assert p.positions()[4:] == ["S1.2", "S2.2", "S3.2"]
    assert [x.seat for x in p.r.plan[4:]] == [4, 5, 2]
    assert [x.name for x in Seotda().deal_plan([4, 5, 2])] == ["S1.1", "S2.1", "S3.1", "S1.2", "S2.2", "S3.2"]


def test_deal_folded_players_get_no_second_card():
    p = Play().start(THREE)
    p.acts("A CHECK", "B FOLD", "C CHECK")
    assert p.positions() == ["SHUFFLE", "S1.1", "S2.1", "S3.1", "S1.2", "S3.2"]
    assert p.to_act() == "A" and p.r.street == "BET_2"


def test_deal_all_in_players_keep_receiving_cards():
    p = Play(min_chips_multiple=1)
    p.start({1: ("A", 50), 2: ("B", 600), 3: ("C", 600)})
    p.acts("A ALL_IN", "B CALL", "C CALL")
    assert p.b.player("A").all_in
    assert p.positions()[-3:] == ["S1.2", "S2.2", "S3.2"]
    assert p.r.street == "BET_2" and p.to_act() == "B"  # BET_2 starts at the first seat still able to act
    p.acts("B CHECK", "C CHECK")
    assert p.r.phase == Phase.RESULT


def test_deal_all_but_one_fold_nothing_more_is_dealt_and_no_card_is_revealed():
    p = Play().start(THREE)
    p.acts("A BET", "B FOLD", "C FOLD")
    assert p.positions() == ["SHUFFLE", "S1.1", "S2.1", "S3.1"]
    res = p.result
    assert res.outcome == "COMPLETED" and res.winner == "S1" and res.hands == {}
    assert not p.events("cards_revealed") and res.cards == {}  # the hole cards stay in the journal
    assert p.returned == {"A": D(620), "B": D(590), "C": D(590)}
    assert p.events("uncalled_returned")[-1].data == {"player_id": "A", "amount": "10"}


def test_deal_all_but_one_fold_in_bet_2_nothing_is_revealed():
    p = Play().start(TWO)
    p.acts("A CHECK", "B CHECK", "A BET", "B FOLD")
    assert p.positions() == ["SHUFFLE", "S1.1", "S2.1", "S1.2", "S2.2"]
    assert not p.events("cards_revealed") and p.result.hands == {}


@pytest.mark.parametrize("confirmed", [False, True])
def test_deal_round_cancelled_with_refund_on_a_link_loss_before_the_first_card(confirmed):
    p = Play()
    p.open(context={"winner_seat": 1, "players": []})
    for seat, (player, chips) in THREE.items():
        p.bring(seat, player, chips)
    p.close()
    if confirmed:
        assert p.feed(DealerConfirm(step="SHUFFLE", at=p.tick())).accepted
    p.feed(LinkDown(link="studio", reason="video stopped", at=p.tick()))
    assert p.r.phase == Phase.CANCELLED
    res = p.r.result
    assert res.refund_all and res.outcome == "CANCELLED"
    for player in "ABC":
        s = settle_bet("chips", "600", res, player)
        assert (s.outcome, s.returned) == ("REFUND", D(600))
    assert p.t.memory == {"winner_seat": 1, "players": []}  # a cancelled game leaves the table's memory


def test_deal_link_loss_after_the_first_card_does_not_stop_the_game():
    p2 = Play()
    p2.open(context={"winner_seat": 1})
    for seat, (player, chips) in THREE.items():
        p2.bring(seat, player, chips)
    p2.close()
    p2.feed(DealerConfirm(step="SHUFFLE", at=p2.tick()))
    p2.feed(ScanRead(reader="R", code="10A", at=p2.tick()))
    step = p2.feed(LinkDown(link="studio", at=p2.tick()))
    assert p2.r.phase == Phase.DEALING
    assert [e.event for e in step.effects if isinstance(e, RoundEvent)] == ["link_down_round_continues", "link_down"]
    p2.cards.update(hands(S1="10A 10R", S2="01G 02A", S3="05A 06A"))
    p2.deal()
    p2.acts("A CHECK", "B CHECK", "C CHECK")
    p2.feed(LinkDown(link="broker", at=p2.tick()))
    assert "paused" in rejected(p2.timeout())  # nobody is timed out while players cannot reach us
    p2.feed(LinkUp(link="broker", at=p2.tick()))
    p2.acts("A CHECK", "B CHECK", "C CHECK")
    assert p2.result.outcome == "COMPLETED" and p2.result.winner == "S1"
    assert p2.returned == {"A": D(620), "B": D(590), "C": D(590)}


# --- §3.1: the first seat -------------------------------------------------------------------------

ROUND_DRAW = bytes(range(32)).hex()  # a fixed secret draw (the service takes 32 bytes from the OS CSPRNG)


def first_seat(seats: list[int], context: Mapping[str, Any], seq: int = 1, draw: str | None = ROUND_DRAW,
               **options: Any) -> int:
    p = Play(**options)
    p.start({s: (f"P{s}", 600) for s in seats}, context=context, seq=seq, draw=draw)
    s1 = p.hand.first_seat
    assert p.r.plan[1].name == "S1.1" and p.r.plan[1].seat == s1
    assert p.to_act() == f"P{s1}"
    return s1


def test_first_seat_previous_winner():
    assert first_seat([1, 2, 3], {"winner_seat": 3}) == 3
    assert first_seat([1, 2, 3], {"winner_seat": 1}) == 1
    assert first_seat([1, 3, 4], {"winner_seat": 2}) == 3  # the winner left: the next seat clockwise
    assert first_seat([1, 2, 4], {"winner_seat": 5}) == 1  # ... wrapping round the table
    assert first_seat([2, 3], {"winner_seat": 4}) == 2


def test_first_seat_rotate_moves_one_seat_clockwise_each_game():
    assert first_seat([1, 2, 3], {"first_seat": 1, "winner_seat": 3}, first_seat="ROTATE") == 2
    assert first_seat([1, 2, 3], {"first_seat": 3}, first_seat="ROTATE") == 1
    assert first_seat([1, 2, 4, 5], {"first_seat": 2}, first_seat="ROTATE") == 4  # seat 3 is empty


def test_first_seat_of_a_tables_first_game_follows_the_rounds_secret_draw():
    """§3.1 "S1 is drawn at random": from the round's draw, never from its public number."""
    drawn = {}
    for k in range(30):
        draw = random.Random(k).randbytes(32).hex()
        drawn[draw] = first_seat([1, 2, 3], {}, seq=1, draw=draw)  # the same round id every time
        assert first_seat([1, 2, 3], {}, seq=1, draw=draw) == drawn[draw]  # the same draw, the same seat
        assert first_seat([1, 2, 3], {}, seq=99, draw=draw) == drawn[draw]  # the round number plays no part
        assert drawn[draw] == first_seat_drawn(draw, 1, [1, 2, 3])
    assert set(drawn.values()) == {1, 2, 3}  # one public round id, every seat reachable
    assert first_seat([2, 5], {}, seq=7, first_seat="ROTATE") in (2, 5)
    # a previous winner decides, whatever the draw
    assert {first_seat([1, 2, 3], {"winner_seat": 2}, draw=d) for d in drawn} == {2}


def test_first_seat_of_a_round_journaled_before_draws_is_the_one_it_was_played_with():
    """An OpenRound without ``draw`` (an older journal) replays with the old derivation."""
    for seq in range(1, 31):
        digest = hashlib.sha256(f"seotda-first-seat:{seq}".encode()).digest()
        assert first_seat([1, 2, 3], {}, seq=seq, draw=None) == [1, 2, 3][digest[0] % 3]


def test_first_seat_drawn_replays_from_the_journal_and_a_rematch_keeps_it():
    """The draw is journaled with the round, so a replay seats S1 where the live round did;
    a rematch (§7.2 rule 5) keeps the S1 order restricted to its participants: no new draw."""
    seen = set()
    for k in range(12):
        draw = random.Random(100 + k).randbytes(32).hex()
        p = Play()
        p.start(THREE, cards=DRAW | hands(R1_S1="05A 06A", R1_S2="03G 08G"), context={}, draw=draw)
        s1 = p.hand.first_seat
        seen.add(s1)
        order = [x.seat for x in p.r.plan[1:4]]
        assert order[0] == s1 and sorted(order) == [1, 2, 3]
        while p.r.phase == Phase.ACTION:
            p.act(p.b.to_act, "CHECK")
        d = p.result.details
        assert d["rematches"] == 1 and d["first_seat"] == s1  # S1 and S2 tie: a rematch between them
        assert [q.seat for q in p.r.plan if q.name.startswith("R1.") and q.name.endswith(".1")] == order[:2]
        fresh = new_table()
        for ev in p.journal:
            assert fresh.handle(ev).accepted
        assert fresh.current.hand.first_seat == s1 and fresh.current.result == p.result
        opened = next(ev for ev in p.journal if isinstance(ev, OpenRound))
        assert opened.draw == draw and OpenRound.model_validate_json(opened.model_dump_json()).draw == draw
    assert len(seen) > 1


def test_first_seat_the_table_carries_the_winner_into_the_next_round():
    p = Play()
    p.start(THREE, context={}, draw=ROUND_DRAW)  # the table's first game: S1 drawn
    s1 = p.hand.first_seat
    order = [x.seat for x in p.r.plan[1:4]]
    s2_player = p.hand.player_at[order[1]]
    p.act(p.hand.player_at[order[0]], "FOLD")
    p.act(s2_player, "BET")
    p.act(p.hand.player_at[order[2]], "FOLD")
    assert p.result.winner == "S2"
    assert p.t.memory == {"winner_seat": order[1], "first_seat": s1, "players": ["A", "B", "C"]}
    # the service opens the next round with the table's memory as its context
    p.cards.clear()
    p.open(seq=2, context=p.t.memory)
    for seat, (player, chips) in THREE.items():
        p.bring(seat, player, chips)
    p.close()
    p.deal()
    assert p.hand.first_seat == order[1]
    assert p.r.plan[1].seat == order[1] and p.to_act() == s2_player


def test_first_seat_rotate_across_two_rounds_on_one_table():
    p = Play(first_seat="ROTATE")
    p.start(THREE, context={"first_seat": 1})
    assert p.hand.first_seat == 2
    p.acts("B BET", "C FOLD", "A FOLD")
    assert p.t.memory["first_seat"] == 2
    p.open(seq=2, context=p.t.memory)
    for seat, (player, chips) in THREE.items():
        p.bring(seat, player, chips)
    p.close()
    p.deal()
    assert p.hand.first_seat == 3


# --- §3.2: visibility --------------------------------------------------------------------------------


def scan_step(p: Play, position: str) -> Step:
    for ev, step in p.steps:
        if isinstance(ev, ScanRead) and any(isinstance(e, RoundEvent) and e.event == "card_registered"
                                            and e.data["position"] == position for e in step.effects):
            return step
    raise AssertionError(position)


def hole_cards(step: Step) -> list[tuple[str, str, str]]:
    return [(m.player_id, m.data["position"], m.data["card"]) for m in step.effects
            if isinstance(m, PlayerMessage) and m.kind == "hole_card"]


VIS = hands(S1="01G 02A", S2="03G 07A", S3="10A 10R")


def test_visibility_first_cards_go_to_their_owner_at_once():
    p = Play().start(THREE, cards=VIS)
    assert hole_cards(scan_step(p, "S1.1")) == [("A", "S1.1", "01G")]
    assert hole_cards(scan_step(p, "S2.1")) == [("B", "S2.1", "03G")]
    assert hole_cards(scan_step(p, "S3.1")) == [("C", "S3.1", "10A")]
    for pos in ("S1.1", "S2.1", "S3.1"):
        reg = [e for e in scan_step(p, pos).effects if isinstance(e, RoundEvent) and e.event == "card_registered"]
        assert reg[0].data["card"] is None  # the public event names the position only


def test_visibility_second_cards_only_when_all_second_cards_are_registered():
    p = Play().start(THREE, cards=VIS)
    p.acts("A CHECK", "B CHECK", "C CHECK")
    assert hole_cards(scan_step(p, "S1.2")) == []
    assert hole_cards(scan_step(p, "S2.2")) == []
    assert sorted(hole_cards(scan_step(p, "S3.2"))) == [("A", "S1.2", "02A"), ("B", "S2.2", "07A"),
                                                        ("C", "S3.2", "10R")]
    # with a folded player, the release waits for the cards actually dealt
    q = Play().start(THREE, cards=VIS)
    q.acts("A CHECK", "B CHECK", "C FOLD")
    assert hole_cards(scan_step(q, "S1.2")) == []
    assert sorted(hole_cards(scan_step(q, "S2.2"))) == [("A", "S1.2", "02A"), ("B", "S2.2", "07A")]


def test_visibility_rematch_cards_follow_the_same_rule():
    cards = hands(S1="01G 02A", S2="01R 02R", S3="05A 10R", R1_S1="03G 08G", R1_S2="04A 06A")
    p = Play().start(THREE, cards=cards)
    p.acts("A CHECK", "B CHECK", "C CHECK", "A CHECK", "B CHECK", "C CHECK")
    assert p.r.street == "BET_1 (rematch 1)"
    assert hole_cards(scan_step(p, "R1.S1.1")) == [("A", "R1.S1.1", "03G")]
    assert hole_cards(scan_step(p, "R1.S2.1")) == [("B", "R1.S2.1", "04A")]
    p.acts("A CHECK", "B CHECK")
    assert hole_cards(scan_step(p, "R1.S1.2")) == []
    assert sorted(hole_cards(scan_step(p, "R1.S2.2"))) == [("A", "R1.S1.2", "08G"), ("B", "R1.S2.2", "06A")]


def test_visibility_no_face_down_card_is_ever_sent_to_anyone_but_its_owner_or_published_before_the_showdown():
    p = Play().start(THREE, cards=VIS)
    p.acts("A BET", "B X2_RAISE", "C FOLD", "A CALL", "A CHECK", "B HALF", "A CALL")
    assert p.r.phase == Phase.RESULT
    owner = {x.name: p.hand.player_at[x.seat] for x in p.r.plan if x.seat is not None}
    codes = set(p.r.cards.values())
    reveal_at = next(i for i, e in enumerate(p.effects) if isinstance(e, RoundEvent) and e.event == "showdown")
    assert p.effects[reveal_at].data["game"] == 0 and set(p.effects[reveal_at].data["hands"]) == {"S1", "S2"}
    for i, e in enumerate(p.effects):
        if isinstance(e, PlayerMessage):
            if e.kind == "hole_card":
                assert owner[e.data["position"]] == e.player_id
                assert p.r.cards[e.data["position"]] == e.data["card"]
            else:
                assert not codes & set(strings(e.data)), e
        elif isinstance(e, (RoundEvent, StationPrompt)) and i < reveal_at:
            assert not codes & set(strings(e.model_dump(mode="json"))), e
    # each player saw exactly their own cards, once each
    seen = sorted((m.player_id, m.data["position"]) for m in p.told(kind="hole_card"))
    assert seen == sorted((owner[n], n) for n in p.r.cards)


def test_visibility_folded_hands_are_never_revealed():
    p = Play().start(THREE, cards=VIS)
    p.acts("A CHECK", "B FOLD", "C CHECK", "A CHECK", "C CHECK")
    revealed = p.events("cards_revealed")[-1].data["cards"]
    assert revealed == {"S1.1": "01G", "S1.2": "02A", "S3.1": "10A", "S3.2": "10R"}
    assert set(p.result.hands) == {"S1", "S3"} and p.result.winner == "S3"
    assert set(p.result.details["names"]) == {"S1", "S3"}


def test_visibility_a_hand_folded_before_a_rematch_is_not_revealed_either():
    cards = hands(S1="04A 09A", S2="08G 08A", R1_S1="01G 02A", R1_S2="05A 10R")
    p = Play().start(THREE, cards=cards)
    p.acts("A CHECK", "B CHECK", "C FOLD", "A CHECK", "B CHECK")
    p.acts("A CHECK", "B BET", "A FOLD")  # a rematch hand folded: not shown either
    revealed = p.events("cards_revealed")[-1].data["cards"]
    assert set(revealed) == {"S1.1", "S1.2", "S2.1", "S2.2"}
    assert p.result.hands == {}


def test_visibility_a_reconnect_does_not_release_second_cards_early():
    p = Play().start(THREE, cards=VIS)
    p.act("A", "CHECK")
    p.act("B", "CHECK")
    p.act("C", "CHECK", deal=False)
    p.deal(stop_at="S2.2")  # S1.2 registered, S2.2 and S3.2 not yet
    sent = [(m.player_id, m.data["position"]) for m in p.t.private_now(p.at) if m.kind == "hole_card"]
    assert ("A", "S1.2") not in sent


# --- §6.1: betting ---------------------------------------------------------------------------------


def test_betting_worked_example_exactly():
    p = Play(stake=10).start(THREE)
    assert p.hand.pot() == 30
    expected = [("A", "BET", "10", "10", 40), ("B", "X2_RAISE", "20", "20", 60), ("C", "HALF", "60", "60", 120),
                ("A", "CALL", "50", "60", 170), ("B", "QUARTER", "92", "112", 262)]
    for player, button, added, level, pot in expected:
        step = p.act(player, button)
        assert step.accepted, step.effects
        rec = p.acted()[-1]
        assert (rec["player_id"], rec["added"], rec["level"]) == (player, added, level)
        assert p.hand.pot() == pot
    assert p.b.player("B").street == 112
    assert p.to_act() == "C"  # the round continues until all match or fold
    opts = p.hand.turn_options()
    assert opts["buttons"]["CALL"] == {"action": "CALL", "total": "112", "adds": "52"}
    assert opts["pot"] == "262"
    p.acts("C CALL", "A CALL")
    assert p.r.street == "BET_2" and p.hand.pot() == 3 * 122


def test_betting_check_only_when_nothing_to_call():
    p = Play().start(THREE)
    assert p.act("A", "CHECK").accepted
    assert p.act("B", "BET").accepted
    before = p.hand.pot()
    assert "CHECK" in rejected(p.act("C", "CHECK"))
    assert p.to_act() == "C" and p.hand.pot() == before
    assert "CHECK" not in p.hand.turn_options()["buttons"]
    q = Play().start(THREE)
    assert "nothing to call" in rejected(q.act("A", "CALL"))
    assert "CALL" not in q.hand.turn_options()["buttons"]


def test_betting_bet_only_when_level_is_zero():
    p = Play().start(THREE)
    assert p.hand.turn_options()["buttons"]["BET"] == {"action": "BET", "total": "10", "adds": "10"}
    p.acts("A BET")
    reason = rejected(p.act("B", "BET"))
    assert "BET is not allowed" in reason and "already bet" in reason
    assert "BET" not in p.hand.turn_options()["buttons"]


def test_betting_x2_raise_only_when_level_above_zero():
    p = Play().start(THREE)
    reason = rejected(p.act("A", "X2_RAISE"))
    assert "X2_RAISE is not allowed" in reason and "nobody has bet" in reason
    assert "X2_RAISE" not in p.hand.turn_options()["buttons"]
    p.acts("A BET", "B X2_RAISE", "C X2_RAISE")  # new level = 2 x level: 20, 40
    assert [d["level"] for d in p.acted()] == ["10", "20", "40"]
    p.acts("A X2_RAISE")
    assert p.acted()[-1]["added"] == "70" and p.acted()[-1]["level"] == "80"  # 2 x 40 - 10 already in


def test_betting_max_is_all_in():
    for button in ("MAX", "ALL_IN"):
        p = Play().start(THREE)
        p.acts(f"A {button}")
        rec = p.acted()[-1]
        assert (rec["action"], rec["added"], rec["all_in"]) == ("ALL_IN", "590", True)
        assert rec.get("button") == (button if button == "MAX" else None)
    p = Play().start(THREE)
    assert p.hand.turn_options()["buttons"]["MAX"] == p.hand.turn_options()["buttons"]["ALL_IN"]


def test_betting_an_action_needing_the_whole_stack_becomes_all_in():
    seats = {1: ("A", 600), 2: ("B", 50), 3: ("C", 600)}
    p = Play(min_chips_multiple=1).start(seats)
    p.acts("A BET", "B X2_RAISE", "C CALL", "A HALF")  # A: call 10 + (80 + 10) / 2 = 55 -> level 65
    assert p.acted()[-1]["level"] == "65"
    opts = p.hand.turn_options()["buttons"]
    assert opts["CALL"]["action"] == "ALL_IN" and opts["HALF"]["action"] == "ALL_IN"
    assert opts["X2_RAISE"]["action"] == "ALL_IN" and opts["CALL"]["adds"] == "20"
    p.acts("B CALL")  # needs 45, has 20: ALL-IN for less
    rec = p.acted()[-1]
    assert (rec["action"], rec["button"], rec["added"], rec["all_in"]) == ("ALL_IN", "CALL", "20", True)
    # a bet that needs the whole stack
    q = Play(min_chips_multiple=1).start({1: ("A", 20), 2: ("B", 600)})
    assert q.hand.turn_options()["buttons"]["BET"]["action"] == "ALL_IN"
    q.acts("A BET")
    assert q.acted()[-1]["action"] == "ALL_IN" and q.acted()[-1]["added"] == "10"


def test_betting_every_raise_gives_the_others_a_new_turn():
    seats = {1: ("A", 600), 2: ("B", 600), 3: ("C", 25)}
    p = Play(min_chips_multiple=1).start(seats)
    p.acts("A BET", "B CALL", "C ALL_IN")  # C raises by only 5: still a raise, everyone acts again
    assert p.acted()[-1]["level"] == "15"
    assert p.to_act() == "A" and "X2_RAISE" in p.hand.turn_options()["buttons"]
    p.acts("A X2_RAISE")
    assert p.to_act() == "B"
    p.acts("B QUARTER")
    assert p.to_act() == "A"  # C is all-in; A must act again after B's raise
    p.acts("A CALL")
    assert p.r.street == "BET_2"
    turns = [e.data["player_id"] for e in p.events("turn") if e.data["street"] == "BET_1"]
    assert turns == ["A", "B", "C", "A", "B", "A"]


def test_betting_raise_cap_option():
    p = Play().start(THREE)
    p.acts("A BET", "B X2_RAISE", "C X2_RAISE", "A X2_RAISE", "B HALF")  # NONE: unlimited
    q = Play(raise_cap=1).start(THREE)
    q.acts("A BET", "B X2_RAISE")  # the bet and one raise
    buttons = q.hand.turn_options()["buttons"]
    assert not {"X2_RAISE", "QUARTER", "HALF"} & set(buttons) and "CALL" in buttons
    for button in ("X2_RAISE", "QUARTER", "HALF"):
        assert "RAISE is not allowed" in rejected(q.act("C", button))
    q.acts("C CALL", "A CALL")
    assert q.r.street == "BET_2"
    q.acts("A BET", "B X2_RAISE")  # the cap counts per betting round
    assert "RAISE is not allowed" in rejected(q.act("C", "X2_RAISE"))


def test_betting_pot_before_action_option():
    p = Play(pot_fraction_base="POT_BEFORE_ACTION").start(THREE)
    buttons = p.hand.turn_options()["buttons"]
    assert buttons["QUARTER"]["adds"] == "7" and buttons["HALF"]["adds"] == "15"  # floor(f x 30)
    p.acts("A BET")  # pot 40, call 10: a quarter (10) is not more than the call
    buttons = p.hand.turn_options()["buttons"]
    assert "QUARTER" not in buttons and buttons["HALF"] == {"action": "RAISE", "total": "20", "adds": "20"}
    assert "does not exceed the call" in rejected(p.act("B", "QUARTER"))
    p.acts("B HALF")
    assert p.acted()[-1]["added"] == "20" and p.hand.pot() == 60
    assert "does not exceed the call" in rejected(p.act("C", "QUARTER"))  # call 20, floor(60 / 4) = 15
    p.acts("C HALF")  # floor(60 / 2) = 30 > 20
    assert p.acted()[-1]["added"] == "30" and p.acted()[-1]["level"] == "30"


def test_betting_pot_after_call_is_the_default():
    p = Play().start(THREE)
    p.acts("A BET")
    assert p.hand.turn_options()["buttons"]["QUARTER"] == {"action": "RAISE", "total": "22", "adds": "22"}


def test_betting_timeout_checks_when_free_else_folds():
    p = Play().start(THREE)
    who = lambda: (p.acted()[-1]["player_id"], p.acted()[-1]["action"], p.acted()[-1]["by"])  # noqa: E731
    p.timeout()
    assert who() == ("A", "CHECK", "timeout")
    p.acts("B BET")
    p.timeout()
    assert who() == ("C", "FOLD", "timeout")
    stale = p.feed(ActionTimeout(turn=p.r.turn - 1, at=p.tick()))
    assert "stale" in rejected(stale)
    p.timeout()
    assert who() == ("A", "FOLD", "timeout")
    assert p.result.winner == "S2"


def test_betting_uncalled_excess_is_returned():
    p = Play(min_chips_multiple=1).start({1: ("A", 1000), 2: ("B", 600)},
                                         cards=hands(S1="02A 03R", S2="05A 05R"))
    p.acts("A ALL_IN", "B CALL")  # B can only match 600: 400 of A's go back
    assert p.events("uncalled_returned")[-1].data == {"player_id": "A", "amount": "400"}
    assert p.result.winner == "S2"
    assert p.returned == {"A": D(400), "B": D(1200)}
    q = Play().start(TWO)
    q.acts("A ALL_IN", "B FOLD")
    assert q.events("uncalled_returned")[-1].data == {"player_id": "A", "amount": "590"}
    assert q.returned == {"A": D(610), "B": D(590)}


# --- §6.2: reservations ------------------------------------------------------------------------------


def test_reservation_accepted_before_the_turn_and_executed_on_the_turn():
    p = Play().start(THREE)
    step = p.act("C", "CHECK", reserve=True)
    assert step.accepted and step.journal
    assert [m.kind for m in step.effects] == ["reservation_accepted"] and step.effects[0].player_id == "C"
    assert p.to_act() == "A"  # a reservation is not a turn
    p.acts("A CHECK", "B CHECK")  # C's CHECK runs on C's turn, without C
    assert p.r.street == "BET_2"
    assert [(d["player_id"], d["action"], d["by"]) for d in p.acted()][-1] == ("C", "CHECK", "reservation")
    assert p.events("reservation_executed")[-1].data["player_id"] == "C"
    q = Play().start(THREE)
    q.acts("A BET")
    assert q.act("C", "CALL", reserve=True).accepted
    q.acts("B CALL")  # the level is still 10: C's CALL runs
    assert (q.acted()[-1]["player_id"], q.acted()[-1]["action"], q.acted()[-1]["added"]) == ("C", "CALL", "10")
    assert q.r.street == "BET_2"


@pytest.mark.parametrize("button", ["CALL", "X2_RAISE", "QUARTER", "HALF", "ALL_IN"])
def test_reservation_call_or_raise_cancelled_when_the_level_changed(button):
    p = Play().start(THREE)
    p.acts("A BET")
    assert p.act("C", button, reserve=True).accepted
    p.acts("B X2_RAISE")  # level 10 -> 20
    cancelled = p.told("C", "reservation_cancelled")
    assert len(cancelled) == 1 and "level 10 -> 20" in cancelled[0].data["reason"]
    assert p.to_act() == "C" and p.acted()[-1]["player_id"] == "B"  # C is prompted instead
    assert p.told("C", "your_turn")
    assert not p.events("reservation_executed")


def test_reservation_raise_executes_when_the_level_did_not_change():
    p = Play().start(THREE)
    p.acts("A BET")
    assert p.act("C", "HALF", reserve=True).accepted
    p.acts("B CALL")
    rec = p.acted()[-1]
    assert (rec["player_id"], rec["button"], rec["by"]) == ("C", "HALF", "reservation")
    assert rec["added"] == str(10 + (50 + 10) // 2)


def test_reservation_fold_always_executes():
    p = Play().start(THREE)
    assert p.act("C", "FOLD", reserve=True).accepted
    p.acts("A BET", "B X2_RAISE")
    rec = p.acted()[-1]
    assert (rec["player_id"], rec["action"], rec["by"]) == ("C", "FOLD", "reservation")
    assert p.to_act() == "A"


def test_reservation_check_that_became_illegal_is_cancelled():
    p = Play().start(THREE)
    assert p.act("C", "CHECK", reserve=True).accepted
    p.acts("A BET", "B CALL")
    assert "CHECK" in p.told("C", "reservation_cancelled")[-1].data["reason"]
    assert p.to_act() == "C" and p.b.player("C").street == 0


def test_reservation_on_your_own_turn_is_refused():
    p = Play().start(THREE)
    assert "your turn" in rejected(p.act("A", "CHECK", reserve=True))
    assert not p.hand.reservations
    assert "button" in rejected(p.act("B", "CALL", reserve=True, amount="10"))
    assert "unknown button" in rejected(p.act("B", "RAISE", reserve=True))
    p.acts("A BET", "B FOLD")
    assert "cannot act" in rejected(p.act("B", "FOLD", reserve=True))  # folded
    assert "not in this hand" in rejected(p.act("Z", "FOLD", reserve=True))


def test_reservation_applies_only_to_the_betting_round_it_was_made_in():
    # A checked; while C still has to act A reserves FOLD (in case C raises). C checks: BET_1 is
    # over and A's FOLD must not run on A's first BET_2 turn, after A has seen the second card.
    p = Play().start(THREE)
    p.acts("A CHECK", "B CHECK")
    assert p.act("A", "FOLD", reserve=True).accepted
    p.acts("C CHECK")
    assert p.r.street == "BET_2" and p.to_act() == "A"
    assert not p.b.player("A").folded
    assert "earlier betting round" in p.told("A", "reservation_cancelled")[-1].data["reason"]
    # nor into a rematch
    cards = hands(S1="01G 02A", S2="01R 02R", S3="05A 10R")
    q = Play().start(THREE, cards=cards)
    q.acts("A CHECK", "B CHECK", "C CHECK", "A CHECK", "B CHECK")
    assert q.act("A", "BET", reserve=True).accepted
    q.acts("C CHECK")
    assert q.r.street == "BET_1 (rematch 1)" and q.to_act() == "A" and q.b.level == 0
    assert q.told("A", "reservation_cancelled")


# --- §6.3 / §7.2: side pots -----------------------------------------------------------------------


def test_side_pots_rulebook_example_all_in_100_against_300_and_300():
    # A all-in 100; B and C put in 300 each. A and B Al-li, C 7 points.
    p = Play(min_chips_multiple=1)
    p.start({1: ("A", 100), 2: ("B", 500), 3: ("C", 300)},
            cards=hands(S1="01G 02A", S2="01R 02R", S3="03R 04R", R1_S1="05A 04R", R1_S2="07A 08A"))
    p.acts("A ALL_IN", "B ALL_IN", "C CALL")  # C calls all-in for 300; 200 of B's 500 go back
    assert p.events("uncalled_returned")[-1].data == {"player_id": "B", "amount": "200"}
    assert p.r.phase == Phase.RESULT
    main, side, rematch = p.awards
    assert main == main | {"game": 0, "amount": "300", "result": "REMATCH_DRAW", "participants": ["A", "B"]}
    assert side == side | {"game": 0, "amount": "400", "result": "WIN", "winners": ["B"], "shares": {"B": "400"}}
    assert rematch == rematch | {"game": 1, "amount": "300", "result": "WIN", "winners": ["A"]}  # 9 pts vs 5 pts
    # B is paid the 400 at the first showdown, before the rematch is dealt
    assert p.awards.index(side) < p.awards.index(rematch)
    # rematch: A has no chips, so no betting; both cards dealt, the showdown decides the 300
    assert p.positions()[7:] == ["SHUFFLE", "R1.S1.1", "R1.S2.1", "R1.S1.2", "R1.S2.2"]
    assert [e.data["betting"] for e in p.events("betting_round_opened")] == ["TO_ACT"] + ["ROUND_OVER"] * 3
    assert not [e for e in p.events("turn") if "rematch" in e.data["street"]]
    assert p.returned == {"A": D(300), "B": D(600), "C": D(0)}
    assert p.result.details["rematches"] == 1 and p.result.winner == "S1"


# --- §7.2: rematches ----------------------------------------------------------------------------------

ALL_CHECK = ("A CHECK", "B CHECK", "C CHECK", "A CHECK", "B CHECK", "C CHECK")


def test_rematch_94_all_contenders_rematch():
    # §5.1 example 17: S1 9·4, S2 2 points, S3 6 points -> rematch S1+S2+S3
    cards = hands(S1="04R 09R", S2="05A 07A", S3="06A 10R", R1_S1="03G 08G", R1_S2="01G 02A", R1_S3="10A 10R")
    p = Play().start(THREE, cards=cards)
    p.acts(*ALL_CHECK)
    assert p.r.street == "BET_1 (rematch 1)"
    assert p.hand.game.carried[0][0].amount == 30 and p.hand.game.carried[0][1] == ("A", "B", "C")
    assert p.hand.won == {}  # the pot that produced the rematch is not paid
    assert p.hand.pot() == 30
    p.acts(*ALL_CHECK)
    first, second = p.awards
    assert first == first | {"game": 0, "amount": "30", "result": "REMATCH_94", "participants": ["A", "B", "C"]}
    assert second == second | {"game": 1, "amount": "30", "result": "WIN", "winners": ["A"]}
    assert p.positions()[7:] == ["SHUFFLE", "R1.S1.1", "R1.S2.1", "R1.S3.1", "R1.S1.2", "R1.S2.2", "R1.S3.2"]
    assert p.r.plan[7].deck == 1 and p.r.plan[7].confirm and {x.deck for x in p.r.plan[8:]} == {1}
    assert p.returned == {"A": D(620), "B": D(590), "C": D(590)}
    assert p.result.hands["S1"].cards == ["03G", "08G"] and p.result.details["rematches"] == 1


def test_rematch_94_auto_best_holder_simply_wins_when_unique_best():
    # §5.1 example 18: S1 9·4 (3 points) vs S2 2 points: AUTO_BEST -> S1 wins, ALWAYS -> rematch
    cards = hands(S1="04R 09R", S2="05A 07A")
    p = Play().start(TWO, cards=cards)
    p.acts("A CHECK", "B CHECK", "A CHECK", "B CHECK")
    assert p.r.phase == Phase.RESULT and p.returned == {"A": D(610), "B": D(590)}
    q = Play(rematch_94_mode="ALWAYS").start(TWO, cards=cards)
    q.acts("A CHECK", "B CHECK", "A CHECK", "B CHECK")
    assert q.hand.game.number == 1 and q.r.street == "BET_1 (rematch 1)"
    assert q.hand.awards[0]["result"] == "REMATCH_94"


def test_rematch_animal_94_and_folded_players_do_not_come_back():
    # §5.1 example 8: Animal 9·4 vs 8·8 -> rematch; C folded in BET_1 and stays out
    cards = hands(S1="04A 09A", S2="08G 08A", R1_S1="01G 02A", R1_S2="10A 10R")
    p = Play().start(THREE, cards=cards)
    p.acts("A BET", "B CALL", "C FOLD", "A CHECK", "B CHECK")
    first = p.hand.awards[0]
    assert first == first | {"result": "REMATCH_94", "participants": ["A", "B"], "amount": "50"}
    assert p.positions()[6:] == ["SHUFFLE", "R1.S1.1", "R1.S2.1"]
    assert [q.player_id for q in p.b.players] == ["A", "B"]
    assert "not in this hand" in rejected(p.act("C", "FOLD", reserve=True))
    assert "player C is not in this game" in rejected(p.act("C", "CHECK"))
    p.acts("A CHECK", "B CHECK", "A CHECK", "B CHECK")
    assert [x for x in p.positions() if x.startswith("R1.")] == ["R1.S1.1", "R1.S2.1", "R1.S1.2", "R1.S2.2"]
    assert p.awards[-1] == p.awards[-1] | {"game": 1, "amount": "50", "result": "WIN", "winners": ["B"]}
    assert p.returned == {"A": D(580), "B": D(630), "C": D(590)}


DRAW = hands(S1="01G 02A", S2="01R 02R", S3="05A 10R")  # S1 and S2 Al-li, S3 5 points


def test_rematch_draw_only_the_tied_players():
    p = Play().start(THREE, cards=DRAW | hands(R1_S1="05A 06A", R1_S2="03G 08G"))
    p.acts(*ALL_CHECK)
    assert p.hand.awards[0] == p.hand.awards[0] | {"result": "REMATCH_DRAW", "participants": ["A", "B"]}
    assert [q.player_id for q in p.b.players] == ["A", "B"] and p.r.street == "BET_1 (rematch 1)"
    p.acts("A CHECK", "B CHECK", "A CHECK", "B CHECK")
    assert [x for x in p.positions() if x.startswith("R1.")] == ["R1.S1.1", "R1.S2.1", "R1.S1.2", "R1.S2.2"]
    assert p.returned == {"A": D(590), "B": D(620), "C": D(590)}
    assert p.result.winner == "S2" and set(p.result.hands) == {"S1", "S2"}


def test_rematch_carried_pot_only_participants_can_win_it_and_new_bets_form_pots_above_it():
    # A is all-in for 100 with a 9·4: rematch of all three for the 300. In the rematch only B
    # and C can bet; their chips form a pot above the carried one that A cannot win.
    cards = hands(S1="04R 09R", S2="05A 07A", S3="06A 10R", R1_S1="03G 08G", R1_S2="01G 01R", R1_S3="02A 10A")
    p = Play(min_chips_multiple=1)
    p.start({1: ("A", 100), 2: ("B", 1000), 3: ("C", 1000)}, cards=cards)
    p.acts("A ALL_IN", "B CALL", "C CALL", "B CHECK", "C CHECK")
    assert p.r.street == "BET_1 (rematch 1)" and p.to_act() == "B"  # A cannot act: all-in
    assert p.hand.pot() == 300
    p.acts("B HALF")  # half of the whole pot, the carried 300 included
    assert p.acted()[-1]["added"] == "150"
    p.acts("C CALL", "B CHECK", "C CHECK")
    carried, above = p.awards[1:]
    assert carried == carried | {"game": 1, "amount": "300", "result": "WIN", "winners": ["A"]}
    assert above == above | {"game": 1, "amount": "300", "result": "WIN", "winners": ["B"]}  # 1·1 vs 2 points
    assert p.returned == {"A": D(300), "B": D(1000 - 100 - 150 + 300), "C": D(1000 - 100 - 150)}


def test_rematch_several_rematch_pots_go_into_one_rematch_and_keep_their_participants():
    # main pot {A,B,C}: C's 9·4 against 7 points -> rematch A+B+C; side pot {B,C}: the same 9·4
    # -> rematch B+C. One rematch for A, B and C; A's 3·8 wins only the main pot.
    cards = hands(S1="03R 04R", S2="02R 05R", S3="04A 09R", R1_S1="03G 08G", R1_S2="10A 10R", R1_S3="05A 06A")
    p = Play(min_chips_multiple=1)
    p.start({1: ("A", 100), 2: ("B", 300), 3: ("C", 300)}, cards=cards)
    p.acts("A ALL_IN", "B ALL_IN", "C CALL")
    main, side, main_again, side_again = p.awards
    assert main == main | {"game": 0, "amount": "300", "result": "REMATCH_94", "participants": ["A", "B", "C"]}
    assert side == side | {"game": 0, "amount": "400", "result": "REMATCH_94", "participants": ["B", "C"]}
    assert p.result.details["rematches"] == 1
    assert [x for x in p.positions() if x.startswith("R1.")] == [
        "R1.S1.1", "R1.S2.1", "R1.S3.1", "R1.S1.2", "R1.S2.2", "R1.S3.2"]
    assert main_again == main_again | {"game": 1, "amount": "300", "winners": ["A"]}
    assert side_again == side_again | {"game": 1, "amount": "400", "winners": ["B"]}
    assert p.returned == {"A": D(300), "B": D(400), "C": D(0)}


def test_rematch_ante_stake():
    p = Play(rematch_ante="STAKE").start(THREE, cards=DRAW | hands(R1_S1="05A 06A", R1_S2="03G 08G"))
    p.acts(*ALL_CHECK)
    assert p.hand.pot() == 30 + 20  # the carried pot and a new ante from each participant
    assert p.b.player("A").total == 10 and p.b.player("A").stack == 580
    p.acts("A CHECK", "B CHECK", "A CHECK", "B CHECK")
    assert p.result.details["antes"] == {"A": "20", "B": "20", "C": "10"}
    assert [a["amount"] for a in p.awards] == ["30", "30", "20"]
    assert p.returned == {"A": D(580), "B": D(630), "C": D(590)}
    q = Play().start(THREE, cards=DRAW)
    q.acts(*ALL_CHECK)
    assert q.hand.pot() == 30  # NONE (default): no new ante


def test_rematch_repeated_a_rematch_that_rematches_again():
    cards = DRAW | hands(R1_S1="01G 02A", R1_S2="01R 02R", R2_S1="03G 08G", R2_S2="05A 06A")
    p = Play().start(THREE, cards=cards)
    p.acts(*ALL_CHECK)
    p.acts("A CHECK", "B CHECK", "A CHECK", "B CHECK")
    assert p.r.street == "BET_1 (rematch 2)"
    p.acts("A BET", "B CALL", "A CHECK", "B CHECK")
    assert [a["result"] for a in p.awards] == ["REMATCH_DRAW", "REMATCH_DRAW", "WIN", "WIN"]
    assert [a["game"] for a in p.awards] == [0, 1, 2, 2]
    assert p.result.details["rematches"] == 2
    assert [x for x in p.positions() if x.startswith("R2.")] == ["R2.S1.1", "R2.S2.1", "R2.S1.2", "R2.S2.2"]
    assert p.positions().count("SHUFFLE") == 3
    assert p.returned == {"A": D(630), "B": D(580), "C": D(590)}


def test_rematch_max_rematches_a_further_draw_splits():
    cards = DRAW | hands(R1_S1="01G 02A", R1_S2="01R 02R")
    p = Play(max_rematches=1).start(THREE, cards=cards)
    p.acts(*ALL_CHECK)
    p.acts("A CHECK", "B CHECK", "A CHECK", "B CHECK")
    last = p.awards[-1]
    assert last == last | {"game": 1, "result": "SPLIT", "winners": ["A", "B"], "shares": {"A": "15", "B": "15"}}
    assert "rematch limit" in last["reason"]
    assert p.returned == {"A": D(605), "B": D(605), "C": D(590)}
    q = Play(max_rematches=0).start(THREE, cards=DRAW)
    q.acts(*ALL_CHECK)
    assert q.result.details["rematches"] == 0 and q.awards[0]["result"] == "SPLIT"


def test_rematch_max_rematches_a_further_94_is_ignored():
    cards = DRAW | hands(R1_S1="04R 09R", R1_S2="05A 10R")  # in the rematch: 9·4 (3 points) vs 5 points
    p = Play(max_rematches=1).start(THREE, cards=cards)
    p.acts(*ALL_CHECK)
    p.acts("A CHECK", "B CHECK", "A CHECK", "B CHECK")
    assert p.awards[-1] == p.awards[-1] | {"game": 1, "result": "WIN", "winners": ["B"]}
    assert p.returned == {"A": D(590), "B": D(620), "C": D(590)}
    q = Play().start(THREE, cards=cards)  # no limit: the same 9·4 rematches again
    q.acts(*ALL_CHECK)
    q.acts("A CHECK", "B CHECK", "A CHECK", "B CHECK")
    assert q.hand.game.number == 2 and q.hand.awards[-1]["result"] == "REMATCH_94"
    r = Play(max_rematches=0).start(THREE, cards=hands(S1="04R 09R", S2="05A 07A", S3="06A 10R"))
    r.acts(*ALL_CHECK)
    assert r.awards == [r.awards[0]] and r.awards[0]["winners"] == ["C"]  # 6 points beats the 9·4's 3


def test_rematch_draw_resolution_split_odd_chip_to_the_tied_player_nearest_s1():
    # seats 1, 2, 3 with S1 = seat 2: S2 = seat 3, S3 = seat 1. S1 folds; S2 and S3 tie.
    seats = {1: ("P1", 300), 2: ("P2", 300), 3: ("P3", 300)}
    cards = hands(S2="01G 02A", S3="01R 02R")
    p = Play(stake=5, draw_resolution="SPLIT").start(seats, cards=cards, context={"winner_seat": 2})
    assert [x.seat for x in p.r.plan[1:4]] == [2, 3, 1]
    p.acts("P2 FOLD", "P3 CHECK", "P1 CHECK", "P3 CHECK", "P1 CHECK")
    (split,) = p.awards
    assert split == split | {"amount": "15", "result": "SPLIT", "winners": ["P3", "P1"],
                             "shares": {"P3": "8", "P1": "7"}}
    assert p.returned == {"P1": D(302), "P2": D(295), "P3": D(303)}
    assert p.result.winner == "S2,S3"


def test_rematch_reshuffles_a_card_of_the_first_deal_may_come_again():
    p = Play().start(THREE, cards=DRAW | hands(R1_S1="01G 05A", R1_S2="01R 02R"))
    p.acts(*ALL_CHECK)
    p.acts("A CHECK", "B CHECK", "A CHECK", "B CHECK")
    for n in ("S1.1", "S2.1", "S2.2"):  # the same cards again: registered, no duplicate
        assert p.r.cards[f"R1.{n}"] == p.r.cards[n]
    assert not p.events("scan_rejected")
    assert p.result.winner == "S2" and p.result.hands["S2"].cards == ["01R", "02R"]


def test_rematch_a_real_duplicate_within_the_same_deal_is_rejected():
    p = Play()
    p.cards.update(DRAW | hands(R1_S1="03G 08G", R1_S2="05A 06A"))
    p.open(context={"winner_seat": 1})
    for seat, (player, chips) in THREE.items():
        p.bring(seat, player, chips)
    p.close()
    p.deal(stop_at="S2.1")
    step = p.feed(ScanRead(reader="R", code="01G", at=p.tick()))  # S1.1 already holds 01G
    assert [e.data["reason"] for e in step.effects if isinstance(e, RoundEvent)] == ["duplicate_card"]
    assert [e.kind for e in step.effects if isinstance(e, StationPrompt)] == ["RESCAN"]
    assert p.r.expected_position == "S2.1"
    step = p.feed(ScanRead(reader="R", code="11G", at=p.tick()))  # not one of the 20
    assert [e.data["reason"] for e in step.effects if isinstance(e, RoundEvent)] == ["foreign_card"]
    p.deal()
    p.acts(*ALL_CHECK[:-1])
    assert p.act("C", "CHECK", deal=False).accepted
    p.deal(stop_at="R1.S2.1")
    step = p.feed(ScanRead(reader="R", code="03G", at=p.tick()))  # R1.S1.1 holds 03G in this deal
    assert [e.data["reason"] for e in step.effects if isinstance(e, RoundEvent)] == ["duplicate_card"]
    assert p.r.expected_position == "R1.S2.1"
    p.deal()
    assert p.r.cards["R1.S2.1"] == "05A"


# --- §5.2 REMATCH_94_MODE = PROMPT: the 9·4 holder chooses ----------------------------------------

EX18 = hands(S1="04R 09R", S2="05A 07A")  # 9·4 (3 points) vs 2 points: the holder is the unique best
EX10 = hands(S1="04R 09R", S2="01G 02A")  # 9·4 vs Al-li: the holder is beaten unless it rematches


def choice_turn(p: Play) -> PlayerMessage:
    turn = p.told(kind="your_turn")[-1]
    assert turn.data["choice"] == "REMATCH_94" and p.r.phase == Phase.ACTION
    return turn


def test_prompt_the_holder_is_asked_on_their_own_turn_after_the_hands_are_shown():
    p = Play(rematch_94_mode="PROMPT").start(TWO, cards=EX10)
    p.acts("A CHECK", "B CHECK", "A CHECK", "B CHECK")
    turn = choice_turn(p)
    assert turn.player_id == "A" and p.hand.to_act == "A" and p.r.street == "REMATCH_CHOICE"
    assert turn.data["actions"] == ["REMATCH", "PLAY_ON"] and turn.data["default"] == "REMATCH"  # AUTO_BEST
    assert turn.data["pot"] == "20" and turn.data["contenders"] == ["A", "B"] and "REMATCH or PLAY ON" in turn.data["reason"]
    assert turn.data["turn"] == p.r.turn and turn.data["closes_at"] == p.r.action_deadline
    public = p.events("turn")[-1].data
    assert public["player_id"] == "A" and public["choice"] == "REMATCH_94" and public["street"] == "REMATCH_CHOICE"
    shown = p.events("showdown")[-1]
    assert shown.data["hands"]["S2"]["cards"] == ["01G", "02A"] and shown.data["hands"]["S1"]["cards"] == ["04R", "09R"]
    assert p.effects.index(shown) < p.effects.index(turn)  # the holder sees what they face before choosing
    assert p.hand.awards == [] and p.hand.won == {}  # the pot waits for the choice


def test_prompt_rematch_plays_the_pot_again_and_play_on_lets_the_best_hand_win():
    q = Play(rematch_94_mode="PROMPT").start(TWO, cards=EX10)
    q.acts("A CHECK", "B CHECK", "A CHECK", "B CHECK", "A REMATCH")
    assert q.hand.game.number == 1 and q.r.street == "BET_1 (rematch 1)"
    carried = q.events("rematch")[-1].data["carried"][0]
    assert carried | {"cause": "NINE_FOUR", "by": ["A"], "step": 4} == carried
    p = Play(rematch_94_mode="PROMPT").start(TWO, cards=EX10)
    p.acts("A CHECK", "B CHECK", "A CHECK", "B CHECK", "A PLAY_ON")
    assert p.awards == [p.awards[0]] and p.awards[0] | {"result": "WIN", "winners": ["B"]} == p.awards[0]
    assert p.returned == {"A": D(590), "B": D(610)}
    assert p.result.details["choices"] == [{"game": 0, "player_id": "A", "action": "PLAY_ON", "choice": "REMATCH_94",
                                            "added": "0", "pot": "20", "contenders": ["A", "B"],
                                            "reason": p.result.details["choices"][0]["reason"], "by": "player"}]
    acted = p.events("player_acted")[-1].data
    assert acted | {"action": "PLAY_ON", "choice": "REMATCH_94", "by": "player", "street": "REMATCH_CHOICE"} == acted


def test_prompt_a_timeout_chooses_as_auto_best():
    # example 18: the holder is the unique best -> AUTO_BEST plays on and wins
    p = Play(rematch_94_mode="PROMPT").start(TWO, cards=EX18)
    p.acts("A CHECK", "B CHECK", "A CHECK", "B CHECK")
    assert choice_turn(p).data["default"] == "PLAY_ON"
    assert p.timeout().accepted
    assert p.r.phase == Phase.RESULT and p.returned == {"A": D(610), "B": D(590)}
    assert p.events("player_acted")[-1].data | {"action": "PLAY_ON", "by": "timeout"} == p.events("player_acted")[-1].data
    # example 10: beaten by Al-li -> AUTO_BEST calls the rematch
    q = Play(rematch_94_mode="PROMPT").start(TWO, cards=EX10)
    q.acts("A CHECK", "B CHECK", "A CHECK", "B CHECK")
    assert q.timeout().accepted
    assert q.hand.game.number == 1 and q.hand.choices[0] | {"action": "REMATCH", "by": "timeout"} == q.hand.choices[0]


def test_prompt_refusals_change_nothing():
    p = Play(rematch_94_mode="PROMPT").start(TWO, cards=EX10)
    p.acts("A CHECK", "B CHECK", "A CHECK", "B CHECK")
    before = state(p)
    turn = p.r.turn
    assert "waiting for A" in rejected(p.act("B", "REMATCH", deal=False))
    assert "CHECK is not a choice now" in rejected(p.act("A", "CHECK", deal=False))
    assert "REJOIN is not a choice now" in rejected(p.act("A", "REJOIN", deal=False))
    assert "takes no amount" in rejected(p.act("A", "REMATCH", amount="10", deal=False))
    assert "no betting round is open" in rejected(p.act("B", "FOLD", reserve=True, deal=False))
    stale = p.feed(PlayerAction(player_id="A", action="REMATCH", turn=turn - 1, at=p.tick()))
    assert "which is over" in rejected(stale)
    assert "stale" in rejected(p.feed(ActionTimeout(turn=turn - 1, at=p.tick())))
    assert state(p) == before
    assert p.feed(PlayerAction(player_id="A", action="PLAY_ON", turn=turn, at=p.tick())).accepted


def test_prompt_two_plain_94_holders_are_asked_in_s1_order_and_one_rematch_is_enough():
    cards = hands(S1="04R 09A", S2="05A 07A", S3="04A 09R")  # two plain 9·4 (neither is 04A+09A)
    p = Play(rematch_94_mode="PROMPT").start(THREE, cards=cards)
    p.acts(*ALL_CHECK)
    assert choice_turn(p).player_id == "A"
    p.acts("A PLAY_ON")
    assert choice_turn(p).player_id == "C"  # the second holder is asked next
    p.acts("C REMATCH")
    first = p.hand.awards[0]
    assert first | {"result": "REMATCH_94", "participants": ["A", "B", "C"], "by": ["C"]} == first
    r = Play(rematch_94_mode="PROMPT").start(THREE, cards=cards)
    r.acts(*ALL_CHECK)
    r.acts("A REMATCH")  # the first REMATCH decides: C is not asked
    assert r.hand.game.number == 1 and [c["player_id"] for c in r.hand.choices] == ["A"]
    both = Play(rematch_94_mode="PROMPT").start(THREE, cards=cards)
    both.acts(*ALL_CHECK)
    both.acts("A PLAY_ON", "C PLAY_ON")  # both play on: the two 9·4 tie at 3 points, B has 2: a draw
    assert both.hand.awards[0] | {"result": "REMATCH_DRAW", "participants": ["A", "C"], "cause": "DRAW"} == both.hand.awards[0]


def test_prompt_nobody_is_asked_once_the_rematch_limit_is_reached():
    p = Play(rematch_94_mode="PROMPT", max_rematches=0).start(TWO, cards=EX10)
    p.acts("A CHECK", "B CHECK", "A CHECK", "B CHECK")
    assert p.r.phase == Phase.RESULT and p.hand.choices == []
    assert [m for m in p.told(kind="your_turn") if "choice" in m.data] == []
    assert p.returned == {"A": D(590), "B": D(610)}


def test_prompt_a_choice_is_a_turn_fair_recovery_pauses_and_renews_it_and_a_replay_resumes_it():
    p = Play(rematch_94_mode="PROMPT").start(TWO, cards=EX10)
    p.acts("A CHECK", "B CHECK", "A CHECK", "B CHECK")
    turn = p.r.turn
    p.feed(LinkDown(link="broker", reason="test", at=p.tick()))
    assert "paused" in rejected(p.feed(ActionTimeout(turn=turn, at=p.tick())))
    back = p.tick()
    step = p.feed(LinkUp(link="broker", at=back))
    assert step.accepted and step.journal and p.r.action_deadline == back + 10_000
    # the same turn with a renewed deadline: a timer armed for the old one (queued behind the
    # resume) changes nothing; the one for the new deadline is the turn's timer
    assert "stale" in rejected(p.feed(ActionTimeout(turn=turn, deadline=back - 1, at=p.tick())))
    assert p.r.turn == turn and p.r.action_deadline == back + 10_000
    again = p.told("A", "your_turn")[-1]
    assert again.data["resumed"] is True and again.data["choice"] == "REMATCH_94" and again.data["turn"] == turn
    # a restart: the journal alone rebuilds the pending choice, and the player sees it again
    fresh = new_table(rematch_94_mode="PROMPT")
    for ev in p.journal:
        assert fresh.handle(ev).accepted, ev
    r = fresh.current
    assert r.turn == turn and r.hand.to_act == "A" and r.action_deadline == p.r.action_deadline
    private = [m for m in r.private_now(p.tick()) if m.kind == "your_turn"]
    assert [m.data["choice"] for m in private] == ["REMATCH_94"]
    assert fresh.handle(PlayerAction(player_id="A", action="REMATCH", turn=turn, at=p.tick())).accepted
    assert r.hand.game.number == 1


def test_prompt_and_reentry_are_accepted_by_the_configuration():
    from dealer.edge.config import TableConfig

    o = SeotdaOptions(rematch_94_mode="PROMPT", rematch_reentry="HALF_POT")
    assert o.rank_rules.rematch_94_mode == "PROMPT"
    with pytest.raises(ValidationError, match="rematch_reentry"):
        SeotdaOptions(rematch_reentry="FULL_POT")
    cfg = TableConfig.model_validate({"id": "SD1", "game": "seotda", "minor_unit": "1",
                                      "options": {"rematch_94_mode": "PROMPT", "rematch_reentry": "HALF_POT"},
                                      "scanner": {"kind": "mqtt", "reader_id": "R1"}})
    assert cfg.options["rematch_reentry"] == "HALF_POT"


# --- §7.2 rule 3 REMATCH_REENTRY = HALF_POT: a folded player may rejoin ------------------------

REENTRY = hands(S1="04A 09A", S2="08G 08A", R1_S1="01G 02A", R1_S2="10A 10R", R1_S3="03G 08G")


def test_reentry_a_folded_player_pays_half_the_carried_pot_and_plays_the_rematch():
    # example 8: Animal 9·4 vs 8·8 -> rematch A+B for 50; C folded in BET_1 and is asked
    p = Play(rematch_reentry="HALF_POT").start(THREE, cards=REENTRY)
    p.acts("A BET", "B CALL", "C FOLD", "A CHECK", "B CHECK")
    offer = p.told("C", "your_turn")[-1]
    assert offer.data | {"choice": "REENTRY", "actions": ["REJOIN", "SIT_OUT"], "default": "SIT_OUT", "fee": "25",
                         "carried": "50", "rematch": 1} == offer.data
    assert p.r.street == "REENTRY (rematch 1)" and p.hand.game.number == 0  # the rematch waits for the answer
    p.acts("C REJOIN")
    assert p.hand.game.number == 1 and [q.player_id for q in p.b.players] == ["A", "B", "C"]
    assert p.hand.game.carried[0][0].amount == 75 and p.hand.game.carried[0][1] == ("A", "B", "C")
    assert p.b.player("C").stack == 590 - 25
    rematch = p.events("rematch")[-1].data
    assert rematch["participants"] == ["A", "B", "C"] and rematch["carried"][0]["participants"] == ["A", "B", "C"]
    assert rematch["reentries"] == [{"game": 1, "player": "C", "paid": "25", "into": ["25"]}]
    assert [x for x in p.positions() if x.startswith("R1.S3")] == ["R1.S3.1"]  # dealt into the rematch
    p.acts("A CHECK", "B CHECK", "C CHECK", "A CHECK", "B CHECK", "C CHECK")
    assert p.awards[-1] | {"game": 1, "amount": "75", "result": "WIN", "winners": ["C"]} == p.awards[-1]  # 3·8
    assert p.returned == {"A": D(580), "B": D(580), "C": D(640)}
    assert sum(p.returned.values()) == 1800
    assert p.result.details["reentries"] == rematch["reentries"]


@pytest.mark.parametrize("answer", ["SIT_OUT", "timeout"])
def test_reentry_sitting_out_or_a_timeout_keeps_the_player_out(answer):
    p = Play(rematch_reentry="HALF_POT").start(THREE, cards=REENTRY)
    p.acts("A BET", "B CALL", "C FOLD", "A CHECK", "B CHECK")
    if answer == "timeout":
        assert p.timeout().accepted
    else:
        p.acts("C SIT_OUT")
    assert [q.player_id for q in p.b.players] == ["A", "B"] and p.hand.game.carried[0][0].amount == 50
    assert "reentries" not in p.events("rematch")[-1].data
    p.acts("A CHECK", "B CHECK", "A CHECK", "B CHECK")
    assert p.returned == {"A": D(580), "B": D(630), "C": D(590)}
    assert p.result.details["choices"][0] | {"action": "SIT_OUT", "by": "player" if answer == "SIT_OUT" else "timeout",
                                              "added": "0"} == p.result.details["choices"][0]


def test_reentry_the_fee_is_rounded_down_and_only_a_player_who_can_pay_is_asked():
    # stake 5: antes 15, A BET 5, B X2_RAISE 10, A CALL: a draw (two Al-li) carries 35; C folded
    cards = hands(S1="01G 02A", S2="01R 02R", R1_S1="05A 06A", R1_S2="03G 08G", R1_S3="10A 10R")
    moves = ("A BET", "B X2_RAISE", "C FOLD", "A CALL", "A CHECK", "B CHECK")
    p = Play(stake=5, min_chips_multiple=1, rematch_reentry="HALF_POT")
    p.start({1: ("A", 300), 2: ("B", 300), 3: ("C", 300)}, cards=cards)
    p.acts(*moves)
    assert p.hand._sd.carry[0][0].amount == 35
    offer = p.told("C", "your_turn")[-1]
    assert offer.data["choice"] == "REENTRY" and offer.data["fee"] == "17"  # 17.5 rounded down
    p.acts("C REJOIN")
    assert p.hand.game.carried[0][0].amount == 52 and p.b.player("C").stack == 300 - 5 - 17
    # C brought 10: 5 left after the ante, less than the fee: not asked, the rematch starts at once
    q = Play(stake=5, min_chips_multiple=1, rematch_reentry="HALF_POT")
    q.start({1: ("A", 300), 2: ("B", 300), 3: ("C", 10)}, cards=cards)
    q.acts(*moves)
    assert [m for m in q.told(kind="your_turn") if "choice" in m.data] == []
    assert q.hand.game.number == 1 and [x.player_id for x in q.b.players] == ["A", "B"]


def test_reentry_with_two_carried_pots_pays_half_of_each_into_each():
    # main pot {A,B,C}: C's 9·4 vs 7 points -> rematch A+B+C; side pot {B,C} -> rematch B+C; D folded
    cards = hands(S1="03R 04R", S2="02R 05R", S3="04A 09R", R1_S1="03G 08G", R1_S2="10A 10R", R1_S3="05A 06A")
    p = Play(min_chips_multiple=1, rematch_reentry="HALF_POT")
    p.start({1: ("A", 100), 2: ("B", 300), 3: ("C", 300), 4: ("D", 600)}, cards=cards)
    p.acts("A ALL_IN", "B ALL_IN", "C CALL", "D FOLD")
    main, side = p.hand._sd.carry
    assert (main[0].amount, side[0].amount) == (D(310), D(400))  # D's ante is in the main pot
    offer = p.told("D", "your_turn")[-1]
    assert offer.data["fee"] == "355" and offer.data["carried"] == "710"
    p.acts("D REJOIN")
    (m, m_who), (sp, s_who) = p.hand.game.carried
    assert (m.amount, m_who) == (D(465), ("A", "B", "C", "D")) and (sp.amount, s_who) == (D(600), ("B", "C", "D"))
    assert p.hand.reentries == [{"game": 1, "player": "D", "paid": "355", "into": ["155", "200"]}]
    p.deal()
    while p.r.phase == Phase.ACTION:
        p.act(p.hand.to_act, "CHECK")
    assert p.r.phase == Phase.RESULT
    assert sum(p.returned.values()) == 1300 and p.returned["A"] == 465  # A's 3·8 takes the main pot


# --- properties ---------------------------------------------------------------------------------------

#: Forced first-two-seat hands that make rematches likely (by S-label; other seats get shoe cards).
SCENARIOS: dict[str, dict[str, str]] = {
    "shuffled": {},
    "draw": {"S1": "01G 02A", "S2": "01R 02R"},
    "nine_four": {"S1": "04R 09R", "S2": "05A 07A"},
    "animal": {"S1": "04A 09A", "S2": "08G 08A"},
    "split_pots": {"S1": "03R 04R", "S2": "02R 05R", "S3": "04A 09R"},
}
OPTION_CHOICES: dict[str, list[Any]] = {
    "ante_and_blind": ["ONE_POST", "TWO_POSTS"],
    "raise_cap": [None, None, 1, 2],
    "pot_fraction_base": ["POT_AFTER_CALL", "POT_BEFORE_ACTION"],
    "rematch_94_mode": ["AUTO_BEST", "ALWAYS", "PROMPT", "PROMPT"],
    "rematch_reentry": ["NONE", "HALF_POT", "HALF_POT"],
    "draw_resolution": ["REMATCH", "REMATCH", "SPLIT"],
    "rematch_ante": ["NONE", "STAKE"],
    "max_rematches": [None, None, 0, 1, 2],
    "first_seat": ["PREVIOUS_WINNER", "ROTATE"],
}


def state(p: Play) -> tuple:
    """Everything an action could change (compared before and after a refused one)."""
    r, h = p.r, p.r.hand
    b = h.betting
    players = [(q.player_id, q.seat, q.stack, q.total, q.street, q.folded, q.acted, q.may_raise) for q in b.players]
    return copy.deepcopy((r.phase, r.turn, r.action_deadline, r.next_index, dict(r.cards), r.plan, r.street,
                          b.state, b.to_act, b.level, b.last_increment, b.bets, b.capped, b.rounds, len(b.history),
                          players, dict(h.reservations), h.game.number, h._stage, dict(h.won), h.awards,
                          dict(h.stacks_out), list(h.shown), h._choice, h._sd, h.choices, h.reentries))


def illegal_press(p: Play, rng: random.Random) -> PlayerAction:
    """An action the rules refuse in the current state."""
    b, to_act = p.b, p.b.to_act
    legal = p.hand.turn_options()["buttons"]
    others = [q.player_id for q in b.players if q.player_id != to_act]
    wrong = [x for x in ("CHECK", "BET", "X2_RAISE", "CALL", "QUARTER", "HALF") if x not in legal]
    kinds = ["out_of_turn", "amount", "own_reservation", "stranger", "engine_name"] + (["button"] if wrong else [])
    kind = rng.choice(kinds)
    if kind == "out_of_turn":
        return PlayerAction(player_id=rng.choice(others), action=rng.choice(["CHECK", "CALL", "FOLD", "HALF"]), at=p.at)
    if kind == "amount":
        return PlayerAction(player_id=to_act, action=rng.choice(["BET", "CALL", "HALF"]), amount="20", at=p.at)
    if kind == "own_reservation":
        return PlayerAction(player_id=to_act, action="FOLD", reserve=True, at=p.at)
    if kind == "stranger":
        return PlayerAction(player_id="nobody", action="FOLD", reserve=rng.random() < 0.5, at=p.at)
    if kind == "engine_name":
        return PlayerAction(player_id=to_act, action=rng.choice(["RAISE", "BRING_IN"]), at=p.at)
    return PlayerAction(player_id=to_act, action=rng.choice(wrong), at=p.at)


def illegal_choice(p: Play, rng: random.Random) -> PlayerAction:
    """An answer the rules refuse while a player has a choice (REMATCH_94 or REENTRY) to make."""
    opts = p.hand.turn_options()
    who = p.hand.to_act
    others = [q for q in p.hand.brought if q != who]
    other_kind = {"REMATCH_94": ["REJOIN", "SIT_OUT"], "REENTRY": ["REMATCH", "PLAY_ON"]}[opts["choice"]]
    kind = rng.choice(["someone_else", "button", "other_kind", "amount", "reserve"])
    if kind == "someone_else":
        return PlayerAction(player_id=rng.choice(others), action=rng.choice(opts["actions"]), at=p.at)
    if kind == "button":
        return PlayerAction(player_id=who, action=rng.choice(["CHECK", "CALL", "FOLD", "BET"]), at=p.at)
    if kind == "other_kind":
        return PlayerAction(player_id=who, action=rng.choice(other_kind), at=p.at)
    if kind == "amount":
        return PlayerAction(player_id=who, action=rng.choice(opts["actions"]), amount="10", at=p.at)
    return PlayerAction(player_id=rng.choice(list(p.hand.brought)), action="FOLD", reserve=True, at=p.at)


def random_game(seed: int) -> tuple[Play, dict[str, Any], dict[str, D]]:
    """A whole Seotda round with random options, chips, hands, buttons, timeouts, reservations,
    scanner failures and refused actions (each refused action is checked to change nothing)."""
    rng = random.Random(seed)
    options = {k: rng.choice(v) for k, v in OPTION_CHOICES.items()} | {"min_chips_multiple": 1}
    p = Play(**options)
    n = rng.randint(2, 5)
    seats = sorted(rng.sample(range(1, 6), n))
    brought = {f"P{s}": D(rng.choice([10, 25, 60, 100, 250, 600, 1000])) for s in seats}
    context = rng.choice([{}, {"winner_seat": rng.randint(1, 5)}, {"first_seat": rng.randint(1, 5)}])
    draw = rng.randbytes(32).hex()
    for deck in range(6):
        p.shoe[deck] = rng.sample(SEOTDA_20, 20)
        prefix = f"R{deck}_" if deck else ""
        scenario = rng.choice(list(SCENARIOS)) if deck < 3 else "shuffled"
        p.cards.update(hands(**{prefix + k: v for k, v in SCENARIOS[scenario].items()
                                if int(k[1:]) <= n}))
    assert p.open(seq=rng.randint(1, 99), context=context, draw=draw).accepted
    for s in seats:
        assert p.bring(s, f"P{s}", brought[f"P{s}"]).accepted
    assert p.close().accepted
    refused = 0
    for _ in range(3000):
        r = p.r
        if r.phase not in (Phase.BETTING_CLOSED, Phase.DEALING, Phase.ACTION):
            break
        p.tick()
        if r.phase != Phase.ACTION:
            pos = r.plan[r.next_index]
            x = rng.random()
            if pos.confirm:
                assert p.feed(DealerConfirm(step=pos.name, at=p.at)).accepted
            elif x < 0.05:
                p.feed(ReadFailed(reader="R", reason="noread", at=p.at))
            elif x < 0.08 and any(q.deck == pos.deck and q.name in r.cards for q in r.plan):
                dup = next(r.cards[q.name] for q in r.plan if q.deck == pos.deck and q.name in r.cards)
                before = r.next_index
                p.feed(ScanRead(reader="R", code=dup, at=p.at))
                assert r.next_index == before
            else:
                p.deal()
            continue
        x = rng.random()
        if p.hand._choice is not None:  # REMATCH or PLAY_ON (PROMPT), REJOIN or SIT_OUT (HALF_POT)
            if x < 0.2:
                assert p.timeout(deal=False).accepted
            elif x < 0.4:
                before = state(p)
                step = p.feed(illegal_choice(p, rng))
                assert not step.accepted and step.rejection is not None
                assert state(p) == before
                refused += 1
            else:
                step = p.act(p.hand.to_act, rng.choice(p.hand.turn_options()["actions"]), deal=False)
                assert step.accepted, step.effects
            continue
        if x < 0.12:
            assert p.timeout(deal=False).accepted
        elif x < 0.25:
            before = state(p)
            step = p.feed(illegal_press(p, rng))
            assert not step.accepted and step.rejection is not None
            assert state(p) == before
            refused += 1
        elif x < 0.4:
            who = rng.choice([q.player_id for q in p.b.players])
            before = state(p)
            step = p.act(who, rng.choice(["FOLD", "CHECK", "CALL", "BET", "X2_RAISE", "QUARTER", "HALF",
                                          "MAX", "ALL_IN"]), reserve=True, deal=False)
            if not step.accepted:
                assert state(p) == before
                refused += 1
        else:
            buttons = list(p.hand.turn_options()["buttons"])
            weights = [0.3 if b_ in ("MAX", "ALL_IN") else 0.6 if b_ == "FOLD" else 1.0 for b_ in buttons]
            button = rng.choices(buttons, weights)[0]
            step = p.act(p.b.to_act, button, deal=False)
            assert step.accepted, (button, step.effects)
    else:
        raise AssertionError("the round did not finish")
    assert p.r.phase == Phase.RESULT
    return p, options, brought


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 10**9))
def test_property_chips_are_conserved_through_any_legal_play(seed):
    p, _, brought = random_game(seed)
    res = p.result
    returned = p.returned
    assert set(returned) == set(brought)
    assert sum(returned.values()) == sum(brought.values())
    assert all(v >= 0 for v in returned.values())
    for player, stake in brought.items():
        s = settle_bet("chips", stake, res, player)
        assert s.returned == returned[player] and s.returned >= 0
    for a in res.details["awards"]:
        assert D(a["amount"]) >= 0
        if "shares" in a:
            assert sum(D(v) for v in a["shares"].values()) == D(a["amount"])
            assert set(a["shares"]) == set(a["winners"])
    assert all(D(d["added"]) >= 0 for d in p.acted())
    # the pots that were paid, plus the chips nobody put in, are exactly what came to the table
    paid = sum(D(a["amount"]) for a in res.details["awards"] if a["result"] in ("WIN", "SPLIT"))
    left = sum(q.stack for q in p.b.players) + sum(p.hand.stacks_out.get(x, 0) for x in brought
                                                   if x not in {q.player_id for q in p.b.players})
    # pots won before a rematch are paid into the winner's chips for it (they are in ``left`` too)
    assert paid + left - sum(p.hand.into_rematch.values()) == sum(brought.values())


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 10**9))
def test_property_replaying_the_journal_into_a_fresh_table_gives_the_identical_result(seed):
    p, options, _ = random_game(seed)
    fresh = new_table(**options)
    for ev in p.journal:
        assert fresh.handle(ev).accepted
    a, b = p.r, fresh.current
    assert a.result == b.result
    assert (a.turn, a.action_deadline, a.next_index, a.cards, a.plan) == (b.turn, b.action_deadline, b.next_index,
                                                                         b.cards, b.plan)
    assert p.t.memory == fresh.memory
    # the live run also saw refused events (not journaled): the same result without them means
    # they changed nothing


def test_property_illegal_actions_change_nothing_at_every_turn_of_a_scripted_game():
    p = Play().start(THREE, cards=DRAW | hands(R1_S1="05A 06A", R1_S2="03G 08G"))
    script = ["A BET", "B X2_RAISE", "C HALF", "A CALL", "B CALL", "A CHECK", "B QUARTER", "C FOLD", "A CALL",
              "A CHECK", "B CHECK", "A CHECK", "B HALF", "A ALL_IN", "B CALL"]
    rng = random.Random(7)
    for move in script:
        for _ in range(6):
            before = state(p)
            step = p.feed(illegal_press(p, rng))
            assert not step.accepted and state(p) == before
        p.acts(move)
    assert p.r.phase == Phase.RESULT


def test_a_rematch_is_announced_to_the_station_and_published_as_it_happens():
    """The dealer station hears why it must reshuffle (CONFIRM with the announcement), and the
    public events say which pot was carried and to whom, before the rematch is dealt."""
    from dealer.core.events import CloseBetting, DealerConfirm, OpenRound, PlaceBet, PlayerAction, ScanRead
    from dealer.games.seotda import Seotda
    from dealer.core.messages import RoundEvent, StationPrompt
    from dealer.core.round import Phase, TableRules
    from dealer.core.table import Table

    t = Table(TableRules(table_id="SD1", game=Seotda.from_options({}), minor_unit=Decimal(1)))
    t.handle(OpenRound(round_id="SD1-000001", at=1, context={"winner_seat": 1}))
    for i, seat in enumerate((1, 2)):
        assert t.handle(PlaceBet(bet_id=f"b{i}", player_id=f"p{seat}", bet_type="chips", stake="600",
                                 seat=seat, at=2)).accepted
    t.handle(CloseBetting(at=3))
    r = t.current
    deal = {"S1.1": "04R", "S2.1": "05A", "S1.2": "09R", "S2.2": "02A"}  # 9·4 against 7 points
    effects = []
    while r.phase in (Phase.BETTING_CLOSED, Phase.DEALING, Phase.ACTION) and "R1.S1.1" not in [
            p.name for p in r.plan[: r.next_index]]:
        if r.phase == Phase.ACTION:
            ev = PlayerAction(player_id=r.hand.betting.to_act, action="CHECK", at=5)
        elif r.plan[r.next_index].confirm:
            ev = DealerConfirm(step="SHUFFLE", at=5)
        else:
            ev = ScanRead(reader="R", code=deal.get(r.plan[r.next_index].name, "01G"), at=5)
        step = t.handle(ev)
        assert step.accepted, step.effects
        effects += step.effects
    events = {e.event: e.data for e in effects if isinstance(e, RoundEvent)}
    hands = {"S1": {"player": "p1", "name": "9·4 (Gu-sa), 3 points", "rank": 203, "cards": ["04R", "09R"],
                    "positions": ["S1.1", "S1.2"]},
             "S2": {"player": "p2", "name": "7 points (Ilgop-kkeut)", "rank": 207, "cards": ["05A", "02A"],
                    "positions": ["S2.1", "S2.2"]}}
    assert events["showdown"] == {"game": 0, "hands": hands}  # revealed when the showdown happens
    reason = ("p1's 9·4 (Gu-sa) faces at best 7 points (Ilgop-kkeut) (R 207 <= 306): rematch of all "
              "contenders")
    assert events["rematch"] == {"rematch": 1, "participants": ["p1", "p2"], "hands": hands,
                                 "carried": [{"amount": "20", "participants": ["p1", "p2"], "cause": "NINE_FOUR",
                                              "by": ["p1"], "step": 4, "reason": reason}]}
    names = [e.event for e in effects if isinstance(e, RoundEvent)]
    assert names.index("showdown") < names.index("rematch") < names.index("card_registered", names.index("rematch"))
    confirms = [e for e in effects if isinstance(e, StationPrompt) and e.kind == "CONFIRM"]
    assert confirms[-1].announce == "Rematch 1: reshuffle the 20 cards"
