"""The multi-node soak's own judgments (pure: plain rows in, discrepancies and figures out).

``tools/soak.py``'s :func:`~tools.soak.reconcile` judges rounds, bets, results and chips; what
several nodes sharing one PostgreSQL journal add is judged here:

* **one writer per table at a time** (:func:`check_ownership`): along each table's chain
  (``seq``) the lease epoch never goes down, each epoch is written by one node only (the
  node the lease named, when the soak saw that lease), where the database kept commit
  times, no row of an epoch committed after a later epoch's lease was taken (the fencing
  trigger's promise, seen from outside), and no row of an epoch was *made* before that
  epoch's lease was taken (input that came in under an earlier lease is never applied under
  a later one, even by the same node: dealer/edge/input_queue.py);
* **the chain's shape** (:func:`check_chains`): ``seq`` consecutive from 1 per table, each
  row's ``prev_hash`` the previous row's ``hash`` (the first one ``GENESIS``);
* **failover times** (:func:`failover_times`): per node fault and per table the victim held.

Times are seconds on one clock, chosen by the caller (the multi-node soak uses the
database's: see ``tools/soak_nodes.py``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dealer.edge.journal import GENESIS

#: Node faults: each takes tables away from a node, and each is timed.
NODE_FAULTS = ("node_kill", "node_pause", "node_term")


@dataclass(frozen=True, slots=True)
class EventRow:
    """One row of the PostgreSQL journal's ``events`` as the soak reads it."""

    id: int
    table_id: str
    seq: int
    node: str
    epoch: int
    type: str
    round_id: str | None
    prev_hash: str
    hash: str
    #: when it committed (the database's clock, ``track_commit_timestamp``), or None when the
    #: database keeps no commit times; the multi-node soak then uses the writer's ``recorded_at``
    at: float | None = None
    #: when its event was made (the event's ``at``: the node's clock as the input came in or
    #: the timer fired, moved onto the database's clock), or None when the event has no time
    made: float | None = None


@dataclass(frozen=True, slots=True)
class LeaseSeen:
    """A lease (table, epoch) the soak saw in ``leases`` while it ran."""

    table_id: str
    epoch: int
    node: str | None
    acquired_at: float
    #: the commit time of the first version of the row the soak saw: the acquisition
    #: committed at or before it (exactly it, when the soak saw the row before its first
    #: renewal); None when the database keeps no commit times
    committed_by: float | None = None


@dataclass
class NodeFault:
    """A node fault: what the victim held at the instant the signal went."""

    kind: str
    node: str
    at: float  # the instant, just before the signal
    held: dict[str, int] = field(default_factory=dict)  # table -> the epoch of its lease then
    resumed_at: float | None = None  # node_pause: when SIGCONT went


@dataclass(frozen=True, slots=True)
class Failover:
    kind: str
    node: str
    table_id: str
    seconds: float | None  # None: never taken over
    epoch: int | None  # the epoch that took the table over
    by: str | None  # the node that did
    measured_to: str  # "first_row" or "lease_acquired"
    #: from the fault to the next lease's acquired_at (None: that lease was not seen)
    lease_seconds: float | None = None
    #: "released": the next lease was taken before the victim's would have expired (handed
    #: over, or released on SIGTERM); "expired": after; None: unknown
    takeover: str | None = None


def check_chains(rows: Iterable[EventRow]) -> list[str]:
    """Each table's chain: seq 1..n with no gap, every row linked to the one before it."""
    d: list[str] = []
    for tid, rs in sorted(_by_table(rows).items()):
        prev_hash, want = GENESIS, 1
        for r in rs:
            if r.seq != want:
                d.append(f"{tid}: the chain skips from seq {want - 1} to {r.seq} (row id {r.id})")
                want = r.seq
            elif r.prev_hash != prev_hash:
                d.append(f"{tid}: row seq {r.seq} (id {r.id}) does not link to seq {r.seq - 1}")
            prev_hash, want = r.hash, want + 1
    return d


