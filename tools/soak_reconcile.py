"""The soaks' reconciliation (pure: plain rows in, discrepancies out): every opened round has
exactly one applied result, every delivery the same bytes, every bet one ledger line at the
amount the core settles, chips conserved, every cancellation and timer move with its cause.
Both soaks (``tools/soak.py``, ``tools/soak_nodes.py``) hand it a :class:`SoakData`."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from dealer.core.messages import RoundResult, RoundResultPart
from dealer.core.result_parts import join_parts
from dealer.core.round_ids import sequence_of
from dealer.core.settlement import settle_bet
from simulators.player_parts import deal_number
from tools.soak_games import TURN_GAMES
from tools.soak_judge import Replay, compare_results, judge_timers, peer_money


PLAYER_BANKROLL = Decimal("100000.00")
HOUSE_BANKROLL = Decimal("10000000.00")


_CANCEL_REASON = re.compile(r"^link (broker|scanner:[A-Z0-9-]+) down before the round started")
_TOO_FEW = re.compile(r"^[a-z-]+ needs at least (\d+) seated players, \d+ sat down$")


# ---------------------------------------------------------------------------------------------
# Reconciliation (pure: plain rows in, discrepancies out)
# ---------------------------------------------------------------------------------------------


@dataclass
class SoakData:
    """Everything the reconciliation looks at, as plain rows.

    ``opened``/``closed``/``outbox_left`` come from the backend's journal, ``deliveries``
    from a subscriber on the settlement session (every copy of every result), ``applied``,
    ``bets`` and ``ledger`` from the settlement consumer's SQLite ledger.
    """

    tables: list[str]
    opened: dict[str, list[str]]  # table -> round ids opened, in order
    closed: set[str] = field(default_factory=set)  # round ids whose betting closed
    outbox_left: list[str] = field(default_factory=list)  # idempotency keys still in the outbox
    deliveries: dict[str, list[bytes]] = field(default_factory=dict)  # key -> every payload delivered
    applied: list[tuple[str, str]] = field(default_factory=list)  # (key, result JSON) per application
    bets: list[tuple[str, str, str, str, str]] = field(default_factory=list)  # bet_id, round_id, player, type, stake
    ledger: list[tuple[str, str, str, str, str, str, str]] = field(default_factory=list)
    # ^ bet_id, key, player, bet_type, stake, outcome, returned
    consumer_mismatches: list[str] = field(default_factory=list)
    must_cancel: dict[str, str] = field(default_factory=dict)  # key -> which fault demands it
    must_complete: dict[str, str] = field(default_factory=dict)
    #: round key -> the outage its deciders lived through (they must still decide themselves)
    must_not_time_out: dict[str, str] = field(default_factory=dict)
    #: every fault injected: (kind, start, end) on the backend's wall clock (epoch ms), so a
    #: round that went wrong names the faults it lived through
    faults: list[tuple[str, int, int]] = field(default_factory=list)
    #: round keys the backend journaled as acknowledged by settlement, one entry per ack journaled
    acked: list[str] | None = None
    player_bankroll: Decimal = PLAYER_BANKROLL
    house_bankroll: Decimal = HOUSE_BANKROLL
    #: the journal replayed through the core (tools/soak_judge.py); None: not judged
    replay: Replay | None = None
    #: (table, player, round, turn) a player left to the timer on purpose
    silent_turns: set[tuple[str, str, str, int]] = field(default_factory=set)
    games: dict[str, str] = field(default_factory=dict)  # table -> game


@dataclass
class Reconciliation:
    discrepancies: list[str]
    stats: dict[str, Any]


def _seq(round_id: str) -> int:
    seq = sequence_of(round_id)
    return -1 if seq is None else seq


def _per_game(results: dict[str, RoundResult], games: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Results by game (every game with a table, even one without a result yet)."""
    out: dict[str, dict[str, Any]] = {g: {"tables": 0, "results": 0, "completed": 0, "cancelled": 0, "voided": 0}
                                      for g in sorted(set(games.values()))}
    for g in games.values():
        out[g]["tables"] += 1
    for key, r in results.items():
        g = games.get(key.split(":", 1)[0], r.game)
        row = out.setdefault(g, {"tables": 0, "results": 0, "completed": 0, "cancelled": 0, "voided": 0})
        row["results"] += 1
        row[r.outcome.lower()] += 1
    return out


def _twice(cards: dict[str, str]) -> list[str]:
    """Cards registered twice within one deal (a Seotda rematch, a Matgo redeal, deal ``R{n}.``
    positions from all the cards again)."""
    seen: set[tuple[int, str]] = set()
    out = []
    for pos, card in cards.items():
        k = (deal_number(pos), card)
        if k in seen:
            out.append(f"{pos}={card}")
        seen.add(k)
    return out


