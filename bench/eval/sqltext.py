"""SQL text as the harness reads it: a lexer, and the structural features that the
failure classification compares (tables, join conditions, columns, aggregates, grouping,
literals). A heuristic reading of the text, not a parser: it must never fail on what a
model writes, and it only has to tell apart the ways a prediction differs from its gold.
"""

import re
from collections import Counter
from decimal import Decimal, InvalidOperation

# A token: kind is one of
#   "word"  a bare word, text lower-cased (PostgreSQL folds unquoted names);
#   "qid"   a double-quoted identifier, text as written between the quotes;
#   "str"   a string literal, text unescaped;
#   "num"   a numeric literal, text normalised (1.50 and 1.5 are one value);
#   "op"    an operator (=, <>, ::, ...);
#   "punct" one of ( ) , . ;
# depth is the parenthesis depth the token is at (the "(" itself is at the outer depth).
_OPS = ("::", "<>", "!=", ">=", "<=", "||", "=", "<", ">", "+", "-", "*", "/", "%")


class Token:
    __slots__ = ("kind", "text", "depth")

    def __init__(self, kind, text, depth):
        self.kind, self.text, self.depth = kind, text, depth

    def is_word(self, *words):
        return self.kind == "word" and self.text in words

    def __repr__(self):
        return f"{self.kind}:{self.text}@{self.depth}"


def _number(text):
    try:
        d = Decimal(text)
    except InvalidOperation:
        return text
    if d == d.to_integral_value():
        return str(int(d))
    return str(d.normalize())


def tokens(sql):
    """The tokens of `sql`. Comments are dropped; an unterminated string or quoted name
    runs to the end of the text."""
    out = []
    i, n, depth = 0, len(sql), 0
    while i < n:
        c = sql[i]
        if c.isspace():
            i += 1
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c == "'" or (c in "eE" and sql.startswith("'", i + 1)):
            text, i = _quoted(sql, i + (1 if c == "'" else 2), "'")
            out.append(Token("str", text, depth))
        elif c == '"':
            text, i = _quoted(sql, i + 1, '"')
            out.append(Token("qid", text, depth))
        elif c == "$":
            m = re.match(r"\$([A-Za-z_][A-Za-z_0-9]*)?\$", sql[i:])
            if m:
                tag = m.group(0)
                j = sql.find(tag, i + len(tag))
                end = n if j < 0 else j
                out.append(Token("str", sql[i + len(tag):end], depth))
                i = n if j < 0 else j + len(tag)
            else:
                m = re.match(r"\$\d+", sql[i:])
                out.append(Token("op", m.group(0) if m else "$", depth))
                i += len(m.group(0)) if m else 1
        elif c.isdigit() or (c == "." and i + 1 < n and sql[i + 1].isdigit()):
            m = re.match(r"(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", sql[i:])
            out.append(Token("num", _number(m.group(0)), depth))
            i += len(m.group(0))
        elif c.isalpha() or c == "_" or ord(c) > 127:
            m = re.match(r"[\w$]+", sql[i:])
            out.append(Token("word", m.group(0).lower(), depth))
            i += len(m.group(0))
        elif c == "(":
            out.append(Token("punct", c, depth))
            depth += 1
            i += 1
        elif c == ")":
            depth = max(0, depth - 1)
            out.append(Token("punct", c, depth))
            i += 1
        elif c in ",.;":
            out.append(Token("punct", c, depth))
            i += 1
        else:
            op = next((o for o in _OPS if sql.startswith(o, i)), c)
            out.append(Token("op", op, depth))
            i += len(op)
    return out


def _quoted(sql, i, quote):
    """The text of a quoted string or name whose body starts at i (a doubled quote is
    one), and the position after its closing quote (the end of `sql` when none)."""
    buf = []
    while i < len(sql):
        if sql.startswith(quote * 2, i):
            buf.append(quote)
            i += 2
        elif sql[i] == quote:
            return "".join(buf), i + 1
        else:
            buf.append(sql[i])
            i += 1
    return "".join(buf), i


