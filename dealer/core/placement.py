"""Which live backend node runs which table: a pure function every node computes alike.

Several nodes share one PostgreSQL journal and own tables by lease (dealer/edge/leases.py).
Each node reads the same rows (live nodes, current lease holders) and calls :func:`place`;
since the answer depends only on those inputs (never on their order, a clock or a random
source), every node agrees on who should run each table without talking to the others.

The rules, in order:

1. **Preference.** A table's first live preferred node (that serves the table) wins, even
   beyond the balance bound: a serial scanner is wired to one host.
2. **Stickiness.** A table stays with its current holder while the holder is live and has
   room: at most ``cap = ceil(T / n)`` tables (T placeable tables, n live nodes), preferred
   tables included. An over-full node keeps the tables that score highest for it and sheds
   the rest. Moving a table interrupts it (between rounds), so nothing moves that balance
   does not require.
3. **Rendezvous hashing.** Every other table, in id order, goes to its highest-scoring
   eligible node with room (score: a hash of table and node, the same on every machine).
   When no eligible node has room (only when nodes serve different tables), it stays with
   its holder, else goes to its best eligible node.

What this guarantees when every node serves every table (tests/test_placement.py):
every table is placed on a live node; no node holds more than ``cap`` tables except its
preferred ones; with ``current`` = the previous answer, removing a node moves exactly that
node's tables, adding one moves exactly ``sum(max(0, load - cap'))`` tables, each off a node
over the new bound: the fewest any placement within the bound can move. Without ``current``
(a cold start) the answer is plain rendezvous hashing under the bound, whose moves between
two node sets are not minimal (the bound cascades); the lease manager always passes the
current holders.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Collection, Mapping, Sequence
from types import MappingProxyType

_EMPTY: Mapping[str, Sequence[str]] = MappingProxyType({})


def score(table: str, node: str) -> int:
    """The rendezvous score of ``node`` for ``table``: the same on every machine and Python
    (``hash()`` is salted per process, so it will not do)."""
    digest = hashlib.blake2b(f"{table}\x00{node}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _rank(table: str, nodes: Collection[str]) -> list[str]:
    """``nodes`` from the best to the worst for ``table`` (ties, if any, by name)."""
    return sorted(nodes, key=lambda n: (-score(table, n), n))


def place(tables: Sequence[str], live_nodes: Sequence[str],
          preferred: Mapping[str, Sequence[str]] = _EMPTY, *,
          current: Mapping[str, str] | None = None,
          serves: Mapping[str, Collection[str]] | None = None) -> dict[str, str]:
    """Map each table to the live node that should run it (see the module's rules).

    ``preferred``: table -> nodes in order of preference. ``current``: table -> its lease
    holder now (holders that are not live are ignored). ``serves``: node -> the tables it is
    configured for (``None``: every node serves every table); a table no live node serves is
    left out of the answer, as is everything when no node is live.
    """
    nodes = sorted(set(live_nodes))
    if not nodes:
        return {}
    live = set(nodes)

    def eligible(t: str) -> list[str]:
        if serves is None:
            return nodes
        return [n for n in nodes if t in serves.get(n, ())]

    candidates = {t: eligible(t) for t in sorted(set(tables))}
    candidates = {t: el for t, el in candidates.items() if el}
    if not candidates:
        return {}
    cap = math.ceil(len(candidates) / len(nodes))
    load = dict.fromkeys(nodes, 0)
    out: dict[str, str] = {}

    for t, el in candidates.items():  # 1. preference
        pin = next((p for p in preferred.get(t, ()) if p in live and p in el), None)
        if pin is not None:
            out[t] = pin
            load[pin] += 1

    holder: dict[str, str] = {}
    if current:
        for t, el in candidates.items():
            h = current.get(t)
            if t not in out and h is not None and h in live and h in el:
                holder[t] = h
        by_node: dict[str, list[str]] = {}
        for t, h in holder.items():
            by_node.setdefault(h, []).append(t)
        for n, held in by_node.items():  # 2. stickiness, the best-scoring first
            for t in sorted(held, key=lambda t: (-score(t, n), t)):
                if load[n] < cap:
                    out[t] = n
                    load[n] += 1

    for t, el in candidates.items():  # 3. rendezvous hashing under the bound
        if t in out:
            continue
        ranked = _rank(t, el)
        target = next((n for n in ranked if load[n] < cap), None)
        if target is None:
            target = holder.get(t, ranked[0])
        out[t] = target
        load[target] += 1
    return out


__all__ = ["place", "score"]
