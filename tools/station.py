"""``dealer station TABLE``: a terminal dealer station for one table.

It shows what a dealer station screen shows, one line per change, from the table's retained
``state`` (protocol 2, ``docs/mqtt-topics.md`` §4.8: the current prompt, and the round events
and prompts of each batch) and its live ``events`` (refusals) (§4.3, §4.4, §7): the prompt (``NEXT``
position, ``CONFIRM`` step, ``RESCAN`` with its reason, ``ALERT``, ``WAIT``, ``DONE``), the
cards registered so far, betting opening and closing, the result, and the answers to its own
commands. The dealer types commands, one per line:

``close``                 close betting of the round now (``close_betting``)
``confirm [STEP]``        confirm the step the station asks for (``WASH``, ``SHUFFLE``: ``dealer_confirm``)
``expose POSITION``       report an exposed card (stud: a 7th card dealt face up, ``card_exposed``)
``logon DEALER``          a dealer logs on at the station (``dealer_logon``: who deals is in every result)
``cards``                 the cards registered so far in this round
``prompt``                the current prompt again
``wait WHAT [SECONDS]``   for scripts: wait until the prompt is WHAT (``NEXT``, ``CONFIRM``, ``DONE`` ...,
                          optionally with its position: ``wait CONFIRM SHUFFLE``), betting is open
                          (``betting``), or ``bets N`` are accepted; exit 1 if it does not happen
                          within SECONDS (default 120)
``help``, ``quit``

Every command names the round the station shows and carries a fresh ``command_id``
(``st-TABLE-...``); it is published at QoS 1 on ``studio/v1/tables/TABLE/station`` with the
station's own credentials (broker user ``station-TABLE``), and the backend's refusal, if any,
is shown. Commands can be piped (``printf 'wait betting\\nclose\\nwait DONE\\n' | dealer station
T1 ...``): at the end of the input the station exits (0, or 1 after a ``wait`` that timed out).
Bad input at start is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import signal
import sys
import threading
import uuid
from collections.abc import Callable
from typing import Any, TextIO

from dealer.edge import topics
from dealer.cli.client_options import (TABLE_ID, BadInput, BrokerOptions, add_broker_options, broker_options, config_tables,
                                   start_bus)

PROMPT_KINDS = ("NEXT", "CONFIRM", "RESCAN", "ALERT", "WAIT", "REJECTED", "DONE", "PAUSED", "CLOSED")
#: Prompt fields that change without what is shown changing (a prompt released again, or a copy).
_CATCHUP_KEYS = {"at", "schema_id", "node_id", "session", "version", "stale"}
HELP = """commands:
  close                  close betting of the round now
  confirm [STEP]         confirm the step asked for (WASH, SHUFFLE)
  expose POSITION        report an exposed card (stud 7th card, e.g. P4.7)
  logon DEALER           a dealer logs on at this station (e.g. logon D-0042)
  cards                  the cards registered so far
  prompt                 the current prompt again
  wait WHAT [SECONDS]    wait for a prompt (NEXT, CONFIRM SHUFFLE, DONE ...), 'betting' or 'bets N'
  help, quit"""


def _card(code: Any) -> str:
    if not code:
        return "face down"
    from dealer.core.cards import parse_card

    try:
        return parse_card(str(code)).display
    except ValueError:
        return str(code)


_NODE_ID = re.compile(r"[A-Za-z0-9_:\-]{1,64}")  # as service.node_id: never a wildcard or a '.'


class StationView:
    """What the station shows, from the table's states (their prompts and events) and its live
    events (refusals). No IO: messages in, lines out."""

    def __init__(self, table_id: str) -> None:
        self.table_id = table_id
        self.prompt: dict[str, Any] | None = None
        self.round_id: str | None = None
        self.betting_open = False
        self.bets = 0
        self.cards: dict[str, str | None] = {}  # position -> code (None: face down) of this round
        self.mine: dict[str, str] = {}  # command id -> command type, of the commands this station sent
        self.done = 0  # rounds seen ending
        self.status: dict[str, dict[str, Any]] = {}  # node id -> its retained status
        self.stale_shown: dict[str, Any] | None = None  # the stale state's prompt last warned about
        #: a state whose backend's status is not known yet (judged when it comes): node, payload
        self.pending_state: tuple[str, bytes] | None = None
        self.version: int | None = None  # the version of the last state whose news was shown

    # -- what arrives ----------------------------------------------------------------------

    def on_prompt(self, payload: bytes) -> list[str]:
        """A station prompt (JSON), as a state carries it."""
        try:
            p = json.loads(payload)
        except ValueError:
            return []
        return self._prompt(p)

    def _prompt(self, p: Any) -> list[str]:
        try:
            kind, message = p["kind"], str(p.get("message", ""))
        except (KeyError, TypeError, AttributeError):
            return []
        if not isinstance(kind, str) or p.get("table_id") not in (None, self.table_id):
            return []
        if self.prompt is not None and {k: v for k, v in p.items() if k not in _CATCHUP_KEYS} == \
                {k: v for k, v in self.prompt.items() if k not in _CATCHUP_KEYS}:
            return []  # the same prompt again (republished after a reconnect, or its retained copy)
        self.prompt = p
        rid = p.get("round_id")
        if rid and rid != self.round_id:
            self._new_round(str(rid))
        if kind == "WAIT" and message.startswith("betting is open"):
            self.betting_open = True
        where = f"  [step {p['step']}/{p['of']}]" if p.get("step") and p.get("of") else ""
        lines = [f"{kind:<8}| {message}{where}"]
        if kind == "DONE":
            self.done += 1
            lines.append(self.cards_line())
        return lines

    def on_status(self, topic: str, payload: bytes) -> list[str]:
        """A backend's retained status (``backends/{node}/status``): what says whether the
        table's state (and the prompt it carries) comes from a running backend."""
        try:
            status = json.loads(payload)
        except ValueError:
            return []
        if not isinstance(status, dict):
            return []
        node = topic.split("/")[-2]
        self.status[node] = status
        if self.pending_state is not None and self.pending_state[0] == node:
            return self.on_state(self.pending_state[1])  # the state that waited for this status
        return []

    def on_state(self, payload: bytes) -> list[str]:
        """The table's state (``state``, retained, docs/mqtt-topics.md §4.8): when its backend is
        online under the same session, the round events and prompts it carries are shown, once
        each (a state whose ``version`` is not above the last one shown brings nothing new: the
        retained copy seen again, a redelivery), then its current ``prompt`` if not on screen
        yet (a station that starts mid-deal shows it at once). A dead backend's state (marked
        stale, or its status offline) is acted on not at all: the station says the prompt it
        carries must not be acted on."""
        from dealer.edge.catchup import is_current

        try:
            s = json.loads(payload) if payload else None
        except ValueError:
            return []
        if not isinstance(s, dict) or s.get("table_id") not in (None, self.table_id):
            return []
        node = str(s.get("node_id"))
        self.pending_state = (node, payload) if node not in self.status else None
        prompt = s.get("prompt") if isinstance(s.get("prompt"), dict) else None
        if is_current(s, self.status.get(node)):
            self.stale_shown = None
            version = s.get("version")
            if not isinstance(version, int) or (self.version is not None and version <= self.version):
                return []  # seen already
            self.version = version
            lines: list[str] = []
            for ev in s.get("events") or []:
                lines += self._event(ev)
            for p in [*(s.get("prompts") or []), *([prompt] if prompt else [])]:
                lines += self._prompt(p)  # the current prompt is the last released: shown once
            return lines
        if s.get("stale") is True or self.status.get(node, {}).get("online") is False:
            if prompt is None or self.stale_shown == prompt:
                return []
            self.stale_shown = prompt
            return [f"{'STALE':<8}| backend {s.get('node_id')} is not running: do not act on "
                    f"{prompt.get('kind')} {prompt.get('position') or ''}".rstrip()]
        return []  # its backend's status not heard yet (or another session's): its next state will say

    def on_event(self, payload: bytes) -> list[str]:
        """A round event (JSON): a refusal on the live ``events``, or one a state carries."""
        try:
            ev = json.loads(payload)
        except ValueError:
            return []
        return self._event(ev)

    def _event(self, ev: Any) -> list[str]:
        try:
            name, d, rid = ev["event"], ev.get("data") or {}, ev.get("round_id")
        except (KeyError, TypeError, AttributeError):
            return []
        if not isinstance(d, dict) or not isinstance(name, str) or not isinstance(rid, (str, type(None))):
            return []
        cid = d.get("command_id")
        mine = self.mine.get(cid) if isinstance(cid, str) else None
        if name == "rejected":
            return [f"REFUSED | {mine}: {d.get('reason')}"] if mine else []
        if name == "command_repeated":
            return [f"        | {mine} already done (answered again)"] if mine else []
        if name == "command_accepted":
            return [f"        | {mine} accepted"] if mine else []
        if name == "dealer_logged_on":
            return [f"DEALER  | {d.get('dealer_id')} logged on" + (f" (after {d['previous']})" if d.get("previous") else "")]
        if rid and rid != self.round_id:
            self._new_round(str(rid))
        if name == "round_opened":
            self.betting_open = True
            return [f"--- round {rid}: betting open"]
        if name == "bet_accepted":
            self.bets += 1
            return []
        if name == "betting_closed":
            self.betting_open = False
            return [f"        | betting closed by {d.get('by')}: {d.get('bets')} bet(s)"]
        if name == "card_registered":
            pos = str(d.get("position"))
            self.cards[pos] = d.get("card")
            shown = "burn" if pos.startswith("BURN") and not d.get("card") else _card(d.get("card"))
            return [f"card    | {pos:<8} {shown}   ({len(self.cards)} registered)"]
        if name == "dealer_confirmed":
            return [f"        | {d.get('step')} confirmed"]
        if name == "card_exposed":
            pos = str(d.get("position"))
            self.cards[pos] = d.get("card")
            return [f"card    | {pos:<8} {_card(d.get('card'))} exposed"]
        if name == "cards_revealed":
            shown = {str(k): v for k, v in (d.get("cards") or {}).items()}
            self.cards.update(shown)
            return ["REVEAL  | " + " · ".join(f"{k} {_card(v)}" for k, v in shown.items())] if shown else []
        if name == "betting_round_opened":
            return [f"        | {d.get('street')}: \"{d.get('announce')}\""] if d.get("announce") else []
        if name == "round_result":
            hands = ", ".join(f"{k}: {v}" for k, v in (d.get("hands") or {}).items())
            return [f"RESULT  | winner {d.get('winner')}" + (f" ({hands})" if hands else "")]
        if name in ("round_cancelled", "round_voided"):
            self.betting_open = False
            return [f"{name.removeprefix('round_').upper():<8}| {d.get('reason')}"]
        if name in ("link_down", "link_up", "link_down_round_continues"):
            why = f" ({d['reason']})" if d.get("reason") else ""
            return [f"LINK    | {d.get('link')} {name.removeprefix('link_').replace('_', ' ')}{why}"]
        return []

    def _new_round(self, rid: str) -> None:
        self.round_id, self.cards, self.bets, self.betting_open = rid, {}, 0, False

    # -- what the dealer asks ----------------------------------------------------------------

    def cards_line(self) -> str:
        shown = " · ".join(f"{pos} {'burn' if pos.startswith('BURN') and not c else _card(c)}"
                           for pos, c in self.cards.items()) or "none"
        return f"cards   | {shown}"

    def prompt_line(self) -> str:
        if self.prompt is None:
            return "        | no prompt yet (the backend sends its current prompt when it changes)"
        return f"{self.prompt['kind']:<8}| {self.prompt.get('message', '')}"

    def reached(self, what: list[str]) -> bool:
        """Whether ``wait`` may go on: ``["NEXT"]`` or ``["CONFIRM", "SHUFFLE"]`` (the prompt shown),
        ``["BETTING"]`` (betting is open), ``["BETS", "3"]`` (that many bets accepted while it is)."""
        head = what[0].upper()
        if head == "BETTING":
            return self.betting_open
        if head == "BETS":
            return self.betting_open and self.bets >= int(what[1])
        return (self.prompt is not None and self.prompt.get("kind") == head
                and (len(what) == 1 or self.prompt.get("position") == what[1]))

    def command(self, words: list[str]) -> tuple[dict[str, Any] | None, str | None]:
        """The command to publish for a typed line (or None) and the line to show (or None)."""
        verb = words[0].lower()
        cid = f"st-{self.table_id}-{uuid.uuid4().hex[:12]}"
        if verb in ("close", "confirm", "expose") and self.round_id is None:
            return None, "        | no round yet: wait until the station shows one"
        from pydantic import ValidationError

        from dealer.core.events import CardExposed, CloseBetting, DealerConfirm, DealerLogon

        try:  # built as the backend will read it: a malformed command is a line here, not a refusal there
            if verb == "close":
                if len(words) != 1:
                    return None, "        | usage: close"
                model: Any = CloseBetting(by="dealer", round_id=self.round_id, command_id=cid)
            elif verb == "confirm":
                asked = self.prompt.get("position") if self.prompt and self.prompt.get("kind") == "CONFIRM" else None
                step = words[1].upper() if len(words) == 2 else asked
                if len(words) > 2 or step is None:
                    return None, "        | nothing to confirm now: the station asks for no step (usage: confirm [STEP])"
                if asked is not None and step != asked:
                    return None, f"        | the station asks to confirm {asked}, not {step}"
                model = DealerConfirm(step=step, round_id=self.round_id, command_id=cid)
            elif verb == "expose":
                if len(words) != 2:
                    return None, "        | usage: expose POSITION (e.g. expose P4.7)"
                model = CardExposed(position=words[1].upper(), round_id=self.round_id, command_id=cid)
            elif verb == "logon":
                if len(words) != 2:
                    return None, "        | usage: logon DEALER (e.g. logon D-0042)"
                model = DealerLogon(dealer_id=words[1], command_id=cid)
            else:
                return None, f"        | unknown command {words[0]!r}: type help"
        except ValidationError as exc:
            why = "; ".join(f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}"
                            for e in exc.errors(include_url=False, include_input=False))
            return None, f"        | {verb}: {why}"
        cmd = model.model_dump(mode="json", exclude={"at"})
        self.mine[cid] = str(cmd["type"])
        return cmd, None


