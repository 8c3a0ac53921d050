//! The lexeme specification (`grammars/postgres.lex`): what each terminal's lexemes are.

use std::collections::BTreeSet;

use crate::error::{GridError, Result};

/// Where an identifier terminal's words come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IdentCategory {
    /// Any identifier that is not a reserved word: aliases, qualifiers, CTE definitions.
    Free,
    /// An alias written without AS (a bare label): [`IdentCategory::Free`] without the
    /// words of [`LexSpec::bare_label_denied`] either.
    BareLabel,
    /// A CTE reference: any identifier that is neither reserved nor a relation of the schema,
    /// so that a name PostgreSQL would resolve to a table can never pass as a CTE.
    Cte,
    /// An L3 allow-list, filled from the schema and the role's grants.
    Lexicon(LexiconKind),
    /// A name the statement itself introduced, where PostgreSQL resolves it: the dynamic
    /// lexicon ([`crate::scope`]), whose words come from the output so far, not the schema.
    Dynamic(DynKind),
}

/// The categories of the dynamic lexicon.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DynKind {
    /// An output column name of the SELECT whose ORDER BY or GROUP BY item it is.
    OutputAlias,
    /// An output column of a derived table, a CTE reference or a relation renamed by a
    /// column alias list, in scope where it is written.
    DerivedColumn,
    /// The qualifier of a column reference where every FROM clause in force is written: a
    /// range variable in scope there.
    Qualifier,
    /// The column after such a qualifier: a column of its range variable.
    QualifiedColumn,
    /// A bare column reference where every FROM clause in force is written: a column of a
    /// range variable in scope there.
    ScopedColumn,
}

impl DynKind {
    pub const ALL: [DynKind; 5] = [
        DynKind::OutputAlias,
        DynKind::DerivedColumn,
        DynKind::Qualifier,
        DynKind::QualifiedColumn,
        DynKind::ScopedColumn,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DynKind::OutputAlias => "output_alias",
            DynKind::DerivedColumn => "derived_column",
            DynKind::Qualifier => "qualifier",
            DynKind::QualifiedColumn => "qualified_column",
            DynKind::ScopedColumn => "scoped_column",
        }
    }
}

/// The L3 allow-lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LexiconKind {
    Table,
    Column,
    Function,
    Type,
    InsertTable,
    UpdateTable,
    DeleteTable,
}

impl LexiconKind {
    pub const ALL: [LexiconKind; 7] = [
        LexiconKind::Table,
        LexiconKind::Column,
        LexiconKind::Function,
        LexiconKind::Type,
        LexiconKind::InsertTable,
        LexiconKind::UpdateTable,
        LexiconKind::DeleteTable,
    ];

    /// Whether the category names relations: its words may also be written `schema.table`.
    pub fn is_relation(self) -> bool {
        matches!(
            self,
            LexiconKind::Table
                | LexiconKind::InsertTable
                | LexiconKind::UpdateTable
                | LexiconKind::DeleteTable
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            LexiconKind::Table => "table",
            LexiconKind::Column => "column",
            LexiconKind::Function => "function",
            LexiconKind::Type => "type",
            LexiconKind::InsertTable => "insert_table",
            LexiconKind::UpdateTable => "update_table",
            LexiconKind::DeleteTable => "delete_table",
        }
    }

    fn parse(s: &str) -> Option<IdentCategory> {
        Some(match s {
            "free" => IdentCategory::Free,
            "bare_label" => IdentCategory::BareLabel,
            "cte" => IdentCategory::Cte,
            _ if DynKind::ALL.iter().any(|k| k.name() == s) => {
                IdentCategory::Dynamic(*DynKind::ALL.iter().find(|k| k.name() == s)?)
            }
            _ => IdentCategory::Lexicon(*LexiconKind::ALL.iter().find(|k| k.name() == s)?),
        })
    }
}

/// How one terminal's lexemes are defined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TermKind {
    /// A keyword, matched case-insensitively.
    Keyword { word: String },
    /// An operator, punctuation mark or literal, by regular expression over bytes.
    Token { regex: String },
    /// An identifier (unquoted and folded, or double-quoted and exact).
    Ident(IdentCategory),
    /// Whitespace or a comment: scanned, never given to the parser.
    Skip { regex: String },
    /// A lexeme PostgreSQL reads as one token where the other terminals would read two:
    /// scanned (so that maximal munch ends lexemes where PostgreSQL does) and taken by no
    /// parser state, so any text containing it is refused.
    Never { regex: String },
}

impl TermKind {
    /// Declared only in the lexeme spec, never a `%token` of the grammar.
    pub fn is_lex_only(&self) -> bool {
        matches!(self, TermKind::Skip { .. } | TermKind::Never { .. })
    }
}

#[derive(Clone, Debug)]
pub struct TermDecl {
    pub name: String,
    pub kind: TermKind,
}

