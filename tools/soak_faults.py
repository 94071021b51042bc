"""The single-node soak's faults (``dealer soak``, :mod:`tools.soak_run`): their kinds, what
the host must give for some (a tmpfs for ``disk_full``, libfaketime for ``clock_step``, the
house worker processes for ``house_worker_kill``), and their injection in shuffled rotation."""

from __future__ import annotations

import asyncio
import contextlib
import glob
import json
import os
import math
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import structlog

from dealer.games.matgo import AI_PLAYER as HOUSE_AI
from drivers.mqtt import MqttBus, cancel_and_wait

from tools.soak_parts import DEALER_FAULTS, LINE_FAULTS


log = structlog.get_logger("tools.soak")

#: Faults the chaos task injects (each at least once per cycle of the rotation).
CHAOS_KINDS = ("broker_restart", "reader_unplug", "backend_kill", "link_loss_before_close", "link_loss_after_close",
               "backend_down_long", "clock_step", "settlement_down", "settlement_slow", "disk_full", "oversize_round",
               "house_worker_kill", "backend_kill_in_turn", "exposure_broker_loss")
#: Kinds that run beside the others: those waiting for a rare moment of a game (the house AI's
#: turn, a stud exposure window), armed, fire when it comes (ARMED_SECONDS at most); settlement
#: away or slow for a while kills nothing the others need. One of each kind at a time.
ARMED = ("house_worker_kill", "exposure_broker_loss", "settlement_down", "settlement_slow")
ARMED_SECONDS = 300.0
#: Kinds that may run while the oversize round places its bets: not a broker kill (a link lost
#: while betting is open cancels the round) nor a clock step (its betting would close at once).
BESIDE_OVERSIZE = ("settlement_down", "settlement_slow", "reader_unplug", "house_worker_kill", "backend_kill",
                   "backend_down_long", "backend_kill_in_turn", "disk_full")
#: Kinds that need a table of some game: a soak without one plans none of them.
CHAOS_NEEDS = {"backend_down_long": ("sevenluck",), "house_worker_kill": ("matgo",),
               "backend_kill_in_turn": ("stud", "seotda"), "exposure_broker_loss": ("stud",)}
FAULT_KINDS = CHAOS_KINDS + LINE_FAULTS + DEALER_FAULTS

NODE_ID = "soak-host"

#: A link loss this long before betting closes must cancel the round. The backend hears a
#: broker disconnect within milliseconds on a quiet machine; the margin absorbs a loaded one
#: (the target soak measures hops of 60 ms p50 and 800 ms p99 on 2 cores, and a 100 ms
#: margin judged five rounds whose betting timer fired before the disconnect was read).
BEFORE_CLOSE_MARGIN_MS = 300
#: Journal retention far more aggressive than a studio's, so that segments roll (and are
#: verified at the end) under every fault.
SOAK_SERVICE = ("journal_retain_rows = 500\njournal_segment_rows = 500\n"
                "result_resend_seconds = 2\nresult_resend_max_seconds = 10\nhouse_workers = 1\n")
#: The soak's ``max_message_bytes``: the least the backend allows (a stud table needs more).
SOAK_MESSAGE_BYTES = 16_384
SOAK_MESSAGE_BYTES_STUD = 65_536
#: With chaos on, one more Teen Patti table with a longer betting period, where the
#: ``oversize_round`` fault places thousands of bets in one round: its result is bigger than
#: ``max_message_bytes`` and goes as a manifest plus parts. It plays along, outside the target.
BIG_TABLE, BIG_READER = "SBIG", "RBIG"
#: libfaketime re-reads the backend's clock offset file at most this often (seconds) ...
FAKETIME_CACHE_SECONDS = 1
#: ... so a deadline the backend stamped this soon after a clock step may carry either clock:
#: a fault that must measure the backend's time left does not pick such a round.
STEP_SETTLE_SECONDS = 2.0
BIG_BETTING_SECONDS = 5.0
#: Bets of an oversize round, with 60-character bet ids: about 25 KB of ids, over the soak's
#: 16 KiB ``max_message_bytes``; with a stud table (64 KiB) 1,150 bets of 64-character ids.
#: Paced: a burst on one table of this 2-core machine would delay every other table's
#: players for seconds (the soak would rightly count their decisions taken by the timer).
OVERSIZE_BETS = 400
OVERSIZE_BETS_PER_SECOND = 200
OVERSIZE_BETS_STUD, OVERSIZE_BETS_PER_SECOND_STUD = 1500, 55
#: 1,500 bets at 55 a second take 27 s; a loaded host needs the rest: 28 s once let only 952 in
#: (under 64 KiB: no result in parts), and a full test run beside the soak slowed a 40 s window's
#: bets as much. The fault waits for 75 % of the window left, 45 s: room for 34 bets a second.
BIG_BETTING_SECONDS_STUD = 60.0



