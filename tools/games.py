"""What the tools know of each game, in one record per game: the :class:`GameKit` registry.

The runtime knows a game by its class (:func:`dealer.games.register_game`); the tools know it
by its kit: the ``dealer hand`` report (:class:`HandCommand`), its part of ``dealer demo``
(:class:`DemoKit`: the demo table, the players who act after the cards, its log lines and
payout lines), its exact RTP report (a :class:`dealer.games.rtp.RtpGame`, or None) and what
the fuzzer stakes on it. ``dealer hand``, ``dealer demo --game``, ``dealer rtp``,
``dealer bench rtp`` and the fuzzer read this registry; none of them names a game.

Adding a game (docs/architecture.md, "Adding a game"): register its class with :func:`dealer.games.register_game`,
then its kit with :func:`register_kit` (from anywhere: a plug-in module, a test file).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, TextIO

from dealer.games.rtp import RTP_GAMES, RtpGame, register_rtp
from simulators.game_players import DealerFactory, PlayerFactory, register_dealer, register_players

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
class PlayedRound:
    """A recorded round as the journal's replay rebuilt it, for ``dealer hand --round``: its
    completed ``result``, every card registered (position -> code, hole cards included),
    the game's house ``options`` it was played with (validated, from its journaled rules),
    ``seats`` (seat -> player) and the peer game's ``hand`` (stud, Seotda, Matgo; else None)."""

    result: Any  # dealer.core.messages.RoundResult
    cards: Mapping[str, str]
    options: Any
    seats: Mapping[int, str] = field(default_factory=dict)
    hand: Any = None


#: What a game's ``recorded`` check returns: ``report`` (the game's hand report of the hands
#: that decided the round, or a list of them), ``agrees`` (True, False, or None when no hand
#: decided it, e.g. a pot won by folds), ``compared`` (what was checked) and ``differences``.
RoundCheck = dict[str, Any]


@dataclass(frozen=True)
class HandCommand:
    """``dealer hand GAME``: ``report`` turns the arguments into the JSON-able report, raising
    ValueError, CardError or pydantic's ValidationError (an ``--option``) on bad input.
    ``takes_go``: the game reads ``--go`` (every other game refuses it). ``recorded``: the same
    report for the hands of a recorded round (:class:`PlayedRound`), compared with its result
    (``dealer hand --round``); None: the game cannot re-evaluate a recorded round."""

    report: Callable[[HandArgs], dict[str, Any]]
    takes_go: bool = False
    recorded: Callable[[PlayedRound], RoundCheck] | None = None


def option_pairs(pairs: Sequence[str]) -> dict[str, str]:
    """``--option key=value`` pairs as a dict (a pair without ``=`` is a ValueError)."""
    bad = [kv for kv in pairs if "=" not in kv]
    if bad:
        raise ValueError(f"--option takes key=value, got {bad[0]!r}")
    return dict(kv.split("=", 1) for kv in pairs)


def two_hands(options_model: Any, report: Callable[..., dict[str, Any]], game: str,
              recorded: Callable[[PlayedRound], RoundCheck] | None = None) -> HandCommand:
    """A game that compares two hands (one ``--vs``) under its validated house options."""

    def run(args: HandArgs) -> dict[str, Any]:
        if len(args.vs) != 1:
            raise ValueError(f"{game} compares two hands: give exactly one --vs, got {len(args.vs)}")
        return report(args.cards, args.vs[0], options_model.model_validate(option_pairs(args.options)))

    return HandCommand(run, recorded=recorded)


def many_hands(report: Callable[[list[str], list[list[str]]], dict[str, Any]], game: str,
               recorded: Callable[[PlayedRound], RoundCheck] | None = None) -> HandCommand:
    """A game without house options that compares one hand with every ``--vs``."""

    def run(args: HandArgs) -> dict[str, Any]:
        if args.options:
            raise ValueError(f"{game} takes no --option")
        return report(args.cards, args.vs)

    return HandCommand(run, recorded=recorded)


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


# --- dealer hand --round: the hands of a recorded round -------------------------------------------


