"""``dealer matgo-arena``: seeded Matgo deals between two players (:mod:`dealer.house.matgo_ai`).

The harness owns the deck: each deal shuffles the 48 cards, deals them by the deal plan
(:func:`~dealer.games.matgo_rules.deal_positions`) and keeps the other 20 as the stock, turned
over one by one as :class:`~dealer.games.matgo_moves.Flip` moves. Players only ever get the
game and their seat (they never see the stock, and the opponent's hand is theirs to ignore).
The one exception is ``oracle``, a yardstick that is handed the hidden cards on purpose
(:class:`OraclePlayer`); no table ever fields it.

Deals come in pairs over the same shuffle, once with player A first (F) and once with B first,
so the luck of the cards largely cancels ("duplicate" format). A redeal (§2.3) reshuffles
from the deal's own random stream; a chongtong ends the deal at once.

Everything is derived from ``--seed``: deal ``d`` uses its own ``random.Random`` streams, so
the results do not depend on how deals are spread over worker processes. With the search
player's time budget the number of playouts per move depends on the machine's speed; give
``--playouts`` for a bit-for-bit reproducible run.

Report: win rate of the decisive deals (Nagari excluded) with a 95 % Wilson interval,
draws, payment points per deal for each side, and move times (mean and p99, ms).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from dealer.core.cards import HWATU_48
from dealer.games.matgo_cards import INDEX
from dealer.games.matgo_engine import MatgoGame
from dealer.games.matgo_moves import Flip, Phase
from dealer.games.matgo_rules import STOCK_POSITIONS, MatgoRules, deal_positions, split_deal
from dealer.house.matgo_ai import PLAYERS, SearchPlayer, make_player

__all__ = ["wilson", "play_deal", "run_arena", "render", "register", "DealRecord", "OraclePlayer",
           "bench_playouts"]

SIDES = ("a", "b")


class OraclePlayer(SearchPlayer):
    """A yardstick, never a table player: the shipped search with the hidden cards revealed.

    Every determinization is the true deal (the opponent's real hand and the real order of the
    remaining stock, which the arena hands it before each move), so its playouts know what the
    shipped AI can only sample. Same policy, same budget, same move selection: its win rate
    bounds what better guessing of the hidden cards could ever add to the shipped AI.
    """

    name = "oracle"

    def __init__(self, budget_ms: float = 100.0, playouts: int | None = None) -> None:
        super().__init__(budget_ms=budget_ms, playouts=playouts)
        self.stock: list[str] = []

    def _sample(self, game: MatgoGame, seat: str, unseen: list[int], n_opp: int,  # type: ignore[override]  # an instance method (it keeps the stock) over the base staticmethod, seat as a plain str
                rng: random.Random) -> tuple[MatgoGame, list[int]]:
        return game.clone(), [INDEX[c] for c in self.stock]


#: players only the arena can field (they are handed the stock)
ARENA_ONLY = {"oracle": OraclePlayer}
KNOWN = sorted({**PLAYERS, **ARENA_ONLY})


def _player(name: str, budget_ms: float, playouts: int | None) -> Any:
    if name in ARENA_ONLY:
        return ARENA_ONLY[name](budget_ms, playouts)
    return make_player(name, budget_ms, playouts)
KINDS = ("STOP", "CHONGTONG", "THREE_PPUK", "NAGARI")


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion ``k/n`` (95 % by default)."""
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    p = k / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass
class DealRecord:
    deal: int
    a_seat: str
    kind: str
    winner: str | None  # "a", "b" or None
    points: int
    redeals: int
    turns: int
    move_ms: dict[str, list[float]]


def _deal_cards(rng: random.Random, rules: MatgoRules) -> tuple[MatgoGame, list[str], int]:
    """Shuffle and deal until no redeal is needed: (game, stock S1..S20, redeals)."""
    redeals = 0
    plan = deal_positions(rules)
    while True:
        deck = list(HWATU_48)
        rng.shuffle(deck)
        cards = {pos: deck[i] for i, (pos, _face) in enumerate(plan)}
        stock = deck[len(plan):]
        assert len(stock) == len(STOCK_POSITIONS)
        hands, layout = split_deal(cards)
        game = MatgoGame.start(hands=hands, layout=layout, first="F", rules=rules)
        if game.result is not None and game.result.kind == "REDEAL":
            redeals += 1
            continue
        return game, stock, redeals