def check_ownership(rows: Iterable[EventRow], leases: Iterable[LeaseSeen]) -> tuple[list[str], dict[str, Any]]:
    """No table written by two nodes at once (see the module docstring); returns
    (discrepancies, figures)."""
    d: list[str] = []
    by_table = _by_table(rows)
    seen: dict[tuple[str, int], LeaseSeen] = {}
    for lease in leases:
        seen.setdefault((lease.table_id, lease.epoch), lease)
    epochs_total = handovers = late_checked = made_checked = 0
    writers_missing = 0
    worst_margin: float | None = None  # closest an old epoch's row came to a later lease's commit (s)
    for tid, rs in sorted(by_table.items()):
        writers: dict[int, set[str]] = defaultdict(set)
        for r in rs:
            writers[r.epoch].add(r.node)
        epochs_total += len(writers)
        for epoch, nodes in sorted(writers.items()):
            if len(nodes) > 1:
                d.append(f"{tid}: epoch {epoch} written by {len(nodes)} nodes: {sorted(nodes)}")
            lease = seen.get((tid, epoch))
            if lease is None:
                writers_missing += 1
            elif lease.node is not None and nodes != {lease.node}:
                d.append(f"{tid}: epoch {epoch} was leased to {lease.node} but written by {sorted(nodes)}")
        top = None
        for r in rs:
            if top is not None and r.epoch < top.epoch:
                d.append(f"{tid}: seq {r.seq} written by {r.node} at epoch {r.epoch} after seq {top.seq} of "
                         f"epoch {top.epoch} ({top.node}): two nodes dealt the table")
            elif top is not None and r.epoch > top.epoch:
                handovers += 1
            if top is None or r.epoch > top.epoch:
                top = r
        # a row of epoch e must have committed before any later epoch's lease did
        later: list[tuple[int, float]] = sorted(
            (lease.epoch, lease.committed_by) for (t, _), lease in seen.items()
            if t == tid and lease.committed_by is not None)
        for r in rs:
            if r.at is None:
                continue
            bound = next((c for e, c in later if e > r.epoch), None)
            if bound is None:
                continue
            late_checked += 1
            margin = bound - r.at
            worst_margin = margin if worst_margin is None else min(worst_margin, margin)
            if margin < 0:
                d.append(f"{tid}: seq {r.seq} of epoch {r.epoch} ({r.node}) committed {-margin:.3f} s after a later "
                         f"epoch's lease had committed: a fenced node wrote")
        # an input belongs to the lease it came in under: no row of epoch e was made before e's lease
        for r in rs:
            lease = seen.get((tid, r.epoch))
            if r.made is None or lease is None:
                continue
            made_checked += 1
            if r.made < lease.acquired_at - MADE_TOLERANCE_S:
                d.append(f"{tid}: seq {r.seq} ({r.type}) of epoch {r.epoch} ({r.node}) was made "
                         f"{lease.acquired_at - r.made:.3f} s before that lease was taken: input of an earlier "
                         f"lease applied under this one")
    return d, {"tables": len(by_table), "epochs": epochs_total, "handovers_in_chains": handovers,
               "rows_checked_against_their_lease": made_checked,
               "epochs_whose_lease_was_not_seen": writers_missing, "rows_checked_against_later_leases": late_checked,
               "closest_old_epoch_commit_before_takeover_s": None if worst_margin is None else round(worst_margin, 3)}


#: How far a row's event time may precede its lease's acquisition before it counts as made
#: under an earlier lease: the error of moving the node's clock onto the database's.
MADE_TOLERANCE_S = 0.05

#: A lease taken this much before the victim's would have expired was handed over, not expired.
RELEASE_MARGIN_S = 0.05


