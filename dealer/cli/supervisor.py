"""``dealer supervisor``: a supervisor's signing tool (docs/mqtt-topics.md §10).

``dealer supervisor void TABLE ROUND --reason TEXT --supervisor ID --key-file FILE --broker URL``
builds a ``supervisor_void`` command issued now, signs it with the supervisor's own key
(``dealer.edge.signing``), publishes it at QoS 1 on ``studio/v1/tables/TABLE/supervisor``,
waits for the broker's PUBACK and prints the published JSON. The table operations
(``open-round``, ``pause``, ``resume``, ``close``, ``reopen TABLE [--reason TEXT]`` with the
same options, §10.7) do the same for ``supervisor_open_round`` ... ``supervisor_reopen``.
``dealer supervisor expose TABLE ROUND --seat N --card CODE`` confirms an exposed card the
dealer station reported (stud §3.5: a 7th card dealt face up): it plays face up only then, and
only if it is that seat's 7th card as registered (§10.8).
``dealer supervisor keygen --out FILE`` writes a fresh key (mode 0600) for
``[[security.supervisors]] key_files``.

Every act is answered. Before publishing, the tool subscribes to the table's ``state`` and
``events`` (a supervisor may read them) and the backends' retained status; after the PUBACK it
waits for the backend's answer to its command id: ``command_accepted`` (or ``command_repeated``)
among the events a state carries is exit 0, a ``rejected`` on ``events`` is exit 3 with the
backend's reason. Exit 4: nobody answered because
the act cannot reach the backend (the broker's ACL refuses this login the publish or the
events, or no backend is online); exit 5: a backend is online but did not answer within
``--timeout`` (the act may still be applied: look at the table's events or ``dealer
recall``). Bad input (a key file, a broker URL, an id, an unreachable broker) is exit 2 and
nothing is published. Each failure is one line on stderr; the JSON the broker took is printed
on stdout whatever the answer (an act refused by the ACL was not taken: nothing is printed).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import ssl
import stat
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import Any, cast

from dealer.edge import topics
from dealer.cli.client_options import BadInput, add_broker_options, broker_error, credentials

_CLI_NAMES = {"table_id": "TABLE", "round_id": "ROUND", "supervisor": "--supervisor",
              "command_id": "--command-id", "reason": "--reason", "seat": "--seat", "card": "--card"}

#: ``dealer supervisor NAME`` -> (command type, command id prefix, help) of each table operation.
TABLE_OPERATIONS: dict[str, tuple[str, str, str]] = {
    "open-round": ("supervisor_open_round", "open", "open the table's next round now (how a table with "
                   "auto_rounds = false plays)"),
    "pause": ("supervisor_pause", "pause", "pause the table: no new round; the round in play stands still, its "
              "timers stopped; the station shows PAUSED"),
    "resume": ("supervisor_resume", "resume", "resume a paused table: every pending decision, turn or betting "
               "period gets its full window again"),
    "close": ("supervisor_close", "close", "close the table: no new round until it is reopened (a round in play "
              "is played to its end first)"),
    "reopen": ("supervisor_reopen", "reopen", "reopen a closed table (or cancel a close whose last round is "
               "still in play)"),
}


class _Bad(Exception):
    """Bad input: the message is the one line printed on stderr."""


def supervisor_topic(table_id: str) -> str:
    return topics.table_topic(table_id, "supervisor")


def _signing_key(path: str) -> bytes:
    from dealer.edge.keys import read_hex_key

    key = read_hex_key(Path(path), "--key-file")
    mode = stat.S_IMODE(Path(path).stat().st_mode)
    if mode & 0o077:  # like ssh: a signing key others can read is no longer this supervisor's alone
        raise _Bad(f"--key-file {path} is accessible by group or others (mode {mode:04o}): "
                   f"it must be private to you (chmod 600 {path})")
    return key


def build_void(key: bytes, *, table_id: str, round_id: str, reason: str, supervisor: str, command_id: str,
               issued_at: int) -> dict[str, Any]:
    """The signed ``supervisor_void`` envelope; _Bad naming the option for an invalid field."""
    return build_command(key, "supervisor_void", table_id=table_id, round_id=round_id, reason=reason,
                         supervisor=supervisor, command_id=command_id, issued_at=issued_at)


def build_command(key: bytes, command_type: str, *, table_id: str, supervisor: str, command_id: str, issued_at: int,
                  round_id: str | None = None, reason: str | None = None, **fields: Any) -> dict[str, Any]:
    """The signed envelope of ``command_type`` (a table operation names no round; its reason is
    optional and left out when not given; ``fields``: the command's own, such as an exposure's
    ``seat`` and ``card``); _Bad naming the option for an invalid field."""
    from pydantic import ValidationError

    from dealer.edge.signing import COMMAND_TYPES, sign_command

    command: dict[str, Any] = {"type": command_type, "command_id": command_id, "supervisor": supervisor,
                               "table_id": table_id}
    if round_id is not None:
        command["round_id"] = round_id
    command["issued_at"] = issued_at
    if reason is not None:
        command["reason"] = reason
    command.update(fields)
    signed = sign_command(key, command)
    try:
        COMMAND_TYPES[command_type].model_validate(signed)
    except ValidationError as exc:
        raise _Bad("; ".join(f"{_CLI_NAMES.get(str(e['loc'][0]), e['loc'][0]) if e['loc'] else 'command'}: {e['msg']}"
                             for e in exc.errors(include_url=False, include_input=False))) from None
    return signed


#: Exit statuses of a signed act (2 is bad input, as for every ``dealer`` command).
APPLIED, REFUSED, NOT_ANSWERED, NO_ANSWER_IN_TIME = 0, 3, 4, 5


@dataclass(frozen=True)
class Answer:
    """What became of one act: ``status`` is the exit status, ``line`` says why in words."""

    status: int
    line: str
    event: dict[str, Any] | None = None
    published: bool = True  #: the broker took the act (False: refused by its ACL, or not sent)


def _failed(code: Any) -> bool:
    """A SUBACK or PUBACK reason code that refuses (0x80 and above; MQTT 3.1.1's 0x80 too)."""
    value = getattr(code, "value", code)
    return isinstance(value, int) and value >= 0x80


def _code_name(code: Any) -> str:
    return str(getattr(code, "getName", lambda: code)())


def answer_of(event: dict[str, Any], command_id: str) -> Answer | None:
    """The backend's answer to ``command_id`` in one ``events`` message, or None (not ours)."""
    data = event.get("data") if isinstance(event, dict) else None
    if not isinstance(data, dict) or data.get("command_id") != command_id:
        return None
    kind = event.get("event")
    if kind == "command_accepted":
        return Answer(APPLIED, "applied", event)
    if kind == "command_repeated":
        if data.get("answer", "accepted") == "accepted":
            return Answer(APPLIED, "applied (already, under this command id)", event)
        return Answer(REFUSED, f"refused: {data.get('reason') or data.get('answer')}", event)
    if kind == "rejected":
        return Answer(REFUSED, f"refused by the backend: {data.get('reason') or '(no reason given)'}", event)
    return None


async def publish_and_wait(host: str, port: int, *, table_id: str, payload: bytes, command_id: str,
                           username: str | None, password: str | None, tls_context: ssl.SSLContext | None,
                           client_id: str, timeout: float) -> Answer:
    """Subscribe to the table's events and the backends' status, publish the act at QoS 1 and
    wait for the answer to ``command_id``. MQTT 5 first (its PUBACK and SUBACK say when the
    broker's ACL refuses), MQTT 3.1.1 for a broker without it. TimeoutError: no connection or
    no PUBACK within ``timeout``; aiomqtt.MqttError: the broker refused the connection."""
    import aiomqtt

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        return await _exchange(aiomqtt.ProtocolVersion.V5, host, port, table_id, payload, command_id, username,
                               password, tls_context, client_id, deadline)
    except aiomqtt.MqttCodeError as exc:
        if getattr(exc, "rc", None) not in (1, 132):  # not "unsupported protocol version": a real refusal
            raise
    return await _exchange(aiomqtt.ProtocolVersion.V311, host, port, table_id, payload, command_id, username,
                           password, tls_context, client_id, deadline)


async def _exchange(protocol: Any, host: str, port: int, table_id: str, payload: bytes, command_id: str,
                    username: str | None, password: str | None, tls_context: ssl.SSLContext | None,
                    client_id: str, deadline: float) -> Answer:
    import aiomqtt

    loop = asyncio.get_running_loop()
    inner = max(1.0, deadline - loop.time()) + 5  # aiomqtt's own timeouts never fire first
    events_topic, state_topic = topics.events(table_id), topics.state(table_id)
    online: dict[str, bool] = {}
    async with contextlib.AsyncExitStack() as stack:
        client = aiomqtt.Client(host, port, username=username, password=password, identifier=client_id,
                                tls_context=tls_context, timeout=inner, keepalive=max(5, int(inner)),
                                protocol=protocol,
                                clean_session=None if protocol == aiomqtt.ProtocolVersion.V5 else True)
        async with asyncio.timeout_at(deadline):  # the connection and the PUBACK; leaving it is not bounded by it
            await stack.enter_async_context(client)
            granted = list(await client.subscribe([(events_topic, 1), (state_topic, 1), (topics.backend_status("+"), 1)],
                                                  timeout=inner))
        for topic, code in ((events_topic, granted[0]), (state_topic, granted[1])):
            if _failed(code):
                return Answer(NOT_ANSWERED, f"not sent: this login may not read {topic}, where the answer "
                              "comes (broker ACL: see `dealer deploy acl`)", published=False)
        pubacks: list[Any] = []
        paho = client._client  # aiomqtt drops the PUBACK's reason code: keep it (MQTT 5 says ACL refusals)
        # aiomqtt sets a VERSION2 on_publish: (client, userdata, mid, reason code, properties)
        forward = cast("Callable[[Any, Any, int, Any, Any], None]", paho.on_publish)

        def on_publish(c: Any, userdata: Any, mid: int, reason: Any, props: Any) -> None:
            pubacks.append(reason)
            forward(c, userdata, mid, reason, props)

        paho.on_publish = on_publish
        answer: asyncio.Future[Answer] = loop.create_future()

        async def listen() -> None:
            async for message in client.messages:
                topic = str(message.topic)
                try:
                    body = json.loads(bytes(message.payload))
                except (ValueError, TypeError):
                    continue
                if topic in (events_topic, state_topic):
                    # accepted (or repeated): among the events of the table's state; refused: on events
                    carried = body.get("events") if topic == state_topic and isinstance(body, dict) else [body]
                    for event in carried if isinstance(carried, list) else []:
                        got = answer_of(event, command_id)
                        if got is not None and not answer.done():
                            answer.set_result(got)
                elif isinstance(body, dict) and (node := topics.backend_of(topic)) is not None:
                    online[node] = body.get("online") is True

        listener = asyncio.create_task(listen())
        try:
            async with asyncio.timeout_at(deadline):
                await client.publish(supervisor_topic(table_id), payload, qos=1, retain=False, timeout=inner)
            if pubacks and _failed(pubacks[0]):
                return Answer(NOT_ANSWERED, f"not applied: the broker refused the publish on "
                              f"{supervisor_topic(table_id)} ({_code_name(pubacks[0])}: this login's ACL)",
                              published=False)
            try:
                async with asyncio.timeout_at(deadline):
                    return await answer
            except TimeoutError:
                pass
        finally:
            listener.cancel()
            await asyncio.gather(listener, return_exceptions=True)
    live = sorted(node for node, up in online.items() if up)
    if not live:
        return Answer(NOT_ANSWERED, "not answered: no backend is online (studio/v1/backends/+/status): "
                      "the act was not applied; send it again when the table's backend is up")
    return Answer(NO_ANSWER_IN_TIME, f"no answer within the timeout from the backends online ({', '.join(live)}): "
                  "the act may still be applied; look at the table's events or `dealer recall`")


def _cmd_void(args: argparse.Namespace) -> int:
    return _sign_and_publish(args, "void", lambda key: build_void(
        key, table_id=args.table, round_id=args.round, reason=args.reason, supervisor=args.supervisor,
        command_id=args.command_id or f"void-{uuid.uuid4().hex}", issued_at=time.time_ns() // 1_000_000))


def _cmd_expose(args: argparse.Namespace) -> int:
    return _sign_and_publish(args, "expose", lambda key: build_command(
        key, "supervisor_expose", table_id=args.table, round_id=args.round, reason=args.reason,
        supervisor=args.supervisor, command_id=args.command_id or f"expose-{uuid.uuid4().hex}",
        issued_at=time.time_ns() // 1_000_000, seat=args.seat, card=args.card.upper()))


def _cmd_table(args: argparse.Namespace) -> int:
    command_type, prefix, _ = TABLE_OPERATIONS[args.supervisor_command]
    return _sign_and_publish(args, args.supervisor_command, lambda key: build_command(
        key, command_type, table_id=args.table, reason=args.reason, supervisor=args.supervisor,
        command_id=args.command_id or f"{prefix}-{uuid.uuid4().hex}", issued_at=time.time_ns() // 1_000_000))


def _sign_and_publish(args: argparse.Namespace, name: str, build: Any) -> int:
    """Check the options, build and sign the command with the key file, publish it at QoS 1 and
    wait for the backend's answer: exit 0 and the JSON printed once applied, otherwise one
    line on stderr and the status of :class:`Answer` (2 for bad input, nothing published)."""
    import aiomqtt

    from drivers.mqtt import parse_broker_url

    try:
        if not (0 < args.timeout <= 600):
            raise _Bad(f"--timeout {args.timeout}: give 0 < seconds <= 600")
        try:
            host, port, tls = parse_broker_url(args.broker)
        except ValueError as exc:
            raise _Bad(f"--broker: {exc}") from None
        key = _signing_key(args.key_file)
        command = build(key)
        try:
            password, tls_context = credentials(args, args.broker, tls)
        except BadInput as exc:
            raise _Bad(str(exc)) from None
        payload = json.dumps(command, ensure_ascii=False, separators=(",", ":"))
        try:
            answer = asyncio.run(publish_and_wait(
                host, port, table_id=args.table, payload=payload.encode("utf-8"), command_id=command["command_id"],
                username=args.username, password=password, tls_context=tls_context,
                client_id=f"supervisor-{uuid.uuid4().hex[:12]}", timeout=args.timeout))
        except TimeoutError:
            raise _Bad(f"broker {args.broker} did not acknowledge within {args.timeout:g} s (is it "
                       "reachable?): the command is not confirmed") from None
        except aiomqtt.MqttError as exc:
            raise _Bad(f"cannot publish to {args.broker}: {broker_error(exc)}") from None
        except (OSError, ssl.SSLError) as exc:
            raise _Bad(f"cannot publish to {args.broker}: {broker_error(exc)}") from None
    except (_Bad, ValueError) as exc:  # ValueError: the key file (dealer.edge.keys names it)
        print(f"dealer supervisor {name}: {exc}", file=sys.stderr)
        return 2
    if answer.published:  # what was signed and sent, for the record (and to look it up later)
        print(payload)
    if answer.status != APPLIED:
        print(f"dealer supervisor {name}: {answer.line} (command {command['command_id']})", file=sys.stderr)
    return answer.status


def _cmd_keygen(args: argparse.Namespace) -> int:
    out = Path(args.out)
    try:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        print(f"dealer supervisor keygen: {out} already exists: refusing to overwrite a key", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"dealer supervisor keygen: cannot create {out}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    with os.fdopen(fd, "w", encoding="ascii") as f:
        os.fchmod(f.fileno(), 0o600)  # whatever the umask
        f.write(secrets.token_hex(32) + "\n")
    print(out)
    return 0


def _common_options(v: argparse.ArgumentParser, prefix: str) -> None:
    """The options every signed command shares (void and the table operations)."""
    v.add_argument("--supervisor", required=True, metavar="ID",
                   help="your supervisor id, as in the backend's [[security.supervisors]]")
    v.add_argument("--key-file", required=True, metavar="FILE",
                   help="your signing key (hex; mode 0600, see `dealer supervisor keygen`)")
    add_broker_options(v, connect_timeout=False)  # the same broker, credential and TLS options as every client
    v.add_argument("--command-id", metavar="ID",
                   help=f"the command id (default: a fresh {prefix}-<uuid4>); it must be new: the backend refuses an "
                        "id reused with other content, and every run of this tool issues new content")
    v.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                   help="give up when the backend has not answered within SECONDS (default 10): exit 5 when a "
                        "backend is online, 4 when none is")


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``dealer supervisor void|expose|open-round|pause|resume|close|reopen|keygen`` to the
    ``dealer`` command's subparsers."""
    s: argparse.ArgumentParser = subparsers.add_parser("supervisor", help="a supervisor's signing tool: publish a signed void, exposure or "
                              "table operation (open a round, pause, resume, close, reopen), make a key")
    ssub = s.add_subparsers(dest="supervisor_command", required=True)
    v = ssub.add_parser("void", help="sign and publish a supervisor_void for one round (docs/mqtt-topics.md §10)")
    v.add_argument("table", metavar="TABLE", help="the table id, e.g. TP1")
    v.add_argument("round", metavar="ROUND", help="the round id to void, e.g. TP1-000044")
    v.add_argument("--reason", required=True, help="why the round is voided (1 to 200 characters), journaled")
    _common_options(v, "void")
    v.set_defaults(func=_cmd_void)
    e = ssub.add_parser("expose", help="confirm the exposed card the dealer station reported (stud: a 7th card dealt "
                        "face up): it plays face up only then (signed supervisor_expose, docs/mqtt-topics.md §10.8)")
    e.add_argument("table", metavar="TABLE", help="the table id, e.g. ST1")
    e.add_argument("round", metavar="ROUND", help="the round in play, e.g. ST1-000012 (the station's prompt names it)")
    e.add_argument("--seat", required=True, type=int, metavar="N", help="the seat whose card lies face up")
    e.add_argument("--card", required=True, metavar="CODE",
                   help="the card you see face up, e.g. 5C: the backend checks it is the card registered there")
    e.add_argument("--reason", help="a note (optional, 1 to 200 characters), journaled")
    _common_options(e, "expose")
    e.set_defaults(func=_cmd_expose)
    for name, (command_type, prefix, text) in TABLE_OPERATIONS.items():
        t = ssub.add_parser(name, help=f"{text} (signed {command_type}, docs/mqtt-topics.md §10.7)")
        t.add_argument("table", metavar="TABLE", help="the table id, e.g. TP1")
        t.add_argument("--reason", help="why (optional, 1 to 200 characters): journaled and shown on the station")
        _common_options(t, prefix)
        t.set_defaults(func=_cmd_table)
    k = ssub.add_parser("keygen", help="write a fresh random 32-byte signing key (hex, mode 0600) to a new file")
    k.add_argument("--out", required=True, metavar="FILE", help="the key file to create (never overwritten)")
    k.set_defaults(func=_cmd_keygen)
    return s


__all__ = ["APPLIED", "NOT_ANSWERED", "NO_ANSWER_IN_TIME", "REFUSED", "TABLE_OPERATIONS", "Answer", "answer_of",
           "build_command", "build_void", "publish_and_wait", "register", "supervisor_topic"]
