"""Checks a mock run of bench/eval.sh against values computed by hand (bench/eval/test.sh
runs it):

    python3 ci_check.py spider|bird RESULTS.jsonl OUTPUT

spider: Spider dev questions 0-7 (concert_singer) with tests/spider_script.json, whose SQL
is right for 0, 1, 2 (columns in another order than the gold's), 6, and wrong for
  3  ORDER BY age where the gold orders by age DESC         -> other
  4  country = 'france' where the data says 'France'        -> wrong literal or value
  5  a column singer does not have (nationality)            -> any class; under grid, no
                                                               returned statement names it
  7  GROUP BY song_name with song_release_year selected     -> aggregation or grouping
so every arm's EX is 4/8 = 50.0 %, and the rows of 0, 1, 2, 6 match the gold's. Each entry
matches "-- Question:\n" and the whole question, so that the examples the grid+examples arm
shows (other questions of the database) never select another question's entry.
bird: tests/bird_questions.json on the DDL-only tests/ddl/shop.sql: 0 is answered only if
its evidence reached the prompt (the script matches the hint, not the question); 2 compares
a numeric column with 'ten', which PostgreSQL refuses to plan (22P02) -> type error; EX
is null (no rows), executes 2/3 = 66.7 %.
"""

import json
import sys

ANY = object()
SPIDER = {0: (True, None), 1: (True, None), 2: (True, None), 3: (False, "other"),
          4: (False, "wrong literal or value"), 5: (False, ANY), 6: (True, None),
          7: (False, "aggregation or grouping")}
FIGURES = ("executes", "ex", "refused", "declined", "truncated", "tokens_per_question", "s_per_question")

failures = []


def expect(ok, what):
    print(("ok: " if ok else "FAILED: ") + what)
    if not ok:
        failures.append(what)


def load(results, output):
    records = [json.loads(line) for line in open(results, encoding="utf-8") if line.strip()]
    lines = [ln for ln in open(output, encoding="utf-8").read().splitlines() if ln.strip()]
    summary = json.loads(lines[-1])
    expect(set(summary) == {"questions", "model", "arms"}, "the last line is the summary object")
    for arm, f in summary["arms"].items():
        expect(set(f) == set(FIGURES), f"{arm}: the summary has the issue's figures")
    answers = {}
    for r in records:
        if r["kind"] == "answer":
            answers.setdefault(r["arm"], {})[r["i"]] = r
    expect(set(answers) == set(summary["arms"]), f"records for the arms of the summary ({', '.join(answers)})")
    expect("grid" in answers, "the grid arm ran")
    return summary, answers


def spider(results, output):
    summary, answers = load(results, output)
    expect(summary["questions"] == 8, "8 questions")
    for arm, got in answers.items():
        expect(sorted(got) == list(range(8)), f"{arm}: one record per question")
        for i, (ex, cls) in SPIDER.items():
            r = got.get(i, {})
            expect(r.get("ex") is ex, f"{arm} q{i}: EX {ex}")
            if cls is not ANY:
                expect(r.get("class") == cls, f"{arm} q{i}: class {cls!r} (got {r.get('class')!r})")
        expect(summary["arms"][arm]["ex"] == 50.0, f"{arm}: EX 50.0 % (4 of 8)")
        expect(all(not r.get("mismatches") for r in got.values()), f"{arm}: every generation as the arm asks")
        if arm == "grid-no-repair":
            expect(all(len(r["generations"]) <= 1 for r in got.values()), f"{arm}: no repair generation")
        if arm == "grid+examples":
            # Leave-one-out: the other questions of concert_singer were stored before each
            # ask, and the prompts showed some of them (never the question's own: a
            # mismatch, checked above).
            expect(all((r.get("examples_stored") or 0) > 0 for r in got.values()),
                   f"{arm}: the other questions' pairs were stored before each ask")
            expect(any((r.get("examples_shown") or 0) > 0 for r in got.values()),
                   f"{arm}: examples reached the prompt")
    q5 = answers["grid"][5]
    expect("nationality" not in (q5.get("sql") or "").lower(),
           "grid q5: no returned statement names a column singer does not have")


def bird(results, output):
    summary, answers = load(results, output)
    expect(summary["questions"] == 3, "3 questions")
    for arm, got in answers.items():
        expect(got[0].get("sql") == "SELECT min(price) FROM items",
               f"{arm} q0: the evidence reached the prompt (the scripted answer was written)")
        expect([got[i].get("executes") for i in range(3)] == [True, True, False],
               f"{arm}: q0 and q1 plan, q2 does not")
        expect(got[2].get("class") == "type error" and (got[2].get("detail") or "").startswith("22P02"),
               f"{arm} q2: type error, 22P02 (got {got[2].get('class')!r}, {got[2].get('detail')!r})")
        expect(all(got[i].get("ex") is None for i in range(3)), f"{arm}: EX null per question (DDL only)")
        expect(summary["arms"][arm]["ex"] is None and summary["arms"][arm]["executes"] == 66.7,
               f"{arm}: EX null, executes 66.7 %")


if __name__ == "__main__":
    {"spider": spider, "bird": bird}[sys.argv[1]](sys.argv[2], sys.argv[3])
    if failures:
        print(f"{len(failures)} checks failed", file=sys.stderr)
        sys.exit(1)
