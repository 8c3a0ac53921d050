"""Declines (issue 33): the class and outcome of an ask that failed with P0002
(classify.py), the declined share and the withheld mode's summary (report.py), the
grid+decline arm's audit check (arms.py), the tables a gold statement reads
(sqltext.tables_read, on Spider dev gold lines) and the withholding of them around a
question's asks (run.py, against a stand-in for the superuser session)."""

import glob
import json
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import arms  # noqa: E402
import classify as c  # noqa: E402
import report  # noqa: E402
import sqltext  # noqa: E402

try:
    import psycopg  # noqa: F401
    import run  # noqa: E402
except ImportError:  # run.py needs psycopg: the venv of bench/eval/test.sh has it
    run = None

SPIDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "shared", "data", "spider")
SPIDER = os.environ.get("GRID_DATA") and os.path.join(os.environ["GRID_DATA"], "spider") or SPIDER

DECLINE_ERROR = ("grid.ask: the model declined: no table holds salaries (rephrase the question if what "
                 "you may read can answer it, or ask the DBA to grant what it needs)")
JUDGE_P0002 = "grid.ask: PostgreSQL refuses the model's statement (SQLSTATE P0002): no data found"


def declined(**kw):
    r = {"ask_sqlstate": "P0002", "ask_error": DECLINE_ERROR, "sql": None, "stop": "eos",
         "generations": [{"generation": 4, "refused": "declined: no table holds salaries"}]}
    r.update(kw)
    return r


class Classes(unittest.TestCase):
    def test_p0002_is_declined_with_the_reason(self):
        self.assertEqual(c.classify(declined(), "SELECT 1"), (c.DECLINED, "declined: no table holds salaries"))
        # Without the audit's rows, the message's first line.
        self.assertEqual(c.classify(declined(generations=[]), "SELECT 1"), (c.DECLINED, DECLINE_ERROR))
        self.assertIn(c.DECLINED, c.CLASSES)
        self.assertTrue(c.is_declined(declined()))

    def test_a_decline_is_neither_refused_nor_an_execution_error(self):
        cls, _ = c.classify(declined(), "SELECT 1")
        self.assertNotIn(cls, (c.REFUSED, c.OTHER, c.TYPE_ERROR, c.COLUMN_OR_TABLE))
        self.assertEqual(c.classify({"ask_sqlstate": "42501", "ask_error": "x"}, "SELECT 1")[0], c.REFUSED)
        self.assertFalse(c.is_declined({"ask_sqlstate": "42501", "ask_error": DECLINE_ERROR}))

    def test_the_judges_p0002_is_not_a_decline(self):
        judged = {"ask_sqlstate": "P0002", "ask_error": JUDGE_P0002, "stop": "eos"}
        self.assertFalse(c.is_declined(judged))
        self.assertEqual(c.classify(judged, "SELECT 1")[0], c.OTHER)

    def test_outcomes(self):
        self.assertEqual(c.outcome(declined()), "declined")
        self.assertEqual(c.outcome({"ask_sqlstate": "42501", "ask_error": "not allowed"}), "refused")
        self.assertEqual(c.outcome({"sql": "SELECT name FROM singer", "stop": "eos"}), "answered")
        self.assertEqual(c.outcome({"ask_sqlstate": "57014", "ask_error": "timeout"}), "other")
        self.assertEqual(c.outcome({"sql": "  ", "stop": "eos"}), "other")
        self.assertEqual(c.outcome({"ask_sqlstate": "P0002", "ask_error": JUDGE_P0002}), "other")
        self.assertEqual(c.OUTCOMES, ["declined", "refused", "answered", "other"])


def answer(i, arm, **kw):
    r = {"kind": "answer", "i": i, "arm": arm, "question": f"q{i}", "gold": "SELECT 1", "tokens": 10,
         "seconds": 1.0, "stop": "eos", "sql": None, "ask_sqlstate": None, "ex": None, "executes": None}
    r.update(kw)
    return r


