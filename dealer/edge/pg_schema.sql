-- The PostgreSQL journal (dealer/edge/journal_pg.py): the same guarantees as the SQLite one
-- (journal before effects, group commit, append-only hash-chained rows, the outbox until
-- settlement acknowledges, command ids kept forever) plus table leases with fencing, so that
-- several backend nodes can share one journal and never deal one table from two places.
-- Applied in one transaction by PgJournal when meta.schema_version is absent; a database with
-- another schema_version is refused (a person must migrate it).

CREATE TABLE IF NOT EXISTS meta (          -- append-only: schema_version, journal_id
    key text PRIMARY KEY,
    value text NOT NULL
);

CREATE TABLE IF NOT EXISTS nodes (         -- the backend nodes, live while heartbeat_at is recent
    node text PRIMARY KEY,
    session text NOT NULL,                 -- the running process (changes at every start)
    started_at timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL,     -- the database clock, never the node's
    leaving boolean NOT NULL DEFAULT false, -- SIGTERM: hands its tables over, takes no new one
    tables jsonb NOT NULL DEFAULT '{}'     -- the tables its configuration serves -> preferred nodes:
                                           -- every node places tables from the same rows (placement.py)
);

CREATE TABLE IF NOT EXISTS leases (        -- one row per table; its owner while expires_at is ahead
    table_id text PRIMARY KEY,
    node text,                             -- NULL: released (handed over)
    epoch bigint NOT NULL,                 -- +1 at every acquisition, never back: the fencing token
                                           -- (0, node NULL: a table no node has held yet)
    expires_at timestamptz NOT NULL,       -- the database clock decides
    acquired_at timestamptz NOT NULL
);

CREATE TABLE IF NOT EXISTS events (
    id bigserial PRIMARY KEY,              -- global order (gaps possible: a rolled-back batch)
    table_id text NOT NULL,
    seq bigint NOT NULL,                   -- per table, consecutive from 1: the table's chain
    round_id text,
    type text NOT NULL,
    body text NOT NULL,
    recorded_at bigint NOT NULL,           -- epoch ms at commit (the writing node's clock)
    node text NOT NULL,                    -- who wrote it
    epoch bigint NOT NULL,                 -- under which lease
    prev_hash text NOT NULL,               -- hash of the table's previous row (seq - 1), or GENESIS
    hash text NOT NULL,
    UNIQUE (table_id, seq)
);
CREATE INDEX IF NOT EXISTS events_by_round ON events (table_id, type, round_id);
CREATE INDEX IF NOT EXISTS events_by_table ON events (table_id, id);  -- replay, recall: a table's rows in order

CREATE TABLE IF NOT EXISTS commands (      -- accepted command ids, kept forever
    table_id text NOT NULL,
    command_id text NOT NULL,
    round_id text,
    type text NOT NULL,
    role text NOT NULL,
    digest text NOT NULL,
    answer text NOT NULL,
    event_id bigint NOT NULL,
    PRIMARY KEY (table_id, role, command_id)
);

CREATE TABLE IF NOT EXISTS outbox (        -- results until settlement acknowledges their key
    id bigserial PRIMARY KEY,              -- never reused
    key text NOT NULL UNIQUE,
    topic text NOT NULL,
    payload bytea NOT NULL,
    table_id text NOT NULL,
    round_id text NOT NULL,
    created_at bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS outbox_by_table ON outbox (table_id, id);

CREATE TABLE IF NOT EXISTS reader_state (  -- mutable: latest accepted boot/seq per signed reader
    reader text PRIMARY KEY,
    boot bigint NOT NULL,
    seq bigint NOT NULL,
    key text NOT NULL,
    mac text,
    updated_at bigint NOT NULL
);

-- Append-only: no UPDATE or DELETE of journal rows, command ids or meta, whoever asks.
CREATE OR REPLACE FUNCTION dealer_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'DL002', MESSAGE = format('%s is append-only', TG_TABLE_NAME);
END $$;
DROP TRIGGER IF EXISTS events_append_only ON events;
CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION dealer_append_only();
DROP TRIGGER IF EXISTS events_no_truncate ON events;
CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION dealer_append_only();
DROP TRIGGER IF EXISTS commands_append_only ON commands;
CREATE TRIGGER commands_append_only BEFORE UPDATE OR DELETE ON commands
    FOR EACH ROW EXECUTE FUNCTION dealer_append_only();
DROP TRIGGER IF EXISTS commands_no_truncate ON commands;
CREATE TRIGGER commands_no_truncate BEFORE TRUNCATE ON commands
    FOR EACH STATEMENT EXECUTE FUNCTION dealer_append_only();
DROP TRIGGER IF EXISTS meta_append_only ON meta;
CREATE TRIGGER meta_append_only BEFORE UPDATE OR DELETE ON meta
    FOR EACH ROW EXECUTE FUNCTION dealer_append_only();
DROP TRIGGER IF EXISTS meta_no_truncate ON meta;
CREATE TRIGGER meta_no_truncate BEFORE TRUNCATE ON meta
    FOR EACH STATEMENT EXECUTE FUNCTION dealer_append_only();

-- Fencing: a row is journaled only under the table's current, unexpired lease held by the
-- writing node with the same epoch. FOR SHARE holds the lease row until this transaction
-- ends, so a takeover (UPDATE leases ... epoch + 1) waits for a commit in flight, and once the
-- takeover has committed no write of the older epoch can commit.
CREATE OR REPLACE FUNCTION dealer_fence() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    l record;
BEGIN
    SELECT node, epoch, expires_at INTO l FROM leases WHERE table_id = NEW.table_id FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'DL001',
            MESSAGE = format('fenced: table %s has no lease; node %s (epoch %s) may not write it',
                             NEW.table_id, NEW.node, NEW.epoch);
    END IF;
    IF l.node IS DISTINCT FROM NEW.node OR l.epoch <> NEW.epoch OR l.expires_at <= clock_timestamp() THEN
        RAISE EXCEPTION USING ERRCODE = 'DL001',
            MESSAGE = format('fenced: table %s is leased to %s at epoch %s (expires %s); node %s wrote epoch %s',
                             NEW.table_id, COALESCE(l.node, 'nobody'), l.epoch, l.expires_at, NEW.node, NEW.epoch);
    END IF;
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS events_fence ON events;
CREATE TRIGGER events_fence BEFORE INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION dealer_fence();

-- Operators' placement pins (`dealer cluster move TABLE --to NODE`): a pinned table is placed on
-- its node while that node is live, above the configured preferred_nodes; the owner hands it
-- over between rounds. `cluster_log` keeps every operator act, append-only, for the audit.
CREATE TABLE IF NOT EXISTS pins (
    table_id text PRIMARY KEY,
    node text NOT NULL,
    pinned_at timestamptz NOT NULL,
    pinned_by text NOT NULL,
    reason text NOT NULL
);
CREATE TABLE IF NOT EXISTS cluster_log (
    id bigserial PRIMARY KEY,
    at timestamptz NOT NULL,
    by text NOT NULL,                      -- the operator (database role and OS user)
    action text NOT NULL,                  -- move | unpin
    table_id text NOT NULL,
    node text,
    reason text NOT NULL
);
DROP TRIGGER IF EXISTS cluster_log_append_only ON cluster_log;
CREATE TRIGGER cluster_log_append_only BEFORE UPDATE OR DELETE ON cluster_log
    FOR EACH ROW EXECUTE FUNCTION dealer_append_only();
