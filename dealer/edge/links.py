"""Link tracking: each table's live links (its scanner, the broker) as their drivers report them.

A change becomes a journaled :class:`~dealer.core.events.LinkUp` / ``LinkDown`` through the core
queue (the first broker connect after a restart a :class:`~dealer.core.events.Resume` instead).
A broker (re)connect also sends every pending result, the journal anchor, the retained catch-up
messages and every station's and player's live state again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog

from dealer.core.events import Event, LinkDown, LinkUp, Resume
from dealer.core.table import BROKER
from dealer.edge.config import TableConfig
from dealer.edge.input_queue import WAKE
from drivers.scan import LinkStatus

if TYPE_CHECKING:
    from dealer.edge.service import Service

log = structlog.get_logger("dealer.edge.service")  # one logger for every part of the service


def scanner_link(cfg: TableConfig) -> str:
    """The link name of a table's scanner."""
    return f"scanner:{cfg.scanner.reader_id}"


@dataclass(slots=True)
class Links:
    """Live link state of one table, as its drivers last reported it (never journaled)."""

    up: dict[str, bool | None] = field(default_factory=dict)  # None: not reported yet
    reason: dict[str, str] = field(default_factory=dict)  # why the last report said down

    @property
    def ready(self) -> bool:
        return all(v is True for v in self.up.values())

    def waiting_for(self) -> str | None:
        """What the table waits for, for its station ("reader SC1: not heard since start"), or None."""
        parts = []
        for link, up in sorted(self.up.items()):
            if up is True:
                continue
            who = f"reader {link.split(':', 1)[1]}" if link.startswith("scanner:") else f"the {link}"
            why = "not heard since start" if up is None else f"down ({self.reason.get(link) or 'no reason given'})"
            parts.append(f"{who}: {why}")
        return "; ".join(parts) or None


class LinkTracker:
    """Takes the drivers' link reports (scanners, the bus) into each table's :class:`Links`, the
    ``dealer_link_up`` gauge and the input queue; on a broker connect, has the other parts send
    again what the broker may have lost."""

    def __init__(self, svc: Service, *, broker_link: bool) -> None:
        self.svc = svc
        self.broker_link = broker_link  # the players come through the broker: it is one of every table's links
        for tid, cfg in svc.configs.items():  # every link's series exists from the start: 0 until heard
            svc.links[tid].up[scanner_link(cfg)] = None
            svc.metrics.link_up.labels(link=scanner_link(cfg)).set(0)
            if broker_link:
                svc.links[tid].up["broker"] = None
                svc.metrics.link_up.labels(link=BROKER).set(0)
        if broker_link:
            svc.metrics.broker_url_index.set(-1)

    def adopt(self, tid: str, resume_reason: str) -> None:
        """A table joins this node: its links start unknown (its scanner's driver reports it) and
        it resumes fairly. The Resume gives every pending decision, turn or confirmation window a
        whole window (nobody is timed out by the move or the restart): submitted now when the
        players can reach this node (the broker is up, or there is no broker link), else at the
        broker's next connect (``timers.resume_due``)."""
        svc = self.svc
        cfg = svc.configs[tid]
        links = svc.links[tid] = Links()
        links.up[scanner_link(cfg)] = None
        if not self.broker_link or svc.bus.connected:
            if self.broker_link:
                links.up["broker"] = True
            svc.submit(tid, Resume(link="broker" if self.broker_link else None, reason=resume_reason))
        else:
            links.up["broker"] = None
            svc.timers.resume_due.add(tid)

    def on_scan_link(self, table_id: str, status: LinkStatus) -> None:
        self.set_link(table_id, scanner_link(self.svc.configs[table_id]), status.up, status.reason)

    def set_link(self, tid: str, link: str, up: bool, reason: str) -> None:
        svc = self.svc
        if tid not in svc.tables or tid in svc.leaving:
            return  # not this node's table now: its links start over when it is adopted
        links = svc.links[tid]
        was = links.up.get(link)
        links.up[link] = up
        links.reason[link] = "" if up else reason
        svc.metrics.link_up.labels(link=link).set(1 if up else 0)
        if was == up:
            return
        # One line per change: a scanner's here (its driver says nothing), the broker's once by the
        # bus ("mqtt connected"/"mqtt disconnected"), not once more per table. Coming back is info,
        # losing it a warning.
        if link != BROKER:
            (log.info if up else log.warning)("link " + ("up" if up else "down"), table_id=tid, link=link,
                                              reason=reason)
        ev: Event = LinkUp(link=link) if up else LinkDown(link=link, reason=reason)
        if up and link == BROKER and tid in svc.timers.resume_due:  # this run's first connect: resume the table
            svc.timers.resume_due.discard(tid)
            ev = Resume()
            if svc.tables[tid].current is not None:  # a brand-new journal has nothing to resume: say nothing
                log.info("resuming the round in play after a restart", table_id=tid,
                         round_id=svc.tables[tid].current.round_id)
        svc.submit(tid, ev)

    def on_bus(self, up: bool, reason: str) -> None:
        svc = self.svc
        svc.metrics.broker_url_index.set(getattr(svc.bus, "url_index", 0) if up else -1)
        # Tables whose pending decision or turn is about to be resumed (LinkUp after an outage,
        # Resume after a restart): the resume sends it with its new deadline, not the old one.
        resuming = {tid for tid, t in svc.tables.items() if tid in svc.timers.resume_due or BROKER in t.links_down} \
            if up and self.broker_link else set()
        if self.broker_link:
            for tid in list(svc.tables):
                self.set_link(tid, "broker", up, reason)
        if up:  # every pending result goes again now: the broker may have lost what it had
            svc.publisher.first_connect()
            svc.relay.reconnected()
            svc.maintenance.reconnected()
            svc.catchup.forget()  # every retained message again, under this connection's session
            svc.publisher.catchup_due |= set(svc.tables)
            svc.queue.put(WAKE)  # the commit loop sends the states (after the batch it may hold)
            now = svc.now_ms()
            for tid, table in list(svc.tables.items()):  # resync every dealer station and player after a (re)connect
                if not svc.core.journal_writable:  # the table may be a held batch ahead: resync when it commits
                    svc.core.resync_due = True
                    svc.publisher.release_prompt(svc.core.journal_alert(tid, now))
                    continue
                svc.publisher.release_prompt(table.prompt_now(now))
                svc._release_private(table, now, resuming=tid in resuming)
        else:
            svc.relay.disconnected()
