//! The word trie: every spelling of every L3 word and every denied word, in one trie that
//! the scanner walks beside the automaton.
//!
//! Spellings are canonical: unquoted parts are lower case, and the scanner folds a byte
//! outside double quotes before stepping (PostgreSQL folds ASCII only). Inside quotes a byte
//! must match exactly. A node knows whether it is inside quotes, so the cursor is one id.
//!
//! A relation word may be `schema.table`: the dot between the parts is the only dot outside
//! quotes in any word, so a `.` edge from a node outside quotes is that separator
//! ([`WordTrie::is_separator`]); the scanner takes it only where a relation is expected.

use crate::termset::TermSet;

pub(crate) const OFF: u32 = u32::MAX;

/// One trie node. Invariant: `live` is the union of `accept` over the node's subtree.
#[derive(Clone, Debug, Default)]
struct Node {
    /// Sorted by byte.
    children: Vec<(u8, u32)>,
    /// Allow-list terminals for which this exact spelling is a word.
    accept: TermSet,
    /// Deny-list terminals for which this exact spelling is refused.
    deny: TermSet,
    live: TermSet,
    in_quotes: bool,
}

#[derive(Clone, Debug)]
pub struct WordTrie {
    nodes: Vec<Node>,
}

impl Default for WordTrie {
    fn default() -> Self {
        WordTrie {
            nodes: vec![Node::default()],
        }
    }
}

impl WordTrie {
    pub(crate) const ROOT: u32 = 0;

    /// Adds a canonical spelling; `allow` or `deny` says for which terminals.
    pub(crate) fn insert(&mut self, spelling: &[u8], allow: Option<u16>, deny: Option<u16>) {
        let mut n = 0usize;
        for &b in spelling {
            let in_quotes = self.nodes[n].in_quotes;
            let next = match self.nodes[n].children.binary_search_by_key(&b, |c| c.0) {
                Ok(i) => self.nodes[n].children[i].1 as usize,
                Err(i) => {
                    let id = self.nodes.len();
                    self.nodes[n].children.insert(i, (b, id as u32));
                    self.nodes.push(Node {
                        in_quotes: in_quotes ^ (b == b'"'),
                        ..Node::default()
                    });
                    id
                }
            };
            if let Some(t) = allow {
                self.nodes[n].live.insert(t);
            }
            n = next;
        }
        if let Some(t) = allow {
            self.nodes[n].accept.insert(t);
            self.nodes[n].live.insert(t);
        }
        if let Some(t) = deny {
            self.nodes[n].deny.insert(t);
        }
    }

    /// One scanner byte; `OFF` once the bytes leave the trie.
    #[inline]
    pub fn step(&self, node: u32, byte: u8) -> u32 {
        if node == OFF {
            return OFF;
        }
        let n = &self.nodes[node as usize];
        let key = if n.in_quotes {
            byte
        } else {
            byte.to_ascii_lowercase()
        };
        match n.children.binary_search_by_key(&key, |c| c.0) {
            Ok(i) => n.children[i].1,
            Err(_) => OFF,
        }
    }

    /// Whether some node steps on `byte` (as itself inside quotes, folded outside): a byte
    /// for which this is false leaves the trie from every node.
    pub(crate) fn steps_on(&self, byte: u8) -> bool {
        let folded = byte.to_ascii_lowercase();
        self.nodes.iter().any(|n| {
            let key = if n.in_quotes { byte } else { folded };
            n.children.binary_search_by_key(&key, |c| c.0).is_ok()
        })
    }

    /// Whether `byte` after `node` is the dot of a `schema.table` word that the trie holds.
    #[inline]
    pub(crate) fn is_separator(&self, node: u32, byte: u8) -> bool {
        byte == b'.'
            && node != OFF
            && !self.nodes[node as usize].in_quotes
            && self.nodes[node as usize]
                .children
                .binary_search_by_key(&b'.', |c| c.0)
                .is_ok()
    }

    /// Whether `node` is inside double quotes (`OFF` is not: it is on no spelling).
    #[inline]
    pub(crate) fn in_quotes(&self, node: u32) -> bool {
        node != OFF && self.nodes[node as usize].in_quotes
    }

    #[inline]
    pub fn accept(&self, node: u32) -> TermSet {
        if node == OFF {
            TermSet::EMPTY
        } else {
            self.nodes[node as usize].accept
        }
    }

    #[inline]
    pub(crate) fn deny(&self, node: u32) -> TermSet {
        if node == OFF {
            TermSet::EMPTY
        } else {
            self.nodes[node as usize].deny
        }
    }

    #[inline]
    pub fn live(&self, node: u32) -> TermSet {
        if node == OFF {
            TermSet::EMPTY
        } else {
            self.nodes[node as usize].live
        }
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.len() == 1
    }

    pub fn walk(&self, bytes: &[u8]) -> u32 {
        bytes.iter().fold(Self::ROOT, |n, &b| self.step(n, b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_outside_quotes_only() {
        let mut t = WordTrie::default();
        t.insert(b"employees", Some(3), None);
        t.insert(b"\"Employees\"", Some(3), None);
        t.insert(b"select", None, Some(7));
        assert!(t.accept(t.walk(b"EMPloyees")).contains(3));
        assert!(t.accept(t.walk(b"\"Employees\"")).contains(3));
        assert_eq!(t.walk(b"\"EMPLOYEES\""), OFF);
        assert!(t.live(t.walk(b"emp")).contains(3));
        assert!(t.deny(t.walk(b"SeLeCt")).contains(7));
        assert!(t.accept(t.walk(b"sel")).is_empty());
    }

    #[test]
    fn the_separator_is_the_dot_outside_quotes() {
        let mut t = WordTrie::default();
        t.insert(b"hr.staff", Some(3), None);
        t.insert(b"\"HR\".staff", Some(3), None);
        t.insert(b"\"a.b\"", Some(3), None);
        assert!(t.is_separator(t.walk(b"HR"), b'.'));
        assert!(t.is_separator(t.walk(b"\"HR\""), b'.'));
        assert!(!t.is_separator(t.walk(b"\"a"), b'.'), "inside quotes");
        assert!(!t.is_separator(t.walk(b"h"), b'.'));
        assert!(!t.is_separator(OFF, b'.'));
        assert!(t.accept(t.walk(b"Hr.STAFF")).contains(3));
        assert_eq!(t.walk(b"\"hr\".staff"), OFF, "quoted parts keep their case");
    }
}
