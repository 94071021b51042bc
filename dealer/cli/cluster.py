"""``dealer cluster``: the nodes and table leases of a multi-node studio, and moving a table by hand.

``status`` shows every node (live or not, by its heartbeat on the database's clock) and every
table lease (holder, epoch, time left, pin). ``move TABLE --to NODE`` pins a table to a node:
placement puts it there while that node is live (above the configured ``preferred_nodes``), and
the current owner hands it over between rounds (docs/cluster.md). ``unpin TABLE`` gives the table
back to placement. Each act is recorded, append-only, in ``cluster_log`` with the operator's
database role and OS user. The journal URL comes from ``--journal`` or the config's
``service.journal_url``; the database role needs the rights of ``dealer_operator``
(deploy/postgresql/roles.sql).
"""

from __future__ import annotations

import argparse
import getpass
import json
import re
import sys
from typing import Any

from dealer.cli.args import CONFIG_HELP, fail

_ID = re.compile(r"^[A-Za-z0-9_.:\-]{1,64}$")


def _connect(url: str) -> Any:
    import psycopg

    from dealer.edge.journal_pg import redact

    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=5)
    except psycopg.Error as exc:
        raise ValueError(f"cannot reach the journal database {redact(url)}: "
                         f"{' '.join(str(exc).split()) or type(exc).__name__}") from None


def _url(args: argparse.Namespace) -> str:
    if args.journal:
        return str(args.journal)
    if args.config:
        from dealer.edge.config import ConfigError, load_settings

        try:
            settings = load_settings(args.config)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        if settings.service.journal_url:
            return settings.service.journal_url
        raise ValueError(f"{args.config} has no service.journal_url: leases exist only with a PostgreSQL journal")
    raise ValueError("give --journal postgresql://... or --config FILE")


def status(url: str) -> dict[str, Any]:
    """Nodes and leases as the database sees them now (its clock decides liveness and expiry)."""
    with _connect(url) as conn:
        try:
            nodes = conn.execute(
                "SELECT node, session, leaving, EXTRACT(EPOCH FROM clock_timestamp() - heartbeat_at)::float8, "
                "started_at FROM nodes ORDER BY node").fetchall()
            leases = conn.execute(
                "SELECT l.table_id, l.node, l.epoch, EXTRACT(EPOCH FROM l.expires_at - clock_timestamp())::float8, "
                "p.node, p.reason FROM leases l LEFT JOIN pins p USING (table_id) ORDER BY l.table_id").fetchall()
            pins = conn.execute("SELECT table_id, node, pinned_by, reason FROM pins ORDER BY table_id").fetchall()
        except Exception as exc:  # psycopg.Error: not a dealer journal, or no rights
            raise ValueError(f"cannot read the cluster tables: {' '.join(str(exc).split())}") from None
    lease_rows = [{"table": t, "node": n, "epoch": int(e), "expires_in_s": round(float(x), 3),
                   "held": n is not None and x > 0, "pinned_to": pn, "pin_reason": pr}
                  for t, n, e, x, pn, pr in leases]
    horizon = max([abs(r["expires_in_s"]) for r in lease_rows if r["held"]] or [0.0])
    return {
        "nodes": [{"node": n, "session": s, "leaving": bool(lv), "heard_s_ago": round(float(a), 3),
                   "started_at": st.isoformat(),
                   "holds": sum(1 for r in lease_rows if r["node"] == n and r["held"])}
                  for n, s, lv, a, st in nodes],
        "leases": lease_rows,
        "pins": [{"table": t, "node": n, "by": b, "reason": r} for t, n, b, r in pins],
        "unowned": [r["table"] for r in lease_rows if not r["held"]],
        "lease_horizon_s": horizon,
    }


def move(url: str, table: str, node: str, reason: str, *, force: bool = False) -> str:
    """Pin ``table`` to ``node`` (recorded with who asked and why); returns what will happen."""
    who = f"{getpass.getuser()}"
    with _connect(url) as conn:
        with conn.transaction():
            known = conn.execute("SELECT 1 FROM nodes WHERE node = %s", (node,)).fetchone()
            if known is None and not force:
                raise ValueError(f"node {node} has never joined this cluster (no row in nodes): check the name, "
                                 "or --force to pin it ahead of its first start")
            table_known = conn.execute("SELECT node FROM leases WHERE table_id = %s", (table,)).fetchone()
            if table_known is None and not force:
                raise ValueError(f"table {table} has no lease in this journal (no node ever ran it): check the id, "
                                 "or --force")
            conn.execute(
                "INSERT INTO pins (table_id, node, pinned_at, pinned_by, reason) VALUES (%s, %s, clock_timestamp(), "
                "current_user || ' (' || %s || ')', %s) ON CONFLICT (table_id) DO UPDATE SET node = excluded.node, "
                "pinned_at = excluded.pinned_at, pinned_by = excluded.pinned_by, reason = excluded.reason",
                (table, node, who, reason))
            conn.execute("INSERT INTO cluster_log (at, by, action, table_id, node, reason) VALUES "
                         "(clock_timestamp(), current_user || ' (' || %s || ')', 'move', %s, %s, %s)",
                         (who, table, node, reason))
            conn.execute("NOTIFY dealer_leases")
    holder = table_known[0] if table_known else None
    if holder == node:
        return f"table {table} is pinned to {node}, which already owns it"
    return (f"table {table} is pinned to {node}; its owner ({holder or 'nobody'}) hands it over when its round "
            f"ends (dealer cluster status shows the move)")


