"""Matgo rules engine (`matgo.md`): turns, special captures, steals, scoring, Stop/Go,
settlement, setup checks, house options, illegal moves and random full deals."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dealer.core.cards import HWATU_48, CardError
from dealer.games.matgo_engine import MatgoGame, card_value, payment, score
from dealer.games.matgo_moves import Choose, Decide, Flip, LayoutStack, Phase, Play, other
from dealer.games.matgo_rules import STOCK_POSITIONS, MatgoRules, deal_positions, split_deal

S = str.split

# --- helpers ----------------------------------------------------------------------------------

#: Filler for captured piles that never scores (4 animals, 4 ribbons without a set, 2 brights).
HARMLESS = S("12R 12A 05A 06A 07A 10R 04R 12G 11G 09R")


def deal(f: str, o: str, layout: str, **kw: Any) -> MatgoGame:
    """``start`` with partial hands filled with unused cards (``avoid`` = cards to keep in the
    stock), at most two per month in a hand for the filled months (no accidental quad)."""
    fh, oh, lay = S(f), S(o), S(layout)
    used = set(fh) | set(oh) | set(lay) | set(S(kw.pop("avoid", "")))
    pool = [c for c in HWATU_48 if c not in used]
    for hand in (fh, oh):
        mine = {c[:2] for c in hand}
        while len(hand) < 10:
            c = next(c for c in pool if c[:2] not in mine and sum(h[:2] == c[:2] for h in hand) < 2)
            pool.remove(c)
            hand.append(c)
    return MatgoGame.start({"F": fh, "O": oh}, lay, **kw)


def pos(*, f: str = "", o: str = "", layout: str = "", piles: Sequence[tuple[str, str, str | None]] = (),
        f_cap: str = "", o_cap: str = "", turn: int = 1, first: str = "F", keep: str = "",
        extra_to: str | None = None, **kw: Any) -> MatgoGame:
    """``from_position`` with every unmentioned card placed somewhere: hands filled to their
    size, the stock holds ``keep`` (cards the test will flip) plus filler, and what is left goes
    to the captured pile of ``extra_to`` (default: the seat to move; ``"split"`` alternates),
    harmless cards first."""
    fh, oh, lay, fc, oc, kp = S(f), S(o), S(layout), S(f_cap), S(o_cap), S(keep)
    pile_cards = [c for cards, _, _ in piles for c in S(cards)]
    mentioned = fh + oh + lay + fc + oc + kp + pile_cards
    assert len(mentioned) == len(set(mentioned)), "scenario mentions a card twice"
    pool = [c for c in HWATU_48 if c not in mentioned]
    first_i = 0 if first == "F" else 1
    mover = "F" if (turn % 2 == 1) == (first == "F") else "O"
    sizes = {s: 10 - (turn - 1 + (1 if (s == "F") == (first_i == 0) else 0)) // 2 for s in "FO"}
    fill = (sizes["F"] - len(fh)) + (sizes["O"] - len(oh)) + (21 - turn - len(kp))
    n_extra = len(pool) - fill
    assert n_extra >= 0, f"scenario too full for turn {turn}"
    extra = [c for c in HARMLESS if c in pool][:n_extra]
    extra += [c for c in pool if c not in extra][: n_extra - len(extra)]
    pool = [c for c in pool if c not in extra]
    target = extra_to or mover
    for i, c in enumerate(extra):
        seat = target if target != "split" else "FO"[i % 2]
        (fc if seat == "F" else oc).append(c)
    for hand, s in ((fh, "F"), (oh, "O")):
        while len(hand) < sizes[s]:
            hand.append(pool.pop())
    return MatgoGame.from_position(
        hands={"F": fh, "O": oh}, layout=lay,
        piles=[(S(cards), origin, maker) for cards, origin, maker in piles],
        captured={"F": fc, "O": oc}, turn=turn, first=first, **kw)  # type: ignore[arg-type]


def kinds(events: list) -> list[str]:
    return [k for k, _ in events]


def event(events: list, kind: str) -> dict:
    found = [d for k, d in events if k == kind]
    assert len(found) == 1, f"expected one {kind!r} event in {events}"
    return found[0]


def run(g: MatgoGame, *moves: Any) -> list:
    out: list = []
    for m in moves:
        out += g.apply(m)
    return out


def check_conservation(g: MatgoGame) -> None:
    hands = g.hands
    parts = [hands["F"], hands["O"], g.layout_cards, g.pending, g.captured["F"], g.captured["O"],
             g.stock_candidates()]
    flat = [c for p in parts for c in p]
    assert len(flat) == 48 and set(flat) == set(HWATU_48), parts
    assert len(g.stock_candidates()) == g.stock_left
    assert g.seen == set(HWATU_48) - set(g.stock_candidates())


def walk_strings(obj: Any) -> set[str]:
    if isinstance(obj, str):
        return {obj}
    if isinstance(obj, dict):
        return set().union(*(walk_strings(k) | walk_strings(v) for k, v in obj.items())) if obj else set()
    if isinstance(obj, (list, tuple, set, frozenset)):
        return set().union(*(walk_strings(x) for x in obj)) if obj else set()
    return set()


# --- deal plan, rules, construction ---------------------------------------------------------


def test_deal_positions_default_5_5_4() -> None:
    plan = deal_positions(MatgoRules())
    assert len(plan) == 28
    assert plan[:5] == [(f"F.{i}", "DOWN") for i in range(1, 6)]
    assert plan[5:10] == [(f"O.{i}", "DOWN") for i in range(1, 6)]
    assert plan[10:14] == [(f"L{i}", "UP") for i in range(1, 5)]
    assert plan[14:19] == [(f"F.{i}", "DOWN") for i in range(6, 11)]
    assert plan[19:24] == [(f"O.{i}", "DOWN") for i in range(6, 11)]
    assert plan[24:] == [(f"L{i}", "UP") for i in range(5, 9)]
    assert deal_positions() == plan
    assert STOCK_POSITIONS == tuple(f"S{i}" for i in range(1, 21))


def test_deal_positions_round_robin() -> None:
    plan = deal_positions(MatgoRules(deal_pattern="ROUND_ROBIN"))
    assert [p for p, _ in plan[:4]] == ["F.1", "O.1", "F.2", "O.2"]
    assert plan[18:20] == [("F.10", "DOWN"), ("O.10", "DOWN")]
    assert plan[20:] == [(f"L{i}", "UP") for i in range(1, 9)]
    assert {p for p, _ in plan} == {p for p, _ in deal_positions()}


def test_split_deal_round_trip() -> None:
    plan = deal_positions()
    cards = dict(zip((p for p, _ in plan), HWATU_48))
    hands, layout = split_deal(cards)
    assert hands["F"][0] == cards["F.1"] and hands["O"][9] == cards["O.10"] and layout[7] == cards["L8"]
    with pytest.raises(ValueError, match="L8"):
        split_deal({k: v for k, v in cards.items() if k != "L8"})


@pytest.mark.parametrize("field,value", [
    ("deal_pattern", "5_5_5"), ("ppuk_capture_steal", "any_ppuk_2"), ("immediate_win_multipliers", "YES"),
    ("nagari_next_multiplier", 3), ("nagari_next_multiplier", True), ("sseul_rule", "X"), ("last_turn", 19),
])
def test_rules_refuse_unknown_options(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=field):
        MatgoRules(**{field: value})


def test_other() -> None:
    assert other("F") == "O" and other("O") == "F"
    with pytest.raises(ValueError):
        other("X")  # type: ignore[arg-type]


def test_start_validates_strictly() -> None:
    cards = list(HWATU_48)
    f, o, lay = cards[:10], cards[10:20], cards[20:28]
    with pytest.raises(ValueError, match="exactly 10"):
        MatgoGame.start({"F": f[:9], "O": o}, lay)
    with pytest.raises(ValueError, match="exactly 8"):
        MatgoGame.start({"F": f, "O": o}, lay + [cards[30]])
    with pytest.raises(CardError, match="duplicate card 01G"):
        MatgoGame.start({"F": f, "O": o[:9] + ["01G"]}, lay)
    with pytest.raises(CardError, match="Hwatu"):
        MatgoGame.start({"F": f[:9] + ["13G"], "O": o}, lay)
    with pytest.raises(CardError):
        MatgoGame.start({"F": f[:9] + ["AS"], "O": o}, lay)
    with pytest.raises(ValueError, match="'F' and 'O'"):
        MatgoGame.start({"F": f, "P": o}, lay)  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="first"):
        MatgoGame.start({"F": f, "O": o}, lay, first="X")  # type: ignore[arg-type]
    with pytest.raises(CardError, match="a single string"):
        MatgoGame.start({"F": "01G", "O": o}, lay)  # type: ignore[dict-item]


def test_start_state() -> None:
    g = deal("01G 02A", "03G", "04A 05A 06A 07A 08A 09A 10A 11G")
    assert g.phase == Phase.PLAY and g.to_move == "F" and g.turn == 1 and g.stock_left == 20
    assert g.result is None and g.go_count == {"F": 0, "O": 0} and g.ppuks == {"F": 0, "O": 0}
    assert g.captured == {"F": [], "O": []}
    assert len(g.seen) == 28
    check_conservation(g)
    g2 = deal("01G 02A", "03G", "04A 05A 06A 07A 08A 09A 10A 11G", first="O")
    assert g2.to_move == "O" and g2.first == "O"


# --- setup checks (§2.3) --------------------------------------------------------------------


def test_layout_quad_redeals_before_anything_else() -> None:
    # F also holds a quad, but the layout quad is checked first.
    g = deal("02A 02R 02J1 02J2", "", "01G 01R 01J1 01J2 05A 06A 07A 08A")
    assert g.phase == Phase.OVER
    assert g.result is not None and g.result.kind == "REDEAL" and g.result.winner is None
    assert g.result.payment_points == 0 and g.result.details["month"] == 1
    assert g.legal() == []


def test_both_players_quad_redeals() -> None:
    g = deal("02A 02R 02J1 02J2", "03G 03R 03J1 03J2", "01G 01R 05A 06A 07A 08A 10A 11G")
    assert g.result is not None and g.result.kind == "REDEAL"
    assert g.result.details["months"] == {"F": [2], "O": [3]}


def test_chongtong_wins_5_immediately() -> None:
    # §7.3 example 9: O is dealt 03G 03R 03J1 03J2.
    g = deal("", "03G 03R 03J1 03J2", "01G 01R 05A 06A 07A 08A 10A 11G")
    r = g.result
    assert r is not None and r.kind == "CHONGTONG" and r.winner == "O" and r.payment_points == 5
    assert g.phase == Phase.OVER and ("immediate_win" in kinds(g.setup_events))
    # APPLY: nothing captured yet, so no multiplier applies either.
    g = deal("", "03G 03R 03J1 03J2", "01G 01R 05A 06A 07A 08A 10A 11G",
             rules=MatgoRules(immediate_win_multipliers="APPLY"))
    assert g.result is not None and g.result.payment_points == 5


def test_layout_triple_forms_initial_pile() -> None:
    g = deal("09A", "", "09J1 09J2 09R 01G 03G 05A 06A 07A")
    stacks = {s.month: s for s in g.layout}
    assert stacks[9] == LayoutStack(9, ("09J1", "09J2", "09R"), "INITIAL", None)
    assert stacks[1] == LayoutStack(1, ("01G",), "LOOSE", None)
    assert ("pile", {"month": 9, "cards": ["09J1", "09J2", "09R"], "origin": "INITIAL"}) in g.setup_events


# --- worked turn examples (§3.4) ------------------------------------------------------------


def test_turn_example_1_ppuk() -> None:
    g = deal("05A", "", "05R 01G 02A 03G 04A 06A 07A 08A", avoid="05J1")
    ev = g.apply(Play("05A"))
    assert event(ev, "pending")["cards"] == ["05A", "05R"] and g.phase == Phase.FLIP
    assert g.pending == ["05A", "05R"]
    ev = g.apply(Flip("05J1"))
    assert event(ev, "ppuk") == {"seat": "F", "month": 5, "cards": ["05A", "05J1", "05R"], "count": 1}
    assert LayoutStack(5, ("05A", "05J1", "05R"), "PPUK", "F") in g.layout
    assert g.captured["F"] == [] and g.ppuks == {"F": 1, "O": 0}
    assert g.turn == 2 and g.to_move == "O" and g.stock_left == 19
    check_conservation(g)


def test_turn_examples_1_and_2_in_sequence() -> None:
    g = deal("05A", "05J2", "05R 01G 02A 03G 04A 06A 07A 10A", avoid="05J1 08J1")
    run(g, Play("05A"), Flip("05J1"))
    ev = run(g, Play("05J2"), Flip("08J1"))
    assert event(ev, "triple")["units"] == 2 and event(ev, "triple")["maker"] == "F"
    assert g.captured["O"] == ["05A", "05J1", "05J2", "05R"] and "08J1" in g.layout_cards
    assert event(ev, "steal") == {"from": "F", "to": "O", "owed": 2, "cards": [], "units": 0}  # forgiven


def test_turn_example_2_taking_a_ppuk_pile_steals_2() -> None:
    g = pos(o="05J2", piles=[("05R 05A 05J1", "PPUK", "F")], f_cap="11JD 03J2 01J1", keep="08J1",
            turn=1, first="O", ppuks={"F": 1})
    assert g.to_move == "O"
    ev = g.apply(Play("05J2"))
    t = event(ev, "triple")
    assert t == {"seat": "O", "month": 5, "cards": ["05A", "05J1", "05J2", "05R"], "origin": "PPUK",
                 "maker": "F", "units": 2}
    ev = g.apply(Flip("08J1"))
    assert event(ev, "placed")["card"] == "08J1" and "08J1" in g.layout_cards
    assert {"05A", "05J1", "05J2", "05R"} <= set(g.captured["O"])
    assert event(ev, "steal") == {"from": "F", "to": "O", "owed": 2, "cards": ["01J1", "03J2"], "units": 2}
    assert g.captured["F"] == ["11JD"]
    assert all(s.month != 5 for s in g.layout)


def test_turn_example_3_ttadak() -> None:
    g = pos(f="07R", layout="07A 07J1", o_cap="02J1 11JD", keep="07J2")
    ev = g.apply(Play("07R"))
    assert event(ev, "choice") == {"seat": "F", "step": "A", "card": "07R", "options": ["07A", "07J1"]}
    assert g.phase == Phase.CHOOSE_A and g.options == ["07A", "07J1"]
    assert g.legal() == [Choose("07A"), Choose("07J1")]
    g.apply(Choose("07A"))
    assert g.phase == Phase.FLIP and g.layout_cards == ["07J1"]
    ev = g.apply(Flip("07J2"))
    assert event(ev, "ttadak") == {"seat": "F", "units": 1, "applied": True}
    assert event(ev, "captured")["cards"] == ["07A", "07J1", "07J2", "07R"]
    # the layout was not empty at the start and is empty now: the Ttadak is also a Sseul (stacking).
    assert event(ev, "sseul")["applied"] is True
    assert event(ev, "steal")["cards"] == ["02J1", "11JD"] and event(ev, "steal")["owed"] == 2


def test_turn_example_3_ttadak_alone() -> None:
    g = pos(f="07R", layout="07A 07J1 01G", o_cap="02J1 11JD", keep="07J2")
    ev = run(g, Play("07R"), Choose("07A"), Flip("07J2"))
    assert "sseul" not in kinds(ev) and "ttadak" in kinds(ev)
    assert event(ev, "steal") == {"from": "O", "to": "F", "owed": 1, "cards": ["02J1"], "units": 1}
    assert g.layout_cards == ["01G"]


def test_turn_example_4_chok() -> None:
    g = pos(f="10A", layout="01G", o_cap="03J1 04J1", keep="10J1")
    ev = g.apply(Play("10A"))
    assert event(ev, "placed") == {"seat": "F", "card": "10A", "step": "A"}
    assert g.layout_cards == ["01G", "10A"]
    ev = g.apply(Flip("10J1"))
    assert event(ev, "chok") == {"seat": "F", "units": 1, "applied": True}
    assert event(ev, "captured")["cards"] == ["10A", "10J1"]
    assert event(ev, "steal")["cards"] == ["03J1"] and g.captured["O"] == ["04J1"]
    assert g.layout_cards == ["01G"]


def test_chok_on_an_empty_layout_is_not_a_sseul() -> None:
    # §10.13: a hand card played onto an empty layout and caught by the stock card is a Chok only.
    g = pos(f="10A", o_cap="03J1 04J1", keep="10J1")
    ev = run(g, Play("10A"), Flip("10J1"))
    assert "chok" in kinds(ev) and "sseul" not in kinds(ev)
    assert event(ev, "steal")["units"] == 1


def test_turn_example_5_sseul() -> None:
    g = pos(f="02A", layout="02R 11J1", o_cap="01J1 03J1", keep="11G")
    ev = run(g, Play("02A"), Flip("11G"))
    assert event(ev, "pending")["cards"] == ["02A", "02R"]
    assert event(ev, "paired")["cards"] == ["11G", "11J1"]
    assert event(ev, "captured")["cards"] == ["02A", "02R", "11G", "11J1"]
    assert event(ev, "sseul") == {"seat": "F", "units": 1, "applied": True}
    assert g.layout_cards == [] and event(ev, "steal")["cards"] == ["01J1"]


def test_turn_example_6_initial_pile_capture() -> None:
    g = deal("09A", "", "09J1 09J2 09R 01G 02A 04A 05A 06A", avoid="03J1")
    ev = g.apply(Play("09A"))
    assert event(ev, "triple") == {"seat": "F", "month": 9, "cards": ["09A", "09J1", "09J2", "09R"],
                                   "origin": "INITIAL", "maker": None, "units": 1}
    ev = g.apply(Flip("03J1"))
    assert "03J1" in g.layout_cards and event(ev, "steal")["owed"] == 1
    assert g.captured["F"] == ["09A", "09J1", "09J2", "09R"]  # O had nothing: shortfall forgiven
    # with something to steal:
    g = pos(f="09A", piles=[("09J1 09J2 09R", "INITIAL", None)], layout="01G", o_cap="12JD 10J2", keep="03J1")
    ev = run(g, Play("09A"), Flip("03J1"))
    assert event(ev, "steal")["cards"] == ["10J2"]


def test_turn_example_7_choose_one_other_stays() -> None:
    g = pos(f="06J1", layout="06A 06R 01G", o_cap="01J1", keep="12A")
    ev = run(g, Play("06J1"), Choose("06A"), Flip("12A"))
    assert event(ev, "captured")["cards"] == ["06A", "06J1"]
    assert g.layout_cards == ["01G", "06R", "12A"]
    assert "steal" not in kinds(ev) and g.captured["O"] == ["01J1"]


def test_turn_example_8_choice_in_step_b() -> None:
    g = pos(f="04A", layout="04R 01G 01J1", keep="01R")
    run(g, Play("04A"))
    ev = g.apply(Flip("01R"))
    assert event(ev, "choice") == {"seat": "F", "step": "B", "card": "01R", "options": ["01G", "01J1"]}
    assert g.phase == Phase.CHOOSE_B and g.to_move == "F" and g.default_move() == Choose("01G")
    assert g.pending == ["01R", "04A", "04R"]
    ev = g.apply(Choose("01G"))
    assert event(ev, "captured")["cards"] == ["01G", "01R", "04A", "04R"]
    assert g.layout_cards == ["01J1"] and "sseul" not in kinds(ev)


def test_step_b_stock_card_takes_a_ppuk_pile() -> None:
    # A stock card of a month with a pile takes all four (+2 for a Ppuk pile).
    g = pos(f="01G", layout="03R", piles=[("08G 08A 08J1", "PPUK", "O")], o_cap="02J1 02J2 06J1",
            keep="08J2", ppuks={"O": 1})
    ev = run(g, Play("01G"), Flip("08J2"))
    assert event(ev, "triple")["units"] == 2 and event(ev, "triple")["maker"] == "O"
    assert event(ev, "steal")["cards"] == ["02J1", "02J2"]
    assert g.layout_cards == ["01G", "03R"]


# --- transfers (§4.5) -------------------------------------------------------------------------


def test_transfer_lowest_units_first_then_code() -> None:
    g = pos(f="07R", layout="07A 07J1", o_cap="12JD 11J2 03J1 11JD 01J2", keep="07J2")
    ev = run(g, Play("07R"), Choose("07J1"), Flip("07J2"))  # Ttadak + Sseul = 2 units
    assert event(ev, "steal")["cards"] == ["01J2", "03J1"]
    assert g.captured["O"] == ["11J2", "11JD", "12JD"]


def test_transfer_double_overpays() -> None:
    g = pos(f="10A", layout="01G", o_cap="12JD 11JD", keep="10J1")
    ev = run(g, Play("10A"), Flip("10J1"))  # Chok: 1 unit owed, only doubles: 11JD is taken
    assert event(ev, "steal") == {"from": "O", "to": "F", "owed": 1, "cards": ["11JD"], "units": 2}
    assert g.captured["O"] == ["12JD"]


def test_transfer_cup_never_moves_and_shortfall_is_forgiven() -> None:
    g = pos(f="07R", layout="07A 07J1", o_cap="09A 04J1", keep="07J2")
    ev = run(g, Play("07R"), Choose("07A"), Flip("07J2"))  # 2 units owed, 1 junk available
    assert event(ev, "steal") == {"from": "O", "to": "F", "owed": 2, "cards": ["04J1"], "units": 1}
    assert g.captured["O"] == ["09A"]
    # the cup classified as junk (it is worth more as junk to O) still never moves
    o_cap = "09A 01J1 01J2 02J1 02J2 03J1 03J2 04J1 04J2"  # 8 units + cup: cup as junk -> 10 units
    g = pos(f="10A", layout="01G", o_cap=o_cap, keep="10J1", turn=3, extra_to="F")
    assert g.score_of("O").cup_as == "junk" and g.to_move == "F"
    run(g, Play("10A"), Flip("10J1"))
    assert "09A" in g.captured["O"] and "01J1" in g.captured["F"]
    assert g.turn == 4


# --- Ppuk rules (§4.2, §4.3) ------------------------------------------------------------------


def test_ppuk_capture_steal_option() -> None:
    own = MatgoRules(ppuk_capture_steal="OWN_2_OTHER_1")
    # O takes F's Ppuk pile: 1 unit under OWN_2_OTHER_1
    g = pos(o="05J2", piles=[("05R 05A 05J1", "PPUK", "F")], f_cap="01J1 03J2", keep="08J1",
            first="O", rules=own)
    ev = run(g, Play("05J2"), Flip("08J1"))
    assert event(ev, "triple")["units"] == 1 and event(ev, "steal")["cards"] == ["01J1"]
    # O takes its own Ppuk pile: 2 units
    g = pos(o="05J2", piles=[("05R 05A 05J1", "PPUK", "O")], f_cap="01J1 03J2", keep="08J1",
            first="O", rules=own)
    ev = run(g, Play("05J2"), Flip("08J1"))
    assert event(ev, "triple")["units"] == 2 and event(ev, "steal")["cards"] == ["01J1", "03J2"]
    # an INITIAL pile is 1 under both options
    g = pos(o="05J2", piles=[("05R 05A 05J1", "INITIAL", None)], f_cap="01J1 03J2", keep="08J1",
            first="O", rules=own)
    assert event(run(g, Play("05J2"), Flip("08J1")), "triple")["units"] == 1


def test_third_ppuk_wins_5_immediately() -> None:
    # §7.3 example 10: F makes a third Ppuk on turn 13.
    g = pos(f="03J1", layout="03R 01G", keep="03J2", turn=13, ppuks={"F": 2}, extra_to="split")
    assert g.to_move == "F"
    ev = run(g, Play("03J1"), Flip("03J2"))
    assert event(ev, "ppuk")["count"] == 3
    r = g.result
    assert r is not None and r.kind == "THREE_PPUK" and r.winner == "F" and r.payment_points == 5
    assert event(ev, "immediate_win") == {"kind": "THREE_PPUK", "seat": "F", "payment_points": 5}
    assert g.phase == Phase.OVER and g.legal() == [] and "decision" not in kinds(ev)


def test_ppuks_of_different_players_do_not_add_up() -> None:
    g = pos(f="03J1", layout="03R 01G", keep="03J2", turn=13, ppuks={"F": 1, "O": 2}, extra_to="split")
    run(g, Play("03J1"), Flip("03J2"))
    assert g.result is None and g.ppuks == {"F": 2, "O": 2}


def test_immediate_win_multipliers_apply() -> None:
    apply = MatgoRules(immediate_win_multipliers="APPLY")
    # F holds three brights (scores brights), O has none: x2.
    g = pos(f="03J1", layout="03R 02A", f_cap="01G 08G 11G", keep="03J2", turn=3, ppuks={"F": 2},
            rules=apply)
    run(g, Play("03J1"), Flip("03J2"))
    assert g.result is not None and g.result.payment_points == 10
    assert g.result.details["multipliers"] == ["bright"]
    g = pos(f="03J1", layout="03R 02A", f_cap="01G 08G 11G", keep="03J2", turn=3, ppuks={"F": 2})
    run(g, Play("03J1"), Flip("03J2"))
    assert g.result is not None and g.result.payment_points == 5 and g.result.details["multipliers"] == []


# --- scoring (§5) -----------------------------------------------------------------------------


@pytest.mark.parametrize("cards,field,expected", [
    ("01G 03G 08G", "brights", 3),                       # 1
    ("01G 03G 12G", "brights", 2),                       # 2
    ("01G 03G 08G 12G", "brights", 4),                   # 3
    ("01G 03G 08G 11G 12G", "total", 15),                # 4
    ("02A 04A 08A 05A 06A", "animals", 6),               # 5
    ("01R 02R 03R 04R 05R", "ribbons", 4),               # 6
    ("04R 05R 12R", "total", 0),                         # 7
    ("01J1 01J2 02J1 02J2 03J1 03J2 04J1 04J2 11JD", "junk", 1),  # 8
])
def test_scoring_examples(cards: str, field: str, expected: int) -> None:
    s = score(S(cards))
    assert getattr(s, field) == expected
    assert s.total == expected


def test_scoring_example_9_cup_tie_is_animal() -> None:
    s = score(S("02A 05A 06A 07A 09A 01J1 01J2 02J1 02J2 03J1 03J2 04J1 04J2"))
    assert s.cup_as == "animal" and s.total == 1 and s.animals == 1 and s.junk == 0
    assert s.animal_count == 5 and s.junk_units == 8


def test_scoring_example_10_cup_as_junk() -> None:
    s = score(S("02A 05A 06A 09A 01J1 01J2 02J1 02J2 03J1 03J2 04J1 04J2 05J1"))
    assert s.cup_as == "junk" and s.total == 2 and s.junk_units == 11 and s.animal_count == 3


def test_scoring_example_11_sum() -> None:
    junk = "01J1 01J2 02J1 02J2 03J1 03J2 04J1 04J2 05J1 11JD"  # 11 units
    s = score(S("01G 03G 08G 02A 04A 08A 10A 12A " + junk))
    assert (s.brights, s.animals, s.junk, s.total) == (3, 6, 2, 11)
    assert s.godori and s.cup_as is None


def test_scoring_more_cases() -> None:
    assert score([]).total == 0
    assert score(S("06R 09R 10R")).ribbons == 3
    assert score(S("04R 05R 07R")).ribbons == 3
    assert score(S("01R 02R 03R 04R 05R 07R 06R 09R 10R 12R")).ribbons == 6 + 9
    assert score(S("02A 04A 05A 06A 07A 10A 12A")).animals == 3  # no Godori without 08A
    assert score(S("12JD 11JD 01J1 01J2 02J1 02J2 03J1 03J2")).junk_units == 10
    assert score(S("01G 03G")).brights == 0
    # cup alone, or with few cards: tie at 0 -> animal
    assert score(["09A"]).cup_as == "animal"
    with pytest.raises(CardError, match="duplicate"):
        score(["01G", "01G"])
    with pytest.raises(CardError):
        score(["01X"])


# --- payment (§7) -----------------------------------------------------------------------------

JUNK_SINGLES = [c for c in HWATU_48 if c[2] == "J" and not c.endswith("JD")]


def junk(n: int, start: int = 0) -> list[str]:
    return JUNK_SINGLES[start:start + n]


def test_payment_example_1_bright_multiplier() -> None:
    f = S("01G 03G 08G 02A 05A 06A 07A 10A") + junk(12)
    p = payment(f, junk(6, 12), 0)
    assert score(f).total == 7 and (score(f).brights, score(f).junk, score(f).animals) == (3, 3, 1)
    assert p.points == 7 and p.go_adjusted == 7 and p.multipliers == ["bright"] and p.payment_points == 14


def test_payment_example_2_one_go_and_junk() -> None:
    f = S("01R 02R 03R") + junk(15)
    assert score(f).total == 9
    p = payment(f, junk(4, 15), 1)
    assert (p.go_adjusted, p.multipliers, p.payment_points) == (10, ["junk"], 20)


def test_payment_example_3_two_go() -> None:
    f = junk(20)
    assert score(f).total == 11
    p = payment(f, junk(2, 20) + ["11JD", "12JD"], 2)  # loser: 6 units, no multiplier
    assert (p.go_adjusted, p.multipliers, p.payment_points) == (13, [], 13)


def test_payment_example_4_three_go_and_animals() -> None:
    f = S("02A 04A 08A 05A 06A 07A 10A 01R 02R 03R") + junk(10)
    assert score(f).total == 12 and score(f).animal_count == 7
    p = payment(f, junk(5, 10), 3)
    assert (p.go_adjusted, p.multipliers, p.payment_points) == (24, ["animals"], 48)


def test_payment_example_5_five_go() -> None:
    f = S("02A 04A 08A 05A 06A 01R 02R 03R 06R 09R 10R") + junk(10)
    assert score(f).total == 15
    p = payment(f, junk(5, 10), 5)
    assert (p.go_adjusted, p.multipliers, p.payment_points) == (120, [], 120)


def test_payment_example_7_cup_protects_the_loser() -> None:
    f = junk(15)
    assert payment(f, junk(3, 15) + ["09A"], 0).multipliers == []
    assert payment(f, junk(3, 15), 0).multipliers == ["junk"]
    assert payment(f, junk(4, 15), 0).multipliers == ["junk"]
    assert payment(f, junk(5, 15), 0).multipliers == []
    assert payment(f, [], 0).multipliers == ["junk"]  # zero units counts as fewer than five


def test_payment_multipliers_stack_and_go_table() -> None:
    f = S("01G 03G 08G 02A 04A 08A 05A 06A 07A 10A") + junk(10)
    p = payment(f, [], 0)
    assert p.multipliers == ["bright", "animals", "junk"] and p.payment_points == p.points * 8
    assert [payment(junk(20), junk(5, 20), g).go_adjusted for g in range(7)] == [11, 12, 13, 22, 44, 88, 176]
    # the stopper's cup counts for the animal multiplier only if classified as an animal
    six = S("02A 04A 05A 06A 07A 10A")
    assert payment(six + ["09A"], junk(5), 0).multipliers == ["animals"]
    with pytest.raises(ValueError):
        payment(f, [], -1)
    with pytest.raises(CardError, match="both"):
        payment(f, ["01G"], 0)


def test_payment_example_6_opponent_stops_first() -> None:
    f_cap = "01G 03G 11G 01R 02R 03R 07R 12R 06R 01J2 02J1 02J2 03J2 04J1 04J2 05J1 05J2 07J1"
    o_cap = "02A 04A 08A 05A 08J1 08J2 09J1 09J2 10J1 10J2 11J1 11J2 03J1"
    g = pos(o="06J1", layout="06A", f_cap=f_cap, o_cap=o_cap, keep="12JD", turn=14, extra_to="F",
            go_count={"F": 1}, score_at_last_go={"F": 8})
    assert g.scores()["F"] == 8 and g.scores()["O"] == 5 and g.to_move == "O"
    ev = run(g, Play("06J1"), Flip("12JD"))
    assert event(ev, "decision") == {"seat": "O", "score": 7, "go_count": 0}
    assert g.phase == Phase.DECIDE and g.legal() == [Decide(False), Decide(True)]
    ev = g.apply(Decide(False))
    r = g.result
    assert r is not None and r.kind == "STOP" and r.winner == "O" and r.payment_points == 7
    assert r.details["multipliers"] == [] and r.details["loser"] == "F" and r.details["scores"]["F"] == 8
    assert event(ev, "stop") == {"seat": "O", "score": 7, "auto": False}


# --- Stop / Go (§6) ---------------------------------------------------------------------------


def seven_point_position(**kw: Any) -> MatgoGame:
    """F to move with 6 points (3 brights, red poem set, 4 ribbons), about to capture 04R."""
    base = dict(f="04A 10J2", o="11J2", layout="04R 10A", f_cap="01G 03G 08G 01R 02R 03R 05R",
                keep="11J1 07J1 06J1", turn=3, extra_to="O")
    base.update(kw)
    return pos(**base)  # type: ignore[arg-type]


def test_decision_at_seven_and_go_raises_the_bar() -> None:
    g = seven_point_position()
    assert g.scores()["F"] == 6
    ev = run(g, Play("04A"), Flip("11J1"))  # 11J1 placed
    assert event(ev, "decision") == {"seat": "F", "score": 7, "go_count": 0}
    assert g.phase == Phase.DECIDE and g.to_move == "F" and g.default_move() == Decide(False)
    ev = g.apply(Decide(True))
    assert event(ev, "go") == {"seat": "F", "go_count": 1, "score": 7}
    assert g.go_count["F"] == 1 and g.score_at_last_go["F"] == 7
    assert g.turn == 4 and g.to_move == "O" and g.phase == Phase.PLAY
    run(g, Play("11J2"), Flip("07J1"))  # O takes 11J1 with 11J2; 07J1 placed
    assert g.turn == 5 and {"11J1", "11J2"} <= set(g.captured["O"])
    # F captures 10A with 10J2: score still 7 (5 ribbons, 1 animal, 1 junk) -> no decision
    ev = run(g, Play("10J2"), Flip("06J1"))
    assert "decision" not in kinds(ev) and g.scores()["F"] == 7 and g.turn == 6


def test_after_go_score_must_exceed_the_last_go() -> None:
    # F called Go at 8, then lost points (steals): now 7. Getting back to 8 is not a decision.
    f_cap = "01G 03G 08G 01R 02R 03R 05R 04R"  # 3 + 3 + 1 = 7
    g = pos(f="06R 07R", o="11J2", layout="06J1 07J1", f_cap=f_cap, keep="12A 12R 10J1", turn=3,
            extra_to="O", go_count={"F": 1}, score_at_last_go={"F": 8})
    assert g.scores()["F"] == 7
    ev = run(g, Play("06R"), Flip("12A"))  # 6 ribbons -> 8
    assert g.scores()["F"] == 8 and "decision" not in kinds(ev) and g.to_move == "O"
    run(g, Play("11J2"), Flip("12R"))  # O: 11J2 placed, 12R takes 12A
    ev = run(g, Play("07R"), Flip("10J1"))  # 7 ribbons + plain red set -> 12
    assert event(ev, "decision") == {"seat": "F", "score": 12, "go_count": 1}
    ev = g.apply(Decide(True))
    assert g.go_count["F"] == 2 and g.score_at_last_go["F"] == 12


def test_last_turn_only_stop_is_applied_automatically() -> None:
    f_cap = "01G 03G 08G 01R 02R 03R 05R"  # 6 points
    g = pos(o="04A", layout="04R", o_cap=f_cap, keep="11J1", turn=20, extra_to="F")
    assert g.to_move == "O" and g.scores()["O"] == 6
    ev = run(g, Play("04A"), Flip("11J1"))
    assert event(ev, "stop") == {"seat": "O", "score": 7, "auto": True}
    assert g.result is not None and g.result.kind == "STOP" and g.result.winner == "O"
    assert g.phase == Phase.OVER and g.stock_left == 0


def test_turn_19_offers_go_under_deal_final_but_not_each_players_final() -> None:
    f_cap = "01G 03G 08G 01R 02R 03R 05R"
    g = pos(f="04A", layout="04R", f_cap=f_cap, keep="11J1", turn=19, extra_to="O")
    run(g, Play("04A"), Flip("11J1"))
    assert g.phase == Phase.DECIDE
    g = pos(f="04A", layout="04R", f_cap=f_cap, keep="11J1", turn=19, extra_to="O",
            rules=MatgoRules(last_turn="EACH_PLAYERS_FINAL"))
    ev = run(g, Play("04A"), Flip("11J1"))
    assert g.result is not None and g.result.kind == "STOP" and event(ev, "stop")["auto"] is True


def test_no_bonus_on_the_last_turn_but_triple_steals_apply() -> None:
    g = pos(o="07R", layout="07A 07J1", f_cap="01J1 02J1", keep="07J2", turn=20, extra_to="F")
    ev = run(g, Play("07R"), Choose("07A"), Flip("07J2"))
    assert event(ev, "ttadak") == {"seat": "O", "units": 0, "applied": False}
    assert event(ev, "sseul")["applied"] is False and "steal" not in kinds(ev)
    assert g.result is not None and g.result.kind == "NAGARI"
    g = pos(o="05J2", piles=[("05R 05A 05J1", "PPUK", "F")], f_cap="01J1 02J1", keep="08J1", turn=20,
            extra_to="F")
    singles = [c for c in g.captured["F"] if c[2] == "J" and not c.endswith("JD")]
    ev = run(g, Play("05J2"), Flip("08J1"))
    assert event(ev, "steal")["cards"] == singles[:2]


def test_last_turn_option_each_players_final_disables_bonuses_on_turn_19() -> None:
    each = MatgoRules(last_turn="EACH_PLAYERS_FINAL")
    g = pos(f="10A", layout="01G", o_cap="03J1", keep="10J1", turn=19, extra_to="O", rules=each)
    ev = run(g, Play("10A"), Flip("10J1"))
    assert event(ev, "chok")["applied"] is False and "steal" not in kinds(ev)
    g = pos(f="10A", layout="01G", o_cap="03J1", keep="10J1", turn=19, extra_to="O")
    lowest = min(c for c in g.captured["O"] if c[2] == "J" and not c.endswith("JD"))
    ev = run(g, Play("10A"), Flip("10J1"))
    assert event(ev, "chok")["applied"] is True and event(ev, "steal")["cards"] == [lowest]


@pytest.mark.parametrize("mult", [1, 2])
def test_nagari_after_turn_20(mult: int) -> None:
    g = pos(o="04A", layout="01G", keep="11J1", turn=20, extra_to="split",
            rules=MatgoRules(nagari_next_multiplier=mult))  # type: ignore[arg-type]
    assert g.scores()["O"] < 7
    ev = run(g, Play("04A"), Flip("11J1"))
    r = g.result
    assert r is not None and r.kind == "NAGARI" and r.winner is None and r.payment_points == 0
    assert r.details["next_multiplier"] == mult and "nagari" in kinds(ev)
    assert g.turn == 20 and g.phase == Phase.OVER


def test_sseul_rule_two_months_captured() -> None:
    two = MatgoRules(sseul_rule="TWO_MONTHS_CAPTURED")
    g = pos(f="02A", layout="02R 11J1 01G", o_cap="01J1 03J1", keep="11G", rules=two)
    ev = run(g, Play("02A"), Flip("11G"))
    assert event(ev, "sseul")["applied"] is True and event(ev, "steal")["cards"] == ["01J1"]
    # default: the layout is not cleared -> no Sseul
    g = pos(f="02A", layout="02R 11J1 01G", o_cap="01J1 03J1", keep="11G")
    assert "sseul" not in kinds(run(g, Play("02A"), Flip("11G")))
    # literal rule: clearing the layout with a Chok/Ttadak of one month is not a Sseul
    g = pos(f="07R", layout="07A 07J1", o_cap="02J1 11JD", keep="07J2", rules=two)
    ev = run(g, Play("07R"), Choose("07A"), Flip("07J2"))
    assert "sseul" not in kinds(ev) and event(ev, "steal")["owed"] == 1


# --- illegal moves, defaults, views -----------------------------------------------------------


def assert_refused(g: MatgoGame, move: Any, reason: str) -> None:
    before = g.state_key()
    assert g.verify(move) == reason
    with pytest.raises(ValueError) as err:
        g.apply(move)
    assert str(err.value) == reason
    assert g.state_key() == before


def test_illegal_moves_refused_with_reason_and_nothing_changed() -> None:
    g = pos(f="07R", layout="07A 07J1 04R", keep="07J2 01R")
    assert_refused(g, Play("07J2"), "07J2 is not in F's hand")
    assert_refused(g, Play("07A"), "07A is not in F's hand")
    assert_refused(g, Play("XX"), "'XX' is not a Hwatu card code")
    assert_refused(g, Flip("07J2"), "F must play a hand card (Play), not Flip")
    assert_refused(g, Decide(True), "F must play a hand card (Play), not Decide")
    assert_refused(g, "07R", "not a Matgo move: '07R'")
    assert g.verify(Play("07R"), seat="O") == "it is F's move, not 'O''s"
    g.apply(Play("07R"))
    assert_refused(g, Choose("04R"), "choose one of 07A, 07J1")
    assert_refused(g, Play("07R"), "F must choose one of 07A, 07J1 (Choose), not Play")
    g.apply(Choose("07J1"))
    assert_refused(g, Flip("04R"), "04R is already registered (on the layout), it cannot be the stock card")
    assert_refused(g, Flip("07R"), "07R is already registered (played this turn), it cannot be the stock card")
    hand_o = g.hand("O")[0]
    assert_refused(g, Flip(hand_o), f"{hand_o} is already registered (in O's hand), it cannot be the stock card")
    assert_refused(g, Choose("07A"), "waiting for the stock card (Flip), not Choose")
    run(g, Flip("01R"))
    assert g.phase == Phase.PLAY and g.to_move == "O"
    assert_refused(g, Flip("07J2"), "O must play a hand card (Play), not Flip")
    g2 = seven_point_position()
    run(g2, Play("04A"), Flip("11J1"))
    assert_refused(g2, Play("10J2"), "F must decide Stop or Go (Decide), not Play")
    assert_refused(g2, Decide(1), "Decide.go must be True or False, got 1")  # type: ignore[arg-type]
    g2.apply(Decide(False))
    assert_refused(g2, Decide(False), "the game is over (STOP)")


def test_default_moves() -> None:
    g = pos(f="12JD 03G 01J2", layout="01G 01J1 11J1 11JD 06A 06R 08J1 08J2", keep="11G 08A")
    assert g.default_move() == Play(min(g.hand("F")))
    g = pos(f="01J2 11J2 08G 06J1", layout="01G 01J1 11J1 11JD 06A 06R 08J1 08J2", keep="11G")
    assert g.default_move() == Play("01J2")
    g.apply(g.default_move())
    assert g.default_move() == Choose("01G")  # bright over junk
    g.apply(g.default_move())
    assert g.phase == Phase.FLIP
    with pytest.raises(ValueError, match="no default for FLIP"):
        g.default_move()
    g = pos(f="11J2", layout="11J1 11JD", keep="01R")
    g.apply(Play("11J2"))
    assert g.default_move() == Choose("11JD")  # double junk over junk
    g = pos(f="06J1", layout="06A 06R", keep="01R")
    g.apply(Play("06J1"))
    assert g.default_move() == Choose("06A")  # animal over ribbon
    g = pos(f="08G", layout="08J1 08J2", keep="01R")
    g.apply(Play("08G"))
    assert g.default_move() == Choose("08J1")  # tie: lowest code
    assert [card_value(c) for c in S("01G 02A 02R 11JD 11J1")] == [4, 3, 2, 1, 0]


def view_leaks(g: MatgoGame, seat: Any) -> set[str]:
    """Opponent hand cards anywhere in the view except the unseen pool (which mixes them with
    the stock)."""
    d = g.view(seat).to_dict()
    d.pop("unseen")
    return walk_strings(d) & set(g.hand(other(seat)))


def test_view_hides_the_opponent_hand() -> None:
    g = pos(f="07R", layout="07A 07J1", keep="07J2")
    for seat in ("F", "O"):
        v = g.view(seat)  # type: ignore[arg-type]
        opp = set(g.hand(other(seat)))  # type: ignore[arg-type]
        assert not view_leaks(g, seat)
        assert v.opponent_hand_size == len(opp) and set(v.hand) == set(g.hand(seat))  # type: ignore[arg-type]
        assert set(v.unseen) == opp | set(g.stock_candidates())
        assert set(v.unseen) == set(g.unseen(seat))  # type: ignore[arg-type]
        assert v.seen == frozenset(HWATU_48) - set(v.unseen)
        assert v.turn == 1 and v.stock_left == 20 and v.phase == Phase.PLAY
        # the view is the same whatever the opponent actually holds
        alt = sorted(v.unseen)[: v.opponent_hand_size]
        assert g.determinize(seat, alt).view(seat) == v  # type: ignore[arg-type]


def test_clone_is_independent() -> None:
    g = pos(f="07R", layout="07A 07J1", keep="07J2")
    before = g.state_key()
    c = g.clone()
    assert c.state_key() == before
    run(c, Play("07R"), Choose("07A"), Flip("07J2"))
    assert g.state_key() == before and c.state_key() != before
    assert g.hand("F") != c.hand("F")


def test_determinize_swaps_only_the_opponent_hand() -> None:
    g = pos(f="07R", layout="07A 07J1", keep="07J2")
    unseen = g.unseen("F")
    guess = unseen[-10:]
    d = g.determinize("F", guess)
    assert d.hand("O") == sorted(guess) and d.hand("F") == g.hand("F")
    assert d.layout == g.layout and d.captured == g.captured and d.turn == g.turn
    check_conservation(d)
    with pytest.raises(ValueError, match="cards"):
        g.determinize("F", unseen[:3])
    with pytest.raises(ValueError, match="already seen"):
        g.determinize("F", g.hand("F"))


def test_from_position_validates() -> None:
    loose7 = S("01G 02A 03G 04A 05A 06A 07A")
    rest = [c for c in HWATU_48 if c not in loose7]
    with pytest.raises(ValueError, match="the stock holds 20 cards, but 21 cards are not placed"):
        MatgoGame.from_position(hands={"F": rest[:10], "O": rest[10:20]}, layout=loose7)
    with pytest.raises(ValueError, match="three or more loose cards of month 1"):
        MatgoGame.from_position(hands={"F": rest[-10:], "O": rest[-20:-10]}, layout=S("01G 01R 01J1"))
    with pytest.raises(ValueError, match="hand must have 9"):
        MatgoGame.from_position(hands={"F": HWATU_48[:10], "O": HWATU_48[10:20]}, turn=3)
    hands = {"F": rest[-10:], "O": rest[-20:-10]}
    with pytest.raises(ValueError, match="a pile is three cards of one month"):
        MatgoGame.from_position(hands=hands, piles=[(S("01R 02R 03R"), "INITIAL", None)])
    with pytest.raises(ValueError, match="pile origin"):
        MatgoGame.from_position(hands=hands, piles=[(S("01R 01J1 01J2"), "SHAKE", None)])
    with pytest.raises(ValueError, match="pile maker"):
        MatgoGame.from_position(hands=hands, piles=[(S("01R 01J1 01J2"), "PPUK", None)])
    with pytest.raises(CardError, match="twice"):
        MatgoGame.from_position(hands={"F": ["01G"], "O": ["01G"]}, turn=19)


def test_events_of_a_full_turn_and_turn_handover() -> None:
    g = pos(f="04A", layout="04R 11J1", keep="02J1")
    ev = run(g, Play("04A"), Flip("02J1"))
    assert kinds(ev) == ["played", "pending", "flipped", "placed", "captured", "score", "turn"]
    assert ev[-1] == ("turn", {"turn": 2, "seat": "O"})


# --- random full deals (properties) -----------------------------------------------------------

RULE_CHOICES = [
    MatgoRules(),
    MatgoRules(ppuk_capture_steal="OWN_2_OTHER_1", sseul_rule="TWO_MONTHS_CAPTURED"),
    MatgoRules(last_turn="EACH_PLAYERS_FINAL", immediate_win_multipliers="APPLY", nagari_next_multiplier=2),
    MatgoRules(deal_pattern="ROUND_ROBIN"),
]


def random_game(rng: random.Random, check: bool = True) -> MatgoGame:
    rules = rng.choice(RULE_CHOICES)
    deck = list(HWATU_48)
    rng.shuffle(deck)
    plan = [p for p, _ in deal_positions(rules)]
    hands, layout = split_deal(dict(zip(plan, deck[:28])))
    stock = deck[28:]
    g = MatgoGame.start(hands, layout, first=rng.choice(["F", "O"]), rules=rules)
    flips = 0
    steps = 0
    while g.result is None:
        steps += 1
        assert steps < 200
        if check:
            check_step(g, rng)
        if g.phase == Phase.FLIP:
            move: Any = Flip(stock[flips])
            assert move in g.legal()
            flips += 1
        else:
            legal = g.legal()
            assert g.default_move() in legal
            move = rng.choice(legal)
        if check and rng.random() < 0.1:
            fast = g.clone()
            fast.step(move)
            g.apply(move)
            assert fast.state_key() == g.state_key()
        else:
            g.apply(move)
        assert 1 <= g.turn <= 20 and flips <= 20
    if check:
        check_over(g, flips)
    return g


def check_step(g: MatgoGame, rng: random.Random) -> None:
    check_conservation(g)
    for m in g.legal():
        assert g.verify(m) is None
    sc = g.scores()
    assert sc["F"] >= 0 and sc["O"] >= 0
    for seat in ("F", "O"):
        assert score(g.captured[seat]).total == sc[seat]  # type: ignore[index]
    if g.phase == Phase.PLAY:
        t = g.turn
        taken = {g.first: t // 2, other(g.first): (t - 1) // 2}
        for seat in ("F", "O"):
            assert len(g.hand(seat)) == 10 - taken[seat]  # type: ignore[arg-type]
        assert g.stock_left == 21 - t and g.pending == []
    for st_ in g.layout:
        assert len(st_.cards) in ((1, 2) if st_.origin == "LOOSE" else (3,))
        assert {c[:2] for c in st_.cards} == {f"{st_.month:02d}"}
    if rng.random() < 0.2:
        for seat in ("F", "O"):
            v = g.view(seat)  # type: ignore[arg-type]
            assert not view_leaks(g, seat)
            alt = list(v.unseen)
            rng.shuffle(alt)
            assert g.determinize(seat, alt[: v.opponent_hand_size]).view(seat) == v  # type: ignore[arg-type]
            assert set(v.unseen) == set(g.hand(other(seat))) | set(g.stock_candidates())  # type: ignore[arg-type]


def check_over(g: MatgoGame, flips: int) -> None:
    r = g.result
    assert r is not None and g.phase == Phase.OVER and g.legal() == []
    check_conservation(g)
    assert r.payment_points >= 0
    if r.kind == "STOP":
        w = r.winner
        assert w is not None
        p = payment(g.captured[w], g.captured[other(w)], g.go_count[w])
        assert r.payment_points == p.payment_points and p.points >= 7
        assert p.payment_points >= p.go_adjusted >= p.points
        assert r.details["multipliers"] == p.multipliers
    elif r.kind == "NAGARI":
        assert g.turn == 20 and flips == 20 and r.payment_points == 0 and r.winner is None
        assert g.hands == {"F": [], "O": []} and g.stock_left == 0
    elif r.kind in ("CHONGTONG", "THREE_PPUK"):
        assert r.winner is not None and r.payment_points in (5, 10, 20, 40)
        if g.rules.immediate_win_multipliers == "NONE":
            assert r.payment_points == 5
    else:
        assert r.kind == "REDEAL" and r.payment_points == 0 and flips == 0


@pytest.mark.slow
def test_thousands_of_random_deals() -> None:
    rng = random.Random(20240917)
    seen = set()
    for _ in range(1500):
        g = random_game(rng, check=True)
        assert g.result is not None
        seen.add(g.result.kind)
    assert {"STOP", "NAGARI", "CHONGTONG"} <= seen


@pytest.mark.slow
def test_many_more_random_deals_unchecked_steps() -> None:
    rng = random.Random(7)
    counts: dict[str, int] = {}
    for _ in range(4000):
        g = random_game(rng, check=False)
        assert g.result is not None
        check_over(g, 20 - g.stock_left)
        counts[g.result.kind] = counts.get(g.result.kind, 0) + 1
    assert counts.get("STOP", 0) > 2000 and counts.get("THREE_PPUK", 0) > 0


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.integers(min_value=0, max_value=2**64 - 1))
def test_random_deals_hypothesis(seed: int) -> None:
    random_game(random.Random(seed), check=True)


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=0, max_value=2**64 - 1), st.integers(min_value=0, max_value=60))
def test_illegal_random_moves_never_change_state(seed: int, at: int) -> None:
    rng = random.Random(seed)
    deck = list(HWATU_48)
    rng.shuffle(deck)
    g = MatgoGame.start({"F": deck[:10], "O": deck[10:20]}, deck[20:28])
    stock = deck[28:]
    for _ in range(at):
        if g.result is not None:
            break
        g.apply(Flip(stock[20 - g.stock_left]) if g.phase == Phase.FLIP else rng.choice(g.legal()))
    legal = set(g.legal())
    for m in [Play(c) for c in HWATU_48] + [Choose(c) for c in HWATU_48] + [Flip(c) for c in HWATU_48] + \
             [Decide(True), Decide(False)]:
        if m in legal:
            assert g.verify(m) is None
            continue
        before = g.state_key()
        reason = g.verify(m)
        assert isinstance(reason, str) and reason
        with pytest.raises(ValueError):
            g.apply(m)
        assert g.state_key() == before


def test_clone_playouts_from_the_ai_point_of_view() -> None:
    """An AI determinizes from its view and plays out clones; the real game is untouched."""
    rng = random.Random(3)
    for _ in range(30):
        deck = list(HWATU_48)
        rng.shuffle(deck)
        g = MatgoGame.start({"F": deck[:10], "O": deck[10:20]}, deck[20:28])
        if g.result is not None:
            continue
        before = g.state_key()
        unseen = g.unseen("F")
        rng.shuffle(unseen)
        d = g.determinize("F", unseen[:len(g.hand("O"))])
        stock = unseen[len(g.hand("O")):]
        for _ in range(5):
            c = d.clone()
            order = stock[:]
            rng.shuffle(order)
            while c.result is None:
                c.step(Flip(order.pop()) if c.phase == Phase.FLIP else rng.choice(c.legal()))
            assert c.result is not None
        assert g.state_key() == before
