"""Results in parts: the pure split (plain calls + hypothesis), the reference consumer that joins
them, and the service refusing any other message over [service] max_message_bytes."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dealer.edge import topics
from dealer.core.game_records import Outcome
from dealer.core.messages import BetTypeResult, BetsSummary, MoneyRules, RoundResult, RoundResultPart
from dealer.core.money import Rounding
from dealer.core.result_parts import OversizeResult, bet_ids_digest, join_parts, split_result
from drivers.bus import LocalBus
from simulators.settlement import SettlementConsumer

ID_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-"


def result(bet_ids: list[str], **extra: object) -> RoundResult:
    extra.setdefault("game", "teen-patti")
    return RoundResult(
        idempotency_key="T1:T1-abcd2345-000001", table_id="T1", round_id="T1-abcd2345-000001",
        outcome="COMPLETED", refund_all=False,
        accepted_bets=BetsSummary(count=len(bet_ids), stakes={"player_a": Decimal("1.00") * len(bet_ids)},
                                  bet_ids=bet_ids),
        money=MoneyRules(currency="EUR", minor_unit=Decimal("0.01"), rounding=Rounding.DOWN),
        opened_at=1, finished_at=2, **extra)  # type: ignore[arg-type]


def test_a_result_that_fits_is_one_unchanged_message():
    r = result(["b1", "b2"])
    msgs = split_result(r, 8192)
    assert [m.key for m in msgs] == [r.idempotency_key]
    assert msgs[0].payload == r.model_dump_json().encode()


def test_ten_thousand_bets_become_a_manifest_and_parts_under_the_limit():
    ids = [f"T1-abcd2345-000001-player{i:05d}-bet" for i in range(10_000)]
    r = result(ids)
    assert len(r.model_dump_json()) > 131072
    msgs = split_result(r, 131072)
    manifest = RoundResult.model_validate_json(msgs[0].payload)
    parts = [RoundResultPart.model_validate_json(m.payload) for m in msgs[1:]]
    n = manifest.accepted_bets.parts
    assert n == len(parts) > 1 and all(len(m.payload) <= 131072 for m in msgs)
    assert manifest.accepted_bets.bet_ids == [] and manifest.accepted_bets.count == 10_000
    assert manifest.accepted_bets.digest == bet_ids_digest(ids)
    assert [m.key for m in msgs] == [r.idempotency_key] + [f"{r.idempotency_key}#{i}/{n}" for i in range(1, n + 1)]
    assert [p.part for p in parts] == list(range(1, n + 1)) and {p.parts for p in parts} == {n}
    assert join_parts(manifest, list(reversed(parts))) == r


def test_the_digest_is_sha256_of_the_ids_each_followed_by_a_line_feed():
    import hashlib

    assert bet_ids_digest(["a", "b"]) == hashlib.sha256(b"a\nb\n").hexdigest()
    assert bet_ids_digest([]) == hashlib.sha256(b"").hexdigest()


def test_join_refuses_a_missing_part_a_foreign_part_and_a_wrong_digest():
    r = result([f"bet-{i:06d}" for i in range(3000)])
    msgs = split_result(r, 8192)
    manifest = RoundResult.model_validate_json(msgs[0].payload)
    parts = [RoundResultPart.model_validate_json(m.payload) for m in msgs[1:]]
    with pytest.raises(ValueError, match="missing"):
        join_parts(manifest, parts[:-1])
    with pytest.raises(ValueError, match="does not belong"):
        join_parts(manifest, parts + [parts[0].model_copy(update={"idempotency_key": "T1:other"})])
    forged = parts[0].model_copy(update={"bet_ids": parts[0].bet_ids[:-1] + ["bet-forged"]})
    with pytest.raises(ValueError, match="digest"):
        join_parts(manifest, [forged] + parts[1:])


def test_a_manifest_over_the_limit_is_refused():
    r = result(["b1"], details={"blob": "x" * 20_000})
    with pytest.raises(OversizeResult, match="without its bet ids"):
        split_result(r, 8192)


@settings(max_examples=60, deadline=None)
@given(ids=st.lists(st.text(ID_CHARS, min_size=1, max_size=64), max_size=1500, unique=True),
       limit=st.integers(min_value=2048, max_value=40_000))
def test_every_message_fits_and_the_parts_give_back_the_list(ids: list[str], limit: int):
    r = result(ids)
    msgs = split_result(r, limit)
    assert all(len(m.payload) <= limit for m in msgs)
    manifest = RoundResult.model_validate_json(msgs[0].payload)
    assert msgs[0].key == r.idempotency_key
    if len(msgs) == 1:
        assert manifest == r and manifest.accepted_bets.parts == 0
        return
    parts = [RoundResultPart.model_validate_json(m.payload) for m in msgs[1:]]
    assert [b for p in parts for b in p.bet_ids] == ids
    assert manifest.accepted_bets.digest == bet_ids_digest(ids)
    assert all(p.bet_ids for p in parts) and len(parts) == manifest.accepted_bets.parts
    assert join_parts(manifest, parts) == r


# --- the reference settlement consumer ------------------------------------------------------


def _consumer(bus: LocalBus, ledger: Path, r: RoundResult) -> SettlementConsumer:
    c = SettlementConsumer(bus, ["T1"], ledger, place_bets=False)
    c.db.executemany("INSERT OR IGNORE INTO bets VALUES (?, ?, 'p1', 'player_a', '1.00', NULL)",
                     [(b, r.round_id) for b in r.accepted_bets.bet_ids])
    return c


def _won(r: RoundResult) -> RoundResult:
    return r.model_copy(update={"winner": "A", "bets": {"player_a": BetTypeResult(outcome=Outcome.WIN,
                                                                                  ratio=Decimal("0.95"))}})


@pytest.mark.slow
async def test_the_consumer_buffers_parts_across_a_restart_and_applies_once(tmp_path: Path):
    r = _won(result([f"bet-{i:06d}" for i in range(3000)]))
    msgs = split_result(r, 16384)
    assert len(msgs) > 3
    bus, ledger = LocalBus(), tmp_path / "ledger.sqlite"
    c = _consumer(bus, ledger, r)
    for m in reversed(msgs[2:]):  # parts out of order, one twice, the manifest not yet
        await bus.publish(topics.results("T1"), m.payload)
    await bus.publish(topics.results("T1"), msgs[-1].payload)
    await bus.publish(topics.results("T1"), msgs[0].payload)
    assert c.applied_keys() == [] and c.duplicate_parts == 1
    c.close()
    bus = LocalBus()  # the consumer restarts: what it buffered is in its ledger
    c = _consumer(bus, ledger, r)
    await bus.publish(topics.results("T1"), msgs[1].payload)
    assert c.applied_keys() == [r.idempotency_key] and c.mismatches == []
    assert c.db.execute("SELECT COUNT(*) FROM ledger WHERE outcome = 'WIN' AND returned = '1.95'").fetchone() == (3000,)
    assert c.db.execute("SELECT (SELECT COUNT(*) FROM parts) + (SELECT COUNT(*) FROM manifests)").fetchone() == (0,)
    for m in msgs:  # redelivered after it was applied: ignored
        await bus.publish(topics.results("T1"), m.payload)
    assert c.applied_keys() == [r.idempotency_key] and c.duplicates == 1
    c.close()


@pytest.mark.slow
async def test_the_consumer_records_a_digest_mismatch_and_applies_nothing(tmp_path: Path):
    r = _won(result([f"bet-{i:06d}" for i in range(3000)]))
    msgs = split_result(r, 16384)
    bus = LocalBus()
    c = _consumer(bus, tmp_path / "ledger.sqlite", r)
    part = RoundResultPart.model_validate_json(msgs[1].payload)
    forged = part.model_copy(update={"bet_ids": part.bet_ids[1:]})  # a bet left out
    await bus.publish(topics.results("T1"), forged.model_dump_json().encode())
    for m in msgs[:1] + msgs[2:]:
        await bus.publish(topics.results("T1"), m.payload)
    assert c.applied_keys() == [] and len(c.mismatches) == 1 and "digest" in c.mismatches[0]
    assert c.db.execute("SELECT COUNT(*) FROM ledger").fetchone() == (0,)
    c.close()


# --- the service refuses any other message over the limit -----------------------------------

async def test_an_event_over_the_limit_is_not_published_but_counted(tmp_path: Path):
    from dealer.core.messages import RoundEvent
    from dealer.edge.service import Service
    from tests.harness import settings_for

    settings = settings_for(tmp_path, None, "/dev/null")
    settings.service.max_message_bytes = 65536
    bus = LocalBus()
    heard: list[bytes] = []
    bus.subscribe(topics.events("T1"), lambda t, p: heard.append(p))
    service = Service(settings, bus=bus)
    service.commit_loop.replay()  # not started: its table is put in as a start adopts it (nothing is said for others)
    try:
        small = RoundEvent(table_id="T1", event="note", at=1, data={"text": "x" * 100})
        big = RoundEvent(table_id="T1", event="note", at=1, data={"text": "x" * 70_000})
        assert service.publisher.publish_soft(topics.events("T1"), small, "event") is True
        assert service.publisher.publish_soft(topics.events("T1"), big, "event") is False
        await asyncio.gather(*service.background.running)
        assert [RoundEvent.model_validate_json(p) for p in heard] == [small]
        assert service.metrics.messages_oversize.labels(kind="event")._value.get() == 1
    finally:
        service.writer.shutdown()
        service.journal.close()


# --- too many players: player_bets and decisions go to the parts too ------------------------

def _shared_sevenluck(players: int) -> RoundResult:
    from dealer.core.messages import DecisionRecord

    ids = [f"r1-p{i:05d}-ante" for i in range(players)]
    win = BetTypeResult(outcome=Outcome.WIN, ratio=Decimal(1))
    return result(ids, game="sevenluck",
                  player_bets={f"p{i:05d}": {"ante": win, "play": win} for i in range(players)},
                  decisions={f"p{i:05d}": DecisionRecord(action="PLAY", by="player", play_stake=Decimal("1.00"))
                             for i in reversed(range(players))})


@pytest.mark.slow
def test_a_shared_table_with_thousands_of_players_moves_them_to_the_parts():
    r = _shared_sevenluck(5000)
    msgs = split_result(r, 65536)
    manifest = RoundResult.model_validate_json(msgs[0].payload)
    parts = [RoundResultPart.model_validate_json(m.payload) for m in msgs[1:]]
    assert all(len(m.payload) <= 65536 for m in msgs) and len(parts) == manifest.accepted_bets.parts
    assert manifest.player_bets == {} and manifest.decisions == {} and manifest.accepted_bets.players_digest
    assert sum(len(p.player_bets) for p in parts) == 5000 == sum(len(p.decisions) for p in parts)
    joined = join_parts(manifest, parts)
    assert joined == r
    tampered = parts[-1].model_copy(update={"decisions": {k: v.model_copy(update={"by": "timeout"})
                                                          for k, v in parts[-1].decisions.items()}})
    with pytest.raises(ValueError, match="player_bets and decisions"):
        join_parts(manifest, parts[:-1] + [tampered])


def test_players_stay_in_the_manifest_when_it_fits_without_the_bet_ids():
    r = _shared_sevenluck(40)
    r = r.model_copy(update={"accepted_bets": r.accepted_bets.model_copy(
        update={"bet_ids": [f"b{i:06d}-{'x' * 40}" for i in range(2000)], "count": 2000})})
    msgs = split_result(r, 65536)
    manifest = RoundResult.model_validate_json(msgs[0].payload)
    assert manifest.player_bets == r.player_bets and manifest.accepted_bets.players_digest == ""
    assert b"players_digest" not in msgs[0].payload
    assert join_parts(manifest, [RoundResultPart.model_validate_json(m.payload) for m in msgs[1:]]) == r


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(players=st.integers(min_value=0, max_value=600), bets=st.integers(min_value=0, max_value=600),
       limit=st.integers(min_value=2048, max_value=30_000))
def test_with_players_every_message_fits_and_joins_back(players: int, bets: int, limit: int):
    r = _shared_sevenluck(players)
    r = r.model_copy(update={"accepted_bets": r.accepted_bets.model_copy(
        update={"bet_ids": r.accepted_bets.bet_ids + [f"extra-{i}" for i in range(bets)],
                "count": players + bets})})
    msgs = split_result(r, limit)
    assert all(len(m.payload) <= limit for m in msgs)
    manifest = RoundResult.model_validate_json(msgs[0].payload)
    assert join_parts(manifest, [RoundResultPart.model_validate_json(m.payload) for m in msgs[1:]]) == r


# --- a real Sevenluck SHARED round from the core, with thousands of players ----------------

@pytest.mark.slow
def test_a_shared_sevenluck_round_with_thousands_of_players_splits_and_settles_the_same():
    from dealer.core.events import CloseBetting, OpenRound, PlaceBet, PlayerDecision, ScanRead
    from dealer.games.sevenluck import Sevenluck
    from dealer.core.round import TableRules
    from dealer.core.settlement import settle_bet
    from dealer.core.table import Table

    players = 4000
    t = Table(TableRules(table_id="S1", game=Sevenluck.from_options({"hand_mode": "SHARED"}), decision_ms=10_000))
    assert t.handle(OpenRound(round_id="S1-000001", at=1)).accepted
    for i in range(players):
        assert t.handle(PlaceBet(bet_id=f"S1-000001-ante-{i:05d}", player_id=f"player-{i:05d}", bet_type="ante",
                                 stake="10.00", at=1)).accepted
        if i % 2:
            assert t.handle(PlaceBet(bet_id=f"S1-000001-pp-{i:05d}", player_id=f"player-{i:05d}",
                                     bet_type="pair_plus", stake="5.00", at=1)).accepted
    t.handle(CloseBetting(at=2))
    for code in ["7S", "QH", "7D", "JH", "7C", "TH"]:  # P.1 D.1 P.2 D.2 P.3 D.3: trips vs a straight flush
        assert t.handle(ScanRead(reader="R", code=code, at=3)).accepted
    steps = [t.handle(PlayerDecision(player_id=f"player-{i:05d}", action="PLAY" if i % 3 else "FOLD", at=4))
             for i in range(players)]
    r = next(e for s in steps for e in s.effects if isinstance(e, RoundResult))
    assert len(r.model_dump_json()) > 131072 * 4 and len(r.decisions) == players
    msgs = split_result(r, 131072)
    manifest = RoundResult.model_validate_json(msgs[0].payload)
    assert manifest.accepted_bets.players_digest and manifest.player_bets == {}
    joined = join_parts(manifest, [RoundResultPart.model_validate_json(m.payload) for m in msgs[1:]])
    assert joined == r and all(len(m.payload) <= 131072 for m in msgs)
    for i in range(0, players, 7):
        p = f"player-{i:05d}"
        for bet_type, stake in (("ante", "10.00"), ("pair_plus", "5.00"), ("play", "10.00")):
            if bet_type in r.player_bets[p]:
                assert settle_bet(bet_type, stake, joined, p) == settle_bet(bet_type, stake, r, p)