def unpin(url: str, table: str, reason: str) -> str:
    who = getpass.getuser()
    with _connect(url) as conn:
        with conn.transaction():
            gone = conn.execute("DELETE FROM pins WHERE table_id = %s RETURNING node", (table,)).fetchone()
            if gone is None:
                raise ValueError(f"table {table} is not pinned")
            conn.execute("INSERT INTO cluster_log (at, by, action, table_id, node, reason) VALUES "
                         "(clock_timestamp(), current_user || ' (' || %s || ')', 'unpin', %s, %s, %s)",
                         (who, table, gone[0], reason))
            conn.execute("NOTIFY dealer_leases")
    return f"table {table} is no longer pinned (was {gone[0]}): placement decides again"


def _text(st: dict[str, Any]) -> str:
    lines = ["NODE            LIVE  HOLDS  HEARD(s)  SESSION"]
    for n in st["nodes"]:
        live = "leaving" if n["leaving"] else ("yes" if n["heard_s_ago"] < max(st["lease_horizon_s"], 1) * 3 else "no")
        lines.append(f"{n['node']:<15} {live:<5} {n['holds']:>5}  {n['heard_s_ago']:>8.1f}  {n['session']}")
    lines.append("")
    lines.append("TABLE       OWNER           EPOCH  EXPIRES_IN(s)  PIN")
    for r in st["leases"]:
        owner = r["node"] if r["held"] else f"({r['node'] or 'released'})"
        lines.append(f"{r['table']:<11} {owner:<15} {r['epoch']:>5}  {r['expires_in_s']:>13.1f}  {r['pinned_to'] or ''}")
    if st["unowned"]:
        lines.append(f"\nnot owned now: {', '.join(st['unowned'])}")
    return "\n".join(lines)


def _cmd(args: argparse.Namespace) -> int:
    prog = f"dealer cluster {args.cluster}"
    try:
        url = _url(args)
        if args.cluster == "status":
            st = status(url)
            print(json.dumps(st, sort_keys=True) if args.json else _text(st))
            return 0
        if not _ID.match(args.table):
            return fail(prog, f"table id {args.table!r} is not valid")
        if args.cluster == "move":
            if not _ID.match(args.to):
                return fail(prog, f"node id {args.to!r} is not valid")
            print(move(url, args.table, args.to, args.reason, force=args.force))
        else:
            print(unpin(url, args.table, args.reason))
        return 0
    except ValueError as exc:
        return fail(prog, str(exc))
    except Exception as exc:  # psycopg.Error: no rights (not dealer_operator), the server went away
        import psycopg

        if not isinstance(exc, psycopg.Error):
            raise
        return fail(prog, f"the database refused: {' '.join(str(exc).split())}")


def register(sub: Any) -> None:
    c = sub.add_parser("cluster", help="nodes and table leases of a multi-node studio; move a table by hand")
    csub = c.add_subparsers(dest="cluster", required=True, metavar="ACTION")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--journal", metavar="URL", help="postgresql://... (default: the config's service.journal_url)")
        p.add_argument("--config", metavar="FILE", help=CONFIG_HELP)

    s = csub.add_parser("status", help="every node and table lease, as the database sees them now")
    common(s)
    s.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    m = csub.add_parser("move", help="pin a table to a node: its owner hands it over when its round ends")
    common(m)
    m.add_argument("table", help="table id")
    m.add_argument("--to", required=True, metavar="NODE", help="the node that should run it")
    m.add_argument("--reason", required=True, help="why (kept in cluster_log for the audit)")
    m.add_argument("--force", action="store_true", help="pin to a node that has not joined yet, or an unknown table")
    u = csub.add_parser("unpin", help="give a pinned table back to placement")
    common(u)
    u.add_argument("table", help="table id")
    u.add_argument("--reason", required=True, help="why (kept in cluster_log)")
    for p in (s, m, u):
        p.set_defaults(func=_cmd)


__all__ = ["move", "register", "status", "unpin"]

if __name__ == "__main__":  # pragma: no cover
    sys.exit(0)
