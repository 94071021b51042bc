"""What ``dealer demo`` says, read as a croupier reads it (issue 28): Matgo's score and payment
apart, Stud's chips in, back and net (and who the timer folded), Sevenluck's folds, the
dealer's qualification and a silent player who antes, what really cancelled a round, one
RESCAN for one injected duplicate card, readable settlement JSON without null fields, and
``dealer simulate --help`` in plain words.

The pure parts (the log lines, the payout lines, the virtual dealer, the bet plan) are in the
fast tier; each game's demo, run whole on its PTY shoe, is in the integration tier."""

from __future__ import annotations

import contextlib
import io
import json
import random
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from dealer.core.messages import RoundEvent, RoundResult, StationPrompt
from dealer.core.settlement import settle_bet
from simulators.settlement import Payout
from simulators.shoe import VirtualShoe
from simulators.station import VirtualDealer
from tests.harness import RecordingReader
from tools.demo import RoundLog

RID = "T1-abcdefgh-000001"


def _event(name: str, **data: Any) -> RoundEvent:
    return RoundEvent(table_id="T1", round_id=RID, event=name, at=0, data=data)


def _result(game: str, **fields: Any) -> RoundResult:
    base: dict[str, Any] = dict(
        idempotency_key=f"T1:{RID}", table_id="T1", round_id=RID, game=game, outcome="COMPLETED",
        refund_all=False, accepted_bets={"count": 0, "stakes": {}, "bet_ids": []},
        money={"currency": "EUR", "minor_unit": "0.01", "rounding": "DOWN"}, opened_at=0, finished_at=1)
    return RoundResult.model_validate(base | fields)


def _log(game: str, *messages: Any) -> str:
    out = io.StringIO()
    log = RoundLog(out, game)
    for msg in messages:
        log("x", msg)
    return out.getvalue()


# -- Matgo: the score and the payment -------------------------------------------------------------


def _matgo_stop() -> RoundResult:
    """The house stops at 18 points after one Go, with brights against none: (18 + 1) x 2 = 38."""
    return _result("matgo", winner="AI", player_bets={"player1": {"cover": {"outcome": "LOSE", "ratio": "0",
                                                                            "returned": "12.00"}}},
                   details={"kind": "STOP", "payment_points": 38, "point_value": "1.00", "money": "38.00",
                            "loss_capped": False, "seats": {"F": "house-ai", "O": "player1"}, "deals": 2,
                            "result": {"scores": {"F": 18, "O": 0}, "go_count": {"F": 1, "O": 0}, "points": 18,
                                       "go_adjusted": 19, "multipliers": ["bright"], "loser": "O", "turn": 17,
                                       "auto": False},
                            "announce": "The house wins 38 points (stop)"})


def test_matgo_says_the_score_and_the_payment_apart() -> None:
    result = _matgo_stop()
    done = StationPrompt(table_id="T1", round_id=RID, kind="DONE", message="round complete: winner AI", at=0,
                         announce="The house wins 38 points (stop)")
    text = _log("matgo", _event("round_result", winner="AI", hands={}), done, result)
    assert "wins 38 points" not in text  # 38 is the payment, not the score
    assert "RESULT house-ai wins: stops at a score of 18 points after 1 Go; payment 38 points = 38.00" in text
    from tools.demo_games import matgo_payout

    out = io.StringIO()
    matgo_payout(result, out)
    assert "payment: 18 points + 1 for 1 Go = 19 x 2 (bright) = 38 points; 38 points x 1.00 = 38.00" in out.getvalue()
    assert "house-ai stopped; 2 deals (1 redeal)" in out.getvalue()


# -- Stud: what went in, what came back, the net; folded by the timer ------------------------------------


def test_stud_payout_lines_say_chips_in_back_and_net_and_who_the_timer_folded() -> None:
    from tools.demo import payout_lines

    back = {"player1": "24.52", "player2": "17.88", "player3": "30.00", "player4": "10.00"}
    brought = {"player1": "10.00", "player2": "20.00", "player3": "40.00", "player4": "10.00"}
    result = _result("stud", player_bets={p: {"chips": {"outcome": "WIN", "ratio": "0", "returned": r}}
                                          for p, r in back.items()},
                     details={"contributions": {"player1": "10.00", "player2": "2.12", "player3": "10.00",
                                                "player4": "0"}})
    out = io.StringIO()
    log = RoundLog(out, "stud")
    log("x", _event("player_acted", player_id="player2", action="FOLD", by="player", street="3rd"))
    log("x", _event("player_acted", player_id="player4", action="FOLD", by="timeout", street="3rd"))
    payouts = []
    for p, stake in brought.items():
        s = settle_bet("chips", stake, result, p)
        payouts.append(Payout(result.idempotency_key, f"b-{p}", p, "chips", Decimal(stake), s.outcome, s.returned))
    lines = dict(zip(brought, payout_lines(result, payouts, log.folds(RID))))
    assert re.search(r"brought +20\.00 +in the pot +2\.12 +back +17\.88 +net +-2\.12 +folded$", lines["player2"])
    assert re.search(r"brought +10\.00 +in the pot +0\.00 +back +10\.00 +net +0\.00 +folded by the timer$",
                     lines["player4"])
    assert "PUSH" not in lines["player4"] and "LOSE" not in lines["player2"]
    assert re.search(r"net +\+14\.52 +won$", lines["player1"]) and re.search(r"net +-10\.00 +lost$", lines["player3"])


