//! Parser stacks as persistent, interned chains, and the allowed-terminal sets `A(σ)`.
//!
//! A stack is a node id; a node is `(parent, LR state, value)`, interned, so equal stacks
//! are equal ids and a recurring configuration costs a lookup. The value is the entry's
//! attribute for the dynamic lexicon ([`crate::scope`]); most entries have none. What the
//! parser decides (moves, `A(σ)`) reads states only, so it is memoised per *core*: the node
//! with the same states and no values. Each node carries the rolling hash
//! `H(node) = low64(BLAKE2b-128(H(parent) ‖ u32 state ‖ u32 depth))`, `H(root parent) = 0`,
//! so identifying a configuration never reads the whole stack. The hash is computed when
//! first asked for: the mask's verdicts push many hypothetical nodes nobody identifies.
//!
//! With a language's [`ContextRule`] ([`Stacks::for_rule`]), `A(σ)` also reads whether the
//! stack is *pending* ([`crate::qualifier`]), a property of its states kept per node: the
//! allowed set is the table's, without the qualifier form that does not stand there.

use std::cell::Cell;

use blake2::digest::consts::U16;
use blake2::{Blake2b, Digest};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use crate::grammar::table::{LrTable, Move};
use crate::qualifier::{Below, ContextRule};
use crate::scope::{Name, Semantics, StackView, Value, Values, Word, NIL};
use crate::termset::TermSet;

#[derive(Clone, Debug)]
struct Node {
    parent: u32,
    state: u32,
    depth: u32,
    /// The entry's value, by id in [`Stacks::values`].
    value: u32,
    /// The node with these states and no values (itself when it has none, nor its stack).
    core: u32,
    /// Whether the stack is pending ([`crate::qualifier`]); always false without a rule.
    pending: bool,
    /// `H(node)`, once computed.
    hash: Cell<Option<u64>>,
}

/// The arena of stack nodes of one session, with per-node memos.
#[derive(Debug, Default)]
pub struct Stacks {
    nodes: Vec<Node>,
    intern: FxHashMap<(u32, u32, u32), u32>,
    /// `A(σ)` per core node, filled on first use.
    allowed: Vec<Option<TermSet>>,
    /// The values the nodes refer to.
    pub values: Values,
    /// The names a dynamic terminal may spell on a node, by (node, terminal).
    visible: FxHashMap<(u32, u16), std::sync::Arc<[Name]>>,
    /// Every name a node's stack holds (sorted, distinct), by node.
    names: FxHashMap<u32, std::sync::Arc<[Name]>>,
    /// Every range variable's name a node's stack holds (sorted, distinct), by node.
    range_names: FxHashMap<u32, std::sync::Arc<[Name]>>,
    /// The rule that filters `A(σ)` by the pending property, if the language has one.
    rule: Option<std::sync::Arc<ContextRule>>,
    /// No names, allocated once: what [`Stacks::qualified_columns_on`] answers off a
    /// qualified column, at every step of the mask, which must not allocate once warm.
    no_names: std::sync::Arc<[Name]>,
}

impl StackView for Stacks {
    fn parent(&self, node: u32) -> u32 {
        self.nodes[node as usize].parent
    }

    fn state(&self, node: u32) -> u32 {
        self.nodes[node as usize].state
    }

    fn value(&self, node: u32) -> &Value {
        self.values.get(self.nodes[node as usize].value)
    }
}

impl Stacks {
    /// An arena whose allowed sets follow `rule` (none: the table's own).
    pub fn for_rule(rule: Option<std::sync::Arc<ContextRule>>) -> Stacks {
        Stacks {
            rule,
            ..Stacks::default()
        }
    }

    pub fn root(&mut self, table: &LrTable) -> u32 {
        self.push(NIL, table.start_state)
    }

    fn push(&mut self, parent: u32, state: u32) -> u32 {
        self.push_valued(parent, state, Values::NONE)
    }

