"""Reload without a restart (SIGHUP): keys and table settings, never a round in play.

``dealer run`` reads its configuration again on SIGHUP (``systemctl reload``). What may change
takes effect at once for every table on the host, none stops:

* **supervisor keys** (``[security]``: keys added, rotated or removed, a supervisor added or
  removed, the tables each may command, the freshness window): the next command is verified
  with the new keys;
* **scanner keys** (``hmac_key_files``, ``require_mac``): the next frame is verified with them;
  the reader's replay protection (boot, sequence) carries on;
* **table settings** (the rules: limits, timers, options, pay tables; ``pause_seconds``,
  ``auto_rounds``, ``rtp_policy``, ``rtp_bounds``): new rules are journaled (``table_rules``) and
  apply from the next round; the round in play keeps the rules it opened with.

Every change of keys is journaled per table (``keys_changed``, by fingerprint), as rules are.
Anything else (the broker, the journal, the node, the cluster, a table added or removed, a
table's game or scanner wiring) needs a restart: such a reload is refused whole, with one log
line naming each difference, and nothing changes. So is a reload the start-up checks would
refuse (a loose key file, a strict table outside its RTP bounds, a malformed key).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from dealer.core.events import KeysChanged

if TYPE_CHECKING:
    from dealer.core.table import Table
    from dealer.edge.config import Settings, TableConfig
    from dealer.edge.input_queue import InputQueue
    from dealer.edge.metrics import Metrics
    from dealer.edge.signing import SupervisorVerifier
    from drivers.frames import FrameAuthenticator

log = structlog.get_logger("dealer.edge.service")

#: A table's fields a reload may change (the rest of TableConfig is its identity or wiring).
TABLE_RELOADABLE = frozenset({"currency", "minor_unit", "rounding", "betting_seconds", "decision_seconds",
                              "action_seconds", "alert_after", "limits", "options", "pause_seconds", "auto_rounds",
                              "rtp_policy", "rtp_bounds"})
#: A scanner's fields a reload may change.
SCANNER_RELOADABLE = frozenset({"hmac_key_files", "require_mac"})
#: Sections a reload may change.
SECTIONS_RELOADABLE = frozenset({"security", "tables"})


class KeyHolder(Protocol):
    """The keys in force: the supervisors' verifier and each table's scanner authenticator."""

    supervisors: SupervisorVerifier

    def scanner_auth(self, table_id: str) -> FrameAuthenticator | None: ...


class RulesJournal(Protocol):
    """What journals a table's rules when they changed (the commit loop)."""

    def journal_rules(self, tid: str, table: Table, now: int) -> None: ...


class Reloadable(Protocol):
    """What a reload changes in a running service: its settings and table configurations, the
    keys in force, and (through the input queue) the journal of the tables it runs."""

    settings: Settings

    @property
    def configs(self) -> dict[str, TableConfig]: ...
    @property
    def tables(self) -> Mapping[str, Table]: ...
    @property
    def leaving(self) -> set[str]: ...
    @property
    def metrics(self) -> Metrics: ...
    @property
    def inputs(self) -> KeyHolder: ...
    @property
    def queue(self) -> InputQueue: ...
    @property
    def commit_loop(self) -> RulesJournal: ...
    @property
    def now_ms(self) -> Callable[[], int]: ...


@dataclass
class Reload:
    """What a reload would do: ``refused`` (nothing applies) or the changes."""

    refused: list[str] = field(default_factory=list)
    tables: dict[str, TableConfig] = field(default_factory=dict)  # changed table settings
    scanner_keys: dict[str, list[bytes]] = field(default_factory=dict)  # table -> its new keys
    verifier: SupervisorVerifier | None = None  # the new supervisor verifier, when [security] changed
    rtp: list[Any] = field(default_factory=list)  # RTP reports of the pay tables that change

    @property
    def changes(self) -> bool:
        return bool(self.tables or self.scanner_keys or self.verifier is not None)


def _dump(obj: Any) -> Any:
    return obj.model_dump(mode="json")


