-- What scripts/demo.sh --check asks of a real model's answers: checked on the rows, not
-- on the SQL text. Loaded into the demo database by the superuser, after the session.
--
-- demo_check.answers(role, question, gold): the statement the model last returned to
-- `role` for `question` (grid.generations: final_sql of the last generation that was not
-- refused) and `gold` are both run as `role`, read-only; the answer holds when both
-- return as many rows and every column of the gold's result is a column of the model's
-- (the same multiset of values; numbers compared to two decimals, text as written).
-- Extra columns are allowed (a model that shows the order id beside the name is right),
-- and row order is not compared.
CREATE SCHEMA demo_check;

-- One column of a result as a sorted array of normalised texts.
CREATE FUNCTION demo_check.columns(rows jsonb)
RETURNS TABLE (name text, vals text[])
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT key, array_agg(v ORDER BY v)
      FROM (SELECT e.key,
                   CASE jsonb_typeof(e.value)
                       WHEN 'number' THEN round(e.value::text::numeric, 2)::text
                       WHEN 'null' THEN NULL
                       ELSE e.value #>> '{}' END AS v
              FROM jsonb_array_elements(rows) AS r(row), jsonb_each(r.row) AS e) AS c
     GROUP BY key
$$;

-- The rows of `sql` run as `role`, read-only, as a jsonb array of objects.
CREATE FUNCTION demo_check.rows_as(role name, sql text)
RETURNS jsonb
LANGUAGE plpgsql
SET search_path = public, pg_catalog, pg_temp
AS $$
DECLARE
    out jsonb;
BEGIN
    EXECUTE format('SET LOCAL ROLE %I', role);
    SET LOCAL transaction_read_only = on;
    EXECUTE format('SELECT coalesce(jsonb_agg(to_jsonb(t)), ''[]'') FROM (%s) AS t', sql) INTO out;
    RESET ROLE;
    RETURN out;
END
$$;

CREATE FUNCTION demo_check.answers(role name, question text, gold text)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    said text;
    got jsonb;
    want jsonb;
    missing text;
BEGIN
    SELECT g.final_sql INTO said
      FROM grid.generations AS g
     WHERE g.current_user_name = role AND g.question = answers.question
       AND g.refused IS NULL AND g.final_sql IS NOT NULL
     ORDER BY g.seal_index DESC LIMIT 1;
    IF said IS NULL THEN
        RETURN 'no statement was returned';
    END IF;
    BEGIN
        got := demo_check.rows_as(role, said);
    EXCEPTION WHEN OTHERS THEN
        RETURN format('%s fails: %s', said, SQLERRM);
    END;
    want := demo_check.rows_as(role, gold);
    IF jsonb_array_length(got) <> jsonb_array_length(want) THEN
        RETURN format('%s returns %s rows, the answer has %s', said,
                      jsonb_array_length(got), jsonb_array_length(want));
    END IF;
    SELECT string_agg(w.name, ', ') INTO missing
      FROM demo_check.columns(want) AS w
     WHERE NOT EXISTS (SELECT 1 FROM demo_check.columns(got) AS g WHERE g.vals = w.vals);
    IF missing IS NOT NULL THEN
        RETURN format('%s: no column holds the answer''s %s (got %s)', said, missing, got);
    END IF;
    RETURN 'ok';
END
$$;