#: Size of the journal's own filesystem (a tmpfs: it takes memory only as it fills).
JOURNAL_FS_BYTES = 2 << 30


def mount_tmpfs(path: Path, size: int) -> bool:
    """Mount a tmpfs of ``size`` bytes on ``path`` (root only): the soak's ``disk_full`` fills
    it, so the backend meets a real ENOSPC. Raises RuntimeError saying what is missing."""
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)],
                       check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        raise RuntimeError(f"the disk_full fault mounts a tmpfs for the journal and needs root: {detail.strip()} "
                           f"(run as root, or --fault-rate 0)") from None
    return True


def fill_filesystem(filler: Path) -> int:
    """Take every free byte of ``filler``'s filesystem (unbuffered writes, smaller and smaller,
    until ENOSPC); returns the bytes taken."""
    st = os.statvfs(filler.parent)
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    taken = 0
    try:
        with contextlib.suppress(OSError):  # most of it at once (tmpfs undoes a fallocate that fails)
            want = max(0, st.f_bavail * st.f_frsize - (1 << 20))
            os.posix_fallocate(fd, 0, want)
            taken = want
        os.lseek(fd, taken, os.SEEK_SET)
        for size in (1 << 20, 1 << 16, 1 << 12, 1):
            chunk = b"\0" * size
            try:
                while True:
                    taken += os.write(fd, chunk)
            except OSError:
                pass
    finally:
        os.close(fd)
    return taken


def unmount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


def find_libfaketime() -> str | None:
    """libfaketime (Debian package ``libfaketime``), which steps the backend's wall clock."""
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1")) + sorted(glob.glob("/usr/lib/faketime/libfaketime.so.1"))
    return found[0] if found else None


def house_worker_pids(backend_pid: int) -> list[int]:
    """The house players' worker processes of a backend (dealer/edge/house.py): the children of
    its fork server, itself a child of the backend (its resource tracker is not a worker)."""
    children: dict[int, list[int]] = {}
    cmd: dict[int, str] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd[int(d)] = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(d))
    servers = [p for p in children.get(backend_pid, []) if "forkserver" in cmd.get(p, "")]
    return sorted(w for s in servers for w in children.get(s, []))




