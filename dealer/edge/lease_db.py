"""The lease manager's connections to the database (dealer/edge/leases.py): every statement
bounded in time, a connection cut (never closed under a waiter) when its deadline passes."""

from __future__ import annotations

import asyncio
import os
import socket
import weakref
from collections.abc import Awaitable
from contextlib import suppress
from datetime import datetime, timezone
from typing import Any, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict

T = TypeVar("T")


class _Unreachable(Exception):
    """A statement failed for want of the database (refused, reset, no answer in time)."""


def describe(url: str) -> str:
    """``host:port/db`` of a libpq URL, for messages (never its password)."""
    try:
        p = conninfo_to_dict(url)
    except psycopg.Error:
        return "(a malformed URL)"
    return f"{p.get('host', 'localhost')}:{p.get('port', 5432)}/{p.get('dbname', '')}"


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="milliseconds")


# A connection's socket is closed only once nothing waits on it. psycopg waits by registering
# the socket with the event loop, and re-registers it every 0.1 s; closing a descriptor the
# loop registered in the same turn makes uvloop abort the whole process inside libuv
# (epoll_ctl on a closed descriptor). A node resumed after SIGSTOP runs every overdue timer
# in one turn (psycopg's and a deadline's), which is how nodes died after SIGCONT. So a
# deadline *cuts* the connection (shutdown: every waiter reads end of file and lets go of
# the socket; libpq then drops it) and closes it when the last statement on it has ended.
_busy: weakref.WeakKeyDictionary[Any, set[asyncio.Future[Any]]] = weakref.WeakKeyDictionary()


def _cut(conn: psycopg.AsyncConnection[Any] | None) -> None:
    """Wake whatever waits on ``conn``'s socket, now, without closing the descriptor."""
    if conn is None:
        return
    with suppress(Exception):  # already dropped by libpq: nothing waits on it
        fd = conn.pgconn.socket
        with socket.socket(fileno=os.dup(fd)) as s:  # the duplicate is never registered
            s.shutdown(socket.SHUT_RDWR)


def _finish(conn: psycopg.AsyncConnection[Any] | None) -> None:
    """Close ``conn`` whatever it is doing: cut it now, close it once no statement waits on it."""
    if conn is None:
        return
    _cut(conn)
    pending = {t for t in _busy.get(conn, ()) if not t.done()}
    if not pending:
        _close(conn)
        return

    def last_one_ended(_: asyncio.Future[Any]) -> None:
        if all(t.done() for t in pending):
            _close(conn)
    for t in pending:
        t.add_done_callback(last_one_ended)


def _close(conn: psycopg.AsyncConnection[Any]) -> None:
    _busy.pop(conn, None)
    with suppress(Exception):
        conn.pgconn.finish()


def _forget(task: asyncio.Future[Any]) -> None:
    """Retrieve an abandoned task's outcome so asyncio does not log it."""
    def done(t: asyncio.Future[Any]) -> None:
        if not t.cancelled():
            t.exception()
    task.add_done_callback(done)


async def _bounded(coro: Awaitable[T], timeout: float, conn: psycopg.AsyncConnection[Any] | None,
                   what: str) -> T:
    """``coro`` within ``timeout`` seconds, else cut ``conn`` under it and raise
    :class:`_Unreachable`. Cutting rather than cancelling matters: cancelling a query psycopg
    still believes active sends a cancel request and waits seconds for a server that does not
    answer, while a cut socket ends the statement at once with an error."""
    task = asyncio.ensure_future(coro)
    if conn is not None:
        _busy.setdefault(conn, set()).add(task)
        task.add_done_callback(lambda t: _busy.get(conn, set()).discard(t))
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:
        _abandon(task, conn)
        raise
    if not done:
        _cut(conn)
        with suppress(Exception):
            await asyncio.wait({task}, timeout=1.0)
        _abandon(task, conn)
        raise _Unreachable(f"{what}: no answer in {timeout:g} s")
    try:
        return task.result()
    except (psycopg.OperationalError, psycopg.InterfaceError, OSError) as e:
        _finish(conn)
        raise _Unreachable(f"{what}: {_one_line(e)}") from None


def _abandon(task: asyncio.Future[Any], conn: psycopg.AsyncConnection[Any] | None) -> None:
    """Give up on ``task``: a statement on ``conn`` ends by the cut (the connection closes
    when it has); a connect (no ``conn`` yet) is cancelled, which psycopg handles itself."""
    if not task.done() and conn is None:
        task.cancel()
    _forget(task)
    _finish(conn)