# -- Sevenluck: who folded, the dealer's qualification, a silent player who antes -------------------------


def test_sevenluck_folds_name_the_seat_and_the_result_says_whether_the_dealer_qualified() -> None:
    result = _result("sevenluck", hands={"P1": {"cards": ["8S", "QS", "5S"], "category": "flush"},
                                         "D": {"cards": ["9S", "JH", "5D"], "category": "high_card"}},
                     decisions={"player1": {"action": "PLAY", "by": "player", "seat": 1, "play_stake": "15.00"},
                                "player3": {"action": "FOLD", "by": "timeout", "seat": 3}},
                     details={"dealer_qualifies": False, "comparison": {"P1": "PLAYER"}})
    text = _log("sevenluck",
                _event("bet_accepted", player_id="player1", bet_type="ante", stake="15.00", seat=1),
                _event("bet_accepted", player_id="player3", bet_type="ante", stake="1.00", seat=3),
                _event("decision_made", player_id="player1", action="PLAY", by="player"),
                _event("decision_made", player_id="player3", action="FOLD", by="timeout"),
                _event("round_result", winner=None, hands={"P1": "flush", "P3": "high_card", "D": "high_card"}),
                result)
    assert "player3  P3 FOLDS  (timer: no answer)" in text
    assert "RESULT dealer high card (9♠ J♥ 5♦): does not qualify" in text
    assert re.search(r"P3 +player3 +folded \(by the timer: no answer\)", text)
    assert re.search(r"P1 +player1 +played flush", text)
    assert "P3: high_card" not in text  # a folded hand goes to the muck unseen: no category for it


def test_the_silent_sevenluck_player_antes_every_round_of_the_default_demo() -> None:
    from simulators.bettors import random_bets
    from tools.demo import demo_plan, demo_settings
    from tools.games import kit

    settings = demo_settings(Path("/nonexistent"), "/dev/null", broker=None, betting_seconds=0.8, game="sevenluck")
    strategies = kit("sevenluck").demo.strategies
    assert strategies[2] == "disconnect"  # player3 never answers
    rng = random.Random(7 + 1)  # the demo's default seed, as its settlement consumer draws the bets
    plan = demo_plan(settings, strategies)
    for _ in range(4):
        bets = random_bets(plan, rng)
        assert ("player3", "ante") in {(p, kind) for p, kind, _, _ in bets}


# -- a cancelled round ----------------------------------------------------------------------------------


def test_a_cancelled_round_says_betting_was_open_and_what_went_down() -> None:
    reason = "link broker down before the round started: settlement link lost (demo)"
    text = _log("teen-patti", _event("round_opened"),
                _event("bet_accepted", player_id="player1", bet_type="tie", stake="5.00"),
                _event("round_cancelled", reason=reason))
    said = [line for line in text.splitlines() if line.startswith("  CANCELLED")]
    assert len(said) == 1 and "before the round started" not in said[0]  # (the result's reason field is the wire's)
    assert ("CANCELLED while betting was open: the backend's broker link (its way to settlement) went down: "
            "settlement link lost (demo); every bet is refunded") in text
    later = _log("stud", _event("round_opened"), _event("betting_closed", bets=2),
                 _event("round_cancelled", reason="link scanner:SC1 down before the round started: heartbeat timeout"))
    assert "CANCELLED after betting closed, before the first card: the scanner SC1's link went down: heartbeat" in later


# -- one injected duplicate, one RESCAN -----------------------------------------------------------------


async def test_a_rescan_superseded_by_a_newer_prompt_does_not_pass_the_card_again() -> None:
    """A torn frame: the next frame reports its sequence number missing (RESCAN F.8) and then
    registers the card (NEXT F.9), both at once. Passing F.8's card again would put it in front
    of F.9, refused there as already registered (without naming a face-down card), and so on
    through every face-down card of the deal."""
    reader = RecordingReader()
    dealer = VirtualDealer("T1", VirtualShoe("R"), reader, deck=[f"{r}S" for r in "23456789TJQKA"], deal_interval=0,
                           scripted_rounds=[["2S", "3S", "4S"]])

    def prompt(kind: str, position: str, step: int, reason: str | None = None) -> bytes:
        return StationPrompt(table_id="T1", round_id=RID, kind=kind, position=position, step=step,  # type: ignore[arg-type]
                             reason=reason, message=f"{kind} {position}", at=0).model_dump_json().encode()

    async def follow(*payloads: bytes) -> None:
        for payload in payloads:
            dealer.on_prompt("studio/v1/tables/T1/state", payload)  # as prompts_of hands a state's prompts on
        while not dealer._prompts.empty():
            await dealer._follow(dealer._prompts.get_nowait())

    await follow(prompt("NEXT", "F.1", 1))
    await follow(prompt("RESCAN", "F.1", 1, "corrupt_frame"))  # torn: damaged
    assert reader.cards == ["2S", "2S"]
    await follow(prompt("RESCAN", "F.1", 1, "frame_lost"), prompt("NEXT", "F.2", 2))  # the same frame: lost, then in
    assert reader.cards == ["2S", "2S", "3S"] and dealer.dealt == ["2S"] and dealer.in_hand == "3S"


