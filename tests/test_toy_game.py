"""A sixth game from a test file alone: "high card", registered here and played through the
real service (issue 15: games register their own tools; nothing else names them).

The game: the dealer deals one card to A and one to B, face up; a bet on the higher card pays
1:1 (the house option ``ratio``), equal ranks push. It uses today's :class:`Game` interface
(deck, deal plan, bet types, options, resolve) and registers its class with
:func:`dealer.games.register_game` and its kit (``dealer hand``, its demo table) with
:func:`tools.games.register_kit`. The round test runs the real config loader, the real
:class:`Service` on a real Mosquitto, a shoe on a real PTY, bets placed as the player platform
and the reference settlement consumer, and checks the winner and every payout."""

from __future__ import annotations

import asyncio
import io
import json
import random
import uuid
from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from dealer.cli.main import main
from dealer.core.cards import STANDARD_52, parse_card
from dealer.edge.config import ConfigError, load_settings
from dealer.games import GAMES, game_class, register_game
from dealer.games.rtp import RTP_GAMES, RtpGame, RtpReport, RtpRow
from dealer.core.game_contract import Game
from dealer.core.game_records import BetResolution, BetView, Face, GameOutcome, HandInfo, Outcome, Position
from dealer.games.base import GameOptions
from drivers.mqtt import MqttBus
from simulators.bettors import table_plan
from simulators.settlement import Payout, SettlementConsumer
from tests.conftest import Broker, wait_until
from tests.harness import TABLE, HandShoe, Recorder, key, settings_for, start_service, stop_service
from tools.games import GameKit, HandArgs, HandCommand, kit, register_kit, unregister_kit

NAME = "high-card"


class HighCardOptions(GameOptions):
    ratio: Decimal = Decimal(1)  # a winning bet pays ratio:1


def _rank(code: str) -> int:
    return parse_card(code).rank  # 2..14 (ace high)


class HighCard(Game):
    """One card each to A and B; the higher rank wins, equal ranks push."""

    name = NAME
    Options = HighCardOptions
    bet_types = ("high_a", "high_b")
    options: HighCardOptions

    @property
    def deck(self) -> frozenset[str]:
        return frozenset(STANDARD_52)

    def deal_plan(self, seats: Sequence[int] = ()) -> tuple[Position, ...]:
        return (Position("A", Face.UP), Position("B", Face.UP))

    def resolve(self, cards: Mapping[str, str], bets: Sequence[BetView] = (),
                decisions: Mapping[str, str] | None = None) -> GameOutcome:
        a, b = _rank(cards["A"]), _rank(cards["B"])
        winner = "A" if a > b else "B" if b > a else "TIE"
        win, lose, push = (BetResolution(Outcome.WIN, self.options.ratio), BetResolution(Outcome.LOSE),
                           BetResolution(Outcome.PUSH))
        return GameOutcome(
            hands={"A": HandInfo((cards["A"],), "high_card"), "B": HandInfo((cards["B"],), "high_card")},
            winner=winner,
            bets={"high_a": push if winner == "TIE" else win if winner == "A" else lose,
                  "high_b": push if winner == "TIE" else win if winner == "B" else lose},
        )


def hand_report(args: HandArgs) -> dict[str, Any]:
    """``dealer hand high-card CARD --vs CARD``."""
    if len(args.cards) != 1 or len(args.vs) != 1 or len(args.vs[0]) != 1:
        raise ValueError("high-card compares one card with one card: CARD --vs CARD")
    a, b = args.cards[0], args.vs[0][0]
    outcome = HighCard().resolve({"A": a, "B": b})
    return {"A": a, "B": b, "winner": outcome.winner}


