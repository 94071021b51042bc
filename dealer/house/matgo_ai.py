"""Matgo players (``matgo.md``): a uniform random player, a greedy player and the shipped AI.

Every player has one method, ``choose(game, seat, rng) -> Move``, called when ``seat`` must
act in a decision phase (PLAY, CHOOSE_A, CHOOSE_B, DECIDE; never FLIP: the stock card is
turned over by the dealer). ``game`` is a :class:`~dealer.games.matgo_engine.MatgoGame` and a
player reads only what ``seat`` knows at the table: its own hand, the layout, both captured
piles, the cards in transit this turn, the Stop/Go state, ``unseen(seat)`` and
``view(seat)``. It never reads the opponent's hand and never sees the stock (the engine does
not store it).

* :class:`RandomPlayer`: a legal move drawn uniformly.
* :class:`GreedyPlayer`: the capture worth most now (gain in its own combination score plus
  the junk units it takes), deterministic tie-breaks; Stops as soon as it may.
* :class:`PolicyPlayer`: the search's playout policy alone, without noise and without search
  (what the search starts from; the arena measures what the search adds).
* :class:`SearchPlayer` (the shipped AI): determinized Monte-Carlo search. Each iteration
  deals the cards it has not seen into an opponent hand of the right size and a stock order
  (uniformly at random: information-set sampling), then, for every candidate move, plays
  the game to the end with a fast randomized heuristic policy for both seats, and scores the
  playout by the payment points from its own side (won: +points, lost: -points, Nagari: 0).
  All candidate moves share the same sampled deals (common random numbers), and the move
  with the best mean wins. Go/Stop compares the certain payment of stopping now with the
  estimated value of going on. The search runs until ``budget_ms`` (default 100 ms on one
  core) is spent, or exactly ``playouts`` sampled deals when that is given (deterministic,
  for tests and reproducible benchmarks).

The playouts run on the engine itself (:meth:`MatgoGame.determinize` and the unverified
fast path :meth:`MatgoGame.step`), so the search plays by exactly the same rules as the
table. The playout policy reads the engine's bit-mask state (``hand_masks``, ``layout_mask``,
``captured_masks``, ...: the playout API of :mod:`dealer.games.matgo_engine`, no private
names) for speed; it only ever runs on a determinized clone whose hidden cards are the
search's own sample.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from typing import Protocol

from dealer.games.matgo_cards import ALL, BLUE, BRIGHTS, CODES, GODORI, INDEX, PLAIN, RED, SAME_MONTH, VALUE, bits
from dealer.games.matgo_engine import MatgoGame, score
from dealer.games.matgo_moves import CHOOSE_MOVES, FLIP_MOVES, GO, PLAY_MOVES, STOP, Choose, Move, Phase, Play, Seat
from dealer.games.matgo_scoring import fast_total

__all__ = ["Player", "RandomPlayer", "GreedyPlayer", "PolicyPlayer", "SearchPlayer", "PLAYERS", "make_player",
           "DECISION_PHASES"]

DECISION_PHASES = frozenset({Phase.PLAY, Phase.CHOOSE_A, Phase.CHOOSE_B, Phase.DECIDE})


class Player(Protocol):
    name: str

    def choose(self, game: MatgoGame, seat: Seat, rng: random.Random) -> Move: ...


def _check_turn(game: MatgoGame, seat: Seat) -> None:
    if game.phase not in DECISION_PHASES:
        raise ValueError(f"no player decision in phase {game.phase} (the dealer turns the stock over)")
    if game.to_move != seat:
        raise ValueError(f"it is {game.to_move}'s move, not {seat}'s")


# --- card tables: dealer.games.matgo_cards (a card is an index into CODES, a set of cards a mask) ---


def _junk_units(code: str) -> int:
    return (2 if code.endswith("JD") else 1) if code[2] == "J" else 0


# --- random -----------------------------------------------------------------------------------


class RandomPlayer:
    """A legal move drawn uniformly (Go and Stop alike)."""

    name = "random"

    def choose(self, game: MatgoGame, seat: Seat, rng: random.Random) -> Move:
        _check_turn(game, seat)
        return rng.choice(game.legal())


# --- greedy -----------------------------------------------------------------------------------


class GreedyPlayer:
    """The capture worth most now; Stop as soon as allowed.

    PLAY: for every hand card, the cards its step A would capture (one layout card of the
    month: that pair; two: the pair with the better of the two; three: all four), valued as
    the gain in its own combination score plus the junk units taken (cards, and the junk a
    triple capture takes from the opponent). Ties: more valuable captured cards, then, when
    nothing is captured, the least valuable card is thrown, then the lowest code.
    CHOOSE: the layout card with the larger gain (ties: more valuable, then lowest code).
    DECIDE: Stop. Deterministic: the rng is not used.
    """

    name = "greedy"

    def choose(self, game: MatgoGame, seat: Seat, rng: random.Random) -> Move:
        _check_turn(game, seat)
        phase = game.phase
        if phase == Phase.DECIDE:
            return STOP
        captured = list(game.captured[seat])
        base = score(captured).total
        if phase == Phase.PLAY:
            by_month: dict[int, list[str]] = {}
            for stack in game.layout:
                by_month[stack.month] = list(stack.cards)
            best: tuple | None = None
            best_move: Move | None = None
            for move in game.legal():
                assert isinstance(move, Play)  # in the play phase legal() makes only Play moves
                card = move.card
                lay = by_month.get(int(card[:2]), [])
                if not lay:
                    key: tuple = (0, 0, 0, -VALUE[INDEX[card]], -INDEX[card])
                else:
                    if len(lay) == 2:
                        take = [max(lay, key=lambda c: self._option_key(captured, base, [card], c))]
                        steal = 0
                    else:
                        take = lay
                        steal = 0 if len(lay) == 1 else self._triple_steal(game, seat, int(card[:2]))
                    cards = [card, *take]
                    gain = (score(captured + cards).total - base + sum(_junk_units(c) for c in cards) + steal)
                    key = (gain, 1, sum(VALUE[INDEX[c]] for c in cards), 0, -INDEX[card])
                if best is None or key > best:
                    best, best_move = key, move
            assert best_move is not None
            return best_move
        # CHOOSE_A / CHOOSE_B: the pending cards of the turn come along with the choice
        pending = list(game.pending)
        options = [m.card for m in game.legal() if isinstance(m, Choose)]  # the choose phases make only Choose moves
        pick = max(options, key=lambda c: self._option_key(captured, base, pending, c))
        return Choose(pick)

    @staticmethod
    def _option_key(captured: list[str], base: int, pending: list[str], card: str) -> tuple:
        cards = [*pending, card]
        gain = score(captured + cards).total - base + sum(_junk_units(c) for c in cards)
        return gain, VALUE[INDEX[card]], -INDEX[card]

    @staticmethod
    def _triple_steal(game: MatgoGame, seat: Seat, month: int) -> int:
        for stack in game.layout:
            if stack.month == month:
                if stack.origin == "PPUK":
                    rule = game.rules.ppuk_capture_steal
                    return 2 if rule == "ANY_PPUK_2" or stack.maker == seat else 1
                return 1
        return 0


# --- search -----------------------------------------------------------------------------------

# Playout policy card weights: what a captured card is worth to its taker (points-ish), with
# bonuses when the taker is close to a combination (three brights, Godori, a ribbon set).


#: Default playout-policy weights: what a captured card is worth to its taker (G: bright,
#: rain: 12G, bird: a Godori bird, cup: 09A, A: other animals, setR: a ribbon of a set,
#: R12: 12R, J/JD: junk), the bonus when the taker already holds two of the card's group
#: (bonG: brights, bonBird: Godori, bonR: the ribbon set) and the share of that bonus a
#: capture is worth for denying it to the opponent (deny).
WEIGHTS: dict[str, float] = {"G": 4.0, "rain": 3.0, "bird": 3.0, "cup": 3.0, "A": 2.0, "setR": 2.2, "R12": 1.5,
                             "J": 1.0, "JD": 2.0, "bonG": 3.0, "bonBird": 4.0, "bonR": 2.5, "deny": 0.5}


def _weight(code: str, w: dict[str, float]) -> float:
    t = code[2]
    if t == "G":
        return w["rain"] if code == "12G" else w["G"]
    if t == "A":
        return w["cup"] if code == "09A" else w["bird"] if code in ("02A", "04A", "08A") else w["A"]
    if t == "R":
        return w["R12"] if code == "12R" else w["setR"]
    return w["JD"] if code.endswith("JD") else w["J"]


def _group(code: str, w: dict[str, float]) -> tuple[int, float]:
    """(mask of the card's combination group, bonus when the taker already holds two of it)."""
    bit = 1 << INDEX[code]
    if bit & BRIGHTS:
        return BRIGHTS, w["bonG"]
    if bit & GODORI:
        return GODORI, w["bonBird"]
    for s in (RED, BLUE, PLAIN):
        if bit & s:
            return s, w["bonR"]
    return 0, 0.0


_GRP = tuple(_group(c, WEIGHTS)[0] for c in CODES)


def _take_value(i: int, mine: int, theirs: int, W: tuple[float, ...], BON: tuple[float, ...], deny: float) -> float:
    """Value of capturing card ``i``: its weight, plus a bonus if I hold two of its group
    (three brights, Godori, a ribbon set), plus a share of that if it denies the opponent one."""
    w = W[i]
    grp = _GRP[i]
    if grp:
        if (mine & grp).bit_count() >= 2:
            w += BON[i]
        if (theirs & grp).bit_count() >= 2:
            w += deny * BON[i]
    return w


class _Policy:
    """The fast randomized playout policy (both seats). Works on the engine's bit masks.

    PLAY: the hand card whose step-A capture is worth most (:func:`_take_value`), a thrown card
    counting as a small loss (what it could give the opponent), plus a little noise; with
    probability ``eps`` a uniformly random hand card. CHOOSE: the more valuable card.
    DECIDE: Stop. The AI weighs a won game at ``win_bonus`` above its points and goes on only
    when going is clearly worth more, so Stop is the better model of its own later play. With
    ``go_turns`` set: Go while at least that many own turns remain and the opponent's score
    is at most ``go_opp_max``.
    """

    __slots__ = ("W", "BON", "deny", "eps", "go_turns", "go_opp_max", "noise", "throw", "opp_stop", "locked",
                 "throw_u", "k2_pen", "triple_bonus", "pair_throw", "contest")

    def __init__(self, eps: float = 0.1, go_turns: int | None = None, go_opp_max: int = 3, noise: float = 0.3,
                 throw: float = 0.6) -> None:
        self.eps = eps
        self.go_turns = go_turns
        self.go_opp_max = go_opp_max
        self.noise = noise
        self.throw = throw
        self.opp_stop = True
        self.locked = 2.0
        self.throw_u = (0.1, 0.8, 1.0, 1.2)
        self.k2_pen = 1.0
        self.triple_bonus = 1.5
        self.pair_throw = 0.5
        self.contest = 1.0
        self.set_weights()

    def set_weights(self, **weights: float) -> None:
        w = {**WEIGHTS, **weights}
        unknown = set(w) - set(WEIGHTS)
        if unknown:
            raise ValueError(f"unknown policy weight(s): {sorted(unknown)}")
        self.W = tuple(_weight(c, w) for c in CODES)
        self.BON = tuple(_group(c, w)[1] for c in CODES)
        self.deny = w["deny"]

    def play(self, g: MatgoGame, rnd: Callable[[], float]) -> int:
        p = g.mover
        h = g.hand_masks[p]
        if rnd() < self.eps:
            b = bits(h)
            return b[int(rnd() * len(b))]
        lay = g.layout_mask
        mine = g.captured_masks[p]
        theirs = g.captured_masks[1 - p]
        unseen = ALL ^ (g.hand_masks[p] | lay | mine | theirs | g.pending_mask)
        hand = h
        noise, throw, locked, throw_u, pair_throw = self.noise, self.throw, self.locked, self.throw_u, self.pair_throw
        k2_pen, triple_bonus, contest = self.k2_pen, self.triple_bonus, self.contest
        W, BON, MM, deny = self.W, self.BON, SAME_MONTH, self.deny
        best = -1e9
        pick = -1
        while h:
            low = h & -h
            h ^= low
            i = low.bit_length() - 1
            ml = lay & MM[i]
            if not ml:  # thrown: worth to the opponent what it is worth to a taker
                v = _take_value(i, theirs, mine, W, BON, deny)
                v = -throw * v * throw_u[(unseen & MM[i]).bit_count()]
                if pair_throw and hand & MM[i] & ~low:
                    v += pair_throw
            else:
                v = _take_value(i, mine, theirs, W, BON, deny)
                if ml & (ml - 1) == 0:  # one card
                    v += _take_value(ml.bit_length() - 1, mine, theirs, W, BON, deny)
                    took = low | ml
                else:
                    k = ml.bit_count()
                    if k == 2:
                        a = ml & -ml
                        va = _take_value(a.bit_length() - 1, mine, theirs, W, BON, deny)
                        vb = _take_value(ml.bit_length() - 1, mine, theirs, W, BON, deny)
                        v += (va if va > vb else vb) - k2_pen  # the other card stays for the opponent
                        took = low | (a if va > vb else ml ^ a)
                    else:
                        took = low | ml
                        while ml:
                            lo = ml & -ml
                            ml ^= lo
                            v += _take_value(lo.bit_length() - 1, mine, theirs, W, BON, deny)
                        v += triple_bonus  # the junk a triple takes
                if not unseen & MM[i]:  # the pair is mine whenever I want it
                    v -= locked
                elif took.bit_count() == 2:
                    v += contest
            v += rnd() * noise
            if v > best:
                best, pick = v, i
        return pick

    def pick(self, g: MatgoGame) -> int:
        p = g.mover
        m = g.options_mask
        a = (m & -m).bit_length() - 1
        b = m.bit_length() - 1
        mine, theirs = g.captured_masks[p], g.captured_masks[1 - p]
        W, BON, deny = self.W, self.BON, self.deny
        return a if _take_value(a, mine, theirs, W, BON, deny) >= _take_value(b, mine, theirs, W, BON, deny) else b

    def go(self, g: MatgoGame) -> bool:
        p = g.mover
        if self.go_turns is None or (20 - g.turn) // 2 < self.go_turns:  # own turns after this one
            return False
        return g.go_count[g.to_move] < 3 and fast_total(g.captured_masks[1 - p]) <= self.go_opp_max


def _playout(g: MatgoGame, stock: list[int], me: str, rnd: Callable[[], float], pol: _Policy, bonus: float) -> float:
    """Play ``g`` (a determinized clone) to the end; its value from ``me``'s side: won
    ``points + bonus``, lost ``-(points + bonus)``, Nagari 0."""
    si = 0
    step = g.step
    P_PLAY, P_FLIP, P_DEC = Phase.PLAY, Phase.FLIP, Phase.DECIDE
    play, pick, go = pol.play, pol.pick, pol.go
    ostop = pol.opp_stop
    mi = 0 if me == "F" else 1
    while g.result is None:
        ph = g.phase
        if ph is P_FLIP:
            step(FLIP_MOVES[stock[si]])
            si += 1
        elif ph is P_PLAY:
            step(PLAY_MOVES[play(g, rnd)])
        elif ph is P_DEC:
            if ostop and g.mover != mi:
                step(STOP)
            else:
                step(GO if go(g) else STOP)
        else:
            step(CHOOSE_MOVES[pick(g)])
    r = g.result
    if r.winner is None:
        return 0.0
    return r.payment_points + bonus if r.winner == me else -r.payment_points - bonus


def _distinct_moves(moves: list[Move]) -> list[Move]:
    """Drop hand cards that are exact equivalents (two single junk cards of one month)."""
    out: list[Move] = []
    seen: set[int] = set()
    for m in moves:
        if isinstance(m, Play):
            c = m.card
            if c[2] == "J" and not c.endswith("JD"):
                month = int(c[:2])
                if month in seen:
                    continue
                seen.add(month)
        out.append(m)
    return out


class SearchPlayer:
    """The shipped AI: determinized Monte-Carlo search (module docstring).

    ``budget_ms``: thinking time per move (wall clock, one core). ``playouts``: if given, the
    clock is not used: the search spends ``playouts`` playouts per candidate move (the
    flat-search equivalent), fully deterministic for a given ``rng``. ``win_bonus`` is added
    to the payment points of a won or lost playout (0: pure payment points; larger values
    weigh the chance of winning more). Candidate moves are narrowed by sequential halving:
    the budget is split into rounds, and after each round the worse half is dropped.

    The playout policy's own choice (its "prior" move; Stop at a decision point) is kept to
    the end, and the search only overrides it when the best move beats it by ``z`` standard
    errors of the paired difference (every candidate is played on the same sampled deals):
    a noisy estimate never replaces a sound heuristic move.
    """

    name = "search"

    def __init__(self, budget_ms: float = 100.0, playouts: int | None = None, *, win_bonus: float = 100.0,
                 eps: float = 0.1, safety: float = 0.8, halving: bool = True, z: float = 2.0) -> None:
        if not budget_ms > 0:
            raise ValueError("budget_ms must be positive")
        if playouts is not None and playouts < 1:
            raise ValueError("playouts must be >= 1")
        self.budget_ms = float(budget_ms)
        self.playouts = playouts
        self.safety = safety
        self.win_bonus = float(win_bonus)
        self.halving = halving
        self.z = z
        self.policy = _Policy(eps=eps)
        self.last_stats: dict[str, object] = {}

    def _prior(self, game: MatgoGame, moves: list[Move]) -> int:
        """Index in ``moves`` of the playout policy's noiseless choice (Stop when deciding)."""
        ph = game.phase
        if ph == Phase.DECIDE:
            return moves.index(STOP)
        if ph == Phase.PLAY:
            pol = self.policy
            eps, noise = pol.eps, pol.noise
            pol.eps = pol.noise = 0.0
            try:
                i = pol.play(game, _no_random)
            finally:
                pol.eps, pol.noise = eps, noise
            card = CODES[i]
        else:
            card = CODES[self.policy.pick(game)]
        for k, m in enumerate(moves):
            if getattr(m, "card", None) == card:
                return k
        # an equivalent junk card was merged away: the one of the same month
        month = card[:2]
        for k, m in enumerate(moves):
            c = getattr(m, "card", "")
            if c[:2] == month and c[2] == "J" and not c.endswith("JD"):
                return k
        return 0  # pragma: no cover

    def choose(self, game: MatgoGame, seat: Seat, rng: random.Random) -> Move:
        t0 = time.perf_counter()
        _check_turn(game, seat)
        legal = game.legal()
        if len(legal) == 1:
            self.last_stats = {"samples": 0, "moves": 1}
            return legal[0]
        view = game.view(seat)  # what this seat knows; the opponent's hand is not in it
        unseen = [INDEX[c] for c in view.unseen]
        n_opp = view.opponent_hand_size
        moves = _distinct_moves(legal)
        prior = self._prior(game, moves)
        bonus = self.win_bonus
        # a Stop's value is certain; every other move is estimated by playouts
        fixed: dict[int, float] = {}
        for k, m in enumerate(moves):
            if m == STOP:
                g = game.clone()
                g.step(STOP)
                res = g.result
                assert res is not None  # a Stop ends the game
                fixed[k] = res.payment_points + bonus if res.winner == seat else -(res.payment_points + bonus)
        cands = [k for k in range(len(moves)) if k not in fixed]
        vals: list[list[float]] = [[] for _ in moves]
        rounds = max(1, math.ceil(math.log2(len(cands)))) if self.halving and len(cands) > 1 else 1
        total = None if self.playouts is None else self.playouts * len(cands)
        budget_s = self.budget_ms * self.safety / 1000.0
        rnd = rng.random
        pol = self.policy
        samples = 0
        for r in range(rounds):
            if total is not None:
                quota = max(1, round(total / rounds / len(cands)))  # sampled deals this round
                deadline: float | None = None
            else:
                quota = None
                deadline = t0 + budget_s * (r + 1) / rounds
            done = 0
            while True:
                if quota is not None:
                    if done >= quota:
                        break
                elif deadline is not None and done >= 1 and time.perf_counter() >= deadline:  # no quota: a deadline
                    break
                base, stock = self._sample(game, seat, unseen, n_opp, rng)
                for k in cands:
                    g = base.clone()
                    g.step(moves[k])
                    vals[k].append(_playout(g, stock, seat, rnd, pol, bonus))
                done += 1
            samples += done
            if r < rounds - 1:  # keep the better half (and the prior move)
                ranked = sorted(cands, key=lambda k: (-sum(vals[k]) / len(vals[k]), k))
                keep = set(ranked[: max(1, math.ceil(len(ranked) / 2))])
                if prior in cands:
                    keep.add(prior)
                cands = sorted(keep)
        values = {k: sum(vals[k]) / len(vals[k]) for k in cands}
        values.update(fixed)
        best = max(values, key=lambda k: (values[k], -k))
        choice = best
        if best != prior and prior in values:
            choice = best if self._significant(vals, fixed, best, prior) else prior
        self.last_stats = {"samples": samples, "moves": len(moves), "rounds": rounds, "prior": str(moves[prior]),
                           "values": {str(moves[k]): round(v, 3) for k, v in values.items()},
                           "ms": (time.perf_counter() - t0) * 1000.0}
        return moves[choice]

    @staticmethod
    def _sample(game: MatgoGame, seat: Seat, unseen: list[int], n_opp: int,
                rng: random.Random) -> tuple[MatgoGame, list[int]]:
        """One determinization: the unseen cards dealt uniformly into an opponent hand and a
        stock order (card indices, top first)."""
        sample = unseen[:]
        rng.shuffle(sample)
        return game.determinize(seat, [CODES[i] for i in sample[:n_opp]]), sample[n_opp:]

    def _significant(self, vals: list[list[float]], fixed: dict[int, float], best: int, prior: int) -> bool:
        """Does ``best`` beat ``prior`` by ``z`` standard errors (paired by sampled deal)?"""
        if self.z <= 0:
            return True
        if best in fixed:  # a certain Stop against an estimated move
            xs = vals[prior]
            diffs = [fixed[best] - x for x in xs]
        elif prior in fixed:
            diffs = [x - fixed[prior] for x in vals[best]]
        else:
            n = min(len(vals[best]), len(vals[prior]))  # the same deals, in the same order
            a, b = vals[best], vals[prior]
            diffs = [a[j] - b[j] for j in range(n)]
        n = len(diffs)
        if n < 2:
            return False
        mean = sum(diffs) / n
        var = sum((d - mean) ** 2 for d in diffs) / (n - 1)
        return mean > self.z * math.sqrt(var / n)


def _no_random() -> float:
    return 0.0


class PolicyPlayer:
    """The search's prior alone: the playout policy without noise (Stop at once). No search:
    the arena measures what the search adds on top of it."""

    name = "policy"

    def __init__(self) -> None:
        self._search = SearchPlayer()

    def choose(self, game: MatgoGame, seat: Seat, rng: random.Random) -> Move:
        _check_turn(game, seat)
        moves = _distinct_moves(game.legal())
        return moves[self._search._prior(game, moves)]


PLAYERS = {"random": RandomPlayer, "greedy": GreedyPlayer, "policy": PolicyPlayer, "search": SearchPlayer}


def make_player(name: str, budget_ms: float = 100.0, playouts: int | None = None) -> Player:
    """A player by name: ``random``, ``greedy``, ``policy`` or ``search``."""
    if name == "search":
        return SearchPlayer(budget_ms=budget_ms, playouts=playouts)
    if name == "random":
        return RandomPlayer()
    if name == "greedy":
        return GreedyPlayer()
    if name == "policy":
        return PolicyPlayer()
    raise ValueError(f"unknown player {name!r} (known: {', '.join(PLAYERS)})")
