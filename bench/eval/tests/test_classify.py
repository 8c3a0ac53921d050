"""The failure classes of classify.py and the SQL reading of sqltext.py they rest on."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import classify as c  # noqa: E402
import sqltext  # noqa: E402

GOLD_JOIN = ("SELECT T2.name FROM concert AS T1 JOIN stadium AS T2 ON T1.stadium_id = T2.stadium_id "
             "WHERE T1.year = 2014")


def ran(sql):
    return {"sql": sql, "stop": "eos"}


class Outcome(unittest.TestCase):
    def test_refused_before_anything_else(self):
        cls, detail = c.classify({"ask_sqlstate": "42501", "ask_error": "not allowed\nmore",
                                  "stop": "budget_completed"}, "SELECT 1")
        self.assertEqual((cls, detail), (c.REFUSED, "not allowed"))
        cls, detail = c.classify({"ask_sqlstate": "42501", "ask_error": "not allowed",
                                  "generations": [{"refused": "a"}, {"refused": "column x"}]}, "SELECT 1")
        self.assertEqual((cls, detail), (c.REFUSED, "column x"))

    def test_truncated(self):
        r = {"sql": "SELECT name FROM singer WHERE", "stop": "budget_truncated", "tokens": 256,
             "exec_sqlstate": "42601"}
        self.assertEqual(c.classify(r, "SELECT 1")[0], c.TRUNCATED)
        r["stop"] = "budget_completed"
        self.assertEqual(c.classify(r, "SELECT 1")[0], c.TRUNCATED)

    def test_ask_failure_and_no_statement(self):
        self.assertEqual(c.classify({"ask_sqlstate": "58000", "ask_error": "timeout"}, "SELECT 1"),
                         (c.OTHER, "grid.ask failed: 58000 timeout"))
        self.assertEqual(c.classify({"sql": "  ", "stop": "eos"}, "SELECT 1"), (c.OTHER, "no statement"))
        # The judge's refusal is classed by PostgreSQL's SQLSTATE, as an execution error.
        judged = {"ask_sqlstate": "42803",
                  "ask_error": "grid.ask: PostgreSQL refuses the model's statement (SQLSTATE 42803)"}
        self.assertEqual(c.classify(judged, "SELECT 1")[0], c.AGGREGATION)

    def test_by_sqlstate(self):
        cases = {"42703": c.COLUMN_OR_TABLE, "42P01": c.COLUMN_OR_TABLE, "42702": c.COLUMN_OR_TABLE,
                 "42803": c.AGGREGATION, "42883": c.TYPE_ERROR, "42804": c.TYPE_ERROR,
                 "22P02": c.TYPE_ERROR, "22012": c.TYPE_ERROR, "42601": c.OTHER, "57014": c.OTHER,
                 "25006": c.OTHER}
        for state, want in cases.items():
            r = {"sql": "SELECT x", "stop": "eos", "exec_sqlstate": state, "exec_error": "e"}
            self.assertEqual(c.classify(r, "SELECT 1")[0], want, state)

    def test_executed_without_rows(self):
        r = {"sql": "SELECT * FROM a, b", "stop": "eos", "exec_error": "more than 100000 rows"}
        self.assertEqual(c.classify(r, "SELECT 1"), (c.OTHER, "more than 100000 rows"))


class Structure(unittest.TestCase):
    def cls(self, pred, gold=GOLD_JOIN):
        return c.classify(ran(pred), gold)

    def test_a_join_missing_or_extra(self):
        self.assertEqual(self.cls("SELECT name FROM stadium")[0], c.JOIN)
        self.assertEqual(self.cls("SELECT name FROM singer", "SELECT T1.name FROM singer AS T1 JOIN "
                                  "singer_in_concert AS T2 ON T1.singer_id = T2.singer_id")[0], c.JOIN)

    def test_other_relations_as_many(self):
        cls, detail = self.cls("SELECT T2.name FROM concert AS T1 JOIN singer AS T2 "
                               "ON T1.stadium_id = T2.singer_id WHERE T1.year = 2014")
        self.assertEqual(cls, c.COLUMN_OR_TABLE)
        self.assertEqual(detail, "relations: extra {singer}; missing {stadium}")

    def test_join_condition(self):
        cls, detail = self.cls("SELECT s.name FROM concert c JOIN stadium s ON c.concert_id = s.stadium_id "
                               "WHERE c.year = 2014")
        self.assertEqual(cls, c.JOIN)
        self.assertIn("concert.concert_id = stadium.stadium_id", detail)

    def test_aliases_do_not_matter(self):
        # The same statement under other aliases and with the equality's sides swapped: no
        # structural difference (a miss like this is "other").
        self.assertEqual(self.cls("SELECT b.name FROM concert a JOIN stadium b ON b.stadium_id = a.stadium_id "
                                  "WHERE a.year = 2014")[0], c.OTHER)

    def test_aggregation(self):
        gold = "SELECT country, count(*) FROM singer GROUP BY country"
        self.assertEqual(self.cls("SELECT country, sum(age) FROM singer GROUP BY country", gold)[0],
                         c.AGGREGATION)
        self.assertEqual(self.cls("SELECT country, count(*) FROM singer GROUP BY name", gold)[0],
                         c.AGGREGATION)
        self.assertEqual(self.cls("SELECT country, count(DISTINCT name) FROM singer GROUP BY country",
                                  "SELECT country, count(name) FROM singer GROUP BY country")[0],
                         c.AGGREGATION)
        self.assertEqual(self.cls("SELECT country FROM singer GROUP BY country HAVING count(*) > 1",
                                  "SELECT country FROM singer GROUP BY country")[0], c.AGGREGATION)

    def test_columns(self):
        cls, detail = self.cls("SELECT T2.location FROM concert AS T1 JOIN stadium AS T2 ON "
                               "T1.stadium_id = T2.stadium_id WHERE T1.year = 2014")
        self.assertEqual((cls, detail), (c.COLUMN_OR_TABLE, "columns: extra {location}; missing {name}"))

    def test_literals(self):
        cls, detail = self.cls("SELECT T2.name FROM concert AS T1 JOIN stadium AS T2 ON "
                               "T1.stadium_id = T2.stadium_id WHERE T1.year = 2015")
        self.assertEqual((cls, detail), (c.LITERAL, "literals: extra {2015}; missing {2014}"))
        self.assertEqual(self.cls("SELECT name FROM singer WHERE country = 'france'",
                                  "SELECT name FROM singer WHERE country = 'France'")[0], c.LITERAL)
        # 2014.0 is 2014; a LIMIT count is not a value
        self.assertEqual(self.cls("SELECT name FROM t WHERE y = 2014.0 LIMIT 3",
                                  "SELECT name FROM t WHERE y = 2014 LIMIT 1")[0], c.OTHER)

    def test_other(self):
        self.assertEqual(self.cls("SELECT name FROM singer ORDER BY age",
                                  "SELECT name FROM singer ORDER BY age DESC")[0], c.OTHER)


class Reading(unittest.TestCase):
    def test_tokens(self):
        ts = sqltext.tokens("SELECT 'it''s; fine', \"Odd Name\" FROM t -- comment ;\n WHERE x = 1.50")
        self.assertEqual([(t.kind, t.text) for t in ts],
                         [("word", "select"), ("str", "it's; fine"), ("punct", ","), ("qid", "Odd Name"),
                          ("word", "from"), ("word", "t"), ("word", "where"), ("word", "x"), ("op", "="),
                          ("num", "1.5")])

    def test_unterminated_and_escaped(self):
        self.assertEqual([(t.kind, t.text) for t in sqltext.tokens("SELECT E'a''b', 'open")],
                         [("word", "select"), ("str", "a'b"), ("punct", ","), ("str", "open")])
        self.assertEqual([(t.kind, t.text) for t in sqltext.tokens('"a""b" "c')],
                         [("qid", 'a"b'), ("qid", "c")])

    def test_statement_count(self):
        self.assertEqual(sqltext.statement_count("SELECT 1;"), 1)
        self.assertEqual(sqltext.statement_count("SELECT ';'; "), 1)
        self.assertEqual(sqltext.statement_count("SELECT 1; DROP TABLE t"), 2)
        self.assertEqual(sqltext.statement_count(" ; "), 0)

    def test_features(self):
        f = sqltext.features(
            "SELECT s.name, count(*) AS n FROM singer AS s JOIN (SELECT singer_id FROM singer_in_concert) "
            "AS t ON s.singer_id = t.singer_id WHERE s.age > 20 GROUP BY s.name ORDER BY n DESC LIMIT 3")
        self.assertEqual(dict(f.tables), {"singer": 1, "singer_in_concert": 1})
        self.assertEqual(f.columns, {"name", "singer_id", "age"})
        self.assertEqual(dict(f.aggregates), {("count", False): 1})
        self.assertEqual(f.group_by, {"name"})
        self.assertEqual(f.literals, {("num", "20")})
        self.assertEqual(f.joins, {frozenset({"singer.singer_id", "t.singer_id"})})
        # a comma list of relations, schema-qualified names
        f = sqltext.features("SELECT a.x FROM s1.alpha a, beta WHERE a.id = beta.id")
        self.assertEqual(dict(f.tables), {"alpha": 1, "beta": 1})
        self.assertEqual(f.joins, {frozenset({"alpha.id", "beta.id"})})


if __name__ == "__main__":
    unittest.main()
