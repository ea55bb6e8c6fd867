-- Every SQL statement of flowsched's PostgreSQL adapter, each under a "-- name:" line
-- (procrastinate's queries.sql style): flowsched/postgres/queries.py loads this file and
-- fills the table names in. Placeholders:
--   {table} {dead} {quarantine} {history} {nodes} {schema} {generations} {audit}   identifiers
--   {claimable} {timer_filter} {trim} {log} {started} {kept_open} {keep_met}   the text of
--              the "-- name: fragment_x" blocks below (shared SQL)
--   {now}      the store's clock: the parameter %(now)s when a clock= was given (tests),
--              else the server's statement_timestamp() - due times and leases are compared
--              here, in SQL, never estimated on the client.
--   {relaxed}  a condition that is always true and sets synchronous_commit for the statement's
--              own transaction to the firing_commit parameter (NULL: the server's setting):
--              the firing path's writes (claim, start, renew, release, settle) may commit
--              without waiting for the WAL flush; see flowsched/postgres/operations.py.
-- Parameters are psycopg's %(name)s. Arrays of one batch travel as parallel arrays and are
-- unnest()ed, so a batch of any size is one statement and one round trip.

-- ---- schema and migrations (flowsched/postgres/schema.py) --------------------------------

-- name: schema_lock
-- Serialises migrations of one table across nodes starting together (released at commit).
SELECT pg_advisory_xact_lock(hashtext(%(key)s));

-- name: schema_version_table
CREATE TABLE IF NOT EXISTS {schema} (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    version     integer NOT NULL,
    migrated_at timestamptz NOT NULL DEFAULT statement_timestamp()
);

-- name: schema_version
SELECT version FROM {schema};

-- name: schema_set_version
INSERT INTO {schema} (singleton, version) VALUES (true, %(version)s)
ON CONFLICT (singleton) DO UPDATE
    SET version = EXCLUDED.version, migrated_at = statement_timestamp();

-- name: migration_1
-- The timers, their dead letters, quarantine, history and node heartbeats.
CREATE SEQUENCE {generations} AS bigint;
CREATE TABLE {table} (
    id           text PRIMARY KEY CHECK (id <> '' AND octet_length(id) <= 1024),
    generation   bigint NOT NULL CHECK (generation > 0),
    kind         text NOT NULL
                 CHECK (kind IN ('ACTION_TIMEOUT', 'ACTION_RETRY', 'PROCESSING_TIMEOUT', 'TIMER')),
    handler      text CHECK (handler <> '' AND char_length(handler) <= 200),
    route        text NOT NULL,
    flow_id      text CHECK (flow_id <> '' AND octet_length(flow_id) <= 1024),
    due          timestamptz NOT NULL,
    payload      jsonb CHECK (jsonb_typeof(payload) = 'object'),
    recurrence   jsonb CHECK (jsonb_typeof(recurrence) = 'object'),
    previous     timestamptz CHECK (previous IS NULL OR recurrence IS NOT NULL),
    attempts     integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_error   text,
    owner        text,
    lease_until  timestamptz,
    started_at   timestamptz,
    paused       boolean NOT NULL DEFAULT false,
    scheduled_at timestamptz NOT NULL,
    CHECK ((owner IS NULL) = (lease_until IS NULL)),
    CHECK (route = CASE WHEN handler IS NULL THEN 'k:' || kind ELSE 'h:' || handler END)
);
-- The claim: unclaimed, unpaused rows of one route, soonest due first.
CREATE INDEX {table_claim} ON {table} (route, due) WHERE owner IS NULL AND NOT paused;
-- Claims whose node stopped renewing (their lease ends first).
CREATE INDEX {table_held} ON {table} (route, lease_until) WHERE owner IS NOT NULL;
CREATE INDEX {table_flow} ON {table} (flow_id) WHERE flow_id IS NOT NULL;
-- timers(): soonest due first, ties by id (the cursor).
CREATE INDEX {table_due} ON {table} (due, id);
CREATE TABLE {dead} (
    id          text PRIMARY KEY,
    generation  bigint NOT NULL,
    kind        text NOT NULL,
    handler     text,
    flow_id     text,
    due         timestamptz NOT NULL,
    payload     jsonb,
    recurrence  jsonb,
    previous    timestamptz,
    attempts    integer NOT NULL,
    error       text NOT NULL,
    dead_at     timestamptz NOT NULL
);
CREATE INDEX {dead_at} ON {dead} (dead_at, id);
CREATE TABLE {quarantine} (
    id             text PRIMARY KEY,
    reason         text NOT NULL,
    record         jsonb NOT NULL,
    node           text,
    quarantined_at timestamptz NOT NULL
);
CREATE TABLE {history} (
    seq           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    item_id       text NOT NULL,
    generation    bigint NOT NULL,
    attempt       integer NOT NULL,
    node          text NOT NULL,
    started       timestamptz NOT NULL,
    ended         timestamptz,
    outcome       text CHECK (outcome IN ('succeeded', 'failed', 'timed_out', 'lapsed')),
    error_type    text,
    error_message text,
    traceback     text
);
CREATE INDEX {history_item} ON {history} (item_id, seq);
CREATE INDEX {history_ended} ON {history} (ended) WHERE ended IS NOT NULL;
CREATE TABLE {nodes} (
    node_id     text PRIMARY KEY,
    routes      text[] NOT NULL,
    renewed_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL
);

-- name: migration_2
-- A recurring item's runs (the slots it has applied, what max_runs counts), on live rows and
-- dead letters; rows written before version 2 read as 0. IF NOT EXISTS: idempotent.
ALTER TABLE {table} ADD COLUMN IF NOT EXISTS runs integer NOT NULL DEFAULT 0
    CHECK (runs >= 0 AND (runs = 0 OR recurrence IS NOT NULL));
ALTER TABLE {dead} ADD COLUMN IF NOT EXISTS runs integer NOT NULL DEFAULT 0;

-- name: migration_3
-- A claim's token (its identity with id, generation and owner; fresh at every claim, kept by
-- a renewal, cleared with the claim): the claim-side writes are fenced by it, not by the lease
-- end a renewal moves. A row claimed before version 3 has none: its claim is stale and lapses
-- (delivered again). IF NOT EXISTS: idempotent.
ALTER TABLE {table} ADD COLUMN IF NOT EXISTS claim_token text;

-- name: migration_4
-- History attempts are written once, when they end (settled, quarantined, lapsed at a
-- re-claim), or when a cancel or replace meets a started row (kept open): the attempt a node
-- is running is read from its live row (started_at, owner, attempts, generation). Nothing to
-- convert: an open attempt an older flowsched wrote at its start still reads (history()
-- shows it once, its closed twin first) and still closes (by that node's settle, or
-- "lapsed" by the next claim). The version keeps an older flowsched, which would not see the
-- running attempts, off the table. Idempotent.
COMMENT ON TABLE {history} IS
    'flowsched: the attempts of its timers, each written when it ends (schema version 4)';

-- name: migration_5
-- A kept attempt (a cancel or replace met its started delivery) keeps its claim's lease end:
-- with no outcome by then (its node died), history() reads it "lapsed" there, and retention
-- removes it the history retention after it, as an ended one (index {history_kept}, the open ones
-- only). Its run's own outcome, however late, still ends it (close_kept). Kept attempts
-- written before version 5 have none and stay open. IF NOT EXISTS: idempotent.
ALTER TABLE {history} ADD COLUMN IF NOT EXISTS lease_until timestamptz;
CREATE INDEX IF NOT EXISTS {history_kept} ON {history} (lease_until) WHERE ended IS NULL;
COMMENT ON TABLE {history} IS
    'flowsched: the attempts of its timers, each written when it ends (schema version 5)';

-- name: migration_6
-- A form's lost runs in a row (Claim.lapsed): the claims of it that had started and whose
-- lease ended unsettled (their node died), counted by the claim that takes the row after
-- one; reset by a settle that keeps the row and by a new form (put, requeue). A node does
-- not run a claim with two of them (flowsched/node/lost.py). Rows written before version 6
-- read as 0. IF NOT EXISTS: idempotent.
ALTER TABLE {table} ADD COLUMN IF NOT EXISTS lapses integer NOT NULL DEFAULT 0;

-- name: drop_tables
-- Every table of the adapter for one timers table (test kits: a fresh table per test).
DROP TABLE IF EXISTS {table}, {dead}, {quarantine}, {history}, {nodes}, {schema}, {audit};
DROP SEQUENCE IF EXISTS {generations};

-- ---- the port's writes --------------------------------------------------------------------

-- name: now
SELECT {now};

-- name: fragment_trim
-- Not a statement: the text of {trim} and {log}, two CTEs' bodies in every statement that
-- writes history attempts: its CTE "writes" holds them (at most one per item), as the
-- columns of {log}'s SELECT. {trim} (the CTE "trimmed") deletes each item's attempts beyond
-- the %(keep)s - 1 newest, so with the one written it keeps %(keep)s; {log} writes them, after
-- {trim} has run (it reads trimmed's count), so the trim's probe of index {history_item}
-- meets no entry of the rows being written (an item with no history: one descent, no heap).
DELETE FROM {history} h
USING (SELECT w.id,
              (SELECT h2.seq FROM {history} h2 WHERE h2.item_id = w.id
               ORDER BY h2.seq DESC OFFSET %(keep)s - 1 LIMIT 1) AS cutoff
       FROM writes w) AS x
WHERE h.item_id = x.id AND h.seq <= x.cutoff
RETURNING 1

-- name: fragment_log
-- Not a statement: the text of {log} (see fragment_trim).
INSERT INTO {history} (item_id, generation, attempt, node, started, ended, outcome,
                       error_type, error_message, traceback, lease_until)
SELECT id, generation, attempt, node, started, ended, outcome, error_type, error_message,
       traceback, lease
FROM writes
WHERE (SELECT count(*) FROM trimmed) >= 0

-- name: fragment_started
-- Not a statement: the text of {started}, the condition under which a row (of {table}, or a
-- CTE returning its columns) has a started delivery: its attempt is open, and a cancel or
-- replace keeps it in {history}, open (its late outcome, stale for the row, ends it there:
-- close_kept).
started_at IS NOT NULL AND owner IS NOT NULL

-- name: fragment_kept_open
-- Not a statement: the text of {kept_open}, the columns of the attempt a cancel, replace,
-- remove_flow or requeue keeps in {history}, open, for a row whose delivery had started (the
-- CTE "writes" of fragment_trim; FROM and WHERE {started} follow).
SELECT id, generation, attempts AS attempt, owner AS node, started_at AS started,
       NULL::timestamptz AS ended, NULL::text AS outcome, NULL::text AS error_type,
       NULL::text AS error_message, NULL::text AS traceback, lease_until AS lease

-- name: fragment_keep_met
-- Not a statement: the text of {keep_met}, the CTEs of put, requeue, remove and remove_flow
-- that keep the attempt of each row they met (their CTE "met": the row replaced, read and
-- locked by id, or the rows deleted) whose delivery had started: written open to
-- {history}, the item's oldest beyond %(keep)s trimmed.
writes AS (
    {kept_open}
    FROM met WHERE {started}
), trimmed AS ({trim}
), logged AS ({log}
)

-- name: put
-- A new form of an id: a fresh generation from the sequence (greater than any earlier one),
-- unclaimed, unpaused, no failures, no lost runs; its dead letter (if any) goes. Nothing at
-- all when the caller's deadline has passed by the store's clock (no row comes back). A row
-- due within %(notify_within)s wakes the listening nodes (pg_notify, sent at commit). A
-- replaced form whose delivery had started keeps its attempt in the history, open (met: the
-- row read and locked by its id alone before it is replaced, so that a claim which held it
-- and committed first is seen: a condition on started_at would be judged on the statement's
-- snapshot).
WITH gate AS (
    SELECT nextval('{generations}') AS generation
    WHERE %(deadline)s::timestamptz IS NULL OR {now} <= %(deadline)s::timestamptz
), met AS (
    SELECT id, generation, attempts, owner, started_at, lease_until FROM {table}
    WHERE id = %(id)s AND EXISTS (SELECT FROM gate)
    FOR UPDATE
), {keep_met}, undead AS (
    DELETE FROM {dead} WHERE id = %(id)s AND EXISTS (SELECT FROM gate)
), stored AS (
    INSERT INTO {table} AS t (id, generation, kind, handler, route, flow_id, due, payload,
                              recurrence, previous, runs, attempts, last_error, owner,
                              lease_until, started_at, paused, scheduled_at)
    SELECT %(id)s::text, gate.generation, %(kind)s::text, %(handler)s::text, %(route)s::text,
           %(flow_id)s::text, %(due)s::timestamptz, %(payload)s::jsonb, %(recurrence)s::jsonb,
           %(previous)s::timestamptz, %(runs)s::int, 0, NULL, NULL, NULL, NULL, false, {now}
    FROM gate
    WHERE (SELECT count(*) FROM met) >= 0  -- met is read (and locked) before the insert
    ON CONFLICT (id) DO UPDATE SET
        generation = EXCLUDED.generation, kind = EXCLUDED.kind, handler = EXCLUDED.handler,
        route = EXCLUDED.route, flow_id = EXCLUDED.flow_id, due = EXCLUDED.due,
        payload = EXCLUDED.payload, recurrence = EXCLUDED.recurrence,
        previous = EXCLUDED.previous, runs = EXCLUDED.runs, attempts = 0, last_error = NULL,
        owner = NULL, lease_until = NULL, claim_token = NULL, started_at = NULL, paused = false,
        lapses = 0, scheduled_at = EXCLUDED.scheduled_at
    RETURNING t.generation, t.due, t.route
)
SELECT generation,
       CASE WHEN due <= {now} + %(notify_within)s::interval
            THEN pg_notify(%(channel)s, route)::text END
FROM stored;

-- name: get
SELECT id, generation, kind, handler, flow_id, due, payload, recurrence, previous, runs
FROM {table} WHERE id = %(id)s;

-- name: exists
SELECT EXISTS (SELECT FROM {table} WHERE id = %(id)s);

-- name: remove
-- Fenced by the caller's deadline (by the store's clock) and, when given, the generation:
-- a cancel that arrives late never removes a form scheduled meanwhile. A removed row whose
-- delivery had started keeps its attempt in the history, open (same statement).
WITH met AS (
    DELETE FROM {table}
    WHERE id = %(id)s
      AND (%(generation)s::bigint IS NULL OR generation = %(generation)s::bigint)
      AND (%(deadline)s::timestamptz IS NULL OR {now} <= %(deadline)s::timestamptz)
    RETURNING id, generation, attempts, owner, started_at, lease_until
), {keep_met}
SELECT id FROM met;

-- name: remove_flow
-- remove of every row of a flow (started deliveries kept open in the history alike).
WITH met AS (
    DELETE FROM {table}
    WHERE flow_id = %(flow_id)s
      AND (%(deadline)s::timestamptz IS NULL OR {now} <= %(deadline)s::timestamptz)
    RETURNING id, generation, attempts, owner, started_at, lease_until
), {keep_met}
SELECT id FROM met;

-- ---- claims, starts, leases, settlements --------------------------------------------------

-- name: fragment_claimable
-- Not a statement: the text of {claimable} in claim_due and claim_started. The rows they
-- claim: %(limit)s at most, soonest due first, of the unclaimed due rows (fresh) and the held
-- ones whose lease has ended (lapsed), skipped if another node is claiming them (picked);
-- the attempts of the lapsed claims that had started written to the history, ended "lapsed"
-- at their lease end (logged; the item's oldest beyond %(keep)s trimmed).
fresh AS (
    SELECT x.id, x.due
    FROM unnest(%(routes)s::text[]) AS r(route)
    CROSS JOIN LATERAL (
        SELECT t.id, t.due FROM {table} t
        WHERE t.route = r.route AND t.owner IS NULL AND NOT t.paused AND t.due <= {now}
        ORDER BY t.due
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) AS x
), lapsed AS (
    SELECT x.id, x.due, x.generation, x.lease_until, x.owner, x.attempts, x.started_at
    FROM unnest(%(routes)s::text[]) AS r(route)
    CROSS JOIN LATERAL (
        SELECT t.id, t.due, t.generation, t.lease_until, t.owner, t.attempts, t.started_at
        FROM {table} t
        WHERE t.route = r.route AND t.owner IS NOT NULL AND t.lease_until <= {now}
          AND NOT t.paused AND t.due <= {now}
        ORDER BY t.lease_until
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) AS x
), picked AS (
    SELECT id, due FROM (SELECT id, due FROM fresh UNION ALL SELECT id, due FROM lapsed) AS u
    ORDER BY due, id
    LIMIT %(limit)s
), writes AS (
    SELECT id, generation, attempts AS attempt, owner AS node, started_at AS started,
           lease_until AS ended, 'lapsed' AS outcome, NULL::text AS error_type,
           NULL::text AS error_message, NULL::text AS traceback, NULL::timestamptz AS lease
    FROM lapsed WHERE {started} AND id IN (SELECT id FROM picked)
), trimmed AS ({trim}
), logged AS ({log}
)

-- name: claim_due
-- Up to %(limit)s rows, soonest due first: unclaimed due ones (index {table}_claim, one
-- ordered range per route) and held ones whose lease has ended (index {table}_held). Rows
-- another node is claiming are skipped, not waited for. Each claimed row gets this owner, a
-- lease and a fresh random token (a re-claim by the same owner too: the lapsed claim is
-- stale); an ended claim's started attempt is written to the history, ended "lapsed", and
-- counted in lapses (a lost run: SET reads the row as it was, {started} only if it was held).
WITH {claimable}
UPDATE {table} t
SET owner = %(owner)s, lease_until = {now} + %(lease)s::interval, started_at = NULL,
    claim_token = gen_random_uuid()::text,
    lapses = CASE WHEN {started} THEN t.lapses + 1 ELSE t.lapses END
WHERE t.id = ANY (ARRAY(SELECT id FROM picked)) AND {relaxed}
RETURNING t.id, t.generation, t.kind, t.handler, t.flow_id, t.due, t.payload, t.recurrence,
          t.previous, t.runs, t.attempts, t.lease_until, t.route, t.claim_token, t.lapses;

-- name: claim_started
-- claim_due and confirm_start in one statement, for a node that starts every claim it gets at
-- once (it has a free handler slot for each, and queues none): the rows claim_due would claim
-- are claimed and their starts stamped, in one transaction: each one's attempt is open
-- in the history from then on (read from the row: started_at, owner, attempts, generation;
-- nothing is written to {history} until it ends). So no claim of it ever waits unstarted: a
-- cancel or replace that committed first took the row away (the claim does not see it), one
-- that commits after finds a started delivery (its attempt kept open, started before the
-- cancel, by the store's clock). A lapsed claim's started run is counted in lapses, as by
-- claim_due.
WITH {claimable}
UPDATE {table} t
SET owner = %(owner)s, lease_until = {now} + %(lease)s::interval, started_at = {now},
    claim_token = gen_random_uuid()::text,
    lapses = CASE WHEN {started} THEN t.lapses + 1 ELSE t.lapses END
WHERE t.id = ANY (ARRAY(SELECT id FROM picked)) AND {relaxed}
RETURNING t.id, t.generation, t.kind, t.handler, t.flow_id, t.due, t.payload, t.recurrence,
          t.previous, t.runs, t.attempts, t.lease_until, t.route, t.claim_token, t.lapses;

-- name: quarantine_claimed
-- Rows a claim returned that are not valid items: moved aside with the reason, atomically;
-- one a claim_started started has its attempt written to the history, "failed" with the
-- reason.
WITH bad AS (
    SELECT * FROM unnest(%(ids)s::text[], %(reasons)s::text[]) AS b(id, reason)
), gone AS (
    DELETE FROM {table} t USING bad
    WHERE t.id = bad.id AND t.owner = %(owner)s
    RETURNING t.*, bad.reason
), writes AS (
    SELECT id, generation, attempts AS attempt, owner AS node, started_at AS started,
           {now} AS ended, 'failed' AS outcome, NULL::text AS error_type,
           reason AS error_message, NULL::text AS traceback, NULL::timestamptz AS lease
    FROM gone WHERE {started}
), trimmed AS ({trim}
), logged AS ({log}
)
INSERT INTO {quarantine} AS q (id, reason, record, node, quarantined_at)
SELECT gone.id, gone.reason, to_jsonb(gone) - 'reason', %(owner)s, {now} FROM gone
ON CONFLICT (id) DO UPDATE SET reason = EXCLUDED.reason, record = EXCLUDED.record,
    node = EXCLUDED.node, quarantined_at = EXCLUDED.quarantined_at;

-- name: confirm_start
-- The check right before handlers start: the claims whose identity (id, generation, owner,
-- token) still holds and whose *stored* lease has not ended by the store's clock (a renewal
-- whose reply was lost moved it past the claim's), unpaused. Each start is stamped: its
-- attempt is open in the history from then on (read from the row; written when it ends).
WITH c AS (
    SELECT * FROM unnest(%(ids)b::text[], %(generations)b::bigint[], %(owners)b::text[],
                         %(tokens)b::text[]) AS c(id, generation, owner, token)
)
UPDATE {table} t SET started_at = {now}
FROM c
WHERE t.id = ANY (%(ids)b::text[])
  AND t.id = c.id AND t.generation = c.generation AND t.owner = c.owner
  AND t.claim_token = c.token AND t.lease_until > {now} AND NOT t.paused
  AND {relaxed}
RETURNING t.id, c.token;

-- name: renew
-- The claims whose identity holds and whose stored lease has not ended get a new lease end
-- (the token is kept: a claim from before an earlier renewal still holds).
WITH c AS (
    SELECT * FROM unnest(%(ids)b::text[], %(generations)b::bigint[], %(owners)b::text[],
                         %(tokens)b::text[]) AS c(id, generation, owner, token)
)
UPDATE {table} t SET lease_until = {now} + %(lease)s::interval
FROM c
WHERE t.id = ANY (%(ids)b::text[]) AND t.id = c.id AND t.generation = c.generation
  AND t.owner = c.owner AND t.claim_token = c.token AND t.lease_until > {now} AND {relaxed}
RETURNING t.id, t.lease_until, t.claim_token;

-- name: release
-- Fenced by the claim's identity alone (its lease may have ended: nobody claimed it since).
WITH c AS (
    SELECT * FROM unnest(%(ids)b::text[], %(generations)b::bigint[], %(owners)b::text[],
                         %(tokens)b::text[]) AS c(id, generation, owner, token)
)
UPDATE {table} t SET owner = NULL, lease_until = NULL, claim_token = NULL, started_at = NULL
FROM c
WHERE t.id = ANY (%(ids)b::text[]) AND t.id = c.id AND t.generation = c.generation
  AND t.owner = c.owner AND t.claim_token = c.token AND {relaxed}
RETURNING t.id;

-- name: settle
-- One batch of outcomes, each under its claim's fence, its identity (id, generation, owner,
-- token) alone: a claim from before a renewal still settles, and after its lease ended too
-- when nobody claimed the row since. Each applied row comes back with its stored lease end
-- (what "late" is measured from):
--   complete   the row is deleted;
--   dead       the row is deleted and its dead letter written (same statement);
--   quarantine the row is deleted and kept in {quarantine} with the reason (%(errors)s);
--   redeliver  due, attempts and last_error move, the claim is cleared;
--   next       a recurring row's next slot: due, previous (the applied slot), runs (the
--              outcome's count; NULL: unchanged), failures reset.
-- A kept row (redeliver, next) has no lost runs since (lapses 0).
-- A redelivery keeps previous and runs (the slot was not applied).
-- Each applied outcome of a started claim writes its attempt to the history, ended now (the
-- item's oldest beyond %(keep)s trimmed). A stale claim matches no row (see close_kept).
WITH s AS (
    SELECT * FROM unnest(%(ids)b::text[], %(generations)b::bigint[], %(owners)b::text[],
                         %(tokens)b::text[], %(actions)s::text[], %(dues)s::timestamptz[],
                         %(attempts)b::int[], %(errors)s::text[], %(applied)s::timestamptz[],
                         %(outcomes)s::text[], %(error_types)s::text[], %(messages)s::text[],
                         %(tracebacks)s::text[], %(dead_at)s::timestamptz[], %(runs)s::int[])
             AS s(id, generation, owner, token, action, due, attempt, error, applied,
                  outcome, error_type, message, traceback, dead_at, runs)
), gone AS (
    DELETE FROM {table} t USING s
    WHERE t.id = ANY (%(ids)b::text[]) AND t.id = s.id AND t.generation = s.generation AND t.owner = s.owner
      AND t.claim_token = s.token AND s.action IN ('complete', 'dead', 'quarantine')
      AND {relaxed}
    RETURNING t.*, s.action, s.attempt AS dead_attempts, s.error AS dead_error,
              s.dead_at AS dead_time, s.due AS dead_due, s.applied AS dead_previous,
              s.runs AS dead_runs
), moved AS (
    UPDATE {table} t
    SET due = s.due, attempts = s.attempt, last_error = s.error,
        previous = CASE WHEN s.action = 'next' THEN s.applied ELSE t.previous END,
        runs = CASE WHEN s.action = 'next' THEN coalesce(s.runs, t.runs) ELSE t.runs END,
        owner = NULL, lease_until = NULL, claim_token = NULL, started_at = NULL, lapses = 0
    FROM s, {table} o
    WHERE t.id = ANY (%(ids)b::text[]) AND t.id = s.id AND t.generation = s.generation
      AND t.owner = s.owner AND t.claim_token = s.token AND o.id = t.id
      AND s.action IN ('redeliver', 'next') AND {relaxed}
    RETURNING t.id, o.lease_until, s.token, o.generation, o.attempts, o.owner, o.started_at
), buried AS (
    INSERT INTO {dead} AS d (id, generation, kind, handler, flow_id, due, payload, recurrence,
                             previous, runs, attempts, error, dead_at)
    SELECT id, generation, kind, handler, flow_id, coalesce(dead_due, due), payload,
           recurrence, CASE WHEN recurrence IS NULL THEN NULL ELSE dead_previous END,
           CASE WHEN recurrence IS NULL THEN 0 ELSE coalesce(dead_runs, runs) END,
           dead_attempts, dead_error, coalesce(dead_time, {now})
    FROM gone WHERE action = 'dead'
    ON CONFLICT (id) DO UPDATE SET generation = EXCLUDED.generation, kind = EXCLUDED.kind,
        handler = EXCLUDED.handler, flow_id = EXCLUDED.flow_id, due = EXCLUDED.due,
        payload = EXCLUDED.payload, recurrence = EXCLUDED.recurrence,
        previous = EXCLUDED.previous, runs = EXCLUDED.runs, attempts = EXCLUDED.attempts, error = EXCLUDED.error,
        dead_at = EXCLUDED.dead_at
), set_aside AS (
    INSERT INTO {quarantine} AS q (id, reason, record, node, quarantined_at)
    SELECT id, dead_error,
           to_jsonb(gone) - 'action' - 'dead_attempts' - 'dead_error' - 'dead_time'
               - 'dead_due' - 'dead_previous' - 'dead_runs',
           owner, {now}
    FROM gone WHERE action = 'quarantine'
    ON CONFLICT (id) DO UPDATE SET reason = EXCLUDED.reason, record = EXCLUDED.record,
        node = EXCLUDED.node, quarantined_at = EXCLUDED.quarantined_at
), applied AS (
    SELECT id, lease_until, claim_token AS token, generation, attempts, owner, started_at
    FROM gone
    UNION ALL SELECT id, lease_until, token, generation, attempts, owner, started_at FROM moved
), writes AS (
    SELECT a.id, a.generation, a.attempts AS attempt, a.owner AS node,
           a.started_at AS started, {now} AS ended, s.outcome, s.error_type,
           s.message AS error_message, s.traceback, NULL::timestamptz AS lease
    FROM applied a JOIN s ON s.id = a.id AND s.token = a.token
    WHERE a.started_at IS NOT NULL AND a.owner IS NOT NULL
), trimmed AS ({trim}
), logged AS ({log}
)
SELECT id, {now}, lease_until, token FROM applied;

-- name: settle_completed
-- The common batch, every handler returned: the settle statement with deletes only (fewer
-- arrays to send, nothing to plan for the outcomes that are not there). Each started
-- attempt is written "succeeded", from the deleted row (a stale one: see close_kept).
WITH s AS (
    SELECT * FROM unnest(%(ids)b::text[], %(generations)b::bigint[], %(owners)b::text[],
                         %(tokens)b::text[]) AS s(id, generation, owner, token)
), gone AS (
    DELETE FROM {table} t USING s
    WHERE t.id = ANY (%(ids)b::text[]) AND t.id = s.id AND t.generation = s.generation
      AND t.owner = s.owner AND t.claim_token = s.token AND {relaxed}
    RETURNING t.id, t.lease_until, t.claim_token, t.generation, t.attempts, t.owner,
              t.started_at
), writes AS (
    SELECT id, generation, attempts AS attempt, owner AS node, started_at AS started,
           {now} AS ended, 'succeeded' AS outcome, NULL::text AS error_type,
           NULL::text AS error_message, NULL::text AS traceback, NULL::timestamptz AS lease
    FROM gone WHERE {started}
), trimmed AS ({trim}
), logged AS ({log}
)
SELECT id, {now}, lease_until, claim_token FROM gone;

-- name: settle_late
-- After a settle, the one-shot completions it found stale (Settlement.settles_late; sent only
-- then, rare): a run that succeeded after its lease ended, while another claim took the row
-- (a paused node), settles its generation - the row is deleted, fenced on id and generation
-- alone, whoever holds it now (a replaced or cancelled form matches nothing). A delivery the
-- other claim had started keeps its attempt in the history, open, as a cancel's does (its own
-- outcome, stale, ends it: close_kept). Each deleted row comes back with the store's time.
WITH s AS (
    SELECT * FROM unnest(%(ids)s::text[], %(generations)s::bigint[]) AS s(id, generation)
), met AS (
    DELETE FROM {table} t USING s
    WHERE t.id = ANY (%(ids)s::text[]) AND t.id = s.id AND t.generation = s.generation
      AND {relaxed}
    RETURNING t.id, t.generation, t.attempts, t.owner, t.started_at, t.lease_until
), {keep_met}
SELECT id, generation, {now} FROM met;

-- name: close_kept
-- After a settle some of whose outcomes matched no row (stale), those outcomes: a run whose
-- row a cancel or replace took while it ran had its attempt kept in {history}, open; its
-- outcome ends it, as it truly ended (after the cancel). Sent only then (rare), so the
-- settle itself never looks in {history} for them; found by item id (index {history_item}).
WITH s AS (
    SELECT * FROM unnest(%(ids)s::text[], %(generations)s::bigint[], %(owners)s::text[],
                         %(attempts)s::int[], %(outcomes)s::text[], %(error_types)s::text[],
                         %(messages)s::text[], %(tracebacks)s::text[])
             AS s(id, generation, owner, attempt, outcome, error_type, message, traceback)
)
UPDATE {history} h
SET ended = {now}, outcome = s.outcome, error_type = s.error_type, error_message = s.message,
    traceback = s.traceback
FROM s
WHERE h.item_id = ANY (%(ids)s::text[]) AND h.item_id = s.id
  AND h.generation = s.generation AND h.node = s.owner AND h.attempt = s.attempt
  AND h.ended IS NULL
RETURNING h.item_id;

-- name: next_due
-- Asked when a claim came back short (the node has time): history attempts that ended more
-- than %(retention)s ago go too, and kept ones whose lease ended that long ago, a bounded
-- bite each time (indexes {history_ended} and {history_kept}). With the
-- store's time of the answer (a node translates the due time into its own clock by it).
WITH r AS (SELECT unnest(%(routes)s::text[]) AS route), expired AS (
    DELETE FROM {history}
    WHERE seq = ANY (ARRAY(
        (SELECT seq FROM {history}
         WHERE ended IS NOT NULL AND ended < {now} - %(retention)s::interval
         ORDER BY ended LIMIT 100)
        UNION ALL
        (SELECT seq FROM {history}
         WHERE ended IS NULL AND lease_until < {now} - %(retention)s::interval
         ORDER BY lease_until LIMIT 100)))
)
SELECT least(
    (SELECT min(x.due) FROM r CROSS JOIN LATERAL (
        SELECT t.due FROM {table} t
        WHERE t.route = r.route AND t.owner IS NULL AND NOT t.paused
          AND (%(after)s::timestamptz IS NULL OR t.due > %(after)s::timestamptz)
        ORDER BY t.due LIMIT 1) AS x),
    (SELECT min(x.lease_until) FROM r CROSS JOIN LATERAL (
        SELECT t.lease_until FROM {table} t
        WHERE t.route = r.route AND t.owner IS NOT NULL AND NOT t.paused
          AND (%(after)s::timestamptz IS NULL OR t.lease_until > %(after)s::timestamptz)
        ORDER BY t.lease_until LIMIT 1) AS x)
), {now};

-- ---- dead letters, quarantine -------------------------------------------------------------

-- name: dead_letters
SELECT id, generation, kind, handler, flow_id, due, payload, recurrence, previous, runs,
       attempts, error, dead_at
FROM {dead} ORDER BY dead_at, id;

-- name: requeue
-- A live row of the same id is replaced (as by put: a started delivery's attempt is kept;
-- no failures, no lost runs).
WITH d AS (
    DELETE FROM {dead} WHERE id = %(id)s RETURNING *
), met AS (
    SELECT id, generation, attempts, owner, started_at, lease_until FROM {table}
    WHERE id = %(id)s AND EXISTS (SELECT FROM d)
    FOR UPDATE
), {keep_met}, stored AS (
    INSERT INTO {table} AS t (id, generation, kind, handler, route, flow_id, due, payload,
                              recurrence, previous, runs, attempts, last_error, owner,
                              lease_until, started_at, paused, scheduled_at)
    SELECT d.id, nextval('{generations}'), d.kind, d.handler,
           CASE WHEN d.handler IS NULL THEN 'k:' || d.kind ELSE 'h:' || d.handler END,
           d.flow_id, %(due)s::timestamptz, d.payload, d.recurrence, d.previous, d.runs, 0,
           NULL, NULL, NULL, NULL, false, {now}
    FROM d
    WHERE (SELECT count(*) FROM met) >= 0  -- met is read (and locked) before the insert
    ON CONFLICT (id) DO UPDATE SET
        generation = EXCLUDED.generation, kind = EXCLUDED.kind, handler = EXCLUDED.handler,
        route = EXCLUDED.route, flow_id = EXCLUDED.flow_id, due = EXCLUDED.due,
        payload = EXCLUDED.payload, recurrence = EXCLUDED.recurrence,
        previous = EXCLUDED.previous, runs = EXCLUDED.runs, attempts = 0, last_error = NULL,
        owner = NULL, lease_until = NULL, claim_token = NULL, started_at = NULL, paused = false,
        lapses = 0, scheduled_at = EXCLUDED.scheduled_at
    RETURNING t.id, t.generation, t.kind, t.handler, t.flow_id, t.due, t.payload,
              t.recurrence, t.previous, t.runs, t.route
)
SELECT id, generation, kind, handler, flow_id, due, payload, recurrence, previous, runs,
       CASE WHEN due <= {now} + %(notify_within)s::interval
            THEN pg_notify(%(channel)s, route)::text END
FROM stored;

-- name: quarantined
SELECT id, reason, quarantined_at, record FROM {quarantine} ORDER BY quarantined_at, id;

-- ---- steering: timers(), history(), pause/resume ----------------------------------------

-- name: fragment_timer_filter
-- Not a statement: the text of {timer_filter} in timers, the filters live rows and dead
-- letters pass alike.
(%(id_prefix)s::text IS NULL OR starts_with(id, %(id_prefix)s::text))
AND (%(flow_id)s::text IS NULL OR flow_id = %(flow_id)s::text)
AND (%(kind)s::text IS NULL OR kind = %(kind)s::text)
AND (%(handler)s::text IS NULL OR handler = %(handler)s::text)
AND (%(due_from)s::timestamptz IS NULL OR due >= %(due_from)s::timestamptz)
AND (%(due_to)s::timestamptz IS NULL OR due <= %(due_to)s::timestamptz)
AND (%(after_due)s::timestamptz IS NULL
     OR (due, id) > (%(after_due)s::timestamptz, %(after_id)s::text))

-- name: timers
-- One page, soonest due first, ties by id; live rows and dead letters alike. Every filter
-- is optional (NULL: no filter). The page is %(limit)s + 1 rows: the extra says "more".
SELECT * FROM (
    SELECT id, kind, handler, flow_id, due,
           CASE WHEN paused THEN 'paused' WHEN lease_until > {now} THEN 'claimed'
                ELSE 'scheduled' END AS state,
           attempts, last_error,
           CASE WHEN lease_until > {now} THEN owner END,
           CASE WHEN lease_until > {now} THEN lease_until END,
           recurrence, payload
    FROM {table}
    WHERE %(with_live)s::boolean AND {timer_filter}
    UNION ALL
    SELECT id, kind, handler, flow_id, due, 'dead', attempts, error, NULL, NULL, recurrence,
           payload
    FROM {dead}
    WHERE %(with_dead)s::boolean AND {timer_filter}
) AS page
WHERE %(state)s::text IS NULL OR page.state = %(state)s::text
ORDER BY due, id
LIMIT %(limit)s + 1;

-- name: history
-- The item's %(keep)s newest attempts, oldest first: those ended (or kept open by a cancel or
-- replace) in {history}, in the order written, then the one its live row has started, open.
-- A kept attempt with no outcome by its lease end whose node is not alive (no heartbeat in
-- {nodes}: it died) reads "lapsed" there; a live node's is still running, open.
-- An open attempt an older flowsched wrote at its start (schema version 3 and before) shows
-- once: not when {history} also has it ended (or open, written earlier), nor again as the
-- live row's.
WITH lapsed AS (
    SELECT h.seq FROM {history} h
    WHERE h.item_id = %(id)s AND h.ended IS NULL AND h.lease_until <= {now}
      AND NOT EXISTS (SELECT FROM {nodes} n WHERE n.node_id = h.node AND n.expires_at > {now})
), logged AS (
    SELECT h.seq, h.node, h.started,
           CASE WHEN h.seq IN (SELECT seq FROM lapsed) THEN h.lease_until
                ELSE h.ended END AS ended,
           CASE WHEN h.seq IN (SELECT seq FROM lapsed) THEN 'lapsed'
                ELSE h.outcome END AS outcome,
           h.error_type, h.error_message, h.traceback, h.generation, h.attempt
    FROM {history} h
    WHERE h.item_id = %(id)s
      AND NOT (h.ended IS NULL AND EXISTS (
          SELECT FROM {history} c
          WHERE c.item_id = h.item_id AND c.seq <> h.seq AND c.generation = h.generation
            AND c.attempt = h.attempt AND c.node = h.node AND c.started = h.started
            AND (c.ended IS NOT NULL OR c.seq < h.seq)))
), running AS (
    SELECT NULL::bigint AS seq, t.owner AS node, t.started_at AS started,
           NULL::timestamptz AS ended, NULL::text AS outcome, NULL::text AS error_type,
           NULL::text AS error_message, NULL::text AS traceback, t.generation,
           t.attempts AS attempt
    FROM {table} t
    WHERE t.id = %(id)s AND t.started_at IS NOT NULL AND t.owner IS NOT NULL
      AND NOT EXISTS (
          SELECT FROM logged l
          WHERE l.generation = t.generation AND l.attempt = t.attempts AND l.node = t.owner
            AND l.started = t.started_at)
)
SELECT node, started, ended, outcome, error_type, error_message, traceback, generation,
       attempt
FROM (SELECT * FROM logged UNION ALL SELECT * FROM running
      ORDER BY seq DESC NULLS FIRST LIMIT %(keep)s) AS recent
ORDER BY seq NULLS LAST;

-- name: pause
UPDATE {table} SET paused = true WHERE id = %(id)s RETURNING id;

-- name: resume_read
SELECT generation, recurrence, previous, due, paused, {now} FROM {table} WHERE id = %(id)s;

-- name: resume
-- Unpaused at %(due)s (a recurring row's next slot after now), if still the form read.
UPDATE {table} SET paused = false, due = coalesce(%(due)s::timestamptz, due),
    previous = coalesce(%(previous)s::timestamptz, previous)
WHERE id = %(id)s AND generation = %(generation)s
RETURNING id, due, route;

-- name: wake
SELECT pg_notify(%(channel)s, %(route)s);

-- ---- node heartbeats ----------------------------------------------------------------------

-- name: heartbeat
INSERT INTO {nodes} AS n (node_id, routes, renewed_at, expires_at)
VALUES (%(node)s, %(routes)s, {now}, {now} + %(ttl)s::interval)
ON CONFLICT (node_id) DO UPDATE SET routes = EXCLUDED.routes,
    renewed_at = EXCLUDED.renewed_at, expires_at = EXCLUDED.expires_at;

-- name: leave
DELETE FROM {nodes} WHERE node_id = %(node)s;

-- name: live_nodes
SELECT node_id, routes, renewed_at, expires_at FROM {nodes}
WHERE expires_at > {now} ORDER BY node_id;

-- ---- flow instances (flowsched/postgres/flow_store.py) -----------------------------------

-- name: flow_table
CREATE TABLE IF NOT EXISTS {table} (
    flow_id  text PRIMARY KEY,
    version  bigint NOT NULL,
    document jsonb NOT NULL
);

-- name: flow_load
SELECT document, version FROM {table} WHERE flow_id = %(flow_id)s;

-- name: flow_insert
INSERT INTO {table} (flow_id, version, document) VALUES (%(flow_id)s, 1, %(document)s)
ON CONFLICT (flow_id) DO NOTHING
RETURNING version;

-- name: flow_update
UPDATE {table} SET version = version + 1, document = %(document)s
WHERE flow_id = %(flow_id)s AND version = %(version)s
RETURNING version;

-- ---- the console's audit (flowsched/console/postgres_audit.py) -----------------------------

-- name: audit_table
-- Who did or tried what in the console, from where, and how it ended: one row an entry,
-- newest first by (at, seq). Made by a console on its first entry, not by the migrations (a
-- table whose console never acts has none); IF NOT EXISTS: any console may.
CREATE TABLE IF NOT EXISTS {audit} (
    seq     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at      timestamptz NOT NULL,
    who     text,
    role    text,
    client  text NOT NULL,
    action  text NOT NULL,
    item_id text,
    ids     text[],
    count   integer,
    what    text,
    done    boolean NOT NULL,
    outcome text NOT NULL
);
CREATE INDEX IF NOT EXISTS {audit_at} ON {audit} (at DESC, seq DESC);
CREATE INDEX IF NOT EXISTS {audit_item} ON {audit} (item_id, at DESC) WHERE item_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS {audit_ids} ON {audit} USING gin (ids) WHERE ids IS NOT NULL;

-- name: audit_insert
INSERT INTO {audit} (at, who, role, client, action, item_id, ids, count, what, done, outcome)
VALUES (%(at)s, %(who)s, %(role)s, %(client)s, %(action)s, %(item_id)s, %(ids)s, %(count)s,
        %(what)s, %(done)s, %(outcome)s);

-- name: audit_find
-- One page, newest first, every filter optional (NULL: not filtered); an item matches its
-- own entries and the bulk entries that list it. (at, seq) < the cursor's: the next page.
SELECT seq, at, who, role, client, action, item_id, ids, count, what, done, outcome
FROM {audit}
WHERE (%(who)s::text IS NULL OR who = %(who)s)
  AND (%(action)s::text IS NULL OR action = %(action)s)
  AND (%(done)s::boolean IS NULL OR done = %(done)s)
  AND (%(item_id)s::text IS NULL OR item_id = %(item_id)s OR ids @> ARRAY[%(item_id)s::text])
  AND (%(since)s::timestamptz IS NULL OR at >= %(since)s)
  AND (%(until)s::timestamptz IS NULL OR at < %(until)s)
  AND (%(at)s::timestamptz IS NULL OR (at, seq) < (%(at)s, %(seq)s::bigint))
ORDER BY at DESC, seq DESC
LIMIT %(limit)s;
