"""The run both soaks share (``dealer soak`` on one node, :mod:`tools.soak_run`, and on N nodes,
:mod:`tools.soak_nodes`): what the simulator hears of results, the play loop and its stall
checks, the drain's wait, the stop, the fault counts and the summary's common keys. Each soak
subclasses :class:`SoakRun` and fills its small hooks (its processes, its journal, its faults)."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tools.soak_parts import DEALER_FAULTS, LINE_FAULTS, MAX_LISTED, wait_event
from tools.soak_reconcile import Reconciliation


class SoakRun:
    """The shared skeleton of a soak. A subclass sets the attributes its ``__init__`` makes
    (``problems``, ``deliveries``, ``applied_per_table``, ``table_progress``, ``_waiters`` ...)
    and the hooks below; ``log`` is its module's logger, ``CHAOS_KINDS`` what its chaos injects."""

    log: Any
    CHAOS_KINDS: tuple[str, ...] = ()
    #: tables watched for a stall even when they reached the target (they play along)
    ALWAYS_WATCHED: frozenset[str] = frozenset()

    # -- hooks -----------------------------------------------------------------------------------

    def _result_heard(self, key: str) -> None:
        """A whole result (not a part) arrived: the single-node soak times its first delivery."""

    def _counted(self) -> dict[str, set[str]]:
        """The tables the target counts (table -> its applied result keys)."""
        return self.applied_per_table

    def _background(self) -> Sequence[asyncio.Task[Any] | None]:
        """The chaos's tasks, cancelled on a stop."""
        return (self._chaos_task,)

    async def _stop_processes(self) -> None:
        """Stop the backend process(es)."""

    def _closed(self) -> None:
        """After the broker stopped: close what is left (the single-node soak's PTYs)."""

    async def _undone(self) -> tuple[list[str], list[str]]:
        """(the keys the journal still waits on, opened rounds not applied by the consumer)."""
        raise NotImplementedError

    # -- what the simulator hears ----------------------------------------------------------------

    def _on_result(self, topic: str, payload: bytes) -> None:
        try:
            msg = json.loads(payload)
            key = msg["idempotency_key"]
            if msg.get("schema_id") == "studio.v1.round_result_part":  # a part: its own delivery
                key = f"{key}#{msg['part']}/{msg['parts']}"
        except (ValueError, KeyError, TypeError):
            self.problems.append(f"undecodable result on {topic}: {payload[:200]!r}")
            return
        self.deliveries.setdefault(key, []).append(payload)
        if "#" in key:
            return  # a part counts with its manifest
        self._result_heard(key)
        tid = key.split(":", 1)[0]
        if tid in self.applied_per_table and key not in self.applied_per_table[tid]:
            self.applied_per_table[tid].add(key)
            self.last_progress = self.table_progress[tid] = time.monotonic()

    async def _wait_event(self, pred: Callable[[dict[str, Any]], bool], timeout: float) -> dict[str, Any] | None:
        return await wait_event(self._waiters, pred, timeout)

    # -- the run ----------------------------------------------------------------------------

    async def _loop_lag(self) -> None:
        """How late this process's event loop wakes up (a busy simulator delays everything)."""
        while True:
            t = time.monotonic()
            await asyncio.sleep(0.01)
            self.loop_lag_ms.append((time.monotonic() - t - 0.01) * 1000)

    def _stalled(self, now: float) -> str | None:
        """Why the run must stop for a stall (None: it need not)."""
        stuck = [t for t, at in self.table_progress.items() if now - at > self.stall_seconds
                 and (len(self.applied_per_table[t]) < self.rounds or t in self.ALWAYS_WATCHED)]
        if stuck:
            return f"table(s) {stuck} stalled: no new result for {self.stall_seconds} s: {self._diagnose()}"
        return None

    async def _watch_processes(self) -> None:
        """Restart a process that exited by itself (a discrepancy)."""

    async def _play(self) -> None:
        self._tasks.append(asyncio.create_task(self._loop_lag()))
        chaos = self._chaos_task = asyncio.create_task(self._chaos())
        next_report = time.monotonic() + 10
        while True:
            await asyncio.sleep(0.2)
            counted = self._counted()
            now = time.monotonic()
            if now >= next_report:
                next_report += 10
                self.log.info("soak progress", seconds=round(now - self.t0),
                              results=sum(map(len, self.applied_per_table.values())),
                              min_table=min(len(s) for s in counted.values()), chaos=sum(self.chaos_counts.values()))
            if chaos.done() and (exc := chaos.exception()) is not None:
                raise exc
            if chaos.done() and all(len(s) >= self.rounds for s in counted.values()):
                return
            if now - self.t0 > self.max_seconds:
                self.problems.append(f"timed out after {self.max_seconds} s before the target: {self._diagnose()}")
                return
            stall = self._stalled(now)
            if stall:
                self.problems.append(stall)
                return
            await self._watch_processes()

    async def _cancel_chaos(self) -> None:
        """A timeout or a stall: the chaos stops before the drain."""
        if self._chaos_task is not None and not self._chaos_task.done():
            for task in self._background():
                if task is not None:
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
            await asyncio.sleep(1.0)  # a broker start running in a thread finishes

    async def _await_drained(self) -> None:
        """Wait until every opened round's result is delivered and applied (drain_seconds at most)."""
        deadline = time.monotonic() + self.drain_seconds
        while True:
            waiting, unapplied = await self._undone()
            if not waiting and not unapplied:
                return
            if time.monotonic() > deadline:
                self.problems.append(f"drain timed out after {self.drain_seconds} s: undelivered {waiting[:10]}, "
                                     f"unapplied {unapplied[:10]}: {self._diagnose()}")
                return
            await asyncio.sleep(0.5)

    async def _stop(self) -> None:
        for task in self._background():
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        await self._stop_processes()
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.sleep(0.3)  # let the last PUBACKed deliveries reach the consumer
        for t in self._bus_tasks:
            t.cancel()
        await asyncio.gather(*self._bus_tasks, return_exceptions=True)
        if hasattr(self, "broker"):
            await asyncio.to_thread(self.broker.stop)
        self._closed()

    async def _run_phases(self, phases: dict[str, float]) -> float:
        """Start, play and drain (each phase's seconds into ``phases``), then stop; an exception
        is reported as a discrepancy, never hidden. Returns the run's seconds."""
        self.t0 = time.monotonic()

        def phase(name: str, since: float) -> float:
            now = time.monotonic()
            phases[name] = round(now - since, 1)
            return now

        t = self.t0
        try:
            await self._start()
            t = phase("start", t)
            self.last_progress = time.monotonic()
            self.table_progress = {t: self.last_progress for t in self.tids}
            await self._play()
            t = phase("play", t)
            await self._drain()
            t = phase("drain", t)
        except Exception as exc:  # reported as a discrepancy, never hidden
            self.log.exception("soak failed")
            self.problems.append(f"soak aborted: {type(exc).__name__}: {exc}")
        finally:
            await self._stop()
        return time.monotonic() - self.t0

    # -- what it reports ------------------------------------------------------------------------

    def _faults(self) -> dict[str, int]:
        out = {k: self.chaos_counts.get(k, 0) for k in self.CHAOS_KINDS}
        dealt: Counter[str] = Counter()
        for dealer in getattr(self, "dealers", []):
            dealt.update(dealer.faults_injected)
        for k in LINE_FAULTS + DEALER_FAULTS:
            out[k] = dealt.get(k, 0)
        return out

    def _write_summary(self, summary: dict[str, Any]) -> None:
        (self.workdir / "chaos.json").write_text(json.dumps(self.chaos_log, indent=1))
        (self.workdir / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True, default=str))


