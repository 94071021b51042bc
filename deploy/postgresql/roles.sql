-- Least privilege for the PostgreSQL journal (dealer/edge/journal_pg.py, dealer/edge/pg_schema.sql).
--
-- `dealer cluster init` applies exactly this text (dealer/cli/cluster.py: ROLES_SQL; a test keeps the
-- two equal) together with everything around it: the owner role, the database, the schema and one
-- login role per node, auditor and operator (deploy/cluster/README.md). Use this file only to
-- apply the grants by hand, as a superuser, on a database whose schema exists:
--        psql -v ON_ERROR_STOP=1 -h db.studio.lan -U postgres -d dealer -f deploy/postgresql/roles.sql
-- (creating the three group roles needs CREATEROLE; the grants need the tables' owner or a superuser).
--
-- The roles, all NOLOGIN groups; people and nodes log in as their members:
--   dealer_node      each node's login role (`dealer cluster init --node node-a`: dealer_node_a)
--   dealer_auditor   auditors' logins: read everything, write nothing (`dealer audit verify`)
--   dealer_operator  operators' logins: `dealer cluster status|move|unpin`
-- pg_hba matches them as +dealer_node, +dealer_auditor, +dealer_operator (deploy/cluster/pg_hba.dealer.conf).
--
-- Only these groups may connect to the database (PUBLIC may not), and nobody but the owner may
-- create anything in it. A node can append journal rows and command ids but never change or
-- remove one (no UPDATE, DELETE or TRUNCATE on events, commands or meta: the append-only triggers
-- refuse them too, for the owner as well). It deletes outbox rows (settlement acknowledged them),
-- upserts its readers' replay state, and writes the leases and node heartbeats. The fencing trigger
-- reads the lease row FOR SHARE, which PostgreSQL allows only with UPDATE on leases. An auditor
-- reads only. Idempotent: apply it again after adding a table to the schema.

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'dealer_node') THEN
        CREATE ROLE dealer_node NOLOGIN;      -- the nodes' logins are its members
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'dealer_auditor') THEN
        CREATE ROLE dealer_auditor NOLOGIN;   -- reads everything, writes nothing
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'dealer_operator') THEN
        CREATE ROLE dealer_operator NOLOGIN;  -- `dealer cluster status|move|unpin`: pins and their log only
    END IF;
END $$;

DO $$
BEGIN
    EXECUTE format('REVOKE ALL ON DATABASE %I FROM PUBLIC', current_database());
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO dealer_node, dealer_auditor, dealer_operator',
                   current_database());
END $$;
REVOKE CREATE ON SCHEMA public FROM PUBLIC;

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
