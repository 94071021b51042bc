"""The multi-node soak's faults (``dealer soak --nodes N``, :mod:`tools.soak_nodes`): their kinds
and plan, a node process that can be killed, paused and stopped, and the injection of each
fault with the takeover it must be followed by."""

from __future__ import annotations

import asyncio
import json
import math
import random
import signal
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tools.soak_parts import BackendProcess
from tools.soak_ownership import NODE_FAULTS, NodeFault


CHAOS_KINDS = NODE_FAULTS + ("postgres_restart", "broker_restart", "lease_move_in_rematch")
#: Kinds that need a table of some game (a soak without one plans none of them).
CHAOS_NEEDS = {"lease_move_in_rematch": "seotda"}


def plan_chaos(rng: random.Random, n: int, kinds: Sequence[str]) -> list[str]:
    """``n`` faults: every second one a node kill or pause (in pairs of both, in random order),
    and between them the other kinds in turn (node stops, PostgreSQL and broker restarts,
    shuffled once): a node kill or pause is never more than two faults away, and the first
    ``2 * (len(kinds) - 2)`` faults hold every kind."""
    takers = [k for k in ("node_kill", "node_pause") if k in kinds]
    others = [k for k in kinds if k not in takers]
    rng.shuffle(others)
    plan: list[str] = []
    pair: list[str] = []
    while len(plan) < n:
        if not pair:
            pair = list(takers)
            rng.shuffle(pair)
        plan.append(pair.pop())
        if others and len(plan) < n:
            plan.append(others[(len(plan) // 2) % len(others)])
    return plan[:n]


class NodeProcess(BackendProcess):
    """One ``dealer run`` node: killed, paused and resumed, stopped and started again."""

    def __init__(self, node_id: str, config: Path, log_path: Path) -> None:
        # a fatal signal (SIGSEGV, SIGABRT from C code) prints every thread's Python stack to its log
        super().__init__(config, log_path, env={"PYTHONFAULTHANDLER": "1"})
        self.node_id = node_id
        self.paused = False

    def pause(self) -> None:
        if self.alive:
            self.proc.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]  # alive: the process was started
            self.paused = True

    def resume(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    def term(self, timeout: float = 20.0) -> bool:
        """SIGTERM and wait for the exit; False when it had to be killed."""
        self.resume()
        if self.proc is None or self.proc.poll() is not None:
            return True
        self.proc.terminate()
        try:
            self.proc.wait(timeout=timeout)
            return True
        except Exception:  # subprocess.TimeoutExpired
            self.kill()
            return False



class NodeFaults:
    """The multi-node soak's chaos (a mixin of :class:`tools.soak_nodes._NodeSoak`, whose state it
    reads and writes): the plan, each fault's victim and instant, and its injection."""

    async def _fault_instant(self, kind: str, node: str) -> NodeFault:
        """The database clock now and the victim's live leases (read just before the signal)."""
        before = time.time()
        rows = await self._db(
            "SELECT extract(epoch FROM clock_timestamp())::float8, "
            "(SELECT coalesce(json_object_agg(table_id, epoch), '{}') FROM leases "
            " WHERE node = %s AND expires_at > clock_timestamp())", (node,))
        after = time.time()
        now, held = rows[0]
        if self.rejoining.pop(node, None) is not None:
            self.rejoin_cut_short += 1
        self.clock_offsets.append(now - (before + after) / 2)
        held = held if isinstance(held, dict) else json.loads(held)
        fault = NodeFault(kind, node, float(now), {t: int(e) for t, e in held.items()})
        for tid in fault.held:  # a round deciding or in a turn now: its players must not be timed out
            last = self.last_event.get(tid) or {}
            if self.games.get(tid) == "sevenluck" and last.get("event") == "decisions_open" and last.get("round_id"):
                self.must_not_time_out[f"{tid}:{last['round_id']}"] = f"{kind} of {node} while its players decided"
            elif last.get("event") == "turn" and last.get("player_id") and last.get("round_id"):
                self.must_not_time_out[f"{tid}:{last['round_id']}"] = (
                    f"{kind} of {node} in {last['player_id']}'s turn {last.get('turn')} ({self.games.get(tid)})")
        return fault

    # -- chaos ----------------------------------------------------------------------------------

    def mean_applied(self) -> float:
        return sum(len(s) for s in self.applied_per_table.values()) / len(self.tids)

    async def _chaos(self) -> None:
        if not self.chaos_on:
            return
        n = max(2 * (len(self.kinds) - 2), math.floor(self.rounds * 0.85 / self.fault_every))
        plan = plan_chaos(self.rng, n, self.kinds)
        spacing = min(self.fault_every, self.rounds * 0.85 / len(plan))
        for i, kind in enumerate(plan):
            threshold = spacing * (i + self.rng.uniform(0.5, 1.0))
            while self.mean_applied() < threshold:
                await asyncio.sleep(0.05)
            await self._inject(kind)

    async def _back(self, node: NodeProcess) -> None:
        """A node a fault stopped starts again and rejoins."""
        await self._start_node(node)
        self._rejoined(node.node_id)

    async def _expect_takeover(self, kind: str, node: NodeProcess, fault: NodeFault) -> None:
        """Every table the fault's node held is taken over within three leases and 30 s."""
        self.node_faults.append(fault)
        if not await self._await_takeover(fault, timeout=3 * self.lease_seconds + 30):
            self.problems.append(f"{kind} of {node.node_id}: tables {sorted(fault.held)} not all taken "
                                 f"over within {3 * self.lease_seconds + 30:.0f} s")

    async def _victim(self, kind: str) -> tuple[NodeProcess, NodeFault]:
        """A live node holding tables (the one holding most, on a tie a random one) and the
        fault's instant. Right after a PostgreSQL restart every lease may have run out: wait
        (up to 30 s) until one is held again, or the fault would time nothing."""
        deadline = time.monotonic() + 30
        while True:
            held = Counter(node for node, _, expires in self.lease_now.values() if node and expires > self.db_now)
            alive = [n for n in self.nodes.values() if n.alive and not n.paused]
            self.rng.shuffle(alive)
            node = max(alive, key=lambda n: held.get(n.node_id, 0))
            fault = await self._fault_instant(kind, node.node_id)
            if fault.held or time.monotonic() > deadline:
                return node, fault
            await asyncio.sleep(0.2)

    async def _await_takeover(self, fault: NodeFault, timeout: float) -> bool:
        """Wait until every table the victim held has a later lease (the next fault waits)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(self.lease_now.get(t, (None, 0, 0.0))[1] > e for t, e in fault.held.items()):
                return True
            await asyncio.sleep(0.05)
        return False

    async def _rematch_victim(self) -> tuple[NodeProcess, NodeFault] | None:
        """The node holding a Seotda table whose hand has just gone to a rematch (a 9·4 or a draw:
        the pot carried, the cards gathered and shuffled again), and the fault's instant."""
        ev = await self._wait_event(lambda e: e.get("event") == "rematch" and self.games.get(e.get("table_id")) == "seotda",
                                    timeout=180)
        if ev is None:
            self.problems.append("chaos: no Seotda rematch within 180 s (lease_move_in_rematch not injected)")
            return None
        tid = str(ev["table_id"])
        holder = self.lease_now.get(tid, (None, 0, 0.0))[0]
        node = self.nodes.get(holder or "")
        if node is None or not node.alive or node.paused:
            self.problems.append(f"chaos: the holder of {tid} ({holder}) is not a live node (lease_move_in_rematch)")
            return None
        fault = await self._fault_instant("lease_move_in_rematch", node.node_id)
        self.rematch_moves.append({"table": tid, "round": ev.get("round_id"), "node": node.node_id})
        return node, fault

    async def _inject(self, kind: str) -> None:
        rng = self.rng
        entry: dict[str, Any] = {"kind": kind, "t": round(time.monotonic() - self.t0, 3),
                                 "at_ms": int(time.time() * 1000)}
        if kind == "lease_move_in_rematch":
            found = await self._rematch_victim()
            if found is None:
                return
            node, fault = found
            self._busy.add(node.node_id)
            try:
                entry.update(node=node.node_id, tables=len(fault.held), table=self.rematch_moves[-1]["table"],
                             round=self.rematch_moves[-1]["round"])
                clean = await asyncio.to_thread(node.term)  # it hands its tables over at once: the lease moves
                if not clean:
                    self.problems.append(f"lease_move_in_rematch: {node.node_id} did not exit within 20 s of SIGTERM")
                await asyncio.sleep(rng.uniform(0.5, 2.0))
                await self._back(node)
                await self._expect_takeover(kind, node, fault)
            finally:
                self._busy.discard(node.node_id)
        elif kind in NODE_FAULTS:
            node, fault = await self._victim(kind)
            self._busy.add(node.node_id)
            try:
                entry.update(node=node.node_id, tables=len(fault.held), held_by_node=dict(sorted(Counter(
                    n for n, _, expires in self.lease_now.values() if n and expires > self.db_now).items())))
                if kind == "node_kill":
                    node.kill()
                    down = rng.uniform(1.0, 4.0)
                    await asyncio.sleep(down)
                    await self._back(node)
                    entry["down_s"] = round(down, 2)
                elif kind == "node_term":
                    clean = await asyncio.to_thread(node.term)
                    code = node.proc.returncode if node.proc else None
                    if not clean:
                        self.problems.append(f"node_term: {node.node_id} did not exit within 20 s of SIGTERM")
                    elif code != 0:  # a clean stop hands over and exits 0; anything else is a crash on the way out
                        self.problems.append(f"node_term: {node.node_id} exited {code} on SIGTERM (see {node.log_path})")
                    down = rng.uniform(0.5, 2.0)
                    await asyncio.sleep(down)
                    await self._back(node)
                    entry["down_s"] = round(down, 2)
                else:
                    await self._pause(node, fault, entry)
                await self._expect_takeover(kind, node, fault)
            finally:
                self._busy.discard(node.node_id)
        elif kind == "postgres_restart":
            assert self.pg is not None
            t = time.monotonic()
            await asyncio.to_thread(self.pg.kill)
            down = rng.uniform(0.2, 1.5)
            await asyncio.sleep(down)
            await asyncio.to_thread(self.pg.start)
            self.pg_restarts_s.append(time.monotonic() - t)
            entry["down_s"] = round(down, 2)
        elif kind == "broker_restart":
            self.broker.kill()
            down = rng.uniform(0.05, 0.6)
            await asyncio.sleep(down)
            await asyncio.to_thread(self.broker.start)
            entry["down_s"] = round(down, 2)
        else:
            raise ValueError(kind)
        self.chaos_counts[kind] += 1
        entry["end_ms"] = int(time.time() * 1000)
        self.chaos_log.append(entry)

    async def _pause(self, node: NodeProcess, fault: NodeFault, entry: dict[str, Any]) -> None:
        """SIGSTOP past the lease, SIGCONT: which of its tables moved while it slept, and (after
        the run, from the journal) whether it wrote anything more under its old leases."""
        node.pause()
        paused = self.lease_seconds + self.rng.uniform(1.5, 3.0)
        await asyncio.sleep(paused)
        rows = await self._db("SELECT extract(epoch FROM clock_timestamp())::float8")
        fault.resumed_at = float(rows[0][0])
        node.resume()
        self._rejoined(node.node_id)
        entry["paused_s"] = round(paused, 2)
        self.pause_checks.append({"node": node.node_id, "paused_s": round(paused, 2), "tables": len(fault.held),
                                  "resumed_at": fault.resumed_at, "held": dict(fault.held)})
        await asyncio.sleep(1.0)
        if not node.alive:
            code = node.proc.returncode if node.proc else None
            self.problems.append(f"node_pause: {node.node_id} exited ({code}) after SIGCONT instead of stepping down")
            await self._start_node(node)
