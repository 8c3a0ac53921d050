-- The audit store: the hash-chained log of every generation (grid_core::audit). Three
-- append-only tables:
--
--   grid.audit_log    one row per decoding step: grid_core::audit::StepRecord
--   grid.generations  one row per finished generation: its grid_core::audit::Seal,
--                     plus who asked, the question, the final SQL and the times
--   grid.artifacts    the inputs a replay needs (grammar, lexicons, policy,
--                     vocabulary) and the prompt each generation showed, keyed by
--                     the fingerprints the seals carry and their content digests
--
-- The verifier (grid.verify_audit(), in Rust over grid_core::audit::Verifier)
-- reads steps and seals back as one log in append order: `entry`, drawn from one
-- sequence for both tables, is that order. Each column holds its field
-- losslessly; hashes, ids and fingerprints are raw bytes (encode(x, 'hex') gives
-- the JSONL text form). The CHECK constraints describe what the writer produces;
-- the verifier does not rely on them (a superuser can drop them) and reports a
-- malformed row as an altered one.

CREATE SEQUENCE grid.audit_entry_seq AS bigint;
COMMENT ON SEQUENCE grid.audit_entry_seq IS 'Append order of grid.audit_log and grid.generations rows (one order for both).';

CREATE SEQUENCE grid.generation_seq AS bigint;
COMMENT ON SEQUENCE grid.generation_seq IS 'Generation ids (gaps are harmless: the chains do not need consecutive ids).';

CREATE TABLE grid.audit_log (
    entry          bigint PRIMARY KEY,
    generation     bigint NOT NULL CHECK (generation >= 0),
    -- u32 in grid-core; grid.max_tokens keeps it far below 2^31.
    step           integer NOT NULL CHECK (step >= 0),
    -- u64, 8 bytes big-endian (the JSONL's 16 hex digits).
    config_hash    bytea NOT NULL CHECK (octet_length(config_hash) = 8),
    mask_entry_id  bytea NOT NULL CHECK (octet_length(mask_entry_id) = 16),
    -- A vocabulary id (u32), or NULL for the end of the statement (Token::Eos).
    token          bigint CHECK (token BETWEEN 0 AND 4294967295),
    blocked_count  bigint NOT NULL CHECK (blocked_count BETWEEN 0 AND 4294967295),
    kind           text NOT NULL CHECK (kind IN ('sampled', 'forced', 'eos', 'budget_completed', 'replayed', 'banned')),
    prev_hash      bytea NOT NULL CHECK (octet_length(prev_hash) = 32),
    hash           bytea NOT NULL CHECK (octet_length(hash) = 32),
    -- Not hashed: for the reader, not for the verifier.
    recorded_at    timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    UNIQUE (generation, step)
);
COMMENT ON TABLE grid.audit_log IS 'Append-only, hash-chained record of every decoding step (grid_core::audit::StepRecord).';

CREATE TABLE grid.generations (
    entry             bigint PRIMARY KEY,
    generation        bigint NOT NULL UNIQUE CHECK (generation >= 0),
    -- Who asked. current_user_name is the seal's role (hashed); session_user_name
    -- is recorded beside it.
    session_user_name text NOT NULL,
    current_user_name text,
    question          text,
    -- Seal fields: text_digest(question) and text_digest(final_sql), checked
    -- against the two texts by grid.verify_audit().
    question_digest   bytea CHECK (octet_length(question_digest) = 32),
    final_sql         text,
    sql_digest        bytea CHECK (octet_length(sql_digest) = 32),
    seal_index        bigint NOT NULL UNIQUE CHECK (seal_index >= 0),
    stop              text NOT NULL CHECK (stop IN ('eos', 'budget_completed', 'budget_truncated', 'error', 'cancelled')),
    steps             integer NOT NULL CHECK (steps >= 0),
    last_step_hash    bytea NOT NULL CHECK (octet_length(last_step_hash) = 32),
    grammar_fp        bytea NOT NULL CHECK (octet_length(grammar_fp) = 16),
    lexicons_fp       bytea NOT NULL CHECK (octet_length(lexicons_fp) = 16),
    policy_fp         bytea NOT NULL CHECK (octet_length(policy_fp) = 16),
    vocabulary_fp     bytea NOT NULL CHECK (octet_length(vocabulary_fp) = 16),
    decode_mode       text NOT NULL CHECK (decode_mode IN ('mode1', 'mode2', 'unconstrained')),
    mask_cache        boolean NOT NULL,
    prev_seal_hash    bytea NOT NULL CHECK (octet_length(prev_seal_hash) = 32),
    hash              bytea NOT NULL CHECK (octet_length(hash) = 32),
    -- Not hashed.
    started_at        timestamptz NOT NULL,
    finished_at       timestamptz NOT NULL,
    -- The semantic checker's verdict, not hashed either: grid.replay() recomputes it
    -- from final_sql (whose digest is sealed) and the archived catalog snapshot.
    -- refused: why final_sql was not returned (its violations), NULL when it was or
    -- when there is no statement; repair_of: the generation this one repairs.
    refused           text,
    repair_of         bigint,
    -- Seal fields, last so that the columns before keep their positions.
    -- verdict: the judge's on final_sql (PostgreSQL's EXPLAIN as the caller),
    -- canonical JSON: {"verdict":"pass"}, {"verdict":"off"} (grid.judge off),
    -- {"verdict":"fail","code":"<SQLSTATE>","message":"<sanitized>"}; NULL when no
    -- judge saw the statement (none, or the checker refused it).
    verdict           text,
    -- prompt_digest: the content digest of the generation's prompt artifact (the
    -- prompt the model was shown, and the content digests of the other artifacts),
    -- checked by grid.verify_audit(). NULL in generations sealed before prompts were
    -- (they hash as before).
    prompt_digest     bytea CHECK (octet_length(prompt_digest) = 32),
    -- Not hashed. ask_key: grid_ask::Ask::reuse_key of the ask this generation
    -- belongs to (its question, role, catalog snapshot, policy and the settings that
    -- shape a generation): grid.run(question) runs the answer the role's last ask gave
    -- instead of asking again when its own ask has the same key. NULL in generations
    -- written before it was kept, and in synthetic ones.
    ask_key           bytea CHECK (octet_length(ask_key) = 32)
);
-- grid.run(question) reads a role's last generation.
CREATE INDEX generations_by_role ON grid.generations (current_user_name, entry);
COMMENT ON TABLE grid.generations IS 'Append-only: one row per finished generation, with its seal (grid_core::audit::Seal) in the global seal chain.';