class Figures(unittest.TestCase):
    def test_declined_share_beside_refused(self):
        recs = [{"kind": "run", "arms": ["grid+decline"], "question_ids": [0, 1, 2, 3], "model": "m"},
                answer(0, "grid+decline", sql="SELECT 1", ex=True, executes=True),
                answer(1, "grid+decline", ex=False, **{k: v for k, v in declined().items() if k != "sql"},
                       **{"class": c.DECLINED, "detail": "declined: no table holds salaries"}),
                answer(2, "grid+decline", ex=False, ask_sqlstate="P0002", ask_error=JUDGE_P0002),
                answer(3, "grid+decline", ex=False, ask_sqlstate="42501", ask_error="not allowed")]
        text = report.render(recs)
        figures = json.loads(text.splitlines()[-1])["arms"]["grid+decline"]
        self.assertEqual((figures["declined"], figures["refused"], figures["ex"]), (25.0, 25.0, 25.0))
        self.assertEqual(list(figures), ["executes", "ex", "refused", "declined", "truncated",
                                         "tokens_per_question", "s_per_question"])
        self.assertIn("| arm | executes | EX | refused | declined | truncated | tokens/q | s/q |", text)
        self.assertIn("| grid+decline | 25.0% | 25.0% | 25.0% | 25.0% | 0.0% |", text)
        self.assertIn("| declined | 1 |", text)

    def withheld_records(self):
        run_rec = {"kind": "run", "arms": ["grid", "grid+decline"], "question_ids": [0, 1, 2, 3], "model": "m",
                   "withhold": "gold-tables",
                   "withhold_skipped": [{"i": 9, "db_id": "d", "why": "the gold reads every table"},
                                        {"i": 10, "db_id": "d", "why": "the gold reads every table"}]}
        w = {"withhold": "gold-tables", "withheld": ["singer"]}
        recs = [run_rec]
        # grid+decline: 3 declines, 1 answered anyway.
        for i in range(3):
            recs.append(answer(i, "grid+decline", **w, **{k: v for k, v in declined().items() if k != "sql"}))
        recs.append(answer(3, "grid+decline", sql="SELECT name FROM stadium", **w))
        # grid: refused, answered, timeout, empty statement.
        recs += [answer(0, "grid", ask_sqlstate="42501", ask_error="not allowed", **w),
                 answer(1, "grid", sql="SELECT 1", **w),
                 answer(2, "grid", ask_sqlstate="57014", ask_error="canceled", tokens=30, seconds=3.0, **w),
                 answer(3, "grid", sql="", **w)]
        # An answer of the same question asked in the normal mode does not count here.
        recs.append(answer(1, "grid+decline", sql="SELECT 1", ex=True, executes=True))
        return recs

    def test_withheld_mode_summary(self):
        text = report.render(self.withheld_records())
        last = json.loads(text.splitlines()[-1])
        self.assertEqual(last, {"questions": 4, "model": "m", "withhold": "gold-tables", "skipped": 2, "arms": {
            "grid": {"declined": 0.0, "refused": 25.0, "answered": 25.0, "other": 50.0,
                     "tokens_per_question": 15.0, "s_per_question": 1.5},
            "grid+decline": {"declined": 75.0, "refused": 0.0, "answered": 25.0, "other": 0.0,
                             "tokens_per_question": 10.0, "s_per_question": 1.0}}})
        self.assertIn("| arm | declined | refused | answered anyway | other failures | tokens/q | s/q |", text)
        self.assertIn("| grid+decline | 75.0% | 0.0% | 25.0% | 0.0% | 10.0 | 1.0 |", text)
        self.assertIn("Skipped, not asked: 2 questions because the gold reads every table.", text)
        self.assertNotIn("| EX |", text)
        # What the model answered anyway is shown, with the tables withheld.
        self.assertIn("| grid+decline | answered | 3 | q3 | singer | `SELECT name FROM stadium` |", text)

    def test_withheld_mode_counts_only_its_own_answers(self):
        recs = self.withheld_records()
        recs[0]["withhold"] = None  # the same file read as a normal run: the withheld answers are not its
        last = json.loads(report.render(recs).splitlines()[-1])
        self.assertNotIn("withhold", last)
        self.assertEqual(last["arms"]["grid+decline"]["ex"], 100.0)


class Arm(unittest.TestCase):
    def test_grid_decline(self):
        settings, audit = arms.ARMS["grid+decline"]
        self.assertEqual(settings, {"grid.examples": "0", "grid.decline": "on"})
        self.assertNotIn("grid+decline", arms.DEFAULT)
        self.assertIn("grid.decline", arms.all_settings(["grid", "grid+decline"]))
        self.assertEqual(arms.mismatches("grid+decline", [{"generation": 1, "decode_mode": "mode1",
                                                           "prompt_decline": True}]), [])
        self.assertEqual(arms.mismatches("grid+decline", [{"generation": 2, "decode_mode": "mode1",
                                                           "prompt_decline": False}]),
                         ["generation 2: prompt_decline = False, expected True"])
        self.assertEqual(set(audit) & set(arms.PROMPT_KEYS), {"prompt_decline"})
        # No other arm reads the prompt artifact.
        self.assertEqual([a for a in arms.ARMS if set(arms.audit(a)) & set(arms.PROMPT_KEYS)], ["grid+decline"])