async def run_station(opts: BrokerOptions, table_id: str, *, client_id: str, out: TextIO = sys.stdout,
                      lines: asyncio.Queue[str | None] | None = None) -> int:
    """Show the table and run the typed commands until ``quit`` or the end of the input;
    returns the exit status (1 after a ``wait`` that timed out)."""
    view = StationView(table_id)
    changed = asyncio.Event()

    def show(text: list[str]) -> None:
        for line in text:
            print(line, file=out, flush=True)
        changed.set()  # a wait looks again

    def handler(fn: Callable[[bytes], list[str]]) -> Callable[[str, bytes], None]:
        return lambda topic, payload: show(fn(payload))

    bus = opts.bus(client_id, accept_retained=True)  # the state is retained
    bus.subscribe(topics.events(table_id), handler(view.on_event))  # refusals
    # the status first: a state is acted on only while its backend runs
    bus.subscribe(topics.backend_status("+"), lambda topic, payload: show(view.on_status(topic, payload)))
    asked: set[str] = set()

    def on_state(topic: str, payload: bytes) -> None:
        show(view.on_state(payload))
        waiting = view.pending_state
        if waiting is not None and waiting[0] not in asked and _NODE_ID.fullmatch(waiting[0]):
            # No status of its backend yet: ask for it by its exact topic too. RabbitMQ 3.10
            # replays no retained message to the wildcard filter above (docs/brokers.md).
            asked.add(waiting[0])
            with contextlib.suppress(ValueError):  # a node id no broker routes alike: never current
                bus.subscribe(topics.backend_status(waiting[0]), lambda t, p: show(view.on_status(t, p)))

    bus.subscribe(topics.state(table_id), on_state)
    stopping = asyncio.Event()
    inputs: list[asyncio.Queue[str | None]] = []  # the command queue, once the station reads commands

    def stop() -> None:  # SIGTERM, SIGINT: stop like ``quit``, also in the middle of a ``wait``
        stopping.set()
        for q in inputs:
            q.put_nowait(None)
        changed.set()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):  # before "connected": a supervisor may stop us from then on
        loop.add_signal_handler(sig, stop)
    task = await start_bus(bus, opts.connect_timeout)
    print(f"station {table_id}: connected to {opts.url}; type help for the commands", file=out, flush=True)
    queue = lines if lines is not None else _stdin_lines()
    inputs.append(queue)
    if stopping.is_set():
        queue.put_nowait(None)
    status = 0
    try:
        while True:
            line = await queue.get()
            if line is None:
                break
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            verb = words[0].lower()
            if verb in ("quit", "exit"):
                break
            if verb == "help":
                show([HELP])
            elif verb == "cards":
                show([view.cards_line()])
            elif verb in ("prompt", "status"):
                show([view.prompt_line()])
            elif verb == "wait":
                if not await _wait(view, changed, words[1:], show, stopping):
                    status = 1
                    break
            else:
                cmd, answer = view.command(words)
                if answer:
                    show([answer])
                if cmd is not None:
                    await _publish(bus, topics.station(table_id), cmd, show)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return status


