"""Matgo players (``dealer.house.matgo_ai``) and the arena (``dealer matgo-arena``).

No timing assertions: the search runs with a fixed number of sampled deals (``playouts``)
wherever its decision is compared, which also makes it deterministic.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from collections import Counter

import pytest

from dealer.core.cards import HWATU_48
from dealer.cli.main import main
from dealer.games.matgo_engine import MatgoGame
from dealer.games.matgo_moves import Decide, Flip, Phase, Play, other
from dealer.house.matgo_ai import DECISION_PHASES, GreedyPlayer, PolicyPlayer, RandomPlayer, SearchPlayer, make_player
from tools.matgo_arena import KINDS, OraclePlayer, play_deal, run_arena, wilson

PLAYER_KEYS = {
    "name", "wins", "win_rate", "win_rate_ci95", "wins_as_first", "decisive_as_first", "points_won",
    "points_lost", "points_won_per_deal", "net_points_per_deal", "moves", "move_ms_mean", "move_ms_p99",
    "move_ms_max",
}
TOP_KEYS = {"config", "deals", "decisive", "draws", "draw_rate", "redeals", "kinds", "players", "wall_seconds"}


def _new_game(rng: random.Random) -> tuple[MatgoGame, list[str]]:
    while True:
        deck = list(HWATU_48)
        rng.shuffle(deck)
        g = MatgoGame.start(hands={"F": deck[:10], "O": deck[10:20]}, layout=deck[20:28])
        if g.result is None:
            return g, deck[28:]


# --- hidden information -----------------------------------------------------------------------


def _twin_games(seed: int) -> tuple[MatgoGame, MatgoGame, list[str], list[str]]:
    """Two deals identical for F (hand, layout) whose O hands differ in 5 of 10 cards: O will
    play the 5 shared cards (``plays``); ``flips`` = stock cards in neither O hand."""
    rng = random.Random(seed)
    while True:
        deck = list(HWATU_48)
        rng.shuffle(deck)
        f_hand, layout, shared = deck[:10], deck[10:18], deck[18:23]
        x1, x2, rest = deck[23:28], deck[28:33], deck[33:]
        g1 = MatgoGame.start(hands={"F": f_hand, "O": shared + x1}, layout=layout)
        g2 = MatgoGame.start(hands={"F": f_hand, "O": shared + x2}, layout=layout)
        if g1.result is None and g2.result is None:
            return g1, g2, shared, rest


@pytest.mark.parametrize("seed", range(6))
def test_search_never_reads_hidden_information(seed: int) -> None:
    """Two games that differ only in O's hand and the stock: F's search decides identically
    (same rng seed) at every decision of the first eleven turns, CHOOSE and DECIDE included."""
    g1, g2, plays, flips = _twin_games(seed)
    assert g1.hands["O"] != g2.hands["O"]
    search = SearchPlayer(playouts=6)
    o_rng = random.Random(seed + 100)
    compared: Counter[str] = Counter()
    fi = 0
    while g1.result is None and g1.turn <= 11:
        assert g2.result is None and g1.phase == g2.phase and g1.to_move == g2.to_move
        assert g1.view("F") == g2.view("F")  # same knowledge for F...
        assert g1.hands["O"] != g2.hands["O"]  # ...different hidden cards
        if g1.phase == Phase.FLIP:
            move = Flip(flips[fi])
            fi += 1
        elif g1.to_move == "F":
            move = search.choose(g1.clone(), "F", random.Random(seed * 1000 + g1.turn))
            again = search.choose(g2.clone(), "F", random.Random(seed * 1000 + g1.turn))
            assert move == again, (g1.phase, g1.turn)
            compared[str(g1.phase)] += 1
        elif g1.phase == Phase.PLAY:
            options = [c for c in plays if c in g1.hands["O"]]
            move = Play(o_rng.choice(options))
        else:
            move = o_rng.choice(g1.legal())
        g1.apply(move)
        g2.apply(move)
    assert compared["PLAY"] >= 5


def test_search_decisions_do_not_depend_on_the_hidden_cards_mid_game() -> None:
    """Positions built with ``from_position``: the same public state with O's hand swapped
    with stock cards, F's search picks the same move (also at a CHOOSE)."""
    layout = ["01G", "01J1", "05R", "07A"]
    captured = {"F": ["02A", "02R", "04A", "04R", "03G", "03R", "08G", "08A", "06J1", "06J2"],
                "O": ["10A", "10J1", "11G", "11J1", "09J1", "09J2", "12R", "12JD", "07R", "07J2"]}
    f_hand = ["01R", "05A", "07J1", "03J1", "06A", "12A"]
    placed = set(layout) | set(f_hand) | {c for v in captured.values() for c in v}
    rest = [c for c in HWATU_48 if c not in placed]
    o1, o2 = rest[:6], rest[6:12]
    g1 = MatgoGame.from_position(hands={"F": f_hand, "O": o1}, layout=layout, captured=captured, turn=9)
    g2 = MatgoGame.from_position(hands={"F": f_hand, "O": o2}, layout=layout, captured=captured, turn=9)
    assert g1.view("F") == g2.view("F") and g1.hands["O"] != g2.hands["O"]
    s = SearchPlayer(playouts=10)
    assert s.choose(g1, "F", random.Random(7)) == s.choose(g2, "F", random.Random(7))
    for g in (g1, g2):  # CHOOSE_A: 01R meets 01G and 01J1
        g.apply(Play("01R"))
        assert g.phase == Phase.CHOOSE_A
    assert s.choose(g1, "F", random.Random(8)) == s.choose(g2, "F", random.Random(8))


