"""The input queue: every event on its way to the commit loop, and its one bound.

The drivers, the ingress, the timers, link tracking and the outbox relay put :class:`Item`
values here; the commit loop (dealer/edge/commit_loop.py) takes them off in batches. Only the
items a flood could produce without end are bounded (:meth:`InputQueue.put_droppable`). Signed
readers' new boot and seq wait here too, for the next group commit (:meth:`InputQueue.put_reader_state`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from dealer.core.events import Event, LinkUp, SupervisorOpenRound
from dealer.core.round import Step
from dealer.edge import ingress
from dealer.edge.metrics import Metrics
from drivers.frames import ReaderState

log = structlog.get_logger("dealer.edge.service")  # one logger for every part of the service

#: Hard cap of the input queue (see :meth:`InputQueue.put_droppable`).
MAX_QUEUE = 100_000


@dataclass(slots=True)
class Item:
    table_id: str
    event: Event | SupervisorOpenRound
    received_ns: int = 0
    future: asyncio.Future[Step] | None = None
    cmd: ingress.Accepted | None = None  # a command from the wire: its id and digest
    #: ``time.monotonic()`` when the item was made, next to its event's wall-clock ``at``: the
    #: deadlines this event sets are measured from here (dealer/edge/timers.py)
    mono: float = field(default_factory=time.monotonic)
    #: the lease epoch the node held the table at when the item was queued (:data:`NOT_HELD`
    #: when it held none); None for the commit loop's own items, made as they are applied
    epoch: int | None = None


#: The stamp of an item queued while the node held no lease on its table.
NOT_HELD = -1


#: Queued only to wake the commit loop (a reader state that came without a read, a prepared journal
#: segment, a broker connect's catch-up): never applied.
WAKE = Item("", LinkUp(link="reader-state"))


class InputQueue:
    """The queue of items for the commit loop, bounded for droppable items only.

    Every item is stamped with the lease epoch its table was held at when it came in
    (``epoch_of``, the ownership's), and the commit loop applies it only under that same epoch:
    input that reached a node under one lease is never applied under the next one, even by the
    same node. Between the two another node may have dealt the table (a card read, a bet or a
    timeout meant for the table as it was), or none did but the table was replayed and resumed
    with new windows; either way the sender is answered ``table moved`` and sends again, to
    whichever node holds the table now."""

    def __init__(self, metrics: Metrics, max_queue: int = MAX_QUEUE,
                 epoch_of: Callable[[str], int | None] | None = None) -> None:
        self.items: asyncio.Queue[Item] = asyncio.Queue()
        self.max_queue = max_queue
        self._metrics = metrics
        self._epoch_of = epoch_of
        self._full = False  # logged once per overflow
        # Signed readers' boot and seq that wait for the next group commit (docs/scanner-protocol.md §6.5).
        self._reader_states: dict[str, ReaderState] = {}

    def _stamp(self, item: Item) -> None:
        if self._epoch_of is not None and item.table_id and item.epoch is None:
            epoch = self._epoch_of(item.table_id)
            item.epoch = NOT_HELD if epoch is None else epoch

    def put(self, item: Item) -> None:
        """Queue an item that is never dropped."""
        self._stamp(item)
        self.items.put_nowait(item)

    def put_droppable(self, item: Item, kind: str) -> None:
        """Queue an item that a flood could produce without end: a scanner's failed read (after
        its flood limiter) or a refused command's security event (after its token bucket).

        The input queue is bounded by ``max_queue`` (:data:`MAX_QUEUE`) for these only: beyond the
        cap they are dropped and counted (``dealer_queue_dropped{kind}``), and the log says so once
        per overflow. Everything else goes through :meth:`put` unconditionally and is never
        dropped: card reads, accepted commands and internal events (timers, link changes,
        result deliveries, reader-state wakes), since dropping one would lose a card, a bet or
        a delivery; their sources are bounded by the studio itself (a dealer's hands, the
        ingress's size and rate rules, the tables' timers), so the queue stays bounded too."""
        if self.items.qsize() >= self.max_queue:
            if not self._full:
                self._full = True
                log.error("input queue full: dropping scanner failures and refused commands (counted)",
                          kind=kind, depth=self.items.qsize(), cap=self.max_queue)
            self._metrics.queue_dropped.labels(kind=kind).inc()
            return
        self._full = False
        self._stamp(item)
        self.items.put_nowait(item)

    def put_reader_state(self, state: ReaderState) -> None:
        """A signed reader's frame was accepted and moved its boot or seq. The link reports it
        before the frame's read is queued, and the commit loop takes the pending states after it
        has taken its items, so the state is committed with that read (or earlier), never after."""
        if not self._reader_states:
            self.put(WAKE)  # a BOOT frame brings no read that would wake the loop
        self._reader_states[state.reader] = state

    def take_reader_states(self) -> list[ReaderState]:
        """The reader states waiting for the commit, taken for the batch in hand."""
        states, self._reader_states = self._reader_states, {}
        return list(states.values())

    def forget_reader_state(self, reader: str) -> None:
        """A table left this node: its reader's uncommitted state goes with it."""
        self._reader_states.pop(reader, None)
