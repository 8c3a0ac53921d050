//! The role's SQL language written for the peer engines: llguidance's Lark dialect and
//! XGrammar's EBNF, generated from the same projected grammar (L1 + L2) and lexeme spec
//! the engine compiles, with each identifier terminal replaced by its schema words (L3).
//!
//! What the peer grammars cannot say, and so admit more than GRID does:
//! * precedence and `%nonassoc` are dropped: the ambiguous CFG is the same language except
//!   for chains such as `a < b < c`, which yacc refuses and an Earley parser accepts;
//! * in EBNF (no lexer), skipped text may precede every terminal but is never required, so
//!   `selectname` reads as `select name`, and a free identifier may spell a reserved word
//!   or, as a CTE reference, a relation (Lark keeps both exclusions with `&` and `~`);
//! * unquoted words match case-insensitively in Unicode, where PostgreSQL folds ASCII only,
//!   and bytes ≥ 0x80 in identifiers are any non-ASCII character;
//! * names the statement introduces (the dynamic lexicon: an output alias in ORDER BY, a
//!   derived table's column) are no words at all: a grammar fixed before the output cannot
//!   know them, so the productions of those terminals are dropped (the Spider gold the
//!   benchmark replays uses none);
//! * in EBNF the decline's reason (`CANNOT ANSWER 'reason'`) has no bound on its length
//!   (GRID's is 200 characters); Lark keeps the bound, in the lexeme's own regex.

use std::collections::BTreeSet;
use std::fmt::Write;

use grid_core::grammar::cfg::{Cfg, Sym};
use grid_core::grammar::spec::{IdentCategory, LexiconKind, TermKind};
use grid_core::grammar::{project, Dialect};
use grid_core::lexicon::{quoted, spells_unquoted};
use grid_core::{GridError, Lexicon, Policy};

/// The projected grammar and the words of one role over one schema.
pub struct PeerSource<'a> {
    pub dialect: &'a Dialect,
    pub cfg: Cfg,
    pub lexicon: &'a Lexicon,
}

impl<'a> PeerSource<'a> {
    pub fn new(
        dialect: &'a Dialect,
        policy: &Policy,
        lexicon: &'a Lexicon,
    ) -> Result<Self, GridError> {
        let empty: Vec<LexiconKind> = LexiconKind::ALL
            .iter()
            .copied()
            .filter(|k| lexicon.is_empty(*k))
            .collect();
        let dynamic: std::collections::HashSet<u16> = dialect.terms.dynamic_all.iter().collect();
        let cfg = project(dialect, policy, &empty)?.reduce(&dynamic)?;
        Ok(PeerSource {
            dialect,
            cfg,
            lexicon,
        })
    }

    /// Terminal ids some production uses, ascending.
    fn used_terminals(&self) -> BTreeSet<u16> {
        self.cfg
            .prods
            .iter()
            .flat_map(|p| p.rhs.iter())
            .filter_map(|s| match s {
                Sym::T(t) => Some(*t),
                Sym::N(_) => None,
            })
            .collect()
    }

    fn kind(&self, name: &str) -> Result<&TermKind, GridError> {
        self.dialect
            .spec
            .decl(name)
            .map(|d| &d.kind)
            .ok_or_else(|| GridError::Grammar(format!("terminal {name} has no lexeme")))
    }

    fn reserved(&self, w: &str) -> bool {
        self.dialect.is_reserved(w)
    }

    /// `(unquoted, quoted)` spellings of the words of `kind`: unquoted ones are lower case
    /// and match folded.
    fn spellings(&self, words: impl Iterator<Item = &'a String>) -> (Vec<String>, Vec<String>) {
        let mut unq = Vec::new();
        let mut q = Vec::new();
        for w in words {
            q.push(quoted(w));
            if spells_unquoted(w, &|x| self.reserved(x)) {
                unq.push(w.clone());
            }
        }
        (unq, q)
    }

