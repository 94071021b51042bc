"""Test harness: a SQLite journal fed by the core as the service feeds it (what the core says to
journal, results to the outbox), with a round's events to feed it."""

from __future__ import annotations

from dealer.core.events import CloseBetting, OpenRound, ResultDelivered, ScanRead
from dealer.edge.journal import Batch, Journal
from dealer.core.messages import RoundResult
from dealer.core.table import Table
from tests.harness import DEAL

T = "T1"


def play(table: Table, journal: Journal, events) -> list[RoundResult]:
    """Apply events like the service does: journal what the core says, results to the outbox."""
    results = []
    for ev in events:
        step = table.handle(ev)
        batch = Batch()
        if step.journal:
            rid = getattr(ev, "round_id", None) or (table.current.round_id if table.current else None)
            batch.events.append((T, rid, ev))
            for eff in step.effects:
                if isinstance(eff, RoundResult):
                    results.append(eff)
                    batch.outbox.append((eff.idempotency_key, "r", eff.model_dump_json().encode(), T, eff.round_id))
            if isinstance(ev, ResultDelivered):
                batch.delivered.append(ev.outbox_id)
        if batch:
            journal.commit(batch)
    return results


def round_events(n: int):
    return [OpenRound(round_id=f"T1-{n:06d}"), CloseBetting()] + [ScanRead(reader="R", code=c) for c in DEAL]
