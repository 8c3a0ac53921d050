#!/usr/bin/env python3
"""Wide schemas and never-seen statements over them, for the cold-mask benchmark.

Real warehouse schemas are wider than Spider's (its widest dev database has 56 columns in
11 tables) and spell their names the way people do: mixed case, spaces, parentheses, long
phrases that must be double-quoted ("Percent (%) Eligible Free (K-12)"). Those names put
long, rarely shared byte strings into the lexicons, which is where a cold mask walk over a
150k-token vocabulary is slowest. This script writes such schemas, in Spider's tables.json
form, and statements over them that no corpus or cache has seen:

    python3 bench/wide/make_wide.py --out DIR [--seed N] [--dbs N] [--per-db N]
                                    [--spider ../shared/data/spider]

DIR/tables.json and DIR/gold.tsv (`SQL<TAB>db_id` lines, what `grid bench` reads). With
--spider, the four widest Spider dev databases and their gold statements are added, so the
arm holds both Spider's widest and the synthetic shape. Deterministic for a given seed.

Every statement is built from the schema it targets (columns of the table they are
qualified by, comparisons of the column's type), so an engine that refuses one is wrong;
`grid bench` reports refusals per engine.
"""

import argparse
import json
import os
import random
import sys

SUBJECTS = [
    "Customer", "Account", "School", "District", "Enrollment", "Student", "Vendor",
    "Invoice", "Shipment", "Warehouse", "Product", "Supplier", "Patient", "Clinic",
    "Claim", "Policy", "Employee", "Department", "Campaign", "Region", "Transaction",
    "Loan", "Branch", "Subscription", "Device",
]
MEASURES = [
    "Count", "Total", "Amount", "Rate", "Percent", "Score", "Balance", "Price", "Weight",
    "Duration", "Average", "Median", "Share", "Number", "Ratio",
]
QUALIFIERS = [
    "Annual", "Monthly", "Net", "Gross", "Adjusted", "Eligible", "Free", "Reduced",
    "Projected", "Actual", "Reported", "Weighted", "Current", "Prior Year", "Open",
]
UNITS = ["(USD)", "(%)", "(K-12)", "(Ages 5-17)", "(kg)", "(days)", "(in thousands)", ""]
TEXT_KINDS = [
    "Name", "Code", "Type", "Status", "City", "County", "Category", "Description",
    "Email Address", "Phone Number", "Zip Code", "Street Address", "Grade Span", "Owner",
]
SNAKE = ["cds_code", "record_id", "source_system", "load_batch", "etl_flag", "ref_key"]
VALUES = ["Active", "Closed", "Alameda", "Fresno", "K-12", "Elementary", "Premium", "West"]


def column_names(rng, subject, n):
    """`n` distinct columns: a key, mixed-case phrases with spaces and units, snake_case."""
    cols = [(f"{subject} ID", "number")]
    seen = {cols[0][0]}
    while len(cols) < n:
        r = rng.random()
        if r < 0.45:
            name = f"{rng.choice(QUALIFIERS)} {rng.choice(SUBJECTS)} {rng.choice(MEASURES)}"
            unit = rng.choice(UNITS)
            name = f"{name} {unit}" if unit else name
            kind = "number"
        elif r < 0.85:
            name = f"{rng.choice(SUBJECTS)} {rng.choice(TEXT_KINDS)}"
            kind = "text"
        else:
            name = f"{rng.choice(SNAKE)}_{rng.randint(1, 99)}"
            kind = rng.choice(["text", "number"])
        if name.lower() not in {s.lower() for s in seen}:
            seen.add(name)
            cols.append((name, kind))
    return cols


def make_db(rng, index):
    """One wide database: 5-9 tables of 20-100 columns, each table after the first
    holding a foreign key to an earlier one."""
    db_id = f"wide_{index}"
    subjects = rng.sample(SUBJECTS, rng.randint(5, 9))
    tables = []
    for t, subject in enumerate(subjects):
        name = rng.choice([f"{subject} Records", f"{subject} Master", f"{subject} Details (Current)",
                           f"{subject.lower()}_facts"])
        cols = column_names(rng, subject, rng.randint(20, 100))
        fk = None
        if t > 0:
            parent = rng.randrange(t)
            fk_col = f"{subjects[parent]} ID"
            if fk_col not in {c for c, _ in cols}:
                cols.append((fk_col, "number"))
            fk = (fk_col, parent)
        tables.append({"name": name, "cols": cols, "fk": fk})
    column_names_original = [[-1, "*"]]
    column_types = ["text"]
    primary_keys, index_of = [], {}
    for t, tab in enumerate(tables):
        for c, kind in tab["cols"]:
            index_of[(t, c)] = len(column_names_original)
            column_names_original.append([t, c])
            column_types.append(kind)
        primary_keys.append(index_of[(t, tab["cols"][0][0])])
    foreign_keys = []
    for t, tab in enumerate(tables):
        if tab["fk"]:
            col, parent = tab["fk"]
            foreign_keys.append([index_of[(t, col)], index_of[(parent, col)]])
    spider = {
        "db_id": db_id,
        "table_names_original": [t["name"] for t in tables],
        "table_names": [t["name"].lower() for t in tables],
        "column_names_original": column_names_original,
        "column_names": [[t, c.lower()] for t, c in column_names_original],
        "column_types": column_types,
        "primary_keys": primary_keys,
        "foreign_keys": foreign_keys,
    }
    return spider, tables


