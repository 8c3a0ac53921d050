-- Curated examples: questions and the SQL that answers them, which grid.ask() may show
-- the model before a question (src/examples.rs; docs/postgres.md "Examples",
-- docs/security.md).
--
-- Who may write: members of grid_curator (sql/provenance.sql), the roles whose words a
-- DBA vouches for. They may also read the store, to keep it. No one else may read it:
-- an example's SQL names tables and columns, and reading it would tell an asker that
-- they exist. grid.ask() reads the store as its owner and shows an asker an example only
-- when its author is one the asker trusts (grid.trusted_author), its SQL lies in the
-- asker's language and PostgreSQL plans it as the asker; the others are dropped
-- silently.
--
-- Who wrote a row: added_by is set to current_user by the trigger at every INSERT and
-- UPDATE (whatever the statement says), so authorship cannot be forged; added_at the
-- same. What may be stored: one statement the engine's parser reads
-- (grid.check_example), checked by the same trigger.
CREATE TABLE grid.examples (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    question text NOT NULL,
    sql text NOT NULL,
    added_by name NOT NULL DEFAULT current_user,
    added_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE grid.examples IS
    'grid_pg: curated question/SQL pairs grid.ask may show the model; written by members of grid_curator';

CREATE FUNCTION grid.examples_stamp() RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $stamp$
BEGIN
    PERFORM grid.check_example(NEW.question, NEW.sql);
    NEW.added_by := current_user;
    NEW.added_at := pg_catalog.now();
    RETURN NEW;
END
$stamp$;
COMMENT ON FUNCTION grid.examples_stamp() IS
    'Trigger of grid.examples: refuses SQL the engine cannot parse and records who wrote the row.';

CREATE TRIGGER examples_stamp BEFORE INSERT OR UPDATE ON grid.examples
    FOR EACH ROW EXECUTE FUNCTION grid.examples_stamp();

REVOKE ALL ON grid.examples FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON grid.examples TO grid_curator;
GRANT USAGE ON SCHEMA grid TO grid_curator;

-- Curated rows are the DBA's data: pg_dump keeps them.
SELECT pg_catalog.pg_extension_config_dump('grid.examples', '');