def failover_times(faults: Sequence[NodeFault], rows: Iterable[EventRow], leases: Iterable[LeaseSeen],
                   expiries: Mapping[tuple[str, int], float] | None = None) -> tuple[list[Failover], list[str]]:
    """Per node fault and per table its victim held: the time from the fault to the first
    row the table's next epoch wrote (or, if that epoch wrote none, to its lease's
    ``acquired_at``). A table never taken over is a discrepancy. ``expiries`` (table, epoch)
    -> the latest ``expires_at`` seen of that lease tells a handover from an expiry."""
    by_table = _by_table(rows)
    first_row: dict[tuple[str, int], EventRow] = {}
    for tid, rs in by_table.items():
        for r in rs:
            first_row.setdefault((tid, r.epoch), r)
    acquired: dict[tuple[str, int], LeaseSeen] = {}
    for lease in leases:
        acquired.setdefault((lease.table_id, lease.epoch), lease)
    out: list[Failover] = []
    d: list[str] = []
    for f in faults:
        for tid, held in sorted(f.held.items()):
            later = sorted({e for (t, e) in first_row if t == tid and e > held}
                           | {e for (t, e) in acquired if t == tid and e > held})
            if not later:
                out.append(Failover(f.kind, f.node, tid, None, None, None, "never"))
                d.append(f"{tid}: never taken over after {f.kind} of {f.node} (it held epoch {held})")
                continue
            epoch = later[0]
            row, lease = first_row.get((tid, epoch)), acquired.get((tid, epoch))
            if row is not None and row.at is not None:
                end, to, by = row.at, "first_row", row.node
            elif lease is not None:
                end, to, by = lease.acquired_at, "lease_acquired", lease.node
            else:
                continue  # a row without a time and a lease not seen: cannot be timed
            lease_s = takeover = None
            if lease is not None:
                lease_s = round(max(0.0, lease.acquired_at - f.at), 3)
                expiry = (expiries or {}).get((tid, held))
                if expiry is not None:
                    takeover = "released" if lease.acquired_at < expiry - RELEASE_MARGIN_S else "expired"
            out.append(Failover(f.kind, f.node, tid, round(max(0.0, end - f.at), 3), epoch, by, to, lease_s, takeover))
    return out, d


def quantiles(xs: Sequence[float]) -> dict[str, Any]:
    """p50, p99, max and count, in seconds to the millisecond (empty: count 0 alone)."""
    if not xs:
        return {"count": 0}
    s = sorted(xs)
    return {"p50": round(s[len(s) // 2], 3), "p99": round(s[min(len(s) - 1, int(len(s) * 0.99))], 3),
            "max": round(s[-1], 3), "count": len(s)}


#: How many of the slowest failovers the summary lists one by one.
SLOWEST = 8


def failover_summary(failovers: Sequence[Failover]) -> dict[str, Any]:
    """``failover_s``: overall and per fault kind."""
    timed = [f for f in failovers if f.seconds is not None]
    out = quantiles([f.seconds for f in timed if f.seconds is not None])
    kinds = NODE_FAULTS + tuple(sorted({f.kind for f in failovers} - set(NODE_FAULTS)))
    out["per_kind"] = {k: quantiles([f.seconds for f in timed if f.kind == k and f.seconds is not None])
                       for k in kinds}
    out["never_taken_over"] = sum(1 for f in failovers if f.seconds is None)
    out["measured_to"] = dict(sorted(_count(f.measured_to for f in timed).items()))
    out["to_lease_acquired"] = quantiles([f.lease_seconds for f in timed if f.lease_seconds is not None])
    out["takeovers"] = {k: dict(sorted(_count(f.takeover or "unknown" for f in timed if f.kind == k).items()))
                        for k in kinds}
    # the tail, one by one: a p99 over target says which fault, table and stage it was
    out["slowest"] = [{"kind": f.kind, "victim": f.node, "table": f.table_id, "seconds": f.seconds,
                       "to_lease_acquired": f.lease_seconds, "takeover": f.takeover, "by": f.by,
                       "measured_to": f.measured_to}
                      for f in sorted(timed, key=lambda f: -(f.seconds or 0.0))[:SLOWEST]]
    return out


def _count(xs: Iterable[str]) -> dict[str, int]:
    c: dict[str, int] = defaultdict(int)
    for x in xs:
        c[x] += 1
    return c


def _by_table(rows: Iterable[EventRow]) -> dict[str, list[EventRow]]:
    out: dict[str, list[EventRow]] = defaultdict(list)
    for r in rows:
        out[r.table_id].append(r)
    for rs in out.values():
        rs.sort(key=lambda r: r.seq)
    return dict(out)


__all__ = ["EventRow", "Failover", "LeaseSeen", "NODE_FAULTS", "NodeFault", "check_chains", "check_ownership",
           "failover_summary", "failover_times", "quantiles"]
