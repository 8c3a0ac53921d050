SELECT * FROM dogs
select name, age from dogs where age > '3';
SELECT d.* FROM dogs AS d
SELECT d.name, o.first_name FROM dogs d, owners o WHERE d.owner_id = o.owner_id
SELECT DISTINCT breed_code FROM dogs ORDER BY breed_code
SELECT DISTINCT ON (owner_id) owner_id, name, date_of_birth FROM dogs ORDER BY owner_id, date_of_birth DESC
SELECT ALL name FROM dogs
SELECT name AS dog_name, age dog_age FROM dogs
SELECT 1
SELECT 1 + 2 * 3 - 4 / 2 % 3 + 2 ^ 2
SELECT -dog_id, +dog_id, - -dog_id FROM dogs
SELECT first_name || ' ' || last_name AS full_name FROM owners
SELECT 'it''s', E'line\nbreak', E'quote''s', 'a' FROM owners
SELECT 42, 3.14, .5, 1., 1e5, 1.5E-3, 2e+10 FROM dogs
SELECT TRUE, FALSE, NULL
SELECT d.name, b.breed_name FROM dogs AS d JOIN breeds AS b ON d.breed_code = b.breed_code
SELECT d.name, b.breed_name FROM dogs d INNER JOIN breeds b ON d.breed_code = b.breed_code
SELECT o.first_name, d.name FROM owners o LEFT JOIN dogs d ON o.owner_id = d.owner_id
SELECT o.first_name, d.name FROM owners o LEFT OUTER JOIN dogs d ON o.owner_id = d.owner_id
SELECT o.first_name, d.name FROM dogs d RIGHT JOIN owners o ON o.owner_id = d.owner_id
SELECT o.first_name, d.name FROM dogs d RIGHT OUTER JOIN owners o ON o.owner_id = d.owner_id
SELECT o.first_name, d.name FROM dogs d FULL JOIN owners o ON o.owner_id = d.owner_id
SELECT o.first_name, d.name FROM dogs d FULL OUTER JOIN owners o ON o.owner_id = d.owner_id
SELECT s.size_code, b.breed_code FROM sizes s CROSS JOIN breeds b
SELECT * FROM dogs NATURAL JOIN owners
SELECT * FROM dogs NATURAL LEFT JOIN owners
SELECT * FROM dogs NATURAL INNER JOIN breeds NATURAL FULL OUTER JOIN sizes
SELECT * FROM dogs JOIN owners USING (owner_id)
SELECT * FROM treatments t JOIN dogs d USING (dog_id) JOIN professionals p USING (professional_id)
SELECT * FROM (dogs d JOIN owners o ON d.owner_id = o.owner_id)
SELECT x.name FROM (dogs d JOIN owners o ON d.owner_id = o.owner_id) AS x
SELECT * FROM ((dogs d JOIN breeds b ON d.breed_code = b.breed_code) JOIN sizes s ON d.size_code = s.size_code)
SELECT * FROM dogs d JOIN (owners o JOIN professionals p ON o.city = p.city) ON d.owner_id = o.owner_id
SELECT t.dog_id, t.cost_of_treatment, p.last_name FROM treatments t JOIN professionals p ON t.professional_id = p.professional_id AND p.state = 'Indiana' WHERE t.cost_of_treatment::numeric > 500
SELECT a.name, b.name FROM dogs a, dogs b, owners c WHERE a.owner_id = b.owner_id AND a.dog_id < b.dog_id AND c.owner_id = a.owner_id
SELECT age FROM (SELECT name AS age FROM dogs) AS sub
SELECT name FROM (SELECT name FROM dogs) sub (name)
SELECT name, age FROM (SELECT name, age FROM dogs) AS sub(name, age) WHERE age > '2'
SELECT count(*) FROM (SELECT owner_id FROM dogs GROUP BY owner_id HAVING count(*) > 1) AS t
SELECT o.first_name, x.dog_id FROM owners o, LATERAL (SELECT count(*) AS dog_id FROM dogs d WHERE d.owner_id = o.owner_id) AS x
SELECT name FROM dogs WHERE owner_id IN (SELECT owner_id FROM owners WHERE state = 'Virginia')
SELECT name FROM dogs WHERE owner_id NOT IN (SELECT owner_id FROM owners WHERE state = 'Virginia')
SELECT name FROM dogs WHERE breed_code IN ('BUL', 'ESK', 'HUS')
SELECT name FROM dogs WHERE breed_code NOT IN ('BUL', 'ESK')
SELECT name, (SELECT count(*) FROM treatments t WHERE t.dog_id = dogs.dog_id) AS treatment_count FROM dogs
SELECT owner_id, count(*) FROM dogs GROUP BY owner_id HAVING count(*) > (SELECT avg(dog_id) FROM (SELECT count(*) AS dog_id FROM dogs GROUP BY owner_id) AS z)
SELECT name FROM dogs WHERE EXISTS (SELECT 1 FROM treatments t WHERE t.dog_id = dogs.dog_id)
SELECT name FROM dogs d WHERE NOT EXISTS (SELECT * FROM treatments t WHERE t.dog_id = d.dog_id)
SELECT name FROM dogs WHERE age::int > ANY (SELECT age::int FROM dogs WHERE breed_code = 'HUS')
SELECT name FROM dogs WHERE age::int >= ALL (SELECT age::int FROM dogs)
SELECT name FROM dogs WHERE owner_id = SOME (SELECT owner_id FROM owners)
SELECT name FROM dogs WHERE owner_id <> ANY (SELECT owner_id FROM owners WHERE city = 'Lake Tia')
SELECT name FROM dogs WHERE dog_id = ANY (ARRAY[1, 2, 3])
SELECT name FROM dogs WHERE (owner_id, breed_code) IN (SELECT owner_id, breed_code FROM dogs WHERE age = '2')
SELECT name FROM dogs WHERE ROW(owner_id, size_code) = ROW(3, 'LGE')
SELECT name FROM dogs WHERE (owner_id, size_code) = (3, 'LGE')
WITH busy AS (SELECT professional_id, max(cost_of_treatment) AS cost_of_treatment FROM treatments GROUP BY professional_id) SELECT p.first_name, b.cost_of_treatment FROM professionals p JOIN busy b ON p.professional_id = b.professional_id
WITH a AS (SELECT dog_id FROM treatments), b AS (SELECT dog_id FROM a GROUP BY dog_id) SELECT count(*) FROM b
WITH t (dog_id, cost_of_treatment) AS (SELECT dog_id, sum(cost_of_treatment::numeric) FROM treatments GROUP BY dog_id) SELECT dog_id FROM t WHERE cost_of_treatment > 1000
WITH RECURSIVE nums (dog_id) AS (SELECT 1 UNION ALL SELECT dog_id + 1 FROM nums WHERE dog_id < 10) SELECT dog_id FROM nums
WITH m AS MATERIALIZED (SELECT * FROM dogs) SELECT name FROM m
WITH m AS NOT MATERIALIZED (SELECT * FROM dogs) SELECT m2.name FROM m AS m2 JOIN owners o ON true
WITH cheap AS (SELECT * FROM charges WHERE charge_amount::numeric < 300) SELECT * FROM cheap c JOIN cheap d ON c.charge_id < d.charge_id
SELECT name FROM dogs WHERE dog_id IN (WITH x AS (SELECT dog_id FROM treatments) SELECT dog_id FROM x)
SELECT * FROM (WITH x AS (SELECT 1 AS dog_id) SELECT dog_id FROM x) AS y
WITH x AS (SELECT 1 AS age) SELECT age FROM x UNION SELECT 2 ORDER BY 1 LIMIT 5
SELECT first_name FROM owners UNION SELECT first_name FROM professionals
SELECT first_name FROM owners UNION ALL SELECT first_name FROM professionals
SELECT first_name FROM owners UNION DISTINCT SELECT first_name FROM professionals ORDER BY first_name
SELECT state FROM owners INTERSECT SELECT state FROM professionals
SELECT state FROM owners INTERSECT ALL SELECT state FROM professionals
SELECT state FROM owners EXCEPT SELECT state FROM professionals
SELECT state FROM owners EXCEPT ALL SELECT state FROM professionals
(SELECT city FROM owners) UNION (SELECT city FROM professionals) ORDER BY city
(SELECT city FROM owners ORDER BY city LIMIT 3) UNION ALL (SELECT city FROM professionals ORDER BY city DESC LIMIT 3)
SELECT city FROM owners UNION SELECT city FROM professionals INTERSECT SELECT city FROM owners
((SELECT 1))
SELECT breed_code, count(*), avg(age::int), min(weight), max(weight), sum(dog_id) FROM dogs GROUP BY breed_code
SELECT breed_code, size_code, count(*) FROM dogs GROUP BY breed_code, size_code HAVING count(*) >= 2 AND max(age) > '1'
SELECT breed_code, size_code, count(*) FROM dogs GROUP BY ROLLUP (breed_code, size_code)
SELECT breed_code, size_code, count(*) FROM dogs GROUP BY CUBE (breed_code, size_code)
SELECT breed_code, size_code, count(*) FROM dogs GROUP BY GROUPING SETS ((breed_code), (size_code), ())
SELECT breed_code, GROUPING(breed_code) FROM dogs GROUP BY ROLLUP (breed_code)
SELECT name FROM dogs ORDER BY age DESC, name ASC
SELECT name FROM dogs ORDER BY date_adopted DESC NULLS LAST, name NULLS FIRST
SELECT name FROM dogs ORDER BY 1 LIMIT 10
SELECT name FROM dogs ORDER BY 1 LIMIT ALL
SELECT name FROM dogs ORDER BY 1 LIMIT 10 OFFSET 20
SELECT name FROM dogs ORDER BY 1 OFFSET 20 LIMIT 10
SELECT name FROM dogs ORDER BY 1 OFFSET 5 ROWS
SELECT name FROM dogs ORDER BY 1 OFFSET 1 ROW FETCH NEXT 1 ROW ONLY
SELECT name FROM dogs ORDER BY 1 FETCH FIRST 3 ROWS ONLY
SELECT name FROM dogs ORDER BY age FETCH FIRST ROW ONLY
SELECT name FROM dogs ORDER BY age FETCH FIRST 2 ROWS WITH TIES
SELECT CASE WHEN age::int > 5 THEN 'old' WHEN age::int > 2 THEN 'adult' ELSE 'young' END AS bracket FROM dogs
SELECT CASE gender WHEN '1' THEN 'male' WHEN '0' THEN 'female' END FROM dogs
SELECT sum(CASE WHEN abandoned_yn = '1' THEN 1 ELSE 0 END) FROM dogs
SELECT CAST(age AS integer), CAST(weight AS numeric(10,2)), CAST(name AS varchar(20)) FROM dogs
SELECT CAST(weight AS double precision), CAST(age AS bigint), CAST(age AS smallint), CAST(age AS int) FROM dogs
SELECT CAST(weight AS real), CAST(weight AS float), CAST(weight AS float(24)), CAST(weight AS decimal(8, 3)) FROM dogs
SELECT CAST(name AS character varying(20)), CAST(name AS character(3)), CAST(name AS char), CAST(name AS text) FROM dogs
SELECT CAST(date_arrived AS timestamp with time zone), CAST(date_arrived AS timestamp without time zone), CAST(date_arrived AS date) FROM dogs
SELECT date_arrived::timestamp, date_arrived::date, date_arrived::time, '1 day'::interval, abandoned_yn::boolean FROM dogs
SELECT age::integer, weight::numeric, weight::numeric(6,1), name::text, name::varchar(5), '{a,b}'::text[], '{1,2}'::int[] FROM dogs
SELECT '{"a": 1}'::jsonb, weight::double precision, date_arrived::timestamp(0) without time zone FROM dogs
SELECT COALESCE(date_adopted, date_departed, 'never') FROM dogs
SELECT NULLIF(weight, '0'), GREATEST(1, 2, 3), LEAST(age, weight) FROM dogs
SELECT now(), abs(-1), round(2.5)
SELECT lower(name), upper(name), length(name), round(weight::numeric, 1) FROM dogs
SELECT count(DISTINCT breed_code), count(ALL breed_code) FROM dogs
SELECT string_agg(name, ', ' ORDER BY name) FROM dogs
SELECT owner_id, array_agg(DISTINCT breed_code ORDER BY breed_code DESC) FROM dogs GROUP BY owner_id
SELECT count(*) FILTER (WHERE gender = '1') AS males, count(*) FILTER (WHERE gender = '0') AS females FROM dogs
SELECT rank('3') WITHIN GROUP (ORDER BY age) FROM dogs
SELECT name, row_number() OVER (ORDER BY age) FROM dogs
SELECT name, rank() OVER (PARTITION BY breed_code ORDER BY weight DESC) AS r FROM dogs
SELECT name, sum(weight::numeric) OVER (PARTITION BY owner_id ORDER BY dog_id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) FROM dogs
SELECT name, avg(weight::numeric) OVER (ORDER BY dog_id ROWS BETWEEN 2 PRECEDING AND 2 FOLLOWING) FROM dogs
SELECT name, count(*) OVER (ORDER BY dog_id RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) FROM dogs
SELECT name, count(*) OVER (ORDER BY dog_id GROUPS BETWEEN 1 PRECEDING AND 1 FOLLOWING) FROM dogs
SELECT name, max(age) OVER (ORDER BY dog_id ROWS UNBOUNDED PRECEDING) FROM dogs
SELECT name, max(age) OVER (ORDER BY dog_id ROWS 3 PRECEDING) FROM dogs
SELECT name, count(*) OVER () FROM dogs
SELECT name, lag(name) OVER w, lead(name, 1) OVER w FROM dogs WINDOW w AS (PARTITION BY owner_id ORDER BY dog_id)
SELECT name, sum(dog_id) OVER w, max(age) OVER v FROM dogs WINDOW w AS (ORDER BY dog_id), v AS (PARTITION BY owner_id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)
SELECT EXTRACT(YEAR FROM date_arrived::date), EXTRACT(epoch FROM now()), EXTRACT('month' FROM current_date) FROM dogs
SELECT date_part('year', date_arrived::timestamp), date_trunc('month', date_arrived::timestamp) FROM dogs
SELECT name FROM dogs WHERE age BETWEEN '2' AND '5'
SELECT name FROM dogs WHERE dog_id NOT BETWEEN 3 AND 7
SELECT name FROM dogs WHERE dog_id BETWEEN (age < 3)::int AND 3
SELECT name FROM dogs WHERE dog_id BETWEEN 1 + 1 AND 10 - 1 AND name IS NOT NULL
SELECT name FROM dogs WHERE name LIKE 'B%' OR name NOT LIKE '%y'
SELECT name FROM dogs WHERE name ILIKE 'b%' AND name NOT ILIKE '%Y'
SELECT name FROM dogs WHERE name LIKE '10!%%' ESCAPE '!'
SELECT name FROM dogs WHERE name SIMILAR TO '(B|K)%'
SELECT name FROM dogs WHERE date_adopted IS NULL AND date_departed IS NOT NULL
SELECT name FROM dogs WHERE date_adopted IS NULL OR date_departed IS NOT NULL
SELECT name, date_adopted ISNULL AS waiting FROM dogs WHERE date_departed NOTNULL ORDER BY date_adopted isnull, name
SELECT name FROM dogs WHERE NOT date_adopted ISNULL AND (SELECT max(age) FROM dogs) NOTNULL
SELECT name FROM dogs WHERE (age > '3') IS TRUE OR (age > '3') IS NOT FALSE
SELECT name FROM dogs WHERE (age > '3') IS NOT TRUE AND (age > '3') IS FALSE OR (age > '3') IS UNKNOWN OR (age > '3') IS NOT UNKNOWN
SELECT name FROM dogs WHERE date_adopted IS DISTINCT FROM date_departed OR date_adopted IS NOT DISTINCT FROM date_arrived
SELECT name FROM dogs WHERE NOT (age = '1' OR age = '2') AND weight <> '0' AND weight != '1'
SELECT name FROM dogs WHERE dog_id < 5 AND dog_id <= 4 OR dog_id > 10 AND dog_id >= 11
SELECT DATE '2024-01-01', TIMESTAMP '2024-01-01 10:00:00', TIME '10:00', INTERVAL '1 day', TIMESTAMP WITH TIME ZONE '2024-01-01 00:00+00'
SELECT name FROM dogs WHERE date_arrived::date > CURRENT_DATE - INTERVAL '30 days'
SELECT CURRENT_DATE, CURRENT_TIMESTAMP, CURRENT_TIME, LOCALTIMESTAMP, LOCALTIME, CURRENT_TIMESTAMP(3)
SELECT now() AT TIME ZONE 'UTC'
SELECT SUBSTRING(name FROM 1 FOR 3), SUBSTRING(name, 2), TRIM(BOTH ' ' FROM name), TRIM(name), TRIM(LEADING name), TRIM(' ' FROM name), TRIM(name, ' '), POSITION('a' IN name) FROM dogs
SELECT ARRAY[1, 2, 3], ARRAY(SELECT dog_id FROM dogs)
SELECT * FROM (VALUES (1, 'one'), (2, 'two')) AS v (num, word)
SELECT "name", "dogs"."age" FROM "dogs"
SELECT T1.name FROM dogs AS T1 JOIN owners AS T2 ON T1.owner_id = T2.owner_id WHERE T2.state = 'Arizona' -- trailing comment
SELECT /* inline comment */ name FROM dogs
SeLeCt NaMe FrOm DoGs WhErE aGe = '2' oRdEr By NaMe DeSc LiMiT 1
SELECT name first, age AS last, weight position FROM dogs time WHERE time.age > '1' ORDER BY time.name;
INSERT INTO breeds VALUES ('NEW', 'Newfie')
INSERT INTO breeds (breed_code, breed_name) VALUES ('POO', 'Poodle'), ('LAB', 'Labrador');
INSERT INTO dogs (dog_id, owner_id, breed_code, size_code, name, abandoned_yn) VALUES (100, 1, 'BUL', 'LGE', 'Rex', DEFAULT)
INSERT INTO charges (charge_id, charge_type, charge_amount) SELECT charge_id + 100, charge_type, charge_amount FROM charges WHERE charge_type = 'Daily Accommodation'
INSERT INTO charges (charge_id, charge_type, charge_amount) (SELECT 9, 'x', '1')
INSERT INTO charges SELECT * FROM charges WHERE charge_id < 0 RETURNING charge_id
INSERT INTO sizes DEFAULT VALUES
INSERT INTO sizes AS s (size_code, size_description) VALUES ('XL', 'Extra') ON CONFLICT DO NOTHING
INSERT INTO sizes (size_code, size_description) VALUES ('XL', 'Extra') ON CONFLICT (size_code) DO NOTHING RETURNING *
INSERT INTO owners (owner_id, first_name) WITH x AS (SELECT max(owner_id) + 1 AS owner_id FROM owners) SELECT owner_id, 'New' FROM x
INSERT INTO treatments (treatment_id, dog_id, professional_id, treatment_type_code, cost_of_treatment) VALUES (99, 1, 2, 'WALK', (-(5 * 2))::text) RETURNING treatment_id AS id, cost_of_treatment
UPDATE dogs SET name = 'Max' WHERE dog_id = 1
UPDATE dogs SET name = upper(name), weight = DEFAULT WHERE age = '2';
UPDATE dogs AS d SET abandoned_yn = '1' FROM owners o WHERE d.owner_id = o.owner_id AND o.state = 'Ohio'
UPDATE dogs d SET (name, age) = ('Bo', '3') WHERE d.dog_id = 2
UPDATE dogs SET (name, age) = ROW('Bo', DEFAULT) WHERE dog_id = 2
UPDATE dogs SET (name, age) = (SELECT first_name, '1' FROM owners WHERE owner_id = dogs.owner_id)
UPDATE charges SET charge_amount = (SELECT max(charge_amount) FROM charges) WHERE charge_id IN (SELECT charge_id FROM charges WHERE charge_type LIKE 'D%') RETURNING *
DELETE FROM dogs WHERE dog_id = 100
DELETE FROM treatments;
DELETE FROM dogs AS d USING owners o WHERE d.owner_id = o.owner_id AND o.state = 'Texas' RETURNING d.dog_id
DELETE FROM treatments t WHERE t.dog_id NOT IN (SELECT dog_id FROM dogs) RETURNING t.*
DELETE FROM treatments WHERE EXISTS (SELECT 1 FROM dogs WHERE dogs.dog_id = treatments.dog_id AND dogs.date_departed IS NOT NULL)
SELECT left(first_name, 1), right(last_name, 2), LEFT(first_name, 3) FROM owners
SELECT name FROM dogs WHERE name LIKE ANY (ARRAY['B%', 'K%']) OR name NOT ILIKE ALL (ARRAY['%a%', '%e%'])
SELECT name FROM dogs ORDER BY age OFFSET 1 ROWS FETCH FIRST 2 ROWS WITH TIES
SELECT name FROM dogs WHERE name LIKE ANY (SELECT name FROM owners) AND name NOT ILIKE ALL ((SELECT last_name FROM owners))
(SELECT name FROM dogs ORDER BY name) UNION (SELECT first_name FROM owners LIMIT 1) ORDER BY 1 LIMIT 2
((SELECT name FROM dogs)) ORDER BY name LIMIT 1
WITH x AS (SELECT name FROM dogs) (SELECT name FROM x) ORDER BY name
SELECT count(*) AS n, owner_id FROM dogs GROUP BY owner_id ORDER BY n DESC
SELECT a.n FROM owners o JOIN (SELECT owner_id, count(*) AS n FROM dogs GROUP BY owner_id) AS a ON a.owner_id = o.owner_id WHERE a.n > 1
WITH c AS (SELECT owner_id, count(*) AS n FROM dogs GROUP BY owner_id) SELECT max(n) FROM c
SELECT name FROM dogs WHERE DATE(date_adopted) > '2018-01-01'
