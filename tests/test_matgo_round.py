"""Matgo through the round machine with plain calls: the deal, stock cards scanned as they
are turned over, moves, timeouts, redeals, journal replay and exact money."""

from __future__ import annotations

import pytest
import hashlib
import json
import random
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from dealer.core.cards import HWATU_48
from dealer.core.events import (
    EVENT_ADAPTER,
    ActionTimeout,
    CloseBetting,
    DealerConfirm,
    LinkDown,
    OpenRound,
    PlaceBet,
    PlayerAction,
    ReadFailed,
    ScanRead,
)
from dealer.games.matgo import AI_PLAYER, first_player
from dealer.core.messages import PlayerMessage, RoundEvent
from dealer.core.round import Phase
from dealer.core.settlement import settle_bet
from dealer.core.table import Table
from tests.harness_matgo import core_table as table

COVER = Decimal("100.00")


def play(seed: int, *, options=None, scripted=None, timeouts=0.2, draw: str | None = "", round_id="MG1-000007"):
    """A whole game with random legal moves for both seats; returns (table, fed, journaled, effects).
    ``draw`` is the round's secret draw ("": one derived from ``seed``; None: a round journaled
    before draws)."""
    rng = random.Random(seed)
    if draw == "":
        draw = random.Random(f"draw-{seed}").randbytes(32).hex()
    t = table(**(options or {}))
    fed, journaled, effects = [], [], []

    def feed(ev):
        step = t.handle(ev)
        fed.append(ev)
        effects.extend(step.effects)
        if step.journal:
            journaled.append(ev)
        return step

    feed(OpenRound(round_id=round_id, at=1, draw=draw))
    assert feed(PlaceBet(bet_id="b1", player_id="alice", bet_type="cover", stake=str(COVER), seat=1, at=2)).accepted
    feed(CloseBetting(at=3))
    r = t.current
    decks: dict[int, list[str]] = {}
    at = 10
    while r.phase in (Phase.BETTING_CLOSED, Phase.DEALING, Phase.ACTION):
        at += 3
        if r.phase == Phase.ACTION:
            opts = r.hand.turn_options()
            if rng.random() < timeouts:
                assert feed(ActionTimeout(turn=r.turn, at=at)).accepted
                continue
            action = rng.choice(opts["actions"])
            card = rng.choice(opts["cards"]) if opts.get("cards") else None
            step = feed(PlayerAction(player_id=r.hand.to_act, action=action, card=card, at=at))
            assert step.accepted, (action, card, opts, step.effects)
        elif r.plan[r.next_index].confirm:
            assert feed(DealerConfirm(step=r.plan[r.next_index].name, at=at)).accepted
        else:
            pos = r.plan[r.next_index]
            deck = decks.setdefault(pos.deck, rng.sample(list(HWATU_48), 48))
            if scripted and pos.name in scripted:
                code = scripted[pos.name]
            else:  # the top card, keeping the scripted ones of the first deal for their positions
                code = next(c for c in reversed(deck) if pos.deck or c not in (scripted or {}).values())
            deck.remove(code)
            if rng.random() < 0.05:
                feed(ReadFailed(reader="R", reason="noread", at=at))
            assert feed(ScanRead(reader="R", code=code, at=at)).accepted
    return t, fed, journaled, effects


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_a_matgo_game_ends_with_one_exact_result_and_replays_from_its_journal(seed):
    t, fed, journaled, _ = play(seed)
    r = t.current
    assert r.phase == Phase.RESULT
    res = r.result
    d = res.details
    points, money = d["payment_points"], Decimal(d["money"])
    assert money == Decimal(points) * Decimal("1.00")
    back = settle_bet("cover", COVER, res, "alice").returned
    expected = {"PLAYER": COVER + money, "AI": COVER - min(money, COVER), None: COVER}[res.winner]
    assert back == expected and back >= 0
    replayed = Table(t.rules)
    for ev in journaled:
        assert replayed.handle(ev).accepted
    assert replayed.current.result == res


def test_the_first_player_follows_the_rounds_secret_draw_and_replays_with_it():
    """matgo.md §2.1 "chosen at random": one public round id, and either seat may move first,
    depending only on the round's draw; the journal carries the draw, so a replay agrees."""
    firsts = {}
    for k in range(16):
        draw = random.Random(k).randbytes(32).hex()
        t, _, journaled, _ = play(k, draw=draw)
        first = t.current.hand.seat_of["F"]
        assert first == {"PLAYER": "alice", "AI": AI_PLAYER}[first_player(draw, 7)]
        assert t.current.result.details["seats"]["F"] == first
        assert [m["player"] for m in t.current.result.details["moves"]][:1] in ([first], [])
        replayed = Table(t.rules)
        for ev in journaled:
            assert replayed.handle(ev).accepted
        assert replayed.current.hand.seat_of == t.current.hand.seat_of
        assert replayed.current.result == t.current.result
        # the round number plays no part: the same draw in another round, the same first player
        other, _, _, _ = play(k + 1, draw=draw, round_id="MG1-000123")
        assert other.current.hand.seat_of["F"] == first
        firsts[draw] = first
    assert set(firsts.values()) == {"alice", AI_PLAYER}