def q(name):
    """The name as a person writes it: bare when PostgreSQL folds it back, else quoted."""
    bare = name[:1].isalpha() and all(c.islower() or c.isdigit() or c == "_" for c in name)
    return name if bare else '"' + name.replace('"', '""') + '"'


def statement(rng, tables):
    """One statement of a randomly chosen shape over `tables`."""
    def pick(tab, kind=None):
        cols = [c for c, k in tab["cols"] if kind is None or k == kind]
        return rng.choice(cols or [c for c, _ in tab["cols"]])

    def literal(tab, col):
        kind = dict(tab["cols"])[col]
        return str(rng.randint(1, 500)) if kind == "number" else f"'{rng.choice(VALUES)}'"

    tab = rng.choice(tables)
    t = q(tab["name"])
    shape = rng.randrange(7)
    if shape == 0:
        a, b, w, o = (pick(tab) for _ in range(4))
        return (f"SELECT {q(a)}, {q(b)} FROM {t} WHERE {q(w)} = {literal(tab, w)} "
                f"ORDER BY {q(o)} DESC LIMIT {rng.randint(1, 20)}")
    if shape == 1:
        w = pick(tab, "number")
        return f"SELECT COUNT(*) FROM {t} WHERE {q(w)} > {rng.randint(1, 100)}"
    if shape == 2:
        g, n = pick(tab, "text"), pick(tab, "number")
        return (f"SELECT {q(g)}, AVG({q(n)}) FROM {t} GROUP BY {q(g)} "
                f"HAVING COUNT(*) > {rng.randint(1, 9)} ORDER BY AVG({q(n)}) DESC")
    if shape == 3:
        num, den = pick(tab, "number"), pick(tab, "number")
        return (f"SELECT CAST({q(num)} AS REAL) / {q(den)} FROM {t} "
                f"WHERE {q(den)} > 0 ORDER BY {q(num)} LIMIT 1")
    children = [c for c in tables if c["fk"] and tables[c["fk"][1]] is not c]
    if shape in (4, 5) and children:
        child = rng.choice(children)
        key, parent_index = child["fk"]
        parent = tables[parent_index]
        a, b, w = pick(child), pick(parent), pick(parent, "text")
        if shape == 4:
            return (f"SELECT T1.{q(a)}, T2.{q(b)} FROM {q(child['name'])} AS T1 "
                    f"JOIN {q(parent['name'])} AS T2 ON T1.{q(key)} = T2.{q(key)} "
                    f"WHERE T2.{q(w)} = {literal(parent, w)}")
        return (f"SELECT {q(a)} FROM {q(child['name'])} WHERE {q(key)} IN "
                f"(SELECT {q(key)} FROM {q(parent['name'])} WHERE {q(w)} LIKE '%{rng.choice(VALUES)}%')")
    a, n = pick(tab, "text"), pick(tab, "number")
    return (f"SELECT DISTINCT {q(a)} FROM {t} WHERE {q(n)} BETWEEN {rng.randint(1, 50)} "
            f"AND {rng.randint(51, 900)} AND {q(a)} IS NOT NULL")


SPIDER_WIDEST = ["student_transcripts_tracking", "dog_kennels", "real_estate_properties", "world_1"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=21)
    ap.add_argument("--dbs", type=int, default=6)
    ap.add_argument("--per-db", type=int, default=25)
    ap.add_argument("--spider", help="Spider folder: add its widest dev databases and gold")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    schemas, gold = [], []
    for i in range(a.dbs):
        spider, tables = make_db(rng, i)
        schemas.append(spider)
        for _ in range(a.per_db):
            gold.append(f"{statement(rng, tables)}\t{spider['db_id']}")
    if a.spider:
        with open(os.path.join(a.spider, "tables.json")) as f:
            schemas += [d for d in json.load(f) if d["db_id"] in SPIDER_WIDEST]
        with open(os.path.join(a.spider, "dev_gold_pg.sql")) as f:
            gold += [l.rstrip("\n") for l in f if l.rstrip("\n").rsplit("\t", 1)[-1] in SPIDER_WIDEST]
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "tables.json"), "w") as f:
        json.dump(schemas, f)
    with open(os.path.join(a.out, "gold.tsv"), "w") as f:
        f.write("\n".join(gold) + "\n")
    cols = [len(s["column_names_original"]) - 1 for s in schemas]
    print(f"make_wide: {len(schemas)} databases ({min(cols)}-{max(cols)} columns), "
          f"{len(gold)} statements in {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