def rounds_of(rows: Iterable[Any], tids: Sequence[str]) -> tuple[dict[str, list[str]], set[str], list[str]]:
    """The journal rows' rounds: (table -> rounds opened in order, rounds whose betting closed,
    results acknowledged as ``table:round``)."""
    opened: dict[str, list[str]] = {t: [] for t in tids}
    closed: set[str] = set()
    acked: list[str] = []
    for row in rows:
        if row.type == "open_round":
            opened.setdefault(row.table_id, []).append(str(row.round_id))
        elif row.type == "close_betting":
            closed.add(str(row.round_id))
        elif row.type == "result_delivered":
            acked.append(f"{row.table_id}:{row.round_id}")
    return opened, closed, acked


def consumer_rows(consumer: Any) -> dict[str, Any]:
    """The settlement consumer's side of :class:`~tools.soak_reconcile.SoakData`."""
    c = consumer.db
    return {
        "applied": [(k, body) for k, body in c.execute("SELECT key, result FROM applied ORDER BY rowid")],
        "bets": [tuple(r) for r in c.execute("SELECT bet_id, round_id, player_id, bet_type, stake FROM bets")],
        "ledger": [tuple(r) for r in c.execute(
            "SELECT bet_id, key, player_id, bet_type, stake, outcome, returned FROM ledger")],
        "consumer_mismatches": list(consumer.mismatches),
    }


def rounds_summary(rec: Reconciliation, duplicates: int, stale: int) -> dict[str, Any]:
    """The summary's counts of results both soaks report, in their order."""
    return {
        "results": rec.stats.get("results", 0),
        "completed": rec.stats.get("completed", 0),
        "cancelled": rec.stats.get("cancelled", 0),
        "voided": rec.stats.get("voided", 0),
        "cancelled_by": rec.stats.get("cancelled_by", {}),
        "deliveries": rec.stats.get("deliveries", 0),
        "duplicates_ignored": duplicates,
        "stale_round_opened_ignored": stale,
    }


def discrepancies_summary(discrepancies: Sequence[str], workdir: Path) -> dict[str, Any]:
    """The summary's last keys: the discrepancies (MAX_LISTED of them) and the workdir."""
    return {
        "discrepancy_count": len(discrepancies),
        "discrepancies": list(discrepancies[:MAX_LISTED]) + ([f"... and {len(discrepancies) - MAX_LISTED} more"]
                                                             if len(discrepancies) > MAX_LISTED else []),
        "workdir": str(workdir),
    }


def games_summary(rec: Reconciliation, specs: Mapping[str, Any], games: dict[str, Any]) -> dict[str, Any]:
    """The summary's per-game keys both soaks report, in their order."""
    return {
        "games": games,
        "seotda_asking_tables": sorted(t for t, spec in specs.items() if spec.label == "seotda/prompt"),
        "timer_moves": rec.stats.get("timer_moves", {}),
        "replay": rec.stats.get("replay", {}),
        "peer_money": rec.stats.get("peer_money", {}),
    }