def _decisions(game: MatgoGame, stock: list[str]) -> Iterator[int]:
    """Turn the stock cards over as the deal asks for them; yield at every player decision (the
    number of stock cards turned so far) until the deal is over."""
    si = 0
    while game.result is None:
        if game.phase == Phase.FLIP:
            game.apply(Flip(stock[si]))
            si += 1
        else:
            yield si


def play_deal(seed: int, deal: int, a: str, b: str, budget_ms: float = 100.0, playouts: int | None = None,
              rules: MatgoRules = MatgoRules()) -> DealRecord:
    """Play deal number ``deal`` of the run ``seed``. Even deals: A is F; odd deals: B is F;
    deals ``2k`` and ``2k+1`` share the same shuffle."""
    deal_rng = random.Random(f"matgo-arena:{seed}:shuffle:{deal // 2}")
    game, stock, redeals = _deal_cards(deal_rng, rules)
    a_seat = "F" if deal % 2 == 0 else "O"
    side_of = {a_seat: "a", ("O" if a_seat == "F" else "F"): "b"}
    players = {"a": _player(a, budget_ms, playouts), "b": _player(b, budget_ms, playouts)}
    rngs = {s: random.Random(f"matgo-arena:{seed}:player:{deal}:{s}") for s in SIDES}
    move_ms: dict[str, list[float]] = {"a": [], "b": []}
    for si in _decisions(game, stock):
        seat = game.to_move
        side = side_of[seat]
        view_game = game.clone()  # a player cannot disturb the real game
        if isinstance(players[side], OraclePlayer):
            players[side].stock = stock[si:]
        t0 = time.perf_counter()
        move = players[side].choose(view_game, seat, rngs[side])
        move_ms[side].append((time.perf_counter() - t0) * 1000.0)
        game.apply(move)  # raises on an illegal move
    r = game.result
    winner = side_of[r.winner] if r.winner is not None else None
    return DealRecord(deal, a_seat, r.kind, winner, r.payment_points, redeals, game.turn, move_ms)


def _play_chunk(args: tuple) -> list[DealRecord]:
    seed, deals, a, b, budget_ms, playouts, rules = args
    return [play_deal(seed, d, a, b, budget_ms, playouts, rules) for d in deals]


def _percentile(xs: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    if not xs:
        return 0.0
    s = sorted(xs)
    k = max(0, min(len(s) - 1, math.ceil(q / 100.0 * len(s)) - 1))
    return s[k]


def summarize(records: list[DealRecord], config: dict[str, Any]) -> dict[str, Any]:
    records = sorted(records, key=lambda r: r.deal)
    n = len(records)
    wins = {s: sum(1 for r in records if r.winner == s) for s in SIDES}
    decisive = wins["a"] + wins["b"]
    draws = sum(1 for r in records if r.winner is None)
    kinds = {k: sum(1 for r in records if r.kind == k) for k in KINDS}
    players: dict[str, Any] = {}
    for s in SIDES:
        o = "b" if s == "a" else "a"
        won = sum(r.points for r in records if r.winner == s)
        lost = sum(r.points for r in records if r.winner == o)
        times = [t for r in records for t in r.move_ms[s]]
        lo, hi = wilson(wins[s], decisive)
        first = [r for r in records if (r.a_seat == "F") == (s == "a")]
        first_wins = sum(1 for r in first if r.winner == s)
        first_dec = sum(1 for r in first if r.winner is not None)
        players[s] = {
            "name": config[s],
            "wins": wins[s],
            "win_rate": round(wins[s] / decisive, 4) if decisive else None,
            "win_rate_ci95": [round(lo, 4), round(hi, 4)],
            "wins_as_first": first_wins,
            "decisive_as_first": first_dec,
            "points_won": won,
            "points_lost": lost,
            "points_won_per_deal": round(won / n, 3) if n else 0.0,
            "net_points_per_deal": round((won - lost) / n, 3) if n else 0.0,
            "moves": len(times),
            "move_ms_mean": round(sum(times) / len(times), 3) if times else 0.0,
            "move_ms_p99": round(_percentile(times, 99), 3),
            "move_ms_max": round(max(times), 3) if times else 0.0,
        }
    return {
        "config": config,
        "deals": n,
        "decisive": decisive,
        "draws": draws,
        "draw_rate": round(draws / n, 4) if n else 0.0,
        "redeals": sum(r.redeals for r in records),
        "kinds": kinds,
        "players": players,
    }


def run_arena(a: str, b: str, deals: int, seed: int, budget_ms: float = 100.0, playouts: int | None = None,
              jobs: int = 1, rules: MatgoRules = MatgoRules(), progress: bool = False) -> dict[str, Any]:
    """Play ``deals`` deals and return the summary (see :func:`summarize`)."""
    for name in (a, b):
        if name not in KNOWN:
            raise ValueError(f"unknown player {name!r} (known: {', '.join(KNOWN)})")
    if deals < 1:
        raise ValueError("deals must be >= 1")
    jobs = max(1, min(jobs, deals))
    chunk = 2  # one duplicate pair per task: small tasks keep both cores busy to the end
    tasks = [(seed, list(range(i, min(i + chunk, deals))), a, b, budget_ms, playouts, rules)
             for i in range(0, deals, chunk)]
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=deals, desc=f"{a} vs {b}", unit="deal", file=sys.stderr, leave=False)
    records: list[DealRecord] = []
    t0 = time.perf_counter()
    try:
        if jobs == 1:
            for t in tasks:
                out = _play_chunk(t)
                records.extend(out)
                if bar is not None:
                    bar.update(len(out))
        else:
            import multiprocessing

            with multiprocessing.get_context("spawn").Pool(jobs) as pool:
                for out in pool.imap_unordered(_play_chunk, tasks):
                    records.extend(out)
                    if bar is not None:
                        bar.update(len(out))
    finally:
        if bar is not None:
            bar.close()
    config = {"a": a, "b": b, "deals": deals, "seed": seed, "budget_ms": budget_ms, "playouts": playouts,
              "jobs": jobs}
    summary = summarize(records, config)
    summary["wall_seconds"] = round(time.perf_counter() - t0, 1)
    return summary


