"""House players out of the event loop (:mod:`dealer.edge.house`).

The Matgo hand is a house seat whose request carries its own engine; the registry finds the
house player by request type; the same request gives the same move in a thread and in a worker
process; a worker killed in the middle of a move is replaced and the move still comes; and at a
real table (real service, Mosquitto, PTY shoe) the AI's moves are journaled player actions that
replay to the published result, in both modes, with a worker killed before the AI's turns.
Nothing here asserts on time.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import random
import signal
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from dealer.core.cards import HWATU_48
from dealer.core.events import CloseBetting, OpenRound, PlaceBet, PlayerAction, ScanRead
from dealer.core.round import Phase, Round
from dealer.edge.house import HouseRunner
from dealer.core.game_contract import HouseSeat, has_house_seats
from dealer.games.matgo import AI_PLAYER, MatgoRequest
from dealer.house.matgo import MatgoHousePlayer
from dealer.house.player import HouseMove
from dealer.house.registry import decide, player_for, register
from tests.conftest import Broker, wait_until
from dealer.edge.config import Settings
from tests.harness import served_table
from tests.harness_matgo import (AI, ALICE, READER, Table, core_table, deck, journal_agrees, matgo_settings,
                                 money_exact, replayed, secrets_kept, stopper)

#: A fixed search size: the move is a function of the request alone (the table's clock budget
#: is not).
PLAYOUTS = 24


def ai_turns(seed: int, first: str = "AI", n: int = 4) -> tuple[Round, list[tuple[MatgoRequest, dict[str, Any]]]]:
    """The house AI's first ``n`` turns of a seeded game through the core (the other seat plays
    random legal moves), each with the request the hand gave for it and the turn's options;
    and the round, left at the last of them (not played)."""
    rng = random.Random(seed)
    t = core_table(first_player=first)
    t.handle(OpenRound(round_id="MG1-000001", at=1, draw=rng.randbytes(32).hex()))
    assert t.handle(PlaceBet(bet_id="b", player_id=ALICE, bet_type="cover", stake="100.00", seat=1, at=2)).accepted
    t.handle(CloseBetting(at=3))
    r = t.current
    cards = list(HWATU_48)
    rng.shuffle(cards)
    out: list[tuple[MatgoRequest, dict[str, Any]]] = []
    while r.phase in (Phase.BETTING_CLOSED, Phase.DEALING, Phase.ACTION):
        if r.phase != Phase.ACTION:
            assert t.handle(ScanRead(reader="R", code=cards.pop(), at=5)).accepted
            continue
        if r.hand.to_act == AI_PLAYER:
            request = replace(r.hand.house_request(AI_PLAYER, r.turn, seed * 100 + r.turn), playouts=PLAYOUTS)
            out.append((request, r.hand.turn_options()))
            if len(out) == n:
                return r, out
            move, player = decide(request), AI_PLAYER
        else:
            o = r.hand.turn_options()
            move = HouseMove(rng.choice(o["actions"]), rng.choice(o["cards"]) if o.get("cards") else None)
            player = ALICE
        step = t.handle(PlayerAction(player_id=player, action=move.action, card=move.card, turn=r.turn, at=6))
        assert step.accepted, (move, step.rejection)
    raise AssertionError(f"the game ended after {len(out)} of the AI's turns")


# -- the capability, the request and the registry --------------------------------------------------


def test_the_matgo_hand_is_a_house_seat_whose_request_is_its_own_picklable_copy():
    r, _ = ai_turns(1, n=1)
    hand = r.hand
    assert isinstance(hand, HouseSeat) and hand.house_players() == frozenset({AI_PLAYER})
    request = hand.house_request(AI_PLAYER, r.turn, 42)
    assert (request.seat, request.budget_ms, request.seed, request.playouts) == (hand.letter[AI_PLAYER], 100, 42, None)
    assert request.engine is not hand.engine and request.engine.legal() == hand.engine.legal()
    back = pickle.loads(pickle.dumps(request))
    assert back.engine.legal() == hand.engine.legal() and back.engine.view(request.seat) == hand.engine.view(request.seat)
    # the request is a copy: thinking on it (or playing on it) leaves the table's game alone
    before = hand.engine.view(request.seat)
    request.engine.apply(request.engine.legal()[0])
    assert hand.engine.view(request.seat) == before and hand.to_act == AI_PLAYER
    with pytest.raises(ValueError, match="alice is not a house player"):
        hand.house_request(ALICE, r.turn, 42)


def test_a_game_says_its_hands_have_house_seats_and_a_hand_without_them_is_not_one():
    from dealer.games import game_class
    from dealer.core.game_contract import PeerHand

    assert has_house_seats(game_class("matgo")) and has_house_seats(core_table().rules.game)
    assert not any(has_house_seats(game_class(g)) for g in ("teen-patti", "sevenluck", "stud", "seotda"))
    assert not isinstance(object(), HouseSeat) and not issubclass(PeerHand, HouseSeat)


def test_the_registry_finds_the_house_player_by_the_request_type():
    _, [(request, _)] = ai_turns(2, n=1)
    assert isinstance(player_for(request), MatgoHousePlayer)

    @dataclass(frozen=True)
    class Unknown:
        seed: int

    with pytest.raises(LookupError, match="no house player decides a .*Unknown .*registered: .*MatgoRequest"):
        decide(Unknown(1))


def test_a_house_move_is_legal_and_a_function_of_the_request():
    _, turns = ai_turns(3, first="PLAYER")
    for request, options in turns:
        move = decide(request)
        assert move == decide(pickle.loads(pickle.dumps(request))) == decide(request)
        assert move.action in options["actions"] and (move.card is None) == ("cards" not in options)
        assert move.card is None or move.card in options["cards"]
    # another seed may choose another move, but always a legal one of the same turn
    request, options = turns[-1]
    for seed in range(3):
        move = decide(replace(request, seed=seed))
        assert move.action in options["actions"] and (move.card is None or move.card in options["cards"])


# -- thread and process give the same moves -----------------------------------------------------


@pytest.mark.integration  # worker processes
async def test_the_moves_are_the_same_in_a_thread_and_in_a_worker_process():
    requests = [req for seed in (4, 5) for first in ("AI", "PLAYER") for req, _ in ai_turns(seed, first, n=3)[1]]
    threaded = HouseRunner(lambda *a: None, lambda: 0, mode="thread")
    pooled = HouseRunner(lambda *a: None, lambda: 0, mode="process", workers=1)
    try:
        by_thread = [await threaded.decide(r) for r in requests]
        by_process = [await pooled.decide(r) for r in requests]
        worker = await pooled.worker_pid()
    finally:
        await threaded.close()
        await pooled.close()
    assert by_thread == by_process == [decide(r) for r in requests]
    assert len({(m.action, m.card) for m in by_process}) > 1  # not one answer to everything
    assert worker != os.getpid()  # the moves were decided in another process


# -- a worker killed in the middle of a move ------------------------------------------------------------


@dataclass(frozen=True)
class StuckOnce:
    """A request whose first worker hangs (each worker writes its pid to ``path`` first)."""

    path: str


class StuckOncePlayer:
    def decide(self, request: StuckOnce) -> HouseMove:
        path = Path(request.path)
        first = not path.exists()
        with path.open("a") as f:
            f.write(f"{os.getpid()}\n")
        if first:
            signal.pause()  # until killed
        return HouseMove("GO")


register(StuckOnce, StuckOncePlayer())  # at import: the worker imports this module to unpickle a StuckOnce


@pytest.mark.integration  # worker processes
async def test_a_worker_killed_while_it_decides_is_replaced_and_the_move_still_comes(tmp_path: Path):
    runner = HouseRunner(lambda *a: None, lambda: 0, mode="process", workers=1)
    pids = tmp_path / "pids"
    try:
        thinking = asyncio.create_task(runner.decide(StuckOnce(str(pids))))
        first = int(await wait_until(lambda: pids.exists() and pids.read_text().strip(), what="the worker started"))
        assert first != os.getpid() and not thinking.done()
        os.kill(first, signal.SIGKILL)
        assert await asyncio.wait_for(thinking, 60) == HouseMove("GO")
        second = [int(p) for p in pids.read_text().split()]
        assert second[0] == first and len(second) == 2 and second[1] != first and runner.replaced == 1
        assert await runner.worker_pid() == second[1]  # the new pool goes on serving
    finally:
        await runner.close()


@pytest.mark.integration  # worker processes
async def test_a_stopped_runner_takes_no_more_work():
    runner = HouseRunner(lambda *a: None, lambda: 0, mode="process", workers=1)
    await runner.worker_pid()
    await runner.close()
    with pytest.raises(RuntimeError, match="stopped"):
        await runner.decide(StuckOnce("/nonexistent"))


def test_the_mode_is_process_or_thread():
    with pytest.raises(ValueError, match="'process' pool or a 'thread', not 'fork'"):
        HouseRunner(lambda *a: None, lambda: 0, mode="fork")  # type: ignore[arg-type]


# -- at a real table ------------------------------------------------------------------------------------


@pytest.fixture
async def house_table(broker: Broker, tmp_path: Path, pty_dir: Path, request: pytest.FixtureRequest):
    mode = request.param

    def settings(shoe_path: str) -> Settings:
        s = matgo_settings(tmp_path, broker.url, shoe_path, options={"ai_budget_ms": 20})
        s.service = s.service.model_copy(update={"house_players": mode, "house_workers": 1})
        return s

    async with served_table(Table, broker.url, pty_dir, READER, settings) as t:
        yield t


@pytest.mark.timeout(240)
@pytest.mark.parametrize("house_table", ["process", "thread"], indirect=True)
async def test_the_ai_moves_at_a_table_are_journaled_player_actions_whatever_the_mode(house_table: Table):
    """The AI's moves are ``player_action`` events from ``house-ai`` in the journal, replaying it
    rebuilds the published result, and nothing is published for the AI. In process mode the
    worker (started when the AI got its cards) is killed with SIGKILL before the AI's first
    turn: the pool is replaced and every AI turn still gets the AI's own move, not the timer's."""
    t = house_table
    runner = t.service.house
    assert runner.mode == t.settings.service.house_players
    cards, stock = deck(seed=3)
    await t.sit("100.00")
    await t.deal(cards)
    if runner.mode == "process":
        worker = await runner.worker_pid()
        assert worker != os.getpid()
        os.kill(worker, signal.SIGKILL)
    res = await t.play_out(stock, stopper)
    acted = t.acted()
    ai_moves = [by for p, _, _, by in acted if p == AI]
    assert ai_moves and set(ai_moves) == {"player"}, acted  # every AI move came from the AI, none from its timer
    if runner.mode == "process":
        assert runner.replaced == 1 and await runner.worker_pid() != worker
    replayed(res, t.settings)
    secrets_kept(t.rec, res, dict(cards))
    journal_agrees(t.settings, res)
    money_exact(res, Decimal("100.00"))


# -- the benchmark runs ------------------------------------------------------------------------------


@pytest.mark.integration  # worker processes
@pytest.mark.timeout(180)
async def test_the_house_benchmark_reports_each_mode():
    """``dealer bench house`` in small: every mode measured, the AI moved in both of its modes
    (the figures themselves are not asserted: they depend on the machine)."""
    from tools.bench_house import MODES, run_house_bench

    out = await run_house_bench(tables=2, seconds=0.5, rounds=1, budget_ms=20, workers=1, loop="asyncio", settle=0.5)
    assert out["bench"] == "house" and out["tables"] == 2 and out["house_player"]["process_workers"] == 1
    assert set(out["lateness_ms"]) == set(MODES) and all(out["lateness_ms"][m]["count"] > 0 for m in MODES)
    assert set(out["added_p99_ms"]) == {"thread", "process"} and all(n > 0 for n in out["ai_moves"].values())
    assert out["target_met"] is (out["added_p99_ms"]["process"] <= out["target_added_p99_ms"])


def test_every_house_player_id_is_reserved_at_the_ingress():
    """A hand's house players are ids the player platform may never act as (the ingress refuses
    them, dealer/edge/ingress.py): one declaration, dealer.core.game_contract.HOUSE_PLAYERS."""
    from dealer.edge import ingress
    from dealer.core.game_contract import HOUSE_PLAYERS

    r, _ = ai_turns(1, n=1)
    assert r.hand.house_players() <= HOUSE_PLAYERS
    assert ingress.HOUSE_PLAYERS is HOUSE_PLAYERS
