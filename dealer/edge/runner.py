"""Production entry point behind ``dealer run``: lock and open the journal, build the bus,
serve metrics, run the service.

Two modes, one service (dealer/edge/ownership.py): with the SQLite journal (``journal_path``)
the process locks the file and owns every configured table; with ``journal_url`` (PostgreSQL)
it is one node of a cluster and owns the tables it holds leases for
(dealer/edge/leases.py: taken, renewed, handed over, lost). SIGTERM stops taking input, lets
the batch in hand commit, marks the retained state stale and releases every lease, so the
other nodes take the tables at once.

Start-up refusals come out as exceptions the CLI turns into one line and an exit status:
:class:`~dealer.edge.journal.JournalError` (exit 2, a person must act: restarting cannot help;
an unreachable database, a wrong schema version), ``LeaseError`` (a ValueError, exit 2: a
clock far off, the node id already running) and :class:`RetryableStartError` (exit 1, may pass
by itself: systemd restarts with backoff). Nothing here touches the broker before the journal
is locked and has passed the start-up checks; the first touch only reads the node's retained
journal anchor, from a client of its own (a journal behind it is refused: dealer/edge/anchors.py),
and the service connects once the journal is opened and the node has joined."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

import structlog

from dealer.edge import topics
from dealer.edge.config import ConfigError, Settings
from dealer.edge.journal import JournalError, lock_journal
from dealer.edge.journals import open_journal
from dealer.edge.metrics import Metrics
from dealer.edge.mqtt_login import mqtt_password
from dealer.edge.ownership import Ownership
from dealer.edge.rtp_policy import TableRtp, log_and_export, table_reports
from dealer.edge.service import Service
from drivers.bus import Bus, LocalBus
from drivers.mqtt import MqttBus

T = TypeVar("T")
log = structlog.get_logger("dealer.edge.runner")


class RetryableStartError(Exception):
    """Start-up failed for a reason that may pass by itself (a metrics port still in use):
    ``dealer run`` prints one line and exits 1, so the unit restarts it with backoff."""


def run_loop(main: Coroutine[Any, Any, T], loop: str = "uvloop") -> T:
    """Run ``main`` on uvloop (libuv: measurably less loop overhead at hundreds of tables)
    or on the standard asyncio loop."""
    if loop == "uvloop":
        try:
            import uvloop
        except ImportError:  # not on Linux: the standard loop is fine
            return asyncio.run(main)
        return uvloop.run(main)
    return asyncio.run(main)


def build_bus(settings: Settings) -> Bus:
    """The broker of ``[mqtt].url`` (or the brokers of ``broker_urls``, in turn); the in-process bus only when the config asks for it
    (``[mqtt].in_process = true``): never by default, where nobody could reach the backend."""
    m = settings.mqtt
    if m.url is None:
        if not m.in_process:
            from dealer.edge.security import NO_BROKER

            raise ConfigError(NO_BROKER)
        return LocalBus()
    return MqttBus(m.urls, client_id=m.client_id, username=m.username, password=mqtt_password(settings),
                   keepalive=m.keepalive, status_topic=topics.backend_status(settings.service.node_id),
                   ca_file=m.ca_file, cert_file=m.cert_file, key_file=m.key_file, client=m.client)


def build_ownership(settings: Settings, journal: Any, bus: Bus, metrics: Metrics) -> Ownership | None:
    """The node's table leases when the journal is PostgreSQL (None: SQLite, every table here)."""
    url = settings.service.journal_url
    if not url:
        return None
    from dealer.edge.leases import LeaseManager

    return LeaseManager(url, node_id=settings.service.node_id, session=getattr(bus, "instance", None) or "",
                        tables=[t.id for t in settings.tables],
                        preferred={t.id: list(t.preferred_nodes) for t in settings.tables if t.preferred_nodes},
                        cluster=settings.cluster, metrics=metrics)


