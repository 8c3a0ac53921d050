-- Prompt provenance: whose words may reach an asker's prompt (docs/security.md).
--
-- Text that another role wrote (table and column comments today; descriptions and
-- examples later) is an instruction channel into the asker's model. It reaches the
-- prompt of the asker only when its author is one the asker trusts. Every source of
-- such text filters with grid.trusted_author(<author>); this is the one place the
-- rule is written.
--
-- Who the author is. PostgreSQL records no writer of a comment, but COMMENT ON
-- requires ownership of the object (column comments: of the table), so a comment was
-- written by the object's owner, by a role that may act as the owner (a member of it),
-- or by a superuser. The owner is the comment's effective author.
--
-- Whom the asker trusts, for an author role A and the asker current_user:
--   * A is the asker itself: its own words (and roles that are members of the asker
--     may already act as the asker, so they gain nothing);
--   * A is a superuser (the bootstrap superuser included): a superuser can do anything
--     the text could ask for;
--   * A is a member of grid_curator, a role the DBA grants to the roles whose words
--     they vouch for (typically the owner role of the application's schema). Granting
--     it vouches for everyone who may act as A, exactly as PostgreSQL's membership
--     does for privileges.
-- Everyone else's text is withheld: another ordinary role's comment is never shown,
-- however the asker came by its grants (the role that granted the asker a table is
-- the very role that could write the comment). Ownership cannot be used to launder
-- text: ALTER ... OWNER TO requires membership of the new owner, so only a role that
-- may already act as a trusted author can hand an object to one.
DO $curator$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'grid_curator') THEN
        CREATE ROLE grid_curator NOLOGIN;
    END IF;
END
$curator$;
COMMENT ON ROLE grid_curator IS
    'grid_pg: text (comments, descriptions, examples) by members of this role reaches every asker''s prompt';

CREATE FUNCTION grid.trusted_author(author oid) RETURNS boolean
LANGUAGE sql STABLE SECURITY INVOKER PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $trusted$
    SELECT CASE
        WHEN author IS NULL THEN false
        WHEN author = (SELECT r.oid FROM pg_roles r WHERE r.rolname = current_user) THEN true
        WHEN EXISTS (SELECT 1 FROM pg_roles r WHERE r.oid = author AND r.rolsuper) THEN true
        WHEN NOT EXISTS (SELECT 1 FROM pg_roles r WHERE r.oid = author) THEN false
        WHEN NOT EXISTS (SELECT 1 FROM pg_roles r WHERE r.rolname = 'grid_curator') THEN false
        ELSE pg_has_role(author, 'grid_curator', 'MEMBER')
    END
$trusted$;
COMMENT ON FUNCTION grid.trusted_author(oid) IS
    'Whether text written by role AUTHOR may reach the calling role''s prompt: the caller itself, a superuser, or a member of grid_curator.';

-- Whose code a relation carries: every object that the code attached to a relation
-- names (pg_depend), with that object's owner. The code attached to a relation is its
-- rewrite rules (a view's query), row-security policies, triggers, column defaults and
-- generation expressions, and check constraints: what PostgreSQL runs, as the caller,
-- when a statement reads or writes the relation (a STABLE function in a policy already
-- while the statement is planned). The objects that carry code of their own are
-- functions, operators, types (a domain's checks) and relations; a referenced object
-- of another kind has no owner here and is not listed.
--
-- The catalog snapshot (sql/catalog_snapshot.sql) leaves out a relation any of whose
-- rows here has an owner the caller does not trust; the check every statement passes
-- before it is planned or run (src/resolution.rs) reads it for the relations the
-- statement reaches. A plain view over catalogs every role may read.
CREATE VIEW grid.relation_code AS
WITH code AS (
    SELECT rw.ev_class AS relid, d.refclassid, d.refobjid
      FROM pg_catalog.pg_rewrite rw
      JOIN pg_catalog.pg_depend d
        ON d.classid = 'pg_catalog.pg_rewrite'::pg_catalog.regclass AND d.objid = rw.oid
    UNION ALL
    SELECT pol.polrelid, d.refclassid, d.refobjid
      FROM pg_catalog.pg_policy pol
      JOIN pg_catalog.pg_depend d
        ON d.classid = 'pg_catalog.pg_policy'::pg_catalog.regclass AND d.objid = pol.oid
    UNION ALL
    SELECT tg.tgrelid, d.refclassid, d.refobjid
      FROM pg_catalog.pg_trigger tg
      JOIN pg_catalog.pg_depend d
        ON d.classid = 'pg_catalog.pg_trigger'::pg_catalog.regclass AND d.objid = tg.oid
    UNION ALL
    SELECT ad.adrelid, d.refclassid, d.refobjid
      FROM pg_catalog.pg_attrdef ad
      JOIN pg_catalog.pg_depend d
        ON d.classid = 'pg_catalog.pg_attrdef'::pg_catalog.regclass AND d.objid = ad.oid
    UNION ALL
    SELECT con.conrelid, d.refclassid, d.refobjid
      FROM pg_catalog.pg_constraint con
      JOIN pg_catalog.pg_depend d
        ON d.classid = 'pg_catalog.pg_constraint'::pg_catalog.regclass AND d.objid = con.oid
     WHERE con.conrelid OPERATOR(pg_catalog.<>) 0
)
SELECT code.relid, code.refclassid, code.refobjid,
       CASE code.refclassid
           WHEN 'pg_catalog.pg_proc'::pg_catalog.regclass
               THEN (SELECT p.proowner FROM pg_catalog.pg_proc p WHERE p.oid = code.refobjid)
           WHEN 'pg_catalog.pg_operator'::pg_catalog.regclass
               THEN (SELECT o.oprowner FROM pg_catalog.pg_operator o WHERE o.oid = code.refobjid)
           WHEN 'pg_catalog.pg_type'::pg_catalog.regclass
               THEN (SELECT t.typowner FROM pg_catalog.pg_type t WHERE t.oid = code.refobjid)
           WHEN 'pg_catalog.pg_class'::pg_catalog.regclass
               THEN (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = code.refobjid)
       END AS owner
  FROM code
 WHERE code.refclassid IN ('pg_catalog.pg_proc'::pg_catalog.regclass,
                           'pg_catalog.pg_operator'::pg_catalog.regclass,
                           'pg_catalog.pg_type'::pg_catalog.regclass,
                           'pg_catalog.pg_class'::pg_catalog.regclass);
COMMENT ON VIEW grid.relation_code IS
    'grid_pg: the functions, operators, types and relations that the code attached to a relation (rules, policies, triggers, defaults, checks) names, with their owners';
GRANT SELECT ON grid.relation_code TO PUBLIC;
