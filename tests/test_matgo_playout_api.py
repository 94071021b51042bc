"""The Matgo engine's playout API (``dealer.games.matgo_engine`` module docstring): what search
code may use, and that the house AI uses nothing else. Pure tests."""

from __future__ import annotations

import ast
import itertools
import pickle
import random
from pathlib import Path

import pytest

from dealer.core.cards import HWATU_48
from dealer.games import matgo_cards, matgo_engine, matgo_scoring
from dealer.games.matgo import MatgoOptions
from dealer.games.matgo_engine import MatgoGame, score
from dealer.games.matgo_moves import FLIP_MOVES, Phase
from dealer.games.matgo_rules import MatgoRules, deal_positions, split_deal

ROOT = Path(__file__).resolve().parents[1]
#: the engine's modules, and the AI (whose own helpers the arena must not reach into either)
ENGINE_MODULES = {"dealer.games.matgo_engine", "dealer.games.matgo_cards", "dealer.games.matgo_scoring",
                  "dealer.games.matgo_moves", "dealer.games.matgo_rules", "dealer.games.matgo_turn",
                  "dealer.house.matgo_ai"}


def _game(seed: int) -> tuple[MatgoGame, list[str]]:
    """The first deal of the run ``seed`` that needs no redeal, dealt by the deal plan."""
    for k in itertools.count():
        deck = list(HWATU_48)
        random.Random(f"{seed}:{k}").shuffle(deck)
        hands, layout = split_deal(dict(zip((pos for pos, _face in deal_positions()), deck)))
        g = MatgoGame.start(hands=hands, layout=layout)
        if g.result is None:
            return g, deck[28:]
    raise AssertionError("unreachable")  # pragma: no cover


@pytest.mark.parametrize("user", ["dealer/house/matgo_ai.py", "tools/matgo_arena.py"])
def test_search_code_uses_no_private_engine_name(user: str) -> None:
    """No underscore name imported from the engine's modules (or the AI's), and no underscore
    attribute read from anything but the module's own objects (``self``, its own classes)."""
    tree = ast.parse((ROOT / user).read_text())
    imported = [a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module in ENGINE_MODULES
                for a in n.names]
    assert imported and not [n for n in imported if n.startswith("_")]
    own = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    foreign = sorted({f"{ast.unparse(n.value)}.{n.attr}" for n in ast.walk(tree)
                      if isinstance(n, ast.Attribute) and n.attr.startswith("_") and not n.attr.startswith("__")
                      and not (isinstance(n.value, ast.Name) and n.value.id in {"self", "cls", *own})
                      and not ast.unparse(n.value).startswith("self.")})
    assert foreign == [], f"{user} reads private names: {foreign}"


@pytest.mark.parametrize("seed", range(5))
def test_playout_api_plays_a_deal_like_apply(seed: int) -> None:
    """``step`` on a clone = ``apply`` on the game; the bit-mask state agrees with the code
    accessors; ``score_total`` = ``fast_total`` = ``score(...).total``; a clone is independent."""
    g, stock = _game(seed)
    fast = g.clone()
    rng = random.Random(seed)
    si = 0
    while not g.is_over:
        assert fast.state_key() == g.state_key()
        seat = g.to_move
        assert g.mover == ("F", "O").index(seat)
        assert matgo_cards.codes(g.hand_masks[g.mover]) == g.hand(seat)
        assert matgo_cards.codes(g.layout_mask) == g.layout_cards
        assert matgo_cards.codes(g.pending_mask) == g.pending
        for s, p in (("F", 0), ("O", 1)):
            assert matgo_cards.codes(g.captured_masks[p]) == g.captured[s]
            assert g.score_total(s) == matgo_scoring.fast_total(g.captured_masks[p]) == score(g.captured[s]).total
        if g.phase is Phase.FLIP:
            move = FLIP_MOVES[matgo_cards.INDEX[stock[si]]]
            si += 1
        else:
            assert g.legal_moves(seat) == g.legal() and g.legal_moves("O" if seat == "F" else "F") == []
            move = rng.choice(g.legal())
        before = g.clone()
        g.apply(move)
        fast.step(move)
        assert before.state_key() != g.state_key()  # the clone did not move with the game
    assert fast.result == g.result and g.phase is Phase.OVER and g.legal_moves("F") == []
    again = pickle.loads(pickle.dumps(g))  # a search may run in another process
    assert again.state_key() == g.state_key()


def test_house_options_are_declared_once() -> None:
    """The table options extend the engine's rules: the same fields, defaults and checks."""
    assert issubclass(MatgoOptions, MatgoRules)
    rule_fields = MatgoRules.model_fields
    assert set(rule_fields) <= set(MatgoOptions.model_fields)
    for name, info in rule_fields.items():
        assert MatgoOptions.model_fields[name].annotation == info.annotation
        assert MatgoOptions.model_fields[name].default == info.default == getattr(MatgoOptions(), name)
    options = MatgoOptions(point_value="0.50", nagari_next_multiplier=2, sseul_rule="TWO_MONTHS_CAPTURED")
    assert options.rules == MatgoRules(nagari_next_multiplier=2, sseul_rule="TWO_MONTHS_CAPTURED")
    assert type(options.rules) is MatgoRules
    for bad in ({"nagari_next_multiplier": True}, {"nagari_next_multiplier": 3}, {"last_turn": 19}):
        for model in (MatgoRules, MatgoOptions):
            with pytest.raises(ValueError, match=next(iter(bad))):
                model(**bad)


def test_the_engine_reexports_scoring() -> None:
    """Callers of ``matgo_engine.score`` / ``payment`` get the scoring module's functions."""
    assert matgo_engine.score is matgo_scoring.score and matgo_engine.payment is matgo_scoring.payment
    assert matgo_engine.card_value is matgo_cards.card_value
