//! Parser stacks as persistent, interned chains, and the allowed-terminal sets `A(σ)`.
//!
//! A stack is a node id; a node is `(parent, LR state)`, interned, so equal stacks are equal
//! ids and a recurring configuration costs a lookup. Each node carries the rolling hash
//! `H(node) = low64(BLAKE2b-128(H(parent) ‖ u32 state ‖ u32 depth))`, `H(root parent) = 0`,
//! so identifying a configuration never reads the whole stack. The hash is computed when
//! first asked for: the mask's verdicts push many hypothetical nodes nobody identifies.

use std::cell::Cell;

use blake2::digest::consts::U16;
use blake2::{Blake2b, Digest};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use crate::grammar::table::{LrTable, Move};
use crate::termset::TermSet;

pub const NIL: u32 = u32::MAX;

#[derive(Clone, Debug)]
struct Node {
    parent: u32,
    state: u32,
    depth: u32,
    /// `H(node)`, once computed.
    hash: Cell<Option<u64>>,
}

/// The arena of stack nodes of one session, with per-node memos.
#[derive(Debug, Default)]
pub struct Stacks {
    nodes: Vec<Node>,
    intern: FxHashMap<(u32, u32), u32>,
    /// `A(σ)` per node, filled on first use.
    allowed: Vec<Option<TermSet>>,
}

impl Stacks {
    pub fn root(&mut self, table: &LrTable) -> u32 {
        self.push(NIL, table.start_state)
    }

    fn push(&mut self, parent: u32, state: u32) -> u32 {
        if let Some(&id) = self.intern.get(&(parent, state)) {
            return id;
        }
        let depth = match parent {
            NIL => 0,
            p => self.nodes[p as usize].depth + 1,
        };
        let id = self.nodes.len() as u32;
        self.nodes.push(Node {
            parent,
            state,
            depth,
            hash: Cell::new(None),
        });
        self.allowed.push(None);
        self.intern.insert((parent, state), id);
        id
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

    /// `A(σ)`: every terminal (end of input included) that `simulate` admits. Memoised.
    pub fn allowed(&mut self, table: &LrTable, node: u32) -> TermSet {
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

    /// Whether end of input reaches ACCEPT from `node`.
    pub fn accepts(&mut self, table: &LrTable, node: u32) -> bool {
        self.allowed(table, node).contains(table.eof)
    }
}
