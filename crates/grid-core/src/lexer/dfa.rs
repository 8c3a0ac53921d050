//! The union automaton of every terminal's lexeme language.
//!
//! Built once per dialect with regex-automata (one pattern per terminal, all matches kept),
//! then copied into a table this crate owns so that each state carries what the scanner
//! asks at every byte: which terminals accept the bytes read so far, and which terminals
//! can still accept after more bytes ("live"). State 0 is the dead state.

use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::nfa::thompson;
use regex_automata::util::{start, syntax};
use regex_automata::{Anchored, MatchKind};
use rustc_hash::FxHashMap;

use crate::error::{GridError, Result};
use crate::termset::TermSet;

pub(crate) const DEAD: u32 = 0;

/// A deterministic byte automaton over the union of terminal languages.
#[derive(Clone, Debug)]
pub struct LexDfa {
    /// `trans[state * n_classes + class[byte]]`.
    trans: Vec<u32>,
    classes: [u8; 256],
    n_classes: usize,
    pub(crate) start: u32,
    /// Terminals whose language contains the bytes read to reach this state.
    accept: Vec<TermSet>,
    /// Terminals with a word that extends the bytes read (accepting ones included).
    live: Vec<TermSet>,
    /// The fewest further bytes, all through non-accepting states, before one byte kills
    /// the automaton (`u32::MAX` if that never happens: a string body only ends by
    /// accepting). Bounds the search for a cut-back to an earlier accepting length.
    dies_within: Vec<u32>,
}

impl LexDfa {
    /// `patterns[i] = (terminal id, regex)`; the regexes are over bytes.
    pub fn build(patterns: &[(u16, String)]) -> Result<LexDfa> {
        LexDfa::build_with(patterns, None)
    }

    /// [`LexDfa::build`] where, with `text`, every lexeme is also a word of `text`, a regex
    /// in Unicode mode (so over valid UTF-8 only): the product of the two automata. A
    /// lexeme's regex over bytes counts bytes (a name's 63), which a class of characters
    /// cannot; the product keeps that count and admits only bytes that can still end a
    /// character `text` takes, whatever the lexeme.
    pub(crate) fn build_with(patterns: &[(u16, String)], text: Option<&str>) -> Result<LexDfa> {
        let raw = Raw::build(patterns)?;
        let raw = match text {
            Some(t) => raw.product(&Raw::text(t)?),
            None => raw,
        };
        Ok(raw.finish())
    }
}

/// An automaton before its live sets: `trans[state * n_classes + class]`, state 0 dead.
struct Raw {
    trans: Vec<u32>,
    classes: [u8; 256],
    n_classes: usize,
    start: u32,
    accept: Vec<TermSet>,
    /// In a product, the transitions to the dead state that only the text automaton
    /// takes (by `trans`' index): see [`Raw::finish`].
    text_kills: Vec<bool>,
}

impl Raw {
    fn build(patterns: &[(u16, String)]) -> Result<Raw> {
        let regexes: Vec<&str> = patterns.iter().map(|p| p.1.as_str()).collect();
        let dfa = dense::Builder::new()
            .configure(
                dense::Config::new()
                    .match_kind(MatchKind::All)
                    .start_kind(StartKind::Anchored)
                    .byte_classes(true),
            )
            .syntax(syntax::Config::new().unicode(false).utf8(false))
            .thompson(thompson::Config::new().utf8(false))
            .build_many(&regexes)
            .map_err(|e| GridError::Automaton(e.to_string()))?;
        let start = dfa
            .start_state(&start::Config::new().anchored(Anchored::Yes))
            .map_err(|e| GridError::Automaton(e.to_string()))?;
        let bc = dfa.byte_classes();
        let mut classes = [0u8; 256];
        let mut repr = Vec::new();
        for b in 0..=255u8 {
            classes[usize::from(b)] = bc.get(b);
            if usize::from(bc.get(b)) == repr.len() {
                repr.push(b);
            }
        }
        let n_classes = repr.len();
        let mut ids: FxHashMap<regex_automata::util::primitives::StateID, u32> =
            FxHashMap::default();
        let mut order = Vec::new();
        let mut trans = vec![DEAD; n_classes];
        let mut accept = vec![TermSet::EMPTY];
        let intern = |sid, ids: &mut FxHashMap<_, u32>, order: &mut Vec<_>| -> u32 {
            if dfa.is_dead_state(sid) {
                return DEAD;
            }
            *ids.entry(sid).or_insert_with(|| {
                order.push(sid);
                order.len() as u32
            })
        };
        let start_id = intern(start, &mut ids, &mut order);
        let mut i = 0;
        while i < order.len() {
            let sid = order[i];
            i += 1;
            let mut row = vec![DEAD; n_classes];
            for (c, &b) in repr.iter().enumerate() {
                let next = dfa.next_state(sid, b);
                if dfa.is_quit_state(next) {
                    return Err(GridError::Automaton("quit state in lexer automaton".into()));
                }
                row[c] = intern(next, &mut ids, &mut order);
            }
            trans.extend_from_slice(&row);
            let eoi = dfa.next_eoi_state(sid);
            let mut acc = TermSet::EMPTY;
            if dfa.is_match_state(eoi) {
                for k in 0..dfa.match_len(eoi) {
                    acc.insert(patterns[dfa.match_pattern(eoi, k).as_usize()].0);
                }
            }
            accept.push(acc);
        }
        Ok(Raw {
            trans,
            classes,
            n_classes,
            start: start_id,
            accept,
            text_kills: Vec::new(),
        })
    }

