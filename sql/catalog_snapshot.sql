-- The query of grid.catalog_snapshot(search_path) (src/catalog.rs loads it with
-- include_str!, and grid.ask() runs it too, as the caller, so that EXECUTE on
-- grid.ask() alone lets a role ask): what the calling role may use, as one json
-- document (format 1, deserialized by grid_core::catalog::CatalogSnapshot; the function
-- returns it as jsonb). It becomes the role's L2 projection and L3 lexicons, and the
-- prompt's DDL. Its one parameter, $1 (text[]), is the caller's search path; run it under the pinned
-- search_path (pg_catalog, pg_temp), as the function does.
--
-- SECURITY INVOKER: every has_*_privilege call below answers for the caller, so
-- GRANT and REVOKE shape the snapshot at the very next call.
--
-- The search_path is pinned like every grid function, which hides the caller's
-- own path inside the function. The caller's path therefore comes in as an
-- argument whose default, current_schemas(false), is evaluated in the caller's
-- context before the function's SET clause applies.
--
-- What appears:
--   * relations (tables, partitioned tables, views, materialized views, foreign
--     tables) in ordinary user schemas the caller has USAGE on, on which the
--     caller holds SELECT, INSERT, UPDATE or DELETE, or a column privilege;
--     pg_catalog, information_schema, TOAST and temporary schemas and the
--     extension's own schema grid never appear;
--   * of those, the columns the caller holds a column privilege on;
--   * only objects the caller can trust (docs/security.md, "Whose objects"): a
--     relation whose owner is an author the caller trusts (grid.trusted_author,
--     sql/provenance.sql: the caller, superusers, grid_curator members), and whose
--     code (a view's query, row-security policies, triggers, column defaults and
--     generation expressions, check constraints) names no function, operator, type or
--     relation owned by anyone else; of it, the columns whose type's owner is trusted.
--     Another role's view, policy or function carries code that PostgreSQL would run
--     as the caller (at plan time, for a STABLE function in a policy), and another
--     role's names and sizes would reach the caller's prompt and lexicon: objects
--     the caller was granted by an untrusted role are not in its language at all;
--   * comments (of relations and columns): their author is the relation's owner,
--     trusted by the rule above, so another role's words never reach the prompt;
--   * a primary key or foreign key only when every column it names (on both
--     sides, for a foreign key) appears: a key over hidden columns would leak
--     their names into the prompt;
--   * on_search_path is true when the relation's unqualified name resolves to
--     it under the caller's path: its schema is on the path and no relation of
--     the same name comes earlier (the temporary schema and an implicit
--     pg_catalog come first, as PostgreSQL searches them).
--     The engine writes the others schema-qualified (schema.name).
-- Order: schema, name, column number. Names are the stored (case-folded) names.
--
-- A second column, left_out, says what the caller was granted but may not use for the
-- rule above: [count, up to four of their owners' names] (grid.ask tells the asker in a
-- NOTICE). It is computed here because it needs the same trusted authors and code.
WITH path AS (
    SELECT coalesce($1::pg_catalog.text[]::pg_catalog.name[], '{}'::name[]) AS schemas
),
-- Evaluated once per role, not once per object: a catalog has far fewer roles.
trusted AS (
    SELECT r.oid FROM pg_roles r WHERE grid.trusted_author(r.oid)
),
-- A relation whose code (grid.relation_code: a view's query, policies, triggers,
-- defaults, checks) names an object the caller does not trust as an author. One level
-- deep: a trusted view over an untrusted relation is out by its own row; what a
-- trusted relation reaches further is checked again, as the caller, on every
-- statement before it is planned or run (src/resolution.rs).
untrusted_code AS (
    SELECT DISTINCT rc.relid
      FROM grid.relation_code rc
     WHERE rc.owner IS NULL OR rc.owner NOT IN (SELECT oid FROM trusted)
),
candidate AS (
    SELECT c.oid, n.nspname, c.relname, c.relkind, c.relowner,
           ARRAY(SELECT p.verb
                   FROM unnest(ARRAY['select', 'insert', 'update', 'delete'])
                        WITH ORDINALITY AS p(verb, ord)
                  WHERE has_table_privilege(c.oid, p.verb)
                  ORDER BY p.ord) AS privileges,
           -- What each column without a column grant (attacl null) holds: its table's
           -- privileges, as has_column_privilege answers, asked once per relation.
           ARRAY(SELECT p.verb
                   FROM unnest(ARRAY['select', 'insert', 'update'])
                        WITH ORDINALITY AS p(verb, ord)
                  WHERE has_table_privilege(c.oid, p.verb)
                  ORDER BY p.ord) AS column_privileges
      FROM pg_class c
      JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f')
       AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'grid')
       AND n.nspname !~ '^pg_(toast|temp_|toast_temp_)'
       AND has_schema_privilege(n.oid, 'USAGE')
       AND c.relowner IN (SELECT oid FROM trusted)
       AND c.oid NOT IN (SELECT relid FROM untrusted_code)
),
-- Relations the caller holds a privilege on that the trust rule keeps out.
left_out AS (
    SELECT c.oid, c.relowner
      FROM pg_class c
      JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f')
       AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'grid')
       AND n.nspname !~ '^pg_(toast|temp_|toast_temp_)'
       AND (c.relowner NOT IN (SELECT oid FROM trusted)
            OR c.oid IN (SELECT relid FROM untrusted_code))
       AND has_schema_privilege(n.oid, 'USAGE')
       AND (has_table_privilege(c.oid, 'SELECT, INSERT, UPDATE, DELETE')
            OR has_any_column_privilege(c.oid, 'SELECT, INSERT, UPDATE'))
),
-- Per column, a privilege function is called only where a column grant exists: at tens of
-- thousands of columns, three calls for each were most of the snapshot's time. OFFSET 0
-- keeps the subquery whole, so that its privileges are computed once, not once more
-- for the filter. A comment is joined, not looked up per column (col_description).
visible_column AS MATERIALIZED (
    SELECT *
      FROM (SELECT a.attrelid, a.attnum, a.attname,
                   format_type(a.atttypid, a.atttypmod) AS type,
                   a.attnotnull,
                   d.description AS comment,
                   CASE WHEN a.attacl IS NULL THEN r.column_privileges
                        ELSE ARRAY(SELECT p.verb
                                     FROM unnest(ARRAY['select', 'insert', 'update'])
                                          WITH ORDINALITY AS p(verb, ord)
                                    WHERE has_column_privilege(a.attrelid, a.attnum, p.verb)
                                    ORDER BY p.ord)
                   END AS privileges
              FROM pg_attribute a
              JOIN candidate r ON r.oid = a.attrelid
              JOIN pg_type ty ON ty.oid = a.atttypid
              LEFT JOIN pg_description d
                ON d.objoid = a.attrelid
               AND d.classoid = 'pg_class'::regclass
               AND d.objsubid = a.attnum
             WHERE a.attnum > 0 AND NOT a.attisdropped
               AND ty.typowner IN (SELECT oid FROM trusted)
            OFFSET 0) col
     WHERE cardinality(col.privileges) > 0
),
-- Each relation's columns, aggregated in one pass: a lookup of the columns per relation
-- (a subquery correlated with the relation) scans every column of the catalog once per
-- relation, seconds at a thousand tables.
columns_of AS (
    SELECT vc.attrelid,
           json_agg(json_build_object(
               'name', vc.attname::text,
               'type', vc.type,
               'not_null', vc.attnotnull,
               'comment', vc.comment,
               'privileges', to_json(vc.privileges))
           ORDER BY vc.attnum) AS columns
      FROM visible_column vc
     GROUP BY vc.attrelid
),
visible_relation AS (
    SELECT r.*, co.columns
      FROM candidate r
      LEFT JOIN columns_of co ON co.attrelid = r.oid
     WHERE cardinality(r.privileges) > 0
        OR co.attrelid IS NOT NULL
),
primary_key AS (
    SELECT con.conrelid,
           array_agg(a.attname::text ORDER BY k.ord) AS columns
      FROM pg_constraint con
      CROSS JOIN LATERAL unnest(con.conkey) WITH ORDINALITY AS k(attnum, ord)
      JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum
      LEFT JOIN visible_column vc ON vc.attrelid = con.conrelid AND vc.attnum = k.attnum
     WHERE con.contype = 'p'
       AND con.conrelid IN (SELECT oid FROM visible_relation)
     GROUP BY con.oid, con.conrelid
    HAVING bool_and(vc.attrelid IS NOT NULL)
),
foreign_key AS (
    SELECT con.conrelid, con.conname, rn.nspname AS ref_schema, rc.relname AS ref_table,
           array_agg(a.attname::text ORDER BY k.ord) AS columns,
           array_agg(ra.attname::text ORDER BY k.ord) AS ref_columns
      FROM pg_constraint con
      JOIN pg_class rc ON rc.oid = con.confrelid
      JOIN pg_namespace rn ON rn.oid = rc.relnamespace
      CROSS JOIN LATERAL unnest(con.conkey, con.confkey) WITH ORDINALITY AS k(attnum, refnum, ord)
      JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum
      JOIN pg_attribute ra ON ra.attrelid = con.confrelid AND ra.attnum = k.refnum
      LEFT JOIN visible_column vc ON vc.attrelid = con.conrelid AND vc.attnum = k.attnum
      LEFT JOIN visible_column rvc ON rvc.attrelid = con.confrelid AND rvc.attnum = k.refnum
     WHERE con.contype = 'f'
       AND con.conrelid IN (SELECT oid FROM visible_relation)
     GROUP BY con.oid, con.conrelid, con.conname, rn.nspname, rc.relname
    HAVING bool_and(vc.attrelid IS NOT NULL AND rvc.attrelid IS NOT NULL)
),
foreign_keys_of AS (
    SELECT fk.conrelid,
           json_agg(json_build_object(
               'columns', to_json(fk.columns),
               'ref_schema', fk.ref_schema::text,
               'ref_table', fk.ref_table::text,
               'ref_columns', to_json(fk.ref_columns))
           ORDER BY fk.conname) AS foreign_keys
      FROM foreign_key fk
     GROUP BY fk.conrelid
)
SELECT json_build_object(
    'format', 1,
    'role', current_user::text,
    'search_path', to_json((SELECT schemas::text[] FROM path)),
    'relations', coalesce((
        SELECT json_agg(json_build_object(
                   'schema', r.nspname::text,
                   'name', r.relname::text,
                   'kind', CASE r.relkind
                               WHEN 'v' THEN 'view'
                               WHEN 'm' THEN 'materialized_view'
                               WHEN 'f' THEN 'foreign_table'
                               ELSE 'table'
                           END,
                   'on_search_path',
                       array_position((SELECT schemas FROM path), r.nspname) IS NOT NULL
                       AND NOT EXISTS (
                           SELECT 1
                             FROM pg_class c2
                             JOIN pg_namespace n2 ON n2.oid = c2.relnamespace
                            WHERE c2.relname = r.relname
                              AND c2.oid <> r.oid
                              AND (n2.oid = pg_my_temp_schema()
                                   OR (n2.nspname = 'pg_catalog'
                                       AND array_position((SELECT schemas FROM path), 'pg_catalog') IS NULL)
                                   OR array_position((SELECT schemas FROM path), n2.nspname)
                                      < array_position((SELECT schemas FROM path), r.nspname))),
                   'comment', obj_description(r.oid, 'pg_class'),
                   'privileges', to_json(r.privileges),
                   'columns', coalesce(r.columns, '[]'::json),
                   'primary_key', coalesce(to_json(pk.columns), '[]'::json),
                   'foreign_keys', coalesce(fko.foreign_keys, '[]'::json))
               ORDER BY r.nspname, r.relname)
          FROM visible_relation r
          LEFT JOIN primary_key pk ON pk.conrelid = r.oid
          LEFT JOIN foreign_keys_of fko ON fko.conrelid = r.oid), '[]'::json)) AS snapshot,
       json_build_array(
           (SELECT count(*) FROM left_out),
           (SELECT coalesce(json_agg(o.rolname ORDER BY o.rolname), '[]')
              FROM (SELECT DISTINCT pg_get_userbyid(l.relowner)::text AS rolname
                      FROM left_out l ORDER BY 1 LIMIT 4) o)) AS left_out