class _Check:
    """Collects what a recorded round's check compared and where the report and the result differ."""

    def __init__(self) -> None:
        self.compared: list[str] = []
        self.differences: list[str] = []

    def same(self, what: str, report: Any, recorded: Any) -> None:
        self.compared.append(what)
        if report != recorded:
            self.differences.append(f"{what}: the hand report says {report!r}, the result says {recorded!r}")

    def done(self, report: Any, note: str | None = None) -> RoundCheck:
        out: RoundCheck = {"report": report, "agrees": not self.differences, "compared": self.compared,
                           "differences": self.differences}
        if note:
            out["note"] = note
        return out


def _undecided(report: Any, note: str) -> RoundCheck:
    """No hand decided the round (a pot won by folds, an immediate win): nothing to compare."""
    return {"report": report, "agrees": None, "compared": [], "differences": [], "note": note}


def _hand_cards(cards: Mapping[str, str], positions: Sequence[str]) -> list[str] | None:
    got = [cards.get(p) for p in positions]
    return None if any(c is None for c in got) else [str(c) for c in got]


def _bets_compared(check: _Check, report_bets: Mapping[str, Mapping[str, Any]], recorded: Mapping[str, Any],
                   who: str = "") -> None:
    """Each bet type's resolution in the report against the result's (the fields both carry)."""
    for bet, mine in report_bets.items():
        theirs = recorded.get(bet)
        if theirs is None:
            continue
        theirs_json = theirs.model_dump(mode="json")
        for key in ("outcome", "ratio", "bonus_ratio", "category"):
            if key in mine and key in theirs_json:
                a, b = mine[key], theirs_json[key]
                if key in ("ratio", "bonus_ratio"):
                    a, b = Decimal(str(a)), Decimal(str(b))
                check.same(f"{who}bet {bet} {key}", a, b)


def _teen_patti_round(played: PlayedRound) -> RoundCheck:
    from dealer.games import teen_patti

    res = played.result
    a = _hand_cards(played.cards, teen_patti.HAND_POSITIONS["A"])
    b = _hand_cards(played.cards, teen_patti.HAND_POSITIONS["B"])
    if a is None or b is None:
        return _undecided(None, "not every card of hands A and B was dealt")
    report = teen_patti.hand_report(a, b, played.options)
    check = _Check()
    check.same("winner", report["winner"], res.winner)
    for name, hand in report["hands"].items():
        if name in res.hands:
            check.same(f"hand {name} category", hand["category"], res.hands[name].category)
    _bets_compared(check, report["bets"], res.bets)
    return check.done(report)


def _sevenluck_round(played: PlayedRound) -> RoundCheck:
    from dealer.games import sevenluck

    res = played.result
    dealer = _hand_cards(played.cards, sevenluck.DEALER_POSITIONS)
    players = [name for name in res.hands if name != "D"]
    if dealer is None or not players:
        return _undecided(None, "no player's hand was compared with the dealer's (every player folded)")
    check = _Check()
    reports: dict[str, Any] = {}
    for name in players:  # the hands the result ranked: those of players who played
        positions = sevenluck.SHARED_POSITIONS if name == "P" else sevenluck.seat_positions(int(name[1:]))
        cards = _hand_cards(played.cards, positions)
        if cards is None:
            continue
        report = reports[name] = sevenluck.hand_report(cards, dealer, played.options)
        check.same(f"hand {name} category", report["hands"]["player"]["category"], res.hands[name].category)
        check.same(f"{name} against the dealer", report["comparison"], res.details.get("comparison", {}).get(name))
    first = next(iter(reports.values()))
    check.same("dealer hand category", first["hands"]["dealer"]["category"],
               res.hands["D"].category if "D" in res.hands else None)
    check.same("dealer qualifies", first["dealer_qualifies"], res.details.get("dealer_qualifies"))
    return check.done(reports, "each report settles a player who plays, per unit stake; the result's payouts "
                               "follow each player's own decision")


