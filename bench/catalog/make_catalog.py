#!/usr/bin/env python3
"""A catalog shaped like a real one, as SQL, for bench/catalog.sh (issue 34).

    python3 bench/catalog/make_catalog.py --relations N [--seed S] > catalog.sql

What it writes (deterministic for a seed and a size):
  * schemas of an application (sales, finance, hr, ...), each owned by its own owner
    role, a member of grid_curator: grid.ask only shows relations whose owner the asker
    trusts (sql/provenance.sql), and a schema owner the DBA vouches for is what a real
    deployment has; plus one schema `vendor` owned by a role that is NOT a curator, so
    that the snapshot query's left_out branch is exercised as it would be in the wild;
  * N relations: about 95% tables and 5% views over a table of their schema;
  * 5-200 columns a table, skewed (most tables narrow, a long tail of wide ones):
    5 + an exponential of mean 18, and one table in 25 drawn uniformly from 80-200;
  * names as found in real schemas: snake_case words and abbreviations (cust_nm,
    qty_ordered), units (amount_usd, weight_kg), some mixed-case quoted names
    ("CustomerID", "SalesOrderHeader");
  * a primary key on every table; 0-3 foreign keys a table to earlier tables (a third
    of them across schemas);
  * comments on about 30% of the tables and 12% of the columns;
  * three asking roles, members of grid_user:
      cat_all     USAGE and SELECT on every schema (vendor included),
      cat_two     two schemas (sales, finance),
      cat_cols    sales, plus column-level SELECT on 40% of the tables of crm and hr
                  (the id and the first half of their columns);
    each also reads the demo's employees and orders (demo/schema.sql, in public), so
    that the scripted mock's answers (demo/script.json) are writable by every role.
The DDL comes in transactions of 200 tables: one transaction for 10,000 tables would
need more lock slots than max_locks_per_transaction gives, one per statement would
commit (and flush) 100,000 times.
"""
import argparse
import math
import random

SCHEMAS = ["sales", "finance", "hr", "crm", "logistics", "inventory", "marketing",
           "analytics", "staging", "audit", "billing", "support"]
UNTRUSTED = "vendor"

ENTITIES = ["customer", "order", "order_line", "invoice", "invoice_line", "payment", "refund",
            "shipment", "parcel", "carrier", "product", "product_variant", "sku", "supplier",
            "warehouse", "bin_location", "stock_level", "employee", "department", "position",
            "payroll_run", "timesheet", "contract", "account", "ledger_entry", "journal",
            "budget", "cost_center", "campaign", "lead", "opportunity", "contact", "ticket",
            "ticket_comment", "sla_policy", "subscription", "plan", "price_list", "discount",
            "tax_rate", "currency_rate", "region", "store", "pos_txn", "return_auth",
            "vendor_bill", "asset", "maintenance_log", "event", "session", "page_view",
            "click", "survey_response", "audit_log", "user_account", "role_assignment"]
SUFFIXES = ["", "_history", "_daily", "_monthly", "_archive", "_stage", "_snapshot", "_v2",
            "_agg", "_raw", "_dim", "_fact", "_xref", "_summary", "_log", "_queue", "_import",
            "_backup_2023", "_tmp", "_detail"]
MIXED_TABLES = ["SalesOrderHeader", "SalesOrderDetail", "CustomerAddress", "ProductCategory",
                "PurchaseOrder", "WorkOrderRouting", "EmployeePayHistory", "ShipMethod",
                "CreditCard", "CurrencyRate", "StoreContact", "SpecialOffer"]

