"""Spider's databases for bench/latency.sh: loads them into the bench's cluster the way the
accuracy harness does (bench/eval/run.py), each in its schema with a role that may read it
(its search_path set to the schema, as a user's would be; value hints on, at 10), and
prints the asks to time.

    python spider.py --host DIR --port P --db NAME --spider DIR --dbs a,b,c --per N

Prints one line per ask, `role<TAB>statement`: the first N dev questions of each named
database (Spider's own wording, so each question differs, as users' do), as
`SELECT grid.ask(...)`."""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "eval"))

import psycopg  # noqa: E402
from psycopg import sql as pgsql  # noqa: E402

import inputs  # noqa: E402
import run  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--spider", required=True, help="Spider dev: dev.json and postgres/")
    ap.add_argument("--dbs", required=True, help="db_ids whose questions are asked")
    ap.add_argument("--per", type=int, required=True, help="questions per database")
    a = ap.parse_args()
    wanted = [d for d in a.dbs.split(",") if d]
    dbs, fixups, _ = inputs.schema_files(os.path.join(a.spider, "postgres"))
    missing = [d for d in wanted if d not in dbs]
    if missing:
        raise SystemExit(f"no dump for {', '.join(missing)} in {a.spider}/postgres")
    cl = run.Cluster(a.host, a.port, a.db)
    with cl.connect() as su:
        # Every dump, as the harness loads them: its fix-up scripts span the databases.
        loaded, _ = run.load_databases(cl, su, dbs, fixups)
        for db_id in wanted:
            db = loaded[db_id]
            su.execute(pgsql.SQL("ALTER ROLE {} SET search_path = {}").format(
                pgsql.Identifier(db.role), pgsql.Identifier(db.schema)))
            # Value hints on, as in the demo's configuration of issue 32's targets (the
            # loader opted every text column in, as the harness does).
            su.execute(pgsql.SQL("ALTER ROLE {} SET grid.value_hints = 10").format(
                pgsql.Identifier(db.role)))
    with open(os.path.join(a.spider, "dev.json"), encoding="utf-8") as fh:
        questions = json.load(fh)
    for db_id in wanted:
        role = loaded[db_id].role
        mine = [q["question"] for q in questions if q["db_id"] == db_id][: a.per]
        for q in mine:
            # A literal psql sends as is: standard_conforming_strings is on.
            literal = "'" + q.replace("'", "''") + "'"
            print(f"{role}\tSELECT grid.ask({literal})")


if __name__ == "__main__":
    main()
