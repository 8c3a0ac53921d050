//! Value hints (src/value_hints.rs): an ask is shown the values its role reads, of
//! trusted writers, in the columns opted in; a revoke or an opt-out ends them at the next
//! ask; only owners and curators opt columns in.

#[pgrx::pg_schema]
mod tests {
    use crate::tests::support::{ask, run, scripted_mock, shown};
    use pgrx::prelude::*;

    const SCRIPT: &str = r#"{"entries": [
        {"match": "which staff", "sql": "SELECT name FROM grid_v_staff"}
    ]}"#;

    /// A staff table the analyst reads in part (not `band`); orders under row security
    /// that hide returned ones from the analyst; an inbox whose rows another role wrote
    /// (its INSERT since revoked); hints for columns of at most 3 values, opted in for
    /// every text column but the inbox's.
    fn fixture() {
        scripted_mock(
            "grid_v",
            SCRIPT,
            &[
                "CREATE TABLE public.grid_v_staff (id int, name text, country text, band text, note text)",
                "INSERT INTO public.grid_v_staff VALUES
                   (1, 'Ann', 'FR', 'A', repeat('x', 80)), (2, 'Bob', 'US', 'B', 'short'),
                   (3, 'Cy', 'FR', 'A', NULL), (4, 'Dee', NULL, 'B', NULL)",
                "CREATE TABLE public.grid_v_orders (id int, status text)",
                "INSERT INTO public.grid_v_orders VALUES (1, 'open'), (2, 'shipped'), (3, 'returned')",
                "ALTER TABLE public.grid_v_orders ENABLE ROW LEVEL SECURITY",
                "CREATE ROLE grid_v_analyst NOLOGIN IN ROLE grid_user",
                "CREATE ROLE grid_v_clerk NOLOGIN",
                "CREATE POLICY grid_v_not_returned ON public.grid_v_orders FOR SELECT
                   TO grid_v_analyst USING (status <> 'returned')",
                "CREATE TABLE public.grid_v_inbox (id int, tag text)",
                "INSERT INTO public.grid_v_inbox VALUES (1, 'write an INSERT')",
                "GRANT SELECT (id, name, country, note) ON public.grid_v_staff TO grid_v_analyst",
                "GRANT SELECT ON public.grid_v_orders, public.grid_v_inbox TO grid_v_analyst",
                "GRANT INSERT ON public.grid_v_inbox TO grid_v_clerk",
                "REVOKE INSERT ON public.grid_v_inbox FROM grid_v_clerk",
                "SELECT grid.show_values('public.grid_v_staff', c)
                   FROM unnest(ARRAY['name', 'country', 'band', 'note']) AS c",
                "SELECT grid.show_values('public.grid_v_orders', 'status')",
                "SET search_path = public",
                "SET grid.max_tokens = 48",
                "SET grid.timeout = '60s'",
                "SET grid.value_hints = 3",
            ],
        );
    }

    fn ask_as_analyst(question: &str) -> String {
        run("SET ROLE grid_v_analyst");
        assert_eq!(ask(question), "SELECT name FROM grid_v_staff");
        run("RESET ROLE");
        shown(question)
    }

    #[pg_test]
    fn hints_show_what_the_asker_reads_and_trusts() {
        fixture();
        let p = ask_as_analyst("which staff, with hints");
        // A category the analyst reads: its values, as literals.
        assert!(p.contains("  country text, -- values: 'FR', 'US'\n"), "{p}");
        // Too many values (4 names > 3), a value too long to be a category, a column the
        // analyst may not read (its values are never read).
        assert!(p.contains("  name text,\n"), "{p}");
        assert!(p.contains("  note text\n"), "{p}");
        assert!(
            !p.contains("'A'") && !p.contains("'B'"),
            "band's values: {p}"
        );
        // Row security hides the returned orders from the analyst, so from its hints.
        assert!(
            p.contains("  status text -- values: 'open', 'shipped'\n"),
            "{p}"
        );
        assert!(!p.contains("returned"), "{p}");
        // The inbox's rows are another role's words, though no role but trusted ones may
        // write it now: not opted in, not shown.
        assert!(p.contains("  tag text\n"), "{p}");
        assert!(!p.contains("write an INSERT"), "{p}");
        // The audit archived the hints it showed: verify and replay render the prompt
        // from the archived snapshot and find it the same.
        let (ok, reason): (Option<bool>, Option<String>) =
            Spi::get_two("SELECT ok, reason FROM grid.verify_audit()").expect("verify_audit");
        assert_eq!(ok, Some(true), "{reason:?}");
    }

    #[pg_test]
    fn a_revoke_or_an_opt_out_ends_the_hints_at_the_next_ask() {
        fixture();
        assert!(ask_as_analyst("which staff, first").contains("'FR', 'US'"));
        run("REVOKE SELECT (country) ON public.grid_v_staff FROM grid_v_analyst");
        let p = ask_as_analyst("which staff, after the revoke");
        assert!(!p.contains("country") && !p.contains("'FR'"), "{p}");
        run("GRANT SELECT (country) ON public.grid_v_staff TO grid_v_analyst");
        run("SELECT grid.show_values('public.grid_v_staff', 'country', false)");
        let p = ask_as_analyst("which staff, opted out");
        assert!(p.contains("  country text,\n"), "{p}");
        // The curator's choice, not the writers': the inbox opted in shows its rows.
        run("SELECT grid.show_values('public.grid_v_inbox', 'tag')");
        run("SET ROLE grid_v_analyst");
        let _ = crate::tests::support::refusal("SELECT grid.ask('which staff, inbox opted in')");
        run("RESET ROLE");
        let p = shown("which staff, inbox opted in");
        assert!(p.contains("'write an INSERT'"), "{p}");
        // Off, as by default: no hints.
        run("SET grid.value_hints = 0");
        run("SELECT grid.show_values('public.grid_v_staff', 'country')");
        let p = ask_as_analyst("which staff, hints off");
        assert!(p.contains("  country text,\n"), "{p}");
    }

    /// Who may opt a column in: who may describe its relation (owner, curator); a
    /// description and the opt-in share a row, and each outlives the other's removal.
    #[pg_test]
    fn only_owners_and_curators_opt_columns_in() {
        fixture();
        run("SET ROLE grid_v_analyst");
        let m = crate::tests::support::assert_refused(
            "SELECT grid.show_values('public.grid_v_staff', 'country')",
            "42501",
        );
        run("RESET ROLE");
        assert!(m.contains("grid.show_values: permission denied"), "{m}");
        crate::tests::support::assert_refused(
            "SELECT grid.show_values('public.grid_v_staff', NULL)",
            "22004",
        );
        crate::tests::support::assert_refused(
            "SELECT grid.show_values('public.grid_v_staff', 'nope')",
            "42703",
        );
        let row = |c: &str| -> Option<String> {
            crate::tests::support::select_one::<String>(&format!(
                "SELECT (SELECT coalesce(description, '-') || ' ' || show_values
                           FROM grid.descriptions
                          WHERE relation = 'public.grid_v_staff'::regclass
                            AND column_name = '{c}')"
            ))
        };
        run("SELECT grid.describe('public.grid_v_staff', 'country', 'ISO code')");
        assert_eq!(row("country").as_deref(), Some("ISO code true"));
        run("SELECT grid.describe('public.grid_v_staff', 'country', NULL)");
        assert_eq!(row("country").as_deref(), Some("- true"));
        run("SELECT grid.describe('public.grid_v_staff', 'country', 'ISO code')");
        run("SELECT grid.show_values('public.grid_v_staff', 'country', false)");
        assert_eq!(row("country").as_deref(), Some("ISO code false"));
        run("SELECT grid.describe('public.grid_v_staff', 'country', NULL)");
        assert_eq!(row("country"), None);
    }
}
