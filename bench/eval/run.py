"""The accuracy harness (issue 19) against a running cluster with grid_pg preloaded; bench/eval.sh
starts the cluster and the endpoint, then runs this.

    python3 bench/eval/run.py --host DIR --port PORT --db DB --endpoint URL
        --questions FILE --schemas DIR [--gold FILE]
        [--arms grid,grid-no-repair,unconstrained] [--every K] [--limit N]
        [--out results/x.jsonl] [--resume] [--model-name NAME] ...
    python3 bench/eval/run.py --report results/x.jsonl     (the summary of a run, again)

Loads each database of --schemas into its own schema of DB, with one role per database
(USAGE and SELECT on its schema, and grid_user), runs every gold statement once, then asks
each question through grid.ask as its database's role, arm by arm, runs the prediction as
that role and compares it with the gold (compare.py). An arm that shows curated examples
(grid+examples) stores, before each of its asks, the pairs of the other questions of the
question's database as the only rows of grid.examples (leave-one-out, reloaded per question:
a DELETE and some dozens of INSERTs, milliseconds; never the question under test, nor
another item with the same text or the same gold statement, i.e. Spider's paraphrase of it), and records how many were stored and shown. One JSON record per question and
arm is appended to --out as soon as it is known; --resume skips the ones already there.
Prints the markdown summary, then one JSON object as its last line.

Declines (issue 33): an ask that fails with SQLSTATE P0002 is the model's decline (`CANNOT
ANSWER 'reason'`), the failure class "declined", and the summary gives each arm's declined
share beside its refused share. The arm grid+decline is grid with grid.decline = on (the
prompt teaches the decline; its audit check reads "decline": true in every generation's
prompt artifact). On answerable questions its declines are false declines:
    --arms grid+decline                      (the goal: at most 1 % declined)
--withhold gold-tables asks questions that cannot be answered from what the role may read:
    --arms grid+decline --withhold gold-tables     (the goal: at least 90 % declined)
Before a question's asks the harness REVOKEs SELECT, from the question's role, on every
table its gold reads (sqltext.tables_read: the relations of every FROM and JOIN of the
gold, subqueries and set operations in), checks that PostgreSQL's plan of the gold scans
no other table (checked for every question before any is asked), that the catalog shows
no privilege of the role left on them (has_table_privilege, has_any_column_privilege) and
that the gold run as the role is refused (42501), asks the question in every arm, and
GRANTs them back in a finally; the role's language is rebuilt for the narrowed grants
(grid_pg keys its languages on the catalog snapshot, taken as the caller at every ask). A
question whose gold reads every table of its database is skipped and counted (nothing
would be left to read). Nothing is run or compared (no EX): the records carry "withhold",
"withheld" (the tables withheld from the role) and "outcome"; the summary gives per arm
the declined, refused, answered-anyway (a statement returned) and other-failure shares.
"""

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import psycopg
from psycopg import sql as pgsql

import arms as armlib
import classify
import compare
import inputs
import report
import sqltext
import steptrace

# Rows fetched from one statement at most; a result past it matches nothing.
MAX_ROWS = 100_000


class Cluster:
    def __init__(self, host, port, db):
        self.host, self.port, self.db = host, port, db

    def connect(self, user="postgres", autocommit=True, **kw):
        return psycopg.connect(host=self.host, port=self.port, dbname=self.db, user=user,
                               autocommit=autocommit, **kw)

    def psql(self, script, name, search_path=None):
        """Runs a script with psql (dumps may hold COPY ... FROM stdin), in one transaction,
        stopping at the first error; `name` names it in messages."""
        env = dict(os.environ)
        if search_path:
            # A connection option: backslash and space escaped with a backslash.
            env["PGOPTIONS"] = "-c search_path=" + search_path.replace("\\", "\\\\").replace(" ", "\\ ")
        p = subprocess.run(
            ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "--single-transaction", "-h", self.host,
             "-p", str(self.port), "-U", "postgres", "-d", self.db, "-f", "-"],
            input=script, env=env, capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"loading {name} failed:\n{p.stderr[-2000:]}")


class Database:
    """One loaded database: its schema, its role, and whether its tables hold rows (a
    DDL-only database is evaluated by EXPLAIN, without EX)."""

    def __init__(self, db_id, schema, role, tables, has_rows):
        self.db_id, self.schema, self.role = db_id, schema, role
        self.tables, self.has_rows = tables, has_rows


def role_name(schema):
    return ("eval_" + schema)[:63]


# A foreign key added to a table of a dump (pg_dump and Spider's dumps add them after the
# rows): ALTER TABLE ... FOREIGN KEY ... up to its semicolon.
_FOREIGN_KEY = re.compile(r"\bALTER\s+TABLE\b[^;]*?\bFOREIGN\s+KEY\b[^;]*;", re.I)


