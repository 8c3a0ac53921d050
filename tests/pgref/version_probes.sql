-- Statements PostgreSQL 15 and 18 are known (or said) to read differently: scripts/pg-parse-diff.sh
-- has grid-pgref judge them in a permissive language (every word a name) and both servers
-- parse them, so that what is expected of the versions is checked, not assumed (issue 37).
-- One statement a line; the report names each by its line here (probe:<line>).
--
-- 16: a subquery in FROM needs no alias (2 Spider gold lines).
SELECT count(*) FROM (SELECT a FROM t)
-- 16: integers in hexadecimal, octal and binary, and underscores between digits.
SELECT 0x1F
SELECT 0o17
SELECT 0b101
SELECT 1_000
-- 15 already refuses trailing junk after a number (its server; libpg_query 15 reads a
-- number and a label).
SELECT 1x
SELECT 98.n
SELECT 1.e FROM t
-- 16: system_user is a reserved word (a SQLValueFunction); in 15 an identifier. The
-- language reserves it already.
SELECT system_user FROM t
SELECT system_user
SELECT a FROM system_user
SELECT a FROM t AS system_user
SELECT t.system_user FROM t
SELECT 1 AS system_user
-- 16 and 17: JSON and ten JSON_* names are column-name keywords: still column and table
-- names, no more function or type names.
SELECT json, json_array, json_arrayagg, json_exists, json_object, json_objectagg FROM t
SELECT json_query, json_scalar, json_serialize, json_table, json_value FROM t
SELECT a FROM json_object
SELECT a FROM t AS json_value
SELECT json_object(a) FROM t
SELECT json_array(a) FROM t
SELECT json_arrayagg(a) FROM t
SELECT json_objectagg(a) FROM t
SELECT json_scalar(a) FROM t
SELECT json_serialize(a) FROM t
SELECT json_exists(a, b) FROM t
SELECT json_query(a, b) FROM t
SELECT json_value(a, b) FROM t
SELECT json_table(a) FROM t
SELECT a::json FROM t
SELECT a::json_table FROM t
SELECT json 'x'
SELECT a IS JSON FROM t
-- 17: merge_action is a column-name keyword (a function only in MERGE ... RETURNING).
SELECT merge_action FROM t
SELECT merge_action() FROM t
SELECT a FROM merge_action
-- 18: RETURNING old and new.
UPDATE t SET a = 1 RETURNING old.a, new.a
UPDATE t SET a = 1 RETURNING a
