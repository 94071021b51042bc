"""What a node should do with table leases, decided from rows it read: no IO, no clock.

The lease manager (dealer/edge/leases.py) reads the ``nodes`` and ``leases`` rows with ages
computed by the database's clock, calls :func:`plan`, then runs the SQL. Keeping the decision
apart lets tests cover every case without a database, and keeps the SQL in one place.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from dealer.core.placement import place

#: Why a node takes a lease (the ``reason`` label of dealer_lease_acquisitions_total).
PLACEMENT = "placement"  # placed on this node and free (never leased, or released)
EXPIRED = "expired"  # placed on this node, its holder's lease ran out
ORPHANED = "orphaned"  # placed on another node that has not taken it for a whole lease


@dataclass(frozen=True)
class NodeRow:
    """One row of ``nodes``; ``silent_s`` is the time since its heartbeat, by the database."""

    node: str
    session: str
    silent_s: float
    leaving: bool
    tables: Mapping[str, Sequence[str]]  # the tables its configuration serves -> preferred nodes


@dataclass(frozen=True)
class LeaseRow:
    """One row of ``leases``; ``expired_s`` is the time since ``expires_at`` by the database
    (negative while the lease runs)."""

    table_id: str
    node: str | None
    epoch: int
    expired_s: float


@dataclass
class Plan:
    live: list[str]
    placement: dict[str, str]
    acquire: dict[str, str] = field(default_factory=dict)  # table -> PLACEMENT | EXPIRED | ORPHANED
    missing: list[str] = field(default_factory=list)  # tables to acquire that have no row yet
    hand_over: dict[str, str] = field(default_factory=dict)  # table this node holds -> its new node
    unknown: dict[str, str] = field(default_factory=dict)  # table -> holder that is in no nodes row
    disagreements: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)  # table -> node -> prefs


def plan(me: str, my_tables: Mapping[str, Sequence[str]], held: Collection[str], nodes: Sequence[NodeRow],
         leases: Sequence[LeaseRow], lease_seconds: float, *, also_live: Collection[str] = (),
         orphans: bool = True, leaving: bool = False, hold_off: Collection[str] = (),
         pins: Mapping[str, str] | None = None) -> Plan:
    """Decide one step for node ``me``.

    ``my_tables``: the tables this node serves -> their preferred nodes (its configuration;
    it overrides this node's own row). A node is live while not leaving and heard within a
    lease; ``also_live`` are nodes to count as live anyway (after this node lost the
    database for a while, the others get one lease to come back before their tables move).
    ``orphans``: whether to take the tables of a placed owner that is not acting.
    ``hold_off``: tables not to acquire now (a failed adoption backs off).
    ``pins``: operators' pins (``dealer cluster move``): table -> node, placed there while that
    node is live and serves the table, above the configured preferences.
    """
    rows = {r.node: r for r in nodes}
    serving: dict[str, Mapping[str, Sequence[str]]] = {}
    for r in nodes:
        if r.node != me and not r.leaving and (r.silent_s < lease_seconds or r.node in also_live):
            serving[r.node] = r.tables
    if not leaving:
        serving[me] = my_tables
    live = sorted(serving)

    preferred: dict[str, tuple[str, ...]] = {}
    disagreements: dict[str, dict[str, tuple[str, ...]]] = {}
    for n in live:  # the first live node (by id) that serves a table gives its preferences
        for t, prefs in serving[n].items():
            p = tuple(prefs)
            if t not in preferred:
                preferred[t] = p
            elif preferred[t] != p:
                disagreements.setdefault(t, {live_n: tuple(serving[live_n][t]) for live_n in live
                                             if t in serving[live_n]})
    for t, n in (pins or {}).items():
        if t in preferred and n in serving and t in serving[n]:
            preferred[t] = (n, *(x for x in preferred[t] if x != n))
    by_table = {r.table_id: r for r in leases}
    current = {t: r.node for t, r in by_table.items() if r.node is not None}
    placement = place(sorted(preferred), live, preferred, current=current,
                      serves={n: set(ts) for n, ts in serving.items()})
    out = Plan(live=live, placement=placement, disagreements=disagreements)

    for t, row in by_table.items():
        if row.node is not None and row.node != me and row.node not in rows:
            out.unknown[t] = row.node

    if not leaving:
        for t in sorted(my_tables):
            if t in held or t in hold_off:
                continue
            lease = by_table.get(t)
            if placement.get(t) == me:
                if lease is None:
                    out.acquire[t] = PLACEMENT
                    out.missing.append(t)
                elif lease.node is None:
                    out.acquire[t] = PLACEMENT
                elif lease.expired_s >= 0:
                    out.acquire[t] = EXPIRED
            elif orphans and lease is not None and lease.expired_s >= lease_seconds:
                out.acquire[t] = ORPHANED
    for t in sorted(held):
        target = placement.get(t)
        if target is not None and target != me:
            out.hand_over[t] = target
    return out


__all__ = ["EXPIRED", "ORPHANED", "PLACEMENT", "LeaseRow", "NodeRow", "Plan", "plan"]
