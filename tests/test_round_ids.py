"""Round ids (dealer/core/round_ids.py): made in one form, read back in both."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dealer.core import round_ids
from dealer.core.round_ids import RoundId

TABLES = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,31}", fullmatch=True)
SERIES = st.from_regex(r"[a-z2-7]{8}", fullmatch=True)
SEQS = st.integers(min_value=0, max_value=10**9)


def test_the_two_forms() -> None:
    assert round_ids.make("TP1", 42, "k3m7x2qa") == "TP1-k3m7x2qa-000042"
    assert round_ids.make("TP1", 42) == "TP1-000042"
    assert round_ids.make("TP1", 1_234_567) == "TP1-1234567"
    assert round_ids.parse("TP1-k3m7x2qa-000042", "TP1") == RoundId("TP1", "k3m7x2qa", 42)
    assert round_ids.parse("TP1-000042", "TP1") == RoundId("TP1", None, 42)


@given(TABLES, SEQS, st.none() | SERIES)
def test_what_is_made_reads_back(table: str, seq: int, series: str | None) -> None:
    rid = round_ids.make(table, seq, series)
    assert round_ids.parse(rid, table) == RoundId(table, series, seq)
    assert round_ids.sequence_of(rid) == seq


@given(TABLES, TABLES, SEQS, SERIES)
def test_a_round_id_of_another_table_is_not_read_as_ours(table: str, other: str, seq: int, series: str) -> None:
    rid = round_ids.make(other, seq, series)
    if not rid.startswith(f"{table}-"):
        assert round_ids.parse(rid, table) is None


def test_what_is_not_a_round_id() -> None:
    for rid in ("TP1", "TP1-", "TP1-abc", "TP1-K3M7X2QA-000001", "TP1-k3m7x2q-000001", "TP1-000001-x",
                "TP2-000001", "TP1-k3m7x2qa-"):
        assert round_ids.parse(rid, "TP1") is None, rid
    assert round_ids.sequence_of("TP1") is None
    assert round_ids.sequence_of("TP1-abc") is None
    assert round_ids.sequence_of("TP1-k3m7x2qa-") is None
