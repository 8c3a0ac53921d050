//! Where a qualified column reference is checked against the range variables in scope, and
//! where it is not yet: the two grammar forms of a qualifier and the stack property that
//! picks one.
//!
//! `columnref` has two qualified forms (`grammars/postgres.y`):
//!
//! * `IDENT DOT COLUMN_NAME` (and `IDENT DOT DERIVED_COL`): any identifier, then any column
//!   of the role's lexicon. It stands where a FROM clause that the reference may name is
//!   still to come: in a select list (the SELECT's FROM follows it), in anything nested
//!   there (a correlated subquery in a select list may name the outer FROM), and, for now,
//!   anywhere in an INSERT, UPDATE or DELETE. Such a stack is *pending*.
//! * `QUALIFIER DOT QUAL_COL`, dynamic terminals ([`crate::scope`]): a range variable in
//!   scope and a column of it. It stands everywhere else: where every FROM clause the
//!   reference could name is written (WHERE, GROUP BY, HAVING, ORDER BY, WINDOW, JOIN ... ON,
//!   and the queries nested there, at any depth), so PostgreSQL's binding can be followed.
//!
//! A parser state alone cannot say which: a WHERE inside a subquery of a select list and a
//! WHERE at the top are the same states. So the allowed set of a stack ([`crate::parser`])
//! drops the form that does not stand there: `QUALIFIER` on a pending stack, and on any
//! other, `IDENT` where its only use is a qualifier ([`ContextRule::filter`]). Pending is a
//! property of the stack's states, never of its values, so it is the same on a stack and on
//! its core, and the mask cache, keyed by the allowed set, stays sound.
//!
//! Pending is computed once per stack node from its parent ([`ContextRule::pending`]): a
//! stack is pending when it holds a SELECT whose select list is not followed by anything
//! (its `target_list` entry is on top, or has a comma above it), or the keyword of an
//! INSERT, UPDATE or DELETE.

use crate::grammar::table::{LrTable, Sym};
use crate::grammar::Terminals;
use crate::termset::TermSet;

/// `SELECT` or `SELECT opt_distinct` of a select core (`simple_select`, `insert_select`) is
/// on top: its select list is to come. Also the keyword of INSERT, UPDATE or DELETE.
const OPENS: u8 = 1;
/// `SELECT opt_distinct target_list` is on top: a comma may continue the list, anything else
/// ends it.
const TARGETS: u8 = 2;
/// The state is entered by a comma.
const BY_COMMA: u8 = 4;
/// Every kernel item is `columnref: IDENT . DOT ...` or `target_el: IDENT . DOT STAR`: an
/// identifier shifted into this state is a qualifier.
const QUALIFIED_BY_IDENT: u8 = 8;

/// The per-state facts the pending property and the allowed-set filter read, for one LR
/// table. Built only for a grammar with the `QUALIFIER` terminal.
#[derive(Clone, Debug)]
pub struct ContextRule {
    ident: u16,
    qualifier: u16,
    /// Per state, the flags above.
    flags: Vec<u8>,
}

/// What [`ContextRule::pending`] reads of a new node's parent and of the entries under it.
pub struct Below {
    /// The parent's state and whether it is pending.
    pub state: u32,
    pub pending: bool,
    /// Whether the stack under the SELECT that the parent's select list belongs to is
    /// pending (read only when the parent is a `target_list` entry: its parent is
    /// `opt_distinct`, then `SELECT`, then that stack).
    pub context_pending: bool,
}

impl ContextRule {
    /// The rule for `table` over `terms` (symbol names read without the `_w` of template
    /// copies); `None` when the grammar has no `QUALIFIER`.
    pub fn build(table: &LrTable, terms: &Terminals) -> Option<ContextRule> {
        let term = |n: &str| terms.names.iter().position(|x| x == n).map(|t| t as u16);
        let (ident, qualifier) = (term("IDENT")?, term("QUALIFIER")?);
        let base = |r: u32| {
            let n = table.rule_names[r as usize].as_str();
            n.strip_suffix("_w").unwrap_or(n)
        };
        let sym = |s: &Sym| match *s {
            Sym::Term(t) => terms.name(t),
            Sym::Rule(r) => base(r),
        };
        let flags = table
            .kernels
            .iter()
            .map(|kernel| {
                let mut f = 0;
                let mut qualified = !kernel.is_empty();
                for &(p, dot) in kernel {
                    let lhs = base(table.prod_lhs[p as usize]);
                    let rhs: Vec<&str> = table.prod_rhs[p as usize].iter().map(sym).collect();
                    let dot = usize::from(dot);
                    let core = matches!(lhs, "simple_select" | "insert_select")
                        && rhs.first() == Some(&"SELECT");
                    if core && (dot == 1 || dot == 2) {
                        f |= OPENS;
                    }
                    if core && dot == 3 && rhs.get(2) == Some(&"target_list") {
                        f |= TARGETS;
                    }
                    if matches!(
                        lhs,
                        "insert_statement" | "update_statement" | "delete_statement"
                    ) && dot == 1
                    {
                        f |= OPENS;
                    }
                    if dot > 0 && rhs[dot - 1] == "COMMA" {
                        f |= BY_COMMA;
                    }
                    qualified &= dot == 1
                        && rhs.len() == 3
                        && rhs[..2] == ["IDENT", "DOT"]
                        && (lhs == "columnref" || (lhs == "target_el" && rhs[2] == "STAR"));
                }
                if qualified {
                    f |= QUALIFIED_BY_IDENT;
                }
                f
            })
            .collect();
        Some(ContextRule {
            ident,
            qualifier,
            flags,
        })
    }

    fn flag(&self, state: u32, f: u8) -> bool {
        self.flags.get(state as usize).is_some_and(|x| x & f != 0)
    }

    /// Whether a `target_list` entry of a select core is in `state`: the node's pending
    /// property then reads the stack under its SELECT ([`Below::context_pending`]).
    pub fn is_targets(&self, state: u32) -> bool {
        self.flag(state, TARGETS)
    }

    /// Whether a node in `state` over `below` (its parent; `None` for a stack's bottom) is
    /// pending (see the module documentation).
    pub fn pending(&self, state: u32, below: Option<Below>) -> bool {
        let Some(b) = below else {
            return false;
        };
        if self.flag(state, OPENS | TARGETS) {
            return true;
        }
        if self.flag(b.state, TARGETS) {
            // The select list goes on after a comma; anything else ends it, and the SELECT
            // is then as pending as the stack it stands on.
            return self.flag(state, BY_COMMA) || b.context_pending;
        }
        b.pending
    }

    /// `allowed` (the terminals a stack can take, from its states alone) without the
    /// qualifier form that does not stand there: `QUALIFIER` on a pending stack; on any
    /// other, `IDENT` when `ident_target` (the state the stack shifts an identifier into)
    /// (given the identifier terminal) makes it a qualifier.
    pub fn filter(
        &self,
        allowed: TermSet,
        pending: bool,
        ident_target: impl FnOnce(u16) -> Option<u32>,
    ) -> TermSet {
        let mut a = allowed;
        if pending {
            a.remove(self.qualifier);
        } else if a.contains(self.ident)
            && ident_target(self.ident).is_some_and(|s| self.flag(s, QUALIFIED_BY_IDENT))
        {
            a.remove(self.ident);
        }
        a
    }
}
