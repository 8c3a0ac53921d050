//! The SQL API as a whole (src/lib.rs, sql/privileges.sql): schema `grid` belongs to the
//! extension, `grid.version()` is the library's version, and every function in `grid` pins
//! its `search_path`, is SECURITY INVOKER and is executable only by the roles granted it.

#[pgrx::pg_schema]
mod tests {
    use crate::tests::support::{assert_refused, install, run, select_one};
    use pgrx::prelude::*;

    #[pg_test]
    fn schema_grid_exists_and_belongs_to_the_extension() {
        let owner_ext: Option<String> = select_one(
            "SELECT e.extname::text
               FROM pg_catalog.pg_namespace n
               JOIN pg_catalog.pg_depend d
                 ON d.classid = 'pg_catalog.pg_namespace'::regclass
                AND d.objid = n.oid AND d.deptype = 'e'
               JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid
              WHERE n.nspname = 'grid'",
        );
        assert_eq!(owner_ext.as_deref(), Some("grid_pg"));
    }

    #[pg_test]
    fn version_returns_the_cargo_version() {
        let v: Option<String> = select_one("SELECT grid.version()");
        assert_eq!(v.as_deref(), Some(env!("CARGO_PKG_VERSION")));

        // The catalog agrees: the installed extension version is the same.
        let ext: Option<String> = select_one(
            "SELECT extversion::text FROM pg_catalog.pg_extension WHERE extname = 'grid_pg'",
        );
        assert_eq!(ext.as_deref(), Some(env!("CARGO_PKG_VERSION")));
    }

    #[pg_test]
    fn version_is_security_invoker_with_pinned_search_path() {
        let config: Option<Vec<Option<String>>> = select_one(
            "SELECT p.proconfig::text[] FROM pg_catalog.pg_proc p
              WHERE p.oid = 'grid.version()'::regprocedure",
        );
        assert_eq!(
            config,
            Some(vec![Some("search_path=pg_catalog, pg_temp".to_string())])
        );
        let definer: Option<bool> = select_one(
            "SELECT p.prosecdef FROM pg_catalog.pg_proc p
              WHERE p.oid = 'grid.version()'::regprocedure",
        );
        assert_eq!(definer, Some(false));
    }

    #[pg_test]
    fn every_grid_function_pins_search_path() {
        // Holds for every function the extension puts in schema `grid`, not
        // only version(); also make sure there are the ones we know of.
        let total: Option<i64> = select_one(
            "SELECT count(*) FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = 'grid'::regnamespace",
        );
        assert!(
            total.unwrap_or(0) >= 6,
            "functions missing from schema grid"
        );
        let unpinned: Option<String> = select_one(
            "SELECT string_agg(p.oid::regprocedure::text, ', ')
               FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = 'grid'::regnamespace
                AND NOT coalesce(p.proconfig @> ARRAY['search_path=pg_catalog, pg_temp'], false)",
        );
        assert_eq!(unpinned, None, "functions without a pinned search_path");
    }

    #[pg_test]
    fn every_grid_function_is_invoker_and_not_executable_by_public() {
        let definers: Option<String> = select_one(
            "SELECT string_agg(p.oid::regprocedure::text, ', ')
               FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = 'grid'::regnamespace AND p.prosecdef",
        );
        assert_eq!(definers, None, "SECURITY DEFINER functions in schema grid");
        let public: Option<String> = select_one(
            "SELECT string_agg(p.oid::regprocedure::text, ', ')
               FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = 'grid'::regnamespace
                AND pg_catalog.has_function_privilege('public', p.oid, 'EXECUTE')",
        );
        // The one exception (sql/privileges.sql): the provenance predicate the snapshot
        // applies to every comment, read as the caller of grid.ask.
        assert_eq!(
            public.as_deref(),
            Some("grid.trusted_author(oid)"),
            "functions PUBLIC may execute"
        );
    }

    #[pg_test]
    fn a_role_without_execute_is_refused_and_a_grant_lets_it_in() {
        install();
        run("CREATE ROLE grid_t_noexec NOLOGIN");
        run("SET ROLE grid_t_noexec");
        for call in [
            "SELECT grid.version()",
            "SELECT grid.catalog_snapshot()",
            "SELECT grid.audit_head()",
            "SELECT * FROM grid.verify_audit()",
        ] {
            let m = assert_refused(call, "42501");
            assert!(m.contains("permission denied for function"), "{call}: {m}");
        }
        run("RESET ROLE");
        run("GRANT EXECUTE ON FUNCTION grid.version(), grid.catalog_snapshot(text[]) TO grid_t_noexec");
        run("SET ROLE grid_t_noexec");
        let v: Option<String> = select_one("SELECT grid.version()");
        assert_eq!(v.as_deref(), Some(env!("CARGO_PKG_VERSION")));
        let role: Option<String> = select_one("SELECT grid.catalog_snapshot() ->> 'role'");
        assert_eq!(role.as_deref(), Some("grid_t_noexec"));
        run("RESET ROLE");
    }
}
