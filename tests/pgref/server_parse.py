"""The language differential's statements read again by PostgreSQL 15 and 18 (issue 37,
item 4): scripts/pg-parse-diff.sh runs this file in three modes.

  server --host DIR --port N --out OUT DUMP   a running server's raw parser (psycopg)
  tree --out OUT DUMP                          libpg_query through pglast, in a venv that
                                               holds pglast 5 (PostgreSQL 15) or 8 (18)
  report DUMP --server15 F --server18 F --tree15 F --tree18 F
                                               the table of counts and the lists

DUMP is what `grid-pgref --dump` wrote: one JSON object a line with `source`, `sql`,
`language` and `postgres` (PostgreSQL 15's verdict through the pg_query crate), "ok" or
an error. Each mode reads each distinct statement once and writes (or reads) one JSON
object a line keyed by `sql`.

How a server parses without a catalog: each statement is `RETURN QUERY <statement>` in
the body of a PL/pgSQL function created with check_function_bodies on, and rolled back.
The validator compiles the body, and PL/pgSQL hands the text after RETURN QUERY, up to
its `;`, unchanged to the server's raw_parser (pl_gram.y, check_sql_expr): the parser and
lexer a top-level statement meets, under the same settings, with no parse analysis, so no
table needs to exist, nothing is looked up and nothing runs. A syntax error is the only
error it can report. RETURN QUERY rather than the statement on its own: as a plain
PL/pgSQL statement `SELECT ... INTO x` would have its INTO taken as PL/pgSQL's target, and
a statement opening with `(` would not be one; RETURN QUERY's text is not rewritten.
RETURN QUERY takes any statement at compile time (what it may run is checked at run
time), and the function returns SETOF record so that RETURN QUERY is allowed. What the
server cannot tell this way is how many statements the text holds (each would be
compiled); pglast's trees say that.
"""

import argparse
import json
import sys

TAG = "$grid_parse$"


def distinct_sql(dump):
    """The distinct statements of DUMP, in their first order."""
    seen = {}
    with open(dump) as f:
        for n, line in enumerate(f, 1):
            try:
                seen.setdefault(json.loads(line)["sql"], None)
            except (ValueError, KeyError) as e:
                sys.exit(f"{dump}:{n}: not a statement of grid-pgref --dump: {e}")
    return list(seen)