def _ci(p: dict[str, Any]) -> str:
    lo, hi = p["win_rate_ci95"]
    wr = p["win_rate"]
    return "n/a" if wr is None else f"{100 * wr:5.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"


def render(summary: dict[str, Any]) -> str:
    c = summary["config"]
    mode = f"{c['playouts']} playouts/move" if c["playouts"] else f"budget {c['budget_ms']:g} ms/move"
    lines = [
        f"Matgo arena: A={c['a']} vs B={c['b']}, {summary['deals']} deals, seed {c['seed']}, {mode}, "
        f"{c['jobs']} job(s), {summary.get('wall_seconds', 0)} s",
        f"decisive {summary['decisive']}, Nagari draws {summary['draws']} ({100 * summary['draw_rate']:.1f}%), "
        f"redeals {summary['redeals']}, ends: "
        + ", ".join(f"{k} {v}" for k, v in summary["kinds"].items()),
        "",
        f"{'side':<4} {'player':<8} {'wins':>6} {'win rate [95% CI]':>24} {'won/deal':>9} {'net/deal':>9} "
        f"{'moves':>7} {'ms mean':>8} {'ms p99':>8} {'ms max':>8}",
    ]
    for s in SIDES:
        p = summary["players"][s]
        lines.append(
            f"{s.upper():<4} {p['name']:<8} {p['wins']:>6} {_ci(p):>24} {p['points_won_per_deal']:>9.2f} "
            f"{p['net_points_per_deal']:>9.2f} {p['moves']:>7} {p['move_ms_mean']:>8.2f} {p['move_ms_p99']:>8.2f} "
            f"{p['move_ms_max']:>8.2f}")
    return "\n".join(lines)


def _position(rng: random.Random, rules: MatgoRules) -> tuple[MatgoGame, str] | None:
    """A seeded random position: a fresh deal played on by uniform random moves for a random
    number of turns, stopped at a decision of at least two moves (None if the deal ends first)."""
    game, stock, _redeals = _deal_cards(rng, rules)
    target = rng.randrange(1, 19)  # the turn to stop at
    for _ in _decisions(game, stock):
        legal = game.legal()
        if game.turn >= target and len(legal) > 1:
            return game, game.to_move
        game.apply(rng.choice(legal))
    return None