async def check_anchor(settings: Settings) -> bool:
    """The journal against the anchor this node last published, retained on the broker
    (dealer/edge/preflight.py :func:`broker_check`): a journal behind it is refused
    (:class:`JournalError`, exit 2) before the service deals a round or publishes a shorter
    head over it. A broker that cannot be read is logged and the start goes on (False: the
    service compares at its first connection, before it publishes an anchor)."""
    from dealer.edge.preflight import broker_check

    refused, why_not, reached = await broker_check(settings)
    if refused:
        raise JournalError(refused[0])
    if not reached:
        log.warning("journal not compared with the anchor on the broker yet (at the first connection, before "
                    "an anchor is published); compared with its head record", reason=why_not)
        return False
    if why_not is not None:
        log.warning("journal not compared with the anchor on the broker; compared with its head record",
                    reason=why_not)
    return True


async def run_service(settings: Settings, rtp_reports: Sequence[TableRtp] | None = None,
                      config_path: str | None = None) -> None:
    s = settings.service
    if not s.journal_url:
        # One process per journal, decided before anything else: a second instance must not
        # connect (it would share the node's client id and status topic, and its last will
        # would mark the running backend offline). The lock lives as long as the process.
        # (A cluster node's id is kept unique by its registration in the database instead.)
        lock_fd = lock_journal(s.journal_path)  # noqa: F841 (held open on purpose)
    metrics = Metrics()
    if rtp_reports is None:
        rtp_reports = table_reports(settings)
    # Reads the key files, then opens the journal (JournalError: unusable, exit 2); the bus
    # is built but does not connect until the service runs.
    journal = open_journal(settings) if s.journal_url else None
    bus = build_bus(settings)
    try:
        ownership = build_ownership(settings, journal, bus, metrics)
        service = Service(settings, bus=bus, metrics=metrics, journal=journal, ownership=ownership)
    except BaseException:
        if journal is not None:
            journal.close()
        raise
    try:  # the last start-up check (it needs the broker): before the service deals or publishes anything
        service.maintenance.anchor_checked = await check_anchor(settings)
    except BaseException:
        service.journal.close()
        raise
    # each table's exact RTP, once the journal is open (a refused start stays one line) and
    # before any round opens
    log_and_export(rtp_reports, log, metrics)
    if s.metrics_enabled:
        try:
            port = metrics.serve(s.metrics_port, s.metrics_addr)
        except OSError as exc:  # EADDRINUSE (an old process still exiting), EADDRNOTAVAIL ...
            service.journal.close()
            raise RetryableStartError(f"cannot serve metrics on {s.metrics_addr}:{s.metrics_port}: "
                                      f"{exc.strerror or exc}") from None
        log.info("metrics serving", addr=s.metrics_addr, port=port, path="/metrics")
    if not s.fsync:  # allowed (benchmarks), never quietly: a crash then loses published commits
        log.warning("fsync is off: a crash of this host (SQLite) or of the database server (PostgreSQL: "
                    "synchronous_commit = off) can lose journal commits whose effects were already published; "
                    "keep fsync = true outside benchmarks", journal=service.journal_name)
    task = asyncio.create_task(service.run())
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    if config_path is not None:  # SIGHUP (systemctl reload): keys and table settings, no restart
        from dealer.edge.config import load_settings
        from dealer.edge.reload import reload_service

        def on_hup() -> None:
            if not service.ready.is_set():
                log.warning("reload ignored: the backend is still starting; send SIGHUP again once it has")
                return
            reload_service(service, lambda: load_settings(config_path), config_path)

        loop.add_signal_handler(signal.SIGHUP, on_hup)
    log.info("backend started", node=settings.service.node_id, tables=sorted(service.configs),
             journal=service.journal_name, journal_id=service.journal.journal_id,
             mode="cluster" if s.journal_url else "single")
    try:
        await task
    except asyncio.CancelledError:
        log.info("backend stopped")
    except sqlite3.DatabaseError as exc:
        if service.ready.is_set():
            raise
        # Damage that opening the journal did not reach (a page read only by the replay):
        # the service failed before it started any driver or touched the broker.
        raise JournalError(f"journal {s.journal_path} cannot be replayed: {exc}") from None
