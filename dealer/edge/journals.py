"""Which journal: SQLite (a file, one host) or PostgreSQL (a URL, shared by the nodes of a cluster).

``service.journal_url`` (``postgresql://...``) selects :class:`~dealer.edge.journal_pg.PgJournal`;
unset, the SQLite file ``service.journal_path`` (:class:`~dealer.edge.journal.Journal`). The tools
that read a journal (recall, audit, outbox) take either a path or a URL.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dealer.edge.journal import Journal, JournalError

if TYPE_CHECKING:
    from dealer.edge.config import Settings
    from dealer.edge.journal_pg import PgJournal
    from dealer.edge.segments import AuditReport

#: What libpq takes as a URL.
URL_SCHEMES = ("postgresql://", "postgres://")


def is_url(target: str | Path | None) -> bool:
    """Whether a journal target is a PostgreSQL URL (else a SQLite file)."""
    return isinstance(target, str) and target.startswith(URL_SCHEMES)


def target_of(settings: "Settings") -> str | Path:
    """The configured journal: ``service.journal_url`` if set, else ``service.journal_path``."""
    url = settings.service.journal_url
    if url:
        if not is_url(url):
            raise JournalError(f"service.journal_url must start with postgresql:// (got {url.split('://')[0]}://...)")
        return url
    return settings.service.journal_path


def open_journal(settings_or_target: "Settings | str | Path", *, node_id: str | None = None,
                 fsync: bool | None = None, read_only: bool = False) -> "Journal | PgJournal":
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
    if is_url(target):
        from dealer.edge.journal_pg import PgJournal

        if not node_id:
            raise ValueError("the PostgreSQL journal needs the node id that writes it")
        return PgJournal(str(target), node_id=node_id, fsync=fsync)
    return Journal(target, fsync=fsync)


def open_read_only(target: str | Path) -> "Journal | PgJournal":
    """A journal for reading only (recall, audit): never created, migrated or written."""
    if is_url(target):
        from dealer.edge.journal_pg import PgJournal

        return PgJournal.open_read_only(str(target))
    return Journal.open_read_only(target)


def audit_verify(journal: Any, anchors: Iterable[tuple[int, str]] = ()) -> "AuditReport":
    """``dealer audit verify`` of either journal: SQLite's chain across its segments
    (:func:`dealer.edge.segments.verify`), or PostgreSQL's per-table chains
    (:func:`dealer.edge.journal_pg.verify_audit`)."""
    if getattr(journal, "rolls_segments", True):
        from dealer.edge.segments import verify

        return verify(journal, anchors)
    from dealer.edge.journal_pg import verify_audit

    return verify_audit(journal, anchors)


def init_schema(url: str) -> dict[str, str]:
    """Create the PostgreSQL journal's schema at ``url`` (or find it): as the URL's role, which
    then owns it (``dealer cluster init`` connects as the admin with ``options=-c role=OWNER``).
    Returns ``journal`` (the URL without password), ``journal_id`` and ``source`` (``created`` or
    ``existing``). Raises :class:`JournalError` in one line when the database cannot be used."""
    if not is_url(url):
        raise JournalError(f"{url.split('://')[0][:40]!r}... is not a postgresql:// URL")
    from dealer.edge.journal_pg import PgJournal

    journal = PgJournal(url, node_id="init")
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
    if not is_url(args.url):
        print(f"init: {args.url!r} is not a postgresql:// URL", file=sys.stderr)
        return 2
    try:
        made = init_schema(args.url)
    except JournalError as exc:
        print(f"init: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print(json.dumps({"journal": made["journal"], "journal_id": made["journal_id"], "source": made["source"]}))
    return 0


__all__ = ["URL_SCHEMES", "audit_verify", "init_schema", "is_url", "main", "open_journal", "open_read_only",
           "target_of"]

if __name__ == "__main__":
    raise SystemExit(main())
