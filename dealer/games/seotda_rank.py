"""Seotda two-card ranking and the one-pot showdown (`seotda.md` §1, §4, §5, §7.2, §9).

Pure code, no IO and no state: the table engine calls :func:`showdown` once per pot (main
pot and each side pot, §6.3) and deals any rematch itself; ``dealer hand seotda`` calls
:func:`hand_report`.

* :func:`evaluate` gives a hand its **base rank** ``R`` (§4.1) and, for the four function hands
  of §4.2, the function it may apply at showdown.
* :func:`showdown` runs §5 step by step. Function hands are judged against the OTHER
  contenders' BASE ranks, in the seed's ORDER (Bright Pair Hunter > Animal 9·4 > Pair Hunter
  > 9·4), so a rematch at step 2 pre-empts a Pair Hunter at step 3 (§5 example 13).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from itertools import combinations
from typing import Any, Literal, get_args

from dealer.core.cards import HWATU_48, SEOTDA_20, CardError

AnimalThreshold = Literal["NINE_PAIR", "NINE_POINTS"]
PairHunterCards = Literal["03G_07A", "ANY_3_7"]
Rematch94Mode = Literal["AUTO_BEST", "ALWAYS", "PROMPT"]
DrawResolution = Literal["REMATCH", "SPLIT"]
Category = Literal["bright_pair", "pair", "special", "points"]
Function = Literal["BRIGHT_PAIR_HUNTER", "ANIMAL_94", "PAIR_HUNTER", "NINE_FOUR"]
Kind = Literal["WIN", "REMATCH_94", "REMATCH_DRAW", "SPLIT", "ASK"]

_RULE_CHOICES: dict[str, tuple[str, ...]] = {
    "animal_94_threshold": get_args(AnimalThreshold),
    "pair_hunter_cards": get_args(PairHunterCards),
    "rematch_94_mode": get_args(Rematch94Mode),
    "draw_resolution": get_args(DrawResolution),
}


@dataclass(frozen=True)
class RankRules:
    """The house options of `seotda.md` that change ranking or showdown (§5.2, §9.4, §9.5).

    Field names are the rulebook's option names in lower case; defaults are the rulebook's.
    """

    animal_94_threshold: AnimalThreshold = "NINE_PAIR"  # R <= 409 (9·9) | R <= 209 (9 points)
    pair_hunter_cards: PairHunterCards = "03G_07A"  # exactly 03G+07A | any 3 + any 7
    rematch_94_mode: Rematch94Mode = "AUTO_BEST"  # who decides a 9·4 rematch (§5.2)
    draw_resolution: DrawResolution = "REMATCH"  # a tie at showdown: rematch | split the pot

    def __post_init__(self) -> None:
        # Literal is only a hint: a typo in a table config must fail here, not at showdown.
        for name, allowed in _RULE_CHOICES.items():
            value = getattr(self, name)
            if value not in allowed:
                raise ValueError(f"seotda option {name}={value!r}: expected one of {', '.join(allowed)}")

    @classmethod
    def from_options(cls, pairs: Iterable[str]) -> RankRules:
        """Rules from ``KEY=VALUE`` strings (CLI ``--option``); keys and values are
        case-insensitive (``REMATCH_94_MODE=always`` works), unknown keys are refused."""
        values: dict[str, str] = {}
        for kv in pairs:
            if "=" not in kv:
                raise ValueError(f"--option takes key=value, got {kv!r}")
            key, value = (part.strip() for part in kv.split("=", 1))
            name = key.lower().replace("-", "_")
            if name not in _RULE_CHOICES:
                raise ValueError(f"unknown seotda option {key!r} (known: {', '.join(_RULE_CHOICES)})")
            values[name] = value.upper()
        return cls(**values)  # type: ignore[arg-type]  # validated in __post_init__


DEFAULT_RULES = RankRules()


@dataclass(frozen=True)
class SeotdaHand:
    """A two-card hand: ``rank`` is the base rank R of §4.1 (higher is better); ``function``
    is what the hand may do at showdown (§4.2), judged there against the other hands."""

    cards: tuple[str, str]
    rank: int
    name: str
    category: Category
    function: Function | None = None


# --- ranking (§4) ----------------------------------------------------------------------

_SEOTDA = frozenset(SEOTDA_20)
_HWATU = frozenset(HWATU_48)

_BRIGHT_PAIRS: dict[frozenset[str], tuple[int, str]] = {
    frozenset({"03G", "08G"}): (503, "3·8 Bright Pair (Sam-pal Gwang-ttaeng)"),
    frozenset({"01G", "08G"}): (502, "1·8 Bright Pair (Il-pal Gwang-ttaeng)"),
    frozenset({"01G", "03G"}): (501, "1·3 Bright Pair (Il-sam Gwang-ttaeng)"),
}
_PAIR_WORD = {1: "Bbing", 2: "I", 3: "Sam", 4: "Sa", 5: "O", 6: "Yuk", 7: "Chil", 8: "Pal", 9: "Gu", 10: "Jang"}
_SPECIALS: dict[frozenset[int], tuple[int, str]] = {
    frozenset({1, 2}): (306, "Al-li (1·2)"),
    frozenset({1, 4}): (305, "Dok-sa (1·4)"),
    frozenset({9, 1}): (304, "Gu-bbing (9·1)"),
    frozenset({10, 1}): (303, "Jang-bbing (10·1)"),
    frozenset({10, 4}): (302, "Jang-sa (10·4)"),
    frozenset({4, 6}): (301, "Se-ryuk (4·6)"),
}
_POINT_WORD = {1: "Han-kkeut", 2: "Du-kkeut", 3: "Se-kkeut", 4: "Ne-kkeut", 5: "Daseot-kkeut",
               6: "Yeoseot-kkeut", 7: "Ilgop-kkeut", 8: "Yeodeol-kkeut", 9: "Gap-o"}
_FUNCTION_NAME: dict[str, str] = {
    "BRIGHT_PAIR_HUNTER": "Bright Pair Hunter 4·7 (Am-haeng-eo-sa)",
    "ANIMAL_94": "Animal 9·4 (Meong-teong-gu-ri Gu-sa)",
    "PAIR_HUNTER": "Pair Hunter 3·7 (Ttaeng-jab-i)",
    "NINE_FOUR": "9·4 (Gu-sa)",
}


def _month(code: str) -> int:
    return int(code[:2])


def _points_name(points: int) -> str:
    if points == 0:
        return "Mangtong (0 points)"
    return f"{points} point{'s' if points > 1 else ''} ({_POINT_WORD[points]})"


def _check_code(code: object) -> str:
    """One code of the 20-card deck, or a CardError that names the card and why (§8: a code
    outside the 20, e.g. a November card or a junk card, is a foreign card)."""
    if not isinstance(code, str):
        raise CardError(f"card code must be a string, got {type(code).__name__}")
    if code in _SEOTDA:
        return code
    deck = " ".join(SEOTDA_20)
    if code in _HWATU:
        what = "junk card" if code[2] == "J" else f"card of month {_month(code)}"
        raise CardError(f"{code!r} is a Hwatu {what}, not one of the 20 Seotda cards ({deck})")
    if len(code) == 2:
        hint = "looks like a 52-card code; Seotda uses Hwatu codes such as 03G"
    elif code[:2] in ("11", "12"):
        hint = "November and December cards are not in the Seotda deck"
    else:
        hint = "not a Seotda card code"
    raise CardError(f"{code!r}: {hint} (the 20 Seotda cards are {deck})")


def _function(cards: frozenset[str], rules: RankRules) -> Function | None:
    """§4.2 with §9.5: the exact cards of each function hand."""
    months = {_month(c) for c in cards}
    if cards == {"04A", "07A"}:
        return "BRIGHT_PAIR_HUNTER"
    if cards == {"04A", "09A"}:
        return "ANIMAL_94"
    if months == {3, 7} and (rules.pair_hunter_cards == "ANY_3_7" or cards == {"03G", "07A"}):
        return "PAIR_HUNTER"
    if months == {4, 9}:
        return "NINE_FOUR"
    return None


def evaluate(cards: Sequence[str], rules: RankRules = DEFAULT_RULES) -> SeotdaHand:
    """Rank exactly two distinct cards of the Seotda deck (§4.1, §4.2); anything else is refused."""
    if isinstance(cards, str):
        raise CardError(f"expected a sequence of 2 card codes, got the single string {cards!r}")
    codes = [_check_code(c) for c in cards]
    if len(codes) != 2:
        raise ValueError(f"a Seotda hand is exactly 2 cards, got {len(codes)}: {codes}")
    if codes[0] == codes[1]:
        raise CardError(f"duplicate card {codes[0]} in {codes}")
    low, high = sorted(codes)  # ASCII order = month order (decks.md §2.4)
    shown = (low, high)
    pair = frozenset(codes)
    m1, m2 = _month(low), _month(high)

    if pair in _BRIGHT_PAIRS:
        rank, name = _BRIGHT_PAIRS[pair]
        return SeotdaHand(shown, rank, name, "bright_pair")
    if m1 == m2:
        return SeotdaHand(shown, 400 + m1, f"{m1}·{m1} Pair ({_PAIR_WORD[m1]}-ttaeng)", "pair")
    if frozenset({m1, m2}) in _SPECIALS:
        rank, name = _SPECIALS[frozenset({m1, m2})]
        return SeotdaHand(shown, rank, name, "special")
    points = (m1 + m2) % 10
    function = _function(pair, rules)
    name = _points_name(points)
    if function is not None:  # e.g. "Pair Hunter 3·7 (Ttaeng-jab-i), Mangtong"
        value = "Mangtong" if points == 0 else f"{points} point{'s' if points > 1 else ''}"
        name = f"{_FUNCTION_NAME[function]}, {value}"
    return SeotdaHand(shown, 200 + points, name, "points", function)


def all_hands() -> list[tuple[str, str]]:
    """The 190 two-card hands of the 20-card deck, in deck order."""
    return list(combinations(SEOTDA_20, 2))


# --- showdown (§5) ---------------------------------------------------------------------


@dataclass(frozen=True)
class Showdown:
    """The result of one pot.

    * ``WIN``: ``winners`` is the one winner.
    * ``REMATCH_94`` / ``REMATCH_DRAW``: nobody is paid; ``participants`` replay for the pot
      (all contenders for a 9·4 rematch, only the tied players for a draw, §7.2).
    * ``SPLIT``: ``winners`` share the pot, in the contenders' order (S1 first, so the
      indivisible remainder goes to ``winners[0]``, §5.2).
    * ``ASK`` (only when :func:`showdown` is called with ``ask=True`` in ``PROMPT`` mode): the
      9·4 holder ``callers[0]`` must choose REMATCH or PLAY ON before the pot can be decided.

    ``participants`` is empty unless a rematch is due. ``step`` is the §5 step (1..5) that
    decided; 0 when the pot was uncontested (decided before step 1). ``callers`` names who
    caused a rematch: the 9·4 holders who called it, or the tied players of a draw.
    """

    kind: Kind
    winners: tuple[str, ...]
    participants: tuple[str, ...]
    step: int
    reason: str
    callers: tuple[str, ...] = ()


def _hands(contenders: Mapping[str, Sequence[str] | SeotdaHand], rules: RankRules) -> dict[str, SeotdaHand]:
    """Evaluate every contender under ``rules`` (a SeotdaHand is re-evaluated from its cards,
    since the Pair Hunter depends on the rules) and refuse a card held twice."""
    hands: dict[str, SeotdaHand] = {}
    for name, held in contenders.items():
        try:
            hands[name] = evaluate(held.cards if isinstance(held, SeotdaHand) else held, rules)
        except ValueError as exc:  # CardError included
            raise type(exc)(f"{name}: {exc}") from None
    owners: dict[str, list[str]] = {}
    for name, hand in hands.items():
        for code in hand.cards:
            owners.setdefault(code, []).append(name)
    shared = {code: who for code, who in owners.items() if len(who) > 1}
    if shared:
        held = ", ".join(f"{code} ({' and '.join(who)})" for code, who in sorted(shared.items()))
        raise CardError(f"card(s) held twice: {held}")
    return hands


def _and(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def showdown(
    contenders: Mapping[str, Sequence[str]] | Mapping[str, SeotdaHand],
    rules: RankRules = DEFAULT_RULES,
    holder_choice: Mapping[str, bool] | None = None,
    *,
    allow_rematch: bool = True,
    ask: bool = False,
) -> Showdown:
    """Resolve ONE pot by §5 among its eligible contenders, given in seat order from S1.

    ``holder_choice`` answers the ``PROMPT`` mode (True = rematch, False = play on; a missing
    answer = timeout = as ``AUTO_BEST``); it is ignored in the other modes. With ``ask`` a
    missing answer is not taken as a timeout: the result is ``ASK`` naming the holder to ask
    (the table asks holders one at a time, in S1 order; one REMATCH is enough).
    ``allow_rematch=False`` is the ``MAX_REMATCHES`` limit reached (§7.2 rule 6): a 9·4 of
    either kind is ignored and a draw splits the pot.
    """
    hands = _hands(contenders, rules)
    names = list(hands)
    if not names:
        raise ValueError("showdown needs at least one contender")
    choices = dict(holder_choice or {})
    strangers = sorted(set(choices) - set(names))
    if strangers:
        raise ValueError(f"holder_choice names non-contenders {strangers} (contenders: {names})")
    if len(names) == 1:
        return Showdown("WIN", (names[0],), (), 0, f"{names[0]} is the only contender")

    def best_other(p: str) -> int:
        return max(hands[q].rank for q in names if q != p)

    def best_other_name(p: str) -> str:
        return max((hands[q] for q in names if q != p), key=lambda h: h.rank).name

    def holders(function: Function) -> list[str]:
        return [p for p in names if hands[p].function == function]

    def draw(tied: list[str], step: int, what: str) -> Showdown:
        if allow_rematch and rules.draw_resolution == "REMATCH":
            return Showdown("REMATCH_DRAW", (), tuple(tied), step, f"{what}: draw, rematch between {_and(tied)} only",
                            tuple(tied))
        why = "draw resolution SPLIT" if allow_rematch else "rematch limit reached"
        return Showdown("SPLIT", tuple(tied), (), step,
                        f"{what}: draw, pot split ({why}); an indivisible remainder goes to {tied[0]}")

    def rematch_94(step: int, function: Function, limit: int) -> Showdown | None:
        """§5 steps 2 and 4 with §5.2: None = not applied, the showdown goes on."""
        eligible = [p for p in holders(function) if best_other(p) <= limit]
        if not eligible or not allow_rematch:
            return None
        if ask and rules.rematch_94_mode == "PROMPT" and not any(choices.get(p) for p in eligible):
            unanswered = [p for p in eligible if p not in choices]
            if unanswered:
                p = unanswered[0]
                return Showdown("ASK", (), (), step, f"{p}'s {_FUNCTION_NAME[function]} faces at best "
                                f"{best_other_name(p)} (R {best_other(p)} <= {limit}): REMATCH or PLAY ON?",
                                callers=(p,))
        wanted: list[str] = []
        kept_best: str | None = None  # an AUTO_BEST holder who keeps the pot instead
        for p in eligible:
            unique_best = hands[p].rank > best_other(p)
            if rules.rematch_94_mode == "ALWAYS":
                wanted.append(p)
            elif rules.rematch_94_mode == "PROMPT" and p in choices:
                if choices[p]:
                    wanted.append(p)
            elif rules.rematch_94_mode == "PROMPT" and ask:
                continue  # not asked: another holder's REMATCH already decides
            elif unique_best:  # AUTO_BEST, or PROMPT without an answer
                kept_best = p
            else:
                wanted.append(p)
        label = _FUNCTION_NAME[function]
        if wanted:
            return Showdown("REMATCH_94", (), tuple(names), step,
                            f"{_and(wanted)}'s {label} faces at best {best_other_name(wanted[0])} "
                            f"(R {best_other(wanted[0])} <= {limit}): rematch of all contenders", tuple(wanted))
        if kept_best is not None:
            return Showdown("WIN", (kept_best,), (), step,
                            f"{kept_best}'s {label} may call a rematch but is itself the unique best hand "
                            f"(R {hands[kept_best].rank}), so none is applied (AUTO_BEST): {kept_best} wins")
        return None  # every holder chose to play on

    # 1. Bright Pair Hunter catches a 1·3 or 1·8 Bright Pair (never 3·8, §9.7).
    for p in holders("BRIGHT_PAIR_HUNTER"):
        if best_other(p) in (501, 502):
            return Showdown("WIN", (p,), (), 1, f"{p}'s Bright Pair Hunter catches {best_other_name(p)}")
    # 2. Animal 9·4: rematch against 9·9 or lower (§9.4; NINE_POINTS: 9 points or lower).
    animal_limit = 409 if rules.animal_94_threshold == "NINE_PAIR" else 209
    if (result := rematch_94(2, "ANIMAL_94", animal_limit)) is not None:
        return result
    # 3. Pair Hunter catches a pair 1·1..9·9 (never 10·10 or a bright pair, §9.8).
    hunters = [p for p in holders("PAIR_HUNTER") if 401 <= best_other(p) <= 409]
    if len(hunters) == 1:
        return Showdown("WIN", (hunters[0],), (), 3,
                        f"{hunters[0]}'s Pair Hunter catches {best_other_name(hunters[0])}")
    if hunters:  # only possible with ANY_3_7: equal hands that both catch the pair
        return draw(hunters, 3, f"Pair Hunters {_and(hunters)} both catch {best_other_name(hunters[0])}")
    # 4. 9·4: rematch against Al-li or lower (§9.11).
    if (result := rematch_94(4, "NINE_FOUR", 306)) is not None:
        return result
    # 5. Best base rank.
    top = max(hands[p].rank for p in names)
    tied = [p for p in names if hands[p].rank == top]
    if len(tied) == 1:
        return Showdown("WIN", (tied[0],), (), 5, f"{tied[0]}'s {hands[tied[0]].name} is the best hand")
    return draw(tied, 5, f"{_and(tied)} tie with {hands[tied[0]].name}")


# --- report for ``dealer hand seotda`` -----------------------------------------------------


def hand_report(
    cards: Sequence[str],
    vs: Sequence[Sequence[str]],
    rules: RankRules | None = None,
    *,
    allow_rematch: bool = True,
) -> dict[str, Any]:
    """JSON-safe report for ``dealer hand seotda 03G 08G --vs 04A 07A [--vs ...]``.

    ``cards`` is seat S1 and the ``vs`` hands are S2, S3, ... (clockwise), all in one pot.
    The outcome is ``winner`` (a seat), or ``rematch`` (kind and participants), or ``split``.
    """
    rules = rules or DEFAULT_RULES
    if isinstance(vs, str) or not vs or any(isinstance(h, str) for h in vs):
        raise ValueError("seotda needs at least one --vs hand, each a list of 2 card codes")
    contenders = {f"S{i}": list(hand) for i, hand in enumerate([cards, *vs], start=1)}
    result = showdown(contenders, rules, allow_rematch=allow_rematch)
    hands = _hands(contenders, rules)
    return {
        "game": "seotda",
        "rules": asdict(rules),
        "hands": [{"seat": seat, "cards": list(h.cards), "rank": h.rank, "name": h.name,
                   "category": h.category, "function": h.function} for seat, h in hands.items()],
        "winner": result.winners[0] if result.kind == "WIN" else None,
        "rematch": ({"kind": result.kind, "participants": list(result.participants)}
                    if result.kind.startswith("REMATCH") else None),
        "split": list(result.winners) if result.kind == "SPLIT" else None,
        "step": result.step,
        "reason": result.reason,
    }

