-- The demo session: each role connects and asks. The model behind the reference endpoint
-- is a real one (Qwen2.5-Coder on llama.cpp), or with scripts/demo.sh --mock the scripted
-- mock (it "wants" to write the SQL in demo/script.json, but can only pick tokens the
-- role's mask allows); psql's variable :mock says which.
\set ON_ERROR_STOP off
\pset pager off

\echo '== analyst: how many employees are in each department?'
\c - analyst
SELECT grid.ask('How many employees are in each department?') AS sql;
\echo '   run exactly the statement just read, by its generation (grid.my_answers lists the'
\echo '   role''s answers); the model is not asked again:'
SELECT generation, sql FROM grid.my_answers ORDER BY generation DESC LIMIT 1;
SELECT * FROM grid.run((SELECT max(generation) FROM grid.my_answers));

\echo '== analyst: the three largest orders, with who took them'
SELECT * FROM grid.run('Show the three largest orders and who took them');

\echo '== analyst: a question nobody scripted: which employee took the most orders?'
SELECT * FROM grid.run('Which employee took the most orders?');

\echo '== analyst: two more questions nobody scripted (the model may also decline one it'
\echo '   cannot answer from the analyst''s tables: SQLSTATE P0002 and its reason, no SQL)'
SELECT * FROM grid.run('Which department has the highest total order amount?');
SELECT * FROM grid.run('What is the average order amount for each employee name?');

\echo '== analyst: what is the average salary? (the mask has no salaries for the analyst)'
-- The mask has neither the column salary nor the table salaries for the analyst: whatever
-- the model writes instead comes from the tables the analyst may read, is refused, or is
-- the model's decline (CANNOT ANSWER 'reason', which the DBA's grid.decline teaches it:
-- demo/schema.sql turns it on for the analyst).
\if :mock
-- Blocked, the scripted mock writes what the mask leaves it (a made-up qualifier,
-- salary . id), and a short budget closes the statement with the shortest legal
-- completion. The privilege check then refuses it, twice (one repair): an error, no SQL.
SET grid.max_tokens = 14;
\endif
SELECT grid.ask('What is the average salary?') AS sql;
\echo '   the steps, with how many tokens each mask allowed and blocked (a refused'
\echo '   statement is never returned, so its tokens are not shown; the auditor sees them):'
SELECT step, token, allowed, blocked, kind FROM grid.explain('What is the average salary?');
RESET grid.max_tokens;

\echo '== hr: what is the average salary?'
\c - hr
SELECT grid.ask('What is the average salary?') AS sql;
\echo '   grid.run of the question just asked runs that answer (a NOTICE says so), not a new one:'
SELECT * FROM grid.run('What is the average salary?');

\echo '== clerk: record a new order of 250 for employee 1'
\c - clerk
SELECT grid.ask('Record a new order of 250 for employee 1') AS sql;
\echo '   grid.run only runs read-only statements:'
SELECT * FROM grid.run('Record a new order of 250 for employee 1');

\echo '== curator: adds two examples to grid.examples (askers cannot read the store)'
\c - curator
INSERT INTO grid.examples (question, sql) VALUES
    ('What is the total amount of all orders?', 'SELECT sum(amount) FROM orders'),
    ('What is the highest salary?', 'SELECT max(salary) FROM salaries');
\echo '   and describes two columns for the model (the catalog comments stay as they are);'
\echo '   an asker is shown a description only of a column it may see:'
SELECT grid.describe('orders', 'employee_id', 'The employee who took the order (the salesperson)');
SELECT grid.describe('salaries', 'salary', 'Monthly gross pay in euros');

\echo '== analyst: its next ask is shown the example over orders, never the one over salaries,'
\echo '   and the description of orders.employee_id, never the one of salaries.salary'
\c - analyst
SELECT grid.ask('What is the total amount of orders per employee?') AS sql;
SELECT * FROM grid.run('What is the total amount of orders per employee?');

\echo '== value hints (superuser-only, off by default): the DBA turns them on for the analyst'
\echo '   and opts employees.dept in (a curator or the owner may: a column shows its values only'
\echo '   once someone who knows it holds categories says so); the analyst''s next prompt shows'
\echo '   the few values of employees.dept beside the column, read as the analyst, so the model'
\echo '   can write the value as it is stored (sales, not Sales)'
\c - postgres
ALTER ROLE analyst SET grid.value_hints = 10;
SELECT grid.show_values('employees', 'dept');
\c - analyst
SELECT grid.ask('How many employees work in Sales?') AS sql;
SELECT * FROM grid.run('How many employees work in Sales?');

\echo '== auditor: every ask, who asked, and what came out; and every run, of which answer'
\c - auditor
SELECT generation, session_user_name AS session_user, current_user_name AS role,
       left(question, 42) AS question, final_sql, stop, steps
  FROM grid.generations ORDER BY seal_index;
SELECT run, generation, current_user_name AS role, called_as FROM grid.runs ORDER BY run;
SELECT * FROM grid.verify_audit();
SELECT grid.audit_head() AS head_to_keep_outside_the_database;
