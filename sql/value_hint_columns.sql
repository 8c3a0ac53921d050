-- The columns whose values grid.ask() may show the model (value hints, grid.value_hints;
-- src/value_hints.rs loads it with include_str! and runs it as the caller). Its two
-- parameters: $1 (text[]) the schemas, $2 (text[]) the relation names, pairwise: the
-- relations of the caller's catalog snapshot that are tables or materialized views.
--
-- A column qualifies when:
--   * its type is of the string category (text, varchar, char, name, citext...): the
--     values a question names (a country, a status) are spelled there;
--   * the caller may SELECT it: the values are then read as the caller, under its row
--     security, so a hint never shows a row the caller could not read itself;
--   * every role that may write it (INSERT or UPDATE on it, the owner and superusers
--     included: has_column_privilege answers for them too; a member of
--     pg_write_all_data, which may write every table) is an author the caller trusts
--     (grid.trusted_author, sql/provenance.sql). Values are words their writers chose,
--     and reach the prompt under the same rule as comments: another role's row is never
--     an instruction to the caller's model. The predefined pg_* roles themselves log in
--     as nobody; their members are the writers, and are checked.
-- Row security: relrowsecurity says whether rows may differ between sessions of one
-- role (a policy may read session settings), so such values are never cached.
SELECT r.schema_name::text, c.relname::text, a.attname::text, c.relrowsecurity
  FROM unnest($1::pg_catalog.text[], $2::pg_catalog.text[]) AS r(schema_name, rel_name)
  JOIN pg_namespace n ON n.nspname = r.schema_name
  JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = r.rel_name
  JOIN pg_attribute a ON a.attrelid = c.oid
  JOIN pg_type t ON t.oid = a.atttypid
 WHERE c.relkind IN ('r', 'p', 'm')
   AND a.attnum > 0 AND NOT a.attisdropped
   AND t.typcategory = 'S'
   AND has_column_privilege(c.oid, a.attnum, 'SELECT')
   AND NOT EXISTS (
       SELECT 1
         FROM pg_roles w
        WHERE w.rolname !~ '^pg_'
          AND (has_column_privilege(w.oid, c.oid, a.attnum, 'INSERT')
               OR has_column_privilege(w.oid, c.oid, a.attnum, 'UPDATE')
               OR pg_has_role(w.oid, 'pg_write_all_data', 'MEMBER'))
          AND NOT grid.trusted_author(w.oid))
 ORDER BY r.schema_name, c.relname, a.attnum
