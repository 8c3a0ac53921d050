-- grid_pg bootstrap: the first SQL of the extension script, run before any
-- object that pgrx generates from src/.
--
-- The schema is created here, by the extension itself, with a plain CREATE
-- SCHEMA: if someone has already created a schema called "grid" (schema
-- squatting), CREATE EXTENSION fails loudly instead of adopting a schema that
-- another role owns. Because the extension creates it, the schema is a member
-- of the extension and DROP EXTENSION removes it. (This is why the control
-- file says schema = pg_catalog rather than schema = grid: a control-file
-- schema is created by PostgreSQL *before* the script runs, is not a member of
-- the extension, and a pre-existing one is silently reused.)
--
-- Every function of this extension pins its search_path
-- (SET search_path = pg_catalog, pg_temp, via #[search_path(pg_catalog, pg_temp)]
-- on each #[pg_extern]) and every object is schema-qualified, so nothing here
-- depends on the caller's search_path. Functions are SECURITY INVOKER unless a
-- comment at the definition says otherwise.
CREATE SCHEMA grid;
COMMENT ON SCHEMA grid IS 'grid_pg: grammar-constrained, GRANT-governed SQL generation with an audit trail';

-- Any role may look into the schema; what it may call is governed per
-- function (EXECUTE grants), so that DBAs grant access function by function.
GRANT USAGE ON SCHEMA grid TO PUBLIC;