# Spider dev gold lines (dev_gold_pg.sql, line: statement, database) and the tables of
# their databases (the CREATE TABLE statements of postgres/<db>.sql, as PostgreSQL folds
# their unquoted names).
TABLES = {
    "concert_singer": ["concert", "singer", "singer_in_concert", "stadium"],
    "pets_1": ["has_pet", "pets", "student"],
    "voter_1": ["area_code_state", "contestants", "votes"],
    "world_1": ["city", "country", "countrylanguage"],
    "dog_kennels": ["breeds", "charges", "dogs", "owners", "professionals", "sizes", "treatment_types",
                    "treatments"],
    "orchestra": ["conductor", "orchestra", "performance", "show"],
}
GOLD = [
    (1, "SELECT count(*) FROM singer", "concert_singer", ["singer"]),
    (29, "SELECT name FROM stadium WHERE stadium_id NOT IN (SELECT stadium_id FROM concert)",
     "concert_singer", ["concert", "stadium"]),
    (32, "SELECT name FROM stadium EXCEPT SELECT T2.name FROM concert AS T1 JOIN stadium AS T2 ON "
         "T1.stadium_id  =  T2.stadium_id WHERE T1.year  =  2014", "concert_singer", ["concert", "stadium"]),
    (62, "SELECT major ,  age FROM student WHERE stuid NOT IN (SELECT T1.stuid FROM student AS T1 JOIN has_pet "
         "AS T2 ON T1.stuid  =  T2.stuid JOIN pets AS T3 ON T3.petid  =  T2.petid WHERE T3.pettype  =  'cat')",
     "pets_1", ["has_pet", "pets", "student"]),
    (701, "SELECT T3.area_code FROM contestants AS T1 JOIN votes AS T2 ON T1.contestant_number  =  "
          "T2.contestant_number JOIN area_code_state AS T3 ON T2.state  =  T3.state WHERE T1.contestant_name  =  "
          "'Tabatha Gehling' INTERSECT SELECT T3.area_code FROM contestants AS T1 JOIN votes AS T2 ON "
          "T1.contestant_number  =  T2.contestant_number JOIN area_code_state AS T3 ON T2.state  =  T3.state "
          "WHERE T1.contestant_name  =  'Kelly Clauss'", "voter_1", ["area_code_state", "contestants", "votes"]),
    (745, "SELECT COUNT(*) FROM (SELECT T1.Name FROM country AS T1 JOIN countrylanguage AS T2 ON T1.Code  =  "
          "T2.CountryCode WHERE T2.Language  =  'English' INTERSECT SELECT T1.Name FROM country AS T1 JOIN "
          "countrylanguage AS T2 ON T1.Code  =  T2.CountryCode WHERE T2.Language  =  'Dutch')",
     "world_1", ["country", "countrylanguage"]),
    (841, "SELECT T1.Name ,  T2.Orchestra FROM conductor AS T1 JOIN orchestra AS T2 ON T1.Conductor_ID  =  "
          "T2.Conductor_ID", "orchestra", ["conductor", "orchestra"]),
    (937, "SELECT T1.owner_id ,  T1.last_name FROM Owners AS T1 JOIN Dogs AS T2 ON T1.owner_id  =  T2.owner_id "
          "JOIN Treatments AS T3 ON T2.dog_id  =  T3.dog_id GROUP BY T1.owner_id ORDER BY count(*) DESC LIMIT 1",
     "dog_kennels", ["dogs", "owners", "treatments"]),
]


def spider_tables():
    """{db_id: [tables]} from Spider's postgres dumps, or None without the data."""
    paths = glob.glob(os.path.join(SPIDER, "postgres", "*.sql"))
    if not paths:
        return None
    out = {}
    for p in paths:
        db = os.path.basename(p)[:-4]
        if not re.match(r"^\d+_", db):
            with open(p, encoding="utf-8") as fh:
                out[db] = sorted({m.lower() for m in re.findall(r"CREATE TABLE \w+\.(\w+)", fh.read())})
    return out