def _stud_round(played: PlayedRound) -> RoundCheck:
    from dealer.core.cards import CardError
    from dealer.games import stud_eval

    res = played.result
    details = res.details
    if not details.get("showdown"):
        return _undecided(None, f"no showdown: {res.winner} won the pot uncontested (every other player folded)")
    seat_of = {p: s for s, p in played.seats.items()}
    labels = [name for name in details.get("showdown_order") or res.hands]
    community = [c for pos, c in played.cards.items() if pos == "COMM"]
    hands: list[list[str]] = []
    for label in labels:
        own = [c for i in range(1, 8) if (c := played.cards.get(f"{label}.{i}")) is not None]
        hands.append(own + community)
    check = _Check()
    try:
        report = stud_eval.hand_report(hands[0], hands[1:]) | {"hands_of": labels}
        rank = {label: tuple(h["rank_key"]) for label, h in zip(labels, report["hands"])}
        for label, h in zip(labels, report["hands"]):  # the evaluator's enum name, the result's lower case
            if label in res.hands:
                check.same(f"hand {label} category", str(h["category"]).lower(), res.hands[label].category.lower())
            if label in (details.get("names") or {}):
                check.same(f"hand {label} name", h["name"], details["names"][label])
    except CardError:  # the community card (deck exhausted, §3.6) is in every hand: rank each alone
        ranked = {label: stud_eval.evaluate(cards) for label, cards in zip(labels, hands)}
        report = {"game": "stud", "hands_of": labels, "community": community,
                  "hands": [{"cards": list(h.cards), "best_five": list(h.best_five), "category": h.category,
                             "name": h.name, "rank_key": list(h.rank_key)} for h in ranked.values()]}
        rank = {label: tuple(h.rank_key) for label, h in ranked.items()}
    for pot in details.get("pots") or []:  # each pot to the best hand among its eligible players (§6)
        eligible = [f"P{seat_of[p]}" for p in pot.get("eligible", ()) if p in seat_of]
        contenders = [label for label in eligible if label in rank]
        if len(contenders) < 2:
            continue
        best = max(rank[label] for label in contenders)
        winners = sorted(played.seats[int(label[1:])] for label in contenders if rank[label] == best)
        check.same(f"pot {pot.get('pot')} winners", winners, sorted(pot.get("winners") or ()))
    return check.done(report)


def _seotda_round(played: PlayedRound) -> RoundCheck:
    from dealer.games import seotda_rank

    res = played.result
    details = res.details
    labels = list(res.hands)  # the last game's showdown: every player still in
    if len(labels) < 2:
        return _undecided(None, f"no showdown: {res.winner} won uncontested (every other player folded)")
    game = int(details.get("rematches") or 0)
    prefix = f"R{game}." if game else ""
    held = {label: _hand_cards(played.cards, [f"{prefix}{label}.1", f"{prefix}{label}.2"]) for label in labels}
    if any(cards is None for cards in held.values()):
        return _undecided(None, "the showdown's cards are not all in the journal")
    rules = played.options.rank_rules
    limit = played.options.max_rematches
    report = seotda_rank.hand_report(held[labels[0]], [held[label] for label in labels[1:]], rules,
                                     allow_rematch=limit is None or game < limit)
    as_label = {f"S{i}": label for i, label in enumerate(labels, start=1)}  # the report numbers hands in order
    report["hands_of"] = labels
    check = _Check()
    names = details.get("names") or {}
    for hand in report["hands"]:
        label = as_label[hand["seat"]]
        if label in names:
            check.same(f"hand {label}", hand["name"], names[label])
    player = {label: seat["player"] for label, seat in (details.get("seats") or {}).items()}
    awards = [a for a in details.get("awards") or () if a.get("game") == game and a.get("result") in ("WIN", "SPLIT")]
    won = {w for a in awards for w in a.get("winners", ())}
    best = [as_label[report["winner"]]] if report["winner"] else [as_label[s] for s in report["split"] or ()]
    if report["rematch"]:
        if details.get("choices"):
            return check.done(report, "the ranking calls a rematch that a player's choice declined (seotda.md "
                                      "§5.2 PROMPT): the choice, not the hands, decided")
        check.same("outcome", "REMATCH", "WIN or SPLIT")
    elif len(awards) == 1:  # one pot: its winners are the best hands
        check.same("winners", sorted(player.get(label, label) for label in best), sorted(won))
    else:  # side pots: the best hand wins the pot it is eligible for
        check.compared.append("the best hand is among the winners")
        if not {player.get(label, label) for label in best} <= won:
            check.differences.append(f"the hand report's best hand {best} is not among the winners {sorted(won)}")
    return check.done(report)


