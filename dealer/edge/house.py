"""House players out of the event loop: their decisions run in a process pool.

The Matgo AI searches for up to 100 ms a move. In a thread it holds the GIL, and every table on
the host waits for it (event-loop lateness p99 from 0.3 ms to 8.9 ms). Here a hand with a house
seat (:class:`~dealer.core.game_contract.HouseSeat`) describes the decision as a picklable request,
:class:`HouseRunner` sends it to a worker process (:func:`dealer.house.registry.decide`) and the
move comes back as an ordinary ``player_action`` through :meth:`Service.submit`, so it is
journaled and replays exactly like a remote player's.

* The pool's workers come from a fork server (``forkserver``): forking the backend itself, a
  process with threads and an event loop, is unsafe, and ``spawn`` would re-run ``python -m
  dealer``. Size: ``service.house_workers`` (default: one core left for the event loop, at
  most two workers).
* A worker that dies (killed, out of memory) breaks the pool: the pool is replaced and the turn
  asked again, up to :data:`RETRIES` times; after that the move is not sent, the failure is
  logged and the turn's timer plays the default move, as for any silent player.
* ``service.house_players = "thread"`` keeps the old way (a thread of this process), for a
  machine without ``forkserver`` and for the benchmark's before/after (``dealer bench house``).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
from collections.abc import Callable, Coroutine, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Literal, TypeVar

import structlog

from dealer.core.draws import ai_seed
from dealer.core.events import Event, PlayerAction
from dealer.core.messages import PlayerMessage
from dealer.core.round import Round
from dealer.core.game_contract import HouseSeat, has_house_seats, offers
from dealer.house import worker
from dealer.house.player import HouseMove
from dealer.house.registry import decide

log = structlog.get_logger("dealer.edge.house")
_T = TypeVar("_T")

Mode = Literal["process", "thread"]
#: A turn whose worker died is asked again this many times (each on a fresh pool).
RETRIES = 3
#: Imported once by the fork server, so every worker starts with the house players loaded.
_PRELOAD = ["dealer.house.registry", "dealer.house.worker"]


def default_workers() -> int:
    """One core left for the event loop; at most two workers (a move is 100 ms on one core)."""
    return max(1, min(2, (os.cpu_count() or 1) - 1))


class HouseRunner:
    """Plays the house seats of a service's tables.

    ``submit(table_id, event)`` queues the move (the service's :meth:`~Service.submit`);
    ``now_ms`` stamps it. :meth:`deliver` is given every private message and takes those for a
    house player."""

    def __init__(self, submit: Callable[[str, Event], object], now_ms: Callable[[], int], *,
                 mode: Mode = "process", workers: int | None = None, nice: int = worker.NICE,
                 games: Iterable[object] = ()) -> None:
        if mode not in ("process", "thread"):
            raise ValueError(f"house players run in a 'process' pool or a 'thread', not {mode!r}")
        self.mode = mode
        self.workers = workers or default_workers()
        self.nice = nice  # the workers' CPU priority below the backend's (dealer/house/worker.py)
        self._submit = submit
        self._now = now_ms
        #: (table, round, turn) of every turn given to a house player this run: the same turn
        #: given again (a reconnect resends private messages) is not decided twice.
        self.started: set[tuple[str, str | None, int]] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._pool: ProcessPoolExecutor | None = None
        self._warm: ProcessPoolExecutor | None = None  # the pool the last warm-up went to
        self._closed = False
        #: pools replaced because a worker died, this run
        self.replaced = 0
        if mode == "process" and any(has_house_seats(g) for g in games):
            self._prepare()

    # -- the service's side ---------------------------------------------------------------

    @property
    def deciding(self) -> set[asyncio.Task[Any]]:
        """The house players' decisions on their way (tools wait for them to go quiet)."""
        return {t for t in self._tasks if not t.done()}

    def deliver(self, table_id: str, rnd: Round | None, msg: PlayerMessage) -> bool:
        """Take ``msg`` if it is for a house player of the round's hand (the hand says so:
        :meth:`HouseSeat.house_players`); its ``your_turn`` starts the decision. A house
        player's private messages are never published. False: not a house player's message."""
        hand = rnd.hand if rnd is not None else None
        # offers() keeps the answer per class: a runtime Protocol isinstance costs tens of
        # microseconds, and every private message of every table comes here
        if hand is None or not offers(hand, HouseSeat) or msg.player_id not in hand.house_players():  # type: ignore[type-abstract]  # offers() takes a protocol class (python/mypy#4717)
            return False
        assert rnd is not None
        if msg.kind == "your_turn":
            self._turn(table_id, rnd, hand, msg)
        else:  # its cards come before its first turn: have a worker ready by then
            self._warm_up()
        return True

    def _turn(self, table_id: str, rnd: Round, hand: HouseSeat, msg: PlayerMessage) -> None:
        turn = int(msg.data.get("turn", 0))
        key = (table_id, msg.round_id, turn)
        if key in self.started:
            return  # the same turn given again (a reconnect): its move is already on its way
        self.started.add(key)
        assert msg.round_id is not None  # a round's messages name it (RoundState.tell)
        # from the round's secret draw: not foreseeable
        seed = ai_seed(rnd.draw, msg.round_id, turn, rnd.rules.game.house_seed_label)
        try:
            request = hand.house_request(msg.player_id, turn, seed)
        except Exception as exc:  # a bug in a game: its turn's timer plays the default move
            log.error("house request failed", player_id=msg.player_id, turn=turn, error=repr(exc))
            return
        self._start(self._play(table_id, msg.player_id, msg.round_id, turn, request),
                    name=f"house-{table_id}-{turn}")

    async def _play(self, table_id: str, player: str, round_id: str | None, turn: int, request: object) -> None:
        move = await self.decide(request)
        self._submit(table_id, PlayerAction(player_id=player, action=move.action, card=move.card,  # type: ignore[arg-type]  # pydantic validates the action text against PlayerAction's
                                            amount=move.amount, round_id=round_id, turn=turn, at=self._now()))

    def _start(self, coro: Coroutine[Any, Any, Any], *, name: str) -> None:
        if self._closed:
            coro.close()
            return
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(_log_failure)

    def forget(self, table_id: str) -> None:
        """A table left this node: its turns in progress are dropped (their moves would be
        refused) and forgotten, so the turn is decided again if the table comes back."""
        self.started = {k for k in self.started if k[0] != table_id}
        for task in list(self._tasks):
            if task.get_name().startswith(f"house-{table_id}-"):
                task.cancel()

    # -- deciding -----------------------------------------------------------------------------

    async def decide(self, request: object) -> HouseMove:
        """The house player's move for ``request``, decided out of the event loop."""
        if self.mode == "thread":
            return await asyncio.to_thread(decide, request)
        return await self._in_pool(decide, request)

    def _prepare(self) -> None:
        """The tables' games have house seats: start a worker now, beside the start-up (the fork
        server's imports take a second or two on a busy host, longer than a short turn timer)."""
        pool = self._warm = self._pool_now()

        def start() -> None:
            try:
                pool.submit(worker.pid)
            except RuntimeError:  # stopped before it started: nothing to warm
                pass

        threading.Thread(target=start, name="house-prepare", daemon=True).start()

    def _warm_up(self) -> None:
        """Start a worker of the current pool now, once (the fork server and the imports take a
        while), so that a first move is not slowed by them."""
        if self.mode != "process" or self._closed:
            return
        pool = self._pool_now()
        if self._warm is not pool:
            self._warm = pool
            self._start(self._in_pool(worker.pid), name="house-warm")

    async def worker_pid(self) -> int:
        """The pid of the worker that answers (with one worker: the worker). Process mode only."""
        return await self._in_pool(worker.pid)

    async def _in_pool(self, fn: Callable[..., _T], *args: Any) -> _T:
        for attempt in range(RETRIES + 1):
            pool = self._pool_now()
            try:
                # submit() may start a worker (a round trip to the fork server): not on the loop
                fut: Future[_T] = await asyncio.to_thread(pool.submit, fn, *args)
                return await asyncio.wrap_future(fut)
            except BrokenProcessPool as exc:
                self._replace(pool)
                if attempt == RETRIES:
                    raise
                log.warning("house worker died: pool replaced, asking again", attempt=attempt + 1, error=str(exc))
        raise AssertionError("unreachable")  # pragma: no cover

    def _pool_now(self) -> ProcessPoolExecutor:
        if self._closed:
            raise RuntimeError("the house players are stopped")
        if self._pool is None:
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(_PRELOAD)
            self._pool = ProcessPoolExecutor(self.workers, mp_context=ctx, initializer=worker.init,
                                             initargs=(self.nice, os.getpid()))
        return self._pool

    def _replace(self, broken: ProcessPoolExecutor) -> None:
        if self._pool is broken:  # turns that failed together replace the pool once
            self._pool = None
            self.replaced += 1
        broken.shutdown(wait=False, cancel_futures=True)

    async def close(self) -> None:
        """Stop: no new decision starts, the pending ones are dropped (their turns' timers, or
        the next run's resend of the turn, take over), and the workers exit."""
        self._closed = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        pool, self._pool = self._pool, None
        if pool is not None:  # a worker finishes the move it is on (at most its budget), then exits
            await asyncio.to_thread(pool.shutdown, wait=True, cancel_futures=True)


def _log_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("house move failed", task=task.get_name(), error=repr(task.exception()))
