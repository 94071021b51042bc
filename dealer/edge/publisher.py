"""Publishing: the service's messages, each checked before it goes out.

A table's public path is one retained message per committed batch (protocol 2,
dealer/edge/catchup.py): the round events and station prompts a batch releases are gathered
per table (:meth:`Publisher.event`, :meth:`Publisher.release_prompt`) and go out inside the
table's ``state`` after the commit, with the state they led to (:meth:`Publisher.flush_catchup`);
a prompt that cannot wait for a batch (the journal is down) goes at once with the last state
(:meth:`Publisher.announce`). Players' private messages and refusals (``rejected`` on
``events``) are live, QoS 1, not kept; each seated player's state is retained beside them. All
of it again after every broker connect (under the new session), and marked stale on a clean
stop before the status goes offline. No message that would show its audience a hidden card
(:func:`dealer.core.visibility.leaks`) or that is over the broker's size limit is published.
Results are not published here: the outbox relay (dealer/edge/relay.py) delivers them.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Coroutine
from typing import Any

import structlog
from pydantic import BaseModel

from dealer.core import visibility
from dealer.core.messages import RoundEvent, StationPrompt, TableState
from dealer.edge import prompts, topics
from dealer.edge.catchup import Catchup, News
from dealer.edge.metrics import Metrics
from dealer.edge.tables import Tables
from drivers.bus import Bus

log = structlog.get_logger("dealer.edge.service")  # one logger for every part of the service


Observer = Callable[[str, Any], None]  # (kind, message): kind in event/prompt/result/rejection

#: A card's path in stages (benchmarks): read -> queued for the core (ingest: validation, the
#: reader session, the event built) -> taken by the commit loop (queue) -> committed (apply and
#: group commit) -> the state carrying its card_registered handed to the bus (release) -> PUBACK (broker).
STAGES = ("ingest", "queue", "apply_commit", "release", "broker")


def _name_of(msg: BaseModel) -> str | None:
    """What a live message is, for a log line that must not carry the message itself: a round
    event's ``event``, a prompt's or player message's ``kind``."""
    name = getattr(msg, "event", None) or getattr(msg, "kind", None)
    return str(name) if name is not None else None


