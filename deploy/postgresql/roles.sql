-- Least privilege for the PostgreSQL journal (dealer/edge/journal_pg.py, dealer/edge/pg_schema.sql).
--
-- 1. Create the database and the journal schema as the database's owner (not as a node):
--        createdb -O dealer_owner dealer
--        python -m dealer.edge.journals init postgresql://dealer_owner@db-host/dealer
-- 2. Apply this file as that owner:   psql -v ON_ERROR_STOP=1 -d dealer -f roles.sql
-- 3. One login role per backend node, member of dealer_node; auditors' login roles are members
--    of dealer_auditor. Passwords go into each host's libpq password file (PGPASSFILE), never
--    into service.journal_url:
--        CREATE ROLE studio_node_1 LOGIN IN ROLE dealer_node;
--        CREATE ROLE regulator LOGIN IN ROLE dealer_auditor;
--
-- A node can append journal rows and command ids but never change or remove one (no UPDATE,
-- DELETE or TRUNCATE on events, commands or meta: the append-only triggers refuse them too, for
-- the owner as well). It deletes outbox rows (settlement acknowledged them), upserts its readers'
-- replay state, and writes the leases and node heartbeats. The fencing trigger reads the lease
-- row FOR SHARE, which PostgreSQL allows only with UPDATE on leases. An auditor reads only.
-- Idempotent: apply it again after adding a table to the schema.

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'dealer_node') THEN
        CREATE ROLE dealer_node NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'dealer_auditor') THEN
        CREATE ROLE dealer_auditor NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'dealer_operator') THEN
        CREATE ROLE dealer_operator NOLOGIN;  -- `dealer cluster move|unpin`: pins and their log only
    END IF;
END $$;

REVOKE ALL ON meta, nodes, leases, events, commands, outbox, reader_state, pins, cluster_log
    FROM PUBLIC, dealer_node, dealer_auditor, dealer_operator;
REVOKE ALL ON SEQUENCE cluster_log_id_seq FROM PUBLIC, dealer_node, dealer_auditor, dealer_operator;
REVOKE ALL ON SEQUENCE events_id_seq, outbox_id_seq FROM PUBLIC, dealer_node, dealer_auditor;

GRANT USAGE ON SCHEMA public TO dealer_node, dealer_auditor, dealer_operator;

GRANT SELECT ON meta TO dealer_node;
GRANT SELECT, INSERT ON events, commands TO dealer_node;
GRANT SELECT, INSERT, DELETE ON outbox TO dealer_node;
GRANT SELECT, INSERT, UPDATE ON reader_state, leases, nodes TO dealer_node;
GRANT USAGE ON SEQUENCE events_id_seq, outbox_id_seq TO dealer_node;

GRANT SELECT ON meta, nodes, leases, events, commands, outbox, reader_state TO dealer_auditor;

-- Nodes read the operators' pins (placement); operators write pins and append to their log,
-- and read nodes and leases for `dealer cluster status`; auditors read the log.
GRANT SELECT ON pins TO dealer_node;
GRANT SELECT, INSERT, UPDATE, DELETE ON pins TO dealer_operator;
GRANT SELECT, INSERT ON cluster_log TO dealer_operator;
GRANT USAGE ON SEQUENCE cluster_log_id_seq TO dealer_operator;
GRANT SELECT ON nodes, leases TO dealer_operator;
GRANT SELECT ON pins, cluster_log TO dealer_auditor;
