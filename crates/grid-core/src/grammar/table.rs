//! The LR(1) table, built by lrtable (Pager) and flattened into dense arrays.
//!
//! Terminal ids are the grammar's frozen ids; the end-of-input terminal is
//! `tokens.len()`, as in grmtools. Production and rule ids are grmtools' own for this
//! table (rule 0 is the augmented start rule).

use cfgrammar::yacc::{YaccGrammar, YaccKind, YaccOriginalActionKind};
use cfgrammar::{Symbol, TIdx};
use lrtable::{Action, Minimiser, StIdx};

use super::cfg::Cfg;
use crate::error::{GridError, Result};

/// One parser move, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Move {
    Error,
    Accept,
    Shift(u32),
    Reduce(u32),
}

/// A grammar symbol of a production's right-hand side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sym {
    Term(u16),
    Rule(u32),
}

/// Dense action/goto arrays; `actions[state * n_terms + term]`, `gotos[state * n_rules + rule]`.
#[derive(Clone, Debug)]
pub struct LrTable {
    pub n_terms: usize,
    pub n_rules: usize,
    pub n_states: usize,
    pub start_state: u32,
    pub eof: u16,
    actions: Vec<u32>,
    gotos: Vec<u32>,
    /// Right-hand-side length of each production.
    pub prod_len: Vec<u16>,
    /// Left-hand side (rule id) of each production.
    pub prod_lhs: Vec<u32>,
    pub rule_names: Vec<String>,
    /// Production count of the grammar this table was built from (without the start rule).
    pub n_prods: usize,
    /// Right-hand side of each production (the reserve table derives minimal
    /// completions from it).
    pub prod_rhs: Vec<Vec<Sym>>,
    /// Kernel items `(production, dot)` of each state. In every state the parser reaches,
    /// each kernel item's first `dot` symbols are the symbols of the top `dot` stack
    /// entries, and the entry below them has a goto on the item's left-hand side.
    pub kernels: Vec<Vec<(u32, u16)>>,
    /// The augmented start rule (its production is `start → S`).
    pub start_rule: u32,
}

const ERROR: u32 = 0;
const ACCEPT: u32 = 1;
const SHIFT: u32 = 2;
const REDUCE: u32 = 3;

impl LrTable {
    /// Builds the table; any unresolved conflict is an error. Also checks that grmtools
    /// numbered the terminals exactly as `cfg.tokens` (the frozen numbering).
    pub fn build(cfg: &Cfg) -> Result<LrTable> {
        let src = cfg.to_yacc();
        let grm: YaccGrammar<u32> =
            YaccGrammar::new(YaccKind::Original(YaccOriginalActionKind::NoAction), &src).map_err(
                |es| {
                    GridError::Grammar(
                        es.iter()
                            .map(|e| e.to_string())
                            .collect::<Vec<_>>()
                            .join("; "),
                    )
                },
            )?;
        for (i, name) in cfg.tokens.iter().enumerate() {
            if grm.token_idx(name) != Some(TIdx(i as u32)) {
                return Err(GridError::Numbering(format!(
                    "terminal {name} is not number {i}"
                )));
            }
        }
        let eof = usize::from(grm.eof_token_idx());
        if eof != cfg.tokens.len() {
            return Err(GridError::Numbering(format!(
                "end of input is {eof}, expected {}",
                cfg.tokens.len()
            )));
        }
        let (graph, st) = lrtable::from_yacc(&grm, Minimiser::Pager)
            .map_err(|e| GridError::Grammar(e.to_string()))?;
        if let Some(c) = st.conflicts() {
            if c.sr_len() + c.rr_len() > 0 {
                return Err(GridError::Conflicts {
                    sr: c.sr_len(),
                    rr: c.rr_len(),
                    detail: format!("{}{}", c.pp_sr(&grm), c.pp_rr(&grm)),
                });
            }
        }
        let n_terms = usize::from(grm.tokens_len());
        let n_rules = usize::from(grm.rules_len());
        let n_states = usize::from(graph.all_states_len());
        let mut actions = vec![ERROR; n_states * n_terms];
        let mut gotos = vec![0u32; n_states * n_rules];
        for s in 0..n_states {
            let stidx = StIdx(s as u32);
            for t in 0..n_terms {
                actions[s * n_terms + t] = match st.action(stidx, TIdx(t as u32)) {
                    Action::Error => ERROR,
                    Action::Accept => ACCEPT,
                    Action::Shift(to) => (usize::from(to) as u32) << 2 | SHIFT,
                    Action::Reduce(p) => (usize::from(p) as u32) << 2 | REDUCE,
                };
            }
            for r in grm.iter_rules() {
                if let Some(to) = st.goto(stidx, r) {
                    gotos[s * n_rules + usize::from(r)] = usize::from(to) as u32 + 1;
                }
            }
        }
        let prod_len = grm.iter_pidxs().map(|p| grm.prod(p).len() as u16).collect();
        let prod_lhs = grm
            .iter_pidxs()
            .map(|p| usize::from(grm.prod_to_rule(p)) as u32)
            .collect();
        let prod_rhs = grm
            .iter_pidxs()
            .map(|p| {
                grm.prod(p)
                    .iter()
                    .map(|sym| match sym {
                        Symbol::Token(t) => Sym::Term(usize::from(*t) as u16),
                        Symbol::Rule(r) => Sym::Rule(usize::from(*r) as u32),
                    })
                    .collect()
            })
            .collect();
        let kernels = (0..n_states)
            .map(|s| {
                let mut items: Vec<(u32, u16)> = graph
                    .core_state(StIdx(s as u32))
                    .items
                    .keys()
                    .map(|(p, dot)| (usize::from(*p) as u32, usize::from(*dot) as u16))
                    .collect();
                // Hash-map order is not stable across runs; completions must be.
                items.sort_unstable();
                items
            })
            .collect();
        let rule_names = grm
            .iter_rules()
            .map(|r| grm.rule_name_str(r).to_string())
            .collect();
        Ok(LrTable {
            n_terms,
            n_rules,
            n_states,
            start_state: usize::from(st.start_state()) as u32,
            eof: eof as u16,
            actions,
            gotos,
            prod_len,
            prod_lhs,
            rule_names,
            n_prods: cfg.prods.len(),
            prod_rhs,
            kernels,
            start_rule: usize::from(grm.start_rule_idx()) as u32,
        })
    }

    #[inline]
    pub fn action(&self, state: u32, term: u16) -> Move {
        let a = self.actions[state as usize * self.n_terms + usize::from(term)];
        match a & 3 {
            ERROR => Move::Error,
            ACCEPT => Move::Accept,
            SHIFT => Move::Shift(a >> 2),
            _ => Move::Reduce(a >> 2),
        }
    }

    #[inline]
    pub fn goto(&self, state: u32, rule: u32) -> Option<u32> {
        match self.gotos[state as usize * self.n_rules + rule as usize] {
            0 => None,
            s => Some(s - 1),
        }
    }
}
