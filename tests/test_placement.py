"""Placement of tables over live nodes (dealer/core/placement.py): what every node computes
alike, the balance bound, preferences, and how few tables move when a node comes or goes."""

from __future__ import annotations

import math
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from dealer.core.placement import place, score

table_ids = st.lists(st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True), min_size=0, max_size=60, unique=True)
node_ids = st.lists(st.from_regex(r"n[a-z0-9]{1,5}", fullmatch=True), min_size=1, max_size=8, unique=True)


def loads(p: dict[str, str]) -> Counter[str]:
    return Counter(p.values())


def moved(a: dict[str, str], b: dict[str, str]) -> set[str]:
    return {t for t in a if a[t] != b.get(t)}


@given(table_ids, node_ids, st.randoms(use_true_random=False))
def test_the_answer_does_not_depend_on_the_order_of_inputs(tables: list[str], nodes: list[str], rnd) -> None:
    first = place(tables, nodes)
    current = {t: nodes[score(t, "x") % len(nodes)] for t in tables}
    sticky = place(tables, nodes, current=current)
    rnd.shuffle(tables)
    rnd.shuffle(nodes)
    assert place(tables, nodes) == first
    assert place(list(reversed(tables)), nodes + nodes[:1], current=dict(reversed(current.items()))) == sticky


@given(table_ids, node_ids)
def test_every_table_is_placed_on_a_live_node_within_the_bound(tables: list[str], nodes: list[str]) -> None:
    p = place(tables, nodes)
    assert set(p) == set(tables)
    assert set(p.values()) <= set(nodes)
    cap = math.ceil(len(tables) / len(nodes))
    assert all(n <= cap for n in loads(p).values())


def test_no_live_node_places_nothing() -> None:
    assert place(["t1", "t2"], []) == {}


@given(table_ids, node_ids, st.data())
def test_a_tables_first_live_preferred_node_wins(tables: list[str], nodes: list[str], data: st.DataObject) -> None:
    others = ["gone1", "gone2"]  # preferred but not live
    preferred = {t: data.draw(st.lists(st.sampled_from(nodes + others), max_size=3, unique=True), label=t)
                 for t in tables}
    p = place(tables, nodes, preferred)
    assert set(p) == set(tables)
    cap = math.ceil(len(tables) / len(nodes))
    pinned: Counter[str] = Counter()
    for t, prefs in preferred.items():
        live = [n for n in prefs if n in nodes]
        if live:
            assert p[t] == live[0]
            pinned[live[0]] += 1
    for n, k in loads(p).items():
        assert k <= max(cap, pinned[n]), (n, k, cap, pinned[n])  # only preferred tables exceed the bound


@given(table_ids, node_ids, st.data())
def test_the_previous_answer_is_a_fixed_point(tables: list[str], nodes: list[str], data: st.DataObject) -> None:
    preferred = {t: data.draw(st.lists(st.sampled_from(nodes), max_size=2, unique=True), label=t) for t in tables}
    p = place(tables, nodes, preferred)
    assert place(tables, nodes, preferred, current=p) == p


@given(table_ids, node_ids, st.from_regex(r"m[a-z0-9]{1,5}", fullmatch=True))
def test_adding_a_node_moves_only_what_the_bound_requires(tables: list[str], nodes: list[str], new: str) -> None:
    before = place(tables, nodes)
    after = place(tables, nodes + [new], current=before)
    cap = math.ceil(len(tables) / (len(nodes) + 1))
    assert all(k <= cap for k in loads(after).values())
    over = {n: k - cap for n, k in loads(before).items() if k > cap}
    gone = moved(before, after)
    # exactly the excess of the nodes over the new bound moves (no balanced placement moves fewer),
    # each table off one of those nodes, and no more than its excess from each
    assert len(gone) == sum(over.values())
    assert Counter(before[t] for t in gone) == Counter(over)
    assert all(after[t] != before[t] for t in gone)


@given(table_ids, node_ids.filter(lambda ns: len(ns) >= 2), st.data())
def test_removing_a_node_moves_only_its_tables(tables: list[str], nodes: list[str], data: st.DataObject) -> None:
    before = place(tables, nodes)
    gone_node = data.draw(st.sampled_from(nodes))
    rest = [n for n in nodes if n != gone_node]
    after = place(tables, rest, current=before)
    assert moved(before, after) == {t for t, n in before.items() if n == gone_node}
    cap = math.ceil(len(tables) / len(rest))
    assert all(k <= cap for k in loads(after).values())


@given(table_ids, node_ids, st.data())
def test_a_node_only_gets_tables_it_serves(tables: list[str], nodes: list[str], data: st.DataObject) -> None:
    serves = {n: set(data.draw(st.lists(st.sampled_from(tables), unique=True), label=n)) if tables else set()
              for n in nodes}
    p = place(tables, nodes, serves=serves)
    assert set(p) == {t for t in tables if any(t in s for s in serves.values())}
    assert all(t in serves[n] for t, n in p.items())
    again = place(tables, nodes, serves=serves, current=p)
    assert place(tables, nodes, serves=serves, current=again) == again  # settles: no table moves back and forth


def test_cold_start_is_rendezvous_hashing_under_the_bound() -> None:
    """Without current holders a table goes to its best-scoring node while that has room."""
    for t in ("a", "b", "c"):
        best = max(["n1", "n2"], key=lambda n: score(t, n))
        assert place([t], ["n1", "n2"]) == {t: best}