def bench_playouts(positions: int, playouts: int, seed: int, rules: MatgoRules = MatgoRules()) -> dict[str, Any]:
    """Playout speed of the shipped AI: ``SearchPlayer(playouts=...)`` decides ``positions``
    seeded random positions (one core, no sequential halving, so that every candidate move gets
    exactly ``playouts`` playouts). ``playouts_per_second`` is over the process's CPU time (a
    shared machine's load does not count; ``wall_seconds`` is the wall clock).
    ``moves_digest`` fingerprints the decisions: equal digests mean the same moves."""
    if positions < 1 or playouts < 1:
        raise ValueError("positions and playouts must be >= 1")
    found: list[tuple[MatgoGame, str]] = []
    i = 0
    while len(found) < positions:
        pos = _position(random.Random(f"matgo-bench:{seed}:position:{i}"), rules)
        i += 1
        if pos is not None:
            found.append(pos)
    digest = hashlib.sha256()
    done = 0
    cpu = wall = 0.0
    for k, (game, seat) in enumerate(found):
        player = SearchPlayer(playouts=playouts, halving=False)
        rng = random.Random(f"matgo-bench:{seed}:search:{k}")
        c0, t0 = time.process_time(), time.perf_counter()
        move = player.choose(game.clone(), seat, rng)
        cpu += time.process_time() - c0
        wall += time.perf_counter() - t0
        stats = player.last_stats
        candidates = int(stats["moves"]) - (1 if game.phase == Phase.DECIDE else 0)  # a Stop is not played out
        done += int(stats["samples"]) * candidates
        digest.update(f"{k}:{move!r};".encode())
    return {"bench": "matgo-playouts", "positions": positions, "playouts_per_move": playouts, "seed": seed,
            "playouts": done, "cpu_seconds": round(cpu, 3), "wall_seconds": round(wall, 3),
            "playouts_per_second": round(done / cpu, 1) if cpu > 0 else None,
            "moves_digest": digest.hexdigest()[:16]}


def _cmd_arena(args: argparse.Namespace) -> int:
    if args.bench_playouts is not None:
        try:
            report = bench_playouts(args.bench_playouts, args.playouts or 20, args.seed)
        except ValueError as exc:
            print(f"dealer matgo-arena: {exc}", file=sys.stderr)
            return 2
        print(json.dumps(report, sort_keys=True))
        return 0
    try:
        summary = run_arena(args.a, args.b, args.deals, args.seed, budget_ms=args.budget_ms,
                            playouts=args.playouts, jobs=args.jobs,
                            progress=not args.quiet and sys.stderr.isatty())
    except ValueError as exc:
        print(f"dealer matgo-arena: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(summary, indent=2, sort_keys=True))
    else:
        print(render(summary))
    return 0


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``dealer matgo-arena`` to the ``dealer`` command's subparsers."""
    from dealer.cli.args import int_range, seconds

    p = subparsers.add_parser("matgo-arena", help="seeded Matgo deals between two players (search, policy, "
                              "greedy, random; oracle: the search shown the hidden cards): win rates with 95%% CIs, points per deal, AI move times")
    p.add_argument("--a", default="search", choices=KNOWN, help="player A (default search)")
    p.add_argument("--b", default="greedy", choices=KNOWN, help="player B (default greedy)")
    p.add_argument("--deals", type=int_range(1, 10_000_000), default=1000, help="deals to play (default 1000)")
    p.add_argument("--seed", type=int, default=1, help="seed of the deals (default 1)")
    p.add_argument("--budget-ms", type=seconds(0, 60_000, unit="milliseconds"), default=100.0,
                   help="search player's time per move (ms)")
    p.add_argument("--playouts", type=int_range(1, 10_000_000), default=None,
                   help="search player: a fixed number of sampled deals per move instead of the clock "
                        "(bit-for-bit reproducible)")
    p.add_argument("--jobs", type=int_range(1, 1024), default=os.cpu_count() or 1,
                   help="worker processes (default: all cores)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--bench-playouts", type=int_range(1, 1_000_000), default=None, metavar="N",
                   help="instead of deals: time the search's playouts over N seeded random positions (one core, "
                        "--playouts per candidate move, default 20) and print JSON with playouts per second")
    p.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    p.set_defaults(func=_cmd_arena)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.matgo_arena")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["matgo-arena", *(argv if argv is not None else sys.argv[1:])])
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
