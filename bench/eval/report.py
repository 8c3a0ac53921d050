"""The summary of a run from its records (the JSONL file run.py writes): per arm the
figures of issue 19, the paired counts against the baseline arm, the failure table with
examples, and the audit check; then, as the last line, one JSON object:

    {"questions":N,"model":"…","arms":{"<arm>":{"executes":…,"ex":…,"refused":…,
     "declined":…,"truncated":…,"tokens_per_question":…,"s_per_question":…}, …}}

Percentages are in per cent (57.0 is 57.0 %); ex is null when no question of the run has
a gold result (DDL-only schemas, or question files without gold). declined is the share
of asks the model declined (grid.ask failed with P0002; classify.is_declined): on
answerable questions, false declines.

A run in the withheld mode (run.py --withhold gold-tables: each question asked while its
role may not read the tables its gold reads) has no EX: its summary gives per arm the
share of asks the model declined (what it should do), the checker refused, answered anyway
(a statement returned, from what the role may read) and that failed otherwise, with the
questions skipped because their gold reads every table of the database; its last line:

    {"questions":N,"model":"…","withhold":"gold-tables","skipped":K,
     "arms":{"<arm>":{"declined":…,"refused":…,"answered":…,"other":…,
     "tokens_per_question":…,"s_per_question":…}, …}}
"""

import json
from collections import Counter

import arms as armlib
import classify


def _pct(n, d):
    return round(100.0 * n / d, 1) if d else None


def metrics(answers, n):
    """The figures of one arm over its `answers` (one per question, `n` of them)."""
    judged = [r for r in answers if r.get("ex") is not None]
    return {
        "executes": _pct(sum(1 for r in answers if r.get("executes")), n),
        "ex": _pct(sum(1 for r in judged if r["ex"]), len(judged)) if judged else None,
        "refused": _pct(sum(1 for r in answers if r.get("ask_sqlstate") == "42501"), n),
        "declined": _pct(sum(1 for r in answers if classify.is_declined(r)), n),
        "truncated": _pct(sum(1 for r in answers if (r.get("stop") or "").startswith("budget")), n),
        "tokens_per_question": round(sum(r.get("tokens") or 0 for r in answers) / n, 1) if n else None,
        "s_per_question": round(sum(r.get("seconds") or 0 for r in answers) / n, 2) if n else None,
    }


def paired(by_arm, arm, base):
    """(fixed, broke, both right, both wrong): questions `arm` gets right and `base` wrong,
    and the reverse, over the questions both answered with a gold result."""
    a = {i: r["ex"] for i, r in by_arm[arm].items() if r.get("ex") is not None}
    b = {i: r["ex"] for i, r in by_arm[base].items() if r.get("ex") is not None}
    common = a.keys() & b.keys()
    return (sum(1 for i in common if a[i] and not b[i]), sum(1 for i in common if b[i] and not a[i]),
            sum(1 for i in common if a[i] and b[i]), sum(1 for i in common if not a[i] and not b[i]))


def _cell(v, pct=False):
    if v is None:
        return "n/a"
    return f"{v:.1f}%" if pct else f"{v}"


def _one_line(s, width=160):
    s = " ".join((s or "").split())
    return s if len(s) <= width else s[:width - 1] + "…"


def _escape(s):
    # One table cell: no line break, no column bar, no backtick closing the code span.
    return _one_line(s).replace("|", "\\|").replace("`", "'")


def withheld_metrics(answers, n):
    """The figures of one arm in the withheld mode over its `answers` (`n` questions): the
    share of each outcome (classify.outcome), and the cost."""
    counts = Counter(classify.outcome(r) for r in answers)
    out = {o: _pct(counts[o], n) for o in classify.OUTCOMES}
    out["tokens_per_question"] = round(sum(r.get("tokens") or 0 for r in answers) / n, 1) if n else None
    out["s_per_question"] = round(sum(r.get("seconds") or 0 for r in answers) / n, 2) if n else None
    return out