async def _wait(view: StationView, changed: asyncio.Event, what: list[str], show: Callable[[list[str]], None],
                stopping: asyncio.Event) -> bool:
    """``wait KIND [POSITION] [SECONDS]``, ``wait betting [SECONDS]``, ``wait bets N [SECONDS]``;
    False when it timed out (a usage error is shown and counts as reached)."""
    usage = ("        | usage: wait NEXT|CONFIRM|RESCAN|ALERT|WAIT|DONE [POSITION] [SECONDS], "
             "wait betting [SECONDS], wait bets N [SECONDS]")
    try:
        if not what or what[0].upper() not in PROMPT_KINDS + ("BETTING", "BETS"):
            raise ValueError
        head = what[0].upper()
        if head == "BETS":
            cond, rest = [head, str(int(what[1]))], what[2:]
        elif head in PROMPT_KINDS and len(what) > 1 and not _is_number(what[1]):
            cond, rest = [head, what[1].upper()], what[2:]
        else:
            cond, rest = [head], what[1:]
        seconds = float(rest[0]) if rest else 120.0
        if len(rest) > 1 or not 0 < seconds <= 86_400:
            raise ValueError
    except (ValueError, IndexError):
        show([usage])
        return True  # a typo is not a failed wait
    try:
        async with asyncio.timeout(seconds):
            while not view.reached(cond) and not stopping.is_set():
                changed.clear()
                await changed.wait()
    except TimeoutError:
        show([f"        | wait {' '.join(cond)}: not reached within {seconds:g} s"])
        return False
    return True


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


