-- The demo database: three tables, roles governed by ordinary GRANTs.
CREATE EXTENSION IF NOT EXISTS grid_pg;

CREATE TABLE employees (id int PRIMARY KEY, name text NOT NULL, dept text NOT NULL);
COMMENT ON TABLE employees IS 'People employed by the company';
CREATE TABLE orders (id int PRIMARY KEY, employee_id int REFERENCES employees (id), amount numeric NOT NULL);
COMMENT ON COLUMN orders.amount IS 'Order value in euros';
CREATE TABLE salaries (employee_id int REFERENCES employees (id), salary numeric NOT NULL);

INSERT INTO employees VALUES (1, 'Ada', 'research'), (2, 'Grace', 'research'), (3, 'Linus', 'sales');
INSERT INTO orders VALUES (101, 3, 1200), (102, 3, 80), (103, 1, 430);
INSERT INTO salaries VALUES (1, 9100), (2, 8700), (3, 6400);

-- analyst: reads employees and orders, not salaries.
CREATE ROLE analyst LOGIN IN ROLE grid_user;
GRANT SELECT ON employees, orders TO analyst;
-- The DBA teaches the analyst's model to decline what its tables cannot answer
-- (grid.decline, superuser-only, off by default): asked about salaries, it may say so
-- (SQLSTATE P0002 and its reason) instead of inventing names the mask then refuses.
ALTER ROLE analyst SET grid.decline = on;
-- hr: reads all three.
CREATE ROLE hr LOGIN IN ROLE grid_user;
GRANT SELECT ON employees, orders, salaries TO hr;
-- clerk: may add orders (and must see employees to name one). grid.ask writes only
-- what a grid.policy row lets a role write: without the row the clerk's questions
-- would be answered with SELECTs, whatever its grants.
CREATE ROLE clerk LOGIN IN ROLE grid_user;
GRANT SELECT ON employees TO clerk;
GRANT INSERT ON orders TO clerk;
INSERT INTO grid.policy (role_name, policy, comment)
VALUES ('clerk', '{"verbs": ["select", "insert"], "insert_tables": ["orders"]}',
        'the clerk records orders through grid.ask');
-- curator: writes the curated examples (grid.examples) that grid.ask may show the model,
-- and descriptions of tables and columns for the model (grid.describe). It reads no
-- table: the examples it writes reach an asker only when the asker's own grants admit
-- their SQL, a description only when the asker may see the column it describes.
CREATE ROLE curator LOGIN IN ROLE grid_curator;
-- The auditor reads the audit store.
CREATE ROLE auditor LOGIN IN ROLE grid_auditor;