class SoakFaults:
    """The single-node soak's chaos (a mixin of :class:`tools.soak_run._Soak`, whose state it
    reads and writes): the plan of faults in rotation and each fault's injection."""

    def _plan(self) -> list[str]:
        if self.fault_rate <= 0:
            return []
        kinds = self.chaos_kinds
        n = max(len(kinds), math.ceil(self.fault_rate * self.n_tables * self.rounds))
        plan: list[str] = []
        while len(plan) < n:
            cycle = list(kinds)
            self.rng.shuffle(cycle)
            plan += cycle
        return plan[:n]

    def total_applied(self) -> int:
        return sum(len(s) for s in self.applied_per_table.values())

    async def _chaos(self) -> None:
        plan = self._plan()
        total = self.n_tables * self.rounds
        cycle = len(self.chaos_kinds)
        for i in range(len(plan)):
            kind = plan[i]
            if kind == "oversize_round":  # what may run beside it comes first in the rest of its cycle
                end = (i // cycle + 1) * cycle
                rest = plan[i + 1:end]
                plan[i + 1:end] = [k for k in rest if k in BESIDE_OVERSIZE] + [k for k in rest if k not in BESIDE_OVERSIZE]
            if i % cycle == 0:
                self._served.clear()
            if kind in self._served:
                continue  # a kill earlier in this cycle was this fault too
            if kind in ARMED:  # it runs beside: the other faults go on meanwhile
                before = self._armed_kind.get(kind)
                if before is not None:
                    await before
                self._armed_kind[kind] = task = asyncio.create_task(self._inject(kind))
                self._armed.append(task)
                continue
            # spread over 5 %..85 % of the run, with jitter, so the last ones land before the end
            threshold = total * (0.05 + 0.8 * (i + self.rng.random()) / len(plan))
            while self.total_applied() < threshold:
                await asyncio.sleep(0.02)
            await asyncio.sleep(self.rng.uniform(0, self.betting_seconds + self.pause_seconds))
            if kind not in BESIDE_OVERSIZE and self._oversize_task is not None:
                await self._oversize_task  # the big round's bets are in before anything is killed
                self._oversize_task = None
            await self._inject(kind)
        if self._oversize_task is not None:
            await self._oversize_task
        await asyncio.gather(*self._armed)

    async def _broker_crashed(self, code: int | None) -> None:
        """The broker exited by itself (a 2-core run once saw Mosquitto 2.0.11 end on "Error: No
        such file or directory" saving its database): as a crashed broker host, restarted, counted
        and named in the summary; the backend must live through it like any broker loss."""
        async with self._broker_lock:
            log_path = self.workdir / "broker" / "mosquitto.log"
            last = log_path.read_text(errors="replace").strip().splitlines()[-1:] if log_path.exists() else []
            self.broker_crashes.append(f"exit {code}: {last[0][:200] if last else 'no log'}")
            log.warning("the broker exited by itself: restarted", code=code, last_log=last)
            self.broker.proc = None
            await asyncio.to_thread(self.broker.start)

    async def _broker_down(self, down_for: float) -> float:
        """Kill the broker for ``down_for`` seconds (one fault at a time: an armed fault may fire
        beside another); returns the backend's clock at the kill."""
        async with self._broker_lock:
            at = self.backend_now_ms()
            self.broker.kill()
            await asyncio.sleep(down_for)
            await asyncio.to_thread(self.broker.start)
            return at

    async def _inject(self, kind: str) -> None:
        rng = self.rng
        entry: dict[str, Any] = {"kind": kind, "t": round(time.monotonic() - self.t0, 3),
                                 "at_ms": int(self.backend_now_ms())}
        if kind == "broker_restart":
            await self._broker_down(rng.uniform(0.05, 0.6))
        elif kind == "reader_unplug":
            i = rng.randrange(self.n_tables)
            entry["table"] = self.tids[i]
            self.ports[i].unplug()
            await asyncio.sleep(rng.uniform(0.05, 0.8))
            self.ports[i].replug()
            dealer = self.dealers[i]
            await dealer.link.send([dealer.shoe.boot()])  # power-up announcement of the reader
        elif kind == "backend_kill":
            self._backend_busy = True
            try:
                self.backend.kill()
                await asyncio.sleep(rng.uniform(0, 0.3))
                await self._start_backend()
            finally:
                self._backend_busy = False
        elif kind == "link_loss_before_close":
            deadline = time.monotonic() + 60
            while True:  # a round whose opening we hear in time to hit its betting period
                ev = await self._wait_event(lambda e: e.get("event") == "round_opened",
                                            timeout=max(0.0, deadline - time.monotonic()))
                if ev is None:
                    self.problems.append("chaos: no round opened in time within 60 s "
                                         "(link_loss_before_close not injected)")
                    return
                closes_at = (ev.get("data") or {}).get("betting_closes_at")
                left_ms = (closes_at - self.backend_now_ms()) if closes_at is not None else 0
                # a round opened just before a clock step carries a deadline of the old clock
                if left_ms > BEFORE_CLOSE_MARGIN_MS + 20 and ev["_rx"] > self.last_step_at + STEP_SETTLE_SECONDS:
                    break
                self.before_close_missed += 1  # heard too late (a loaded machine): try the next one
            key = f"{ev['table_id']}:{ev['round_id']}"
            # let a bet or two be accepted first, so the cancellation has something to refund
            await self._wait_event(lambda e: e.get("event") == "bet_accepted" and e.get("round_id") == ev["round_id"],
                                   timeout=min(0.05, (left_ms - BEFORE_CLOSE_MARGIN_MS - 20) / 1000))
            kill_ms = await self._broker_down(rng.uniform(0.1, 0.6))
            entry.update(round=key, before_close_ms=None if closes_at is None else round(closes_at - kill_ms))
            # judged only when the backend that opened the round is the one that lived through
            # the kill (a round opened by an instance killed since was replayed, not watched)
            opened_here = isinstance(ev.get("at"), int) and ev["at"] >= self.online_wall_ms
            if closes_at is not None and kill_ms < closes_at - BEFORE_CLOSE_MARGIN_MS and opened_here:
                self.must_cancel[key] = f"broker killed {closes_at - kill_ms:.0f} ms before betting closed"
                self.must_cancel_closes_at[key] = closes_at
            else:
                self.before_close_late += 1
        elif kind == "link_loss_after_close":
            ev = await self._wait_event(
                lambda e: e.get("event") == "card_registered" and 1 <= int((e.get("data") or {}).get("step") or 0) <= 4,
                timeout=30)
            if ev is None:
                self.problems.append("chaos: no table was dealing within 30 s (link_loss_after_close not injected)")
                return
            key = f"{ev['table_id']}:{ev['round_id']}"
            await self._broker_down(rng.uniform(0.1, 0.8))
            self.broker_back_at[key] = time.monotonic()
            self.must_complete[key] = f"broker killed while dealing (after card {ev['data']['step']})"
            entry["round"] = key
        elif kind == "backend_down_long":
            if not await self._kill_long(entry, "decision"):
                return
        elif kind == "house_worker_kill":
            if not await self._kill_house_worker(entry):
                return
        elif kind == "backend_kill_in_turn":
            if not await self._kill_long(entry, "turn"):
                return
        elif kind == "exposure_broker_loss":
            if not await self._broker_loss_in_exposure(entry):
                return
        elif kind == "settlement_down":
            await self._settlement_down(entry)
        elif kind == "settlement_slow":
            # for a while settlement takes 1..5 s to acknowledge what it applied (the backend
            # re-sends after 2 s: the repeats are applied once and acknowledged again)
            window = rng.uniform(3.0, 8.0)
            self.consumer.slow_until = time.monotonic() + window
            entry["window_seconds"] = round(window, 2)
            await asyncio.sleep(window)
        elif kind == "disk_full":
            await self._disk_full(entry)
        elif kind == "oversize_round":
            # its bets take half a minute, paced (a burst would slow every table): it runs beside the
            # faults that do not end its betting (the others wait for it)
            self._oversize_task = asyncio.create_task(self._oversize_in_background(entry))
            return
        elif kind == "clock_step":
            # Forward by 1..5 minutes, or back to the real time (a step back just as big).
            step = rng.randint(60, 300) if self.clock_offset == 0 else -self.clock_offset
            self.clock_offset += step
            self.clock_file.write_text(f"{self.clock_offset:+d}\n")
            self.last_step_at = time.monotonic()
            self.consumer.clock_offset_ms = self.clock_offset * 1000
            self.consumer.step_at = self.last_step_at
            self.clock_steps.append(step)
            entry["step_seconds"] = step
        else:
            raise ValueError(kind)
        self.chaos_counts[kind] += 1
        entry["end_ms"] = entry["at_ms"] if kind == "clock_step" else int(self.backend_now_ms())
        self.chaos_log.append(entry)

    async def _settlement_down(self, entry: dict[str, Any]) -> None:
        """Settlement's results session goes away for a while; half the time it comes back
        without its session (the broker drops what it queued): only the backend's re-sends
        of unacknowledged results can deliver those."""
        rng = self.rng
        lose = rng.random() < 0.5
        await cancel_and_wait(self._bus_tasks[0])  # the consumer's persistent results session
        down = rng.uniform(1.0, 4.0)
        await asyncio.sleep(down)
        if lose:  # a clean connect under the same client id discards the stored session
            clean = MqttBus(self.broker.url, client_id=self.settle_bus.client_id)
            task = asyncio.create_task(clean.run())
            try:
                async with asyncio.timeout(15):
                    await clean.wait_connected()
            except TimeoutError:
                self.problems.append("chaos: settlement could not reconnect within 15 s (settlement_down)")
            await cancel_and_wait(task)
        self._bus_tasks[0] = asyncio.create_task(self.settle_bus.run())
        entry.update(down_seconds=round(down, 2), session_lost=lose)

    async def _disk_full(self, entry: dict[str, Any]) -> None:
        """The journal's filesystem fills up for a while (a real ENOSPC), then space returns:
        the backend must hold its input, keep every round as it was and carry on."""
        filler = self.journal_fs / "filler"
        alerts = self.journal_alerts
        # SQLite reuses the WAL space it holds: empty the WAL first (a checkpoint any reader may
        # run), so the backend's next commits need new blocks and meet the full disk at once.
        with contextlib.suppress(sqlite3.Error):
            con = sqlite3.connect(self.journal_path, timeout=1)
            try:
                con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                con.close()
        try:
            filled = await asyncio.to_thread(fill_filesystem, filler)
            hold = self.rng.uniform(1.0, 4.0)
            await asyncio.sleep(hold)
        finally:  # space returns even when the soak is cut short here
            filler.unlink(missing_ok=True)
        self.disk_full_windows.append({"hold_seconds": round(hold, 2), "filled_bytes": filled,
                                       "backend_alerted": self.journal_alerts > alerts})
        entry.update(hold_seconds=round(hold, 2), filled_bytes=filled)

    async def _oversize_in_background(self, entry: dict[str, Any]) -> None:
        if await self._oversize_round(entry):
            self.chaos_counts["oversize_round"] += 1
            entry["end_ms"] = int(self.backend_now_ms())
            self.chaos_log.append(entry)

    async def _oversize_round(self, entry: dict[str, Any]) -> bool:
        """Thousands of bets in one round of the big table: its result cannot be one message."""
        ev = await self._wait_event(lambda e: e.get("event") == "round_opened" and e.get("table_id") == BIG_TABLE
                                    and (e.get("data") or {}).get("betting_closes_at", 0) - self.backend_now_ms()
                                    > self.big_betting * 750
                                    and e["_rx"] > self.last_step_at + STEP_SETTLE_SECONDS, timeout=60)
        if ev is None:
            self.problems.append(f"chaos: no round of {BIG_TABLE} opened in time within 60 s (oversize_round)")
            return False
        key = f"{BIG_TABLE}:{ev['round_id']}"
        n, rate = (OVERSIZE_BETS_STUD, OVERSIZE_BETS_PER_SECOND_STUD) if self.stud else (OVERSIZE_BETS,
                                                                                          OVERSIZE_BETS_PER_SECOND)
        sent = await self.consumer.place_many(BIG_TABLE, str(ev["round_id"]), n, rate, id_length=64 if self.stud else 60)
        self.oversize[key] = sent
        entry.update(round=key, bets=sent)
        # the next fault waits for this round's betting to close (a kill now would only drop bets)
        await self._wait_event(lambda e: e.get("event") == "betting_closed" and e.get("round_id") == ev["round_id"],
                               timeout=self.big_betting + 30)
        return True

    async def _kill_house_worker(self, entry: dict[str, Any]) -> bool:
        """SIGKILL the house players' worker process(es) as the house AI's turn starts (it thinks
        for ``ai_budget_ms``): the backend must replace its pool and ask again; the AI moves, never
        the timer (judged with every timer move)."""
        deadline = time.monotonic() + ARMED_SECONDS
        while True:
            ev = await self._wait_event(lambda e: e.get("event") == "turn"
                                        and (e.get("data") or {}).get("player_id") == HOUSE_AI,
                                        timeout=max(0.0, deadline - time.monotonic()))
            if ev is None:
                self.problems.append(f"chaos: no house AI turn within {ARMED_SECONDS:.0f} s (house_worker_kill not "
                                     "injected)")
                return False
            if not self.backend.alive or self._backend_busy or self.backend.proc is None:
                continue
            pids: list[int] = []
            for _ in range(10):  # a pool just started may not have forked its worker yet
                pids = house_worker_pids(self.backend.proc.pid)
                if pids:
                    break
                await asyncio.sleep(0.02)
            if pids:
                break
            self.worker_kill_misses += 1  # no worker yet at this turn: the next one
        entry["at_ms"] = int(self.backend_now_ms())
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        key = f"{ev['table_id']}:{ev['round_id']}"
        entry.update(round=key, turn=(ev.get("data") or {}).get("turn"), workers_killed=len(pids),
                     after_ms=round((time.monotonic() - ev["_rx"]) * 1000, 1))
        self.worker_kills.append(dict(entry))
        return True

    async def _broker_loss_in_exposure(self, entry: dict[str, Any]) -> bool:
        """The broker dies while a stud table's exposure window (LAST_CARD) is open: the window
        pauses with the link (the station could not report through it) and runs whole again."""
        deadline = time.monotonic() + ARMED_SECONDS
        while True:
            ev = await self._wait_event(lambda e: e.get("event") == "confirm_window" and not
                                        (e.get("data") or {}).get("resumed")
                                        and self.games.get(e.get("table_id")) == "stud",
                                        timeout=max(0.0, deadline - time.monotonic()))
            if ev is None:
                self.problems.append(f"chaos: no stud exposure window within {ARMED_SECONDS:.0f} s "
                                     "(exposure_broker_loss not injected)")
                return False
            if (self._oversize_task is None or self._oversize_task.done()) and not self._backend_busy:
                break  # not while the big round takes its bets, nor while the backend is down
        key = f"{ev['table_id']}:{ev['round_id']}"
        entry["at_ms"] = await self._broker_down(self.rng.uniform(0.3, 1.2))
        self.must_complete[key] = "broker killed in the stud exposure window (LAST_CARD)"
        entry.update(round=key)
        return True

    def _open_now(self) -> tuple[dict[str, str], dict[str, str]]:
        """(Sevenluck rounds deciding, stud or Seotda rounds with a player's turn open) now, by
        round key: what a backend kill now must not cost a player."""
        deciding: dict[str, str] = {}
        turns: dict[str, str] = {}
        for tid, payload in self.last_event.items():
            game = self.games.get(tid)
            if game not in ("sevenluck", "stud", "seotda"):
                continue
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                ev = json.loads(payload)
                data = ev.get("data") or {}
                key = f"{tid}:{ev.get('round_id')}"
                if game == "sevenluck" and ev.get("event") == "decisions_open":
                    deciding[key] = "its players deciding"
                elif ev.get("event") == "turn" and data.get("player_id") != HOUSE_AI:
                    turns[key] = f"{data.get('player_id')}'s turn {data.get('turn')}"
        return deciding, turns

    async def _kill_long(self, entry: dict[str, Any], aim: str) -> bool:
        """Kill the backend while Sevenluck players decide (``backend_down_long``) or while a stud
        or Seotda player's turn is open (``backend_kill_in_turn``), and keep it down past the
        window: on restart they get a whole window again, never the timer's move (judged with
        every timer move). One kill serves both when the other is open at that instant too (its
        kind is then counted, and not injected again in this cycle of the rotation)."""
        if aim == "decision":
            ev = await self._wait_event(lambda e: e.get("event") == "decisions_open", timeout=60)
        else:
            ev = await self._wait_event(lambda e: e.get("event") == "turn" and self.games.get(e.get("table_id")) in
                                        ("stud", "seotda") and not (e.get("data") or {}).get("resumed")
                                        and (e.get("data") or {}).get("player_id") != HOUSE_AI
                                        and e["_rx"] > self.last_step_at + STEP_SETTLE_SECONDS, timeout=60)
        kind = "backend_down_long" if aim == "decision" else "backend_kill_in_turn"
        if ev is None:
            self.problems.append(f"chaos: no {'decisions' if aim == 'decision' else 'stud or Seotda turn'} "
                                 f"opened within 60 s ({kind} not injected)")
            return False
        deciding, turns = self._open_now()
        key = f"{ev['table_id']}:{ev['round_id']}"
        (deciding if aim == "decision" else turns).setdefault(key, "the round aimed at")
        window = max(self.decision_seconds if deciding else 0.0, self.action_seconds if turns else 0.0)
        self._backend_busy = True
        try:
            self.backend.kill()
            down = window * self.rng.uniform(1.2, 1.5)
            await asyncio.sleep(down)
            await self._start_backend()
        finally:
            self._backend_busy = False
        for k, what in deciding.items():
            self.must_not_time_out[k] = f"backend killed with {what}, down {down:.1f} s (window {self.decision_seconds} s)"
        for k, what in turns.items():
            self.must_not_time_out[k] = f"backend killed in {what}, down {down:.1f} s (window {self.action_seconds} s)"
        entry.update(round=key, down_seconds=round(down, 2), deciding=sorted(deciding), turns=sorted(turns))
        other = "backend_kill_in_turn" if aim == "decision" else "backend_down_long"
        if (turns if aim == "decision" else deciding) and other in self.chaos_kinds:
            self.chaos_counts[other] += 1  # this kill was that fault too
            self._served.add(other)
            entry["also"] = other
        return True