    /// The stack `parent` with `state` pushed on top, carrying the value `value` (interned).
    pub fn push_valued(&mut self, parent: u32, state: u32, value: u32) -> u32 {
        if let Some(&id) = self.intern.get(&(parent, state, value)) {
            return id;
        }
        let parent_core = match parent {
            NIL => NIL,
            p => self.nodes[p as usize].core,
        };
        // The core is this node itself when neither it nor its stack carries a value.
        let core = (value != Values::NONE || parent_core != parent)
            .then(|| self.push_valued(parent_core, state, Values::NONE));
        let depth = match parent {
            NIL => 0,
            p => self.nodes[p as usize].depth + 1,
        };
        let pending = self.pending_of(parent, state);
        let id = self.nodes.len() as u32;
        self.nodes.push(Node {
            parent,
            state,
            depth,
            value,
            core: core.unwrap_or(id),
            pending,
            hash: Cell::new(None),
        });
        self.allowed.push(None);
        self.intern.insert((parent, state, value), id);
        id
    }

    /// Whether a node in `state` over `parent` is pending ([`ContextRule::pending`]).
    fn pending_of(&self, parent: u32, state: u32) -> bool {
        let Some(rule) = &self.rule else {
            return false;
        };
        let below = (parent != NIL).then(|| {
            let p = &self.nodes[parent as usize];
            // Under a select list: its `opt_distinct`, its `SELECT`, then the stack.
            let context_pending = rule.is_targets(p.state) && {
                let mut n = parent;
                for _ in 0..3 {
                    if n != NIL {
                        n = self.nodes[n as usize].parent;
                    }
                }
                n != NIL && self.nodes[n as usize].pending
            };
            Below {
                state: p.state,
                pending: p.pending,
                context_pending,
            }
        });
        rule.pending(state, below)
    }

    /// Whether the stack `node` is pending ([`crate::qualifier`]).
    pub fn pending(&self, node: u32) -> bool {
        self.nodes[node as usize].pending
    }

    /// The node with `node`'s states and no values.
    #[inline]
    pub fn core(&self, node: u32) -> u32 {
        self.nodes[node as usize].core
    }

    /// The value of the entry on top of `node`.
    pub fn value_of(&self, node: u32) -> &Value {
        self.values.get(self.nodes[node as usize].value)
    }

    /// The LR state on top of `node`.
    pub fn state(&self, node: u32) -> u32 {
        self.nodes[node as usize].state
    }

    /// The stack below `node`'s top entry, or [`NIL`] for the root.
    pub fn parent(&self, node: u32) -> u32 {
        self.nodes[node as usize].parent
    }

    /// The stack `parent` with `state` pushed on top (interned).
    pub fn push_state(&mut self, parent: u32, state: u32) -> u32 {
        self.push(parent, state)
    }

    pub fn hash(&self, node: u32) -> u64 {
        // Up to the nearest hashed ancestor, then down again.
        let mut unhashed: SmallVec<[u32; 32]> = SmallVec::new();
        let mut n = node;
        let mut h = loop {
            if n == NIL {
                break 0;
            }
            let x = &self.nodes[n as usize];
            match x.hash.get() {
                Some(h) => break h,
                None => {
                    unhashed.push(n);
                    n = x.parent;
                }
            }
        };
        for &n in unhashed.iter().rev() {
            let x = &self.nodes[n as usize];
            let mut b = Blake2b::<U16>::new();
            b.update(h.to_le_bytes());
            b.update(x.state.to_le_bytes());
            b.update(x.depth.to_le_bytes());
            let d: [u8; 16] = b.finalize().into();
            let mut low = [0u8; 8];
            low.copy_from_slice(&d[..8]);
            h = u64::from_le_bytes(low);
            x.hash.set(Some(h));
        }
        h
    }