# --- legality -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_every_player_returns_a_legal_move_in_every_phase() -> None:
    players = [RandomPlayer(), GreedyPlayer(), PolicyPlayer(), SearchPlayer(playouts=2)]
    rng = random.Random(2024)
    phases: Counter[str] = Counter()
    for _deal in range(40):
        g, stock = _new_game(rng)
        si = 0
        while g.result is None:
            if g.phase == Phase.FLIP:
                g.apply(Flip(stock[si]))
                si += 1
                continue
            assert g.phase in DECISION_PHASES
            legal = g.legal()
            phases[str(g.phase)] += 1
            seat = g.to_move
            for p in players:
                before = g.state_key()
                move = p.choose(g, seat, random.Random(rng.random()))
                assert move in legal and g.verify(move) is None, (p.name, g.phase, move)
                assert g.state_key() == before  # a player never changes the game it is given
            g.apply(rng.choice(legal))  # random driver: visits many kinds of states
    assert set(phases) == {"PLAY", "CHOOSE_A", "CHOOSE_B", "DECIDE"}, phases


def test_players_refuse_flip_and_the_wrong_seat() -> None:
    g, stock = _new_game(random.Random(3))
    g.apply(Play(g.hands["F"][0]))
    while g.phase == Phase.CHOOSE_A:
        g.apply(g.legal()[0])
    assert g.phase == Phase.FLIP
    for p in (RandomPlayer(), GreedyPlayer(), PolicyPlayer(), SearchPlayer(playouts=1)):
        with pytest.raises(ValueError):
            p.choose(g, "F", random.Random(1))
    g2, _ = _new_game(random.Random(4))
    for p in (RandomPlayer(), GreedyPlayer(), PolicyPlayer(), SearchPlayer(playouts=1)):
        with pytest.raises(ValueError):
            p.choose(g2, other(g2.to_move), random.Random(1))


def test_search_with_a_time_budget_returns_a_legal_move() -> None:
    g, _ = _new_game(random.Random(5))
    move = SearchPlayer(budget_ms=5).choose(g, "F", random.Random(1))
    assert g.verify(move) is None


def test_search_is_deterministic_with_fixed_playouts() -> None:
    g, _ = _new_game(random.Random(6))
    s = SearchPlayer(playouts=15)
    assert s.choose(g, "F", random.Random(11)) == s.choose(g.clone(), "F", random.Random(11))