/// The parsed `.lex` file.
#[derive(Clone, Debug, Default)]
pub struct LexSpec {
    /// Words that are never identifiers when unquoted (folded to lower case).
    pub reserved: BTreeSet<String>,
    /// Words that are no bare label either (folded to lower case).
    pub bare_label_denied: BTreeSet<String>,
    /// Terminals of numeric literals: no identifier may start right after one.
    pub numeric: BTreeSet<String>,
    /// `(narrow, wide)` pairs: every lexeme of `narrow` is a lexeme of `wide` (checked on
    /// the automaton when the dialect is built).
    pub within: Vec<(String, String)>,
    pub decls: Vec<TermDecl>,
}

impl LexSpec {
    pub fn parse(src: &str) -> Result<LexSpec> {
        let mut spec = LexSpec::default();
        for (i, raw) in src.lines().enumerate() {
            let line = i + 1;
            let text = raw.trim();
            if text.is_empty() || text.starts_with('#') {
                continue;
            }
            let err = |msg: &str| GridError::LexSpec {
                line,
                msg: msg.to_string(),
            };
            if let Some(words) = text.strip_prefix("%reserved") {
                spec.reserved
                    .extend(words.split_whitespace().map(|w| w.to_ascii_lowercase()));
                continue;
            }
            if let Some(names) = text.strip_prefix("%numeric") {
                spec.numeric
                    .extend(names.split_whitespace().map(str::to_string));
                continue;
            }
            if let Some(names) = text.strip_prefix("%within") {
                match names.split_whitespace().collect::<Vec<_>>()[..] {
                    [narrow, wide] => spec.within.push((narrow.to_string(), wide.to_string())),
                    _ => return Err(err("%within names two terminals: NARROW WIDE")),
                }
                continue;
            }
            if let Some(words) = text.strip_prefix("%bare_label_denied") {
                spec.bare_label_denied
                    .extend(words.split_whitespace().map(|w| w.to_ascii_lowercase()));
                continue;
            }
            let mut parts = text.splitn(3, char::is_whitespace);
            let tag = parts.next().unwrap_or_default();
            let name = parts
                .next()
                .ok_or_else(|| err("missing terminal name"))?
                .to_string();
            let arg = parts.next().map(str::trim).unwrap_or_default();
            if arg.is_empty() {
                return Err(err("missing definition after the terminal name"));
            }
            if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return Err(err("terminal names are letters, digits and underscores"));
            }
            let kind = match tag {
                "KW" => {
                    if !arg.bytes().all(|b| b.is_ascii_alphabetic() || b == b'_') {
                        return Err(err("a keyword is one word of letters and underscores"));
                    }
                    TermKind::Keyword {
                        word: arg.to_ascii_lowercase(),
                    }
                }
                "TOK" => TermKind::Token {
                    regex: arg.to_string(),
                },
                "SKIP" => TermKind::Skip {
                    regex: arg.to_string(),
                },
                "NEVER" => TermKind::Never {
                    regex: arg.to_string(),
                },
                "ID" => TermKind::Ident(
                    LexiconKind::parse(arg).ok_or_else(|| err("unknown identifier category"))?,
                ),
                _ => {
                    return Err(err(
                        "a line starts with %reserved, %bare_label_denied, %numeric, %within, KW, TOK, ID, SKIP or NEVER",
                    ))
                }
            };
            if spec.decls.iter().any(|d| d.name == name) {
                return Err(err("terminal declared twice"));
            }
            spec.decls.push(TermDecl { name, kind });
        }
        Ok(spec)
    }

    pub fn decl(&self, name: &str) -> Option<&TermDecl> {
        self.decls.iter().find(|d| d.name == name)
    }

    pub fn is_reserved(&self, word: &str) -> bool {
        self.reserved.contains(&word.to_ascii_lowercase())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_kind() {
        let s = LexSpec::parse(
            "# c\n%reserved select FROM\nKW SELECT select\nTOK COMMA ,\nID IDENT free\nID COLUMN_NAME column\nSKIP WS [ \\t]+\nNEVER TRAP ,,\n",
        )
        .unwrap();
        assert!(s.is_reserved("From"));
        assert_eq!(s.decls.len(), 6);
        assert_eq!(
            s.decl("TRAP").unwrap().kind,
            TermKind::Never { regex: ",,".into() }
        );
        assert!(s.decl("TRAP").unwrap().kind.is_lex_only());
        assert_eq!(
            s.decl("COLUMN_NAME").unwrap().kind,
            TermKind::Ident(IdentCategory::Lexicon(LexiconKind::Column))
        );
        assert_eq!(
            s.decl("WS").unwrap().kind,
            TermKind::Skip {
                regex: "[ \\t]+".into()
            }
        );
    }

    #[test]
    fn reports_the_bad_line() {
        match LexSpec::parse("KW A a\nID X nowhere\n") {
            Err(GridError::LexSpec { line: 2, .. }) => {}
            other => panic!("{other:?}"),
        }
    }
}
