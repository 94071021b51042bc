"""Which journal: one registration per backend, chosen by the target's form.

``service.journal_url`` (``postgresql://...``) selects :class:`~dealer.edge.journal_pg.PgJournal`;
unset, the SQLite file ``service.journal_path`` (:class:`~dealer.edge.journal.SqliteJournal`). The
tools that read a journal (recall, audit, outbox) take either a path or a URL.

A backend is one module with a class that implements the journal contract
(dealer/edge/journal_contract.py) plus one :func:`register` line naming its URL prefixes and
``module:Class`` (imported only when a target of its form is opened, so the SQLite journal never
needs the PostgreSQL driver). A target that matches no prefix is a file: the SQLite journal.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, cast

from dealer.edge.journal_contract import Journal, JournalBackend
from dealer.edge.journal_errors import JournalError

if TYPE_CHECKING:
    from dealer.edge.config import Settings
    from dealer.edge.journal_rows import AuditReport


@dataclass(frozen=True, slots=True)
class Backend:
    """A registered journal backend: its name, the URL prefixes it takes (none: files) and where
    its class is (``module:Class``)."""

    name: str
    prefixes: tuple[str, ...]
    where: str

    def load(self) -> JournalBackend:
        module, _, cls = self.where.partition(":")
        return cast(JournalBackend, getattr(import_module(module), cls))


#: Every backend, by name (the file backend first; URL backends by prefix).
BACKENDS: dict[str, Backend] = {}


def register(name: str, prefixes: tuple[str, ...], where: str) -> Backend:
    """Make a backend openable: targets starting with one of ``prefixes`` (``()``: a file path)
    open ``where`` (``module:Class``, a :class:`~dealer.edge.journal_contract.JournalBackend`)."""
    backend = BACKENDS[name] = Backend(name, prefixes, where)
    return backend


register("sqlite", (), "dealer.edge.journal:SqliteJournal")
register("postgresql", ("postgresql://", "postgres://"), "dealer.edge.journal_pg:PgJournal")

#: What libpq takes as a URL.
URL_SCHEMES = BACKENDS["postgresql"].prefixes


def backend_of(target: str | Path) -> Backend:
    """The backend of a journal target: the one whose prefix it starts with, else the file backend."""
    if isinstance(target, str):
        for backend in BACKENDS.values():
            if backend.prefixes and target.startswith(backend.prefixes):
                return backend
    return BACKENDS["sqlite"]


def is_url(target: str | Path | None) -> bool:
    """Whether a journal target is the URL of a journal server (else a SQLite file)."""
    return target is not None and backend_of(target).prefixes != ()


def target_of(settings: "Settings") -> str | Path:
    """The configured journal: ``service.journal_url`` if set, else ``service.journal_path``."""
    url = settings.service.journal_url
    if url:
        if not is_url(url):
            raise JournalError(f"service.journal_url must start with postgresql:// (got {url.split('://')[0]}://...)")
        return url
    return settings.service.journal_path


def open_journal(settings_or_target: "Settings | str | Path", *, node_id: str | None = None,
                 fsync: bool | None = None, read_only: bool = False) -> Journal:
    """The journal of a configuration (or at a path or URL), opened for the service or, with
    ``read_only``, for reading. ``node_id`` and ``fsync`` default to the configuration's. Raises
    :class:`JournalError` (one line: unreachable, wrong schema version, not a journal ...)."""
    if isinstance(settings_or_target, (str, Path)):
        target: str | Path = settings_or_target
        fsync = True if fsync is None else fsync
    else:
        target = target_of(settings_or_target)
        node_id = settings_or_target.service.node_id if node_id is None else node_id
        fsync = settings_or_target.service.fsync if fsync is None else fsync
    if read_only:
        return open_read_only(target)
    return backend_of(target).load().open(target, node_id=node_id, fsync=fsync)


def open_read_only(target: str | Path) -> Journal:
    """A journal for reading only (recall, audit): never created, migrated or written."""
    return backend_of(target).load().open_read_only(target)


def audit_verify(journal: Journal, anchors: Iterable[tuple[int, str]] = ()) -> "AuditReport":
    """``dealer audit verify`` of any journal (:meth:`~dealer.edge.journal_contract.Journal.audit`):
    SQLite's chain across its segments, or PostgreSQL's per-table chains."""
    return journal.audit(anchors)


def init_schema(url: str) -> dict[str, str]:
    """Create the PostgreSQL journal's schema at ``url`` (or find it): as the URL's role, which
    then owns it (``dealer cluster init`` connects as the admin with ``options=-c role=OWNER``).
    Returns ``journal`` (the URL without password), ``journal_id`` and ``source`` (``created`` or
    ``existing``). Raises :class:`JournalError` in one line when the database cannot be used."""
    if not url.startswith(URL_SCHEMES):
        raise JournalError(f"{url.split('://')[0][:40]!r}... is not a postgresql:// URL")
    journal = open_journal(url, node_id="init")
    try:
        return {"journal": journal.path, "journal_id": journal.journal_id, "source": journal.journal_id_source}
    finally:
        journal.close()


def main(argv: list[str] | None = None) -> int:
    """``python -m dealer.edge.journals init URL``: create the PostgreSQL journal's schema as the
    database's owner (nodes then run as a role without CREATE: deploy/postgresql/roles.sql) and
    print its journal id. Exit 2 with one line when the database cannot be used. ``dealer cluster
    init`` does this and everything around it (the database, the roles, the grants)."""
    import argparse
    import json
    import sys

    p = argparse.ArgumentParser(prog="python -m dealer.edge.journals")
    sub = p.add_subparsers(dest="cmd", required=True)
    init = sub.add_parser("init", help="create the journal schema in an empty PostgreSQL database (idempotent)")
    init.add_argument("url", metavar="URL", help="postgresql://owner@host:port/db (password in PGPASSFILE)")
    args = p.parse_args(argv)
    if not args.url.startswith(URL_SCHEMES):
        print(f"init: {args.url!r} is not a postgresql:// URL", file=sys.stderr)
        return 2
    try:
        made = init_schema(args.url)
    except JournalError as exc:
        print(f"init: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print(json.dumps({"journal": made["journal"], "journal_id": made["journal_id"], "source": made["source"]}))
    return 0


__all__ = ["BACKENDS", "URL_SCHEMES", "Backend", "audit_verify", "backend_of", "init_schema", "is_url", "main",
           "open_journal", "open_read_only", "register", "target_of"]

if __name__ == "__main__":
    raise SystemExit(main())