CREATE TABLE grid.artifacts (
    kind         text NOT NULL CHECK (kind IN ('grammar', 'lexicons', 'policy', 'vocabulary', 'prompt')),
    -- The seal's fingerprint of this kind (the prompt's: the first 16 bytes of the
    -- seal's prompt_digest).
    fingerprint  bytea NOT NULL CHECK (octet_length(fingerprint) = 16),
    -- The artifact itself, as bytes, as a document, or both; the vocabulary may be
    -- kept by fingerprint only when the endpoint can serve it again.
    content      bytea,
    content_json jsonb,
    created_at   timestamptz NOT NULL DEFAULT pg_catalog.now(),
    -- The content digest (grid_ask::contents::content_digest) of content and
    -- content_json. A fingerprint is what an artifact means to the masks (the
    -- lexicons' is over words), so one fingerprint may have several contents
    -- (snapshots that differ in a comment): each is kept, told apart by its
    -- digest, which the generation's prompt artifact lists. NULL in rows written
    -- before digests were. (Last, so that the columns before keep their positions.)
    digest       bytea CHECK (octet_length(digest) = 32),
    UNIQUE NULLS NOT DISTINCT (kind, fingerprint, digest)
);
COMMENT ON TABLE grid.artifacts IS 'Append-only, content-addressed inputs of the generations (keys: the fingerprints of grid.generations and the content digests their prompt artifacts list), so that a log replays after the schema has changed.';

-- Every statement grid.run() ran: which generation's (its final_sql), for whom, and how
-- grid.run came to it. Written by the worker in a transaction of its own before the
-- statement runs, so a run is on record whatever becomes of the caller's transaction.
-- Not hash-chained: the generation it names is.
CREATE TABLE grid.runs (
    run               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- A generation of grid.generations (no foreign key: it would make TRUNCATE of the
    -- store fail before the append-only trigger says why).
    generation        bigint NOT NULL,
    session_user_name text NOT NULL,
    current_user_name text NOT NULL,
    -- 'generation': grid.run(generation), the statement the caller had read;
    -- 'asked': grid.run(question), which asked the model;
    -- 'reused': grid.run(question), which ran the answer the role's last ask gave
    -- (same question, snapshot, policy and settings) without asking again.
    called_as         text NOT NULL CHECK (called_as IN ('generation', 'asked', 'reused')),
    recorded_at       timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp()
);
COMMENT ON TABLE grid.runs IS 'Append-only: one row per statement grid.run() ran, naming the generation that wrote it.';

-- The answers: each generation whose statement grid_pg returned to its role (by
-- grid.ask(), grid.run() or grid.explain()): sealed with a statement the checker
-- passed and the judge did not refuse. What grid.run(generation) may run, read by the
-- extension as the store's owner for the role that calls it.
CREATE VIEW grid.answers AS
SELECT g.generation, g.current_user_name AS role_name, g.question, g.final_sql AS sql,
       g.finished_at AS answered_at, g.entry
  FROM grid.generations g
 WHERE g.final_sql IS NOT NULL
   AND g.refused IS NULL
   AND g.stop OPERATOR(pg_catalog.=) ANY ('{eos,budget_completed,budget_truncated}'::pg_catalog.text[])
   AND (g.verdict IS NULL OR g.verdict OPERATOR(pg_catalog.!~~) '{"verdict":"fail"%');
COMMENT ON VIEW grid.answers IS 'The statements grid_pg returned, by generation and role.';

-- The caller's own answers, for it to pick one to run with grid.run(generation). The
-- view reads with its owner's rights; the filter is the caller's role (security_barrier:
-- no function of the caller's sees another role's rows first).
CREATE VIEW grid.my_answers WITH (security_barrier) AS
SELECT a.generation, a.question, a.sql, a.answered_at
  FROM grid.answers a
 WHERE a.role_name OPERATOR(pg_catalog.=) CURRENT_USER::pg_catalog.text;
COMMENT ON VIEW grid.my_answers IS 'The statements grid_pg returned to the current role, by generation: what grid.run(generation) runs.';

-- Append-only: nobody but the owner holds any privilege (the writer runs as the
-- owner), and even the owner cannot UPDATE, DELETE or TRUNCATE while the trigger
-- is enabled. Statement-level triggers refuse also statements that would touch
-- no row, and MERGE's UPDATE/DELETE actions.
CREATE FUNCTION grid.refuse_audit_change() RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $refuse$
BEGIN
    RAISE EXCEPTION '% on %.% refused: the audit store is append-only',
        TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END
$refuse$;

CREATE TRIGGER append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON grid.audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION grid.refuse_audit_change();
CREATE TRIGGER append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON grid.generations
    FOR EACH STATEMENT EXECUTE FUNCTION grid.refuse_audit_change();
CREATE TRIGGER append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON grid.artifacts
    FOR EACH STATEMENT EXECUTE FUNCTION grid.refuse_audit_change();
CREATE TRIGGER append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON grid.runs
    FOR EACH STATEMENT EXECUTE FUNCTION grid.refuse_audit_change();

REVOKE ALL ON grid.audit_log, grid.generations, grid.artifacts, grid.runs, grid.answers,
    grid.my_answers FROM PUBLIC;
REVOKE ALL ON SEQUENCE grid.audit_entry_seq, grid.generation_seq FROM PUBLIC;

-- The auditors' role (cluster-wide, so it may exist already; it outlives the
-- extension). It reads the store and runs grid.verify_audit()/grid.audit_head().
DO $auditor$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'grid_auditor') THEN
        CREATE ROLE grid_auditor NOLOGIN;
    END IF;
END
$auditor$;
GRANT SELECT ON grid.audit_log, grid.generations, grid.artifacts, grid.runs, grid.answers
    TO grid_auditor;

-- pg_dump keeps the rows (extension tables are otherwise dumped empty).
SELECT pg_catalog.pg_extension_config_dump('grid.audit_log', '');
SELECT pg_catalog.pg_extension_config_dump('grid.generations', '');
SELECT pg_catalog.pg_extension_config_dump('grid.artifacts', '');
SELECT pg_catalog.pg_extension_config_dump('grid.runs', '');
SELECT pg_catalog.pg_extension_config_dump('grid.audit_entry_seq', '');
SELECT pg_catalog.pg_extension_config_dump('grid.generation_seq', '');