# -- readable settlement JSON -----------------------------------------------------------------------------


def test_settlement_json_is_readable_and_leaves_out_nulls() -> None:
    from tools.demo import readable_json

    result = _result("teen-patti", winner="B", bets={
        k: {"outcome": "LOSE", "ratio": "0", "category": None, "returned": None}
        for k in ("player_a", "player_b", "tie", "pair_plus_a", "pair_plus_b", "six_card_bonus")})
    wire = json.loads(result.model_dump_json())
    assert wire["bets"]["tie"]["returned"] is None  # the wire form is unchanged
    text = readable_json(wire, indent="  ")
    assert "null" not in text and json.loads(text)["bets"]["tie"] == {"outcome": "LOSE", "ratio": "0",
                                                                      "bonus_ratio": "0"}
    lines = text.splitlines()
    assert len(lines) > 10 and max(len(line) for line in lines) <= 110
    assert [line.strip() for line in lines if line.strip().startswith('"tie"')] == [
        '"tie": {"bonus_ratio": "0", "outcome": "LOSE", "ratio": "0"}']  # one line per bet


# -- dealer simulate --help ----------------------------------------------------------------------------------


def test_simulate_help_is_plain_words() -> None:
    from dealer.cli.main import build_parser

    parser = build_parser()
    with contextlib.redirect_stdout(io.StringIO()):
        top = parser.format_help()
        sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
        text = sub.choices["simulate"].format_help()  # type: ignore[attr-defined]
    assert "`" not in text and "simulate" in top
    assert "dealer run config" in text and "dealer station" in text and "dealer settle --ledger" in text


# -- the demos, whole ------------------------------------------------------------------------------------------


async def _demo(game: str, rounds: int, *, faults: bool = True) -> tuple[str, dict[str, Any]]:
    from tools.demo import run_demo

    out = io.StringIO()
    summary = await run_demo(rounds=rounds, seed=7, faults=faults, out=out, game=game)
    assert summary["rounds_settled"] >= rounds and not summary["reconciliation_mismatches"], out.getvalue()
    return out.getvalue(), summary


@pytest.mark.integration  # the demo's PTY shoe
async def test_the_matgo_demo_gives_one_rescan_per_injected_duplicate_and_the_score_apart() -> None:
    text, summary = await _demo("matgo", 2)
    assert "REDEAL (four cards of one month on the layout)" in text
    refused = [line for line in text.splitlines() if "already registered" in line]
    assert len(refused) == summary["faults_injected"].get("duplicate_card", 0) == 1, refused
    assert re.search(r"RESULT \S+ wins: stops at a score of \d+ points", text)
    assert not re.search(r"wins \d+ points \(stop\)", text)


@pytest.mark.integration
async def test_the_sevenluck_demo_shows_the_silent_player_ante_and_the_timer_fold_it() -> None:
    text, _ = await _demo("sevenluck", 2)
    assert "player3  P3 FOLDS  (timer: no answer)" in text
    assert re.search(r"RESULT dealer .*: (qualifies|does not qualify)", text)


@pytest.mark.integration
async def test_the_stud_demo_says_chips_in_back_net_and_the_timer_folds() -> None:
    text, _ = await _demo("stud", 2, faults=False)
    rows = [line for line in text.splitlines() if re.match(r" {4}player\d +chips +brought ", line)]
    assert len(rows) == 8 and all(" back " in r and " net " in r for r in rows)
    assert any(r.endswith("folded by the timer") for r in rows)
    assert " PUSH" not in text and "returned" not in text


@pytest.mark.integration
async def test_the_teen_patti_demo_prints_readable_json_and_says_why_round_3_is_cancelled() -> None:
    text, _ = await _demo("teen-patti", 3)
    assert '"returned": null' not in text and "null" not in text
    assert max(len(line) for line in text.splitlines() if '": ' in line and not line.startswith("summary ")) <= 110
    assert "CANCELLED while betting was open: the backend's broker link (its way to settlement) went down" in text
    said = [line for line in text.splitlines() if line.startswith("  CANCELLED")]
    assert len(said) == 1 and "before the round started" not in said[0]  # (the result's reason field is the wire's)
