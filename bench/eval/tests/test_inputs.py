"""Question files, gold files, schema directories and samples (inputs.py); the arms'
audit check (arms.py); the figures and paired counts of report.py."""

import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import arms  # noqa: E402
import inputs  # noqa: E402
import report  # noqa: E402


def write(d, name, text):
    p = os.path.join(d, name)
    with open(p, "w", encoding="utf-8") as fh:
        fh.write(text)
    return p


class Questions(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_spider_and_bird_items(self):
        p = write(self.d, "q.json", json.dumps([
            {"db_id": "a", "question": "How many? ", "query": "SELECT count(*) FROM t"},
            {"db_id": "b", "question": "Cheapest?", "evidence": "cheapest refers to MIN(price)",
             "SQL": "SELECT MIN(price) FROM items"},
            {"db_id": "b", "question": "All?", "evidence": "", "SQL": "SELECT * FROM items"}]))
        qs = inputs.load_questions(p)
        self.assertEqual([(q.i, q.db_id, q.ask, q.gold) for q in qs], [
            (0, "a", "How many?", "SELECT count(*) FROM t"),
            (1, "b", "Cheapest?\nHint: cheapest refers to MIN(price)", "SELECT MIN(price) FROM items"),
            (2, "b", "All?", "SELECT * FROM items")])

    def test_gold_file_replaces_and_must_align(self):
        p = write(self.d, "q.json", json.dumps([
            {"db_id": "a", "question": "x", "query": "SELECT \"y\""},
            {"db_id": "b", "question": "y", "query": "SELECT 2"}]))
        g = write(self.d, "gold.sql", "SELECT 'y'\ta\nSELECT 2\tb\n")
        self.assertEqual([q.gold for q in inputs.load_questions(p, g)], ["SELECT 'y'", "SELECT 2"])
        write(self.d, "gold.sql", "SELECT 'y'\tb\nSELECT 2\tb\n")
        with self.assertRaises(inputs.InputError):
            inputs.load_questions(p, g)
        write(self.d, "gold.sql", "SELECT 'y'\ta\n")
        with self.assertRaises(inputs.InputError):
            inputs.load_questions(p, g)

    def test_bad_files(self):
        for text in ("{}", "[1]", '[{"db_id": "a"}]', "not json"):
            with self.assertRaises(inputs.InputError):
                inputs.load_questions(write(self.d, "q.json", text))

    def test_schema_directory(self):
        for n in ("concert_singer.sql", "cre_Doc_Template_Mgt.sql", "005_fix_types.sql",
                  "004_benchmark_schema.sql", "007_fix_years.sql", "README.md"):
            write(self.d, n, "")
        dbs, fixups, ignored = inputs.schema_files(self.d)
        self.assertEqual(sorted(dbs), ["concert_singer", "cre_Doc_Template_Mgt"])
        self.assertEqual([os.path.basename(f) for f in fixups], ["005_fix_types.sql", "007_fix_years.sql"])
        self.assertEqual(ignored, ["004_benchmark_schema.sql"])
        self.assertEqual(inputs.schema_name("cre_Doc_Template_Mgt"), "cre_doc_template_mgt")

    def test_sample(self):
        qs = [inputs.Question(i, "wta_1" if i in (4, 6) else "a", f"q{i}", None, "SELECT 1")
              for i in range(20)]
        taken, skipped = inputs.sample(qs, every=2, limit=None, available={"a"})
        self.assertEqual([q.i for q in taken], [0, 2, 8, 10, 12, 14, 16, 18])
        self.assertEqual([q.i for q in skipped], [4, 6])
        taken, skipped = inputs.sample(qs, every=2, limit=2, available={"a"})
        self.assertEqual(([q.i for q in taken], skipped), ([0, 2], []))
        taken, _ = inputs.sample(qs, every=1, limit=5, available={"a"})
        self.assertEqual([q.i for q in taken], [0, 1, 2, 3, 5])


class Arms(unittest.TestCase):
    def test_every_arm_is_well_formed(self):
        for name, (settings, audit) in arms.ARMS.items():
            self.assertIsInstance(settings, dict, name)
            self.assertIsInstance(audit, dict, name)
        self.assertTrue(set(arms.DEFAULT) <= set(arms.ARMS))

    def test_mismatches(self):
        self.assertEqual(arms.mismatches("grid", [{"generation": 1, "decode_mode": "mode2"}]), [])
        self.assertEqual(arms.mismatches("grid", [{"generation": 1, "decode_mode": "unconstrained"}]),
                         ["generation 1: decode_mode = 'unconstrained', expected one of ['mode1', 'mode2']"])
        self.assertEqual(arms.mismatches("unconstrained", [{"generation": 7}]),  # no such column: NULL
                         ["generation 7: decode_mode = None, expected 'unconstrained'"])
        got = arms.mismatches("grid-no-repair", [{"generation": 3, "decode_mode": "mode1", "repair_of": 2}])
        self.assertEqual(got, ["generation 3: repair_of = 2, expected None"])
        self.assertEqual(arms.mismatches("grid-no-repair", [{"generation": 3, "decode_mode": "mode1"}]), [])


class Figures(unittest.TestCase):
    def rec(self, i, arm, ex, **kw):
        r = {"kind": "answer", "i": i, "arm": arm, "ex": ex, "executes": ex is not False,
             "tokens": 10, "seconds": 1.0, "stop": "eos"}
        r.update(kw)
        return r

    def test_metrics_and_pairs(self):
        recs = [{"kind": "run", "arms": ["grid", "unconstrained"], "question_ids": [0, 1, 2, 3],
                 "model": "m"}]
        recs += [self.rec(0, "grid", True), self.rec(1, "grid", True),
                 self.rec(2, "grid", False, executes=False, ask_sqlstate="42501", tokens=30, seconds=3.0),
                 self.rec(3, "grid", False, executes=True, stop="budget_truncated")]
        recs += [self.rec(0, "unconstrained", True), self.rec(1, "unconstrained", False, executes=True),
                 self.rec(2, "unconstrained", True), self.rec(3, "unconstrained", False, executes=False)]
        text = report.render(recs)
        last = json.loads(text.splitlines()[-1])
        self.assertEqual(last, {"questions": 4, "model": "m", "arms": {
            "grid": {"executes": 75.0, "ex": 50.0, "refused": 25.0, "declined": 0.0, "truncated": 25.0,
                     "tokens_per_question": 15.0, "s_per_question": 1.5},
            "unconstrained": {"executes": 75.0, "ex": 50.0, "refused": 0.0, "declined": 0.0, "truncated": 0.0,
                              "tokens_per_question": 10.0, "s_per_question": 1.0}}})
        by_arm = {a: {r["i"]: r for r in recs[1:] if r["arm"] == a} for a in ("grid", "unconstrained")}
        self.assertEqual(report.paired(by_arm, "grid", "unconstrained"), (1, 1, 1, 1))
        self.assertIn("| grid | 1 | 1 | 1 | 1 |", text)

    def test_ex_is_null_without_gold_results(self):
        recs = [{"kind": "run", "arms": ["grid"], "question_ids": [0], "model": "m"},
                self.rec(0, "grid", None)]
        self.assertIsNone(json.loads(report.render(recs).splitlines()[-1])["arms"]["grid"]["ex"])


if __name__ == "__main__":
    unittest.main()