def statement_count(sql):
    """How many non-empty statements `sql` holds (split at top-level semicolons)."""
    count, pending = 0, False
    for t in tokens(sql):
        if t.kind == "punct" and t.text == ";":
            count += pending
            pending = False
        else:
            pending = True
    return count + pending


def strip_semicolon(sql):
    """`sql` without trailing semicolons and white space."""
    return sql.strip().rstrip(";").rstrip()


def first_word(sql):
    for t in tokens(sql):
        if t.kind == "punct" and t.text == "(":
            continue
        return t.text if t.kind == "word" else ""
    return ""


def orders_at_top(sql):
    """Whether the statement's own result is ordered: ORDER BY outside any parentheses.
    An ORDER BY inside a subquery (say, under LIMIT 1 in a comparison) does not order what
    PostgreSQL returns."""
    ts = tokens(sql)
    return any(
        a.is_word("order") and b.is_word("by") and a.depth == 0
        for a, b in zip(ts, ts[1:])
    )


# Words that are never a table, a column or an alias. Type names count as keywords: they
# follow "::" or AS inside CAST, never name a column in Spider-like schemas.
KEYWORDS = frozenset("""
select from where group by order having limit offset as on join inner left right full outer
cross natural and or not in is null like ilike between exists case when then else end
distinct all union intersect except asc desc nulls first last true false with recursive over
partition rows range interval cast filter within lateral using any some array fetch next
only values table similar escape collate at time zone current_date current_time
current_timestamp localtime localtimestamp extract epoch year month day hour minute second
integer int bigint smallint numeric decimal real double precision float text varchar char
character varying boolean date timestamp timestamptz bool unknown window
""".split())

AGGREGATES = frozenset(["count", "sum", "avg", "min", "max"])

# Words that end a FROM list, a GROUP BY list or an ON condition at their depth.
_CLAUSE_END = frozenset("""
where group order having limit offset union intersect except join inner left right full
cross natural on using window fetch returning
""".split())


class Features:
    """The parts of a statement the failure classes compare (all names lower-cased,
    quoted names as written):
      tables     Counter of the relations named in FROM/JOIN lists (schema dropped);
      joins      set of frozensets {a, b} for each equality between two column references
                 (table.column, the alias resolved to its table; a bare column as itself);
      columns    set of the column names referenced, qualifiers dropped;
      aggregates Counter of (function, distinct?) for count/sum/avg/min/max;
      group_by   set of the column names in GROUP BY lists;
      having     whether a HAVING clause exists;
      literals   set of string and numeric literals (LIMIT/OFFSET counts left out).
    """

    __slots__ = ("tables", "joins", "columns", "aggregates", "group_by", "having", "literals")

    def __init__(self):
        self.tables = Counter()
        self.joins = set()
        self.columns = set()
        self.aggregates = Counter()
        self.group_by = set()
        self.having = False
        self.literals = set()


def _is_name(t):
    return t is not None and (t.kind == "qid" or (t.kind == "word" and t.text not in KEYWORDS))


