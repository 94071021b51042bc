"""The lease manager's decisions (dealer/edge/lease_plan.py), from rows, without a database."""

from __future__ import annotations

from dealer.core.placement import place
from dealer.edge.lease_plan import EXPIRED, ORPHANED, PLACEMENT, LeaseRow, NodeRow, plan

LEASE = 4.0
TABLES = {"t1": (), "t2": (), "t3": (), "t4": ()}


def node(name: str, silent: float = 0.0, leaving: bool = False, tables: dict | None = None) -> NodeRow:
    return NodeRow(name, f"s-{name}", silent, leaving, TABLES if tables is None else tables)


def free(t: str, expired: float = 0.0) -> LeaseRow:
    return LeaseRow(t, None, 0, expired)


def test_free_tables_placed_here_are_taken_and_missing_rows_are_named() -> None:
    p = plan("a", TABLES, set(), [node("a")], [free("t1"), free("t2")], LEASE)
    assert p.live == ["a"]
    assert p.acquire == {t: PLACEMENT for t in TABLES}
    assert sorted(p.missing) == ["t3", "t4"]
    assert not p.hand_over


def test_a_running_lease_is_left_alone_and_an_expired_one_is_taken() -> None:
    rows = [LeaseRow("t1", "b", 3, -1.0), LeaseRow("t2", "b", 5, 0.5), free("t3"), free("t4")]
    p = plan("a", TABLES, set(), [node("a"), node("b", silent=LEASE + 1)], rows, LEASE)  # b is dead
    assert p.live == ["a"]
    assert p.acquire == {"t2": EXPIRED, "t3": PLACEMENT, "t4": PLACEMENT}


def test_the_previous_session_of_this_node_is_waited_out_like_any_holder() -> None:
    p = plan("a", {"t1": ()}, set(), [node("a")], [LeaseRow("t1", "a", 2, -0.5)], LEASE)
    assert p.acquire == {}
    p = plan("a", {"t1": ()}, set(), [node("a")], [LeaseRow("t1", "a", 2, 0.0)], LEASE)
    assert p.acquire == {"t1": EXPIRED}


def test_a_table_placed_elsewhere_is_taken_only_once_orphaned_for_a_whole_lease() -> None:
    nodes = [node("a"), node("b")]
    mine = {t for t, n in place(list(TABLES), ["a", "b"]).items() if n == "a"}
    theirs = sorted(set(TABLES) - mine)
    assert theirs, "the hash splits four tables over two nodes"
    t = theirs[0]
    rows = [LeaseRow(x, "b" if x in theirs else "a", 1, -1.0) for x in TABLES]
    rows = [r for r in rows if r.table_id != t]
    for expired, orphans, taken in ((LEASE - 0.1, True, False), (LEASE, True, True), (LEASE * 3, False, False)):
        p = plan("a", TABLES, mine, nodes, rows + [LeaseRow(t, "b", 1, expired)], LEASE, orphans=orphans)
        assert p.acquire == ({t: ORPHANED} if taken else {})


def test_held_tables_placed_on_another_live_node_are_handed_over() -> None:
    rows = [LeaseRow(t, "a", 1, -2.0) for t in TABLES]
    alone = plan("a", TABLES, set(TABLES), [node("a")], rows, LEASE)
    assert alone.hand_over == {}
    p = plan("a", TABLES, set(TABLES), [node("a"), node("b")], rows, LEASE)
    assert len(p.hand_over) == 2 and set(p.hand_over.values()) == {"b"}  # the bound: two each
    assert p.acquire == {}


def test_a_leaving_node_takes_nothing_and_hands_everything_over() -> None:
    rows = [LeaseRow("t1", "a", 1, -2.0), free("t2"), free("t3"), free("t4")]
    p = plan("a", TABLES, {"t1"}, [node("a"), node("b")], rows, LEASE, leaving=True)
    assert p.live == ["b"]
    assert p.acquire == {}
    assert p.hand_over == {"t1": "b"}


def test_silent_and_leaving_nodes_are_not_live_unless_remembered() -> None:
    nodes = [node("a"), node("b", silent=LEASE), node("c", leaving=True), node("d", silent=LEASE - 0.1)]
    assert plan("a", TABLES, set(), nodes, [], LEASE).live == ["a", "d"]
    assert plan("a", TABLES, set(), nodes, [], LEASE, also_live={"b", "c"}).live == ["a", "b", "d"]


def test_preferences_come_from_the_rows_and_disagreements_are_reported() -> None:
    mine = {"t1": ("b",), "t2": ()}
    nodes = [node("a", tables=mine), node("b", tables={"t1": ("a",), "t2": ()})]
    p = plan("a", mine, set(), nodes, [free("t1"), free("t2")], LEASE)
    assert p.placement["t1"] == "b"  # node a's configuration, a being first by id, is used
    assert p.disagreements == {"t1": {"a": ("b",), "b": ("a",)}}
    assert "t1" not in p.acquire


def test_a_table_is_placed_only_on_nodes_that_serve_it() -> None:
    nodes = [node("a", tables={"t1": ()}), node("b", tables={"t1": (), "t9": ()})]
    p = plan("a", {"t1": ()}, set(), nodes, [free("t1"), free("t9")], LEASE)
    assert p.placement["t9"] == "b"
    assert "t9" not in p.acquire


def test_a_holder_with_no_node_row_is_reported() -> None:
    p = plan("a", TABLES, set(), [node("a")], [LeaseRow("t1", "ghost", 7, -1.0)], LEASE)
    assert p.unknown == {"t1": "ghost"}
    assert "t1" not in p.acquire


def test_held_off_tables_are_not_taken() -> None:
    p = plan("a", TABLES, set(), [node("a")], [free(t) for t in TABLES], LEASE, hold_off={"t2"})
    assert "t2" not in p.acquire and "t1" in p.acquire


def test_an_operators_pin_places_the_table_on_its_node_above_the_configured_preference():
    """`dealer cluster move T1 --to b` pins T1 to b: b takes it from a while b is live, the
    configured preference (a) comes after; a pin to a node that is not live changes nothing."""
    tables = {"T1": ("a",), "T2": ()}
    nodes = [NodeRow("a", "s1", 0.1, False, tables), NodeRow("b", "s2", 0.1, False, tables)]
    leases = [LeaseRow("T1", "a", 3, -1.0), LeaseRow("T2", "a", 1, -1.0)]
    assert plan("a", tables, {"T1", "T2"}, nodes, leases, 4.0).placement["T1"] == "a"
    pinned = plan("a", tables, {"T1", "T2"}, nodes, leases, 4.0, pins={"T1": "b"})
    assert pinned.placement["T1"] == "b" and pinned.hand_over.get("T1") == "b"
    gone = plan("a", tables, {"T1", "T2"}, nodes, leases, 4.0, pins={"T1": "z"})
    assert gone.placement["T1"] == "a" and "T1" not in gone.hand_over
