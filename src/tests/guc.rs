//! The `grid.*` settings (src/guc.rs): the API key hidden from other roles and never
//! echoed, the superuser's settings refused to other roles, values outside their ranges
//! refused.

#[pgrx::pg_schema]
mod tests {
    use crate::tests::support::{assert_refused, install, refusal, run, select_one};
    use pgrx::prelude::*;

    const SECRET: &str = "sk-test-0123456789";

    #[pg_test]
    fn the_api_key_is_hidden_from_other_roles_and_never_echoed() {
        install();
        run(&format!("SET grid.api_key = '{SECRET}'"));
        let shown: Option<String> = select_one("SELECT current_setting('grid.api_key')");
        assert_eq!(shown.as_deref(), Some(SECRET));
        assert_eq!(crate::guc::api_key().as_deref(), Some(SECRET));
        // Not in SHOW ALL, even for a superuser.
        let in_show_all: Option<i64> = select_one(
            "SELECT count(*) FROM pg_catalog.pg_show_all_settings() WHERE name = 'grid.api_key'",
        );
        assert_eq!(in_show_all, Some(0));

        run("CREATE ROLE grid_t_guest NOLOGIN");
        run("SET ROLE grid_t_guest");
        for statement in [
            "SHOW grid.api_key",
            "SELECT current_setting('grid.api_key')",
            "SET grid.api_key = 'sk-mine'",
            "RESET grid.api_key",
        ] {
            let m = assert_refused(statement, "42501");
            assert!(!m.contains(SECRET), "{statement}: {m}");
        }
        let visible: Option<i64> =
            select_one("SELECT count(*) FROM pg_catalog.pg_settings WHERE name = 'grid.api_key'");
        assert_eq!(visible, Some(0));
        run("RESET ROLE");
        // pg_read_all_settings is the documented way to let a role read it.
        run("GRANT pg_read_all_settings TO grid_t_guest");
        run("SET ROLE grid_t_guest");
        assert_eq!(refusal("SHOW grid.api_key"), None);
        run("RESET ROLE");
    }

    #[pg_test]
    fn superuser_settings_are_refused_to_other_roles() {
        install();
        run("CREATE ROLE grid_t_guest2 NOLOGIN");
        run("SET ROLE grid_t_guest2");
        for statement in [
            "SET grid.endpoint = 'http://attacker.example/'",
            "SET grid.model = 'other'",
            "SET grid.audit = off",
            "SET grid.ablation = unconstrained",
            "SET grid.ablation = no_repair",
            "SET grid.judge = off",
            "SET grid.decline = on",
        ] {
            assert_refused(statement, "42501");
        }
        // Shown to everyone: they are not secrets.
        assert_eq!(refusal("SHOW grid.endpoint"), None);
        assert_eq!(refusal("SHOW grid.audit"), None);
        // Per-session knobs.
        run("SET grid.max_tokens = 64");
        assert_eq!(crate::guc::max_tokens(), 64);
        run("SET grid.timeout = '5s'");
        let timeout: Option<String> = select_one("SELECT current_setting('grid.timeout')");
        assert_eq!(timeout.as_deref(), Some("5s"));
        assert_eq!(crate::guc::timeout(), std::time::Duration::from_secs(5));
        run("SET grid.temperature = 0.7");
        assert!((crate::guc::temperature() - 0.7).abs() < 1e-9);
        run("RESET ROLE");
        assert_refused("SET grid.worker_threads = 4", "55P02");
        assert_refused("SET grid.mask_cache_mb = 64", "55P02");
    }

    #[pg_test]
    fn values_outside_their_ranges_are_refused() {
        install();
        for statement in [
            "SET grid.max_tokens = 0",
            "SET grid.max_tokens = 32769",
            "SET grid.timeout = 0",
            "SET grid.timeout = '2h'",
            "SET grid.temperature = -0.1",
            "SET grid.temperature = 2.5",
            "SET grid.audit = 'sometimes'",
            "SET grid.ablation = 'no_mask'",
        ] {
            assert_refused(statement, "22023");
        }
        let defaults: Option<String> = select_one(
            "SELECT string_agg(name || '=' || setting || coalesce(unit, ''), ' ' ORDER BY name)
               FROM pg_catalog.pg_settings
              WHERE name IN ('grid.max_tokens', 'grid.timeout', 'grid.temperature',
                             'grid.worker_threads', 'grid.mask_cache_mb', 'grid.audit',
                             'grid.ablation', 'grid.judge', 'grid.decline')",
        );
        assert_eq!(
            defaults.as_deref(),
            Some("grid.ablation=none grid.audit=full grid.decline=off grid.judge=on grid.mask_cache_mb=1024MB grid.max_tokens=512 grid.temperature=0 grid.timeout=30000ms grid.worker_threads=0")
        );
        assert_eq!(crate::guc::mask_cache_bytes(), 1 << 30);
        assert_eq!(crate::guc::audit(), grid_ask::AuditLevel::Full);
        assert_eq!(crate::guc::ablation(), grid_ask::Ablation::default());
        run("SET grid.ablation = unconstrained");
        assert!(crate::guc::ablation().unconstrained && crate::guc::ablation().no_repair);
        assert_eq!(crate::guc::endpoint(), None);
    }
}
