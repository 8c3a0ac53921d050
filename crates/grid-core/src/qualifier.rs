//! Where a column reference is checked against the range variables in scope, and where it
//! is not yet: the two grammar forms of a column reference, bare and qualified, and the
//! stack property that picks one.
//!
//! `columnref` has two forms of each (`grammars/postgres.y`):
//!
//! * `COLUMN_NAME` (any column of the role's lexicon) and `DERIVED_COL` bare, and
//!   `IDENT DOT COLUMN_NAME` (and `IDENT DOT DERIVED_COL`: any identifier, then any column
//!   of the lexicon) qualified. They stand where a FROM clause that the reference may name
//!   is still to come: in a select list (the SELECT's FROM follows it), in anything nested
//!   there (a correlated subquery in a select list may name the outer FROM), and, for now,
//!   anywhere in an INSERT, UPDATE or DELETE. Such a stack is *pending*.
//! * `SCOPED_COL` bare and `QUALIFIER DOT QUAL_COL` qualified, dynamic terminals
//!   ([`crate::scope`]): a column of a range variable in scope, and a range variable in
//!   scope and a column of it. They stand everywhere else: where every FROM clause the
//!   reference could name is written (WHERE, GROUP BY, HAVING, ORDER BY, WINDOW, JOIN ...
//!   ON, and the queries nested there, at any depth), so PostgreSQL's binding can be
//!   followed.
//!
//! A parser state alone cannot say which: a WHERE inside a subquery of a select list and a
//! WHERE at the top are the same states. So the allowed set of a stack ([`crate::parser`])
//! drops the forms that do not stand there: `QUALIFIER` and `SCOPED_COL` on a pending stack,
//! and on any other, `IDENT` where its only use is a qualifier, and `COLUMN_NAME` and
//! `DERIVED_COL` where their only use is a bare column reference
//! ([`ContextRule::filter`]; `COLUMN_NAME` stays in a `USING (...)` list or an INSERT's
//! column list). Pending is a property of the stack's states, never of its values, so it is
//! the same on a stack and on its core, and the mask cache, keyed by the allowed set, stays
//! sound.
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
/// Every kernel item is `columnref: COLUMN_NAME .`: a column word shifted into this state
/// is a bare column reference.
const BARE_BY_COLUMN: u8 = 16;
/// Every kernel item is `columnref: DERIVED_COL .`.
const BARE_BY_DERIVED: u8 = 32;

/// The per-state facts the pending property and the allowed-set filter read, for one LR
/// table. Built only for a grammar with the `QUALIFIER` terminal.
#[derive(Clone, Debug)]
pub struct ContextRule {
    ident: u16,
    qualifier: u16,
    /// `COLUMN_NAME`, `DERIVED_COL` and `SCOPED_COL`, when the grammar has `SCOPED_COL`
    /// (bare references are then scoped too).
    bare: Option<[u16; 3]>,
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
        let bare = match (term("COLUMN_NAME"), term("DERIVED_COL"), term("SCOPED_COL")) {
            (Some(c), Some(d), Some(s)) => Some([c, d, s]),
            _ => None,
        };
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
                let mut by_column = !kernel.is_empty();
                let mut by_derived = !kernel.is_empty();
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
                    let bare_ref = lhs == "columnref" && dot == 1 && rhs.len() == 1;
                    by_column &= bare_ref && rhs[0] == "COLUMN_NAME";
                    by_derived &= bare_ref && rhs[0] == "DERIVED_COL";
                }
                if qualified {
                    f |= QUALIFIED_BY_IDENT;
                }
                if by_column {
                    f |= BARE_BY_COLUMN;
                }
                if by_derived {
                    f |= BARE_BY_DERIVED;
                }
                f
            })
            .collect();
        Some(ContextRule {
            ident,
            qualifier,
            bare,
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

    /// `allowed` (the terminals a stack can take, from its states alone) without the forms
    /// of a column reference that do not stand there: `QUALIFIER` and `SCOPED_COL` on a
    /// pending stack; on any other, `IDENT` when `target` (the state the stack shifts a
    /// terminal into, given the terminal) makes it a qualifier, and `COLUMN_NAME` and
    /// `DERIVED_COL` when it makes them a bare column reference.
    pub fn filter(
        &self,
        allowed: TermSet,
        pending: bool,
        target: impl Fn(u16) -> Option<u32>,
    ) -> TermSet {
        let mut out = allowed;
        if pending {
            out.remove(self.qualifier);
            if let Some([_, _, scoped]) = self.bare {
                out.remove(scoped);
            }
            return out;
        }
        let drops =
            |t: u16, f: u8| allowed.contains(t) && target(t).is_some_and(|s| self.flag(s, f));
        if drops(self.ident, QUALIFIED_BY_IDENT) {
            out.remove(self.ident);
        }
        if let Some([column, derived, _]) = self.bare {
            if drops(column, BARE_BY_COLUMN) {
                out.remove(column);
            }
            if drops(derived, BARE_BY_DERIVED) {
                out.remove(derived);
            }
        }
        out
    }
}
