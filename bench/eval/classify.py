"""Why a prediction missed: one class per miss, so the next accuracy work is chosen from
data.

The classes, and how a miss gets one (the first rule that applies):

1. refused     grid.ask failed with 42501: the checker refused the statement (after its
               repair, when repair is on);
2. declined    grid.ask failed with P0002: the model declined (`CANNOT ANSWER 'reason'`,
               docs/postgres.md "When the model declines"; the detail is the reason). A
               P0002 the judge passes on from PostgreSQL (its message says "PostgreSQL
               refuses the model's statement") is not a decline: rule 4 classes it;
3. truncated   the last generation stopped at the token budget (stop budget_completed or
               budget_truncated);
4. other       grid.ask failed otherwise (endpoint, timeout: the SQLSTATE is the detail;
               a refusal of the judge is classed by its SQLSTATE as in 5), or it returned
               no statement;
5. by the SQLSTATE of the prediction's failed execution (`ERROR_CLASSES`): undefined or
   ambiguous column or table -> wrong column or table; grouping error -> aggregation or
   grouping; datatype mismatch, undefined operator or function, invalid text
   representation and the other data exceptions (class 22) -> type error; anything else
   (a syntax error, the statement timeout, a write refused) -> other;
6. it ran and its rows differ: a structural comparison of prediction and gold
   (`sqltext.features`), first difference wins:
     the relations named differ: a relation more or fewer -> wrong join, the same
       number but others -> wrong column or table;
     the equalities between columns of two relations (ON and WHERE) differ -> wrong join;
     the aggregate functions, GROUP BY names or HAVING differ -> aggregation or grouping;
     the column names referenced differ -> wrong column or table;
     the string and number literals differ -> wrong literal or value;
     none of these -> other (operators, DISTINCT, ORDER BY or LIMIT, select-list shape).
"""

from collections import Counter

import sqltext

REFUSED = "refused"
DECLINED = "declined"
TRUNCATED = "truncated"
COLUMN_OR_TABLE = "wrong column or table"
JOIN = "wrong join"
LITERAL = "wrong literal or value"
AGGREGATION = "aggregation or grouping"
TYPE_ERROR = "type error"
OTHER = "other"

CLASSES = [COLUMN_OR_TABLE, JOIN, LITERAL, AGGREGATION, TYPE_ERROR, REFUSED, DECLINED, TRUNCATED, OTHER]

# The SQLSTATE grid.ask fails with when the model declines (no_data_found).
DECLINE_SQLSTATE = "P0002"
JUDGED = "PostgreSQL refuses the model's statement"

ERROR_CLASSES = {
    "42703": COLUMN_OR_TABLE,  # undefined_column
    "42P01": COLUMN_OR_TABLE,  # undefined_table, also "missing FROM-clause entry"
    "42702": COLUMN_OR_TABLE,  # ambiguous_column
    "42P09": COLUMN_OR_TABLE,  # ambiguous_alias
    "42712": COLUMN_OR_TABLE,  # duplicate_alias
    "42P10": COLUMN_OR_TABLE,  # invalid_column_reference
    "42803": AGGREGATION,      # grouping_error
    "42P20": AGGREGATION,      # windowing_error
    "42804": TYPE_ERROR,       # datatype_mismatch
    "42883": TYPE_ERROR,       # undefined_function: "operator does not exist: text = integer"
    "42725": TYPE_ERROR,       # ambiguous_function
    "42846": TYPE_ERROR,       # cannot_coerce
}


def execution_error_class(sqlstate):
    if sqlstate in ERROR_CLASSES:
        return ERROR_CLASSES[sqlstate]
    if sqlstate and sqlstate.startswith("22"):
        return TYPE_ERROR  # data exceptions: invalid input syntax for a type, overflow, ...
    return OTHER


def _names(xs):
    return "{" + ", ".join(sorted(str(x) for x in xs)) + "}"


def _diff(what, pred, gold):
    extra, missing = pred - gold, gold - pred
    parts = []
    if extra:
        parts.append(f"extra {_names(extra)}")
    if missing:
        parts.append(f"missing {_names(missing)}")
    return f"{what}: " + "; ".join(parts)


