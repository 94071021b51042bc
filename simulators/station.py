"""A simulated dealer at a table: shoe + reader transport + a dealer who follows the prompts.

:class:`VirtualDealer` listens to the table's dealer-station prompts exactly as a human
dealer reads the station screen: on ``NEXT`` it deals the next card over the reader (burns
and a community card such as ``COMM`` like any other), on ``RESCAN`` it passes the same card
again (or, when the backend says the card was foreign or a duplicate, the right card), on
``CONFIRM`` (a game's ``WASH`` and ``SHUFFLE``) it does the step and confirms it on the
table's dealer-station topic (``.../station``), naming the prompt's round and with a
``command_id`` of its own (the same id whenever it confirms that step again: the backend
answers a copy as a repeat), on ``DONE`` it clears the table and reshuffles. Like a person, if
the station shows nothing new a while after a pass it passes the card (or confirms)
again, except while the station says ``WAIT`` (players are betting or deciding: the card
in hand has registered). The reader's bytes go out through a :class:`ShoeLink`: a real
PTY (serial) or MQTT.
"""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import structlog

from dealer.edge import topics
from dealer.core.events import DealerConfirm
from dealer.core.messages import StationPrompt
from dealer.core.round_ids import sequence_of
from drivers.bus import Bus, BusError
from drivers.frames import FrameDecoder, FrameError
from drivers.scanner_json import ScannerMessage
from simulators.feed import prompts_of
from simulators.pty_port import PtyPort
from simulators.shoe import FaultPlan, VirtualShoe, shuffled

log = structlog.get_logger("simulators.station")


class ShoeLink:
    """Where the reader's bytes go."""

    async def send(self, chunks: Sequence[bytes]) -> None:
        raise NotImplementedError


class PtyShoeLink(ShoeLink):
    def __init__(self, port: PtyPort) -> None:
        self.port = port

    async def send(self, chunks: Sequence[bytes]) -> None:
        for chunk in chunks:
            self.port.write(chunk)


class MqttShoeLink(ShoeLink):
    """A scanner gateway: decodes the reader's serial bytes and forwards each good frame as JSON."""

    def __init__(self, bus: Bus, table_id: str) -> None:
        self.bus, self.topic = bus, topics.scanner(table_id)
        self._decoder = FrameDecoder()

    async def send(self, chunks: Sequence[bytes]) -> None:
        for chunk in chunks:
            for item in self._decoder.feed(chunk):
                if isinstance(item, FrameError):
                    continue  # the gateway drops what it cannot decode; the seq gap tells the backend
                try:
                    await self.bus.publish(self.topic, ScannerMessage.of(item).model_dump_json().encode(), qos=1)
                except BusError:
                    pass  # the gateway's link is down: the frame is lost, like on a wire


@dataclass
class DealerFaults:
    """Dealer-side mistakes: passing a card that is not the one the deal needs."""

    foreign: float = 0.0  # a card from another deck (e.g. a Hwatu card or a joker)
    duplicate: float = 0.0  # a card already registered this round
    script: Sequence[str] = ()  # "", "foreign", "duplicate" per deal, consumed first
    _i: int = field(default=0, init=False)

    def choose(self, rng: random.Random) -> str:
        if self._i < len(self.script):
            self._i += 1
            return self.script[self._i - 1]
        r = rng.random()
        if r < self.foreign:
            return "foreign"
        return "duplicate" if r < self.foreign + self.duplicate else ""


ActionSender = Callable[[bytes], Awaitable[None]]
#: Shuffles a new round's deck (the soak stacks some decks to force a game's rare cases).
Shuffler = Callable[[random.Random], Sequence[str]]


