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
--
-- Value hints (grid.value_hints): a column's values are shown to askers only when a
-- row here opts it in (show_values, set with grid.show_values by the same roles who may
-- describe it). Values are words whoever wrote the rows chose, and no catalog says who
-- that was (a role whose INSERT was since revoked, or one writing through a trusted
-- owner's view or SECURITY DEFINER function): so the curator, who knows the column
-- holds categories (a status, a country), decides, not a rule about who may write now.
CREATE TABLE grid.descriptions (
    relation regclass NOT NULL,
    column_name name,
    -- NULL when the row only opts the column's values in.
    description text,
    added_by name NOT NULL DEFAULT current_user,
    added_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    show_values boolean NOT NULL DEFAULT false,
    UNIQUE NULLS NOT DISTINCT (relation, column_name),
    CHECK (description IS NOT NULL OR show_values),
    CHECK (NOT show_values OR column_name IS NOT NULL)
);
COMMENT ON TABLE grid.descriptions IS
    'grid_pg: descriptions of relations and columns written for the model (grid.describe), and the columns whose values may be shown (grid.show_values); shown to askers who may see the object';

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
