"""What the tools know of each game, in one record per game: the :class:`GameKit` registry.

The runtime knows a game by its class (:func:`dealer.games.register_game`); the tools know it
by its kit: the ``dealer hand`` report (:class:`HandCommand`), its part of ``dealer demo``
(:class:`DemoKit`: the demo table, the players who act after the cards, its log lines and
payout lines), its exact RTP report (a :class:`dealer.games.rtp.RtpGame`, or None) and what
the fuzzer stakes on it. ``dealer hand``, ``dealer demo --game``, ``dealer rtp``,
``dealer bench rtp`` and the fuzzer read this registry; none of them names a game.

Adding a game (see the README): register its class with :func:`dealer.games.register_game`,
then its kit with :func:`register_kit` (from anywhere: a plug-in module, a test file).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, TextIO

from dealer.games.rtp import RTP_GAMES, RtpGame, register_rtp
from simulators.rig import DealerFactory, PlayerFactory, register_dealer, register_players

# --- dealer hand ------------------------------------------------------------------------------


@dataclass(frozen=True)
class HandArgs:
    """A ``dealer hand`` command line, game aside: the hand, each ``--vs``, the ``--option``
    pairs as given and ``--go`` (None when not given)."""

    cards: list[str]
    vs: list[list[str]]
    options: list[str] = field(default_factory=list)
    go: int | None = None


@dataclass(frozen=True)
class HandCommand:
    """``dealer hand GAME``: ``report`` turns the arguments into the JSON-able report, raising
    ValueError, CardError or pydantic's ValidationError (an ``--option``) on bad input.
    ``takes_go``: the game reads ``--go`` (every other game refuses it)."""

    report: Callable[[HandArgs], dict[str, Any]]
    takes_go: bool = False


def option_pairs(pairs: Sequence[str]) -> dict[str, str]:
    """``--option key=value`` pairs as a dict (a pair without ``=`` is a ValueError)."""
    bad = [kv for kv in pairs if "=" not in kv]
    if bad:
        raise ValueError(f"--option takes key=value, got {bad[0]!r}")
    return dict(kv.split("=", 1) for kv in pairs)


def two_hands(options_model: Any, report: Callable[..., dict[str, Any]], game: str) -> HandCommand:
    """A game that compares two hands (one ``--vs``) under its validated house options."""

    def run(args: HandArgs) -> dict[str, Any]:
        if len(args.vs) != 1:
            raise ValueError(f"{game} compares two hands: give exactly one --vs, got {len(args.vs)}")
        return report(args.cards, args.vs[0], options_model.model_validate(option_pairs(args.options)))

    return HandCommand(run)


def many_hands(report: Callable[[list[str], list[list[str]]], dict[str, Any]], game: str) -> HandCommand:
    """A game without house options that compares one hand with every ``--vs``."""

    def run(args: HandArgs) -> dict[str, Any]:
        if args.options:
            raise ValueError(f"{game} takes no --option")
        return report(args.cards, args.vs)

    return HandCommand(run)


def _seotda_hand(args: HandArgs) -> dict[str, Any]:
    from dealer.games import seotda_rank

    # house options map to RankRules fields (seotda.md §5.2, §9)
    return seotda_rank.hand_report(args.cards, args.vs, seotda_rank.RankRules.from_options(args.options))


def matgo_pile(codes: Sequence[str]) -> list[str]:
    """A captured pile on the command line: codes separated by spaces or commas; ``none``
    (or ``-``) alone is an empty pile."""
    cards = [c for arg in codes for c in arg.replace(",", " ").split()]
    if [c.lower() for c in cards] in (["none"], ["-"]):
        return []
    return cards


def _matgo_hand(args: HandArgs) -> dict[str, Any]:
    from dealer.games import matgo

    if len(args.vs) != 1:
        raise ValueError(f"matgo compares two captured piles: give exactly one --vs (the loser's pile, "
                         f"or --vs none), got {len(args.vs)}")
    options = matgo.MatgoOptions.model_validate(option_pairs(args.options))
    return matgo.hand_report(matgo_pile(args.cards), matgo_pile(args.vs[0]), args.go if args.go is not None else 0,
                             options)


# --- dealer demo ------------------------------------------------------------------------------

#: A game's own demo log: called with every message the service publishes, returns the lines
#: to print and whether the message is handled (else the generic log prints it).
GameLog = Callable[[Any], tuple[list[str], bool]]


@dataclass(frozen=True)
class DemoSetup:
    """What a game's demo script may use before the demo starts."""

    bus: Any
    seed: int
    settings: Any
    rng: random.Random
    service: Any
    table_id: str


