"""The lease manager's SQL statements (dealer/edge/leases.py; the schema: dealer/edge/pg_schema.sql)."""

from __future__ import annotations

_REGISTER = """
INSERT INTO nodes AS n (node, session, started_at, heartbeat_at, leaving, tables)
VALUES (%(node)s, %(session)s, clock_timestamp(), clock_timestamp(), false, %(tables)s)
ON CONFLICT (node) DO UPDATE SET session = EXCLUDED.session, started_at = EXCLUDED.started_at,
    heartbeat_at = EXCLUDED.heartbeat_at, leaving = false, tables = EXCLUDED.tables
WHERE n.session = EXCLUDED.session OR n.leaving
   OR n.heartbeat_at <= clock_timestamp() - make_interval(secs => %(lease)s)
RETURNING node
"""

_NODE = """
SELECT session, heartbeat_at, extract(epoch FROM clock_timestamp() - heartbeat_at)::float8
FROM nodes WHERE node = %(node)s
"""

_ENSURE_ROWS = """
INSERT INTO leases (table_id, node, epoch, expires_at, acquired_at)
SELECT t, NULL, 0, clock_timestamp(), clock_timestamp() FROM unnest(%(tables)s::text[]) AS t
ON CONFLICT (table_id) DO NOTHING
"""

#: PostgreSQL's limit on a NOTIFY payload is 8,000 bytes; ours stay under this.
NOTIFY_PAYLOAD_MAX = 7_000

# One statement: the heartbeat (only while the row is this process's), then every lease this
# node holds at the epoch it holds it, if not expired yet; the database's clock for the skew.
# Every statement that locks several lease rows locks them in table order (a locking SELECT
# sorted first): a journal commit locks its tables' rows FOR SHARE in table order too (the
# fence trigger, with the batch inserted sorted by table), so the two never deadlock. Unordered,
# a 1,000-table node's renewal deadlocked with its own commits within seconds.

_RENEW = """
WITH hb AS (
    UPDATE nodes SET heartbeat_at = clock_timestamp()
    WHERE node = %(node)s AND session = %(session)s
    RETURNING node
), lk AS (
    SELECT l.table_id FROM leases AS l
    JOIN unnest(%(tables)s::text[], %(epochs)s::bigint[]) AS h(table_id, epoch)
      ON l.table_id = h.table_id AND l.epoch = h.epoch
    WHERE l.node = %(node)s AND l.expires_at > clock_timestamp() AND EXISTS (SELECT 1 FROM hb)
    ORDER BY l.table_id FOR UPDATE OF l
), rn AS (
    UPDATE leases AS l SET expires_at = clock_timestamp() + make_interval(secs => %(lease)s)
    FROM lk
    WHERE l.table_id = lk.table_id AND l.node = %(node)s AND l.expires_at > clock_timestamp()
    RETURNING l.table_id
)
SELECT EXISTS (SELECT 1 FROM hb), ARRAY(SELECT table_id FROM rn), extract(epoch FROM clock_timestamp())::float8
"""

_READ_NODES = """
SELECT node, session, extract(epoch FROM clock_timestamp() - heartbeat_at)::float8, leaving, tables FROM nodes
"""

_READ_LEASES = """
SELECT table_id, node, epoch, extract(epoch FROM clock_timestamp() - expires_at)::float8 FROM leases
"""

# Operators' pins (`dealer cluster move`): placement puts a pinned table on its node while live.
_READ_PINS = """
SELECT table_id, node FROM pins
"""

# Take leases: free or expired (placed here), or expired for a whole lease (orphaned).
_ACQUIRE = """
WITH lk AS (
    SELECT table_id FROM leases WHERE table_id = ANY(%(tables)s) AND (node IS NULL OR expires_at <= clock_timestamp())
    ORDER BY table_id FOR UPDATE
)
UPDATE leases AS l SET node = %(node)s, epoch = l.epoch + 1, acquired_at = clock_timestamp(),
    expires_at = clock_timestamp() + make_interval(secs => %(lease)s)
FROM lk WHERE l.table_id = lk.table_id AND (l.node IS NULL OR l.expires_at <= clock_timestamp())
RETURNING l.table_id, l.epoch
"""

_ACQUIRE_ORPHANS = """
WITH lk AS (
    SELECT table_id FROM leases
    WHERE table_id = ANY(%(tables)s) AND expires_at <= clock_timestamp() - make_interval(secs => %(lease)s)
    ORDER BY table_id FOR UPDATE
)
UPDATE leases AS l SET node = %(node)s, epoch = l.epoch + 1, acquired_at = clock_timestamp(),
    expires_at = clock_timestamp() + make_interval(secs => %(lease)s)
FROM lk WHERE l.table_id = lk.table_id AND l.expires_at <= clock_timestamp() - make_interval(secs => %(lease)s)
RETURNING l.table_id, l.epoch
"""

_RELEASE = """
WITH lk AS (
    SELECT l.table_id FROM leases AS l
    JOIN unnest(%(tables)s::text[], %(epochs)s::bigint[]) AS h(table_id, epoch)
      ON l.table_id = h.table_id AND l.epoch = h.epoch
    WHERE l.node = %(node)s
    ORDER BY l.table_id FOR UPDATE OF l
), r AS (
    UPDATE leases AS l SET node = NULL, expires_at = clock_timestamp()
    FROM lk WHERE l.table_id = lk.table_id AND l.node = %(node)s
    RETURNING l.table_id
)
SELECT ARRAY(SELECT table_id FROM r), pg_notify(%(channel)s, %(payload)s)
"""

_LEAVE = """
WITH u AS (UPDATE nodes SET leaving = true WHERE node = %(node)s AND session = %(session)s RETURNING node)
SELECT (SELECT count(*) FROM u), pg_notify(%(channel)s, %(payload)s)
"""

# A node whose journal cannot be written stops serving (leaving: no node places tables on it) and
# serves again once it can write; the NOTIFY makes the others look now.
_SERVING = """
WITH u AS (UPDATE nodes SET leaving = NOT %(serving)s WHERE node = %(node)s AND session = %(session)s
           RETURNING node)
SELECT (SELECT count(*) FROM u), pg_notify(%(channel)s, %(payload)s)
"""

_CHECK = """
SELECT table_id, node, epoch, expires_at > clock_timestamp() FROM leases WHERE table_id = ANY(%(tables)s)
"""
