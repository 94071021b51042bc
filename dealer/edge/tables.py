"""The tables this node runs now, and what every part of the service asks about them.

:class:`Tables` is the map of the tables this node owns (table id -> :class:`~dealer.core.table.Table`,
adopted and not dropped: dealer/edge/service.py), with what goes with them: each configured
table's settings and live links, the tables being dropped, the tables whose output was held
back while their lease was not valid, and the handover's hold on a table's next round. The
parts read it; only the service's adopt and drop change which tables are in it.
"""

from __future__ import annotations

import time

import structlog

from dealer.core.table import Table
from dealer.edge.config import TableConfig
from dealer.edge.link_state import Links
from dealer.edge.metrics import Metrics
from dealer.edge.ownership import Ownership

log = structlog.get_logger("dealer.edge.service")  # one logger for every part of the service

#: Seconds a table waiting to be handed over opens no new automatic round, from the last time
#: the lease manager asked whether it is idle (it asks several times a renewal period).
ROUND_HOLD_S = 3.0


class Tables(dict[str, Table]):
    """The tables this node owns now (a dict: id -> table), with their configuration, links and
    output state. Built with the node's configuration, its ownership (whose leases say whether a
    table's output may go out) and the metrics."""

    def __init__(self, configs: dict[str, TableConfig], ownership: Ownership, metrics: Metrics) -> None:
        super().__init__()
        self.configs = configs
        self.ownership = ownership
        self._metrics = metrics
        #: Tables being dropped: no input is taken for them any more.
        self.leaving: set[str] = set()
        #: Tables whose output was held back while their lease was not valid (:meth:`may_publish`).
        self.suppressed: set[str] = set()
        self.links: dict[str, Links] = {t: Links() for t in configs}  # drivers may report for any table
        #: A signed reader's table (a fenced table's reader state leaves the batch with it).
        self.reader_table: dict[str, str] = {cfg.scanner.reader_id: tid for tid, cfg in configs.items()}
        #: Tables whose handover to another node waits for the round in play: no new round is
        #: opened before this monotonic instant (renewed while the handover waits: :meth:`idle`).
        self.round_holds: dict[str, float] = {}

    def owns(self, tid: str) -> bool:
        """Whether the node runs the table now (adopted, and not being dropped)."""
        return tid in self and tid not in self.leaving

    def round_id(self, tid: str) -> str | None:
        """The id of the table's current round, if any."""
        table = self.get(tid)
        cur = table.current if table is not None else None
        return cur.round_id if cur is not None else None

    def idle(self, tid: str) -> bool:
        """Whether a table is between rounds (a rebalance moves a table only then, or after its
        wait). Asked while a handover of the table waits, so it also holds the table's next
        automatic round for :data:`ROUND_HOLD_S` (renewed at every ask): the table moves at the
        end of the round in play instead of whenever a pause between rounds happens to be seen,
        and deals on as before if the handover is called off."""
        table = self.get(tid)
        if table is None:
            return True
        self.round_holds[tid] = time.monotonic() + ROUND_HOLD_S
        return not table.in_play

    def round_hold(self, tid: str) -> float:
        """Seconds the table's next automatic round is still held for a handover (0: none)."""
        until = self.round_holds.get(tid)
        if until is None:
            return 0.0
        left = until - time.monotonic()
        if left <= 0:
            del self.round_holds[tid]
            return 0.0
        return left

    def may_publish(self, tid: str | None, kind: str = "publish") -> bool:
        """Whether anything of table ``tid`` may go out now: the node owns it and its lease is
        valid by the local clock. A node resumed after a pause past its lease publishes nothing
        of the table even before it has spoken to the database (counted; the output is sent
        again if the lease turns out to be still this node's: :meth:`valid_again`)."""
        if tid is None:
            return True
        if tid not in self:
            return False
        if self.ownership.valid(tid):
            return True
        if tid not in self.suppressed:
            log.warning("output of a table held back: this node's lease of it is not valid now", table_id=tid,
                        kind=kind)
        self.suppressed.add(tid)
        self._metrics.output_suppressed.labels(kind=kind).inc()
        return False

    def held_back(self) -> bool:
        """Whether a table whose output was held back may publish again now (its lease renewed)."""
        return any(t in self and self.ownership.valid(t) for t in self.suppressed)

    def valid_again(self) -> set[str]:
        """Tables whose output was held back and whose lease is valid again (renewed late); they
        leave the held-back set, as do the tables that left the node."""
        back = {t for t in self.suppressed if t in self and t not in self.leaving and self.ownership.valid(t)}
        self.suppressed -= back | {t for t in self.suppressed if t not in self}
        return back