def _matgo_round(played: PlayedRound) -> RoundCheck:
    from dealer.games import matgo

    res = played.result
    details = res.details
    if details.get("kind") != "STOP" or played.hand is None or getattr(played.hand, "engine", None) is None:
        return _undecided(None, f"the game ended by {details.get('kind')}, not a Stop: the piles did not decide it")
    final = details.get("result") or {}
    loser = final.get("loser")
    stopper = "O" if loser == "F" else "F"
    piles = played.hand.engine.captured  # a property: each seat's captured pile
    go = int((final.get("go_count") or {}).get(stopper, 0))
    report = matgo.hand_report(piles[stopper], piles[loser], go, played.options)
    report["stopper_seat"], report["loser_seat"] = stopper, loser
    check = _Check()
    check.same("stopper's points", report["stopper"]["score"]["total"], (final.get("scores") or {}).get(stopper))
    check.same("points", report["payment"]["points"], final.get("points"))
    check.same("Go-adjusted points", report["payment"]["go_adjusted"], final.get("go_adjusted"))
    check.same("multipliers", list(report["payment"]["multipliers"]), list(final.get("multipliers") or ()))
    check.same("payment points", report["payment"]["payment_points"], details.get("payment_points"))
    return check.done(report)


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
    (registered in :mod:`simulators.game_players`, which knows the house's five games already).
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
    from simulators.game_players import DEALERS, DEFAULT_STRATEGIES, PLAYERS

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
        GameKit("teen-patti", two_hands(teen_patti.TeenPattiOptions, teen_patti.hand_report, "teen-patti",
                                         _teen_patti_round),
                DemoKit(table={"limits": {"tie": {"min": "1", "max": "100"}}}),
                rtp=RTP_GAMES["teen-patti"], hand_usage="hand teen-patti AS KD QC --vs 2H 3H 4H"),
        GameKit("sevenluck", two_hands(sevenluck.SevenluckOptions, sevenluck.hand_report, "sevenluck",
                                        _sevenluck_round),
                # player3 never answers: the decision timer acts for it
                DemoKit(table={"options": {"seats": 3}, "decision_seconds": 1.0},
                        strategies=("q64", "random", "disconnect")),
                rtp=RTP_GAMES["sevenluck"], hand_usage="hand sevenluck PLAYER-CARDS --vs DEALER-CARDS"),
        GameKit("stud", many_hands(stud_eval.hand_report, "stud", _stud_round),
                # four seats; player4 goes silent after two actions: the timer decides its turns
                DemoKit(table={"options": {"seats": 4}, "action_seconds": 1.0},
                        strategies=("calling", "random", "aggressive", "disconnect"),
                        log=lambda stake: d.stud_log, payout=d.stud_payout),
                hand_usage="hand stud 7CARDS --vs 7CARDS [--vs ...]"),
        GameKit("seotda", HandCommand(_seotda_hand, recorded=_seotda_round),
                # room stake 10 (whole chips), four seats, a one-second turn timer
                DemoKit(table={"options": {"stake": 10, "seats": 4}, "action_seconds": 1.0, "currency": "KRW",
                               "minor_unit": "1"},
                        log=d.SeotdaLog, payout=d.seotda_payout, script=d.seotda_script),
                fuzz_stakes=("600", "750", "1000"), hand_usage="hand seotda 03G 08G --vs 04A 07A [--vs ...]"),
        GameKit("matgo", HandCommand(_matgo_hand, takes_go=True, recorded=_matgo_round),
                # one remote player against the house AI; 1.00 a point, a two-second turn timer
                DemoKit(table={"options": {"point_value": "1.00", "min_cover_points": 50}, "action_seconds": 2.0},
                        strategies=("random",), log=lambda stake: d.MatgoLog(), payout=d.matgo_payout,
                        script=d.matgo_script),
                fuzz_stakes=("600", "750", "1000"), hand_usage="hand matgo STOPPER-PILE --vs LOSER-PILE [--go N]"),
    ]


for _kit in _builtin_kits():
    register_kit(_kit)


__all__ = ["FUZZ_STAKES", "KITS", "DemoKit", "DemoSetup", "GameKit", "GameLog", "HandArgs", "HandCommand",
           "PlayedRound", "RoundCheck", "demo_games", "hand_games", "kit", "many_hands", "matgo_pile", "option_pairs",
           "register_kit", "two_hands", "unregister_kit"]
