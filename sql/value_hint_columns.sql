-- The columns whose values grid.ask() may show the model (value hints, grid.value_hints;
-- src/value_hints.rs loads it with include_str! and runs it as the caller). Its three
-- parameters, $1, $2, $3 (text[]), are the schemas, relation names and column names,
-- elementwise: the columns of the caller's catalog snapshot that a curator opted in
-- (grid.show_values, a row of grid.descriptions whose author the caller trusts).
--
-- A column qualifies when, besides:
--   * its relation is a table or materialized view;
--   * its type is of the string category (text, varchar, char, name, citext...): the
--     values a question names (a country, a status) are spelled there;
--   * the caller may SELECT it: the values are then read as the caller, under its row
--     security, so a hint never shows a row the caller could not read itself.
-- Who wrote the rows is not asked: no catalog knows (docs/security.md, "Value hints").
-- Row security: relrowsecurity says whether rows may differ between sessions of one
-- role (a policy may read session settings), so such values are never cached.
SELECT r.schema_name::text, c.relname::text, a.attname::text, c.relrowsecurity
  FROM unnest($1::pg_catalog.text[], $2::pg_catalog.text[], $3::pg_catalog.text[])
       AS r(schema_name, rel_name, column_name)
  JOIN pg_namespace n ON n.nspname = r.schema_name
  JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = r.rel_name
  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = r.column_name
  JOIN pg_type t ON t.oid = a.atttypid
 WHERE c.relkind IN ('r', 'p', 'm')
   AND a.attnum > 0 AND NOT a.attisdropped
   AND t.typcategory = 'S'
   AND has_column_privilege(c.oid, a.attnum, 'SELECT')
 ORDER BY r.schema_name, c.relname, a.attnum