def rtp_report(options: Any, progress: Any = None) -> RtpReport:
    """Exact RTP: of the 52 x 51 ordered deals, 3 in 51 tie (a push) and the rest split evenly."""
    opts = options if options is not None else HighCardOptions()
    tie, win = Fraction(3, 51), Fraction(24, 51)
    rtp = win * (1 + Fraction(opts.ratio)) + tie
    rows = [RtpRow(bet, rtp, 1 - rtp, f"pays {opts.ratio}:1, a tie pushes") for bet in HighCard.bet_types]
    return RtpReport(NAME, rows, {"card_pairs": 52 * 51}, options=opts.model_dump())


KIT = GameKit(NAME, HandCommand(hand_report), hand_usage="hand high-card CARD --vs CARD",
              rtp=RtpGame(NAME, HighCard.bet_types, rtp_report))


@pytest.fixture
def high_card() -> Iterator[type[Game]]:
    """The game and its kit registered for one test, and gone after it."""
    register_game(HighCard)
    register_kit(KIT)
    try:
        yield HighCard
    finally:
        unregister_kit(NAME)
        GAMES.pop(NAME, None)


def test_an_unregistered_game_is_unknown_to_the_config_and_the_tools() -> None:
    """What the registrations below change: without them the game exists nowhere."""
    assert NAME not in GAMES
    with pytest.raises(ConfigError, match="unknown game 'high-card'"):
        load_settings(tables=[{"id": TABLE, "game": NAME, "scanner": {"kind": "mqtt", "reader_id": "SC1"}}])
    with pytest.raises(ValueError, match="unknown game"):
        kit(NAME)
    with pytest.raises(ValueError, match="no game 'high-card' is registered"):
        register_kit(KIT)


def test_registration_refuses_a_name_taken_by_another_game(high_card: type[Game]) -> None:
    class Impostor(HighCard):
        pass

    with pytest.raises(ValueError, match="already registered"):
        register_game(Impostor)
    assert game_class(NAME) is HighCard
    assert register_game(HighCard) is HighCard  # the same class again: no change