    pub fn depth(&self, node: u32) -> u32 {
        self.nodes[node as usize].depth
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Whether `term` would be shifted (or, for end of input, accepted) from `node`: runs
    /// the reduce chain on a virtual overlay, leaving the arena untouched.
    pub fn simulate(&self, table: &LrTable, node: u32, term: u16) -> bool {
        let mut overlay: SmallVec<[u32; 16]> = SmallVec::new();
        let mut base = node;
        loop {
            let top = overlay
                .last()
                .copied()
                .unwrap_or(self.nodes[base as usize].state);
            match table.action(top, term) {
                Move::Shift(_) | Move::Accept => return true,
                Move::Error => return false,
                Move::Reduce(p) => {
                    for _ in 0..table.prod_len[p as usize] {
                        if overlay.pop().is_none() {
                            base = self.nodes[base as usize].parent;
                            if base == NIL {
                                return false;
                            }
                        }
                    }
                    let top = overlay
                        .last()
                        .copied()
                        .unwrap_or(self.nodes[base as usize].state);
                    match table.goto(top, table.prod_lhs[p as usize]) {
                        Some(s) => overlay.push(s),
                        None => return false,
                    }
                }
            }
        }
    }

    /// The state `term` is shifted into from `node` (after the reductions it requires), or
    /// `None` when the stack cannot take it.
    pub fn shift_target(&self, table: &LrTable, node: u32, term: u16) -> Option<u32> {
        let mut overlay: SmallVec<[u32; 16]> = SmallVec::new();
        let mut base = node;
        loop {
            let top = overlay
                .last()
                .copied()
                .unwrap_or(self.nodes[base as usize].state);
            match table.action(top, term) {
                Move::Shift(s) => return Some(s),
                Move::Accept | Move::Error => return None,
                Move::Reduce(p) => {
                    for _ in 0..table.prod_len[p as usize] {
                        if overlay.pop().is_none() {
                            base = self.nodes[base as usize].parent;
                            if base == NIL {
                                return None;
                            }
                        }
                    }
                    let top = overlay
                        .last()
                        .copied()
                        .unwrap_or(self.nodes[base as usize].state);
                    overlay.push(table.goto(top, table.prod_lhs[p as usize])?);
                }
            }
        }
    }

    /// `A(σ)`: every terminal (end of input included) that `simulate` admits, filtered by
    /// the arena's [`ContextRule`]. Memoised.
    pub fn allowed(&mut self, table: &LrTable, node: u32) -> TermSet {
        let node = self.core(node);
        if let Some(a) = self.allowed[node as usize] {
            return a;
        }
        let state = self.nodes[node as usize].state;
        let mut a = TermSet::EMPTY;
        for t in 0..table.n_terms as u16 {
            // An error in the top state's row is final; anything else needs the chain.
            if table.action(state, t) != Move::Error && self.simulate(table, node, t) {
                a.insert(t);
            }
        }
        if let Some(rule) = &self.rule {
            let pending = self.nodes[node as usize].pending;
            a = rule.filter(a, pending, |t| self.shift_target(table, node, t));
        }
        self.allowed[node as usize] = Some(a);
        a
    }

    /// Reduces as `term` requires and shifts it; `None` if the stack cannot take it.
    pub fn shift(&mut self, table: &LrTable, node: u32, term: u16) -> Option<u32> {
        let mut cur = node;
        loop {
            match table.action(self.nodes[cur as usize].state, term) {
                Move::Shift(s) => return Some(self.push(cur, s)),
                Move::Accept | Move::Error => return None,
                Move::Reduce(p) => {
                    for _ in 0..table.prod_len[p as usize] {
                        cur = self.nodes[cur as usize].parent;
                        if cur == NIL {
                            return None;
                        }
                    }
                    let g =
                        table.goto(self.nodes[cur as usize].state, table.prod_lhs[p as usize])?;
                    cur = self.push(cur, g);
                }
            }
        }
    }

    /// [`Stacks::shift`] keeping values ([`crate::scope`]): the shifted entry holds `word`
    /// (the stored name of its lexeme) when `sem` keeps that terminal's words, and every
    /// reduced production the value `sem` makes from its entries'.
    pub fn shift_valued(
        &mut self,
        table: &LrTable,
        sem: &Semantics,
        node: u32,
        term: u16,
        word: Option<&Word>,
    ) -> Option<u32> {
        if !sem.enabled() {
            return self.shift(table, node, term);
        }
        let mut cur = node;
        loop {
            match table.action(self.nodes[cur as usize].state, term) {
                Move::Shift(s) => {
                    let v = match word {
                        Some(w) if sem.keeps_word(term) => self.values.intern(sem.word(term, w)),
                        _ => Values::NONE,
                    };
                    return Some(self.push_valued(cur, s, v));
                }
                Move::Accept | Move::Error => return None,
                Move::Reduce(p) => {
                    let mut popped: SmallVec<[u32; 8]> = SmallVec::new();
                    for _ in 0..table.prod_len[p as usize] {
                        popped.push(cur);
                        cur = self.nodes[cur as usize].parent;
                        if cur == NIL {
                            return None;
                        }
                    }
                    popped.reverse();
                    let g =
                        table.goto(self.nodes[cur as usize].state, table.prod_lhs[p as usize])?;
                    let value = {
                        let rhs: SmallVec<[&Value; 8]> =
                            popped.iter().map(|&x| self.value_of(x)).collect();
                        sem.reduce(p, &rhs, cur, self)
                    };
                    let v = self.values.intern(value);
                    cur = self.push_valued(cur, g, v);
                }
            }
        }
    }

    /// The names dynamic terminal `t` may spell on the stack `node` ([`Semantics::visible`]),
    /// memoised per node.
    pub fn visible(&mut self, sem: &Semantics, node: u32, t: u16) -> std::sync::Arc<[Name]> {
        if let Some(v) = self.visible.get(&(node, t)) {
            return v.clone();
        }
        let v: std::sync::Arc<[Name]> = sem.visible(self, node, t).into();
        self.visible.insert((node, t), v.clone());
        v
    }

    /// Every name the values of the stack `node` hold ([`Semantics::held_names`]), sorted
    /// and distinct (the words the next token could spell as a dynamic terminal: see
    /// [`crate::mask`]); memoised per node, and shared with the node below when the top
    /// entry adds none.
    pub fn names_on(&mut self, sem: &Semantics, node: u32) -> std::sync::Arc<[Name]> {
        let mut memo = std::mem::take(&mut self.names);
        let v = self.collect_on(node, &mut memo, &|v, out| sem.held_names(v, out));
        self.names = memo;
        v
    }

    /// Every range variable's name the values of the stack `node` hold
    /// ([`Value::range_names`]: the qualifiers the next token could spell), as
    /// [`Stacks::names_on`].
    pub fn range_names_on(&mut self, node: u32) -> std::sync::Arc<[Name]> {
        let mut memo = std::mem::take(&mut self.range_names);
        let v = self.collect_on(node, &mut memo, &Value::range_names);
        self.range_names = memo;
        v
    }

    /// The columns a qualified reference may name on `node` when its top is a qualifier
    /// (or a qualifier and its dot), else none ([`Semantics::qualified_columns`]):
    /// memoised with the names of `QUAL_COL`.
    pub fn qualified_columns_on(&mut self, sem: &Semantics, node: u32) -> std::sync::Arc<[Name]> {
        match sem.qual_col() {
            Some(t) if sem.in_qualified_column(self.state(node)) => self.visible(sem, node, t),
            _ => self.no_names.clone(),
        }
    }

    /// The names `names_of` finds in the values of the stack `node`, sorted and distinct,
    /// memoised per node in `memo`.
    fn collect_on(
        &self,
        node: u32,
        memo: &mut FxHashMap<u32, std::sync::Arc<[Name]>>,
        names_of: &dyn Fn(&Value, &mut Vec<Name>),
    ) -> std::sync::Arc<[Name]> {
        let mut path: SmallVec<[u32; 32]> = SmallVec::new();
        let mut n = node;
        let mut below: std::sync::Arc<[Name]> = loop {
            if n == NIL {
                break std::sync::Arc::from([]);
            }
            if let Some(v) = memo.get(&n) {
                break v.clone();
            }
            path.push(n);
            n = self.nodes[n as usize].parent;
        };
        for &n in path.iter().rev() {
            let mut own = Vec::new();
            names_of(self.value_of(n), &mut own);
            own.retain(|x| below.binary_search(x).is_err());
            if !own.is_empty() {
                own.extend(below.iter().cloned());
                own.sort_unstable();
                own.dedup();
                below = own.into();
            }
            memo.insert(n, below.clone());
        }
        below
    }

    /// Whether end of input reaches ACCEPT from `node`.
    pub fn accepts(&mut self, table: &LrTable, node: u32) -> bool {
        self.allowed(table, node).contains(table.eof)
    }
}