def reconcile(data: SoakData) -> Reconciliation:
    d: list[str] = []
    stats: dict[str, Any] = {}

    # -- one result per opened round ------------------------------------------------------
    applied_by_key: dict[str, list[str]] = {}
    for key, body in data.applied:
        applied_by_key.setdefault(key, []).append(body)
    opened_keys: set[str] = set()
    for tid in data.tables:
        rids = data.opened.get(tid, [])
        seqs = [_seq(r) for r in rids]
        if seqs != list(range(1, len(seqs) + 1)):
            d.append(f"{tid}: opened round ids are not 1..{len(seqs)} in order: {rids[:5]}...")
        for rid in rids:
            key = f"{tid}:{rid}"
            opened_keys.add(key)
            n = len(applied_by_key.get(key, ()))
            if n == 0:
                d.append(f"{key}: no result applied (the round was opened)")
            elif n > 1:
                d.append(f"{key}: result applied {n} times")
    for key in sorted(set(applied_by_key) - opened_keys):
        d.append(f"{key}: result applied for a round the backend's journal never opened")
    for key in data.outbox_left:
        d.append(f"{key}: still in the backend's outbox after the drain")

    # -- deliveries: at least once, never different ----------------------------------------
    for key, payloads in sorted(data.deliveries.items()):
        distinct = set(payloads)
        if len(distinct) > 1:
            d.append(f"{key}: delivered {len(payloads)} times with {len(distinct)} different contents")
        for body in applied_by_key.get(key, ()):
            if body.encode() not in distinct:
                d.append(f"{key}: the applied result is not what was delivered")
    for key in sorted(set(applied_by_key) - set(data.deliveries)):
        if data.deliveries:  # when deliveries were recorded at all, every applied result was one
            d.append(f"{key}: applied but never seen delivered")

    # -- outcomes ----------------------------------------------------------------------------
    results: dict[str, RoundResult] = {}
    for key, bodies in applied_by_key.items():
        try:
            results[key] = RoundResult.model_validate_json(bodies[0])
        except ValueError as exc:
            d.append(f"{key}: applied result does not parse: {exc}")
    # A result in parts: its manifest was applied; join the parts delivered with it.
    in_parts = 0
    for key, r in list(results.items()):
        n = r.accepted_bets.parts
        if not n:
            continue
        in_parts += 1
        try:
            parts = [RoundResultPart.model_validate_json(data.deliveries[f"{key}#{i}/{n}"][0]) for i in range(1, n + 1)]
            results[key] = join_parts(r, parts)
        except (KeyError, ValueError) as exc:
            d.append(f"{key}: the result's {n} parts do not join: {exc}")
    outcomes = Counter(r.outcome for r in results.values())
    cancelled_by: Counter[str] = Counter()
    for key, r in sorted(results.items()):
        if r.idempotency_key != key:
            d.append(f"{key}: result carries idempotency key {r.idempotency_key!r}")
        if r.outcome == "CANCELLED":
            m = _CANCEL_REASON.match(r.reason or "")
            few = _TOO_FEW.match(r.reason or "")
            peer = r.game in TURN_GAMES
            if few is not None and r.accepted_bets.count < int(few.group(1)):
                cancelled_by["too_few_players"] += 1  # its players sat down too late (a loaded machine)
            elif m is None:
                d.append(f"{key}: CANCELLED but not by a link loss before its first card or betting closed: "
                         f"{r.reason!r}")
            else:
                cancelled_by[m.group(1).split(":")[0]] += 1
            # a turn game starts at its first card: a link lost between the close and it cancels (decks.md §5.3)
            if (r.closed_at is not None or r.round_id in data.closed) and not peer:
                d.append(f"{key}: CANCELLED after its betting had closed")
            if r.cards:
                d.append(f"{key}: CANCELLED with cards registered {r.cards}")
        elif r.outcome == "VOIDED":
            d.append(f"{key}: VOIDED, but nobody voids a round in this soak: {r.reason!r}")
        elif r.outcome == "COMPLETED" and _twice(r.cards):
            d.append(f"{key}: COMPLETED with a card registered twice in one deal: {_twice(r.cards)}")
    for key, why in sorted(data.must_cancel.items()):
        r = results.get(key)
        if r is not None and r.outcome != "CANCELLED":
            d.append(f"{key}: {why}, yet the round ended {r.outcome} (it must be CANCELLED and refunded)")
    for key, why in sorted(data.must_complete.items()):
        r = results.get(key)
        if r is not None and r.outcome != "COMPLETED":
            d.append(f"{key}: {why}, yet the round ended {r.outcome} (it must complete)")

    # -- no player timed out: the soak's players always answer within their window ---------
    timed_out = 0
    for key, r in sorted(results.items()):
        late = sorted(p for p, dec in r.decisions.items() if dec.by == "timeout")
        timed_out += len(late)
        if late:
            why = data.must_not_time_out.get(key)
            if why is None:
                lived = [f"{kind} at {int(start - r.opened_at):+d} ms for {int(end - start)} ms" for kind, start, end in data.faults
                         if start <= r.finished_at and end >= r.opened_at]
                why = ("an outage (its players always answer in time); faults from its opening: "
                       + (", ".join(lived) or "none"))
            d.append(f"{key}: {', '.join(late)} timed out by the decision timer after {why}")
    for key in sorted(data.must_not_time_out):
        r = results.get(key)
        if r is not None and r.outcome == "COMPLETED" and not r.decisions and r.game == "sevenluck":
            d.append(f"{key}: completed without the decisions it was waiting for")

    # -- every result acknowledged by settlement, once -----------------------------------------
    if data.acked is not None:
        acks = Counter(data.acked)
        for key in sorted(opened_keys):
            if acks.get(key, 0) == 0:
                d.append(f"{key}: the backend never journaled settlement's acknowledgement")
            elif acks[key] > 1:
                d.append(f"{key}: acknowledgement journaled {acks[key]} times")
        for key in sorted(set(acks) - opened_keys):
            d.append(f"{key}: acknowledgement journaled for a round the journal never opened")

    # -- every bet exactly once, at the right amount ----------------------------------------
    # A Sevenluck PLAY decision places a Play bet (the ante's id + ":play") at the stake the
    # result records: it is placed, and accepted, when the decision is made.
    bets = list(data.bets)
    plays: set[str] = set()
    antes: dict[tuple[str, str], list[str]] = {}
    for b in data.bets:
        if b[3] == "ante":
            antes.setdefault((b[1], b[2]), []).append(b[0])
    for key, r in results.items():
        for player, dec in r.decisions.items():
            if dec.play_stake is None:
                continue
            ante = next((b for b in antes.get((r.round_id, player), []) if b in r.accepted_bets.bet_ids), None)
            if ante is None:
                d.append(f"{key}: {player} played without an accepted ante")
                continue
            bets.append((f"{ante}:play", r.round_id, player, "play", str(dec.play_stake)))
            plays.add(f"{ante}:play")
    placed: dict[str, tuple[str, str, str, str, str]] = {}
    for row in bets:
        if row[0] in placed:
            d.append(f"bet {row[0]}: placed twice in the ledger's bet book")
        placed[row[0]] = row
    lines: dict[str, list[tuple[str, str, str, str, str, str, str]]] = {}
    for line in data.ledger:
        lines.setdefault(line[0], []).append(line)
    for bet_id, (_, round_id, *_rest) in placed.items():
        n = len(lines.get(bet_id, ()))
        if n == 0:
            d.append(f"bet {bet_id} (round {round_id}): never settled or refunded")
        elif n > 1:
            d.append(f"bet {bet_id} (round {round_id}): settled {n} times")
    for bet_id in sorted(set(lines) - set(placed)):
        d.append(f"bet {bet_id}: ledger line for a bet that was never placed")
    by_outcome: Counter[str] = Counter()
    for bet_id, key, player, bet_type, stake_s, outcome, returned_s in data.ledger:
        by_outcome[outcome] += 1
        stake, returned = Decimal(stake_s), Decimal(returned_s)
        bet = placed.get(bet_id)
        if bet is not None:
            if f"{key.split(':', 1)[0]}:{bet[1]}" != key:
                d.append(f"bet {bet_id}: placed in round {bet[1]} but settled against {key}")
            if Decimal(bet[4]) != stake or bet[2] != player or bet[3] != bet_type:
                d.append(f"bet {bet_id}: ledger line {player}/{bet_type}/{stake} differs from the bet placed "
                         f"{bet[2]}/{bet[3]}/{bet[4]}")
        if returned < 0:
            d.append(f"bet {bet_id}: negative return {returned}")
        r = results.get(key)
        if r is None:
            d.append(f"bet {bet_id}: settled against {key}, which has no applied result")
            continue
        accepted = bet_id in r.accepted_bets.bet_ids or bet_id in plays
        if not accepted:
            want_outcome, want_returned = "NOT_ACCEPTED", stake
        else:
            try:
                s = settle_bet(bet_type, stake, r, player)
                want_outcome, want_returned = s.outcome, s.returned
            except ValueError as exc:
                d.append(f"bet {bet_id}: cannot be settled against {key}: {exc}")
                continue
        if outcome != want_outcome or returned != want_returned:
            d.append(f"bet {bet_id} ({key}): ledger says {outcome} {returned}, the result gives "
                     f"{want_outcome} {want_returned}")
        if r.outcome in ("CANCELLED", "VOIDED") and outcome not in ("REFUND", "NOT_ACCEPTED"):
            d.append(f"bet {bet_id}: {outcome} in a {r.outcome} round (only refunds are allowed)")
        if outcome == "REFUND" and returned != stake:
            d.append(f"bet {bet_id}: refund of {returned} for a stake of {stake}")
    for key, r in sorted(results.items()):
        unknown = [b for b in r.accepted_bets.bet_ids if b not in placed]
        if unknown:
            d.append(f"{key}: the backend accepted bets nobody placed: {unknown[:5]}")
        strays = [b for b in r.accepted_bets.bet_ids if b in placed and placed[b][1] != r.round_id]
        if strays:
            d.append(f"{key}: the backend accepted bets placed for another round (a bet names no round, so a "
                     f"late one lands in whichever round is open): {[(b, placed[b][1]) for b in strays[:5]]}")
    d.extend(f"settlement consumer: {m}" for m in data.consumer_mismatches)

    # -- chips are conserved ------------------------------------------------------------------
    wallets = {p: data.player_bankroll for p in sorted({b[2] for b in bets} | {x[2] for x in data.ledger})}
    house, escrow = data.house_bankroll, Decimal(0)
    before = data.player_bankroll * len(wallets) + data.house_bankroll
    for _, _, player, _, stake_s in bets:  # the stake leaves the wallet when the bet is placed
        wallets[player] -= Decimal(stake_s)
        escrow += Decimal(stake_s)
    for _, _, player, _, stake_s, _, returned_s in data.ledger:  # ... and its line releases it
        stake, returned = Decimal(stake_s), Decimal(returned_s)
        escrow -= stake
        wallets[player] += returned
        house += stake - returned
    after = sum(wallets.values(), Decimal(0)) + house
    players_net = sum(wallets.values(), Decimal(0)) - data.player_bankroll * len(wallets)
    house_net = house - data.house_bankroll
    if escrow != 0:
        d.append(f"chips not conserved: {escrow} still in escrow (stakes placed minus stakes settled or refunded)")
    # -- the turn games' hands: chips brought = chips returned + rake, pots hold what was put in -------
    brought: dict[str, dict[str, Decimal]] = {}
    for key, r in results.items():
        if r.game in TURN_GAMES:
            for bet_id in r.accepted_bets.bet_ids:
                row = placed.get(bet_id)
                if row is not None:
                    mine = brought.setdefault(key, {})
                    mine[row[2]] = mine.get(row[2], Decimal(0)) + Decimal(row[4])
    money_d, money = peer_money(results, brought)
    d.extend(money_d)
    # -- every game, from the journal replayed through the core ---------------------------------
    per_game = _per_game(results, data.games)
    if data.replay is not None:
        rp = data.replay
        d.extend(rp.problems)
        d.extend(compare_results(rp.results, results))
        d.extend(rp.dealt_twice)
        d.extend(f"a house AI move the core refuses on replay: {x}" for x in rp.house_refused)
        timer_d, causes = judge_timers(rp.timer_moves, data.silent_turns, data.faults)
        d.extend(timer_d)
        stats["timer_moves"] = causes
        stats["replay"] = {"rows": rp.rows, "results": len(rp.results), "house_moves": rp.house_moves,
                           "refused_rows": dict(sorted(rp.refused.items())), "refused_examples": rp.refused_examples[:5]}
        for game in per_game:
            moves = [m for m in rp.timer_moves if data.games.get(m.table_id) == game]
            per_game[game]["timer_moves"] = judge_timers(moves, data.silent_turns, data.faults)[1]
            per_game[game]["played"] = dict(sorted(rp.coverage.get(game, Counter()).items()))
    stats["games"] = per_game
    stats["peer_money"] = money
    if players_net + house_net != 0 or after + escrow != before:
        d.append(f"chips not conserved: players net {players_net} + house net {house_net} != 0 "
                 f"(before {before}, after {after})")

    stats.update(
        results=len(results), completed=outcomes.get("COMPLETED", 0), cancelled=outcomes.get("CANCELLED", 0),
        voided=outcomes.get("VOIDED", 0), cancelled_by=dict(sorted(cancelled_by.items())),
        deliveries=sum(len(v) for v in data.deliveries.values()),
        results_in_parts=in_parts,
        decisions={"by_timeout": timed_out,
                   "made": sum(len(r.decisions) for r in results.values())},
        acks=len(data.acked) if data.acked is not None else None,
        bets={"placed": len(placed), "ledger_lines": len(data.ledger),
              **{k.lower(): v for k, v in sorted(by_outcome.items())}},
        chips={"before": str(before), "after": str(after), "escrow": str(escrow),
               "players_net": str(players_net), "house_net": str(house_net)},
    )
    return Reconciliation(d, stats)
