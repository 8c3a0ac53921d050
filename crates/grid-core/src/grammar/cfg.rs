//! The context-free grammar as data: load from grmtools yacc, subset, reduce, print back.
//!
//! Terminal ids are positions in [`Cfg::tokens`], which is the frozen `%token` order of L1;
//! every projection keeps the whole token list, so ids never move. Rule ids are positions in
//! [`Cfg::rules`] and are renumbered by [`Cfg::reduce`].

use std::collections::HashSet;

use cfgrammar::yacc::ast::{ASTWithValidityInfo, Symbol as AstSymbol};
use cfgrammar::yacc::{AssocKind, YaccKind, YaccOriginalActionKind};

use crate::error::{GridError, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Sym {
    /// A terminal, by frozen id.
    T(u16),
    /// A nonterminal, by rule id.
    N(u32),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prod {
    pub lhs: u32,
    pub rhs: Vec<Sym>,
    /// The `%prec` terminal, if any.
    pub prec: Option<u16>,
}

/// A grammar in the shape grmtools reads, minus semantic actions.
#[derive(Clone, Debug)]
pub struct Cfg {
    /// Terminal names in frozen order.
    pub tokens: Vec<String>,
    /// Precedence declarations, lowest first.
    pub prec_levels: Vec<(AssocKind, Vec<u16>)>,
    pub rules: Vec<String>,
    pub start: u32,
    pub prods: Vec<Prod>,
}

impl Cfg {
    /// Reads plain grmtools yacc (already template-expanded). Every terminal must be declared
    /// in a `%token` line so that the numbering is the header's order.
    pub fn from_yacc(src: &str) -> Result<Cfg> {
        let v = ASTWithValidityInfo::new(YaccKind::Original(YaccOriginalActionKind::NoAction), src);
        if !v.is_valid() {
            let msgs: Vec<String> = v.errors().iter().map(|e| e.to_string()).collect();
            return Err(GridError::Grammar(msgs.join("; ")));
        }
        let ast = v.ast();
        for (i, t) in ast.tokens.iter().enumerate() {
            if !ast.token_directives.contains(&i) {
                return Err(GridError::Grammar(format!(
                    "terminal {t} is used but not declared in %token"
                )));
            }
        }
        let tokens: Vec<String> = ast.tokens.iter().cloned().collect();
        if tokens.len() + 1 > crate::termset::TermSet::CAPACITY {
            return Err(GridError::Grammar(format!(
                "{} terminals is more than the engine supports",
                tokens.len()
            )));
        }
        let tok_id = |n: &str| ast.tokens.get_index_of(n).map(|i| i as u16);
        let mut levels: Vec<(u64, AssocKind, Vec<u16>)> = Vec::new();
        for (name, (prec, _)) in &ast.precs {
            let id = tok_id(name)
                .ok_or_else(|| GridError::Grammar(format!("precedence on unknown {name}")))?;
            match levels.iter_mut().find(|l| l.0 == prec.level) {
                Some(l) => l.2.push(id),
                None => levels.push((prec.level, prec.kind, vec![id])),
            }
        }
        levels.sort_by_key(|l| l.0);
        for l in &mut levels {
            l.2.sort_unstable();
        }
        let rules: Vec<String> = ast.rules.keys().cloned().collect();
        let start_name = ast
            .start
            .as_ref()
            .map(|s| s.0.clone())
            .ok_or_else(|| GridError::Grammar("no %start".into()))?;
        let start =
            ast.rules
                .get_index_of(&start_name)
                .ok_or_else(|| GridError::Grammar("unknown start rule".into()))? as u32;
        let mut prods = Vec::new();
        for (ri, rule) in ast.rules.values().enumerate() {
            for &pi in &rule.pidxs {
                let p = &ast.prods[pi];
                let rhs = p
                    .symbols
                    .iter()
                    .map(|s| match s {
                        AstSymbol::Token(n, _) => tok_id(n).map(Sym::T),
                        AstSymbol::Rule(n, _) => {
                            ast.rules.get_index_of(n).map(|i| Sym::N(i as u32))
                        }
                    })
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| {
                        GridError::Grammar(format!("rule {}: unknown symbol", rules[ri]))
                    })?;
                let prec =
                    match &p.precedence {
                        Some(n) => Some(tok_id(n).ok_or_else(|| {
                            GridError::Grammar(format!("%prec {n} is not a token"))
                        })?),
                        None => None,
                    };
                prods.push(Prod {
                    lhs: ri as u32,
                    rhs,
                    prec,
                });
            }
        }
        Ok(Cfg {
            tokens,
            prec_levels: levels.into_iter().map(|l| (l.1, l.2)).collect(),
            rules,
            start,
            prods,
        })
    }

    pub fn token_id(&self, name: &str) -> Option<u16> {
        self.tokens.iter().position(|t| t == name).map(|i| i as u16)
    }

    pub fn rule_id(&self, name: &str) -> Option<u32> {
        self.rules.iter().position(|r| r == name).map(|i| i as u32)
    }

    pub fn sym_name(&self, s: Sym) -> &str {
        match s {
            Sym::T(t) => &self.tokens[usize::from(t)],
            Sym::N(r) => &self.rules[r as usize],
        }
    }

    /// Keeps the productions `keep` says yes to; rule ids are unchanged (reduce afterwards).
    pub fn retain_prods(&self, mut keep: impl FnMut(&Cfg, &Prod) -> bool) -> Cfg {
        let prods = self
            .prods
            .iter()
            .filter(|p| keep(self, p))
            .cloned()
            .collect();
        Cfg {
            prods,
            ..self.clone()
        }
    }

    /// Removes useless symbols: productions that use a `dead` terminal or a non-generating
    /// rule, then rules unreachable from the start. Errors when the language is empty.
    pub fn reduce(&self, dead: &HashSet<u16>) -> Result<Cfg> {
        let n = self.rules.len();
        let mut generating = vec![false; n];
        let usable = |s: &Sym, generating: &[bool]| match s {
            Sym::T(t) => !dead.contains(t),
            Sym::N(r) => generating[*r as usize],
        };
        loop {
            let mut changed = false;
            for p in &self.prods {
                if !generating[p.lhs as usize] && p.rhs.iter().all(|s| usable(s, &generating)) {
                    generating[p.lhs as usize] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        if !generating[self.start as usize] {
            return Err(GridError::EmptyLanguage(format!(
                "start rule {} derives no sentence",
                self.rules[self.start as usize]
            )));
        }
        let live: Vec<&Prod> = self
            .prods
            .iter()
            .filter(|p| p.rhs.iter().all(|s| usable(s, &generating)))
            .collect();
        let mut reachable = vec![false; n];
        reachable[self.start as usize] = true;
        let mut work = vec![self.start];
        while let Some(r) = work.pop() {
            for p in live.iter().filter(|p| p.lhs == r) {
                for s in &p.rhs {
                    if let Sym::N(x) = *s {
                        if !reachable[x as usize] {
                            reachable[x as usize] = true;
                            work.push(x);
                        }
                    }
                }
            }
        }
        let mut new_id = vec![u32::MAX; n];
        let mut rules = Vec::new();
        for i in 0..n {
            if reachable[i] && generating[i] {
                new_id[i] = rules.len() as u32;
                rules.push(self.rules[i].clone());
            }
        }
        let prods = live
            .into_iter()
            .filter(|p| reachable[p.lhs as usize])
            .map(|p| Prod {
                lhs: new_id[p.lhs as usize],
                rhs: p
                    .rhs
                    .iter()
                    .map(|s| match *s {
                        Sym::N(r) => Sym::N(new_id[r as usize]),
                        t => t,
                    })
                    .collect(),
                prec: p.prec,
            })
            .collect();
        Ok(Cfg {
            rules,
            start: new_id[self.start as usize],
            prods,
            ..self.clone()
        })
    }

    /// Names of the rules and productions [`Cfg::reduce`] would remove, for error messages.
    pub fn useless_symbols(&self) -> Result<Vec<String>> {
        let reduced = self.reduce(&HashSet::new())?;
        let mut out: Vec<String> = self
            .rules
            .iter()
            .filter(|r| !reduced.rules.contains(r))
            .map(|r| format!("rule {r}"))
            .collect();
        if reduced.prods.len() != self.prods.len() && out.is_empty() {
            out.push(format!(
                "{} productions",
                self.prods.len() - reduced.prods.len()
            ));
        }
        Ok(out)
    }

    /// Prints grmtools yacc that reads back to this grammar with the same terminal ids.
    pub fn to_yacc(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!("%start {}\n", self.rules[self.start as usize]));
        for chunk in self.tokens.chunks(16) {
            s.push_str("%token ");
            s.push_str(&chunk.join(" "));
            s.push('\n');
        }
        for (assoc, toks) in &self.prec_levels {
            let kw = match assoc {
                AssocKind::Left => "%left",
                AssocKind::Right => "%right",
                AssocKind::Nonassoc => "%nonassoc",
            };
            let names: Vec<&str> = toks
                .iter()
                .map(|&t| self.tokens[usize::from(t)].as_str())
                .collect();
            s.push_str(&format!("{kw} {}\n", names.join(" ")));
        }
        s.push_str("%%\n");
        for (ri, name) in self.rules.iter().enumerate() {
            s.push_str(name);
            s.push(':');
            let mut first = true;
            for p in self.prods.iter().filter(|p| p.lhs as usize == ri) {
                if !first {
                    s.push_str("\n    |");
                }
                first = false;
                if p.rhs.is_empty() {
                    s.push_str(" %empty");
                }
                for sym in &p.rhs {
                    s.push(' ');
                    s.push_str(self.sym_name(*sym));
                }
                if let Some(t) = p.prec {
                    s.push_str(&format!(" %prec {}", self.tokens[usize::from(t)]));
                }
            }
            s.push_str(";\n");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: &str = "%start s\n%token A B C D\n%left B\n%%\ns: A x | A y ;\nx: B | %empty ;\ny: C y ;\nz: D ;\n";

    #[test]
    fn round_trips_through_yacc() {
        let g = Cfg::from_yacc(G).unwrap();
        let again = Cfg::from_yacc(&g.to_yacc()).unwrap();
        assert_eq!(g.tokens, again.tokens);
        assert_eq!(g.prods, again.prods);
        assert_eq!(g.prec_levels.len(), 1);
    }

    #[test]
    fn reduce_removes_useless_symbols() {
        let g = Cfg::from_yacc(G).unwrap();
        let r = g.reduce(&HashSet::new()).unwrap();
        // y never terminates and z is unreachable.
        assert_eq!(r.rules, vec!["s".to_string(), "x".to_string()]);
        assert_eq!(r.prods.len(), 3);
        assert_eq!(r.tokens, g.tokens, "terminal numbering must not move");
        let dead: HashSet<u16> = [g.token_id("A").unwrap()].into_iter().collect();
        assert!(matches!(g.reduce(&dead), Err(GridError::EmptyLanguage(_))));
    }
}
