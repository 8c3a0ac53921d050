-- Descriptions written for the model: a note on a relation or one of its columns that
-- grid.ask() shows in the prompt where the catalog's COMMENT ON text would be, in its
-- place (src/descriptions.rs; docs/postgres.md "Descriptions", docs/security.md). They
-- live beside the catalog, so that a DBA need not change the comments other tools read.
--
-- Who may write: grid.describe(relation, column_name, description) only, for a caller
-- who may COMMENT ON the relation (its owner, or a role that may act as the owner; a
-- superuser) or who holds the privileges of grid_curator. The function checks that as
-- the caller, then writes as the table's owner; no role is granted the table itself.
-- Members of grid_curator may read it, to keep it (as grid.examples).
--
-- Who may be shown a row: an asker whose catalog snapshot lists the relation (for a
-- column's row: the column), and only when the row's author (added_by, the role that
-- called grid.describe) is one the asker trusts (grid.trusted_author,
-- sql/provenance.sql). Anything else is dropped silently at each ask.
--
-- Keys: the relation by oid (regclass follows ALTER ... RENAME and SET SCHEMA, and dumps
-- as its name), the column by name (NULL for the relation itself; a renamed column's
-- description stays under the old name and is no longer shown). Dropping a relation or
-- a column deletes its descriptions (the event trigger below), so that none outlives
-- what it described or attaches to a later object that reuses the oid.
CREATE TABLE grid.descriptions (
    relation regclass NOT NULL,
    column_name name,
    description text NOT NULL,
    added_by name NOT NULL DEFAULT current_user,
    added_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    UNIQUE NULLS NOT DISTINCT (relation, column_name)
);
COMMENT ON TABLE grid.descriptions IS
    'grid_pg: descriptions of relations and columns written for the model (grid.describe); shown in place of the comment to askers who may see the object';

REVOKE ALL ON grid.descriptions FROM PUBLIC;
GRANT SELECT ON grid.descriptions TO grid_curator;

-- Descriptions are the DBA's data: pg_dump keeps them (a relation is dumped by name, so
-- restore the relations they describe with them).
SELECT pg_catalog.pg_extension_config_dump('grid.descriptions', '');

-- Forgets the descriptions of dropped relations and columns (DROP TABLE, DROP SCHEMA
-- ... CASCADE, ALTER TABLE ... DROP COLUMN, by any role). A C function: it deletes as
-- the table's owner, whoever dropped, and only rows of objects the command dropped.
CREATE FUNCTION grid.forget_descriptions() RETURNS event_trigger
LANGUAGE c
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'grid_forget_descriptions';
COMMENT ON FUNCTION grid.forget_descriptions() IS
    'Event trigger of grid_pg: deletes the descriptions of dropped relations and columns.';

CREATE EVENT TRIGGER grid_forget_descriptions ON sql_drop
    EXECUTE FUNCTION grid.forget_descriptions();
