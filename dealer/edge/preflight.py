"""Every reason ``dealer run`` refuses to start, in one list, for ``run`` and ``deploy check`` alike.

``dealer run`` refuses (exit 2, a person must act) for an unsafe deployment
(:func:`dealer.edge.security.check_deployment`), a strict table whose pay table is outside its
declared RTP bounds, a key file that holds no usable key, and a journal it cannot use: a missing
or read-only directory, a journal locked by another process, a file that is not a journal, a
PostgreSQL journal it cannot reach. ``dealer deploy check`` prints exactly this list
(``tests/test_preflight.py`` holds the two commands to the same lines), so a host can be checked
before its unit is started. Nothing is created (but the journal's lock file, as ``run`` creates
it), migrated or locked for longer than the check.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from dealer.edge.security import check_deployment

if TYPE_CHECKING:
    from dealer.edge.config import Settings
    from dealer.edge.rtp_policy import TableRtp


def start_refusals(settings: Settings, config_path: str | Path | None,
                   rtp_reports: Sequence[TableRtp] | None = None) -> list[str]:
    """Every reason to refuse to start with ``settings`` (``[]``: it may start)."""
    return config_refusals(settings, config_path, rtp_reports) + _journal_refusals(settings)


def config_refusals(settings: Settings, config_path: str | Path | None,
                    rtp_reports: Sequence[TableRtp] | None = None) -> list[str]:
    """The refusals of the configuration itself, not of the journal it names: what a reload
    (SIGHUP, dealer/edge/reload.py) checks too."""
    from dealer.edge.rtp_policy import refusals, table_reports

    problems = check_deployment(settings, config_path)
    problems += refusals(rtp_reports if rtp_reports is not None else table_reports(settings))
    problems += _key_refusals(settings)
    return problems


def _key_refusals(settings: Settings) -> list[str]:
    """Key files whose content is not a key (their mode and readability are check_deployment's)."""
    from dealer.edge.keys import read_hex_key

    out: list[str] = []
    for tc in settings.tables:
        for f in tc.scanner.hmac_key_files:
            out += _key(read_hex_key, Path(f), f"scanner {tc.scanner.reader_id}: HMAC key file")
    for sup in settings.security.supervisors:
        for f in sup.key_files:
            out += _key(read_hex_key, Path(f), f"supervisor {sup.id}: key file")
    return out


def _key(read: object, path: Path, what: str) -> list[str]:
    if not path.is_file() or not os.access(path, os.R_OK):
        return []  # check_deployment already says it cannot be read
    try:
        read(path, what)  # type: ignore[operator]
    except ValueError as exc:
        return [str(exc)]
    return []


def _journal_refusals(settings: Settings) -> list[str]:
    from dealer.edge.journal import JournalError, lock_journal
    from dealer.edge.journals import open_read_only

    url = settings.service.journal_url
    if url:
        try:
            open_read_only(url).close()
        except JournalError as exc:
            text = " ".join(str(exc).split())
            if "no dealer journal in this database" in text:
                return []  # a new database: the node creates the schema if its role may (dealer cluster init)
            return [text]
        return []
    path = Path(settings.service.journal_path)
    try:
        os.close(lock_journal(path))  # the directory, and nobody else running on this journal
    except JournalError as exc:
        return [" ".join(str(exc).split())]
    if path.exists():
        try:
            open_read_only(path).close()
        except JournalError as exc:
            return [" ".join(str(exc).split())]
    return []


__all__ = ["config_refusals", "start_refusals"]