# (name, type) pools; the units and abbreviations are what a model must read right.
COLUMNS = [
    ("created_at", "timestamptz"), ("updated_at", "timestamptz"), ("deleted_at", "timestamptz"),
    ("created_by", "text"), ("status_cd", "varchar(8)"), ("is_active", "boolean"),
    ("amount_usd", "numeric(14,2)"), ("amount_eur", "numeric(14,2)"), ("tax_amt", "numeric(12,2)"),
    ("net_amt", "numeric(14,2)"), ("gross_amt", "numeric(14,2)"), ("discount_pct", "numeric(5,2)"),
    ("weight_kg", "numeric(10,3)"), ("length_cm", "numeric(8,1)"), ("width_cm", "numeric(8,1)"),
    ("height_cm", "numeric(8,1)"), ("volume_m3", "numeric(10,4)"), ("distance_km", "numeric(10,2)"),
    ("duration_ms", "bigint"), ("temp_c", "numeric(5,2)"), ("qty_ordered", "integer"),
    ("qty_shipped", "integer"), ("qty_on_hand", "integer"), ("unit_price", "numeric(12,4)"),
    ("cust_nm", "text"), ("first_nm", "text"), ("last_nm", "text"), ("email_addr", "text"),
    ("phone_no", "varchar(32)"), ("addr_line1", "text"), ("addr_line2", "text"), ("city", "text"),
    ("postal_cd", "varchar(16)"), ("country_iso2", "char(2)"), ("region_cd", "varchar(8)"),
    ("desc_txt", "text"), ("notes", "text"), ("ext_ref", "varchar(64)"), ("src_sys", "varchar(16)"),
    ("batch_id", "bigint"), ("seq_no", "integer"), ("fiscal_yr", "smallint"), ("fiscal_qtr", "smallint"),
    ("eff_dt", "date"), ("exp_dt", "date"), ("due_dt", "date"), ("paid_dt", "date"),
    ("ship_dt", "date"), ("hire_dt", "date"), ("birth_dt", "date"), ("score", "double precision"),
    ("rating", "smallint"), ("priority", "smallint"), ("category", "text"), ("sub_category", "text"),
    ("channel", "text"), ("utm_source", "text"), ("ip_addr", "inet"), ("user_agent", "text"),
    ("payload", "jsonb"), ("attrs", "jsonb"), ("tags", "text[]"), ("uuid", "uuid"),
    ("checksum_md5", "char(32)"), ("version_no", "integer"), ("lat_deg", "numeric(9,6)"),
    ("lon_deg", "numeric(9,6)"), ("salary_usd", "numeric(12,2)"), ("hours_wk", "numeric(5,2)"),
    ("fx_rate", "numeric(18,8)"), ("balance_usd", "numeric(16,2)"), ("credit_limit_usd", "numeric(14,2)"),
]
MIXED_COLUMNS = [("CustomerID", "integer"), ("OrderDate", "date"), ("TotalAmountUSD", "numeric(14,2)"),
                 ("ModifiedDate", "timestamp"), ("rowguid", "uuid"), ("ShipToAddressID", "integer"),
                 ("SalesPersonID", "integer"), ("UnitPriceDiscount", "numeric(6,4)"),
                 ("LineTotal", "numeric(16,2)"), ("Freight KG", "numeric(10,2)")]
TABLE_COMMENTS = ["Master record of {e}s", "One row per {e} per day, loaded nightly by the ETL",
                  "{e} records imported from the legacy ERP; do not edit by hand",
                  "Slowly changing dimension of {e}", "Ledger of {e} events (append-only)"]
COLUMN_COMMENTS = {"amount_usd": "Amount in US dollars, tax included",
                   "weight_kg": "Gross weight in kilograms",
                   "status_cd": "Status code: N new, P pending, C closed, X cancelled",
                   "ext_ref": "Identifier in the source system",
                   "fx_rate": "Units of the row's currency per US dollar"}


def q(name):
    """Quote an identifier when PostgreSQL would fold or reject it bare."""
    if name.islower() and name.replace("_", "").isalnum() and not name[0].isdigit():
        return name
    return '"' + name.replace('"', '""') + '"'


def lit(text):
    return "'" + text.replace("'", "''") + "'"