    /// The minimal automaton of `pattern` in Unicode mode, its accepting
    /// states marked with terminal 0 (only whether a state accepts is read).
    fn text(pattern: &str) -> Result<Raw> {
        let dfa = dense::Builder::new()
            .configure(
                dense::Config::new()
                    .start_kind(StartKind::Anchored)
                    .minimize(true)
                    .byte_classes(true),
            )
            .syntax(syntax::Config::new().unicode(true).utf8(true))
            .thompson(thompson::Config::new().utf8(true))
            .build(pattern)
            .map_err(|e| GridError::Automaton(e.to_string()))?;
        let start = dfa
            .start_state(&start::Config::new().anchored(Anchored::Yes))
            .map_err(|e| GridError::Automaton(e.to_string()))?;
        let mut ids: FxHashMap<regex_automata::util::primitives::StateID, u32> =
            FxHashMap::default();
        let mut order = Vec::new();
        let intern = |sid, ids: &mut FxHashMap<_, u32>, order: &mut Vec<_>| -> u32 {
            if dfa.is_dead_state(sid) {
                return DEAD;
            }
            *ids.entry(sid).or_insert_with(|| {
                order.push(sid);
                order.len() as u32
            })
        };
        let bc = dfa.byte_classes();
        let mut classes = [0u8; 256];
        let mut repr = Vec::new();
        for b in 0..=255u8 {
            classes[usize::from(b)] = bc.get(b);
            if usize::from(bc.get(b)) == repr.len() {
                repr.push(b);
            }
        }
        let n_classes = repr.len();
        let start_id = intern(start, &mut ids, &mut order);
        let mut trans = vec![DEAD; n_classes];
        let mut accept = vec![TermSet::EMPTY];
        let mut i = 0;
        while i < order.len() {
            let sid = order[i];
            i += 1;
            for &b in &repr {
                let next = dfa.next_state(sid, b);
                if dfa.is_quit_state(next) {
                    return Err(GridError::Automaton("quit state in text automaton".into()));
                }
                trans.push(intern(next, &mut ids, &mut order));
            }
            let mut acc = TermSet::EMPTY;
            if dfa.is_match_state(dfa.next_eoi_state(sid)) {
                acc.insert(0);
            }
            accept.push(acc);
        }
        Ok(Raw {
            trans,
            classes,
            n_classes,
            start: start_id,
            accept,
            text_kills: Vec::new(),
        })
    }

    /// The states `(p, q)` reachable from both starts, accepting `self`'s terminals where
    /// `text` accepts; the byte classes are those of both, refined.
    fn product(&self, text: &Raw) -> Raw {
        let mut classes = [0u8; 256];
        let mut repr: Vec<u8> = Vec::new();
        let mut keys: Vec<(u8, u8)> = Vec::new();
        for b in 0..=255u8 {
            let key = (self.classes[usize::from(b)], text.classes[usize::from(b)]);
            let c = match keys.iter().position(|&k| k == key) {
                Some(c) => c,
                None => {
                    keys.push(key);
                    repr.push(b);
                    keys.len() - 1
                }
            };
            classes[usize::from(b)] = c as u8;
        }
        let n_classes = repr.len();
        let mut ids: FxHashMap<(u32, u32), u32> = FxHashMap::default();
        let mut order: Vec<(u32, u32)> = Vec::new();
        let intern = |p: u32, q: u32, ids: &mut FxHashMap<_, u32>, order: &mut Vec<_>| -> u32 {
            if p == DEAD || q == DEAD {
                return DEAD;
            }
            *ids.entry((p, q)).or_insert_with(|| {
                order.push((p, q));
                order.len() as u32
            })
        };
        let start = intern(self.start, text.start, &mut ids, &mut order);
        let mut trans = vec![DEAD; n_classes];
        let mut text_kills = vec![false; n_classes];
        let mut accept = vec![TermSet::EMPTY];
        let mut i = 0;
        while i < order.len() {
            let (p, q) = order[i];
            i += 1;
            for &b in &repr {
                let to_p = self.trans
                    [p as usize * self.n_classes + usize::from(self.classes[usize::from(b)])];
                let to_q = text.trans
                    [q as usize * text.n_classes + usize::from(text.classes[usize::from(b)])];
                text_kills.push(to_p != DEAD && to_q == DEAD);
                trans.push(intern(to_p, to_q, &mut ids, &mut order));
            }
            accept.push(if text.accept[q as usize].is_empty() {
                TermSet::EMPTY
            } else {
                self.accept[p as usize]
            });
        }
        Raw {
            trans,
            classes,
            n_classes,
            start,
            accept,
            text_kills,
        }
    }

