-- Feedback: what an asker says of one of its own generations (src/feedback.rs;
-- docs/postgres.md "Feedback", docs/security.md "Feedback").
--
--   grid.feedback(generation, verdict, corrected_sql)  an asker, on its own generations
--   grid.feedback_log        the append-only, hash-chained record of every feedback
--                            (grid_core::audit::FeedbackRecord), written by the worker
--   grid.my_feedback         what the current role said, and only that
--   grid.example_candidates  the curators' queue: question/SQL pairs askers vouched for
--   grid.promote_candidate(question, sql)  a curator makes a candidate an example
--
-- The feedback chain is a chain of its own beside the seal chain: record `feedback`
-- (0, 1, 2, ...) carries prev_hash, the hash of record feedback - 1 (or the feedback
-- genesis constant), and binds its generation's seal by that seal's hash. The verifier
-- (grid.verify_audit()) recomputes it after the seal chain, and checks each record's
-- corrected_sql against its digest, and its seal and role against grid.generations;
-- grid.feedback_head() gives the head to keep outside the database.
CREATE TABLE grid.feedback_log (
    -- The record's index in the feedback chain (hashed).
    feedback             bigint PRIMARY KEY CHECK (feedback >= 0),
    -- The generation it is about (hashed), one of current_user_name's.
    generation           bigint NOT NULL CHECK (generation >= 0),
    -- Who said it: hashed together, as a seal's role (["<session_user>","<current_user>"]).
    session_user_name    text NOT NULL,
    current_user_name    text NOT NULL,
    verdict              text NOT NULL CHECK (verdict IN ('right', 'wrong')),
    -- The statement the asker says answers the question instead (only with 'wrong'),
    -- checked against the asker's language, the checker and the judge when it was given.
    corrected_sql        text,
    -- text_digest(corrected_sql), hashed; checked against the text by grid.verify_audit().
    corrected_sql_digest bytea CHECK (octet_length(corrected_sql_digest) = 32),
    -- The hash of the generation's seal (grid.generations.hash), hashed.
    seal_hash            bytea NOT NULL CHECK (octet_length(seal_hash) = 32),
    prev_hash            bytea NOT NULL CHECK (octet_length(prev_hash) = 32),
    hash                 bytea NOT NULL CHECK (octet_length(hash) = 32),
    -- Not hashed.
    recorded_at          timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    CHECK (verdict OPERATOR(pg_catalog.=) 'wrong' OR corrected_sql IS NULL)
);
CREATE INDEX feedback_by_generation ON grid.feedback_log (generation);
CREATE INDEX feedback_by_role ON grid.feedback_log (current_user_name, feedback);
COMMENT ON TABLE grid.feedback_log IS 'Append-only, hash-chained: one row per grid.feedback() call (grid_core::audit::FeedbackRecord), bound to its generation''s seal.';

CREATE TRIGGER append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON grid.feedback_log
    FOR EACH STATEMENT EXECUTE FUNCTION grid.refuse_audit_change();

-- What each piece of feedback proposes: the question of its generation and the SQL the
-- asker says answers it (the generation's own, for 'right'; the correction, for 'wrong';
-- none for a 'wrong' without a correction). Only the latest word of a role on a
-- generation counts: saying it again does not count twice, and a role that changes its
-- mind is counted for what it says last. Not granted to anyone: the views below read it.
CREATE VIEW grid.feedback_said AS
SELECT DISTINCT ON (f.generation, f.current_user_name)
       f.feedback, f.generation, f.current_user_name, f.verdict, g.question,
       CASE f.verdict WHEN 'right' THEN g.final_sql ELSE f.corrected_sql END AS sql,
       f.corrected_sql IS NOT NULL AS corrected, f.recorded_at
  FROM grid.feedback_log f
  JOIN grid.generations g ON g.generation OPERATOR(pg_catalog.=) f.generation
 ORDER BY f.generation, f.current_user_name, f.feedback DESC;
COMMENT ON VIEW grid.feedback_said IS 'The latest feedback of each role on each generation, with the question and SQL it proposes.';

-- The caller's own feedback, every call (security_barrier: no function of the caller's
-- sees another role's rows first). sql is the generation's statement for 'right' (one the
-- role was given: 'right' is accepted only of an answer) and the correction for 'wrong';
-- a refused generation's statement, never returned to the role, is never shown.
CREATE VIEW grid.my_feedback WITH (security_barrier) AS
SELECT f.feedback, f.generation, g.question, f.verdict,
       CASE f.verdict WHEN 'right' THEN g.final_sql ELSE f.corrected_sql END AS sql,
       f.corrected_sql IS NOT NULL AS corrected, f.recorded_at
  FROM grid.feedback_log f
  JOIN grid.generations g ON g.generation OPERATOR(pg_catalog.=) f.generation
 WHERE f.current_user_name OPERATOR(pg_catalog.=) CURRENT_USER::pg_catalog.text;