def features(sql):
    ts = tokens(sql)
    f = Features()
    at = lambda k: ts[k] if 0 <= k < len(ts) else None  # noqa: E731
    aliases = {}        # alias (or table name) -> table, for qualified column references
    defined = set()     # token positions that name a relation or define an alias
    output_aliases = set()

    # Relations and their aliases: after FROM (a comma list) and after JOIN. The scan of
    # each list does not move the outer one, so derived tables are read in turn.
    for start, t in enumerate(ts):
        if not t.is_word("from", "join") or (t.is_word("from") and _in_extract(ts, start)):
            continue
        depth, k = t.depth, start + 1
        while k < len(ts):
            table = None
            if at(k).kind == "punct" and at(k).text == "(":
                k = _skip_parens(ts, k)  # a derived table: only its alias is read here
            elif _is_name(at(k)):
                j = k
                if at(k + 1) and at(k + 1).text == "." and _is_name(at(k + 2)):
                    defined.add(k)  # the schema
                    j = k + 2
                table = ts[j].text
                f.tables[table] += 1
                defined.add(j)
                aliases.setdefault(table, table)
                k = j + 1
            else:
                break
            if at(k) and at(k).is_word("as"):
                k += 1
            if _is_name(at(k)) and at(k).depth == depth:
                aliases[ts[k].text] = table
                defined.add(k)
                k += 1
                if at(k) and at(k).text == "(":  # AS t(a, b)
                    k = _skip_parens(ts, k)
            if t.is_word("from") and at(k) and at(k).text == "," and at(k).depth == depth:
                k += 1
                continue
            break

    # Output aliases: a name after AS outside FROM lists.
    for k, t in enumerate(ts):
        if t.is_word("as") and _is_name(at(k + 1)) and (k + 1) not in defined:
            if not _in_cast(ts, k):
                output_aliases.add(ts[k + 1].text)
                defined.add(k + 1)

    def colref(k):
        """(name for joins, column, next position) if a column reference starts at k."""
        t = at(k)
        if not _is_name(t) or k in defined:
            return None
        if at(k + 1) and at(k + 1).text == "(":
            return None  # a function
        if at(k - 1) and at(k - 1).text == "::":
            return None
        if at(k + 1) and at(k + 1).text == "." and _is_name(at(k + 2)):
            q, col = t.text, ts[k + 2].text
            table = aliases.get(q) or q
            return f"{table}.{col}", col, k + 3
        if at(k - 1) and at(k - 1).text == ".":
            return None  # handled with its qualifier
        if t.text in output_aliases or t.text in aliases:
            return None
        return t.text, t.text, k + 1

    k = 0
    while k < len(ts):
        t = ts[k]
        r = colref(k)
        if r:
            f.columns.add(r[1])
            nxt = at(r[2])
            if nxt and nxt.text == "=":
                r2 = colref(r[2] + 1)
                if r2:
                    f.joins.add(frozenset((r[0], r2[0])))
            k = r[2]
            continue
        if t.kind == "word" and t.text in AGGREGATES and at(k + 1) and at(k + 1).text == "(":
            f.aggregates[(t.text, bool(at(k + 2) and at(k + 2).is_word("distinct")))] += 1
        elif t.is_word("group") and at(k + 1) and at(k + 1).is_word("by"):
            j = k + 2
            while j < len(ts) and not (ts[j].depth < t.depth or (
                    ts[j].depth == t.depth and ts[j].kind == "word" and ts[j].text in _CLAUSE_END)):
                if _is_name(ts[j]) and not (at(j + 1) and at(j + 1).text in (".", "(")):
                    f.group_by.add(ts[j].text)
                j += 1
        elif t.is_word("having"):
            f.having = True
        elif t.kind in ("str", "num"):
            if not (at(k - 1) and at(k - 1).is_word("limit", "offset")):
                f.literals.add((t.kind, t.text))
        k += 1
    return f


def _skip_parens(ts, k):
    """The position after the parenthesis that closes the one at k."""
    depth = ts[k].depth
    j = k + 1
    while j < len(ts) and not (ts[j].text == ")" and ts[j].kind == "punct" and ts[j].depth == depth):
        j += 1
    return j + 1


def _enclosing_call(ts, k):
    """The word before the parenthesis that encloses position k, if any."""
    depth = ts[k].depth
    for j in range(k - 1, -1, -1):
        if ts[j].kind == "punct" and ts[j].text == "(" and ts[j].depth == depth - 1:
            return ts[j - 1].text if j > 0 and ts[j - 1].kind == "word" else None
    return None


def _in_cast(ts, k):
    return _enclosing_call(ts, k) == "cast"


def _in_extract(ts, k):
    return _enclosing_call(ts, k) in ("extract", "substring", "trim", "overlay", "position")


def tables_read(sql, tables):
    """The tables of `tables` (relation names as pg_class spells them: PostgreSQL folds an
    unquoted name to lower case, as `tokens` does) that `sql` reads, sorted: the relations
    of its FROM and JOIN lists (`features`: every FROM and JOIN, so those of subqueries in
    any clause, of derived tables and of each branch of UNION, INTERSECT and EXCEPT; aliases
    and schema qualifiers dropped), kept where they name one of `tables`. A WITH query's
    name is no table and is left out, unless a table has the name (then the table is
    counted: withholding a table too many never makes a question answerable)."""
    known = set(tables)
    return sorted(t for t in features(sql).tables if t in known)
