"""The soak's tables of every game: which game each table plays, its options, its bets and its
stacked decks (``dealer soak --games all``).

``--games all`` (the default) deals the five games in turn: Seven-Card Stud, Seotda, Matgo,
Sevenluck, Teen Patti 20-20. Every second Seotda table (the first one too) plays the rulebook's
options that ask the players: ``rematch_94_mode = PROMPT`` (the 9·4 holder chooses REMATCH or
PLAY_ON) and ``rematch_reentry = HALF_POT`` (a folded player may rejoin a rematch); the others
the defaults (``AUTO_BEST``, no re-entry).

Some rounds are dealt from a stacked deck, so that the rare moments happen in a short run too:
a Seotda deck that gives the first seat a 9·4 (a rematch, and under PROMPT its holder's
choice), a Matgo deck with four cards of one month in the layout (a redeal).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from dealer.core.cards import HWATU_48, SEOTDA_20
from dealer.games.matgo import MatgoOptions
from dealer.games.matgo_rules import deal_positions
from simulators.bettors import BetPlan, bet_plan
from simulators.shoe import shuffled

#: ``--games all``: the order tables are given their game.
ALL_GAMES = ("stud", "seotda", "matgo", "sevenluck", "teen-patti")
#: Games whose players take turns (a turn timer, a turn to kill the backend in).
TURN_GAMES = ("stud", "seotda", "matgo")
GAME_CHOICES = ("all", "mixed", *ALL_GAMES)
SEVENLUCK_SEATS = 3
#: Seated players of a stud and a Seotda table (Matgo: one, against the house AI).
PEER_PLAYERS = 4
#: Seotda options that ask the players (given to every second Seotda table, the first included).
SEOTDA_ASKING = {"rematch_94_mode": "PROMPT", "rematch_reentry": "HALF_POT"}
#: The Matgo AI's thinking time per move: shorter than the table's default (100 ms), as many
#: tables share two cores; long enough for a worker to be killed in the middle of it.
MATGO_AI_MS = 60
#: Stud's window after the 7th cards (the station confirms it at once; a broker loss in it is a fault).
STUD_EXPOSURE_SECONDS = 5.0
#: Share of new decks stacked (a Seotda 9·4 for the first seat, a Matgo layout quad).
STACKED_SEOTDA = 0.3
STACKED_MATGO = 0.12


@dataclass(frozen=True)
class TableSpec:
    """One soak table: its game, its options (``[tables.options]``) and its seated players."""

    game: str
    options: dict[str, Any] = field(default_factory=dict)
    players: int = 0

    @property
    def label(self) -> str:
        """The game, with Seotda's asking options named (``seotda/prompt``)."""
        return f"{self.game}/prompt" if self.game == "seotda" and self.options.get("rematch_94_mode") == "PROMPT" \
            else self.game


def table_games(n: int, games: str) -> list[str]:
    """``all`` (every game in turn), ``mixed`` (every second table Sevenluck, the others Teen
    Patti) or one game for every table."""
    if games == "all":
        return [ALL_GAMES[i % len(ALL_GAMES)] for i in range(n)]
    if games == "mixed":
        return ["sevenluck" if i % 2 == 0 else "teen-patti" for i in range(1, n + 1)]
    if games in ALL_GAMES:
        return [games] * n
    raise ValueError(f"games must be one of {', '.join(GAME_CHOICES)}, not {games!r}")


def table_specs(n: int, games: str) -> list[TableSpec]:
    out: list[TableSpec] = []
    seotda = 0
    for game in table_games(n, games):
        if game == "seotda":
            opts: dict[str, Any] = {"seats": PEER_PLAYERS} | (SEOTDA_ASKING if seotda % 2 == 0 else {})
            seotda += 1
            out.append(TableSpec(game, opts, PEER_PLAYERS))
        elif game == "stud":
            out.append(TableSpec(game, {"seats": PEER_PLAYERS, "exposure_window_seconds": STUD_EXPOSURE_SECONDS},
                                 PEER_PLAYERS))
        elif game == "matgo":
            out.append(TableSpec(game, {"ai_budget_ms": MATGO_AI_MS}, 1))
        elif game == "sevenluck":
            out.append(TableSpec(game, {"seats": SEVENLUCK_SEATS}, SEVENLUCK_SEATS))
        else:
            out.append(TableSpec(game))
    return out


def toml_options(options: dict[str, Any]) -> str:
    """``[tables.options]`` of one table (flat keys: strings quoted, numbers as they are)."""
    if not options:
        return ""
    lines = ["", "[tables.options]"]
    for k, v in options.items():
        lines.append(f"{k} = {json_value(v)}")
    return "\n".join(lines) + "\n"


def json_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


#: Chips a soak stud player brings: mostly deep stacks (a hand reaches 7th street and its
#: exposure window), now and then a short one (all-ins and side pots).
STUD_STAKES = ("4.00", "10.00", "60.00", "80.00", "120.00", "150.00")


def peer_plan(spec: TableSpec) -> BetPlan:
    """What the players of a turn game's table bring (the chips, Matgo's cover), from its options."""
    plan = bet_plan(spec.game, spec.options, players=spec.players)
    if spec.game == "stud":
        return BetPlan(plan.game, plan.players, plan.bet_types, STUD_STAKES)
    return plan


# -- stacked decks ----------------------------------------------------------------------------------


def seotda_shuffler(rate: float = STACKED_SEOTDA):
    """Seotda: at ``rate``, a deck whose first card (the first seat's) is a 4 and whose 4th and
    5th are the two 9s, so the first seat holds a 9·4 whether three or four players sit."""
    def shuffle(rng: random.Random) -> Sequence[str]:
        deck = shuffled(SEOTDA_20, rng)
        if rng.random() >= rate:
            return deck
        four = rng.choice(("04A", "04R"))
        rest = [c for c in deck if c not in (four, "09A", "09R")]
        return [four, rest[0], rest[1], "09A", "09R", *rest[2:]]
    return shuffle


def matgo_shuffler(rate: float = STACKED_MATGO):
    """Matgo: at ``rate``, a deck whose layout holds the four cards of one month (a redeal, §2.3)."""
    plan = [name for name, _ in deal_positions(MatgoOptions().rules)]
    layout_at = [i for i, name in enumerate(plan) if name.startswith("L")]

    def shuffle(rng: random.Random) -> Sequence[str]:
        deck = shuffled(HWATU_48, rng)
        if rng.random() >= rate:
            return deck
        month = rng.randint(1, 12)
        quad = [c for c in HWATU_48 if int(c[:2]) == month]
        rest = [c for c in deck if c not in quad]
        slots = sorted(rng.sample(layout_at, len(quad)))
        out: list[str] = []
        for i in range(len(HWATU_48)):
            out.append(quad.pop() if i in slots else rest.pop())
        return out
    return shuffle


SHUFFLERS = {"seotda": seotda_shuffler, "matgo": matgo_shuffler}


def stake_sum(values: Sequence[str]) -> Decimal:
    return sum((Decimal(v) for v in values), Decimal(0))


__all__ = ["ALL_GAMES", "GAME_CHOICES", "PEER_PLAYERS", "SHUFFLERS", "TURN_GAMES", "TableSpec", "matgo_shuffler",
           "peer_plan", "seotda_shuffler", "table_games", "table_specs", "toml_options"]
