-- The last SQL of the extension script, after every function exists.
--
-- No grid function is executable by PUBLIC: a DBA grants them function by
-- function (GRANT EXECUTE ON FUNCTION grid.ask(text) TO analyst, ...). The
-- auditors' role gets what it exists for.
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA grid FROM PUBLIC;
-- The one exception: the provenance rule is part of the catalog snapshot that
-- grid.ask() reads as its caller (who may hold EXECUTE on grid.ask alone). It is a
-- predicate over pg_roles and role membership, which every role may read anyway.
GRANT EXECUTE ON FUNCTION grid.trusted_author(oid) TO PUBLIC;
-- Curators write grid.examples, whose trigger checks each row with this function.
GRANT EXECUTE ON FUNCTION grid.check_example(text, text) TO grid_curator;
GRANT EXECUTE ON FUNCTION grid.verify_audit(text, text), grid.audit_head(), grid.feedback_head(),
    grid.replay(bigint) TO grid_auditor;
-- Curators promote what askers vouched for (sql/feedback.sql); the function reads
-- grid.example_candidates and writes grid.examples as the curator.
GRANT EXECUTE ON FUNCTION grid.promote_candidate(text, text) TO grid_curator;

-- The users' role (cluster-wide, like grid_auditor): what a role needs to ask.
-- GRANT grid_user TO analyst; is all a DBA does, besides the table GRANTs that
-- decide what the analyst's questions may touch.
DO $user$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'grid_user') THEN
        CREATE ROLE grid_user NOLOGIN;
    END IF;
END
$user$;
GRANT USAGE ON SCHEMA grid TO grid_user;
GRANT EXECUTE ON FUNCTION grid.ask(text), grid.run(text, integer), grid.run(bigint, integer),
    grid.explain(text), grid.catalog_snapshot(text[]) TO grid_user;
-- Each role reads its own answers only (the view filters by the caller).
GRANT SELECT ON grid.my_answers TO grid_user;
-- An asker says whether its own generations were right (the function checks that the
-- generation is the caller's), and reads what it said, and only that.
GRANT EXECUTE ON FUNCTION grid.feedback(bigint, text, text) TO grid_user;
GRANT SELECT ON grid.my_feedback TO grid_user;
-- Curators describe relations for the model; so may an asker, of the relations it owns
-- (the function itself checks who may describe what: sql/descriptions.sql). An owner
-- role that is neither needs its own GRANT EXECUTE.
GRANT EXECUTE ON FUNCTION grid.describe(regclass, text, text) TO grid_curator, grid_user;
GRANT EXECUTE ON FUNCTION grid.show_values(regclass, text, boolean) TO grid_curator, grid_user;