def test_dealer_hand_reads_the_registry(high_card: type[Game], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hand", NAME, "KS", "--vs", "7H"]) == 0
    assert json.loads(capsys.readouterr().out) == {"A": "KS", "B": "7H", "winner": "A"}
    assert main(["hand", NAME, "2C", "--vs", "2D"]) == 0
    assert json.loads(capsys.readouterr().out)["winner"] == "TIE"
    assert main(["hand", NAME, "KS", "--vs", "7H", "--go", "1"]) == 2  # --go is Matgo's
    assert "--go is for matgo (the stopper's Go count), not high-card" in capsys.readouterr().err
    assert main(["hand", NAME, "KS", "QS", "--vs", "7H"]) == 2
    assert "one card with one card" in capsys.readouterr().err


def test_dealer_rtp_and_the_config_read_the_registry(high_card: type[Game], capsys: pytest.CaptureFixture[str]) -> None:
    """The kit's RTP report is ``dealer rtp``'s, and a table may declare bounds for its bets."""
    assert main(["rtp", NAME, "--json", "--quiet", "--option", "ratio=1"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {r["bet"]: r["rtp_pct"] for r in report["rows"]} == {"high_a": "100.0000", "high_b": "100.0000"}
    assert main(["rtp", NAME, "--quiet", "--strict", "--max-rtp", "99"]) == 1  # 100 % is over a declared 99 %
    assert "!! high_a: RTP 100.0000 % is above its declared maximum 99 %" in capsys.readouterr().out
    table = {"id": TABLE, "game": NAME, "scanner": {"kind": "mqtt", "reader_id": "SC1"},
             "rtp_bounds": {"high_b": {"max": "99.5"}}}
    assert load_settings(tables=[table]).tables[0].rtp_bounds["high_b"].max == Decimal("99.5")
    with pytest.raises(ConfigError, match="unknown bet types"):
        load_settings(tables=[{**table, "rtp_bounds": {"tie": {"max": "99"}}}])


def test_the_registrations_are_undone(capsys: pytest.CaptureFixture[str]) -> None:
    """The fixture leaves nothing behind: the next test sees the five games of the house."""
    assert NAME not in GAMES and NAME not in RTP_GAMES
    assert main(["rtp", NAME]) == 2 and "no RTP report for game 'high-card'" in capsys.readouterr().err


def test_dealer_hand_of_a_game_gone_names_the_known_ones(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hand", NAME, "KS", "--vs", "7H"]) == 2
    err = capsys.readouterr().err
    assert "no hand report for game 'high-card' (known: teen-patti, sevenluck, stud, seotda, matgo)" in err


async def test_rounds_of_the_toy_game_through_the_real_service(high_card: type[Game], broker: Broker,
                                                               tmp_path: Path, pty_dir: Path) -> None:
    """Config loader, Service, Mosquitto, a PTY shoe, bets from the player platform, the result
    settled by the reference settlement consumer: A's king beats B's seven, then a tie pushes."""
    shoe = HandShoe(pty_dir)
    settings = settings_for(tmp_path, broker.url, shoe.path, game=NAME, betting_seconds=1.0,
                            options={"ratio": "2"}, limits={"high_a": {"min": "1", "max": "50"}})
    assert settings.tables[0].game == NAME and settings.tables[0].options == {"ratio": "2"}
    rec = await Recorder(broker.url, settles=False).start()
    service, task = await start_service(settings)
    bus = MqttBus(broker.url, client_id=f"settle-{uuid.uuid4().hex[:6]}")
    payouts: dict[str, list[Payout]] = {}
    consumer = SettlementConsumer(bus, [TABLE], tmp_path / "ledger.sqlite", rng=random.Random(3),
                                  plan=table_plan(settings.tables[0]), game=NAME,
                                  on_payout=lambda result, paid: payouts.setdefault(result.idempotency_key, paid))
    bus_task = asyncio.create_task(bus.run())
    try:
        for seq, (a, b, winner) in enumerate((("KS", "7H", "A"), ("4D", "4C", "TIE")), start=1):
            for position, code in (("A", a), ("B", b)):
                await wait_until(lambda: rec.expects(position), what=f"round {seq}: NEXT {position}")
                shoe.scan(code)
            k = key(service, seq)
            await wait_until(lambda: k in payouts and rec.results(k), what=f"round {seq} settled and seen")
            result = rec.results(k)[0]
            assert result["winner"] == winner and result["cards"] == {"A": a, "B": b}
            assert result["accepted_bets"]["count"] == len(payouts[k]) > 0
            for p in payouts[k]:  # 2:1 on the higher card, the stake back on a tie
                won = (winner == "A") == (p.bet_type == "high_a")
                expected = p.stake if winner == "TIE" else p.stake * 3 if won else Decimal(0)
                assert (p.outcome, p.returned) == ("PUSH" if winner == "TIE" else "WIN" if won else "LOSE", expected)
            assert {p.bet_type for p in payouts[k]} <= {"high_a", "high_b"}
        assert not consumer.mismatches
    finally:
        bus_task.cancel()
        await asyncio.gather(bus_task, return_exceptions=True)
        consumer.close()
        await stop_service(task)
        await rec.stop()
        shoe.close()


@pytest.mark.integration  # the demo's PTY shoe
async def test_the_demo_plays_the_toy_game_from_its_kit(high_card: type[Game]) -> None:
    """``dealer demo --game high-card``: the demo table from the kit, the virtual dealer, the
    settlement consumer's bets on the game's own bet types, every round reconciled."""
    from tools.demo import run_demo

    out = io.StringIO()
    summary = await run_demo(rounds=2, seed=11, faults=False, betting_seconds=0.5, out=out, game=NAME)
    assert summary["rounds_settled"] >= 2 and not summary["reconciliation_mismatches"], out.getvalue()
    assert "RESULT winner" in out.getvalue()
    assert any(f"{bet} " in out.getvalue() for bet in ("high_a", "high_b"))  # the consumer's bets, settled
