//! L2: a role's projection of the dialect. Keep the productions the policy allows, drop
//! terminals whose allow-list is empty, then remove useless symbols and check the language
//! is not empty (the decline, which every projection keeps, does not count: a language of
//! declines only is empty). Terminal ids are the dialect's.

use std::collections::HashSet;

use super::cfg::{Cfg, Sym};
use super::dialect::Dialect;
use super::spec::LexiconKind;
use crate::error::{GridError, Result};
use crate::policy::{Policy, Verb};

/// The reduced projected grammar.
pub fn project(dialect: &Dialect, policy: &Policy, empty_lexicons: &[LexiconKind]) -> Result<Cfg> {
    let cfg = &dialect.cfg;
    let statement = cfg
        .rule_id("statement")
        .ok_or_else(|| GridError::Grammar("the grammar has no `statement` rule".into()))?;
    let banned: HashSet<&str> = policy
        .ban
        .iter()
        .flat_map(|b| b.markers().iter().copied())
        .collect();
    let verb_rules: Vec<(Verb, Option<u32>)> = Verb::ALL
        .iter()
        .map(|v| (*v, cfg.rule_id(v.statement_rule())))
        .collect();
    let kept = cfg.retain_prods(|g, p| {
        if p.lhs == statement {
            for (v, r) in &verb_rules {
                if let Some(r) = r {
                    if p.rhs.contains(&Sym::N(*r)) && !policy.allows(*v) {
                        return false;
                    }
                }
            }
        }
        !p.rhs.iter().any(|s| {
            let n = g.sym_name(*s);
            banned.contains(n.strip_suffix("_w").unwrap_or(n))
        })
    });
    let mut dead = HashSet::new();
    for k in empty_lexicons {
        if let Some(ts) = dialect.terms.lexicon.get(k) {
            dead.extend(ts.iter());
        }
    }
    let reduced = kept.reduce(&dead)?;
    // The decline (`decline_statement`) names no verb and is always kept, so it alone
    // would keep a language alive: a role that may write no statement has none, as before.
    if Verb::ALL
        .iter()
        .all(|v| reduced.rule_id(v.statement_rule()).is_none())
    {
        return Err(GridError::EmptyLanguage(
            "no statement is left but the decline".into(),
        ));
    }
    Ok(reduced)
}