@dataclass(frozen=True)
class DemoKit:
    """A game's part of ``dealer demo``.

    ``table``: the demo table's settings (options, timers, currency) over the demo's defaults.
    ``strategies``: the players who act once the cards are out (made by
    :func:`simulators.rig.make_players`; none for a game where players only bet); ``players``
    and ``dealer``: a new game's factories of simulated players and of its virtual dealer
    (registered with :mod:`simulators.rig`, which knows the house's five games already).
    ``log(stake)``: the game's own log lines (:data:`GameLog`); ``payout(result, out)``: its
    payout lines (default: the result as JSON). ``script(setup)``: scripted decks for the
    first rounds (and any player set-up), default none."""

    table: Mapping[str, Any] = field(default_factory=dict)
    strategies: tuple[str, ...] = ()
    players: PlayerFactory | None = None
    dealer: DealerFactory | None = None
    log: Callable[[Decimal], GameLog] | None = None
    payout: Callable[[Any, TextIO], None] | None = None
    script: Callable[[DemoSetup], list[list[str]]] | None = None


# --- the kit ----------------------------------------------------------------------------------

#: Stakes the fuzzer's scripted rounds bring (a game of whole chips overrides them).
FUZZ_STAKES = ("1", "5.50", "10.00", "25")


@dataclass(frozen=True)
class GameKit:
    """Everything the tools know of one game (registered by :func:`register_kit`).

    ``rtp``: the game's exact RTP report (also registered with :mod:`dealer.games.rtp`, so
    ``dealer run`` and the config checks know it), None for a game without one;
    ``fuzz_stakes``: the stakes the fuzzer bets on it."""

    name: str
    hand: HandCommand | None = None
    demo: DemoKit = field(default_factory=DemoKit)
    rtp: RtpGame | None = None
    fuzz_stakes: tuple[str, ...] = FUZZ_STAKES
    #: the ``dealer hand`` usage of this game, for the command's help
    hand_usage: str = ""


KITS: dict[str, GameKit] = {}


def register_kit(kit: GameKit) -> GameKit:
    """Make ``kit`` known to the tools. Its game must be registered with
    :func:`dealer.games.register_game` first (a kit of an unknown game is refused)."""
    from dealer.games import GAMES

    if kit.name not in GAMES:
        raise ValueError(f"no game {kit.name!r} is registered (dealer.games.register_game first)")
    if kit.rtp is not None:
        if kit.rtp.name != kit.name:
            raise ValueError(f"the RTP report of kit {kit.name!r} is for {kit.rtp.name!r}")
        register_rtp(kit.rtp)
    if kit.demo.players is not None:
        register_players(kit.name, kit.demo.players, kit.demo.strategies)
    if kit.demo.dealer is not None:
        register_dealer(kit.name, kit.demo.dealer)
    KITS[kit.name] = kit
    return kit


def unregister_kit(name: str) -> None:
    """Forget a kit (its RTP report, players and dealer too): a test's game leaves no trace."""
    from dealer.games.rtp import DEFAULT_MAX_RTP, RTP_BETS
    from simulators.rig import DEALERS, DEFAULT_STRATEGIES, PLAYERS

    kit = KITS.pop(name, None)
    if kit is None:
        return
    registries: list[dict[str, Any]] = []
    if kit.demo.players is not None:
        registries += [PLAYERS, DEFAULT_STRATEGIES]
    if kit.demo.dealer is not None:
        registries.append(DEALERS)
    if kit.rtp is not None:
        registries += [RTP_GAMES, RTP_BETS, DEFAULT_MAX_RTP]
    for registry in registries:
        registry.pop(name, None)


