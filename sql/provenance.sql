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
