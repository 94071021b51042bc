"""Link tracking: each table's live links (its scanner, the broker) as their drivers report them.

A change becomes a journaled :class:`~dealer.core.events.LinkUp` / ``LinkDown`` through the core
queue (the first broker connect after a restart a :class:`~dealer.core.events.Resume` instead).
A broker (re)connect also has the releaser send every pending result, the journal anchor, the
retained catch-up messages and every station's and player's live state again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from dealer.core.events import Event, LinkDown, LinkUp, Resume
from dealer.core.table import BROKER
from dealer.edge.link_state import Links, scanner_link
from dealer.edge.metrics import Metrics
from dealer.edge.tables import Tables
from drivers.bus import Bus
from drivers.scan import LinkStatus

log = structlog.get_logger("dealer.edge.service")  # one logger for every part of the service


class LinkTracker:
    """Takes the drivers' link reports (scanners, the bus) into each table's :class:`Links`, the
    ``dealer_link_up`` gauge and the input queue (``submit``); on a broker connect, has the
    releaser send again what the broker may have lost (``on_reconnect``, given the tables whose
    pending decision or turn is about to be resumed). ``resume_due``: the timers' tables that
    wait for this run's first broker connect."""

    def __init__(self, tables: Tables, metrics: Metrics, bus: Bus, *, broker_link: bool, resume_due: set[str],
                 submit: Callable[[str, Event], Any], on_reconnect: Callable[[set[str]], None],
                 on_disconnect: Callable[[], None]) -> None:
        self.tables = tables
        self.metrics = metrics
        self.bus = bus
        self.resume_due = resume_due
        self.submit = submit
        self.on_reconnect = on_reconnect
        self.on_disconnect = on_disconnect
        self.broker_link = broker_link  # the players come through the broker: it is one of every table's links
        for tid, cfg in self.tables.configs.items():  # every link's series exists from the start: 0 until heard
            self.tables.links[tid].up[scanner_link(cfg)] = None
            self.metrics.link_up.labels(link=scanner_link(cfg)).set(0)
            if broker_link:
                self.tables.links[tid].up["broker"] = None
                self.metrics.link_up.labels(link=BROKER).set(0)
        if broker_link:
            self.metrics.broker_url_index.set(-1)

    def adopt(self, tid: str, resume_reason: str) -> None:
        """A table joins this node: its links start unknown (its scanner's driver reports it) and
        it resumes fairly. The Resume gives every pending decision, turn or confirmation window a
        whole window (nobody is timed out by the move or the restart): submitted now when the
        players can reach this node (the broker is up, or there is no broker link), else at the
        broker's next connect (``timers.resume_due``)."""
        cfg = self.tables.configs[tid]
        links = self.tables.links[tid] = Links()
        links.up[scanner_link(cfg)] = None
        if not self.broker_link or self.bus.connected:
            if self.broker_link:
                links.up["broker"] = True
            self.submit(tid, Resume(link="broker" if self.broker_link else None, reason=resume_reason))
        else:
            links.up["broker"] = None
            self.resume_due.add(tid)

    def on_scan_link(self, table_id: str, status: LinkStatus) -> None:
        self.set_link(table_id, scanner_link(self.tables.configs[table_id]), status.up, status.reason)

    def set_link(self, tid: str, link: str, up: bool, reason: str) -> None:
        if not self.tables.owns(tid):
            return  # not this node's table now: its links start over when it is adopted
        links = self.tables.links[tid]
        was = links.up.get(link)
        links.up[link] = up
        links.reason[link] = "" if up else reason
        self.metrics.link_up.labels(link=link).set(1 if up else 0)
        if was == up:
            return
        # One line per change: a scanner's here (its driver says nothing), the broker's once by the
        # bus ("mqtt connected"/"mqtt disconnected"), not once more per table. Coming back is info,
        # losing it a warning.
        if link != BROKER:
            (log.info if up else log.warning)("link " + ("up" if up else "down"), table_id=tid, link=link,
                                              reason=reason)
        ev: Event = LinkUp(link=link) if up else LinkDown(link=link, reason=reason)
        if up and link == BROKER and tid in self.resume_due:  # this run's first connect: resume the table
            self.resume_due.discard(tid)
            ev = Resume()
            current = self.tables[tid].current
            if current is not None:  # a brand-new journal has nothing to resume: say nothing
                log.info("resuming the round in play after a restart", table_id=tid, round_id=current.round_id)
        self.submit(tid, ev)

    def on_bus(self, up: bool, reason: str) -> None:
        self.metrics.broker_url_index.set(getattr(self.bus, "url_index", 0) if up else -1)
        # Tables whose pending decision or turn is about to be resumed (LinkUp after an outage,
        # Resume after a restart): the resume sends it with its new deadline, not the old one.
        resuming = {tid for tid, t in self.tables.items() if tid in self.resume_due or BROKER in t.links_down} \
            if up and self.broker_link else set()
        if self.broker_link:
            for tid in list(self.tables):
                self.set_link(tid, "broker", up, reason)
        if up:  # every pending result goes again now: the broker may have lost what it had
            self.on_reconnect(resuming)
        else:
            self.on_disconnect()