    /// The grammar in llguidance's Lark dialect.
    pub fn to_lark(&self) -> Result<String, GridError> {
        let cfg = &self.cfg;
        let mut s = String::new();
        let _ = writeln!(s, "start: {}", lark_rule(&cfg.rules[cfg.start as usize]));
        for (ri, name) in cfg.rules.iter().enumerate() {
            let alts: Vec<String> = cfg
                .prods
                .iter()
                .filter(|p| p.lhs as usize == ri)
                .map(|p| {
                    let syms: Vec<String> = p
                        .rhs
                        .iter()
                        .map(|sym| match sym {
                            Sym::T(t) => cfg.tokens[usize::from(*t)].clone(),
                            Sym::N(r) => lark_rule(&cfg.rules[*r as usize]),
                        })
                        .collect();
                    syms.join(" ")
                })
                .collect();
            // An empty alternative is an empty expansion after `|` (or before it).
            let _ = writeln!(s, "{}: {}", lark_rule(name), alts.join("\n    | "));
        }
        s.push('\n');
        let mut need_ident = false;
        let mut need_relation = false;
        for t in self.used_terminals() {
            let name = &cfg.tokens[usize::from(t)];
            let def = match self.kind(name)? {
                TermKind::Keyword { word } => format!("{}i", json_str(word)),
                TermKind::Token { regex } => lark_regex(regex),
                TermKind::Skip { .. } | TermKind::Never { .. } => continue,
                TermKind::Ident(IdentCategory::Free) => {
                    need_ident = true;
                    "(UNQUOTED_IDENT | QUOTED_IDENT) & ~RESERVED_WORD".to_string()
                }
                TermKind::Ident(IdentCategory::BareLabel) => {
                    need_ident = true;
                    "(UNQUOTED_IDENT | QUOTED_IDENT) & ~RESERVED_WORD & ~BARE_LABEL_DENIED"
                        .to_string()
                }
                // Dropped with their productions (see the module documentation).
                TermKind::Ident(IdentCategory::Dynamic(_)) => continue,
                TermKind::Ident(IdentCategory::Cte) => {
                    need_ident = true;
                    need_relation = true;
                    "(UNQUOTED_IDENT | QUOTED_IDENT) & ~RESERVED_WORD & ~RELATION".to_string()
                }
                TermKind::Ident(IdentCategory::Lexicon(k)) => {
                    let (unq, q) = self.spellings(self.lexicon.words(*k));
                    lark_words(&unq, &q)
                }
            };
            let _ = writeln!(s, "{name}: {def}");
        }
        if need_ident {
            let _ = writeln!(
                s,
                "UNQUOTED_IDENT: /[A-Za-z_\\u0080-\\U0010FFFF][A-Za-z0-9_$\\u0080-\\U0010FFFF]*/"
            );
            let _ = writeln!(s, "QUOTED_IDENT: /\"(?:[^\"]|\"\")+\"/");
            let words: Vec<String> = self.dialect.spec.reserved.iter().cloned().collect();
            let _ = writeln!(s, "RESERVED_WORD: {}", lark_words(&words, &[]));
            let words: Vec<String> = self
                .dialect
                .spec
                .bare_label_denied
                .iter()
                .cloned()
                .collect();
            let _ = writeln!(s, "BARE_LABEL_DENIED: {}", lark_words(&words, &[]));
        }
        if need_relation {
            let (unq, q) = self.spellings(self.lexicon.relations.iter());
            let _ = writeln!(s, "RELATION: {}", lark_words(&unq, &q));
        }
        for d in &self.dialect.spec.decls {
            if let TermKind::Skip { regex } = &d.kind {
                let _ = writeln!(s, "{}: {}\n%ignore {}", d.name, lark_regex(regex), d.name);
            }
        }
        Ok(s)
    }

