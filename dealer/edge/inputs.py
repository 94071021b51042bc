"""Inputs: everything that comes in from outside (player platform, dealer station, supervisor,
scanners) is parsed, authorised and bounded here before it reaches the input queue.

Commands are judged by the pure ingress (dealer/edge/ingress.py: role, ids, signature, size);
what passes is queued for the commit loop, what does not is counted, logged and answered here
(:meth:`Inputs.refused`), a security refusal also journaled (rate-limited per table and role).
Scanner inputs become ``scan_read`` / ``read_failed`` events; failed reads pass each reader's
flood limiter first, and a forged frame alerts the supervisor at once. Signed readers' boot and
seq (docs/scanner-protocol.md §6.5) are restored from the journal and committed with their reads.
While the journal is unavailable nothing is taken (``journal_unavailable``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Literal, cast

import structlog

from dealer.core.events import ReadFailed, ScanRead
from dealer.core.messages import StationPrompt
from dealer.edge import ingress, prompts, topics
from dealer.edge.commit_state import JOURNAL_UNAVAILABLE, CommitState
from dealer.edge.config import TableConfig
from dealer.edge.input_queue import InputQueue, Item
from dealer.edge.metrics import Metrics, ScannerKeyUses
from dealer.edge.ratelimit import FloodSummary, FloodWindows
from dealer.edge.refusals import Refusals
from dealer.edge.roles import Role
from dealer.edge.signing import SupervisorVerifier
from dealer.edge.tables import Tables
from drivers.frames import FrameAuthenticator, ReaderSession, ReaderState
from drivers.scan import LinkStatus, ScanInput, ScanKind
from drivers.scanner_json import MqttScannerIngest

log = structlog.get_logger("dealer.edge.service")  # one logger for every part of the service

FailReason = Literal["noread", "misread", "corrupt_frame", "frame_lost", "device_fault", "forged_frame"]
_FAIL_REASON: dict[ScanKind, FailReason] = {
    ScanKind.NOREAD: "noread",
    ScanKind.MISREAD: "misread",
    ScanKind.CORRUPT: "corrupt_frame",
    ScanKind.LOST: "frame_lost",
    ScanKind.FAULT: "device_fault",
    ScanKind.FORGED: "forged_frame",
}


class Inputs:
    """The service's way in: commands, scanner inputs, reader states and link drivers' bad
    messages. Uses the tables and their configuration, the input queue, the metrics, the
    refusals (what is not taken), ``announce`` (the station's alerts, sent at once), the journal's
    availability (the commit loop's state) and ``on_scan_link`` (link tracking).
    ``saved_readers``: the signed readers' boot and seq as journaled before this start."""

    def __init__(self, tables: Tables, queue: InputQueue, metrics: Metrics, refusals: Refusals,
                 state: CommitState, *, now_ms: Callable[[], int], announce: Callable[[StationPrompt], None],
                 on_scan_link: Callable[[str, LinkStatus], None], saved_readers: dict[str, ReaderState],
                 scanner_auth: dict[str, FrameAuthenticator | None], supervisors: SupervisorVerifier) -> None:
        self.tables = tables
        self.queue = queue
        self.metrics = metrics
        self.refusals = refusals
        self.state = state
        self.now_ms = now_ms
        self.announce = announce
        self.on_scan_link = on_scan_link
        self._scanner_auth = scanner_auth
        #: The supervisors' keys in force (a reload replaces it: dealer/edge/reload.py).
        self.supervisors = supervisors
        # Signed readers' boot and seq as journaled before this start (docs/scanner-protocol.md §6.5).
        self._saved_readers = saved_readers
        configs = self.tables.configs
        self.scanner_ingest = MqttScannerIngest(
            {cfg.scanner.reader_id: tid for tid, cfg in configs.items() if cfg.scanner.kind == "mqtt"},
            topic_table=topics.scanner_table,
            on_input=self.on_scan_input, on_link=self.on_scan_link, on_bad=refusals.bad_message,
            auth={cfg.scanner.reader_id: scanner_auth[tid] for tid, cfg in configs.items()},
            on_state=lambda tid, state: queue.put_reader_state(state),
        )
        self.serial_links: list[Any] = []
        self.metrics.registry.register(ScannerKeyUses(lambda: [
            (self.tables.configs[tid].scanner.reader_id, auth) for tid, auth in self._scanner_auth.items()
            if auth is not None and tid in self.tables]))
        #: per table, its reader's failed reads beyond a burst: summarised once per flood window
        self._floods = {tid: FloodWindows(cfg.scanner.flood_burst, cfg.scanner.flood_window)
                        for tid, cfg in configs.items()}
        self._flood_timers: dict[str, asyncio.TimerHandle] = {}
        #: The wall clock against the monotonic one at start: how far the wall clock stepped since
        #: (a stale or future supervisor command is then told which clock to fix).
        self._clock_ref = (self.now_ms(), time.monotonic_ns())

    def clock_step_ms(self) -> int:
        """How far this backend's wall clock has stepped since it started (+: forward)."""
        wall, mono = self._clock_ref
        return (self.now_ms() - wall) - (time.monotonic_ns() - mono) // 1_000_000

    def scanner_auth(self, table_id: str) -> FrameAuthenticator | None:
        """The table's scanner authenticator (shared with its link; a reload rekeys it in place)."""
        return self._scanner_auth.get(table_id)

    def cancel_timers(self) -> None:
        for handle in self._flood_timers.values():
            handle.cancel()

    def adopt(self, tid: str, state: ReaderState | None) -> None:
        """A table joins this node: its reader starts from the boot and seq journaled for it
        (by this node or the previous owner), so a frame accepted before is still a replay."""
        cfg = self.tables.configs[tid]
        reader = cfg.scanner.reader_id
        if state is not None:
            self._saved_readers[reader] = state
        else:
            self._saved_readers.pop(reader, None)
        if reader in self.scanner_ingest.readers:
            self._restore_reader(tid, self.scanner_ingest.forget(reader))

    def forget(self, tid: str) -> None:
        """A table left this node: its flood windows, flood timer and uncommitted reader state go."""
        cfg = self.tables.configs[tid]
        handle = self._flood_timers.pop(tid, None)
        if handle is not None:
            handle.cancel()
        self._floods[tid] = FloodWindows(cfg.scanner.flood_burst, cfg.scanner.flood_window)
        self.queue.forget_reader_state(cfg.scanner.reader_id)
        self.serial_links = [link for link in self.serial_links if getattr(link, "expected_reader", None)
                             != cfg.scanner.reader_id]

    # -- commands -----------------------------------------------------------------------

    def on_command(self, topic: str, payload: bytes) -> None:
        """A command from the player platform, a dealer station or a supervisor: judged by the
        ingress (role, ids, signature, size); what passes goes to the commit loop, where a repeat of
        an accepted command id is answered again instead of applied twice."""
        now = self.now_ms()
        verdict = ingress.parse(topic, payload, tables=self.tables.keys(), now_ms=now, supervisors=self.supervisors,
                                clock_step_ms=self.clock_step_ms())
        if isinstance(verdict, ingress.Accepted) and not self.state.writable:
            verdict = ingress.Refused(
                verdict.table_id, verdict.role, JOURNAL_UNAVAILABLE,
                "journal unavailable: the backend cannot record commands now (disk full or I/O error); nothing "
                "was applied: send it again later with the same command_id", verdict.event.type,
                verdict.command_id, getattr(verdict.event, "player_id", None),
                getattr(verdict.event, "supervisor", None))
        player = getattr(verdict.event, "player_id", None) if isinstance(verdict, ingress.Accepted) else None
        if (isinstance(verdict, ingress.Accepted) and player is not None
                and player in self.tables[verdict.table_id].rules.game.deck):
            verdict = ingress.Refused(  # as a dealer's id (dealer.core.table): it would read as a card
                verdict.table_id, verdict.role, "card_player_id",
                "player id spells a card code of this game: every message naming the player would read as that "
                "card; use another id", verdict.event.type, verdict.command_id, player)
        if isinstance(verdict, ingress.Accepted):
            issued = getattr(verdict.event, "issued_at", None)
            if verdict.role is Role.SUPERVISOR and issued is not None:  # genuine (late ones too)
                self.metrics.supervisor_clock_offset.labels(table=verdict.table_id).set((issued - now) / 1000)
            if verdict.key_index is not None:  # key rotation: when the old key's count stops rising, retire it
                # a key index is set only for a verified supervisor command, which names its supervisor
                supervisor = str(cast(ingress.SupervisorCommand, verdict.event).supervisor)
                fingerprints = self.supervisors.fingerprints(supervisor)
                key = fingerprints[verdict.key_index] if verdict.key_index < len(fingerprints) else "unknown"
                self.metrics.supervisor_key_uses.labels(supervisor=supervisor, key=key).inc()
            self.queue.put(Item(verdict.table_id, verdict.event, time.monotonic_ns(), cmd=verdict))
            return
        self.refusals.refuse(verdict, now)

    # -- scanners -----------------------------------------------------------------------

    def on_scan_input(self, table_id: str, inp: ScanInput) -> None:
        """A scanner input becomes a ScanRead or a ReadFailed event on the input queue. A valid
        read always goes at once. Failed reads pass the reader's flood limiter
        (:class:`~dealer.edge.ratelimit.FloodWindows`): the first ``flood_burst`` go through as
        ever (a single bad read gets its RESCAN at once); in a flood the rest of each window are
        counted (``dealer_scanner_flood_suppressed``) and journaled as one ``read_failed``
        when the window ends, or just before the next valid read, whichever comes first."""
        at = self.now_ms()
        if not self.tables.owns(table_id):  # the table is not (or no longer) this node's
            self.metrics.scan_reads.labels(table=table_id, result="table_moved").inc()
            return
        if not self.state.writable:
            self._scan_refused(table_id, inp, at)
            return
        received = inp.received_ns or time.monotonic_ns()
        floods, now = self._floods[table_id], asyncio.get_running_loop().time()
        if inp.kind == ScanKind.OK and inp.code is not None:
            ended = floods.due(now) + [s for s in (floods.flush(inp.reader, now),) if s is not None]
            self._flood_summaries(table_id, ended, at)
            self.queue.put(Item(table_id, ScanRead(reader=inp.reader, code=inp.code, seq=inp.seq, at=at,
                                                  burn=inp.burn), received))  # never dropped, never delayed
            return
        reason = _FAIL_REASON[inp.kind]
        if inp.kind == ScanKind.FORGED:
            self.metrics.frames_rejected.labels(reader=inp.reader, reason=inp.reason or "unknown").inc()
        passed, ended = floods.admit(inp.reader, reason, now)
        self._flood_summaries(table_id, ended, at)
        if not passed:
            self.metrics.flood_suppressed.labels(reader=inp.reader, kind=reason).inc()
            self._arm_flood_timer(table_id)
            return
        if inp.kind == ScanKind.FORGED:
            self._on_forged(table_id, inp, at)
        self.queue.put_droppable(Item(table_id, ReadFailed(reader=inp.reader, reason=reason, detail=inp.detail[:120],
                                                          at=at), received), "scanner_failure")

    def _scan_refused(self, table_id: str, inp: ScanInput, at: int) -> None:
        """A scanner input while the journal is unavailable: not taken (it could not be journaled),
        counted as ``journal_unavailable``; a card read tells the station to stop dealing (the card
        is not registered), a failed read is only counted (a flood must not queue work), a forged
        frame is still alerted."""
        self.metrics.scan_reads.labels(table=table_id, result=JOURNAL_UNAVAILABLE).inc()
        if inp.kind == ScanKind.FORGED:
            self.metrics.frames_rejected.labels(reader=inp.reader, reason=inp.reason or "unknown").inc()
            self._on_forged(table_id, inp, at)
        elif inp.kind == ScanKind.OK:
            log.warning("card read not taken: journal unavailable", table_id=table_id, reader=inp.reader, seq=inp.seq)
            self.announce(prompts.journal_alert(table_id, at, card=True))

    def _flood_summaries(self, table_id: str, summaries: list[FloodSummary], at: int) -> None:
        """One journaled read_failed per ended flood window, with its count in the detail."""
        for s in summaries:
            detail = s.detail("bad frames" if s.kind == "corrupt_frame" else "failed reads")
            log.warning("scanner flood: failed reads counted, journaled as one", table_id=table_id, reader=s.key,
                        suppressed=s.total, kinds=s.counts, seconds=round(s.ended - s.started, 1))
            if "forged_frame" in s.counts:
                self._on_forged(table_id, ScanInput(s.key, ScanKind.FORGED, detail=detail, reason="flood"), at)
            kind = cast(FailReason, s.kind)  # a flood window counts only the _FAIL_REASON kinds it was given
            self.queue.put_droppable(Item(table_id, ReadFailed(reader=s.key, reason=kind, detail=detail[:120], at=at),
                                              time.monotonic_ns()), "scanner_failure")

    def _arm_flood_timer(self, table_id: str) -> None:
        if table_id in self._flood_timers:
            return
        deadline = self._floods[table_id].next_deadline()
        if deadline is not None:
            loop = asyncio.get_running_loop()
            self._flood_timers[table_id] = loop.call_at(deadline, self._flood_timer_fired, table_id)

    def _flood_timer_fired(self, table_id: str) -> None:
        del self._flood_timers[table_id]
        if table_id not in self.tables:
            return
        self._flood_summaries(table_id, self._floods[table_id].due(asyncio.get_running_loop().time()),
                              self.now_ms())
        self._arm_flood_timer(table_id)  # a window still open (the timer fired a hair early): once more

    def _on_forged(self, table_id: str, inp: ScanInput, at: int) -> None:
        """A scanner frame failed authentication (counted by the caller): alert the supervisor
        now (the round machine, given it as a ``forged_frame`` read failure, asks for a rescan)."""
        log.error("scanner frame failed authentication", table_id=table_id, reader=inp.reader,
                  reason=inp.reason, seq=inp.seq, detail=inp.detail)
        prompt = self.tables[table_id].prompt_now(at)  # keeps the position the deal stays at
        self.announce(prompts.forged_alert(prompt, inp.reader, inp.detail))

    def _restore_reader(self, table_id: str, session: ReaderSession) -> None:
        """Give a signed reader's new session the boot and seq journaled before this start."""
        state = self._saved_readers.get(session.reader)
        if state is None or session.auth is None:
            return
        if session.restore(state):
            log.info("scanner replay state restored", table_id=table_id, reader=state.reader, boot=state.boot,
                     seq=state.seq)
        else:
            log.warning("scanner replay state not restored: the key that signed its last frame is no longer "
                        "configured (re-keyed reader); its next signed frame sets the boot counter",
                        table_id=table_id, reader=state.reader, boot=state.boot, seq=state.seq)

    def heartbeat_timeouts(self) -> dict[str, float]:
        """Each MQTT reader's heartbeat timeout, for the ingest's watchdog."""
        return {c.scanner.reader_id: c.scanner.heartbeat_timeout for c in self.tables.configs.values()
                if c.scanner.kind == "mqtt"}

    async def serial(self, cfg: TableConfig) -> None:
        """Run a table's serial scanner link (a background task of the service)."""
        from drivers.serial_link import SerialScannerLink

        assert cfg.scanner.port is not None
        reader = cfg.scanner.reader_id
        link = SerialScannerLink(
            cfg.scanner.port, baudrate=cfg.scanner.baudrate, expected_reader=reader,
            heartbeat_timeout=cfg.scanner.heartbeat_timeout, protocol=cfg.scanner.protocol,
            on_input=lambda inp: self.on_scan_input(cfg.id, inp),
            on_link=lambda st: self.on_scan_link(cfg.id, st), auth=self._scanner_auth[cfg.id],
            on_state=self.queue.put_reader_state,
            on_notice=lambda n: self.metrics.scanner_notices.labels(reader=reader, kind=n.kind).inc(),
        )
        if link.capabilities.sequence_numbers:  # only such a reader has a journaled boot and seq to restore
            self._restore_reader(cfg.id, link.session(reader))
        self.serial_links.append(link)
        await link.run()
