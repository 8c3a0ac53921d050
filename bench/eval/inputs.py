"""What an evaluation reads: the question file, the gold file, the schema directory, and
the sample of questions taken from them.

Question files (a JSON array), two formats, told apart per item:
  Spider: {"db_id", "question", "query"}                 gold = query
  BIRD:   {"db_id", "question", "evidence", "SQL"}       gold = SQL; the evidence is given
          to the model as a hint: the text asked is "<question>\\nHint: <evidence>"
          (grid.ask puts the question text in the prompt as it is).
A gold file (--gold), when given, replaces the items' gold: one line per item, in order,
"<SQL>\\t<db_id>" (Spider's dev_gold.sql format; BIRD's dev.sql has it too).

A schema directory holds <db_id>.sql files, each a script that fills one database's
schema: a dump with rows, or DDL only. Files named NNN_fix*.sql are fix-up scripts,
applied after every database in name order; other NNN_*.sql files are not databases and
are left alone (Spider's postgres/004_benchmark_schema.sql is the source project's own
bookkeeping tables).
"""

import json
import os
import re

_FIXUP = re.compile(r"^\d+_fix.*\.sql$")
_NUMBERED = re.compile(r"^\d+_.*\.sql$")


class Question:
    """One question of the file: `i` its position in the file (the key of its records),
    `db_id`, `text` the question, `evidence` (None for Spider), `ask` what grid.ask is
    given, `gold` the gold SQL (None when the file and --gold have none)."""

    __slots__ = ("i", "db_id", "text", "evidence", "ask", "gold")

    def __init__(self, i, db_id, text, evidence, gold):
        self.i, self.db_id, self.text, self.evidence, self.gold = i, db_id, text, evidence, gold
        self.ask = text.strip() + (f"\nHint: {evidence.strip()}" if evidence and evidence.strip() else "")


class InputError(Exception):
    pass


def load_questions(path, gold_path=None):
    try:
        with open(path, encoding="utf-8") as fh:
            items = json.load(fh)
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: {e}") from e
    if not isinstance(items, list):
        raise InputError(f"{path}: expected a JSON array of questions")
    golds = load_gold(gold_path, len(items)) if gold_path else None
    out = []
    for i, it in enumerate(items):
        if not isinstance(it, dict) or not isinstance(it.get("db_id"), str) \
                or not isinstance(it.get("question"), str):
            raise InputError(f"{path}: item {i} needs db_id and question (strings)")
        gold = it.get("SQL", it.get("query"))
        if golds is not None:
            gsql, gdb = golds[i]
            if gdb is not None and gdb != it["db_id"]:
                raise InputError(f"{gold_path}: line {i + 1} is for {gdb}, item {i} of {path} for {it['db_id']}")
            gold = gsql
        out.append(Question(i, it["db_id"], it["question"], it.get("evidence"), gold))
    return out


def load_gold(path, expected):
    try:
        with open(path, encoding="utf-8") as fh:
            lines = [ln.rstrip("\n") for ln in fh]
    except OSError as e:
        raise InputError(f"{path}: {e}") from e
    while lines and not lines[-1].strip():
        lines.pop()
    if len(lines) != expected:
        raise InputError(f"{path}: {len(lines)} lines for {expected} questions")
    out = []
    for ln in lines:
        sql, sep, db = ln.rpartition("\t")
        out.append((sql, db.strip()) if sep else (ln, None))
    return out


def schema_files(directory):
    """({db_id: path}, [fix-up paths in name order], [ignored names])."""
    try:
        names = sorted(os.listdir(directory))
    except OSError as e:
        raise InputError(f"{directory}: {e}") from e
    dbs, fixups, ignored = {}, [], []
    for n in names:
        if not n.endswith(".sql"):
            continue
        p = os.path.join(directory, n)
        if _FIXUP.match(n):
            fixups.append(p)
        elif _NUMBERED.match(n):
            ignored.append(n)
        else:
            dbs[n[:-4]] = p
    if not dbs:
        raise InputError(f"{directory}: no <db_id>.sql file")
    return dbs, fixups, ignored


def schema_name(db_id):
    """The schema a database is loaded into: its id as PostgreSQL folds an unquoted name
    (Spider's dumps create `CREATE SCHEMA cre_Doc_Template_Mgt`, unquoted)."""
    return db_id.lower()


def sample(questions, every=1, limit=None, available=None):
    """(taken, skipped): every `every`-th question of the file (positions 0, K, 2K, ...)
    whose database is in `available`, up to `limit` of them; `skipped` are those of the
    sample before the limit was reached whose database is not there."""
    taken, skipped = [], []
    for q in questions[::max(1, every)]:
        if limit is not None and len(taken) >= limit:
            break
        if available is not None and q.db_id not in available:
            skipped.append(q)
        else:
            taken.append(q)
    return taken, skipped
