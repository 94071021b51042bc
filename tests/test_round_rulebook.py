"""The round machine reads like the rulebook (issue 15 item 3): one table says what each phase
takes, refusals come from data beside it, one place assigns the phase, and neither the
machine nor the visibility policy names a game; games opt into capabilities (item 4)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from dealer.core import round as round_module
from dealer.core.round import REFUSALS, TRANSITIONS, Phase, Round
from dealer.games import GAMES
from dealer.core.game_contract import Decisions, Exposures, PeerGame, Remembers, Reservations, Reveals, offers
from dealer.games.base import BettingTurns
from dealer.games.matgo import MatgoHand
from dealer.games.seotda import SeotdaHand
from dealer.games.stud import StudHand

CORE = Path(round_module.__file__).parent
HANDLED = {t for _, t in TRANSITIONS}


def test_every_refused_event_type_has_its_reason_in_the_table() -> None:
    """An event type the machine handles in some phase is refused in the others with a reason
    of its own from REFUSALS; only a link failure after the round ended takes the catch-all."""
    general = []
    for phase in Phase:
        for event_type in sorted(HANDLED):
            if (phase, event_type) in TRANSITIONS:
                continue
            if (phase, event_type) not in REFUSALS and (None, event_type) not in REFUSALS:
                general.append((phase.value, event_type))
    assert general == [(p, "link_down") for p in ("RESULT", "SETTLED", "CANCELLED", "VOID")]
    assert {t for _, t in REFUSALS} <= HANDLED  # no reason for an event the machine never takes


def test_refusals_fill_in_the_round_and_the_phase() -> None:
    text = REFUSALS[(None, "place_bet")].format(event="place_bet", round="T-000001", phase=Phase.DEALING.value)
    assert text == "betting is closed for round T-000001 (DEALING)"


def _phase_assignments(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Attribute) and t.attr == "phase":
                    out.append(ast.unparse(node))
    return out


def test_one_place_assigns_the_phase() -> None:
    """Round.__init__ starts the round; Round.handle is the only other place the phase changes."""
    assigned = _phase_assignments(CORE / "round.py")
    assert assigned == ["self.phase = Phase.BETTING_OPEN", "self.phase = out.next_phase"]
    for module in ("results.py", "visibility.py", "table.py"):
        assert _phase_assignments(CORE / module) == [], module


@pytest.mark.parametrize("module", ["round.py", "results.py", "visibility.py"])
def test_the_round_machine_and_the_visibility_policy_name_no_game(module: str) -> None:
    text = (CORE / module).read_text().lower()
    for name in GAMES:
        assert not re.search(rf"\b{re.escape(name)}\b", text), f"{module} names {name}"
    for word in ('"ante"', '"play"', '"fold"'):
        assert word not in text, f"{module} holds the game string {word}"


def test_the_round_machine_does_not_recurse() -> None:
    """The hand runs in one loop: no Round method calls a method that (transitively) calls it."""
    tree = ast.parse((CORE / "round.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Round")
    calls: dict[str, set[str]] = {}
    for fn in cls.body:
        if isinstance(fn, ast.FunctionDef):
            calls[fn.name] = {c.func.attr for c in ast.walk(fn) if isinstance(c, ast.Call)
                              and isinstance(c.func, ast.Attribute) and isinstance(c.func.value, ast.Name)
                              and c.func.value.id == "self"}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for callee in calls.get(start, ()):
            if callee == goal or (callee not in seen and reaches(callee, goal, seen | {callee})):
                return True
        return False

    assert [m for m in calls if reaches(m, m, set())] == []
    assert not hasattr(Round, "_why_not")


def test_games_opt_into_their_capabilities() -> None:
    games = {name: cls() for name, cls in GAMES.items()}
    assert [n for n, g in games.items() if offers(g, Decisions)] == ["sevenluck"]
    assert sorted(n for n, g in games.items() if isinstance(g, PeerGame)) == ["matgo", "seotda", "stud"]
    hands = {"stud": StudHand, "seotda": SeotdaHand, "matgo": MatgoHand}
    opted = {cap.__name__: sorted(n for n, h in hands.items() if all(hasattr(h, m) for m in _members(cap)))
             for cap in (Reservations, Exposures, Reveals, Remembers)}
    assert opted == {"Reservations": ["seotda"], "Exposures": ["stud"], "Reveals": ["matgo", "seotda", "stud"],
                     "Remembers": ["seotda", "stud"]}
    # the betting engine's turns (BettingRounds): ``betting`` is the hand's own engine
    assert sorted(n for n, h in hands.items() if issubclass(h, BettingTurns)) == ["seotda", "stud"]


def _members(cap: type) -> list[str]:
    return [m for m in vars(cap) if not m.startswith("_")] + list(getattr(cap, "__annotations__", {}))