class VirtualDealer:
    """A dealer who follows the station prompts.

    ``actions`` sends a payload on the table's dealer-station topic (used to confirm a game's
    ``WASH`` and ``SHUFFLE``); without it, :meth:`subscribe` uses the bus it subscribes on.

    The prompt's ``step`` counts every step of the plan, confirmations included, so the
    dealer keeps both: ``dealt`` (the cards that registered) and ``confirmed`` (the steps
    it confirmed); ``len(dealt) + len(confirmed)`` is the number of steps done.
    """

    def __init__(self, table_id: str, shoe: VirtualShoe, link: ShoeLink, *, deck: Sequence[str],
                 rng: random.Random | None = None, faults: FaultPlan | None = None,
                 dealer_faults: DealerFaults | None = None, deal_interval: float = 0.05,
                 heartbeat_interval: float = 0.5, patience: float = 2.0,
                 scripted_rounds: Sequence[Sequence[str]] = (),
                 actions: ActionSender | None = None, shuffler: Shuffler | None = None) -> None:
        self.table_id, self.shoe, self.link = table_id, shoe, link
        self.full_deck = list(deck)
        self.shuffler = shuffler
        self.rng = rng or random.Random()
        self.faults = faults or FaultPlan()
        self.dealer_faults = dealer_faults or DealerFaults()
        self.deal_interval, self.heartbeat_interval, self.patience = deal_interval, heartbeat_interval, patience
        self.scripted = [list(r) for r in scripted_rounds]
        self.actions = actions
        self._prompts: asyncio.Queue[StationPrompt] = asyncio.Queue()
        self.in_hand: str | None = None  # the card passed over the reader, not yet registered
        self.confirming: str | None = None  # the step confirmed, not yet acknowledged by a prompt
        self._confirmation: DealerConfirm | None = None  # what confirms it (sent again as is)
        self.dealt: list[str] = []
        self.confirmed: list[str] = []
        self.passes = 0
        self.resyncs = 0  # times it took the station's count (:meth:`_resync`)
        self.set_aside = 0  # cards in hand found already registered, put aside (:meth:`_deal_step`)
        self.stale_refusals = 0  # duplicate refusals with a newer prompt behind them, not acted on
        #: the last prompts followed, with the dealer's state then (kind, position, step, reason,
        #: count, card in hand, steps done, cards left): what a failure report shows
        self.trace: deque[tuple[object, ...]] = deque(maxlen=200)
        self._last_pass: str | None = None  # the card code passed last (the right one, or a mistake)
        self.confirms_sent = 0
        self.waiting = False  # the station says WAIT: the card in hand registered, do not pass it again
        self.faults_injected: dict[str, int] = {}
        self._round: str | None = None
        #: round -> the highest step of any prompt received (:meth:`on_prompt`): a RESCAN for an
        #: earlier step is old news (see :meth:`_superseded`)
        self._newest: dict[str, int] = {}

    @property
    def steps_done(self) -> int:
        return len(self.dealt) + len(self.confirmed)

    def on_prompt(self, topic: str, payload: bytes) -> None:
        prompt = StationPrompt.model_validate_json(payload)
        if prompt.round_id is not None and prompt.step is not None:
            self._newest[prompt.round_id] = max(prompt.step, self._newest.get(prompt.round_id, 0))
            while len(self._newest) > 4:  # the rounds before are long over
                del self._newest[next(iter(self._newest))]
        self._prompts.put_nowait(prompt)

    def _superseded(self, p: StationPrompt) -> bool:
        """A RESCAN the station no longer shows: a prompt of a later step of the same round has
        arrived since (it waits in the queue). One scanner frame can give two prompts at once: a
        torn frame's sequence number reported missing (RESCAN) by the very frame that then
        registers the card (NEXT). A dealer reading the screen sees only the newer one; passing
        the card again for the old one would put it in front of the next position, refused
        there as already registered, and each refusal would ask for one more stale pass: a
        face-down deal could go on like that to its last card (the refusal of a face-down
        card does not name it, so the dealer could not tell the stale pass from its own
        mistake)."""
        return (p.kind == "RESCAN" and p.round_id is not None and p.step is not None
                and self._newest.get(p.round_id, 0) > p.step)

    def subscribe(self, bus: Bus) -> None:
        bus.subscribe(topics.state(self.table_id), prompts_of(self.on_prompt))
        if self.actions is None:
            topic = topics.station(self.table_id)

            async def send(payload: bytes) -> None:
                await bus.publish(topic, payload, qos=1)

            self.actions = send

    async def run(self) -> None:
        await self.link.send([self.shoe.boot()])
        hb = asyncio.create_task(self._heartbeats())
        try:
            while True:
                try:  # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancellation
                    async with asyncio.timeout(self.patience):
                        prompt = await self._prompts.get()
                except TimeoutError:
                    if self.waiting:
                        continue  # players are betting: nothing to deal
                    if self.in_hand is not None:  # nothing happened: pass the card again
                        await self._pass(self.in_hand)
                    elif self.confirming is not None:  # the confirmation may have been lost: again
                        await self._confirm(self.confirming)
                    continue
                await self._follow(prompt)
        finally:
            hb.cancel()

    async def _heartbeats(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            await self.link.send([self.shoe.heartbeat()])

    async def _follow(self, p: StationPrompt) -> None:
        self.trace.append((p.kind, p.position, p.step, p.reason, p.count, self.in_hand, self.steps_done,
                           len(self.shoe.deck)))
        if p.round_id is not None and p.round_id != self._round:
            if self._round is not None and _seq(p.round_id) < _seq(self._round):
                return  # a stale prompt (e.g. redelivered after a broker restart): not this round
            self._round = p.round_id
            self._new_shoe()
        if p.kind in ("NEXT", "RESCAN", "ALERT", "CONFIRM") and p.step is not None:
            if self._superseded(p):
                return  # the newer prompt behind it says where the deal is
            self.waiting = False
            # Like a dealer reading the station screen: the step says how many steps (cards
            # and confirmations) are done, so a lost prompt (prompts are live, not durable)
            # cannot leave us re-passing a card that already counts.
            registered = p.step - 1
            if self.steps_done + 1 == registered:
                if self.in_hand is not None:
                    self.dealt.append(self.in_hand)  # the card in hand registered
                    self.in_hand = None
                elif self.confirming is not None:
                    self.confirmed.append(self.confirming)  # the confirmation was accepted
                    self.confirming = None
            if p.kind == "ALERT":
                return  # it follows a RESCAN for the same step, which already asked for the pass
            if self.steps_done != registered and not self._resync(registered, p):
                return
            if p.kind == "CONFIRM":
                await self._confirm_step(p)
            else:
                await self._deal_step(p)
        elif p.kind == "WAIT" and p.round_id is not None and p.round_id == self._round:
            # Betting (or deciding) only starts once every card of the street registered.
            self.waiting = self.in_hand is not None
        elif p.kind == "DONE":
            if self.in_hand is not None:
                self.dealt.append(self.in_hand)
            self.in_hand, self.confirming, self.waiting = None, None, False

    async def _deal_step(self, p: StationPrompt) -> None:
        if self.confirming is not None:  # the station wants a card: the confirmation was taken
            log.warning("station asks for a card while a confirmation is pending", step=p.step,
                        confirming=self.confirming)
            self.confirming = None
        if self.in_hand is not None and p.kind == "RESCAN" and p.reason == "duplicate_card":
            if not self._prompts.empty():
                # a newer screen is already there: this refusal answers a pass made before it (a
                # loaded backend works through a backlog of passes); acting on each of a backlog of
                # refusals would pass, or set aside, a fresh card once per refusal
                self.stale_refusals += 1
                return
            if self.in_hand in self.dealt[getattr(self, "_since", 0):]:
                # the card in hand is itself one that registered earlier in this shuffle (a card put
                # back in the shoe): a dealer puts it aside and takes the next card from the shoe
                log.info("card in hand already registered: set aside", card=self.in_hand, step=p.step)
                self.set_aside += 1
                self.in_hand = None
            elif self._last_pass == self.in_hand:
                # the card we last passed is the fresh one in hand, never dealt before: the refusal
                # is for an earlier, extra pass of the card before it (passed again for a rescan of
                # a lost frame, or while a loaded backend was slow to answer). Passing ours again
                # would put one more extra pass on the line, refused at the next position, and so
                # on (and the old rule, three refusals, put good cards aside until the shoe ran
                # dry): not passed again; if it was lost, the station says so, or the dealer
                # passes it once more in a while
                self.stale_refusals += 1
                return
        if self.in_hand is not None:
            if p.kind != "NEXT":
                await asyncio.sleep(self.deal_interval / 2)
                if self._superseded(p):
                    return  # the card registered meanwhile: the newer prompt is next
            await self._pass(self.in_hand)  # still expected: pass it (again)
        else:
            await asyncio.sleep(self.deal_interval)
            self.in_hand = self.shoe.next_card()
            await self._pass(self._maybe_wrong(self.in_hand))

    async def _confirm_step(self, p: StationPrompt) -> None:
        step = p.position or ""
        if self.in_hand is not None:  # cannot happen in step; a card in hand did not register
            log.warning("station asks for a confirmation while a card is in hand", step=p.step, card=self.in_hand)
            self.shoe.deck.insert(0, self.in_hand)
            self.in_hand = None
        if self.confirming is None:
            await asyncio.sleep(self.deal_interval)  # wash / shuffle the cards
        if self.confirming != step or self._confirmation is None or self._confirmation.round_id != p.round_id:
            # a new confirmation (the same step asked again, e.g. a lost prompt, keeps its id)
            self._confirmation = DealerConfirm(step=step, round_id=p.round_id,
                                               command_id=f"station-{uuid.uuid4().hex[:12]}")
        self.confirming = step
        await self._confirm(step)

    async def _confirm(self, step: str) -> None:
        if self.actions is None:
            log.warning("cannot confirm without a station publisher", step=step)
            return
        msg = self._confirmation
        if msg is None or msg.step != step:  # not from a prompt: nothing names the round
            log.warning("no prompt to confirm", step=step)
            return
        self.confirms_sent += 1
        try:
            await self.actions(msg.model_dump_json(exclude={"at"}).encode())
        except BusError:
            pass  # the link is down: confirm again when the station shows something (or on patience)

    def _resync(self, registered: int, p: StationPrompt) -> bool:
        """Out of step with the station. Behind it (prompts lost): do what a dealer reading the
        screen does and take its count, the steps it counts and we do not taken as done (the
        card in hand first); True, go on. Ahead of it: the prompt is an old one shown again (a
        card we counted never registers without the station moving on): False, ignore it."""
        if self.steps_done > registered:
            log.info("dealer ahead of the station: an old prompt, ignored", done=self.steps_done, step=p.step)
            return False
        self.resyncs += 1
        log.info("dealer out of step with the station: taking its count", done=self.steps_done,
                 registered=registered, step=p.step, position=p.position)
        if self.steps_done < registered and self.in_hand is not None:
            self.dealt.append(self.in_hand)
            self.in_hand = None
        while self.steps_done < registered:
            self.dealt.append("")  # registered, card unknown here (never passed again)
        return True

    def _new_shoe(self) -> None:
        if self.scripted:
            deck: Sequence[str] = self.scripted.pop(0)
        else:
            deck = self.shuffler(self.rng) if self.shuffler is not None else shuffled(self.full_deck, self.rng)
        self.shoe.deck = list(deck)
        self.in_hand, self.dealt = None, []
        self.confirming, self.confirmed, self.waiting = None, [], False
        self._confirmation = None

    def _maybe_wrong(self, right: str) -> str:
        kind = self.dealer_faults.choose(self.rng)
        if kind == "foreign":
            self._count("foreign_card")
            return self.rng.choice(["JK", "01G", "11JD"])
        known = [c for c in self.dealt if c]
        if kind == "duplicate" and known:
            self._count("duplicate_card")
            return self.rng.choice(known)
        return right

    async def _pass(self, code: str) -> None:
        self.passes += 1
        self._last_pass = code
        cp = self.faults.pass_card(self.shoe, code, self.rng)
        if cp.fault:
            self._count(cp.fault)
        await self.link.send(cp.chunks)

    def _count(self, what: str) -> None:
        self.faults_injected[what] = self.faults_injected.get(what, 0) + 1


def _seq(round_id: str) -> int:
    seq = sequence_of(round_id)
    return -1 if seq is None else seq


class StationScreen:
    """The dealer station's screen: it shows the newest prompt, never an old one again.

    A dealer whose MQTT session is persistent misses no prompt while it reconnects, but a
    broker that crashes redelivers what it had not saved as acknowledged, and a prompt may
    be shown again (the backend republishes its current prompt after every reconnect). A
    person would never see those again on the screen; the virtual dealer would act on them
    (and a prompt of another round makes it reshuffle mid-deal). So prompts of an older
    round, or of an earlier step of this round, or already shown, are dropped here and
    counted. The order is the round's sequence and the prompt's step, never its wall-clock
    ``at``: the backend's wall clock may step back.
    """

    def __init__(self, dealer: VirtualDealer) -> None:
        self.dealer = dealer
        self.newest: tuple[int, int] = (0, 0)  # (round sequence, step)
        self.recent: dict[bytes, None] = {}
        self.dropped = 0

    def on_prompt(self, topic: str, payload: bytes) -> None:
        try:
            p = json.loads(payload)
            seq = _seq(p["round_id"]) if p.get("round_id") else self.newest[0]
            step = p.get("step")
            when = (seq, int(step) if step is not None else (self.newest[1] if seq == self.newest[0] else 0))
        except (ValueError, KeyError, TypeError, AttributeError):
            self._show(topic, payload)  # let the dealer judge what it cannot read
            return
        if when < self.newest or payload in self.recent:
            self.dropped += 1
            return
        self.newest = when
        self.recent[payload] = None
        if len(self.recent) > 64:
            del self.recent[next(iter(self.recent))]
        self._show(topic, payload)

    def _show(self, topic: str, payload: bytes) -> None:
        try:
            self.dealer.on_prompt(topic, payload)
        except ValueError:  # not a prompt (pydantic's ValidationError is one): nothing to show
            log.warning("not a prompt: ignored", topic=topic, bytes=len(payload))