def load_databases(cl, su, dbs, fixups):
    """Loads each dump into its schema (search_path set to it), then the fix-up scripts,
    then the dumps' foreign keys, each on its own and NOT VALID: Spider's rows break some
    (car_1's model_list.maker 10 has no car_makers row) and some hold only after the
    fix-ups (concert.stadium_id is text until 005 makes it bigint); the model sees the
    schema, not the rows. A key PostgreSQL still refuses is left out and reported.
    Returns ({db_id: Database}, [refused keys as "db_id: message"])."""
    su.execute(pgsql.SQL("REVOKE TEMPORARY ON DATABASE {} FROM PUBLIC").format(pgsql.Identifier(cl.db)))
    loaded, keys = {}, []
    for db_id, path in sorted(dbs.items()):
        schema = inputs.schema_name(db_id)
        su.execute(pgsql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(pgsql.Identifier(schema)))
        quoted = su.execute("SELECT quote_ident(%s)", (schema,)).fetchone()[0]
        with open(path, encoding="utf-8") as fh:
            script = fh.read()
        keys += [(db_id, quoted, m.group(0)) for m in _FOREIGN_KEY.finditer(script)]
        cl.psql(_FOREIGN_KEY.sub("", script), path, search_path=quoted)
        loaded[db_id] = schema
    for path in fixups:
        with open(path, encoding="utf-8") as fh:
            cl.psql(fh.read(), path)
    refused = []
    for db_id, quoted, stmt in keys:
        try:
            with su.transaction():
                su.execute("SELECT set_config('search_path', %s, true)", (quoted,))
                su.execute(stmt.rstrip().rstrip(";") + " NOT VALID")
        except psycopg.Error as e:
            refused.append(f"{db_id}: {_message(e)}")
    su.execute("RESET search_path")
    out = {}
    for db_id, schema in loaded.items():
        tables = [r[0] for r in su.execute(
            "SELECT c.relname FROM pg_class c WHERE c.relnamespace = %s::regnamespace "
            "AND c.relkind IN ('r', 'v', 'm', 'p') ORDER BY 1", (schema,))]
        if not tables:
            raise SystemExit(f"{dbs[db_id]} created no table in schema {schema} (it is loaded with "
                             f"search_path = {schema}; a dump that names another schema cannot be used)")
        has_rows = any(su.execute(pgsql.SQL("SELECT EXISTS (SELECT FROM {}.{})").format(
            pgsql.Identifier(schema), pgsql.Identifier(t))).fetchone()[0] for t in tables)
        role = role_name(schema)
        r, s = pgsql.Identifier(role), pgsql.Identifier(schema)
        su.execute(pgsql.SQL("DROP ROLE IF EXISTS {}").format(r))
        su.execute(pgsql.SQL("CREATE ROLE {} LOGIN").format(r))
        su.execute(pgsql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(s, r))
        su.execute(pgsql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(s, r))
        su.execute(pgsql.SQL("GRANT grid_user TO {}").format(r))
        # Value hints show only the columns a curator opted in (grid.show_values); the
        # harness, as the DBA who loaded them, opts in every text column of its tables,
        # which the arms with grid.value_hints then read as the role.
        su.execute("SELECT grid.show_values(a.attrelid::regclass, a.attname::text) "
                   "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
                   "JOIN pg_type t ON t.oid = a.atttypid "
                   "WHERE c.relnamespace = %s::regnamespace AND c.relkind IN ('r', 'p', 'm') "
                   "AND a.attnum > 0 AND NOT a.attisdropped AND t.typcategory = 'S'", (schema,))
        out[db_id] = Database(db_id, schema, role, tables, has_rows)
    return out, (len(keys) - len(refused), refused)


class Executor:
    """Runs statements as one database's role, on a connection logged in as that role (no
    SET ROLE a statement could undo): read-only transactions rolled back afterwards, under
    a statement timeout, at most MAX_ROWS rows fetched."""

    def __init__(self, cl, database, timeout_s):
        self.cl, self.database, self.timeout_s = cl, database, timeout_s
        self.plan_only = not database.has_rows
        self._connect()

    def _connect(self):
        self.conn = self.cl.connect(self.database.role, autocommit=False,
                                    options=f"-c statement_timeout={int(self.timeout_s * 1000)}")
        self.conn.read_only = True
        self.conn.execute("SELECT set_config('search_path', quote_ident(%s), false)", (self.database.schema,))
        self.conn.commit()

    def run(self, statement):
        """{"ok": bool, "rows": [...] or None, "sqlstate", "error"}."""
        if self.conn.broken or self.conn.closed:
            self._connect()
        s = sqltext.strip_semicolon(statement)
        if sqltext.statement_count(s) != 1:
            return {"ok": False, "rows": None, "sqlstate": None, "error": "not one statement"}
        try:
            with self.conn.transaction(force_rollback=True):
                if self.plan_only:
                    self.conn.execute("EXPLAIN " + s)
                    return {"ok": True, "rows": None, "sqlstate": None, "error": None}
                if sqltext.first_word(s) in ("select", "with", "values", "table"):
                    with self.conn.cursor(name="eval_statement") as cur:
                        cur.execute(s)
                        rows = cur.fetchmany(MAX_ROWS + 1)
                else:
                    cur = self.conn.execute(s)
                    rows = cur.fetchmany(MAX_ROWS + 1) if cur.description else []
        except psycopg.Error as e:
            return {"ok": False, "rows": None, "sqlstate": e.sqlstate, "error": _message(e)}
        if len(rows) > MAX_ROWS:
            return {"ok": True, "rows": None, "sqlstate": None, "error": f"more than {MAX_ROWS} rows"}
        return {"ok": True, "rows": compare.rows(rows), "sqlstate": None, "error": None}