def test_make_player() -> None:
    assert isinstance(make_player("search", 50, 3), SearchPlayer)
    assert isinstance(make_player("greedy"), GreedyPlayer)
    assert isinstance(make_player("random"), RandomPlayer)
    assert isinstance(make_player("policy"), PolicyPlayer)
    with pytest.raises(ValueError):  # the yardstick is the arena's alone: no table can field it
        make_player("oracle")


def test_policy_player_is_the_search_prior() -> None:
    """The policy player plays the move the search keeps unless a playout result beats it
    clearly: with z = infinity the search never overrides it."""
    rng = random.Random(12)
    never_override = SearchPlayer(playouts=3, z=float("inf"))
    for _ in range(10):
        g, _stock = _new_game(rng)
        assert PolicyPlayer().choose(g, "F", random.Random(1)) == never_override.choose(g, "F", random.Random(2))


def test_oracle_plays_out_the_true_deal() -> None:
    """The yardstick's determinization is the real game: the opponent's true hand and the
    true stock order; the shipped search samples instead."""
    g, stock = _new_game(random.Random(13))
    oracle = OraclePlayer(playouts=2)
    oracle.stock = stock
    view = g.view("F")
    unseen = sorted(view.unseen)
    base, order = oracle._sample(g, "F", [HWATU_48.index(c) for c in unseen], view.opponent_hand_size,
                                 random.Random(1))
    assert base.hands == g.hands and [HWATU_48[i] for i in order] == stock
    sampled, s_order = SearchPlayer._sample(g, "F", [HWATU_48.index(c) for c in unseen],
                                            view.opponent_hand_size, random.Random(1))
    assert sampled.hands["F"] == g.hands["F"] and sorted(sampled.hands["O"] + [HWATU_48[i] for i in s_order]) == unseen


def test_arena_fields_the_oracle_and_the_policy() -> None:
    s = run_arena("oracle", "policy", deals=4, seed=5, playouts=2, jobs=1)
    assert s["config"]["a"] == "oracle" and s["decisive"] + s["draws"] == 4
    with pytest.raises(ValueError):
        run_arena("cheat", "greedy", deals=2, seed=1)


# --- greedy and search behaviour --------------------------------------------------------------