def test_a_redeal_keeps_the_drawn_first_player():
    """§2.3: a redeal is dealt again with the same F (no new draw)."""
    quad = {"L1": "01G", "L2": "01J1", "L3": "01J2", "L4": "01R"}
    seen = set()
    for k in range(8):
        draw = random.Random(50 + k).randbytes(32).hex()
        t, _, _, effects = play(k, draw=draw, scripted=quad)
        assert any(isinstance(e, RoundEvent) and e.event == "redeal" for e in effects)
        first = {"PLAYER": "alice", "AI": AI_PLAYER}[first_player(draw, 7)]
        assert t.current.hand.deals >= 2 and t.current.hand.seat_of["F"] == first
        redealt_f = [p for p in t.current.plan if p.name.startswith("R1.F.")]  # F's hand of the redeal
        assert redealt_f and all(p.seat == (1 if first == "alice" else 2) for p in redealt_f)
        seen.add(first)
    assert seen == {"alice", AI_PLAYER}


def test_a_round_journaled_before_draws_keeps_the_first_player_it_was_played_with():
    """An OpenRound journaled before draws existed (no ``draw`` key in its body) replays
    exactly as it was played: the first player from the old derivation of the hand number."""
    for seq in range(1, 21):
        digest = hashlib.sha256(f"matgo-first:{seq}".encode()).digest()
        old = "alice" if digest[0] % 2 == 0 else AI_PLAYER
        t, _, journaled, _ = play(seq, draw=None, round_id=f"MG1-{seq:06d}")
        assert t.current.hand.seat_of["F"] == old
        body = json.loads(journaled[0].model_dump_json())
        del body["draw"]  # the body an older service wrote
        replayed = Table(t.rules)
        for ev in [EVENT_ADAPTER.validate_json(json.dumps(body))] + journaled[1:]:
            assert replayed.handle(ev).accepted
        assert replayed.current.hand.seat_of["F"] == old and replayed.current.result == t.current.result


def test_the_ai_hand_is_never_published_and_the_player_gets_only_its_own_cards():
    t, _, _, effects = play(3)
    r = t.current
    seat_of = r.hand.seat_of
    ai_letter = next(s for s, p in seat_of.items() if p == AI_PLAYER)
    ai_cards = {code for name, code in r.cards.items() if name.split(".")[-2:-1] == [ai_letter] or
                name.startswith(f"{ai_letter}.")}
    assert len(ai_cards) == 10
    before_end = []
    for e in effects:
        if isinstance(e, RoundEvent) and e.event in ("cards_revealed", "round_result"):
            break
        before_end.append(e)
    private = [e for e in before_end if isinstance(e, PlayerMessage)]
    assert {m.player_id for m in private} <= {"alice", AI_PLAYER}
    alice_cards = {m.data["card"] for m in private if m.player_id == "alice" and m.kind == "hole_card"}
    assert len(alice_cards) == 10 and not alice_cards & ai_cards
    registered = [e for e in before_end if isinstance(e, RoundEvent) and e.event == "card_registered"]
    assert not {e.data.get("card") for e in registered} & ai_cards - set(r.hand.engine.seen)


def test_a_link_failure_before_the_first_card_cancels_and_after_it_the_game_goes_on():
    t = table()
    t.handle(OpenRound(round_id="MG1-000001", at=1))
    t.handle(PlaceBet(bet_id="b", player_id="alice", bet_type="cover", stake="100.00", seat=1, at=2))
    t.handle(CloseBetting(at=3))
    t.handle(LinkDown(link="scanner:R", at=4))
    assert t.current.phase == Phase.CANCELLED and t.current.result.refund_all


def test_a_cover_below_the_minimum_and_the_ai_id_are_refused():
    t = table()
    t.handle(OpenRound(round_id="MG1-000001", at=1))
    low = t.handle(PlaceBet(bet_id="b", player_id="alice", bet_type="cover", stake="49.99", seat=1, at=2))
    assert not low.accepted and "at least 50.00" in low.rejection.reason
    ai = t.handle(PlaceBet(bet_id="c", player_id=AI_PLAYER, bet_type="cover", stake="100", seat=1, at=2))
    assert not ai.accepted