class TablesRead(unittest.TestCase):
    def test_real_gold_lines(self):
        for line, sql, db, want in GOLD:
            self.assertEqual(sqltext.tables_read(sql, TABLES[db]), want, f"line {line}: {sql}")

    def test_what_is_no_table_read(self):
        tables = ["city", "country", "visit", "Singer", "singer"]
        # A column with a table's name, a qualified column, a function's FROM, an alias.
        self.assertEqual(sqltext.tables_read(
            "SELECT country, c.country, extract(year FROM c.founded) FROM city AS c WHERE c.name = 'visit'",
            tables), ["city"])
        # A WITH query is no table; a schema qualifier is dropped; a quoted name as written.
        self.assertEqual(sqltext.tables_read(
            'WITH v AS (SELECT * FROM s.visit) SELECT * FROM v, "Singer" JOIN country ON true', tables),
            ["Singer", "country", "visit"])
        self.assertEqual(sqltext.tables_read("SELECT 1", tables), [])

    def test_every_spider_dev_gold_line(self):
        """Over every gold line of Spider dev whose database has a dump: the tables read are
        the tables whose name is a word of the statement (on Spider no column or alias
        takes the name of a table of its database that the statement does not read: the
        FROM reading and this word match must agree), and a known number of them reads
        every table of its database (the withheld mode skips those)."""
        tables = spider_tables()
        gold = os.path.join(SPIDER, "dev_gold_pg.sql")
        if tables is None or not os.path.exists(gold):
            self.skipTest(f"no Spider data at {SPIDER}")
        with open(gold, encoding="utf-8") as fh:
            lines = [ln.rstrip("\n").rpartition("\t") for ln in fh if ln.strip()]
        seen = every = 0
        for n, (sql, _, db) in enumerate(lines, 1):
            if db not in tables:
                continue
            seen += 1
            words = {t.text for t in sqltext.tokens(sql) if t.kind in ("word", "qid")}
            got = sqltext.tables_read(sql, tables[db])
            self.assertEqual(got, sorted(words & set(tables[db])), f"line {n} ({db}): {sql}")
            self.assertTrue(got, f"line {n} ({db}) reads no table: {sql}")
            every += set(got) == set(tables[db])
        self.assertGreater(seen, 900)
        self.assertEqual(every, 58)


class FakeCursor:
    def __init__(self, rows):
        self.rows = rows

    def fetchone(self):
        return self.rows[0] if self.rows else None

    def __iter__(self):
        return iter(self.rows)


class FakeSuperuser:
    """Stands in for the superuser session: keeps the statements, answers the privilege
    query with `holding` (the tables the role still holds a privilege on) and EXPLAIN with
    `plans`."""

    def __init__(self, holding=(), plans=None, after_grant=None):
        self.statements, self.holding, self.plans = [], list(holding), plans or {}
        self.after_grant = after_grant

    def execute(self, query, params=None):
        text = query if isinstance(query, str) else repr(query)
        self.statements.append(text)
        if "GRANT SELECT" in text and "REVOKE" not in text and self.after_grant is not None:
            self.holding = list(self.after_grant)
        if "has_table_privilege" in text:
            return FakeCursor([(t,) for t in params[0] if t in self.holding])
        if text.startswith("EXPLAIN"):
            return FakeCursor([(self.plans[text[len("EXPLAIN (VERBOSE, FORMAT JSON) "):]],)])
        return FakeCursor([])

    def transaction(self, force_rollback=False):
        import contextlib
        return contextlib.nullcontext()

    def kinds(self):
        return [s.split("'")[1].split()[0] if s.startswith("Composed") else s.split()[0] for s in self.statements]


class FakeExecutor:
    def __init__(self, sqlstate="42501"):
        self.sqlstate, self.ran = sqlstate, []

    def run(self, statement):
        self.ran.append(statement)
        return {"ok": self.sqlstate is None, "rows": None, "sqlstate": self.sqlstate, "error": "e"}


def plan(*relations):
    return [{"Plan": {"Node Type": "Hash Join", "Plans": [
        {"Node Type": "Seq Scan", "Relation Name": r, "Schema": "concert_singer", "Alias": r} for r in relations]}}]