def _pay_table(t: TableConfig) -> Any:
    """What a table's RTP report depends on: its game, options, declared bounds and policy."""
    return t.model_dump(mode="json", include={"game", "options", "rtp_bounds", "rtp_policy"})


def restart_only(old: Settings, new: Settings) -> list[str]:
    """Every difference between ``old`` and ``new`` that a reload cannot apply."""
    out: list[str] = []
    a, b = _dump(old), _dump(new)
    for section in sorted(set(a) | set(b)):
        if section not in SECTIONS_RELOADABLE and a.get(section) != b.get(section):
            changed = sorted(k for k in set(a.get(section) or {}) | set(b.get(section) or {})
                             if (a.get(section) or {}).get(k) != (b.get(section) or {}).get(k))
            out.append(f"[{section}] {', '.join(changed) or 'changed'}")
    ids_old, ids_new = [t.id for t in old.tables], [t.id for t in new.tables]
    if ids_old != ids_new:
        added, removed = sorted(set(ids_new) - set(ids_old)), sorted(set(ids_old) - set(ids_new))
        out.append("the tables " + "; ".join(
            part for part in (f"added: {', '.join(added)}" if added else "",
                              f"removed: {', '.join(removed)}" if removed else "",
                              "reordered" if not (added or removed) else "") if part))
        return out
    for t_old, t_new in zip(old.tables, new.tables):
        x, y = _dump(t_old), _dump(t_new)
        fields = sorted(k for k in set(x) | set(y) if k not in TABLE_RELOADABLE | {"scanner"} and x.get(k) != y.get(k))
        fields += sorted(f"scanner.{k}" for k in set(x["scanner"]) | set(y["scanner"])
                         if k not in SCANNER_RELOADABLE and x["scanner"].get(k) != y["scanner"].get(k))
        if bool(t_old.scanner.hmac_key_files) != bool(t_new.scanner.hmac_key_files):
            fields.append("scanner.hmac_key_files (signing turned " + ("on" if t_new.scanner.hmac_key_files else "off")
                          + ")")
        if fields:
            out.append(f"table {t_old.id}: {', '.join(fields)}")
    return out


def plan(old: Settings, new: Settings, config_path: str | Path | None,
         scanner_fingerprints: dict[str, list[str]], verifier: SupervisorVerifier) -> Reload:
    """What reloading ``new`` over ``old`` would do. ``scanner_fingerprints``: each table's
    scanner key fingerprints in force now; ``verifier``: the supervisors' keys in force now.
    Reads the key files (nothing else): a key file rewritten in place is a change too."""
    from dealer.edge.keys import read_hex_keys, supervisor_verifier
    from dealer.edge.preflight import config_refusals
    from dealer.edge.rtp_policy import table_report
    from drivers.frames import key_fingerprint

    r = Reload()
    fixed = restart_only(old, new)
    if fixed:
        r.refused = [f"needs a restart: {d}" for d in fixed]
        return r
    # the exact RTP (seconds of CPU for Teen Patti or Sevenluck, on the event loop) only of the pay
    # tables that change: every table froze while all were computed again, and players' turns
    # timed out (the fault soak, auto_rounds = false)
    cache: dict[str, Any] = {}
    r.rtp = [table_report(t_new, cache) for t_old, t_new in zip(old.tables, new.tables)
             if _pay_table(t_old) != _pay_table(t_new)]
    r.refused = config_refusals(new, config_path, r.rtp)
    if r.refused:
        return r
    for t_old, t_new in zip(old.tables, new.tables):
        if any(getattr(t_old, f) != getattr(t_new, f) for f in TABLE_RELOADABLE) or \
                t_old.scanner.require_mac != t_new.scanner.require_mac:
            r.tables[t_new.id] = t_new
        if t_new.scanner.hmac_key_files:
            keys = read_hex_keys(t_new.scanner.hmac_key_files, f"scanner {t_new.scanner.reader_id}: HMAC key file")
            if [key_fingerprint(k) for k in keys] != scanner_fingerprints.get(t_new.id):
                r.scanner_keys[t_new.id] = keys
                r.tables.setdefault(t_new.id, t_new)
    fresh = supervisor_verifier(new.security)
    if _dump(old.security) != _dump(new.security) or any(
            fresh.fingerprints(sup) != verifier.fingerprints(sup) for sup in fresh.supervisors):
        r.verifier = fresh
    return r


