//! What a statement the model did not just write must pass to reach a role: [`refusal`]
//! (the role's language and the checker), for a stored statement run again and for
//! curated examples.
//!
//! Vetting curated examples ([`Offered`]) before a prompt shows them: a candidate is
//! shown only if its SQL is a complete sentence of the asker's language, the checker
//! passes it for the asker's snapshot, and then the host's judge (PostgreSQL planning it
//! as the asker) passes it; of those, the first in rank order that fit the budget.
//!
//! The order of the checks is a security property: the judge plans the statement as the
//! asker, and planning can run code, so only what the language and the checker admit
//! reaches it (docs/security.md). Every candidate is examined whatever happens to the
//! others, so that what an ask does says nothing about which candidates are kept.

use grid_core::catalog::CatalogSnapshot;
use grid_core::{Language, Session};

use crate::request::{Example, Offered};

/// The examples of `offered` to show, best first. `judge` is asked about each candidate
/// the language and the checker pass, in rank order, and says whether it passes.
pub fn vet(
    offered: Offered,
    language: &Language,
    snapshot: &CatalogSnapshot,
    judge: &mut dyn FnMut(&Example) -> bool,
) -> Vec<Example> {
    let Offered {
        candidates,
        most,
        bytes,
    } = offered;
    let admitted: Vec<Example> = candidates
        .into_iter()
        .filter(|e| in_language(language, snapshot, &e.sql))
        .collect();
    let passed: Vec<Example> = admitted.into_iter().filter(|e| judge(e)).collect();
    within_budget(passed, most, bytes)
}

/// Whether `sql` is a complete sentence of `language` and the checker passes it for the
/// snapshot's role ([`refusal`]).
pub(crate) fn in_language(language: &Language, snapshot: &CatalogSnapshot, sql: &str) -> bool {
    refusal(language, snapshot, sql).is_none()
}

/// Why `sql` is not a statement the role may be given: not a complete sentence of
/// `language`, a decline (a sentence, but no statement), or refused by the checker for
/// the snapshot's role (its violations); `None` when all admit it. What the pipeline asks
/// of a statement the model writes.
pub fn refusal(language: &Language, snapshot: &CatalogSnapshot, sql: &str) -> Option<String> {
    let sql = sql.trim();
    if !Session::new(language).complete(sql.as_bytes()) {
        return Some("it is not a statement of the role's language".into());
    }
    if grid_core::statement::decline_of(sql).is_some() {
        return Some("it declines to answer: it is no statement".into());
    }
    crate::record::refusal(&grid_core::checker::check(sql, snapshot))
}

/// The first `most` of `examples` (in order) whose question and SQL fit `bytes` in all.
fn within_budget(examples: Vec<Example>, most: u32, bytes: u32) -> Vec<Example> {
    let most = most as usize;
    let mut left = bytes as usize;
    let mut out = Vec::new();
    for e in examples {
        if out.len() == most {
            break;
        }
        let size = e.question.len() + e.sql.len();
        if size <= left {
            left -= size;
            out.push(e);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use grid_core::{Dialect, Policy};

    /// The analyst may read `employees`, and of `salaries` only `employee_id` (it may
    /// update `amount`, so the language has it; the checker refuses reading it).
    fn snapshot() -> CatalogSnapshot {
        serde_json::from_str(include_str!("../tests/fixtures/analyst_snapshot.json"))
            .expect("snapshot")
    }

    fn example(id: i64, sql: &str) -> Example {
        Example {
            id,
            question: format!("question {id}"),
            sql: sql.into(),
        }
    }

    #[test]
    fn only_what_the_language_and_the_checker_pass_reaches_the_judge_and_every_such_candidate_does()
    {
        let snap = snapshot();
        let language = snap
            .language(Dialect::generated().expect("dialect"), &Policy::default())
            .expect("language");
        let offered = Offered {
            candidates: vec![
                example(1, "SELECT name FROM employees"),
                example(2, "SELECT amount FROM salaries"),
                example(3, "DROP TABLE employees"),
                example(4, "SELECT id, name FROM employees ORDER BY id"),
                example(5, "SELECT name FROM staff"),
                example(6, " SELECT employee_id FROM salaries "),
                example(7, "CANNOT ANSWER 'no such data'"),
            ],
            most: 1,
            bytes: 10_000,
        };
        let mut judged = Vec::new();
        let shown = vet(offered, &language, &snap, &mut |e| {
            judged.push(e.id);
            e.id != 1
        });
        // The checker refuses 2 (a column the role may only update), the language 3 (a
        // verb outside it) and 5 (a table outside the snapshot); 7 is no statement (a
        // decline). 6 is judged though 4 has already filled the one place.
        assert_eq!(judged, vec![1, 4, 6]);
        assert_eq!(shown.iter().map(|e| e.id).collect::<Vec<_>>(), vec![4]);
    }

    #[test]
    fn the_budget_keeps_rank_order_and_skips_what_does_not_fit() {
        let long = example(
            1,
            &format!(
                "SELECT name FROM employees WHERE name = '{}'",
                "x".repeat(200)
            ),
        );
        let short = example(2, "SELECT name FROM employees");
        let other = example(3, "SELECT id FROM employees");
        let fit = within_budget(vec![long.clone(), short.clone(), other.clone()], 3, 100);
        assert_eq!(fit, vec![short.clone(), other.clone()]);
        assert_eq!(
            within_budget(vec![long, short.clone(), other], 1, 10_000).len(),
            1
        );
        assert!(within_budget(vec![short], 0, 10_000).is_empty());
    }
}
