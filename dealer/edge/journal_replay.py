"""Replay, written once for every journal: which rows rebuild a table, in which order, and the
error that names a row that cannot. A backend answers three questions (:class:`Replays`): where
the table's replay starts, the rules row in force there, and the rows from the start on (a
backend that checks its chain while reading, as PostgreSQL does, checks them there)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from dealer.core.events import EVENT_ADAPTER, Event
from dealer.edge.journal_errors import ReplayError
from dealer.edge.journal_rows import JournalRow

#: The replay start's three questions, in SQL that SQLite and PostgreSQL both run ({p}: the
#: driver's placeholder), so both journals replay from the same row (dealer/edge/journal_pg.py).
#: ``MIN(id + 0)``, not ``MIN(id)``: PostgreSQL would otherwise walk the primary key from the first
#: row of every table, filtering, when every round was delivered (2 s a table at 300,000 rows,
#: at every start and takeover; 0.04 s through the table's open_round rows instead).
_REPLAY_START = (
    "SELECT MIN(id + 0) FROM events WHERE table_id = {p} AND type = 'open_round' AND round_id NOT IN "
    "(SELECT round_id FROM events WHERE table_id = {p} AND type = 'result_delivered')",
    "SELECT MAX(id) FROM events WHERE table_id = {p} AND type = 'open_round'",
    "SELECT MIN(id) FROM events WHERE table_id = {p} AND type IN ('supervisor_pause', 'supervisor_resume', "
    "'supervisor_close', 'supervisor_reopen')",
)


def replay_start(con: Any, table_id: str, placeholder: str = "?") -> int | None:
    """The row a table's replay starts at: its oldest undelivered round, else its last round,
    else (a table that never opened a round) its first table operation (dealer.core.operations): a
    table paused or closed before its first round stays so. A round opens only on an open
    table, so operations before the start never matter. ``con`` is anything with
    ``execute(sql, params).fetchone()`` (a SQLite connection, or the PostgreSQL journal's reads)."""
    for sql in _REPLAY_START:
        sql = sql.format(p=placeholder)
        start = con.execute(sql, (table_id,) * sql.count(placeholder)).fetchone()[0]
        if start is not None:
            return int(start)
    return None


class Replays:
    """:meth:`replay` and :meth:`replay_rows` of a journal, over its three answers (the
    ``_replay_*`` methods a backend defines). ``path`` names the journal in errors."""

    path: str

    def replay(self, table_id: str) -> Iterator[Event]:
        """The events needed to rebuild a table (:meth:`replay_rows` without the row ids)."""
        for _row_id, ev in self.replay_rows(table_id):
            yield ev

    def replay_rows(self, table_id: str) -> Iterator[tuple[int, Event]]:
        """(row id, event) of the events needed to rebuild a table: the last ``table_rules``
        event before the start (the rules in force there), then everything from the oldest
        round not yet delivered (or the last round opened, which carries the round sequence,
        or the first table operation: :func:`replay_start`) to the end. Raises
        :class:`ReplayError` naming the row for a body that is not a valid event (or, for a
        backend that checks its chain while reading, a row whose chain does not hold)."""
        start = self._replay_start(table_id)
        rules = self._replay_rules(table_id, start)
        if rules is not None:
            yield rules.id, self._event(rules.id, rules.body)
        if start is None:
            return
        for row_id, body in self._replay_from(table_id, start):
            yield row_id, self._event(row_id, body)

    def _event(self, row_id: int, body: str) -> Event:
        try:
            return EVENT_ADAPTER.validate_json(body)
        except ValueError as exc:
            raise ReplayError(f"journal {self.path}: row {row_id} is not a valid event: "
                              f"{str(exc).splitlines()[0]}") from None

    def _replay_start(self, table_id: str) -> int | None:
        """The row the table's replay starts at (:func:`replay_start`), None: no round, no operation."""
        raise NotImplementedError

    def _replay_rules(self, table_id: str, start: int | None) -> JournalRow | None:
        """The last ``table_rules`` row of the table before ``start`` (None: before the end)."""
        raise NotImplementedError

    def _replay_from(self, table_id: str, start: int) -> Iterable[tuple[int, str]]:
        """(row id, body) of the table's rows from ``start`` on, in order."""
        raise NotImplementedError


__all__ = ["Replays", "replay_start"]
