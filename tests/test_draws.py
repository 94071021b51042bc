"""Fair random draws (issue 12 item 7): what the rulebook draws "at random" comes from the
round's secret draw (32 bytes from the OS CSPRNG, taken by the service when the round
opens and journaled in ``OpenRound.draw``), never from anything public.

The statistical checks use fixed, seeded draws, so they are deterministic: the bounds are
generous (about six standard deviations) and can only fail if the derivation is biased.
"""

from __future__ import annotations

import ast
import asyncio
import hashlib
import hmac
import json
import random
import re
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest
from pydantic import ValidationError

from dealer.core import draws
from dealer.edge.config import load_settings
from dealer.core.events import CloseBetting, OpenRound, PlaceBet
from dealer.games.matgo import Matgo, first_player
from dealer.games.seotda import first_seat_drawn
from dealer.edge.journal import Journal
from dealer.edge.service import Service
from drivers.bus import LocalBus

ROOT = Path(__file__).resolve().parents[1]
N = 4000


def seeded_draws(n: int = N, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    return [rng.randbytes(draws.DRAW_BYTES).hex() for _ in range(n)]


def assert_uniform(counts: Counter, outcomes: list, n: int = N) -> None:
    expected = n / len(outcomes)
    sd = (n * (1 / len(outcomes)) * (1 - 1 / len(outcomes))) ** 0.5
    assert set(counts) == set(outcomes), counts
    for o in outcomes:
        assert abs(counts[o] - expected) <= 6 * sd, (o, counts)


# -- the derivation --------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 5, 10])
def test_an_index_is_uniform_over_many_draws(n: int):
    counts = Counter(draws.index(d, "label", n) for d in seeded_draws())
    assert_uniform(counts, list(range(n)))


def test_the_same_draw_gives_the_same_answer_and_labels_are_independent():
    ds = seeded_draws(1000, seed=2)
    assert [draws.index(d, "a", 6) for d in ds] == [draws.index(d, "a", 6) for d in ds]
    same = sum(draws.index(d, "a", 2) == draws.index(d, "b", 2) for d in ds)
    assert 400 < same < 600  # two labels of one draw agree only by chance


def test_rejection_sampling_takes_the_next_block_when_the_first_is_out_of_range():
    """With n just above 2**255 about half the first blocks are rejected: the answer is then
    the first block below the largest multiple of n, reduced mod n (never a biased x % n)."""
    n = (1 << 255) + 1
    limit = (1 << 256) - (1 << 256) % n
    rejected = 0
    for d in seeded_draws(200, seed=3):
        blocks = [int.from_bytes(hmac.new(bytes.fromhex(d), f"big:{i}".encode(), hashlib.sha256).digest(), "big")
                  for i in range(64)]
        first_ok = next(x for x in blocks if x < limit)
        rejected += blocks[0] >= limit
        assert draws.index(d, "big", n) == first_ok % n
    assert 50 < rejected < 150


def test_an_empty_choice_is_refused_clearly():
    with pytest.raises(ValueError, match="cannot draw among 0 outcomes"):
        draws.index("00" * 32, "x", 0)


def test_the_house_ai_seed_comes_from_the_draw_and_old_rounds_keep_theirs():
    AI = Matgo.house_seed_label
    a, b = seeded_draws(2, seed=4)
    assert draws.ai_seed(a, "MG1-000007", 3, AI) == draws.ai_seed(a, "MG1-000007", 3, AI)
    assert draws.ai_seed(a, "MG1-000007", 3, AI) != draws.ai_seed(b, "MG1-000007", 3, AI)  # same public id, other draw
    assert draws.ai_seed(a, "MG1-000007", 3, AI) != draws.ai_seed(a, "MG1-000007", 4, AI)
    assert draws.ai_seed(a, "MG1-000007", 3, AI) == draws.ai_seed(a, "MG1-000999", 3, AI)  # the round id plays no part
    assert 0 <= draws.ai_seed(a, "MG1-000007", 3, AI) < 1 << 64
    old = int.from_bytes(hashlib.sha256(b"MG1-000007:3").digest()[:8], "big")
    assert draws.ai_seed(None, "MG1-000007", 3, AI) == old


# -- the rulebook's draws ----------------------------------------------------------------------------


def test_matgo_first_player_is_a_fair_coin_of_the_draw():
    counts = Counter(first_player(d, 7) for d in seeded_draws(seed=5))  # one public hand number throughout
    assert_uniform(counts, ["PLAYER", "AI"])


@pytest.mark.parametrize("seats", [[1, 2], [1, 3, 4], [1, 2, 3, 4, 5], list(range(1, 11))])
def test_seotda_first_seat_is_uniform_among_the_seated(seats: list[int]):
    counts = Counter(first_seat_drawn(d, 1, seats) for d in seeded_draws(seed=6))
    assert_uniform(counts, seats)


def test_without_a_draw_the_old_derivation_of_the_hand_number_is_kept():
    for n in range(1, 40):
        assert first_player(None, n) == ("PLAYER" if hashlib.sha256(f"matgo-first:{n}".encode()).digest()[0] % 2 == 0
                                         else "AI")
        assert first_seat_drawn(None, n, [2, 4, 5]) == [2, 4, 5][
            hashlib.sha256(f"seotda-first-seat:{n}".encode()).digest()[0] % 3]


# -- the journaled field --------------------------------------------------------------------------------


def test_open_round_draw_is_32_bytes_of_lowercase_hex_or_absent():
    good = "0123456789abcdef" * 4
    assert OpenRound(round_id="T1-000001", draw=good).draw == good
    assert OpenRound(round_id="T1-000001").draw is None
    old = OpenRound.model_validate_json('{"type":"open_round","round_id":"T1-000001","at":5,"context":{}}')
    assert old.draw is None  # a body journaled before draws
    for bad in ["", "ab" * 31, "ab" * 33, good.upper(), "g" + good[1:], 12, "0x" + good[2:]]:
        with pytest.raises(ValidationError):
            OpenRound(round_id="T1-000001", draw=bad)


def test_the_pure_core_never_draws_randomness_itself():
    """No CSPRNG, no random module, no os entropy in the round machine, the table, the games or
    the derivation: only the service draws, at the edge."""
    core = [ROOT / "dealer" / "core" / f for f in ("round.py", "table.py", "draws.py")] + sorted(
        (ROOT / "dealer" / "games").glob("*.py"))
    for path in core:
        tree = ast.parse(path.read_text())
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert not imported & {"secrets", "random", "os", "uuid"}, (path.name, imported)
    assert "secrets.token_hex(DRAW_BYTES)" in (ROOT / "dealer" / "edge" / "openings.py").read_text()


# -- through the service -------------------------------------------------------------------------------


def seotda_settings(tmp: Path):
    return load_settings(
        service={"journal_path": tmp / "journal.sqlite", "metrics_enabled": False},
        tables=[{"id": "SD1", "game": "seotda", "auto_rounds": False, "currency": "KRW", "minor_unit": "1",
                 "options": {"stake": 10, "seats": 5},
                 "scanner": {"kind": "mqtt", "reader_id": "GW1", "heartbeat_timeout": 600}}])


async def started(settings, bus: LocalBus) -> tuple[Service, asyncio.Task]:
    service = Service(settings, bus=bus, broker_link=False)
    task = asyncio.create_task(service.run())
    await asyncio.wait_for(service.ready.wait(), 10)
    return service, task


async def stopped(task: asyncio.Task) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_the_service_opens_each_round_with_a_fresh_secret_draw_that_is_journaled_and_replayed(tmp_path: Path):
    settings = seotda_settings(tmp_path)
    bus = LocalBus()
    published: list[bytes] = []
    bus.subscribe("studio/v1/#", lambda topic, payload: published.append(payload))
    service, task = await started(settings, bus)
    seen: list[str] = []
    try:
        for _ in range(12):  # rounds nobody sits down in are cancelled, so the next may open
            assert (await service.open_round("SD1")).accepted
            rnd = service.tables["SD1"].current
            assert rnd is not None and rnd.draw is not None and re.fullmatch(r"[0-9a-f]{64}", rnd.draw)
            seen.append(rnd.draw)
            assert (await service.submit("SD1", CloseBetting(by="dealer"))).accepted
            assert rnd.result is not None and rnd.result.outcome == "CANCELLED"
        # the last round is played: three players sit down and the hand starts from the drawn S1
        assert (await service.open_round("SD1")).accepted
        rnd = service.tables["SD1"].current
        seen.append(rnd.draw)
        for seat in (1, 3, 4):
            assert (await service.submit("SD1", PlaceBet(bet_id=f"b{seat}", player_id=f"p{seat}", bet_type="chips",
                                                         stake=Decimal(600), seat=seat))).accepted
        assert (await service.submit("SD1", CloseBetting(by="dealer"))).accepted
        s1 = rnd.hand.first_seat
        assert s1 == first_seat_drawn(rnd.draw, 13, [1, 3, 4])
    finally:
        await stopped(task)
    assert len(set(seen)) == len(seen) == 13  # a fresh draw for every round
    # journaled with its round, and never published: no message carries it
    journal = Journal(settings.service.journal_path)
    bodies = [json.loads(r.body) for r in journal.rows("SD1") if r.type == "open_round"]
    journal.close()
    assert [b["draw"] for b in bodies] == seen
    assert published and not any(d.encode() in p for d in seen for p in published)
    # a restart replays the journal: the round in play comes back with the same draw and S1
    service2, task2 = await started(settings, LocalBus())
    try:
        again = service2.tables["SD1"].current
        assert again is not None and again.round_id == rnd.round_id
        assert again.draw == rnd.draw and again.hand is not None and again.hand.first_seat == s1
        assert again.hand.label == rnd.hand.label
    finally:
        await stopped(task2)