def render(records, arms=None, question_ids=None, model=None, examples=3):
    """The markdown summary and the JSON line. Without `arms`/`question_ids`/`model`, those
    of the last run record in `records`. The mode (normal, or withheld) is the last run
    record's; only answers asked in that mode count."""
    runs = [r for r in records if r.get("kind") == "run"]
    last = runs[-1] if runs else {}
    arms = arms or last.get("arms") or []
    qids = question_ids if question_ids is not None else last.get("question_ids") or []
    model = model or last.get("model") or "?"
    mode = last.get("withhold")
    wanted = set(qids)
    by_arm = {a: {} for a in arms}
    for r in records:
        if r.get("kind") == "answer" and r.get("arm") in by_arm and r.get("i") in wanted \
                and r.get("withhold") == mode:
            by_arm[r["arm"]][r["i"]] = r  # a later record of a question replaces an earlier one
    n = len(qids)
    if mode:
        return _render_withheld(last, arms, by_arm, n, model, mode, examples)
    figures = {a: metrics(list(by_arm[a].values()), n) for a in arms}
    lines = [f"## Accuracy: {n} questions, model {model}", ""]
    lines += _left_out(last, arms, by_arm, n)
    lines += ["| arm | executes | EX | refused | declined | truncated | tokens/q | s/q |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for a in arms:
        f = figures[a]
        lines.append(f"| {a} | {_cell(f['executes'], True)} | {_cell(f['ex'], True)} | "
                     f"{_cell(f['refused'], True)} | {_cell(f['declined'], True)} | {_cell(f['truncated'], True)} | "
                     f"{_cell(f['tokens_per_question'])} | {_cell(f['s_per_question'])} |")

    base = armlib.BASELINE if armlib.BASELINE in arms else (arms[0] if arms else None)
    others = [a for a in arms if a != base]
    if base and others:
        lines += ["", f"Paired against {base} (questions with a gold result both arms answered):", "",
                  f"| arm | fixed (right, {base} wrong) | broke (wrong, {base} right) | both right | both wrong |",
                  "| --- | ---: | ---: | ---: | ---: |"]
        for a in others:
            fx, br, rr, ww = paired(by_arm, a, base)
            lines.append(f"| {a} | {fx} | {br} | {rr} | {ww} |")

    tallies = {a: classify.tally(r["class"] for r in by_arm[a].values() if r.get("class")) for a in arms}
    lines += ["", "Misses by class (see bench/eval/classify.py for how a miss is classified):", "",
              "| class | " + " | ".join(arms) + " |", "| --- |" + " ---: |" * len(arms)]
    for c in classify.CLASSES:
        lines.append(f"| {c} | " + " | ".join(str(tallies[a][c]) for a in arms) + " |")
    lines.append("| **all misses** | " + " | ".join(str(sum(tallies[a].values())) for a in arms) + " |")

    if examples > 0:
        lines += ["", f"Examples (up to {examples} per class and arm):", "",
                  "| arm | class | q | question | prediction | gold | why |",
                  "| --- | --- | ---: | --- | --- | --- | --- |"]
        for c in classify.CLASSES:
            for a in arms:
                ex = [r for r in sorted(by_arm[a].values(), key=lambda r: r["i"]) if r.get("class") == c]
                for r in ex[:examples]:
                    pred = r.get("sql") or r.get("refused_sql") or ""
                    lines.append(f"| {a} | {c} | {r['i']} | {_escape(r.get('question'))} | "
                                 f"`{_escape(pred)}` | `{_escape(r.get('gold') or '')}` | "
                                 f"{_escape(r.get('detail'))} |")

    lines += _audit(last, arms, by_arm)

    summary = {"questions": n, "model": model, "arms": figures}
    lines += ["", json.dumps(summary, separators=(",", ":"))]
    return "\n".join(lines)


def _left_out(last, arms, by_arm, n):
    """The lines that say what the run has not answered yet and what it left out."""
    lines = []
    missing = {a: n - len(by_arm[a]) for a in arms if len(by_arm[a]) < n}
    if missing:
        lines += ["Not answered yet (the run was interrupted; --resume goes on): "
                  + ", ".join(f"{a} {m}" for a, m in missing.items()), ""]
    if last.get("gold_failed"):
        lines += [f"Left out: {len(last['gold_failed'])} questions whose gold fails on PostgreSQL "
                  f"(q{', q'.join(str(g['i']) for g in last['gold_failed'])}).", ""]
    if last.get("no_schema"):
        lines += [f"Left out: {len(last['no_schema'])} questions of databases without a schema file.", ""]
    return lines


def _audit(last, arms, by_arm):
    lines = ["", "Audit check (every generation of an arm shows the arm's settings, arms.py):", ""]
    for a in arms:
        bad = [m for r in by_arm[a].values() for m in (r.get("mismatches") or [])]
        gens = sum(len(r.get("generations") or []) for r in by_arm[a].values())
        lines.append(f"- {a}: {gens} generations, " + (
            "all as asked" if not bad else f"{len(bad)} NOT as asked, e.g. {bad[0]}"))
    for a, why in (last.get("unavailable_arms") or {}).items():
        lines.append(f"- {a}: not run: {why}")
    return lines


def _render_withheld(last, arms, by_arm, n, model, mode, examples):
    """The summary of a run in the withheld mode: no EX (no question can be answered from
    what its role may read); per arm, what became of the asks."""
    figures = {a: withheld_metrics(list(by_arm[a].values()), n) for a in arms}
    skipped = last.get("withhold_skipped") or []
    lines = [f"## Declines: {n} questions asked with the tables their gold reads withheld "
             f"(--withhold {mode}), model {model}", ""]
    if skipped:
        why = Counter(s.get("why") or "?" for s in skipped)
        lines += ["Skipped, not asked: " + "; ".join(
            f"{v} question{'' if v == 1 else 's'} because {k}" for k, v in sorted(why.items())) + ".", ""]
    lines += _left_out(last, arms, by_arm, n)
    lines += ["| arm | declined | refused | answered anyway | other failures | tokens/q | s/q |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for a in arms:
        f = figures[a]
        lines.append(f"| {a} | {_cell(f['declined'], True)} | {_cell(f['refused'], True)} | "
                     f"{_cell(f['answered'], True)} | {_cell(f['other'], True)} | "
                     f"{_cell(f['tokens_per_question'])} | {_cell(f['s_per_question'])} |")

    tallies = {a: classify.tally(r["class"] for r in by_arm[a].values() if r.get("class")) for a in arms}
    lines += ["", "Asks that returned no statement, by class (bench/eval/classify.py):", "",
              "| class | " + " | ".join(arms) + " |", "| --- |" + " ---: |" * len(arms)]
    for c in classify.CLASSES:
        if any(tallies[a][c] for a in arms):
            lines.append(f"| {c} | " + " | ".join(str(tallies[a][c]) for a in arms) + " |")

    if examples > 0:
        lines += ["", f"Examples (up to {examples} per outcome and arm):", "",
                  "| arm | outcome | q | question | withheld | statement | why |",
                  "| --- | --- | ---: | --- | --- | --- | --- |"]
        for o in classify.OUTCOMES:
            for a in arms:
                ex = [r for r in sorted(by_arm[a].values(), key=lambda r: r["i"]) if classify.outcome(r) == o]
                for r in ex[:examples]:
                    pred = r.get("sql") or r.get("refused_sql") or ""
                    lines.append(f"| {a} | {o} | {r['i']} | {_escape(r.get('question'))} | "
                                 f"{_escape(', '.join(r.get('withheld') or []))} | `{_escape(pred)}` | "
                                 f"{_escape(r.get('detail'))} |")

    lines += _audit(last, arms, by_arm)
    summary = {"questions": n, "model": model, "withhold": mode, "skipped": len(skipped), "arms": figures}
    lines += ["", json.dumps(summary, separators=(",", ":"))]
    return "\n".join(lines)