    /// The grammar in XGrammar's EBNF. Every terminal is a rule `t_<name>` that starts with
    /// optional skipped text; `root` allows it at the end too.
    pub fn to_ebnf(&self) -> Result<String, GridError> {
        let cfg = &self.cfg;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "root ::= {} ws",
            ebnf_rule(&cfg.rules[cfg.start as usize])
        );
        for (ri, name) in cfg.rules.iter().enumerate() {
            let alts: Vec<String> = cfg
                .prods
                .iter()
                .filter(|p| p.lhs as usize == ri)
                .map(|p| {
                    if p.rhs.is_empty() {
                        return "\"\"".to_string();
                    }
                    let syms: Vec<String> = p
                        .rhs
                        .iter()
                        .map(|sym| match sym {
                            Sym::T(t) => ebnf_term(&cfg.tokens[usize::from(*t)]),
                            Sym::N(r) => ebnf_rule(&cfg.rules[*r as usize]),
                        })
                        .collect();
                    format!("({})", syms.join(" "))
                })
                .collect();
            let _ = writeln!(s, "{} ::= {}", ebnf_rule(name), alts.join(" | "));
        }
        let mut need_ident = false;
        for t in self.used_terminals() {
            let name = &cfg.tokens[usize::from(t)];
            let body = match self.kind(name)? {
                TermKind::Keyword { word } => ebnf_folded(word),
                TermKind::Token { .. } => {
                    ebnf_token(name).map(str::to_string).ok_or_else(|| {
                        GridError::Grammar(format!("no EBNF form for the lexeme of {name}"))
                    })?
                }
                TermKind::Skip { .. } | TermKind::Never { .. } => continue,
                TermKind::Ident(
                    IdentCategory::Free | IdentCategory::BareLabel | IdentCategory::Cte,
                ) => {
                    need_ident = true;
                    "ident".to_string()
                }
                TermKind::Ident(IdentCategory::Dynamic(_)) => continue,
                TermKind::Ident(IdentCategory::Lexicon(k)) => {
                    let (unq, q) = self.spellings(self.lexicon.words(*k));
                    let alts: Vec<String> = unq
                        .iter()
                        .map(|w| ebnf_folded(w))
                        .chain(q.iter().map(|w| ebnf_str(w)))
                        .collect();
                    format!("({})", alts.join(" | "))
                }
            };
            let _ = writeln!(s, "{} ::= ws {body}", ebnf_term(name));
        }
        if need_ident {
            s.push_str(
                "ident ::= ([A-Za-z_] | [^\\x00-\\x7f]) ([A-Za-z0-9_$] | [^\\x00-\\x7f])* \
                 | \"\\\"\" ([^\"] | \"\\\"\\\"\")+ \"\\\"\"\n",
            );
        }
        s.push_str(
            "ws ::= ([ \\t\\n] | \"--\" [^\\n\\r]* | \"/*\" ([^*/] | \"*\"+ [^*/] | \"/\"+ [^*/])* \"*\"+ \"/\")*\n",
        );
        Ok(s)
    }
}

fn lark_rule(name: &str) -> String {
    format!("r_{}", name.to_ascii_lowercase())
}

fn ebnf_rule(name: &str) -> String {
    format!("r_{name}")
}

fn ebnf_term(name: &str) -> String {
    format!("t_{}", name.to_ascii_lowercase())
}