def _message(e):
    return (str(e).strip().splitlines() or [""])[0]


class Asker:
    """Asks as a role through grid.ask on one superuser session: for each ask, the arm's
    settings, then SET ROLE and the role's search_path; afterwards the generations the ask
    wrote are read from grid.generations."""

    def __init__(self, cl, ask_timeout_s, max_tokens):
        self.cl, self.ask_timeout_s, self.max_tokens = cl, ask_timeout_s, max_tokens
        self.gucs = []
        self.notices = []
        self._connect()

    def _connect(self):
        self.conn = self.cl.connect()
        self.conn.add_notice_handler(lambda n: self.notices.append(n.message_primary))
        self.conn.execute("SELECT set_config('grid.timeout', %s, false)", (f"{int(self.ask_timeout_s * 1000)}ms",))
        if self.max_tokens:
            self.conn.execute("SELECT set_config('grid.max_tokens', %s, false)", (str(self.max_tokens),))

    def unavailable(self, arm):
        """Why `arm` cannot run on this extension (a setting it does not know, or a value
        it refuses), or None."""
        for name in armlib.settings(arm):
            if not self.conn.execute("SELECT 1 FROM pg_settings WHERE name = %s", (name,)).fetchone():
                return f"the extension has no setting {name}"
        try:
            with self.conn.transaction(force_rollback=True):
                for name, value in armlib.settings(arm).items():
                    self.conn.execute("SELECT set_config(%s, %s, false)", (name, value))
        except psycopg.Error as e:
            return _message(e)
        return None

    def use(self, arms):
        """The arms of the run: each ask resets what any of them sets."""
        self.gucs = armlib.all_settings(arms)

    def apply(self, arm):
        c = self.conn
        c.execute("RESET ROLE")
        for name in self.gucs:
            c.execute(pgsql.SQL("RESET {}").format(pgsql.SQL(_guc(name))))
        for name, value in armlib.settings(arm).items():
            c.execute("SELECT set_config(%s, %s, false)", (name, value))

    def warm(self, database):
        """Compiles the role's language before the timed asks, so that no arm's first
        question pays for it: with grid.max_tokens = 1, below the shortest statement, an
        ask fails with 54000 once the language is built, before the model is asked."""
        c = self.conn
        self.apply("grid")
        c.execute(pgsql.SQL("SET ROLE {}").format(pgsql.Identifier(database.role)))
        c.execute("SELECT set_config('search_path', quote_ident(%s), false)", (database.schema,))
        c.execute("SELECT set_config('grid.max_tokens', '1', false)")
        try:
            c.execute("SELECT grid.ask('warm up')")
        except psycopg.Error:
            pass
        if c.broken or c.closed:
            self._connect()
            return
        c.execute("RESET ROLE")
        c.execute("SELECT set_config('grid.max_tokens', %s, false)", (str(self.max_tokens or 512),))

    def load_examples(self, pairs):
        """Stores `pairs` ((question, sql), the other questions of the database under test)
        as the only rows of grid.examples, written by this superuser session (an author
        every role trusts). A pair the store refuses (SQL the engine cannot parse) is left
        out. Returns how many were stored."""
        c = self.conn
        c.execute("RESET ROLE")
        c.execute("DELETE FROM grid.examples")
        stored = 0
        for question, statement in pairs:
            try:
                c.execute("INSERT INTO grid.examples (question, sql) VALUES (%s, %s)", (question, statement))
                stored += 1
            except psycopg.Error:
                pass
        return stored

    def shown_examples(self, generation):
        """The questions of the examples the prompt of `generation` showed."""
        row = self.conn.execute(
            "SELECT a.content_json -> 'examples' FROM grid.generations g "
            "JOIN grid.artifacts a ON a.kind = 'prompt' AND a.digest = g.prompt_digest "
            "WHERE g.generation = %s", (generation,)).fetchone()
        return [e.get("question") for e in (row[0] if row and row[0] else [])]

    def ask(self, arm, database, text, examples=None):
        """Asks `text` in `arm` as the role of `database`; `examples`, for an arm that
        shows them, are the pairs to store first (leave-one-out: never `text`'s own)."""
        c = self.conn
        stored = None if examples is None else self.load_examples(examples)
        self.apply(arm)
        last = c.execute("SELECT coalesce(max(seal_index), -1) FROM grid.generations").fetchone()[0]
        c.execute(pgsql.SQL("SET ROLE {}").format(pgsql.Identifier(database.role)))
        c.execute("SELECT set_config('search_path', quote_ident(%s), false)", (database.schema,))
        self.notices.clear()
        out = {"sql": None, "ask_sqlstate": None, "ask_error": None}
        t0 = time.monotonic()
        try:
            out["sql"] = c.execute("SELECT grid.ask(%s)", (text,)).fetchone()[0]
        except psycopg.Error as e:
            out["ask_sqlstate"], out["ask_error"] = e.sqlstate, _message(e)
        out["seconds"] = round(time.monotonic() - t0, 3)
        if c.broken or c.closed:  # the server ended the session (a crash, a restart)
            self._connect()
            c = self.conn
        c.execute("RESET ROLE")
        # The audit keys the arm reads from each generation's prompt artifact
        # (arms.PROMPT_KEYS): true when the artifact's document holds the key as true.
        prompt_keys = [k for k in armlib.audit(arm) if k in armlib.PROMPT_KEYS]
        from_prompt = pgsql.SQL("").join(
            pgsql.SQL(" || jsonb_build_object({}, EXISTS (SELECT FROM grid.artifacts a WHERE a.kind = 'prompt' "
                      "AND a.digest = g.prompt_digest AND a.content_json -> {} = 'true'::jsonb))").format(
                pgsql.Literal(k), pgsql.Literal(armlib.PROMPT_KEYS[k])) for k in prompt_keys)
        gens = [r[0] for r in c.execute(
            pgsql.SQL("SELECT (to_jsonb(g) - 'question' - 'final_sql' - 'hash' - 'prev_seal_hash'){} "
                      "FROM grid.generations g WHERE seal_index > %s ORDER BY seal_index").format(from_prompt),
            (last,))]
        keep = ("generation", "stop", "steps", "refused", "repair_of", "decode_mode") + tuple(
            {k for a in armlib.ARMS.values() for k in a[1] if k not in armlib.PROMPT_KEYS}) + tuple(prompt_keys)
        out["generations"] = [{k: g.get(k) for k in dict.fromkeys(keep)} for g in gens]
        # A rewind repair's first records are the repaired statement's tokens (replayed)
        # and the ban: records, but not tokens the model wrote.
        for g in out["generations"]:
            g["rewound"] = c.execute(
                "SELECT count(*) FROM grid.audit_log WHERE generation = %s AND kind IN ('replayed', 'banned')",
                (g["generation"],)).fetchone()[0]
        if out["sql"] is None and gens and gens[-1].get("refused"):
            # What the model wrote that the checker refused (never returned to the asker;
            # the superuser reads it from the audit).
            out["refused_sql"] = c.execute("SELECT final_sql FROM grid.generations WHERE generation = %s",
                                           (gens[-1]["generation"],)).fetchone()[0]
        out["mismatches"] = armlib.mismatches(arm, gens)
        if stored is not None:
            out["examples_stored"] = stored
            shown = self.shown_examples(gens[0]["generation"]) if gens else []
            out["examples_shown"] = len(shown)
            if text in shown:
                out["mismatches"].append("the prompt showed the question under test as an example")
        if not gens and (out["sql"] is not None or out["ask_sqlstate"] == "42501" or classify.is_declined(out)):
            out["mismatches"].append("the ask wrote no generation to grid.generations")
        out["tokens"] = sum((g.get("steps") or 0) - g["rewound"] for g in out["generations"])
        out["stop"] = gens[-1].get("stop") if gens else None
        out["notices"] = list(self.notices)
        return out