class Publisher:
    """Gets the service's messages out: live ones now, catch-up ones retained, none that would
    show a hidden card or break the size limit. Uses the bus, the tables (their links: what a
    waiting station is told), the catch-up state, the observers and the background task set
    (``spawn``); ``paused_reason`` says why a table's clocks are stopped (its retained state)."""

    def __init__(self, bus: Bus, tables: Tables, metrics: Metrics, catchup: Catchup, *,
                 now_ms: Callable[[], int], spawn: Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]],
                 paused_reason: Callable[[str], str | None], instance: str, max_message_bytes: int) -> None:
        self.bus = bus
        self.tables = tables
        self.metrics = metrics
        self.catchup = catchup
        self.now_ms = now_ms
        self.spawn = spawn
        self.paused_reason = paused_reason
        self.instance = instance
        self.max_message_bytes = max_message_bytes
        self.observers: list[Observer] = []
        #: Tables whose retained state waits for the commit loop to send it (after a commit).
        self.catchup_due: set[str] = set()
        #: per table: the events and prompts released since its last state (they go with the next)
        self._news: dict[str, News] = {}
        self.stopping = False  # the service's stop() has begun: the stale marks are the last retained word
        #: When set to a list (benchmarks), every scan-to-publish latency is appended in ns.
        self.latency_samples: list[int] | None = None
        #: When set (benchmarks: :data:`STAGES` -> []), each card's time in every stage of its
        #: path, in ns: where a card's time goes, at any load. :meth:`trace` feeds it.
        self.stages: dict[str, list[int]] | None = None
        self._traced: dict[int, list[int]] = {}  # a card's received_ns -> its stage instants so far
        #: Publishes of each table on their way to the broker (a dropped table's are waited for).
        self._inflight: dict[str, set[asyncio.Future[None]]] = {}
        #: The bus has connected at least once. Before that, live messages are not sent nor
        #: logged one by one (a line per table at every start): they are counted, said in one
        #: line at the first connect (:meth:`first_connect`), and every table's prompt goes then.
        self.connected_once = False
        self.unsent_before_connect = 0

    def _track(self, topic: str, task: asyncio.Future[None]) -> None:
        tid = topics.table_of(topic)
        if tid is None:
            return
        tasks = self._inflight.setdefault(tid, set())
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    async def sent(self, tid: str, timeout: float = 2.0) -> None:
        """Wait (a bounded while) until the table's publishes handed to the bus are done: a
        table handed over must not have a message of this node land after the next owner's."""
        tasks = list(self._inflight.pop(tid, ()))
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)

    @property
    def session(self) -> str:
        """The broker session the retained messages name (the bus's; its status names it too)."""
        return getattr(self.bus, "session", None) or f"{self.instance}.1"

    def notify(self, kind: str, msg: Any) -> None:
        for obs in list(self.observers):
            try:
                obs(kind, msg)
            except Exception:
                log.exception("observer failed")

    def release_prompt(self, prompt: StationPrompt) -> None:
        """The table's prompt is now ``prompt``: it goes with the table's next state (the commit
        loop sends it after the batch; :meth:`announce` sends it at once)."""
        tid = prompt.table_id
        if not self.tables.may_publish(tid, "prompt"):
            return
        prompt = prompts.with_waiting(prompt, self.tables.links[tid])  # between rounds: which link
        if prompt.kind == "RESCAN":
            self.metrics.rescans.labels(table=tid, reason=prompt.reason or "").inc()
        elif prompt.kind == "ALERT":
            self.metrics.alerts.labels(table=tid, reason=prompt.reason or "").inc()
            log.error("supervisor alert", table_id=tid, message=prompt.message)
        if self.withheld(topics.state(tid), prompt.model_dump_json(), "prompt", prompt.round_id):
            return
        self.catchup.set_prompt(prompt)
        self._news.setdefault(tid, News()).prompts.append(prompt)
        self.catchup_due.add(tid)

    def announce(self, prompt: StationPrompt) -> None:
        """A prompt that cannot wait for the next batch (the journal is down, a forged frame,
        an alert): released, and sent now with the table's last state (never a state built from
        a table that may hold a batch not yet journaled)."""
        self.release_prompt(prompt)
        tid = prompt.table_id
        news = self._news.get(tid)
        if not news or not self.bus.connected or self.stopping:
            return  # nothing new, or the next connect or batch sends it
        msg = self.catchup.announce(tid, news, at=self.now_ms())
        if msg is not None:
            del self._news[tid]
            self._publish_state(topics.state(tid), msg, news)

    def event(self, table_id: str, ev: RoundEvent, latency_from: int = 0) -> bool:
        """A committed round event: it goes with the table's next state. False: not this node's
        table now, or it would show a hidden card (withheld)."""
        if not self.tables.may_publish(table_id, "event"):
            return False
        if self.withheld(topics.state(table_id), ev.model_dump_json(), "event", ev.round_id):
            return False
        news = self._news.setdefault(table_id, News())
        news.events.append(ev)
        if latency_from:
            news.latency_from.append(latency_from)
        self.catchup_due.add(table_id)
        self.notify("event", ev)
        return True

    def publish_soft(self, topic: str, msg: BaseModel, kind: str) -> bool:
        """Publish a live message now (a player's private message, a refusal: QoS 1, not
        durable: stale ones are useless); never one that would show its audience a hidden card
        (False: withheld)."""
        if not self.tables.may_publish(topics.table_of(topic), kind):  # not this node's table (now): say nothing
            return False
        if not self.connected_once and not self.bus.connected:  # starting: said at the first connect
            self.unsent_before_connect += 1
            self.metrics.publish_failures.labels(kind=kind).inc()
            return False
        text = msg.model_dump_json()
        if self.withheld(topic, text, kind, getattr(msg, "round_id", None)):
            return False
        payload = text.encode()
        if len(payload) > self.max_message_bytes:  # the broker would drop our connection
            self.metrics.messages_oversize.labels(kind=kind).inc()
            log.error("message over the limit: not sent", kind=kind, topic=topic, size=len(payload),
                      limit=self.max_message_bytes, name=_name_of(msg),
                      round_id=getattr(msg, "round_id", None))
            return False
        self.notify(kind, msg)
        fut = self._send(topic, payload)
        fut.add_done_callback(functools.partial(self._live_done, topic, len(payload), kind,
                                                getattr(msg, "round_id", None), _name_of(msg)))
        self._track(topic, fut)
        return True

    def trace(self, received_ns: int, made_ns: int, taken_ns: int, committed_ns: int) -> None:
        """A card's instants up to its commit (benchmarks only): read, queued for the core, taken
        by the commit loop, committed; its state's publish and PUBACK follow (:meth:`_publish_state`)."""
        if self.stages is None:
            return
        if len(self._traced) > 100_000:  # cards whose event never went (withheld, refused): bounded
            self._traced.clear()
        self._traced[received_ns] = [received_ns, made_ns, taken_ns, committed_ns]

    def first_connect(self) -> None:
        """The bus is connected (again): the first time, say what was not sent before it."""
        if not self.connected_once and self.unsent_before_connect:
            log.info("live messages not sent before the first broker connection (prompts go again now)",
                     count=self.unsent_before_connect)
        self.connected_once = True

    def _send(self, topic: str, payload: bytes, *, retain: bool = False) -> asyncio.Future[None]:
        """Hand a message to the bus (QoS 1); the future of the broker's acknowledgement. The MQTT
        bus makes it without a coroutine or a Task (``publish_nowait``); a bus without that (the
        in-process one) publishes in a task, which is a future too."""
        bus = self.bus
        nowait: Callable[..., asyncio.Future[None]] | None = getattr(bus, "publish_nowait", None)
        if nowait is not None:
            return nowait(topic, payload, qos=1, retain=retain)
        return self.spawn(bus.publish(topic, payload, qos=1, retain=retain))

    def _live_done(self, topic: str, size: int, kind: str, round_id: str | None, name: str | None,
                   fut: asyncio.Future[None]) -> None:
        """A live message's PUBACK, or its failure: live messages are not kept, so one line per
        message dropped (never its payload)."""
        if fut.cancelled():
            return
        exc = fut.exception()
        if exc is not None:
            self.metrics.publish_failures.labels(kind=kind).inc()
            log.warning("publish dropped", kind=kind, name=name, topic=topic, round_id=round_id, size=size,
                        reason=str(exc)[:200])

    def withheld(self, topic: str, payload: str, kind: str, round_id: str | None) -> bool:
        """Whether ``payload`` would show the audience of ``topic`` a card of its round that it
        may not see (:func:`dealer.core.visibility.leaks`): counted, and logged once without naming
        the cards. Effects are released after their batch: the round may have moved on, but
        within a round what an audience may see only grows, so nothing legitimate is held."""
        tid, audience = topics.table_of(topic), topics.audience(topic)
        table = self.tables.get(tid) if tid is not None else None
        if table is None or audience is None:
            return False
        rnd = table.current
        if round_id is not None and (rnd is None or rnd.round_id != round_id):
            rnd = table.undelivered.get(round_id)  # an older round (or none: nothing of it to hide any more)
        leaked = visibility.leaks(rnd, audience, payload)
        if not leaked:
            return False
        self.metrics.visibility_blocked.labels(kind=kind).inc()
        log.error("result carries hidden cards; delivered anyway: it settles money" if kind == "result"
                  else "message withheld: it would show hidden cards", kind=kind, topic=topic, audience=audience,
                  round_id=round_id, hidden=len(leaked), positions=visibility.positions_of(rnd, leaked))
        return True

    # -- retained catch-up messages (dealer/edge/catchup.py) ----------------------------------------

    def flush_catchup(self) -> None:
        """Send the state of the tables due (with their news) and every retained message that
        changed. Called by the commit loop after a batch's commit and effects, so a state never
        shows what is not journaled. Not connected: the news is dropped as live messages were
        (counted), and the next connect marks every table due again."""
        if not self.catchup_due:
            return
        if not self.bus.connected or self.stopping:
            if not self.stopping:
                for tid in self.catchup_due:
                    news = self._news.pop(tid, None)
                    if news:
                        self.metrics.publish_failures.labels(kind="table_state").inc()
                        if not self.connected_once:
                            self.unsent_before_connect += 1
                        else:  # its events and prompts are lost to live subscribers: one line, as a live message's
                            _log_news_dropped(topics.state(tid), news, "not connected")
            return
        due, self.catchup_due = self.catchup_due, set()
        now = self.now_ms()
        for tid in sorted(due):
            news = self._news.pop(tid, None)
            if not self.tables.may_publish(tid, "table_state"):
                continue
            for topic, msg in self.catchup.updates(self.tables[tid], session=self.session, at=now,
                                                  paused_reason=self.paused_reason(tid), news=news):
                if isinstance(msg, TableState):
                    self._publish_state(topic, msg, news)
                else:
                    self.publish_retained(topic, msg, _retained_kind(topic))

    def _publish_state(self, topic: str, msg: TableState, news: News | None) -> None:
        """A table's state, retained, with the news it carries; the scan-to-publish latency of
        its cards is taken at its PUBACK."""
        for prompt in news.prompts if news else ():
            self.notify("prompt", prompt)
        latency = news.latency_from if news else []
        if latency and self._traced:
            handed = time.monotonic_ns()
            for t in latency:
                if t in self._traced:
                    self._traced[t].append(handed)  # handed to the bus
        fut = self.publish_retained(topic, msg, "table_state")
        if fut is None:
            for t in latency:
                self._traced.pop(t, None)
            return
        if latency:
            fut.add_done_callback(functools.partial(self._latency_done, latency))
        if news:
            fut.add_done_callback(functools.partial(self._news_done, topic, news))

    @staticmethod
    def _news_done(topic: str, news: News, fut: asyncio.Future[None]) -> None:
        """A state that carried news failed: its events and prompts are lost to the subscribers
        that stayed (counted by :meth:`_retained_done`): one line, as for a live message."""
        if not fut.cancelled() and (exc := fut.exception()) is not None:
            _log_news_dropped(topic, news, str(exc)[:200])

    def _latency_done(self, latency: list[int], fut: asyncio.Future[None]) -> None:
        if fut.cancelled() or fut.exception() is not None:
            for t in latency:
                self._traced.pop(t, None)
            return
        now = time.monotonic_ns()
        for t in latency:
            elapsed = now - t
            self.metrics.scan_to_publish.observe(elapsed / 1e9)
            if self.latency_samples is not None:
                self.latency_samples.append(elapsed)
            stages = self._traced.pop(t, None)
            if stages is not None and self.stages is not None and len(stages) == 5:
                stages.append(now)
                for name, a, b in zip(STAGES, stages, stages[1:]):
                    self.stages[name].append(max(0, b - a))

    def publish_retained(self, topic: str, msg: BaseModel | None, kind: str) -> asyncio.Future[None] | None:
        """Publish a catch-up message retained (QoS 1); None clears the topic (an empty retained
        payload). Checked against the visibility policy like every message. Its PUBACK's
        future, or None: not sent."""
        if not self.tables.may_publish(topics.table_of(topic), kind):
            return None
        payload = b""
        if msg is not None:
            text = msg.model_dump_json()
            if self.withheld(topic, text, kind, getattr(msg, "round_id", None)):
                return None
            payload = text.encode()
            if len(payload) > self.max_message_bytes:
                self.metrics.messages_oversize.labels(kind=kind).inc()
                log.error("message over the limit: not sent", kind=kind, topic=topic, size=len(payload),
                          limit=self.max_message_bytes)
                return None
        fut = self._send(topic, payload, retain=True)
        fut.add_done_callback(functools.partial(self._retained_done, kind))
        self._track(topic, fut)
        return fut

    def _retained_done(self, kind: str, fut: asyncio.Future[None]) -> None:
        if not fut.cancelled() and fut.exception() is not None:
            self.metrics.publish_failures.labels(kind=kind).inc()

    async def retained_stale(self, tables: list[str] | None = None, timeout: float = 2.0) -> None:
        """A clean stop: every table's retained prompt, state and player states again, marked
        stale, before the bus says offline (a dead backend's are stale by its last will); a clean
        handover of some ``tables``: theirs, before the lease goes to the next owner. Never for a
        table whose lease is not valid now (its retained messages may be another node's)."""
        if not self.bus.connected:
            return
        now, session = self.now_ms(), self.session
        sends = []
        for tid in sorted(self.tables if tables is None else tables):
            if not self.tables.may_publish(tid, "stale"):
                continue
            for topic, msg in self.catchup.stopped(self.tables[tid], session=session, at=now):
                text = "" if msg is None else msg.model_dump_json()
                if msg is not None and self.withheld(topic, text, "stale", getattr(msg, "round_id", None)):
                    continue
                sends.append(self.bus.publish(topic, text.encode(), qos=1, retain=True))
        try:
            async with asyncio.timeout(timeout):
                results = await asyncio.gather(*sends, return_exceptions=True)
        except TimeoutError:
            log.warning("retained table state not all marked stale before the stop", timeout=timeout)
            return
        failed = sum(1 for r in results if isinstance(r, BaseException))
        if failed:
            log.warning("retained table state not all marked stale before the stop", failed=failed)


def _log_news_dropped(topic: str, news: News, reason: str) -> None:
    """One line for a state's news (round events, prompts) that did not go out: its topic, round
    and counts, never its payload."""
    rounds = [m.round_id for m in news.events] + [m.round_id for m in news.prompts]
    log.warning("publish dropped", kind="table_state", topic=topic,
                round_id=next((r for r in reversed(rounds) if r), None),
                events=len(news.events), prompts=len(news.prompts), reason=reason)


def _retained_kind(topic: str) -> str:
    """The metric label of a retained catch-up message, by its topic."""
    if "/players/" in topic:
        return "player_state"
    return "table_history" if topic.endswith("/history") else "table_state"
