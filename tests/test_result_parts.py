"""Splitting an oversize round result into a manifest and parts (pure, plain calls + hypothesis)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dealer.messages import BetsSummary, MoneyRules, RoundResult, RoundResultPart
from dealer.money import Rounding
from dealer.result_parts import OversizeResult, bet_ids_digest, join_parts, split_result

ID_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-"


def result(bet_ids: list[str], **extra: object) -> RoundResult:
    return RoundResult(
        idempotency_key="T1:T1-abcd2345-000001", table_id="T1", round_id="T1-abcd2345-000001", game="teen-patti",
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