def kit(name: str) -> GameKit:
    """The kit of a registered game; a registered game without a kit gets an empty one (its
    demo table with the defaults, no hand report, no RTP report)."""
    from dealer.games import game_class

    found = KITS.get(name)
    if found is not None:
        return found
    game_class(name)  # an unknown game: ValueError naming the known ones
    return GameKit(name)


def hand_games() -> list[str]:
    """The games ``dealer hand`` can report, in registration order."""
    return [k.name for k in KITS.values() if k.hand is not None]


def demo_games() -> list[str]:
    """The games ``dealer demo --game`` plays: every kit's."""
    return list(KITS)


# --- the five games of the house ------------------------------------------------------------


def _builtin_kits() -> list[GameKit]:
    from dealer.games import sevenluck, stud_eval, teen_patti
    from tools import demo_games as d

    return [
        GameKit("teen-patti", two_hands(teen_patti.TeenPattiOptions, teen_patti.hand_report, "teen-patti"),
                DemoKit(table={"limits": {"tie": {"min": "1", "max": "100"}}}),
                rtp=RTP_GAMES["teen-patti"], hand_usage="hand teen-patti AS KD QC --vs 2H 3H 4H"),
        GameKit("sevenluck", two_hands(sevenluck.SevenluckOptions, sevenluck.hand_report, "sevenluck"),
                # player3 never answers: the decision timer acts for it
                DemoKit(table={"options": {"seats": 3}, "decision_seconds": 1.0},
                        strategies=("q64", "random", "disconnect")),
                rtp=RTP_GAMES["sevenluck"], hand_usage="hand sevenluck PLAYER-CARDS --vs DEALER-CARDS"),
        GameKit("stud", many_hands(stud_eval.hand_report, "stud"),
                # four seats; player4 goes silent after two actions: the timer decides its turns
                DemoKit(table={"options": {"seats": 4}, "action_seconds": 1.0},
                        strategies=("calling", "random", "aggressive", "disconnect"),
                        log=lambda stake: d.stud_log, payout=d.stud_payout),
                hand_usage="hand stud 7CARDS --vs 7CARDS [--vs ...]"),
        GameKit("seotda", HandCommand(_seotda_hand),
                # room stake 10 (whole chips), four seats, a one-second turn timer
                DemoKit(table={"options": {"stake": 10, "seats": 4}, "action_seconds": 1.0, "currency": "KRW",
                               "minor_unit": "1"},
                        log=d.SeotdaLog, payout=d.seotda_payout, script=d.seotda_script),
                fuzz_stakes=("600", "750", "1000"), hand_usage="hand seotda 03G 08G --vs 04A 07A [--vs ...]"),
        GameKit("matgo", HandCommand(_matgo_hand, takes_go=True),
                # one remote player against the house AI; 1.00 a point, a two-second turn timer
                DemoKit(table={"options": {"point_value": "1.00", "min_cover_points": 50}, "action_seconds": 2.0},
                        strategies=("random",), log=lambda stake: d.MatgoLog(), payout=d.matgo_payout,
                        script=d.matgo_script),
                fuzz_stakes=("600", "750", "1000"), hand_usage="hand matgo STOPPER-PILE --vs LOSER-PILE [--go N]"),
    ]


for _kit in _builtin_kits():
    register_kit(_kit)


__all__ = ["FUZZ_STAKES", "KITS", "DemoKit", "DemoSetup", "GameKit", "GameLog", "HandArgs", "HandCommand",
           "demo_games", "hand_games", "kit", "many_hands", "matgo_pile", "option_pairs", "register_kit",
           "two_hands", "unregister_kit"]