    fn finish(self) -> LexDfa {
        let Raw {
            trans,
            classes,
            n_classes,
            start,
            accept,
            text_kills,
        } = self;
        let n = accept.len();
        let mut live = accept.clone();
        loop {
            let mut changed = false;
            for s in (1..n).rev() {
                let mut l = live[s];
                for c in 0..n_classes {
                    l = l.union(&live[trans[s * n_classes + c] as usize]);
                }
                if l != live[s] {
                    live[s] = l;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let mut dies_within = vec![u32::MAX; n];
        loop {
            let mut changed = false;
            for s in 1..n {
                let mut best = dies_within[s];
                for c in 0..n_classes {
                    let t = trans[s * n_classes + c] as usize;
                    // A byte that only the text refuses kills the lexeme to no end: cut
                    // back, its tail holds the same unfinished character (lexemes end on a
                    // character's end), which refuses the byte again. So it bounds no
                    // search for a cut-back; counted, every string body would die within
                    // one byte (a continuation byte) and the search try every detour.
                    let d = if text_kills.get(s * n_classes + c) == Some(&true) {
                        continue;
                    } else if t == DEAD as usize {
                        0
                    } else if accept[t].is_empty() && dies_within[t] != u32::MAX {
                        dies_within[t] + 1
                    } else {
                        continue;
                    };
                    best = best.min(d);
                }
                if best != dies_within[s] {
                    dies_within[s] = best;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        LexDfa {
            trans,
            classes,
            n_classes,
            start,
            accept,
            live,
            dies_within,
        }
    }
}

impl LexDfa {
    #[inline]
    pub(crate) fn next(&self, state: u32, byte: u8) -> u32 {
        self.trans[state as usize * self.n_classes + usize::from(self.classes[usize::from(byte)])]
    }

    /// The byte's class: bytes of one class move every state alike.
    #[inline]
    pub(crate) fn class(&self, byte: u8) -> u8 {
        self.classes[usize::from(byte)]
    }

    #[inline]
    pub(crate) fn accept(&self, state: u32) -> &TermSet {
        &self.accept[state as usize]
    }

    #[inline]
    pub(crate) fn live(&self, state: u32) -> &TermSet {
        &self.live[state as usize]
    }

    #[inline]
    pub fn dies_within(&self, state: u32) -> u32 {
        self.dies_within[state as usize]
    }

    pub(crate) fn n_states(&self) -> usize {
        self.accept.len()
    }

    /// Runs the automaton over `bytes` from the start state.
    pub fn run(&self, bytes: &[u8]) -> u32 {
        bytes.iter().fold(
            self.start,
            |s, &b| if s == DEAD { DEAD } else { self.next(s, b) },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_and_live_sets() {
        let d = LexDfa::build(&[
            (0, "(?i:select)".into()),
            (1, "[a-z_][a-z0-9_]*".into()),
            (2, "[0-9]+(?:[eE][0-9]+)?".into()),
        ])
        .unwrap();
        let s = d.run(b"SELECT");
        assert_eq!(d.accept(s).iter().collect::<Vec<_>>(), vec![0]);
        let s = d.run(b"select");
        assert_eq!(d.accept(s).iter().collect::<Vec<_>>(), vec![0, 1]);
        let s = d.run(b"sel");
        assert_eq!(d.accept(s).iter().collect::<Vec<_>>(), vec![1]);
        assert_eq!(d.live(s).iter().collect::<Vec<_>>(), vec![0, 1]);
        let s = d.run(b"1e");
        assert!(d.accept(s).is_empty());
        assert_eq!(d.live(s).iter().collect::<Vec<_>>(), vec![2]);
        assert_eq!(d.run(b"1e!"), DEAD);
        assert_eq!(d.dies_within(d.run(b"1e")), 0);
        let s = LexDfa::build(&[(0, "'[^']*'".into()), (1, "[a-z]+".into())]).unwrap();
        assert_eq!(
            s.dies_within(s.run(b"'ab")),
            u32::MAX,
            "a string body never dies"
        );
    }
}