COMMENT ON VIEW grid.my_feedback IS 'What the current role said of its generations (grid.feedback), and only that.';

-- The curators' queue: each question/SQL pair some asker said answers the question,
-- with how often and by whom. times: the (generation, role) pairs that propose it (their
-- latest word); confirmed: of those, 'right' of the statement returned; corrected:
-- 'wrong' with this SQL as the correction; said_by: the roles; disputed: 'wrong' said of
-- an answer that returned this very SQL to this question; promoted: whether grid.examples
-- already holds the pair. Read by grid_curator only: it holds other roles' questions.
CREATE VIEW grid.example_candidates AS
SELECT s.question, s.sql,
       pg_catalog.count(*) AS times,
       pg_catalog.count(*) FILTER (WHERE s.verdict OPERATOR(pg_catalog.=) 'right') AS confirmed,
       pg_catalog.count(*) FILTER (WHERE s.verdict OPERATOR(pg_catalog.=) 'wrong') AS corrected,
       pg_catalog.array_agg(DISTINCT s.current_user_name) AS said_by,
       (SELECT pg_catalog.count(*)
          FROM grid.feedback_said w
          JOIN grid.answers a ON a.generation OPERATOR(pg_catalog.=) w.generation
         WHERE w.verdict OPERATOR(pg_catalog.=) 'wrong'
           AND a.question OPERATOR(pg_catalog.=) s.question
           AND a.sql OPERATOR(pg_catalog.=) s.sql) AS disputed,
       EXISTS (SELECT FROM grid.examples e
                WHERE e.question OPERATOR(pg_catalog.=) s.question
                  AND e.sql OPERATOR(pg_catalog.=) s.sql) AS promoted,
       pg_catalog.min(s.recorded_at) AS first_said,
       pg_catalog.max(s.recorded_at) AS last_said
  FROM grid.feedback_said s
 WHERE s.question IS NOT NULL AND s.sql IS NOT NULL
 GROUP BY s.question, s.sql;
COMMENT ON VIEW grid.example_candidates IS 'Question/SQL pairs askers said answer the question (grid.feedback), grouped, for curators to promote into grid.examples.';

-- One call makes a candidate an example: the pair must be in grid.example_candidates (as
-- the caller reads it: grid_curator's), and goes into grid.examples as the caller, through
-- the table's own trigger (its checks, added_by = the curator). A pair already among the
-- examples is not added twice: its id is returned with a NOTICE.
CREATE FUNCTION grid.promote_candidate(question text, sql text) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $promote$
DECLARE
    promoted bigint;
BEGIN
    IF promote_candidate.question IS NULL OR promote_candidate.sql IS NULL THEN
        RAISE EXCEPTION 'grid.promote_candidate: the question and the SQL must both be given'
            USING ERRCODE = 'null_value_not_allowed',
                  HINT = 'SELECT question, sql FROM grid.example_candidates lists the candidates.';
    END IF;
    PERFORM FROM grid.example_candidates c
      WHERE c.question OPERATOR(pg_catalog.=) promote_candidate.question
        AND c.sql OPERATOR(pg_catalog.=) promote_candidate.sql;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'grid.promote_candidate: no feedback proposes this question with this SQL'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'SELECT question, sql FROM grid.example_candidates lists the candidates; pass both exactly as listed.';
    END IF;
    SELECT e.id INTO promoted FROM grid.examples e
     WHERE e.question OPERATOR(pg_catalog.=) promote_candidate.question
       AND e.sql OPERATOR(pg_catalog.=) promote_candidate.sql
     ORDER BY e.id LIMIT 1;
    IF FOUND THEN
        RAISE NOTICE 'grid.promote_candidate: grid.examples already holds this pair (id %)', promoted;
        RETURN promoted;
    END IF;
    INSERT INTO grid.examples (question, sql)
         VALUES (promote_candidate.question, promote_candidate.sql)
      RETURNING id INTO promoted;
    RETURN promoted;
END
$promote$;
COMMENT ON FUNCTION grid.promote_candidate(text, text) IS
    'Inserts a pair of grid.example_candidates into grid.examples as the caller (a curator), through the table''s trigger; returns the example''s id.';

REVOKE ALL ON grid.feedback_log, grid.feedback_said, grid.my_feedback, grid.example_candidates
    FROM PUBLIC;
GRANT SELECT ON grid.feedback_log TO grid_auditor;
GRANT SELECT ON grid.example_candidates TO grid_curator;

-- pg_dump keeps the rows (extension tables are otherwise dumped empty).
SELECT pg_catalog.pg_extension_config_dump('grid.feedback_log', '');