def structural_class(pred_sql, gold_sql):
    """(class, detail) for a prediction that ran and returned other rows than the gold."""
    p, g = sqltext.features(pred_sql), sqltext.features(gold_sql)
    if p.tables != g.tables:
        cls = JOIN if sum(p.tables.values()) != sum(g.tables.values()) else COLUMN_OR_TABLE
        if set(p.tables) != set(g.tables):
            return cls, _diff("relations", set(p.tables), set(g.tables))
        return cls, f"relations: {dict(p.tables)} against {dict(g.tables)}"
    if p.joins != g.joins:
        fmt = lambda js: {" = ".join(sorted(j)) for j in js}  # noqa: E731
        return JOIN, _diff("join conditions", fmt(p.joins), fmt(g.joins))
    if p.aggregates != g.aggregates:
        fmt = lambda c: {f"{f}(DISTINCT)" if d else f"{f}()" for (f, d) in c}  # noqa: E731
        detail = _diff("aggregates", fmt(p.aggregates), fmt(g.aggregates))
        if fmt(p.aggregates) == fmt(g.aggregates):
            detail = f"aggregates: {_counts(p.aggregates)} against {_counts(g.aggregates)}"
        return AGGREGATION, detail
    if p.group_by != g.group_by:
        return AGGREGATION, _diff("GROUP BY", p.group_by, g.group_by)
    if p.having != g.having:
        return AGGREGATION, "HAVING " + ("extra" if p.having else "missing")
    if p.columns != g.columns:
        return COLUMN_OR_TABLE, _diff("columns", p.columns, g.columns)
    if p.literals != g.literals:
        fmt = lambda ls: {repr(v) if k == "str" else v for (k, v) in ls}  # noqa: E731
        return LITERAL, _diff("literals", fmt(p.literals), fmt(g.literals))
    return OTHER, "same relations, joins, aggregates, columns and literals"


def _counts(c):
    return ", ".join(f"{f}{'(DISTINCT)' if d else '()'} x{n}" for (f, d), n in sorted(c.items()))


def is_declined(answer):
    """Whether the ask of `answer` (a record) ended in the model's decline: SQLSTATE P0002,
    and not the judge passing on PostgreSQL's own P0002 (docs/postgres.md, "Why P0002")."""
    return answer.get("ask_sqlstate") == DECLINE_SQLSTATE and JUDGED not in (answer.get("ask_error") or "")


def classify(answer, gold_sql):
    """(class, detail) for a miss. `answer` is the record the harness keeps for one
    question and arm (keys ask_sqlstate, ask_error, generations, sql, stop, tokens,
    exec_sqlstate, exec_error)."""
    if answer.get("ask_sqlstate") == "42501":
        # The checker's violations, as the audit keeps them, say it shorter than the error.
        last = (answer.get("generations") or [{}])[-1]
        return REFUSED, last.get("refused") or _first_line(answer.get("ask_error"))
    if is_declined(answer):
        # The audit keeps "declined: <reason>", the message the reason and advice.
        last = (answer.get("generations") or [{}])[-1]
        return DECLINED, last.get("refused") or _first_line(answer.get("ask_error"))
    if answer.get("stop") in ("budget_completed", "budget_truncated"):
        return TRUNCATED, f"stop {answer['stop']} after {answer.get('tokens')} tokens"
    if answer.get("ask_sqlstate"):
        error = f"{answer['ask_sqlstate']} {_first_line(answer.get('ask_error'))}"
        # The judge's refusal carries PostgreSQL's own SQLSTATE: the statement would have
        # failed the same way when run, so it is classed (and told) as that error.
        if JUDGED in (answer.get("ask_error") or ""):
            return execution_error_class(answer["ask_sqlstate"]), error
        return OTHER, f"grid.ask failed: {error}"
    if not (answer.get("sql") or "").strip():
        return OTHER, "no statement"
    if answer.get("exec_sqlstate"):
        cls = execution_error_class(answer["exec_sqlstate"])
        return cls, f"{answer['exec_sqlstate']} {_first_line(answer.get('exec_error'))}"
    if answer.get("exec_error"):
        return OTHER, answer["exec_error"]
    return structural_class(answer["sql"], gold_sql)


def _first_line(text):
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""


def tally(classes):
    """Counter of classes, in CLASSES order."""
    c = Counter(classes)
    return {k: c.get(k, 0) for k in CLASSES}


# What became of an ask, in the withheld mode (run.py --withhold), where the question
# cannot be answered from what the role may read and EX means nothing.
DECLINED_OUTCOME, REFUSED_OUTCOME, ANSWERED_OUTCOME, OTHER_OUTCOME = "declined", "refused", "answered", "other"
OUTCOMES = [DECLINED_OUTCOME, REFUSED_OUTCOME, ANSWERED_OUTCOME, OTHER_OUTCOME]


def outcome(answer):
    """declined (the model declined: P0002), refused (the checker refused: 42501), answered
    (grid.ask returned a statement: the model answered anyway, from what the role may
    read), or other (any other failure, the judge's refusals and an empty answer among
    them)."""
    if is_declined(answer):
        return DECLINED_OUTCOME
    if answer.get("ask_sqlstate") == "42501":
        return REFUSED_OUTCOME
    if not answer.get("ask_sqlstate") and (answer.get("sql") or "").strip():
        return ANSWERED_OUTCOME
    return OTHER_OUTCOME
