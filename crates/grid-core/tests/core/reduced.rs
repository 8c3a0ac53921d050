//! Reducedness as a property: for random production subsets of the dialect and random dead
//! terminals, `Cfg::reduce` keeps exactly the useful productions (checked against a naive
//! re-derivation written here), or says the language is empty exactly when it is; and on
//! reduced projections, random walks over the parser's allowed sets never dead-end.

use crate::common;

use std::collections::HashSet;

use common::{dialect, Rng};
use grid_core::grammar::cfg::Cfg;
use grid_core::grammar::table::LrTable;
use grid_core::parser::Stacks;
use grid_core::GridError;

type NamedProd = (String, Vec<String>);

fn named(g: &Cfg) -> HashSet<NamedProd> {
    g.prods
        .iter()
        .map(|p| {
            (
                g.rules[p.lhs as usize].clone(),
                p.rhs.iter().map(|s| g.sym_name(*s).to_string()).collect(),
            )
        })
        .collect()
}

/// The useful productions by the textbook definition, computed naively by name: a symbol is
/// generating if some production of it has only generating symbols and live terminals; a
/// production is useful if its symbols are all generating and its left side is reachable
/// from the start through useful productions.
fn naive_useful(g: &Cfg, dead: &HashSet<u16>) -> Option<HashSet<NamedProd>> {
    let prods = named(g);
    let terminals: HashSet<&str> = g
        .tokens
        .iter()
        .enumerate()
        .filter(|(i, _)| !dead.contains(&(*i as u16)))
        .map(|(_, t)| t.as_str())
        .collect();
    let mut gen: HashSet<String> = HashSet::new();
    loop {
        let before = gen.len();
        for (lhs, rhs) in &prods {
            if rhs
                .iter()
                .all(|s| terminals.contains(s.as_str()) || gen.contains(s))
            {
                gen.insert(lhs.clone());
            }
        }
        if gen.len() == before {
            break;
        }
    }
    let start = g.rules[g.start as usize].clone();
    if !gen.contains(&start) {
        return None;
    }
    let usable: Vec<&NamedProd> = prods
        .iter()
        .filter(|(_, rhs)| {
            rhs.iter()
                .all(|s| terminals.contains(s.as_str()) || gen.contains(s))
        })
        .collect();
    let mut reach: HashSet<String> = [start].into_iter().collect();
    loop {
        let before = reach.len();
        for (lhs, rhs) in &usable {
            if reach.contains(lhs) {
                for s in rhs {
                    if gen.contains(s) {
                        reach.insert(s.clone());
                    }
                }
            }
        }
        if reach.len() == before {
            break;
        }
    }
    Some(
        usable
            .into_iter()
            .filter(|(lhs, _)| reach.contains(lhs))
            .cloned()
            .collect(),
    )
}

#[test]
fn reduce_keeps_exactly_the_useful_productions() {
    let d = dialect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut empty, mut nonempty) = (0, 0);
    for case in 0..300 {
        // Drop between 0% and ~30% of productions, and sometimes a few terminals.
        let rate = rng.below(30);
        let sub = d.cfg.retain_prods(|_, _| rng.below(100) >= rate);
        let mut dead = HashSet::new();
        for _ in 0..rng.below(4) {
            dead.insert(rng.below(d.cfg.tokens.len()) as u16);
        }
        let expected = naive_useful(&sub, &dead);
        match (sub.reduce(&dead), expected) {
            (Err(GridError::EmptyLanguage(_)), None) => empty += 1,
            (Ok(r), Some(exp)) => {
                nonempty += 1;
                assert_eq!(
                    r.tokens, d.cfg.tokens,
                    "case {case}: terminal numbering moved"
                );
                assert_eq!(
                    named(&r),
                    exp,
                    "case {case}: reduce disagrees with the naive derivation"
                );
                assert!(
                    r.useless_symbols().unwrap().is_empty(),
                    "case {case}: reduce is not idempotent"
                );
            }
            (got, exp) => panic!(
                "case {case}: reduce gave {:?}, naive says non-empty = {}",
                got.map(|_| ()),
                exp.is_some()
            ),
        }
    }
    assert!(
        empty > 10 && nonempty > 10,
        "{empty} empty, {nonempty} non-empty: widen the sampling"
    );
}

/// On a reduced grammar, a parser stack that exists always has an allowed terminal, and
/// following allowed terminals can reach ACCEPT.
#[test]
fn random_walks_never_dead_end() {
    let d = dialect();
    let mut rng = Rng(42);
    let mut grammars = vec![d.cfg.clone()];
    while grammars.len() < 4 {
        let sub = d.cfg.retain_prods(|_, _| rng.below(100) >= 8);
        if let Ok(r) = sub.reduce(&HashSet::new()) {
            grammars.push(r);
        }
    }
    for g in &grammars {
        let table = LrTable::build(g).expect("a reduced projection builds");
        let mut stacks = Stacks::default();
        let mut accepted = 0;
        for _ in 0..300 {
            let mut node = stacks.root(&table);
            for step in 0..400 {
                let a = stacks.allowed(&table, node);
                assert!(!a.is_empty(), "dead end after {step} terminals");
                if a.contains(table.eof) && (step > 30 || rng.below(3) == 0) {
                    accepted += 1;
                    break;
                }
                let choices: Vec<u16> = a.iter().filter(|&t| t != table.eof).collect();
                if choices.is_empty() {
                    accepted += 1;
                    break;
                }
                let t = choices[rng.below(choices.len())];
                node = stacks
                    .shift(&table, node, t)
                    .expect("an allowed terminal shifts");
            }
        }
        // A walk that has not ended within its budget has not dead-ended either; what matters
        // is that no stack ever lacked a move and that ACCEPT is reachable.
        eprintln!("{accepted} of 300 walks reached ACCEPT");
        assert!(accepted > 0);
    }
}