def _position(f_hand: list[str], layout: list[str], captured_f: tuple[str, ...] = (),
              captured_o: tuple[str, ...] = (), turn: int = 1) -> MatgoGame:
    """F is first: F has played ``turn // 2`` cards, O ``(turn - 1) // 2``; O's hand is
    filled from the cards not placed."""
    assert len(f_hand) == 10 - turn // 2
    placed = set(f_hand) | set(layout) | set(captured_f) | set(captured_o)
    rest = [c for c in HWATU_48 if c not in placed]
    return MatgoGame.from_position(hands={"F": f_hand, "O": rest[: 10 - (turn - 1) // 2]}, layout=layout,
                                   captured={"F": list(captured_f), "O": list(captured_o)}, turn=turn)


def test_greedy_takes_the_most_valuable_capture() -> None:
    layout = ["08G", "01J2", "12A", "12R", "05A", "05R", "11JD", "09R"]
    hand = ["01J1", "08A", "10A", "02J1", "03J1", "04J1", "06J1", "07J1", "09J1", "10J1"]
    # 01J1 takes 01J2: +2 junk units; 08A takes 08G: no points yet; 09J1 takes 09R: +1 unit
    assert GreedyPlayer().choose(_position(hand, layout), "F", random.Random(0)) == Play("01J1")
    # with two brights already taken, 08G makes three brights: +3 points
    g = _position(hand[:9], layout, captured_f=("01G", "03G"), captured_o=("11G", "11J1"), turn=3)
    assert GreedyPlayer().choose(g, "F", random.Random(0)) == Play("08A")
    g.apply(Play("08A"))
    assert g.phase == Phase.FLIP


def test_greedy_and_search_stop_when_going_is_hopeless() -> None:
    """Turn 19, F at 8 points: a Go lets O play the last turn with a large pile (O stops and
    wins) or ends in Nagari; Stop pays now. Both players stop."""
    f_cap = ["01G", "03G", "08G", "02A", "04A", "08A"]
    f_hand, o_hand, stock = ["12A"], ["12R"], ["11J1", "11J2"]
    layout = ["05A", "05R", "06A", "06R"]
    o_cap = [c for c in HWATU_48 if c not in set(f_cap + f_hand + o_hand + stock + layout)]
    g = MatgoGame.from_position(hands={"F": f_hand, "O": o_hand}, layout=layout,
                                captured={"F": f_cap, "O": o_cap}, turn=19)
    g.apply(Play("12A"))
    g.apply(Flip("11J1"))
    assert g.phase == Phase.DECIDE and g.to_move == "F"
    assert GreedyPlayer().choose(g, "F", random.Random(0)) == Decide(False)
    assert SearchPlayer(playouts=20).choose(g, "F", random.Random(0)) == Decide(False)


@pytest.mark.slow
def test_search_beats_random_on_a_few_deals() -> None:
    """Not a benchmark (see ``dealer matgo-arena``): a smoke check that the search plays sensibly."""
    summary = run_arena("search", "random", deals=12, seed=5, playouts=8, jobs=1)
    assert summary["players"]["a"]["net_points_per_deal"] > 0


# --- arena ------------------------------------------------------------------------------------


def test_wilson_interval() -> None:
    assert wilson(0, 0) == (0.0, 1.0)
    lo, hi = wilson(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-4) and hi == pytest.approx(0.7634, abs=1e-4)
    lo, hi = wilson(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-4)
    lo, hi = wilson(10, 10)
    assert hi == pytest.approx(1.0) and lo == pytest.approx(0.7225, abs=1e-4)
    lo, hi = wilson(600, 1000)
    assert lo == pytest.approx(0.5693, abs=1e-4) and hi == pytest.approx(0.6299, abs=1e-4)
    with pytest.raises(ValueError):
        wilson(3, 2)


def test_play_deal_is_seeded_and_alternates_seats() -> None:
    r0 = play_deal(1, 0, "greedy", "random")
    r1 = play_deal(1, 1, "greedy", "random")
    assert (r0.a_seat, r1.a_seat) == ("F", "O")
    again = play_deal(1, 0, "greedy", "random")
    assert replace(again, move_ms={}) == replace(r0, move_ms={})  # move times are measurements, not results
    assert r0.kind in KINDS and (r0.winner is None) == (r0.kind == "NAGARI")


@pytest.mark.integration  # the arena's worker processes
def test_arena_summary_has_stable_keys_and_is_deterministic() -> None:
    s1 = run_arena("search", "greedy", deals=4, seed=3, playouts=3, jobs=1)
    assert TOP_KEYS <= set(s1)
    assert set(s1["players"]) == {"a", "b"}
    for side in ("a", "b"):
        assert set(s1["players"][side]) == PLAYER_KEYS
    assert set(s1["kinds"]) == set(KINDS)
    assert s1["deals"] == 4 and s1["decisive"] + s1["draws"] == 4
    assert s1["players"]["a"]["wins"] + s1["players"]["b"]["wins"] == s1["decisive"]
    s2 = run_arena("search", "greedy", deals=4, seed=3, playouts=3, jobs=2)  # worker processes
    strip = ("wall_seconds",)
    timing = ("move_ms_mean", "move_ms_p99", "move_ms_max")

    def norm(s: dict) -> dict:
        out = {k: v for k, v in s.items() if k not in strip}
        out["config"] = {k: v for k, v in s["config"].items() if k != "jobs"}
        out["players"] = {side: {k: v for k, v in p.items() if k not in timing} for side, p in s["players"].items()}
        return out

    assert norm(s1) == norm(s2)


def test_cli_matgo_arena_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["matgo-arena", "--a", "greedy", "--b", "random", "--deals", "6", "--seed", "2", "--jobs", "1",
               "--json", "--quiet"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert TOP_KEYS <= set(out)
    assert out["config"]["a"] == "greedy" and out["config"]["b"] == "random"
    assert set(out["players"]["a"]) == PLAYER_KEYS
    rc = main(["matgo-arena", "--a", "greedy", "--b", "random", "--deals", "2", "--jobs", "1", "--quiet"])
    assert rc == 0
    assert "win rate" in capsys.readouterr().out