def test_illegal_moves_are_refused_and_change_nothing():
    t = table(first_player="PLAYER")
    t.handle(OpenRound(round_id="MG1-000001", at=1))
    t.handle(PlaceBet(bet_id="b", player_id="alice", bet_type="cover", stake="100.00", seat=1, at=2))
    t.handle(CloseBetting(at=3))
    r = t.current
    deck = sorted(HWATU_48)
    random.Random(5).shuffle(deck)
    while r.phase != Phase.ACTION:
        assert t.handle(ScanRead(reader="R", code=deck.pop(), at=5)).accepted
    assert r.hand.to_act == "alice"
    hand = r.hand.engine.hand(r.hand.letter["alice"])
    not_mine = next(c for c in HWATU_48 if c not in hand)
    # a refusal never tells whether a card is hidden: a card the player named is "the card named"
    named = "the card named is not in F's hand"
    before = (r.turn, r.hand.engine.phase, list(hand))
    for action, card, why in [("PLAY", not_mine, named), ("CHOOSE", hand[0], ""), ("GO", None, ""),
                              ("PLAY", None, "needs"), ("RAISE", None, "not a Matgo move")]:
        step = t.handle(PlayerAction(player_id="alice", action=action, card=card, at=6))
        assert not step.accepted and why in step.rejection.reason
    step = t.handle(PlayerAction(player_id=AI_PLAYER, action="PLAY", card=hand[0], at=6))
    assert not step.accepted and "not house-ai's move" in step.rejection.reason
    assert (r.turn, r.hand.engine.phase, list(r.hand.engine.hand(r.hand.letter["alice"]))) == before


def test_an_action_for_a_turn_that_is_over_is_refused_not_applied_later():
    """The AI thinks at the edge; a move computed for a turn the timer already played must
    never land on a later turn (the service sends the AI's turn number with its move)."""
    t = table(first_player="AI")
    t.handle(OpenRound(round_id="MG1-000001", at=1))
    t.handle(PlaceBet(bet_id="b", player_id="alice", bet_type="cover", stake="100.00", seat=1, at=2))
    t.handle(CloseBetting(at=3))
    r = t.current
    deck = sorted(HWATU_48)
    random.Random(9).shuffle(deck)
    while r.phase != Phase.ACTION:
        assert t.handle(ScanRead(reader="R", code=deck.pop(), at=5)).accepted
    assert r.hand.to_act == AI_PLAYER
    stale_turn = r.turn
    stale_card = r.hand.turn_options()["cards"][-1]
    assert t.handle(ActionTimeout(turn=stale_turn, at=6)).accepted  # the timer played the AI's default
    while r.hand.to_act != AI_PLAYER and r.phase in (Phase.DEALING, Phase.ACTION):
        if r.phase == Phase.ACTION:
            o = r.hand.turn_options()
            t.handle(PlayerAction(player_id=r.hand.to_act, action=o["actions"][0],
                                  card=(o.get("cards") or [None])[0], at=7))
        else:
            t.handle(ScanRead(reader="R", code=deck.pop(), at=7))
    # the stale move would be legal now (the AI still holds that card): only its turn number stops it
    assert r.hand.to_act == AI_PLAYER and stale_card in r.hand.turn_options()["cards"]
    before = (r.turn, r.hand.engine.phase)
    late = t.handle(PlayerAction(player_id=AI_PLAYER, action="PLAY", card=stale_card, turn=stale_turn, at=8))
    assert not late.accepted and "which is over" in late.rejection.reason
    assert (r.turn, r.hand.engine.phase) == before
    assert t.handle(PlayerAction(player_id=AI_PLAYER, action="PLAY", card=stale_card, turn=r.turn, at=9)).accepted


def test_a_duplicate_of_a_face_down_card_does_not_name_it_in_public():
    t = table(first_player="PLAYER")
    t.handle(OpenRound(round_id="MG1-000001", at=1))
    t.handle(PlaceBet(bet_id="b", player_id="alice", bet_type="cover", stake="100.00", seat=1, at=2))
    t.handle(CloseBetting(at=3))
    assert t.handle(ScanRead(reader="R", code="05A", at=4)).accepted  # F.1, face down
    step = t.handle(ScanRead(reader="R", code="05A", at=5))
    event = next(e for e in step.effects if isinstance(e, RoundEvent) and e.event == "scan_rejected")
    assert event.data["reason"] == "duplicate_card" and "05A" not in str(event.data)
