"""The journal's head, kept where a rolled-back journal cannot take it back: a journal behind it is refused.

Every round id is ``{table}-{journal_id}-{seq}`` and every idempotency key is built on it. A
journal whose last rows were cut off, or whose ``-wal`` file was lost, replays to an earlier
round and would open the next rounds under ids that settlement has already seen (and drops as
repeats: those bets would never be paid). So ``dealer run`` compares the journal with the head
it committed before, from two places that do not roll back with the journal file:

* the **head record** beside a SQLite journal, ``<journal>.head``: the last row id and hash,
  written (a new file, fsynced, renamed, the directory fsynced) after each WAL checkpoint when
  the head moved (about once a second), before each anchor is published, and at a clean stop
  (dealer/edge/maintenance.py); and
* the **anchor retained on the broker**, ``studio/v1/backends/{node}/journal`` (the only witness
  for a PostgreSQL journal, and for a host restored from a snapshot with its record), read at
  start by a short-lived client of the backend's own login (:func:`retained_anchor`).

A head compared is found if the journal holds that row with that hash (:func:`behind`); a journal
that ends before it, or holds another row there, is refused (exit 2, one line): restore the lost
rows, or start a new journal (a new journal id, so no key can repeat). A record or anchor of
another journal id is not this journal's (a journal replaced on purpose starts a new key series)
and is not compared. Rows committed after the last record (at most a checkpoint period) are not
covered; nor, without the broker, a host rolled back together with its record.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dealer.edge.journal import JournalError

if TYPE_CHECKING:
    from dealer.edge.config import Settings

#: Seconds the start waits for the broker (each of its URLs) before it starts without its anchor.
BROKER_TIMEOUT = 5.0
#: After the barrier, how long a retained anchor may still be on its way (brokers other than
#: Mosquitto need not queue it before the next SUBACK).
GRACE = 0.25


@dataclass(frozen=True, slots=True)
class Head:
    """A journal head kept outside the journal: its journal id (None: an anchor published before
    anchors named it), row id and hash, when (epoch ms) and where it was read from."""

    journal_id: str | None
    row_id: int
    hash: str
    at: int
    source: str

    @property
    def when(self) -> str:
        return datetime.fromtimestamp(self.at / 1000, timezone.utc).isoformat(timespec="seconds")


def record_path(journal_path: str | Path) -> Path:
    """The head record of the SQLite journal at ``journal_path``."""
    return Path(f"{journal_path}.head")


def _parse(data: Any, source: str) -> Head:
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    jid, rid, h, at = data.get("journal_id"), data.get("row_id"), data.get("hash"), data.get("at", 0)
    if jid is not None and not isinstance(jid, str):
        raise ValueError("journal_id is not a string")
    if not isinstance(rid, int) or isinstance(rid, bool) or rid < 0:
        raise ValueError("row_id is not a row id")
    if not isinstance(h, str) or len(h) != 64 or any(c not in "0123456789abcdef" for c in h):
        raise ValueError("hash is not a SHA-256")
    if not isinstance(at, int) or isinstance(at, bool):
        raise ValueError("at is not epoch milliseconds")
    return Head(jid, rid, h, at, source)


def read_record(journal_path: str | Path) -> Head | None:
    """The head record beside a SQLite journal (None: there is none yet). A record that cannot be
    read is a :class:`JournalError`: it is written whole or not at all, so it was damaged or edited."""
    path = record_path(journal_path)
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise JournalError(f"head record {path} cannot be read: {exc.strerror or exc}") from None
    try:
        return _parse(json.loads(text), f"the head record {path}")
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise JournalError(f"head record {path} is damaged ({str(exc)[:80]}): it holds the last row this journal "
                           "committed; check the journal with dealer audit verify, then remove the record") from None


class HeadRecord:
    """Writes the head record of one SQLite journal: never a lower row than it wrote before, one
    writer at a time (the checkpoint thread, an anchor's publish and the stop may all write)."""

    def __init__(self, journal_path: str | Path, journal_id: str) -> None:
        self.path = record_path(journal_path)
        self.journal_id = journal_id
        self._lock = threading.Lock()
        try:
            old = read_record(journal_path)
        except JournalError:
            old = None  # start-up refused a damaged record unless told otherwise: it is replaced
        self.written = old.row_id if old is not None and old.journal_id == journal_id else -1

    def write(self, head: tuple[int, str]) -> bool:
        """Record ``head`` (row id, hash) durably unless a row at or after it is recorded already;
        True when it wrote. Raises OSError (a full disk): the caller logs it, the next write tries again."""
        with self._lock:
            if head[0] <= self.written:
                return False
            data = json.dumps({"journal_id": self.journal_id, "row_id": head[0], "hash": head[1],
                               "at": time.time_ns() // 1_000_000}, sort_keys=True).encode() + b"\n"
            tmp = self.path.with_name(f"{self.path.name}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o640)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
            dfd = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
            self.written = head[0]
            return True


def behind(journal: Any, head: Head) -> str | None:
    """Why ``journal`` is behind ``head`` (a one-line refusal), or None: it holds that row with that
    hash. A head of another journal id is not compared (None)."""
    jid = journal.journal_id
    if head.journal_id is None or not jid or head.journal_id != jid:
        return None
    name = journal.path
    last = journal.head[0]
    tail = ("started, it would deal rounds under round ids and idempotency keys settlement has already seen: "
            "restore the missing rows (the journal with its -wal file), or archive this journal and start a new "
            "one (a new journal id: no key repeats)")
    if head.row_id > last:
        return (f"journal {name} ends at row {last}, behind row {head.row_id} which {head.source} holds as "
                f"committed ({head.when}, journal {jid}): its last rows were cut off or lost; {tail}")
    try:
        found = journal.hash_at(head.row_id)
    except JournalError as exc:  # a segment file that is gone
        return f"journal {name}: row {head.row_id}, held by {head.source}, cannot be read: {exc}"
    if found is None:
        return (f"journal {name}: row {head.row_id}, which {head.source} holds as committed ({head.when}), is "
                f"missing; {tail}")
    if found != head.hash:
        return (f"journal {name}: row {head.row_id} is not the row {head.source} holds ({head.when}; hash "
                f"{found[:16]}..., held {head.hash[:16]}...): the journal was rolled back and written again; {tail}")
    return None


@dataclass(frozen=True, slots=True)
class Retained:
    """What the broker holds on the node's journal topic: ``anchor`` (None: nothing retained, or
    not readable), ``problem`` (why it was not read; None when it was), ``reached`` (False: no
    broker could be reached, so asking again later may succeed)."""

    anchor: Head | None
    problem: str | None = None
    reached: bool = True


async def retained_anchor(settings: Settings, timeout: float = BROKER_TIMEOUT) -> Retained:
    """The anchor retained on the node's journal topic, read with the backend's own login from a
    client of its own (never the backend's client id: a running node of that id keeps its
    connection).

    A second SUBSCRIBE is the barrier: a broker sends a subscription's retained messages before it
    handles the client's next packet (Mosquitto does), so once its SUBACK is back, an anchor that
    exists has arrived; other brokers get a short grace after it. A subscription the broker's ACL
    refuses is said so (``dealer deploy acl`` renders the backend's read of its own anchor)."""
    from dealer.edge import topics
    from dealer.edge.mqtt_login import mqtt_password
    from paho.mqtt.reasoncodes import ReasonCode

    from drivers.mqtt import _Client, explain, make_tls_context, parse_broker_url

    m = settings.mqtt
    topic = topics.backend_journal(settings.service.node_id)
    problems: list[str] = []
    for url in m.urls:
        host, port, tls = parse_broker_url(url)
        got: list[bytes] = []

        def deliver(got_topic: str, payload: bytes, retained: bool) -> None:
            if retained and got_topic == topic and payload:
                got.append(bytes(payload))  # noqa: B023 (this iteration's list; the subscription ends in it)

        try:
            ctx = make_tls_context(m.ca_file, m.cert_file, m.key_file) if tls else None
            async with asyncio.timeout(timeout):
                async with _Client(host, port, identifier=f"{m.client_id}-anchor-{secrets.token_hex(4)}",
                                   username=m.username, password=mqtt_password(settings), keepalive=m.keepalive,
                                   clean_session=True, tls_context=ctx, timeout=timeout, deliver=deliver) as client:
                    granted = await client.subscribe(topic, qos=1)
                    if any(int(g.value if isinstance(g, ReasonCode) else g) >= 0x80 for g in granted):
                        return Retained(None, f"the broker does not let {m.username or 'this login'} read {topic} "
                                              "(its ACL: see dealer deploy acl)")
                    await client.subscribe(topic, qos=1)  # the barrier
                    if not got:  # a broker that sends it a little later (the barrier is Mosquitto's order)
                        await asyncio.sleep(GRACE)
        except Exception as exc:  # unreachable, refused login, TLS, a timeout: started without it
            problems.append(f"{url}: {explain(exc)}")
            continue
        if not got:
            return Retained(None)
        try:
            return Retained(_parse(json.loads(got[-1]), f"the anchor retained on {topic}"))
        except ValueError as exc:
            return Retained(None, f"the anchor retained on {topic} is malformed ({str(exc)[:80]})")
    return Retained(None, "the broker could not be reached (" + "; ".join(problems)[:300] + ")", reached=False)


__all__ = ["BROKER_TIMEOUT", "Head", "HeadRecord", "Retained", "behind", "read_record", "record_path",
           "retained_anchor"]