# --withhold: each question asked while its role may not read what its gold reads.
WITHHOLD_MODES = ("gold-tables",)
SKIP_ALL = "the gold reads every table of its database (nothing would be left to read)"
SKIP_NONE = "the gold reads no table of its database (nothing to withhold)"
SKIP_NO_GOLD = "there is no gold statement to read the tables from"


def plan_relations(su, database, statement):
    """The tables of `database`'s schema that PostgreSQL's plan of `statement` scans:
    EXPLAIN (VERBOSE, FORMAT JSON) as the superuser under the schema's search_path, in a
    transaction rolled back (nothing is executed)."""
    found = set()

    def walk(node):
        if isinstance(node, dict):
            if "Relation Name" in node and node.get("Schema") == database.schema:
                found.add(node["Relation Name"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    with su.transaction(force_rollback=True):
        su.execute("SELECT set_config('search_path', quote_ident(%s), true)", (database.schema,))
        walk(su.execute("EXPLAIN (VERBOSE, FORMAT JSON) " + sqltext.strip_semicolon(statement)).fetchone()[0])
    return found


def withhold_plan(su, databases, questions):
    """For --withhold gold-tables: ({question i: the tables to withhold}, [the questions to
    ask], [the skipped ones as {"i", "db_id", "why", "tables"}]). A question's tables are
    those its gold reads (sqltext.tables_read); one whose gold reads every table of its
    database, or none, is skipped. PostgreSQL's plan of each gold must scan no table
    besides them: one the reading missed would leave the question answerable, and stops
    the run before anything is asked."""
    withheld, asked, skipped = {}, [], []
    for q in questions:
        db = databases[q.db_id]
        names = sqltext.tables_read(q.gold, db.tables) if q.gold else []
        why = (SKIP_NO_GOLD if not q.gold else SKIP_NONE if not names
               else SKIP_ALL if set(names) == set(db.tables) else None)
        if why:
            skipped.append({"i": q.i, "db_id": q.db_id, "why": why, "tables": names})
            continue
        missed = plan_relations(su, db, q.gold) - set(names)
        if missed:
            raise SystemExit(f"q{q.i} ({q.db_id}): PostgreSQL's plan of the gold scans {sorted(missed)}, which "
                             f"the reading of its text (sqltext.tables_read: {names}) missed, so withholding "
                             f"those would leave the question answerable:\n    {q.gold}")
        withheld[q.i] = names
        asked.append(q)
    return withheld, asked, skipped


def holding(su, database, names):
    """Those of `names` (tables of `database`'s schema) on which its role holds a privilege
    that puts the table in its catalog snapshot (sql/catalog_snapshot.sql: SELECT, INSERT,
    UPDATE or DELETE on the table, or SELECT, INSERT or UPDATE on one of its columns),
    granted to it, to PUBLIC or to a role it is a member of, as PostgreSQL answers."""
    return [r[0] for r in su.execute(
        "SELECT t FROM unnest(%s::text[]) AS t, "
        "LATERAL (SELECT (quote_ident(%s) || '.' || quote_ident(t))::regclass::oid AS c) AS x "
        "WHERE has_table_privilege(%s::name, x.c, 'SELECT, INSERT, UPDATE, DELETE') "
        "OR has_any_column_privilege(%s::name, x.c, 'SELECT, INSERT, UPDATE') ORDER BY t",
        (list(names), database.schema, database.role, database.role))]


def _tables(database, names):
    return pgsql.SQL(", ").join(pgsql.Identifier(database.schema, t) for t in names)


def narrow(su, ex, database, names, gold):
    """Withholds `names` from `database`'s role: REVOKE SELECT (load_databases granted it
    table by table, GRANT ... ON ALL TABLES IN SCHEMA, with no default privileges), then
    checks, and stops the run otherwise, that the catalog shows no privilege of the role
    left on any of them (`holding`) and that `gold`, run as the role on `ex`, is refused
    with 42501. The caller puts the grants back (`widen`) in a finally."""
    su.execute(pgsql.SQL("REVOKE SELECT ON {} FROM {}").format(
        _tables(database, names), pgsql.Identifier(database.role)))
    still = holding(su, database, names)
    if still:
        raise SystemExit(f"{database.role} still holds a privilege on {still} after REVOKE SELECT "
                         f"(granted to PUBLIC, or to a role it is a member of?): the question would not be "
                         f"asked without them")
    r = ex.run(gold)
    if r["sqlstate"] != "42501":
        raise SystemExit(f"the gold, run as {database.role} with {names} withheld, was not refused with 42501 "
                         f"(ok {r['ok']}, {r['sqlstate']} {r['error']}):\n    {gold}")


def widen(su, database, names):
    """Grants `names` back to `database`'s role (SELECT, as load_databases did), and checks
    it in the catalog."""
    su.execute(pgsql.SQL("GRANT SELECT ON {} TO {}").format(_tables(database, names), pgsql.Identifier(database.role)))
    lost = sorted(set(names) - set(holding(su, database, names)))
    if lost:
        raise SystemExit(f"{database.role} holds no privilege on {lost} after GRANT SELECT")


@contextlib.contextmanager
def withholding(su, ex, database, names, gold):
    """`narrow` on entering, `widen` on leaving however it is left (an error, an
    interrupt, a failed check of `narrow` itself): a run never leaves a role narrowed."""
    try:
        narrow(su, ex, database, names, gold)
        yield
    finally:
        widen(su, database, names)


def withheld_outcome(rec):
    """Fills a record of the withheld mode: no EX and no execution (the question cannot be
    answered from what the role may read), what became of the ask (classify.outcome), and
    the class of an ask that returned no statement."""
    rec.update(executes=None, exec_sqlstate=None, exec_error=None, rows=None, ex=None,
               outcome=classify.outcome(rec), **{"class": None, "detail": None})
    if rec["outcome"] != classify.ANSWERED_OUTCOME:
        rec["class"], rec["detail"] = classify.classify(rec, rec["gold"] or "")


def _guc(name):
    if not all(p.isidentifier() for p in name.split(".")):
        raise SystemExit(f"bad setting name in arms.py: {name!r}")
    return name


def model_name(endpoint):
    if endpoint.startswith("openai+"):
        # A stock server in the direct mode names its model in the setting.
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(endpoint[len("openai+"):]).query)
        return (query.get("model") or [endpoint])[0]
    if not endpoint.startswith("http"):
        return endpoint
    try:
        with urllib.request.urlopen(endpoint.rstrip("/") + "/v1/vocabulary", timeout=60) as r:
            return json.load(r).get("model") or endpoint
    except (OSError, ValueError):
        return endpoint


def read_records(path):
    out = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except ValueError:
                    print(f"warning: {path}:{n} is not JSON (an interrupted write?); ignored", file=sys.stderr)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--report", help="print the summary of an existing results file and stop")
    ap.add_argument("--host")
    ap.add_argument("--port", type=int)
    ap.add_argument("--db", default="eval")
    ap.add_argument("--endpoint", help="grid.endpoint for the run (a URL, openai+http://…?model=&tokenizer= for a stock server, or mock:scripted:<file>)")
    ap.add_argument("--model-name", help="the model named in the summary (default: the endpoint's)")
    ap.add_argument("--questions")
    ap.add_argument("--gold")
    ap.add_argument("--schemas")
    ap.add_argument("--arms", default=",".join(armlib.DEFAULT))
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--limit", type=int)
    ap.add_argument("--out")
    ap.add_argument("--resume", action="store_true", help="append to --out, skipping what it holds")
    ap.add_argument("--skip-unavailable-arms", action="store_true",
                    help="run the other arms when an arm's setting is missing (default: stop)")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--ask-timeout", type=float, default=300.0, help="grid.timeout, seconds")
    ap.add_argument("--statement-timeout", type=float, default=10.0,
                    help="for the prediction and the gold, seconds")
    ap.add_argument("--examples", type=int, default=3, help="examples per failure class and arm")
    ap.add_argument("--concurrent", type=int,
                    help="instead of the evaluation: ask the first N sampled questions (reused in "
                         "turn) all at once, each from its own session, in the first arm, and print "
                         "their times and the endpoint's overhead (with --endpoint-trace)")
    ap.add_argument("--endpoint-trace",
                    help="the endpoint's log with its --trace-steps lines (bench/eval.sh passes it)")
    ap.add_argument("--gold-only", action="store_true",
                    help="run the gold statements only, list those PostgreSQL refuses, and stop")
    ap.add_argument("--withhold", choices=WITHHOLD_MODES,
                    help="gold-tables: ask each question while its role may not read the tables its "
                         "gold reads (REVOKE before its asks, GRANT back after them), so that it cannot "
                         "be answered: no EX, the summary gives what became of the asks (declined, "
                         "refused, answered anyway, other); see above")
    a = ap.parse_args()

    if a.report:
        records = read_records(a.report)
        print(report.render(records))
        return 0
    for need in ("host", "port", "endpoint", "questions", "schemas"):
        if getattr(a, need) is None:
            ap.error(f"--{need.replace('_', '-')} is needed")
    arm_names = [x for x in a.arms.split(",") if x]
    unknown = [x for x in arm_names if x not in armlib.ARMS]
    if unknown or not arm_names:
        ap.error(f"unknown arm(s) {unknown}; known: {', '.join(armlib.ARMS)}")
    out_path = a.out or os.path.join("results", time.strftime("eval-%Y%m%d-%H%M%S.jsonl"))
    if os.path.exists(out_path) and not a.resume:
        ap.error(f"{out_path} exists: pass --resume to go on with it, or another --out")
    if a.withhold and a.concurrent:
        ap.error("--withhold and --concurrent do not go together")
    if a.resume and os.path.exists(out_path):
        modes = {r.get("withhold") for r in read_records(out_path) if r.get("kind") == "run"}
        if modes - {a.withhold}:
            ap.error(f"{out_path} holds a run with --withhold {sorted(modes, key=str)}, not "
                     f"{a.withhold or 'none'}: its answers would be mixed with these")

    try:
        questions = inputs.load_questions(a.questions, a.gold)
        dbs, fixups, ignored = inputs.schema_files(a.schemas)
    except inputs.InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    taken, no_schema = inputs.sample(questions, a.every, a.limit, available=set(dbs))

    cl = Cluster(a.host, a.port, a.db)
    su = cl.connect()
    su.execute(pgsql.SQL("ALTER DATABASE {} SET grid.endpoint = {}").format(
        pgsql.Identifier(a.db), pgsql.Literal(a.endpoint)))
    t_load = time.monotonic()
    databases, (fk_added, fk_refused) = load_databases(cl, su, dbs, fixups)
    print(f"loaded {len(databases)} databases in {time.monotonic() - t_load:.1f} s, "
          f"{fk_added} foreign keys (refused: {'; '.join(fk_refused) or 'none'})"
          + (f"; not databases: {', '.join(ignored)}" if ignored else ""), file=sys.stderr)

    executors = {}

    def executor(db):
        if db.db_id not in executors:
            executors[db.db_id] = Executor(cl, db, a.statement_timeout)
        return executors[db.db_id]

    # The gold, once per question: a question whose gold fails on PostgreSQL cannot be
    # judged and is left out (listed in the summary).
    gold = {}
    evaluated, gold_failed = [], []
    for q in taken:
        db = databases[q.db_id]
        if q.gold is None:
            gold[q.i] = None
            evaluated.append(q)
            continue
        g = executor(db).run(q.gold)
        if g["ok"] and (db.has_rows is False or g["rows"] is not None):
            gold[q.i] = g
            evaluated.append(q)
        else:
            gold_failed.append({"i": q.i, "db_id": q.db_id, "gold": q.gold,
                                "error": f"{g['sqlstate'] or ''} {g['error']}".strip()})

    if a.gold_only:
        for g in gold_failed:
            print(f"q{g['i']} {g['db_id']}: {g['error']}\n    {g['gold']}")
        print(f"{len(evaluated)} of {len(taken)} gold statements run on PostgreSQL")
        return 0

    # The withheld mode asks only questions that something can be withheld from.
    withheld, asked, withhold_skipped = {}, evaluated, []
    if a.withhold:
        withheld, asked, withhold_skipped = withhold_plan(su, databases, evaluated)

    asker = Asker(cl, a.ask_timeout, a.max_tokens)
    unavailable = {arm: why for arm in arm_names if (why := asker.unavailable(arm))}
    for arm, why in unavailable.items():
        print(f"arm {arm} is unavailable: {why}", file=sys.stderr)
    if unavailable and not a.skip_unavailable_arms:
        return 2
    arm_names = [x for x in arm_names if x not in unavailable]
    if not arm_names:
        print("no arm can run", file=sys.stderr)
        return 2
    asker.use(arm_names)

    model = a.model_name or model_name(a.endpoint)
    done = set()
    if a.resume and os.path.exists(out_path):
        for r in read_records(out_path):
            if r.get("kind") == "answer":
                done.add((r["i"], r["arm"]))
    os.makedirs(os.path.dirname(out_path) or ".", exist_ok=True)
    out = open(out_path, "a", encoding="utf-8")

    def emit(rec):
        out.write(json.dumps(rec, default=str) + "\n")
        out.flush()

    run_rec = {"kind": "run", "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "model": model,
               "endpoint": a.endpoint, "questions_file": a.questions, "gold_file": a.gold,
               "schemas": a.schemas, "every": a.every, "limit": a.limit, "arms": arm_names,
               "unavailable_arms": unavailable, "max_tokens": a.max_tokens, "ask_timeout_s": a.ask_timeout,
               "statement_timeout_s": a.statement_timeout,
               "foreign_keys": {"added": fk_added, "refused": fk_refused},
               "question_ids": [q.i for q in asked], "no_schema": [q.i for q in no_schema],
               "gold_failed": gold_failed, "resumed": bool(done)}
    if a.withhold:
        run_rec.update(withhold=a.withhold, withhold_skipped=withhold_skipped)
    emit(run_rec)
    print(f"{len(evaluated)} questions ({len(no_schema)} without a schema, {len(gold_failed)} whose gold "
          f"fails), arms {', '.join(arm_names)}; records in {out_path}", file=sys.stderr)
    if a.withhold:
        print(f"--withhold {a.withhold}: {len(asked)} questions asked without the tables their gold reads, "
              f"{len(withhold_skipped)} skipped", file=sys.stderr)

    t_warm = time.monotonic()
    for db_id in sorted({q.db_id for q in evaluated}):
        asker.warm(databases[db_id])
    print(f"languages of {len({q.db_id for q in evaluated})} roles built in {time.monotonic() - t_warm:.1f} s",
          file=sys.stderr)

    if a.concurrent:
        items = [(databases[q.db_id], q.ask) for q in
                 (evaluated[k % len(evaluated)] for k in range(a.concurrent))]
        return ask_at_once(cl, arm_names[0], items, a.ask_timeout, a.max_tokens, a.endpoint_trace)

    # Leave-one-out examples: every question of a database with a gold statement (all of
    # the file, not only the sample), of which an ask stores all but its own.
    pairs = {}
    for q in questions:
        if q.gold:
            pairs.setdefault(q.db_id, []).append(q)

    def same_statement(a, b):
        norm = lambda s: " ".join(s.lower().rstrip().rstrip(";").split())
        return norm(a) == norm(b)

    def examples_for(arm, q):
        # Spider asks most questions twice, in other words, with one gold statement: a
        # paraphrase's pair would hand the model the answer, so an example whose statement
        # is the gold's is left out as the question itself is.
        if not armlib.uses_examples(arm):
            return None
        return [(o.ask, o.gold) for o in pairs.get(q.db_id, [])
                if o.i != q.i and o.ask != q.ask and not same_statement(o.gold, q.gold)]

    t_run = time.monotonic()
    for n, q in enumerate(asked, 1):
        db = databases[q.db_id]
        todo = [arm for arm in arm_names if (q.i, arm) not in done]
        names = withheld.get(q.i)
        if not todo:
            continue
        # The role's grants narrowed for this question's asks, in every arm, and put back
        # after them; its language is built again (the snapshot's fingerprint changed)
        # before them.
        with withholding(su, executor(db), db, names, q.gold) if names else contextlib.nullcontext():
            if names:
                asker.warm(db)
            for arm in todo:
                rec = {"kind": "answer", "i": q.i, "db_id": q.db_id, "arm": arm, "question": q.ask,
                       "gold": q.gold, "plan_only": not db.has_rows}
                if names:
                    rec.update(withhold=a.withhold, withheld=names)
                rec.update(asker.ask(arm, db, q.ask, examples_for(arm, q)))
                if names:
                    withheld_outcome(rec)
                    said = rec["outcome"]
                else:
                    judge(rec, executor(db), gold[q.i])
                    said = "EX" if rec["ex"] else rec["class"] or "executes"
                emit(rec)
                print(f"[{n}/{len(asked)}] {arm:>15} q{q.i} {db.db_id}: {said} ({rec['seconds']:.2f} s)",
                      file=sys.stderr)
    out.close()
    print(f"asked in {time.monotonic() - t_run:.1f} s", file=sys.stderr)

    records = read_records(out_path)
    print(report.render(records, arms=arm_names, question_ids=[q.i for q in asked],
                        model=model, examples=a.examples))
    bad = [arm for arm in arm_names if any(r.get("mismatches") for r in records
                                           if r.get("kind") == "answer" and r["arm"] == arm)]
    if bad:
        print(f"arms that did not run as asked (see the audit check): {', '.join(bad)}", file=sys.stderr)
        return 1
    return 0


def ask_at_once(cl, arm, items, ask_timeout_s, max_tokens, trace_path):
    """Asks `items` ((Database, question) pairs) in `arm` at the same moment, each from its
    own session as its database's role, the way concurrent psql sessions call grid.ask;
    prints what each ask took and, from the endpoint's step trace, the span of their steps
    against the model thread's time in it (bench/overlap.sh's measure). Returns 0."""
    askers = [Asker(cl, ask_timeout_s, max_tokens) for _ in items]
    for asker, (db, _) in zip(askers, items):
        asker.use([arm])
        asker.apply(arm)
        asker.conn.execute(pgsql.SQL("SET ROLE {}").format(pgsql.Identifier(db.role)))
        asker.conn.execute("SELECT set_config('search_path', quote_ident(%s), false)", (db.schema,))
    before = len(steptrace.steps(trace_path))
    start = threading.Barrier(len(items))

    def one(k):
        c, text = askers[k].conn, items[k][1]
        start.wait()
        t0 = time.monotonic()
        try:
            got = c.execute("SELECT grid.ask(%s)", (text,)).fetchone()[0]
            state = "answered" if got is not None else "no statement"
        except psycopg.Error as e:
            state = e.sqlstate or "error"
        return time.monotonic() - t0, state

    t0 = time.monotonic()
    with ThreadPoolExecutor(len(items)) as pool:
        done = list(pool.map(one, range(len(items))))
    wall = time.monotonic() - t0
    secs = sorted(s for s, _ in done)
    states = Counter(st for _, st in done)
    print(f"{len(items)} asks at once ({arm}): wall {wall:.1f} s; per ask p50 {secs[len(secs) // 2]:.1f} s, "
          f"max {secs[-1]:.1f} s; " + ", ".join(f"{n} {st}" for st, n in sorted(states.items())))
    steps = steptrace.steps(trace_path)[before:]
    if steps:
        span, model = steptrace.span_and_model(steps)
        items_per_step = sum(s["items"] for s in steps) / len(steps)
        print("| asks | steps | generations per step | span (ms) | model (ms) | overhead | wall (ms) |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        print(f"| {len(items)} | {len(steps)} | {items_per_step:.1f} | {span:.0f} | {model:.0f} | "
              f"{span / model - 1:+.1%} | {wall * 1000:.0f} |")
    else:
        print("(no step trace: the endpoint was not started by bench/eval.sh with --trace-steps)")
    for asker in askers:
        asker.conn.close()
    return 0

def judge(rec, ex, gold):
    """Runs the prediction of `rec` and fills executes, ex, class and detail."""
    rec.update(executes=False, exec_sqlstate=None, exec_error=None, rows=None, ex=None,
               **{"class": None, "detail": None})
    if rec["sql"] and rec["sql"].strip():
        r = ex.run(rec["sql"])
        rec["executes"] = r["ok"] and (ex.plan_only or r["rows"] is not None)
        rec["exec_sqlstate"], rec["exec_error"] = r["sqlstate"], r["error"]
        if r["rows"] is not None:
            rec["rows"] = len(r["rows"])
        if gold is not None and not ex.plan_only:
            rec["ex"] = bool(rec["executes"] and compare.same_result(
                r["rows"], gold["rows"], sqltext.orders_at_top(rec["gold"])))
    elif gold is not None and not ex.plan_only:
        rec["ex"] = False
    if rec["ex"] is not True and not (rec["ex"] is None and rec["executes"]):
        rec["class"], rec["detail"] = classify.classify(rec, rec["gold"] or "")


if __name__ == "__main__":
    sys.exit(main())
