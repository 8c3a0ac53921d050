//! `grid.catalog_snapshot()` (src/catalog.rs): what the role may use, per verb and column,
//! read again at each call; the caller's search path decides what is unqualified; system
//! schemas and `grid` never appear; the query the asks inline is the function's.

#[pgrx::pg_schema]
mod tests {
    use crate::tests::support::{run, select_one};
    use pgrx::prelude::*;
    use serde_json::{json, Value};

    /// The snapshot `call` returns, as the current role.
    fn snapshot(call: &str) -> Value {
        select_one::<pgrx::JsonB>(call)
            .map(|j| j.0)
            .unwrap_or_else(|| panic!("{call}: NULL"))
    }

    /// The relations of the test fixture (named `grid_t_*`), as `schema.name`.
    fn names(s: &Value) -> Vec<String> {
        s["relations"]
            .as_array()
            .expect("relations is an array")
            .iter()
            .filter(|r| r["name"].as_str().is_some_and(|n| n.starts_with("grid_t_")))
            .map(|r| {
                format!(
                    "{}.{}",
                    r["schema"].as_str().unwrap_or(""),
                    r["name"].as_str().unwrap_or("")
                )
            })
            .collect()
    }

    fn relation<'a>(s: &'a Value, schema: &str, name: &str) -> &'a Value {
        s["relations"]
            .as_array()
            .expect("relations is an array")
            .iter()
            .find(|r| r["schema"] == schema && r["name"] == name)
            .unwrap_or_else(|| panic!("{schema}.{name} not in the snapshot: {s}"))
    }

    fn fixture() {
        for sql in [
            "CREATE SCHEMA grid_t_app",
            "CREATE SCHEMA grid_t_locked",
            "CREATE TABLE public.grid_t_departments (id int PRIMARY KEY, name text NOT NULL)",
            "COMMENT ON TABLE public.grid_t_departments IS 'Departments of the company'",
            "COMMENT ON COLUMN public.grid_t_departments.name IS 'Department name'",
            "CREATE TABLE public.grid_t_employees (id int PRIMARY KEY, name text,
                 dept_id int REFERENCES public.grid_t_departments (id), salary numeric(10,2))",
            "CREATE VIEW public.grid_t_staff AS SELECT id, name FROM public.grid_t_employees",
            "CREATE MATERIALIZED VIEW public.grid_t_headcount AS SELECT dept_id, count(*) AS n
                 FROM public.grid_t_employees GROUP BY dept_id",
            "CREATE TABLE grid_t_app.grid_t_orders (id bigint PRIMARY KEY,
                 employee_id int REFERENCES public.grid_t_employees (id), total numeric)",
            "CREATE TABLE grid_t_app.grid_t_staff (x int)",
            "CREATE TABLE public.grid_t_badges (code text PRIMARY KEY, label text)",
            "CREATE TABLE public.grid_t_secret (x int)",
            "CREATE TABLE public.grid_t_outbox (x int)",
            "CREATE TABLE grid_t_locked.grid_t_vault (x int)",
            "CREATE ROLE grid_t_analyst NOLOGIN",
            "GRANT USAGE ON SCHEMA grid_t_app TO grid_t_analyst",
            "GRANT SELECT ON public.grid_t_departments TO grid_t_analyst",
            "GRANT SELECT (id, name, dept_id), UPDATE (name) ON public.grid_t_employees TO grid_t_analyst",
            "GRANT SELECT ON public.grid_t_staff, public.grid_t_headcount TO grid_t_analyst",
            "GRANT SELECT, INSERT ON grid_t_app.grid_t_orders TO grid_t_analyst",
            "GRANT SELECT ON grid_t_app.grid_t_staff TO grid_t_analyst",
            "GRANT SELECT (label) ON public.grid_t_badges TO grid_t_analyst",
            "GRANT DELETE ON public.grid_t_outbox TO grid_t_analyst",
            // SELECT on the table, but no USAGE on its schema: unusable, so absent.
            "GRANT SELECT ON grid_t_locked.grid_t_vault TO grid_t_analyst",
            "GRANT EXECUTE ON FUNCTION grid.catalog_snapshot(text[]) TO grid_t_analyst",
        ] {
            run(sql);
        }
    }

    #[pg_test]
    fn the_snapshot_holds_what_the_role_may_use_per_verb_and_column() {
        fixture();
        run("SET search_path = public");
        run("SET ROLE grid_t_analyst");
        let s = snapshot("SELECT grid.catalog_snapshot()");
        run("RESET ROLE");

        assert_eq!(s["format"], 1);
        assert_eq!(s["role"], "grid_t_analyst");
        assert_eq!(s["search_path"], json!(["public"]));
        // Ordered by schema then name; no secret, no schema without USAGE.
        assert_eq!(
            names(&s),
            [
                "grid_t_app.grid_t_orders",
                "grid_t_app.grid_t_staff",
                "public.grid_t_badges",
                "public.grid_t_departments",
                "public.grid_t_employees",
                "public.grid_t_headcount",
                "public.grid_t_outbox",
                "public.grid_t_staff",
            ]
        );

        let dept = relation(&s, "public", "grid_t_departments");
        assert_eq!(dept["kind"], "table");
        assert_eq!(dept["on_search_path"], true);
        assert_eq!(dept["comment"], "Departments of the company");
        assert_eq!(dept["privileges"], json!(["select"]));
        assert_eq!(dept["primary_key"], json!(["id"]));
        assert_eq!(
            dept["columns"],
            json!([
                {"name": "id", "type": "integer", "not_null": true, "comment": null, "privileges": ["select"]},
                {"name": "name", "type": "text", "not_null": true, "comment": "Department name", "privileges": ["select"]},
            ])
        );

        // Column grants only: no table privilege, the hidden column absent.
        let emp = relation(&s, "public", "grid_t_employees");
        assert_eq!(emp["privileges"], json!([]));
        assert_eq!(
            emp["columns"],
            json!([
                {"name": "id", "type": "integer", "not_null": true, "comment": null, "privileges": ["select"]},
                {"name": "name", "type": "text", "not_null": false, "comment": null, "privileges": ["select", "update"]},
                {"name": "dept_id", "type": "integer", "not_null": false, "comment": null, "privileges": ["select"]},
            ])
        );
        assert_eq!(emp["primary_key"], json!(["id"]));
        assert_eq!(
            emp["foreign_keys"],
            json!([{"columns": ["dept_id"], "ref_schema": "public",
                    "ref_table": "grid_t_departments", "ref_columns": ["id"]}])
        );

        // Off the search path: qualified; per-verb privileges; a foreign key across schemas.
        let orders = relation(&s, "grid_t_app", "grid_t_orders");
        assert_eq!(orders["on_search_path"], false);
        assert_eq!(orders["privileges"], json!(["select", "insert"]));
        assert_eq!(
            orders["columns"][0],
            json!({"name": "id", "type": "bigint", "not_null": true, "comment": null,
                   "privileges": ["select", "insert"]})
        );
        assert_eq!(orders["foreign_keys"][0]["ref_table"], "grid_t_employees");

        assert_eq!(relation(&s, "public", "grid_t_staff")["kind"], "view");
        assert_eq!(
            relation(&s, "public", "grid_t_headcount")["kind"],
            "materialized_view"
        );

        // A key over a hidden column is left out rather than naming the column.
        let badges = relation(&s, "public", "grid_t_badges");
        assert_eq!(badges["primary_key"], json!([]));
        assert_eq!(badges["columns"].as_array().map(Vec::len), Some(1));

        // DELETE is a table privilege only: the relation, without columns.
        let outbox = relation(&s, "public", "grid_t_outbox");
        assert_eq!(outbox["privileges"], json!(["delete"]));
        assert_eq!(outbox["columns"], json!([]));
    }

    #[pg_test]
    fn a_revoke_takes_effect_at_the_next_call() {
        fixture();
        run("SET ROLE grid_t_analyst");
        let before = snapshot("SELECT grid.catalog_snapshot()");
        run("RESET ROLE");
        assert!(names(&before).contains(&"public.grid_t_departments".to_string()));

        run("REVOKE SELECT ON public.grid_t_departments FROM grid_t_analyst");
        run("REVOKE UPDATE (name) ON public.grid_t_employees FROM grid_t_analyst");
        run("SET ROLE grid_t_analyst");
        let after = snapshot("SELECT grid.catalog_snapshot()");
        run("RESET ROLE");
        assert!(!names(&after).contains(&"public.grid_t_departments".to_string()));
        let emp = relation(&after, "public", "grid_t_employees");
        assert_eq!(emp["columns"][1]["privileges"], json!(["select"]));
        // The foreign key to the now invisible table goes with it.
        assert_eq!(emp["foreign_keys"], json!([]));

        // And a GRANT comes back just as fast.
        run("GRANT SELECT (salary) ON public.grid_t_employees TO grid_t_analyst");
        run("SET ROLE grid_t_analyst");
        let regrant = snapshot("SELECT grid.catalog_snapshot()");
        run("RESET ROLE");
        let emp = relation(&regrant, "public", "grid_t_employees");
        assert_eq!(emp["columns"][3]["name"], "salary");
        assert_eq!(emp["columns"][3]["type"], "numeric(10,2)");
    }

    #[pg_test]
    fn the_callers_search_path_decides_what_is_unqualified() {
        fixture();
        // The default argument is evaluated with the caller's path, not the pinned one.
        run("SET search_path = grid_t_app, public");
        run("SET ROLE grid_t_analyst");
        let s = snapshot("SELECT grid.catalog_snapshot()");
        run("RESET ROLE");
        assert_eq!(s["search_path"], json!(["grid_t_app", "public"]));
        assert_eq!(
            relation(&s, "grid_t_app", "grid_t_orders")["on_search_path"],
            true
        );
        // grid_t_app.grid_t_staff comes first on the path and shadows public.grid_t_staff.
        assert_eq!(
            relation(&s, "grid_t_app", "grid_t_staff")["on_search_path"],
            true
        );
        assert_eq!(
            relation(&s, "public", "grid_t_staff")["on_search_path"],
            false
        );
        assert_eq!(
            relation(&s, "public", "grid_t_departments")["on_search_path"],
            true
        );

        // An explicit path works the same way.
        let s = snapshot("SELECT grid.catalog_snapshot(ARRAY['public']::name[])");
        assert_eq!(
            relation(&s, "grid_t_app", "grid_t_orders")["on_search_path"],
            false
        );
        assert_eq!(
            relation(&s, "public", "grid_t_staff")["on_search_path"],
            true
        );
    }

    #[pg_test]
    fn the_inlined_snapshot_query_is_the_function() {
        fixture();
        let query = crate::catalog::SNAPSHOT_QUERY;
        run("SET ROLE grid_t_analyst");
        for path in [vec!["grid_t_app", "public"], vec!["public"], vec![]] {
            let path: Vec<String> = path.into_iter().map(String::from).collect();
            let inlined =
                Spi::get_two_with_args::<pgrx::Json, pgrx::Json>(query, &[path.clone().into()])
                    .expect("the query runs")
                    .0
                    .map(|j| j.0);
            let function = Spi::get_one_with_args::<pgrx::JsonB>(
                "SELECT grid.catalog_snapshot($1::text[])",
                &[path.clone().into()],
            )
            .expect("the function runs")
            .map(|j| j.0);
            assert!(inlined.is_some(), "{path:?}");
            assert_eq!(inlined, function, "{path:?}");
        }
        run("RESET ROLE");
    }

    #[pg_test]
    fn system_schemas_and_the_grid_schema_never_appear() {
        fixture();
        // A superuser holds every privilege, the audit tables included.
        let s = snapshot("SELECT grid.catalog_snapshot()");
        let schemas: Vec<&str> = s["relations"]
            .as_array()
            .expect("relations is an array")
            .iter()
            .filter_map(|r| r["schema"].as_str())
            .collect();
        assert!(schemas.contains(&"grid_t_locked"));
        for excluded in ["grid", "pg_catalog", "information_schema", "pg_toast"] {
            assert!(!schemas.contains(&excluded), "{excluded} in {schemas:?}");
        }
    }
}
