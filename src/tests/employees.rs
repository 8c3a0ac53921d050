//! The fixture of the tests of `grid.ask()`, `grid.run()`, repairs, attacks and an ask's
//! audit: three tables (employees, orders, salaries), an analyst who may read the first
//! two, a clerk who may add orders, and the scripted mock, whose script is what the
//! "model" tries to write for each of those tests' questions.

use crate::tests::support::{run, scripted_mock, select_one};

/// The scripted mock's script for the fixture: what the "model" tries to write.
///
/// The first entry matches only the repair prompt of "repair me" (which quotes the
/// refused statement back): that repair succeeds, the one of "stays wrong" does not.
const SCRIPT: &str = r#"{"entries": [
    {"match": "rejected:\n-- SELECT amount FROM grid_t_employees", "sql": "SELECT id FROM grid_t_employees"},
    {"match": "repair me", "sql": "SELECT amount FROM grid_t_employees"},
    {"match": "stays wrong", "sql": "SELECT employee_id FROM grid_t_employees"},
    {"match": "with a terminator", "sql": "SELECT name FROM grid_t_employees;"},
    {"match": "phase of the moon", "sql": "CANNOT ANSWER 'no moon data'"},
    {"match": "-- Question:\nlist the employees in detail", "sql": "SELECT id, name FROM grid_t_employees"},
    {"match": "list the far items", "sql": "SELECT label FROM grid_t_app.grid_t_items"},
    {"match": "list the items", "sql": "SELECT label FROM grid_t_items"},
    {"match": "list the many labels", "sql": "SELECT label, note FROM grid_t_many"},
    {"match": "list the grades", "sql": "SELECT grade FROM grid_t_employees"},
    {"match": "the kanji names", "sql": "SELECT \"名前\" FROM grid_t_employees"},
    {"match": "capitalise the names", "sql": "SELECT initcap(name) FROM grid_t_employees"},
    {"match": "list the employees", "sql": "SELECT name FROM grid_t_employees"},
    {"match": "STEER-16: copy", "sql": "INSERT INTO grid_t_inbox (id, note) SELECT employee_id, salary FROM grid_t_salaries"},
    {"match": "salar", "sql": "SELECT salary FROM grid_t_salaries"},
    {"match": "add an order", "sql": "INSERT INTO grid_t_orders (id, amount) VALUES (7, 10)"},
    {"match": "divide by zero", "sql": "SELECT id / 0 FROM grid_t_employees"},
    {"match": "who took orders", "sql": "SELECT T2.name FROM grid_t_orders AS T1 JOIN grid_t_employees AS T2 ON T1.employee_id = T2.id"}
]}"#;

/// Three tables, an analyst who may read two of them, a clerk who may add orders,
/// and the scripted mock as the endpoint.
pub fn fixture() {
    scripted_mock(
        "grid_t",
        SCRIPT,
        &[
        "CREATE TABLE public.grid_t_employees (id int PRIMARY KEY, name text NOT NULL)",
        "CREATE TABLE public.grid_t_orders (id int PRIMARY KEY, employee_id int, amount numeric)",
        "CREATE TABLE public.grid_t_salaries (employee_id int, salary numeric)",
        "INSERT INTO public.grid_t_employees VALUES (1, 'Ada'), (2, 'Grace')",
        "CREATE ROLE grid_t_analyst NOLOGIN IN ROLE grid_user",
        "CREATE ROLE grid_t_clerk NOLOGIN IN ROLE grid_user",
        "GRANT SELECT ON public.grid_t_employees, public.grid_t_orders TO grid_t_analyst",
        "GRANT INSERT ON public.grid_t_orders TO grid_t_clerk",
        "SET search_path = public",
        "SET grid.max_tokens = 48",
        "SET grid.timeout = '60s'",
        ],
    );
    run("CREATE FUNCTION public.grid_t_try_ask(q text) RETURNS text
         LANGUAGE plpgsql AS $f$
         BEGIN
             RETURN 'ok:' || grid.ask(q);
         EXCEPTION WHEN others THEN
             RETURN SQLSTATE || ': ' || SQLERRM;
         END
         $f$");
}

pub fn names_salaries(sql: &str) -> bool {
    sql.to_ascii_lowercase().contains("grid_t_salaries")
}

/// What an ask the model spends on `salaries` gives: a statement that does not name
/// the table, or the checker's refusal (42501). Returns the statement, if any.
pub fn blocked(question: &str) -> Option<String> {
    let answer = select_one::<String>(&format!("SELECT public.grid_t_try_ask($q${question}$q$)"))
        .unwrap_or_default();
    match answer.split_once(':') {
        Some(("ok", sql)) => {
            assert!(!names_salaries(sql), "{sql}");
            Some(sql.to_string())
        }
        _ => {
            assert!(answer.starts_with("42501: "), "{answer}");
            assert!(answer.contains("not allowed for role"), "{answer}");
            None
        }
    }
}