def write_lines(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def short(verdict):
    """A verdict for the lists: the language's refusals end in long sets of terminals."""
    return verdict if len(verdict) <= 70 else verdict[:70] + "..."


def read_by_sql(path):
    with open(path) as f:
        return {r["sql"]: r for r in map(json.loads, f)}


# -- server ------------------------------------------------------------------------------


class Rollback(Exception):
    pass


def server_parses(psycopg, conn, sql):
    """"ok" when the server's raw parser reads `sql`, else its error ("SQLSTATE: message")."""
    body = sql.strip()
    if TAG in body:
        return "not read: the statement holds the dollar quote " + TAG
    try:
        with conn.transaction():
            with conn.cursor() as c:
                c.execute("SET LOCAL check_function_bodies = on")
                # The statement's own terminator goes: PL/pgSQL's `;` comes after a
                # newline, which ends a trailing `--` comment.
                c.execute(
                    "CREATE FUNCTION pg_temp.grid_parse_probe() RETURNS SETOF record"
                    " LANGUAGE plpgsql AS " + TAG + "BEGIN RETURN QUERY " + body.rstrip(";")
                    + "\n;\nEND" + TAG
                )
                raise Rollback()
    except Rollback:
        return "ok"
    except psycopg.Error as e:
        msg = (e.diag.message_primary or str(e)).strip()
        return f"{e.sqlstate or '?'}: {msg}"


def server(a):
    import psycopg

    conn = psycopg.connect(host=a.host, port=a.port, dbname="postgres", user="postgres",
                           autocommit=True)
    version = conn.execute("SHOW server_version").fetchone()[0]
    rows = [{"sql": s, "server": server_parses(psycopg, conn, s), "version": version}
            for s in distinct_sql(a.dump)]
    write_lines(a.out, rows)
    print(f"    PostgreSQL {version}: {len(rows)} distinct statements, "
          f"{sum(r['server'] == 'ok' for r in rows)} parsed")


# -- tree --------------------------------------------------------------------------------


# Byte offsets, which move with the text and not the meaning (16 and 18 added the last four).
OFFSETS = {"location", "stmt_location", "stmt_len", "list_start", "list_end",
           "rexpr_list_start", "rexpr_list_end"}


def comparable(node):
    """A parse tree as both versions' trees can be compared: without its byte offsets, and
    with two changes of form that are no change of meaning undone. 18 keeps a statement's
    RETURNING list in a ReturningClause (which may name old and new), 15 as returningList:
    a clause that names neither is read as the list. libpg_query 15's JSON drops a negative
    integer (`abs(-1)`'s constant, `int[]`'s array bound -1 are `{}`): so do 18's here."""
    if isinstance(node, list):
        return [comparable(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for k, v in node.items():
        if k in OFFSETS:
            continue
        if k == "returningClause" and isinstance(v, dict) and set(v) <= {"exprs"}:
            k, v = "returningList", v.get("exprs")
        if k == "ival" and isinstance(v, int) and v < 0:
            continue
        out[k] = comparable(v)
    return out


def first_difference(a, b, path=""):
    """Where two trees first differ: a path and the two values (shortened)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k):
                return first_difference(a.get(k), b.get(k), f"{path}/{k}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return first_difference(x, y, f"{path}[{i}]")
    return f"{path}: {json.dumps(a)[:120]} (15) / {json.dumps(b)[:120]} (18)"


def tree(a):
    import pglast
    from pglast import parser

    version = "%d.%d" % parser.get_postgresql_version()
    rows = []
    for s in distinct_sql(a.dump):
        r = {"sql": s, "version": version}
        try:
            t = json.loads(parser.parse_sql_json(s))
            r["statements"] = len(t.get("stmts", []))
            # The whole tree, not only the fingerprint: the fingerprint leaves out
            # constants and names that version 16's lexer reads otherwise (`1_000`), and
            # 18's differs from 15's for every RETURNING.
            r["tree"] = json.dumps(comparable(t.get("stmts", [])), sort_keys=True)
            r["fingerprint"] = parser.fingerprint(s)
            r["parse"] = "ok" if r["statements"] == 1 else f"{r['statements']} statements"
        except pglast.parser.ParseError as e:
            r["parse"] = str(e)
        rows.append(r)
    write_lines(a.out, rows)
    print(f"    libpg_query {version} (pglast {pglast.__version__}): {len(rows)} distinct "
          f"statements, {sum(r['parse'] == 'ok' for r in rows)} parsed")


# -- report ------------------------------------------------------------------------------


def report(a):
    s15, s18 = read_by_sql(a.server15), read_by_sql(a.server18)
    t15, t18 = read_by_sql(a.tree15), read_by_sql(a.tree18)
    with open(a.dump) as f:
        dump = [json.loads(line) for line in f]
    kinds = {}
    versions, only18, only_language, trees, method, unsafe = [], [], [], [], [], []
    listed = set()
    for j in dump:
        sql = j["sql"]
        kind = j["source"].split(":")[0]
        for name, read in (("server15", s15), ("server18", s18), ("tree15", t15), ("tree18", t18)):
            if sql not in read:
                sys.exit(f"--{name} has no verdict for {j['source']}: {sql!r} (not of this dump?)")
        ok = {
            "language": j["language"] == "ok",
            "pg_query 15": j["postgres"] == "ok",
            "server 15": s15[sql]["server"] == "ok",
            "server 18": s18[sql]["server"] == "ok",
            "pglast 15": t15[sql]["parse"] == "ok",
            "pglast 18": t18[sql]["parse"] == "ok",
        }
        ok["same tree"] = (ok["pglast 15"] and ok["pglast 18"]
                           and t15[sql]["tree"] == t18[sql]["tree"])
        k = kinds.setdefault(kind, {"statements": 0, **{w: 0 for w in ok}})
        k["statements"] += 1
        for w, v in ok.items():
            k[w] += v
        row = {"source": j["source"], "sql": sql, "language": short(j["language"]),
               "pg_query 15": short(j["postgres"]), "server 15": s15[sql]["server"],
               "server 18": s18[sql]["server"]}
        if (j["source"], sql) in listed:
            continue
        listed.add((j["source"], sql))
        if ok["server 15"] != ok["server 18"]:
            versions.append(row)
        elif ok["server 15"] and ok["pglast 15"] and ok["pglast 18"] and not ok["same tree"]:
            trees.append({**row, "tree": first_difference(json.loads(t15[sql]["tree"]),
                                                          json.loads(t18[sql]["tree"]))})
        if ok["server 18"] and not ok["language"]:
            only18.append(row)
        if ok["language"] and not ok["server 18"]:
            only_language.append(row)
        if ok["language"] and not (ok["server 15"] and ok["server 18"]):
            unsafe.append(row)
        # The method's own checks: the server and its libpg_query read alike, and the
        # pg_query crate (libpg_query 15-4.2) as pglast 5's libpg_query 15.
        if (ok["server 15"] != ok["pglast 15"] or ok["server 18"] != ok["pglast 18"]
                or ok["pg_query 15"] != ok["pglast 15"]):
            method.append({**row, "pglast 15": short(t15[sql]["parse"]),
                           "pglast 18": short(t18[sql]["parse"])})

    cols = ["statements", "language", "pg_query 15", "server 15", "server 18", "pglast 15",
            "pglast 18", "same tree"]
    v15 = next(iter(s15.values()))["version"] if s15 else "?"
    v18 = next(iter(s18.values()))["version"] if s18 else "?"
    print(f"servers: PostgreSQL {v15} and {v18}; trees: libpg_query "
          f"{next(iter(t15.values()))['version'] if t15 else '?'} and "
          f"{next(iter(t18.values()))['version'] if t18 else '?'} (pglast)")
    print("statements read (as one statement) by each; `same tree`: pglast 15's and 18's "
          "trees are equal, byte offsets and two changes of form aside (comparable())")
    print("| source | " + " | ".join(cols) + " |")
    print("|" + " --- |" * (len(cols) + 1))
    total = {c: 0 for c in cols}
    for kind in sorted(kinds):
        print(f"| {kind} | " + " | ".join(str(kinds[kind][c]) for c in cols) + " |")
        for c in cols:
            total[c] += kinds[kind][c]
    print("| all | " + " | ".join(str(total[c]) for c in cols) + " |")

    def show(title, rows):
        print(f"\n{title}: {len(rows)}")
        for r in rows:
            print("  " + json.dumps(r))

    show("read differently by PostgreSQL 15 and 18 (server: accepted by one only)", versions)
    show("accepted by both servers with different trees (pglast 15 and 18)", trees)
    show("read by PostgreSQL 18's server, refused by the language", only18)
    show("read by the language, refused by PostgreSQL 18's server", only_language)
    show("the method's checks (server against its libpg_query, pg_query against pglast 5): "
         "disagreements", method)
    show("read by the language, refused by a server (a failure)", unsafe)
    return 1 if unsafe else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("server")
    p.add_argument("--host", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("dump")
    p = sub.add_parser("tree")
    p.add_argument("--out", required=True)
    p.add_argument("dump")
    p = sub.add_parser("report")
    for o in ("--server15", "--server18", "--tree15", "--tree18"):
        p.add_argument(o, required=True)
    p.add_argument("dump")
    a = ap.parse_args()
    return {"server": server, "tree": tree, "report": report}[a.mode](a)


if __name__ == "__main__":
    sys.exit(main())