/// A string literal in the JSON syntax both Lark (llguidance) and this module's callers read.
fn json_str(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// Alternatives of case-insensitive unquoted words and exact quoted ones.
fn lark_words(unquoted: &[String], quoted: &[String]) -> String {
    let alts: Vec<String> = unquoted
        .iter()
        .map(|w| format!("{}i", json_str(w)))
        .chain(quoted.iter().map(|w| json_str(w)))
        .collect();
    if alts.is_empty() {
        // A terminal nothing spells; the projection drops its productions anyway.
        return "/[^\\x00-\\U0010FFFF]/".to_string();
    }
    alts.join(" | ")
}

/// A `.lex` regex as a Lark regex literal: `/` cannot appear inside the slashes.
fn lark_regex(re: &str) -> String {
    format!("/{}/", re.replace('/', "\\x2F"))
}

/// An EBNF string literal.
fn ebnf_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            _ => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A word matched with ASCII letters in either case, as EBNF.
fn ebnf_folded(word: &str) -> String {
    let parts: Vec<String> = word
        .chars()
        .map(|c| {
            if c.is_ascii_alphabetic() {
                format!("[{}{}]", c.to_ascii_lowercase(), c.to_ascii_uppercase())
            } else {
                ebnf_str(&c.to_string())
            }
        })
        .collect();
    format!("({})", parts.join(" "))
}

/// The `TOK` lexemes of `grammars/postgres.lex` in EBNF, written out by hand: EBNF has no
/// regular expressions. A test checks that every `TOK` terminal has one.
fn ebnf_token(name: &str) -> Option<&'static str> {
    Some(match name {
        "LPAREN" => "\"(\"",
        "RPAREN" => "\")\"",
        "COMMA" => "\",\"",
        "DOT" => "\".\"",
        "SEMI" => "\";\"",
        "STAR" => "\"*\"",
        "PLUS" => "\"+\"",
        "MINUS" => "\"-\"",
        "SLASH" => "\"/\"",
        "PERCENT" => "\"%\"",
        "CARET" => "\"^\"",
        "EQ" => "\"=\"",
        "NE" => "(\"<>\" | \"!=\")",
        "LT" => "\"<\"",
        "LE" => "\"<=\"",
        "GT" => "\">\"",
        "GE" => "\">=\"",
        "CONCAT" => "\"||\"",
        "TYPECAST" => "\"::\"",
        "LBRACKET" => "\"[\"",
        "RBRACKET" => "\"]\"",
        "STRING" => "\"'\" ([^'\\\\\\x00-\\x08\\x0b-\\x1f\\x7f] | \"''\")* \"'\"",
        "ESTRING" => "[eE] \"'\" ([^'\\\\\\x00-\\x08\\x0b-\\x1f\\x7f] | \"\\\\\" [^'\\x00-\\x08\\x0b-\\x1f\\x7f] | \"''\")* \"'\"",
        "INTEGER" => "[0-9]+",
        // An integer of 32 bits (PostgreSQL's ICONST), spelled out digit by digit.
        "ICONST" => "\"0\"* ([0-9] [0-9]? [0-9]? [0-9]? [0-9]? [0-9]? [0-9]? [0-9]? [0-9]? | \"1\" [0-9] [0-9] [0-9] [0-9] [0-9] [0-9] [0-9] [0-9] [0-9] | \"20\" [0-9] [0-9] [0-9] [0-9] [0-9] [0-9] [0-9] [0-9] | \"21\" [0-3] [0-9] [0-9] [0-9] [0-9] [0-9] [0-9] [0-9] | \"214\" [0-6] [0-9] [0-9] [0-9] [0-9] [0-9] [0-9] | \"2147\" [0-3] [0-9] [0-9] [0-9] [0-9] [0-9] | \"21474\" [0-7] [0-9] [0-9] [0-9] [0-9] | \"214748\" [0-2] [0-9] [0-9] [0-9] | \"2147483\" [0-5] [0-9] [0-9] | \"21474836\" [0-3] [0-9] | \"214748364\" [0-7])",
        "FLOAT_PREC" => "\"0\"* ([1-9] | [1-4] [0-9] | \"5\" [0-3])",
        // Unbounded: the reason's 200 characters at most are not said (see the module
        // documentation).
        "DECLINE_REASON" => "\"'\" [A-Za-z0-9] [A-Za-z0-9 .,;:!?()/_\\-]* \"'\"",
        "EXTRACT_FIELD" => {
            "(\"century\" | \"day\" | \"decade\" | \"dow\" | \"doy\" | \"epoch\" | \"hour\" | \"isodow\" | \"isoyear\" | \"julian\" | \"microseconds\" | \"millennium\" | \"milliseconds\" | \"minute\" | \"month\" | \"quarter\" | \"second\" | \"timezone\" | \"timezone_hour\" | \"timezone_minute\" | \"week\" | \"year\")"
        }
        "DECIMAL" => {
            "(([0-9]+ \".\" [0-9]* | \".\" [0-9]+) ([eE] [+\\-]? [0-9]+)? | [0-9]+ [eE] [+\\-]? [0-9]+)"
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use grid_core::schema::{Schema, Table};

    fn source_parts() -> (Dialect, Lexicon) {
        let dialect = Dialect::postgres().unwrap();
        let schema = Schema {
            db_id: "shop".into(),
            tables: vec![Table::with_columns("orders", &["id", "Total"])],
        };
        let lexicon =
            Lexicon::from_schema(&schema, &Policy::default(), &|w| dialect.is_reserved(w)).unwrap();
        (dialect, lexicon)
    }

    #[test]
    fn every_token_lexeme_has_an_ebnf_form() {
        let (dialect, _) = source_parts();
        for d in &dialect.spec.decls {
            if let TermKind::Token { .. } = d.kind {
                assert!(ebnf_token(&d.name).is_some(), "{} has no EBNF form", d.name);
            }
        }
    }

    #[test]
    fn peer_grammars_carry_every_rule_and_the_schema_words() {
        let (dialect, lexicon) = source_parts();
        let src = PeerSource::new(&dialect, &Policy::default(), &lexicon).unwrap();
        let lark = src.to_lark().unwrap();
        let ebnf = src.to_ebnf().unwrap();
        for r in &src.cfg.rules {
            assert!(
                lark.contains(&format!("\n{}: ", lark_rule(r))),
                "{r} not in Lark"
            );
            assert!(
                ebnf.contains(&format!("\n{} ::= ", ebnf_rule(r))),
                "{r} not in EBNF"
            );
        }
        assert!(lark.contains("TABLE_NAME: \"orders\"i | \"\\\"orders\\\"\""));
        // `Total` is stored with a capital, so it has only the quoted spelling.
        assert!(lark.contains("\"\\\"Total\\\"\"") && !lark.contains("\"total\"i"));
        assert!(ebnf.contains("[oO] [rR] [dD] [eE] [rR] [sS]"));
        assert!(lark.contains("%ignore WS"));
    }
}