def width(rng):
    if rng.random() < 0.04:
        return rng.randint(80, 200)
    return min(200, 5 + int(rng.expovariate(1 / 18)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--relations", type=int, required=True)
    ap.add_argument("--seed", type=int, default=34)
    a = ap.parse_args()
    rng = random.Random(a.seed * 1_000_003 + a.relations)
    out = []
    w = out.append
    w("SET synchronous_commit = off;")
    w("SET client_min_messages = warning;")
    for s in SCHEMAS:
        w(f"CREATE ROLE own_{s} NOLOGIN IN ROLE grid_curator;")
        w(f"CREATE SCHEMA {s} AUTHORIZATION own_{s};")
    w(f"CREATE ROLE own_{UNTRUSTED} NOLOGIN;")
    w(f"CREATE SCHEMA {UNTRUSTED} AUTHORIZATION own_{UNTRUSTED};")
    for r in ("cat_all", "cat_two", "cat_cols"):
        w(f"CREATE ROLE {r} LOGIN IN ROLE grid_user;")
        w(f"GRANT SELECT ON public.employees, public.orders TO {r};")

    all_schemas = SCHEMAS + [UNTRUSTED]
    # The vendor schema holds ~3% of the relations; the others share the rest, unevenly
    # (a few big schemas, as applications have).
    weights = [1.0 / (i + 1) ** 0.7 for i in range(len(SCHEMAS))] + [0.03 * len(SCHEMAS) ** 0.3]
    used = {s: set() for s in all_schemas}
    tables = []  # (schema, name, [columns])
    col_grants = []  # (table, columns) for cat_cols
    n_views = max(1, a.relations // 20)
    n_tables = a.relations - n_views
    w("BEGIN;")
    for i in range(n_tables):
        if i and i % 200 == 0:
            w("COMMIT;")
            w("BEGIN;")
        s = rng.choices(all_schemas, weights)[0]
        if rng.random() < 0.03:
            base = rng.choice(MIXED_TABLES)
        else:
            base = rng.choice(ENTITIES) + rng.choice(SUFFIXES)
        name, k = base, 2
        while name in used[s]:
            name, k = f"{base}_{k}" if base.islower() else f"{base}{k}", k + 1
        used[s].add(name)
        ncols = width(rng)
        pool = MIXED_COLUMNS if rng.random() < 0.08 else COLUMNS
        cols = [("id", "bigint")]
        fks = []
        # Foreign keys to earlier tables, a third across schemas; never to vendor's,
        # whose owner is another author.
        candidates = [t for t in tables[-400:] if t[0] != UNTRUSTED]
        for _ in range(min(len(candidates), rng.choice([0, 0, 1, 1, 1, 2, 2, 3]))):
            same = [t for t in candidates if t[0] == s]
            ref = rng.choice(same) if same and rng.random() < 0.67 else rng.choice(candidates)
            c = (ref[1].lower().strip('"') + "_id").replace(" ", "_")
            if c in (x[0] for x in cols):
                continue
            cols.append((c, "bigint"))
            fks.append((c, ref))
        names = {c for c, _ in cols}
        while len(cols) < ncols:
            # A mixed-case table's own names first, then the common pool.
            fresh = [x for x in pool if x[0] not in names]
            c, t = rng.choice(fresh if fresh and rng.random() < 0.9 else COLUMNS)
            base_c, k = c, 2
            while c in names:
                c, k = f"{base_c}_{k}", k + 1
            names.add(c)
            cols.append((c, t))
        fq = f"{s}.{q(name)}"
        body = ", ".join(f"{q(c)} {t}" + (" PRIMARY KEY" if c == "id" else "") for c, t in cols)
        w(f"CREATE TABLE {fq} ({body});")
        for c, ref in fks:
            w(f"ALTER TABLE {fq} ADD FOREIGN KEY ({q(c)}) REFERENCES {ref[0]}.{q(ref[1])} (id);")
        if rng.random() < 0.30:
            e = name.lower().replace("_", " ")
            w(f"COMMENT ON TABLE {fq} IS {lit(rng.choice(TABLE_COMMENTS).format(e=e))};")
        for c, t in cols[1:]:
            if rng.random() < 0.12:
                text = COLUMN_COMMENTS.get(c, f"{c.replace('_', ' ')} ({t})")
                w(f"COMMENT ON COLUMN {fq}.{q(c)} IS {lit(text)};")
        w(f"ALTER TABLE {fq} OWNER TO own_{s};")
        tables.append((s, name, [c for c, _ in cols]))
        if s in ("crm", "hr") and rng.random() < 0.4:
            half = [c for c in [x for x, _ in cols][: max(2, len(cols) // 2)]]
            col_grants.append((fq, half))
    w("COMMIT;")
    w("BEGIN;")
    for j in range(n_views):
        s, name, cols = rng.choice([t for t in tables if t[0] != UNTRUSTED])
        vname, k = f"v_{name.lower()}", 2
        while vname in used[s]:
            vname, k = f"v_{name.lower()}_{k}", k + 1
        used[s].add(vname)
        picked = ", ".join(q(c) for c in cols[: min(len(cols), 12)])
        w(f"CREATE VIEW {s}.{q(vname)} AS SELECT {picked} FROM {s}.{q(name)};")
        w(f"ALTER VIEW {s}.{q(vname)} OWNER TO own_{s};")
    w("COMMIT;")
    # Grants, as a DBA writes them: per schema, and column lists for cat_cols.
    for s in all_schemas:
        w(f"GRANT USAGE ON SCHEMA {s} TO cat_all;")
        w(f"GRANT SELECT ON ALL TABLES IN SCHEMA {s} TO cat_all;")
    for s in ("sales", "finance"):
        w(f"GRANT USAGE ON SCHEMA {s} TO cat_two;")
        w(f"GRANT SELECT ON ALL TABLES IN SCHEMA {s} TO cat_two;")
    w("GRANT USAGE ON SCHEMA sales, crm, hr TO cat_cols;")
    w("GRANT SELECT ON ALL TABLES IN SCHEMA sales TO cat_cols;")
    for fq, cs in col_grants:
        w(f"GRANT SELECT ({', '.join(q(c) for c in cs)}) ON {fq} TO cat_cols;")
    w("ANALYZE;")
    print("\n".join(out))


if __name__ == "__main__":
    main()