@unittest.skipIf(run is None, "run.py needs psycopg (use the venv of bench/eval/test.sh)")
class Withholding(unittest.TestCase):
    def setUp(self):
        self.db = run.Database("concert_singer", "concert_singer", "eval_concert_singer",
                               TABLES["concert_singer"], True)
        self.names = ["concert", "stadium"]

    def test_narrowed_for_the_asks_and_put_back(self):
        su = FakeSuperuser(holding=[], after_grant=self.names)
        ex = FakeExecutor()
        with run.withholding(su, ex, self.db, self.names, "SELECT 1"):
            self.assertEqual(su.kinds(), ["REVOKE", "SELECT"])
        self.assertEqual(su.kinds(), ["REVOKE", "SELECT", "GRANT", "SELECT"])
        self.assertIn("Identifier('concert_singer', 'stadium')", su.statements[0])
        self.assertIn("Identifier('eval_concert_singer')", su.statements[0])
        self.assertEqual(ex.ran, ["SELECT 1"])

    def test_put_back_after_an_error(self):
        su = FakeSuperuser(holding=[], after_grant=self.names)
        with self.assertRaises(KeyboardInterrupt):
            with run.withholding(su, FakeExecutor(), self.db, self.names, "SELECT 1"):
                raise KeyboardInterrupt
        self.assertEqual(su.kinds()[-2:], ["GRANT", "SELECT"])

    def test_a_table_still_readable_stops_the_run_and_is_put_back(self):
        su = FakeSuperuser(holding=["stadium"], after_grant=self.names)
        with self.assertRaises(SystemExit) as e:
            with run.withholding(su, FakeExecutor(), self.db, self.names, "SELECT 1"):
                self.fail("asked with a table still readable")
        self.assertIn("['stadium']", str(e.exception))
        self.assertIn("GRANT", su.kinds())

    def test_a_gold_that_still_runs_stops_the_run(self):
        su = FakeSuperuser(holding=[], after_grant=self.names)
        with self.assertRaises(SystemExit):
            with run.withholding(su, FakeExecutor(sqlstate=None), self.db, self.names, "SELECT 1"):
                self.fail("asked while the gold still runs")
        self.assertIn("GRANT", su.kinds())

    def test_a_grant_not_put_back_stops_the_run(self):
        su = FakeSuperuser(holding=[], after_grant=["concert"])
        with self.assertRaises(SystemExit) as e:
            with run.withholding(su, FakeExecutor(), self.db, self.names, "SELECT 1"):
                pass
        self.assertIn("['stadium']", str(e.exception))

    def test_plan(self):
        import inputs
        golds = {0: "SELECT count(*) FROM singer",
                 1: "SELECT T2.name FROM concert AS T1 JOIN stadium AS T2 ON T1.stadium_id = T2.stadium_id",
                 2: "SELECT * FROM concert, singer, singer_in_concert, stadium"}
        qs = [inputs.Question(i, "concert_singer", f"q{i}", None, g) for i, g in golds.items()]
        qs.append(inputs.Question(3, "concert_singer", "q3", None, None))
        su = FakeSuperuser(plans={golds[0]: plan("singer"), golds[1]: plan("concert", "stadium")})
        withheld, asked, skipped = run.withhold_plan(su, {"concert_singer": self.db}, qs)
        self.assertEqual(withheld, {0: ["singer"], 1: ["concert", "stadium"]})
        self.assertEqual([q.i for q in asked], [0, 1])
        self.assertEqual([(s["i"], s["why"]) for s in skipped], [(2, run.SKIP_ALL), (3, run.SKIP_NO_GOLD)])
        # A table the plan scans and the reading missed stops the run before any ask.
        su.plans[golds[0]] = plan("singer", "singer_in_concert")
        with self.assertRaises(SystemExit) as e:
            run.withhold_plan(su, {"concert_singer": self.db}, qs[:1])
        self.assertIn("singer_in_concert", str(e.exception))

    def test_outcome_record(self):
        rec = {"gold": "SELECT 1", **declined()}
        run.withheld_outcome(rec)
        self.assertEqual((rec["outcome"], rec["class"], rec["ex"]), ("declined", c.DECLINED, None))
        rec = {"gold": "SELECT 1", "sql": "SELECT name FROM stadium", "ask_sqlstate": None, "stop": "eos"}
        run.withheld_outcome(rec)
        self.assertEqual((rec["outcome"], rec["class"], rec["ex"]), ("answered", None, None))


if __name__ == "__main__":
    unittest.main()