async def _publish(bus: Any, topic: str, cmd: dict[str, Any], show: Callable[[list[str]], None]) -> None:
    from drivers.bus import BusError

    payload = json.dumps(cmd, separators=(",", ":")).encode()
    try:
        await bus.publish(topic, payload, qos=1)
    except BusError as exc:
        show([f"NOT SENT| {cmd['type']}: {exc} (type it again once connected)"])
        return
    detail = cmd.get("step") or cmd.get("position") or ""
    show([f"sent    | {cmd['type']} {detail}".rstrip() + f" for {cmd['round_id']} ({cmd['command_id']})"])


def _stdin_lines() -> asyncio.Queue[str | None]:
    """Lines typed (or piped) on stdin, read by a daemon thread: a blocked read never holds up
    the exit."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str | None] = asyncio.Queue()

    def read() -> None:
        for line in sys.stdin:
            loop.call_soon_threadsafe(queue.put_nowait, line)
        loop.call_soon_threadsafe(queue.put_nowait, None)

    threading.Thread(target=read, name="station-stdin", daemon=True).start()
    return queue


async def _main(args: argparse.Namespace) -> int:
    if not TABLE_ID.match(args.table):
        raise BadInput(f"table {args.table!r}: a table id is letters, digits and _, at most 32")
    settings, known = config_tables(args.config)
    if args.config is not None and args.table not in known:
        raise BadInput(f"unknown table {args.table}: not in {args.config} (tables: {', '.join(known) or 'none'})")
    m = settings.mqtt if settings is not None else None
    opts = broker_options(args, default_url=m.url if m else None, default_ca=m.ca_file if m else None)
    client_id = args.client_id or f"station-{args.table}-{uuid.uuid4().hex[:6]}"
    return await run_station(opts, args.table, client_id=client_id)


def _cmd_station(args: argparse.Namespace) -> int:
    from dealer.edge.logs import configure_logging

    configure_logging("error")  # JSON lines on stderr for errors only: stdout is the screen
    try:
        return asyncio.run(_main(args))
    except BadInput as exc:
        print(f"dealer station: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0


def register(sub: Any) -> argparse.ArgumentParser:
    """Add ``dealer station`` to the ``dealer`` command's subparsers."""
    p = sub.add_parser("station", help="a terminal dealer station for one table: prompts, rescans, alerts, cards; "
                       "type close, confirm, expose (commands can be piped)",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("table", metavar="TABLE", help="the table id, e.g. T1")
    p.add_argument("--config", metavar="FILE",
                   help="the backend's TOML config: check TABLE is one of its tables and use its [mqtt] url as the broker")
    add_broker_options(p, default_note="the [mqtt] url of --config")
    p.add_argument("--client-id", metavar="ID", help="MQTT client id (default: station-TABLE-<random>)")
    p.set_defaults(func=_cmd_station)
    return p


__all__ = ["StationView", "register", "run_station"]