def keys_changed(old: SupervisorVerifier, new: SupervisorVerifier, table_id: str) -> dict[str, list[str]]:
    """The supervisors whose keys for ``table_id`` differ between two verifiers: their
    fingerprints under ``new`` (``[]``: no longer a supervisor of the table)."""
    out: dict[str, list[str]] = {}
    for sup in sorted(set(old.supervisors) | set(new.supervisors)):
        before = old.fingerprints(sup) if old.may_command(sup, table_id) else []
        after = new.fingerprints(sup) if new.may_command(sup, table_id) else []
        if before != after:
            out[sup] = after
    return out


def apply(svc: Reloadable, new: Settings, r: Reload, now: int) -> list[str]:
    """Apply a planned reload to the running service (on its event loop, no await: the tables
    see the old or the new settings, never a mix). Returns the ids of the tables it changed."""
    from dealer.edge.rtp_policy import log_and_export

    inputs = svc.inputs
    old_verifier = inputs.supervisors
    touched: set[str] = set()
    for tid, keys in r.scanner_keys.items():
        auth = inputs.scanner_auth(tid)
        if auth is not None:
            auth.rekey(keys)
    if r.verifier is not None:
        inputs.supervisors = r.verifier
    for tc in new.tables:
        tid = tc.id
        sups = keys_changed(old_verifier, r.verifier, tid) if r.verifier is not None else {}
        scanner = inputs.scanner_auth(tid)
        if tid in r.scanner_keys or sups:
            touched.add(tid)
            if tid in svc.tables and tid not in svc.leaving:  # another node's tables: that node journals them
                svc.queue.put(_item(tid, KeysChanged(
                    scanner=list(scanner.fingerprints) if tid in r.scanner_keys and scanner is not None else None,
                    supervisors=sups or None, at=now)))
        if tid in r.tables:
            touched.add(tid)
            svc.configs[tid] = r.tables[tid]
            if tid in svc.tables and tid not in svc.leaving:
                svc.commit_loop.journal_rules(tid, svc.tables[tid], now)  # in force from the next round
    svc.settings = new
    if r.rtp:  # computed by plan(), for the pay tables that changed only
        log_and_export(r.rtp, log, svc.metrics)
    return sorted(touched)


def _item(tid: str, event: Any) -> Any:
    from dealer.edge.input_queue import Item

    return Item(tid, event)


def reload_service(svc: Reloadable, load: Any, config_path: str | Path | None) -> bool:
    """Load the configuration again (``load()``), plan and apply it; one log line either way.
    True when it was applied (or nothing changed)."""
    from dealer.edge.config import ConfigError

    try:
        new = load()
    except ConfigError as exc:
        log.error("reload refused: nothing changed", reason=" ".join(str(exc).split()))
        return False
    fingerprints = {tid: list(a.fingerprints) for tid in svc.configs if (a := svc.inputs.scanner_auth(tid))}
    try:
        r = plan(svc.settings, new, config_path, fingerprints, svc.inputs.supervisors)
    except ValueError as exc:  # a key file that holds no key
        r = Reload(refused=[" ".join(str(exc).split())])
    if r.refused:
        log.error("reload refused: nothing changed", reasons=r.refused)
        svc.metrics.reloads.labels(outcome="refused").inc()
        return False
    tables = apply(svc, new, r, svc.now_ms()) if r.changes else []
    log.info("configuration reloaded", tables=tables, supervisor_keys=r.verifier is not None,
             scanner_keys=sorted(r.scanner_keys), rules=sorted(r.tables))
    svc.metrics.reloads.labels(outcome="applied").inc()
    return True


__all__ = ["Reload", "apply", "keys_changed", "plan", "reload_service", "restart_only"]
