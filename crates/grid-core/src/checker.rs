//! The semantic checker: column-level privileges, which no left-to-right mask can enforce
//! (the SELECT list comes before FROM), checked after the parse.
//!
//! The statement is parsed with `sqlparser` (PostgreSQL dialect) and walked scope by scope:
//! FROM items (tables, aliases, derived tables, CTEs) bind names; every column reference,
//! qualified or not, is bound to the FROM item that provides it — in the innermost scope
//! that has it, as PostgreSQL binds correlated references — and checked against the role's
//! privilege for the verb in which it is used. The checker fails closed: a reference it
//! cannot bind, and a construct it does not know how to bind, are violations.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::ControlFlow;

use sqlparser::ast::{
    AssignmentTarget, Delete, Distinct, Expr, FromTable, GroupByExpr, Ident, Insert,
    JoinConstraint, JoinOperator, ObjectName, OnConflictAction, OnInsert, OrderBy, OrderByKind,
    Query, Select, SelectItem, SelectItemQualifiedWildcardKind, SetExpr, Statement, TableAlias,
    TableFactor, TableObject, TableWithJoins, Update, UpdateTableFromKind, Visit, Visitor,
};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer, TokenizerError, Whitespace};

use crate::catalog::{CatalogSnapshot, Relation};
use crate::policy::Verb;

/// Longest SQL fragment quoted in a violation.
const FRAGMENT_MAX: usize = 80;

/// One reason why the statement may not run as the role.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub kind: ViolationKind,
    /// The role the statement was checked for.
    pub role: String,
    /// The part of the statement at fault, as sqlparser prints it (shortened).
    pub fragment: String,
    /// What the role's schema offers instead, for a column that does not bind: the
    /// columns of the qualifier's relation, the relations in scope, and the relations
    /// that have a column of that name. A model told only "does not exist" repeats the
    /// mistake; told where the column is, it can join the right table. Drawn from the
    /// snapshot, i.e. only what the role's prompt already shows.
    pub hint: Option<String>,
}

/// Most names a hint lists before it elides the rest.
const HINT_NAMES_MAX: usize = 16;

/// Most characters of a name the model invented that a message quotes: a 60-character
/// invented qualifier quoted back whole is noise to the asker, and to the model a name to
/// copy again.
const INVENTED_MAX: usize = 24;

/// Most names of the role's snapshot a message offers instead of an invented one.
const CLOSEST_MAX: usize = 3;

/// How alike two names must be ([`likeness`]) to be offered instead of the other.
const CLOSEST_MIN: f64 = 0.5;

/// `name` as a message quotes a name the model invented: its first [`INVENTED_MAX`]
/// characters, and `...` when it was longer.
fn invented(name: &str) -> String {
    match name.char_indices().nth(INVENTED_MAX) {
        None => name.to_string(),
        Some((end, _)) => format!("{}...", &name[..end]),
    }
}

/// `fragment` with every invented name in `names` longer than [`invented`] keeps written
/// as [`invented`] writes it.
fn without_invented(fragment: &str, names: &[&str]) -> String {
    let mut out = fragment.to_string();
    for n in names {
        let short = invented(n);
        if short.len() < n.len() {
            out = out.replace(n, &short);
        }
    }
    out
}

/// How alike two names are, in `[0, 1]`: the Dice coefficient of their character bigrams,
/// case folded (`department` and `departments` 0.95, `employee_name_avg` and `employees`
/// 0.58, `nom` and `note` 0.4).
fn likeness(a: &str, b: &str) -> f64 {
    fn bigrams(s: &str) -> Vec<(char, char)> {
        let cs: Vec<char> = s.to_lowercase().chars().collect();
        let mut v: Vec<(char, char)> = cs.windows(2).map(|w| (w[0], w[1])).collect();
        v.sort_unstable();
        v
    }
    let (x, y) = (bigrams(a), bigrams(b));
    if x.is_empty() || y.is_empty() {
        return if a.eq_ignore_ascii_case(b) { 1.0 } else { 0.0 };
    }
    // Both sorted: the size of the multiset intersection.
    let (mut i, mut j, mut common) = (0, 0, 0usize);
    while i < x.len() && j < y.len() {
        match x[i].cmp(&y[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                common += 1;
                i += 1;
                j += 1;
            }
        }
    }
    2.0 * common as f64 / (x.len() + y.len()) as f64
}

/// The [`CLOSEST_MAX`] of `candidates` (each as shown, and the name compared) whose names
/// are most like `name` (at least [`CLOSEST_MIN`]), most alike first (ties: in the
/// candidates' order), as shown.
fn closest(name: &str, candidates: impl Iterator<Item = (String, String)>) -> Vec<String> {
    let mut scored: Vec<(f64, usize, String)> = candidates
        .enumerate()
        .map(|(i, (shown, compared))| (likeness(name, &compared), i, shown))
        .filter(|(l, ..)| *l >= CLOSEST_MIN)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut out: Vec<String> = Vec::new();
    for (.., shown) in scored {
        if out.len() == CLOSEST_MAX {
            break;
        }
        if !out.contains(&shown) {
            out.push(shown);
        }
    }
    out
}

/// `names` joined by commas, at most [`HINT_NAMES_MAX`] of them.
fn name_list<S: AsRef<str>>(names: &[S]) -> String {
    let mut out: Vec<&str> = names
        .iter()
        .take(HINT_NAMES_MAX)
        .map(AsRef::as_ref)
        .collect();
    if names.len() > HINT_NAMES_MAX {
        out.push("...");
    }
    out.join(", ")
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ViolationKind {
    /// The text is not one PostgreSQL statement.
    Unparsable { message: String },
    /// More or fewer than one statement.
    StatementCount { count: usize },
    /// A statement kind other than SELECT, INSERT, UPDATE, DELETE.
    UnsupportedStatement { what: String },
    /// A construct whose column references the checker cannot bind.
    Unsupported { what: String },
    /// A relation name, or a qualifier, that names nothing the role may see.
    UnknownRelation { name: String },
    /// A column that no FROM item in scope provides.
    UnknownColumn {
        qualifier: Option<String>,
        column: String,
    },
    /// An unqualified column that several FROM items of one scope provide.
    AmbiguousColumn { column: String, tables: Vec<String> },
    /// The role lacks `privilege` on the column.
    ColumnPrivilege {
        table: String,
        column: String,
        privilege: Verb,
    },
    /// The role lacks `privilege` on the relation as a whole.
    TablePrivilege { table: String, privilege: Verb },
    /// `*` on a relation the role may not read as a whole: it would reach columns the role
    /// cannot see.
    Wildcard { table: String },
}

fn adjective(v: Verb) -> &'static str {
    match v {
        Verb::Select => "readable",
        Verb::Insert => "insertable",
        Verb::Update => "updatable",
        Verb::Delete => "deletable",
    }
}

impl fmt::Display for Violation {
    /// On one line, escaped ([`crate::message::one_line`]): a violation quotes names and
    /// parts of a statement the model wrote, into refusals and repair prompts.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = String::new();
        self.write_raw(&mut text)?;
        f.write_str(&crate::message::one_line(&text))
    }
}

impl Violation {
    fn write_raw(&self, f: &mut impl fmt::Write) -> fmt::Result {
        let role = &self.role;
        match &self.kind {
            ViolationKind::Unparsable { message } => {
                write!(f, "the statement does not parse: {message}")?
            }
            ViolationKind::StatementCount { count } => {
                write!(f, "expected exactly one statement, found {count}")?
            }
            ViolationKind::UnsupportedStatement { what } => write!(
                f,
                "{what} statements are not allowed; write one SELECT, INSERT, UPDATE or DELETE"
            )?,
            ViolationKind::Unsupported { what } => {
                write!(f, "{what} cannot be checked and is not allowed")?
            }
            ViolationKind::UnknownRelation { name } => write!(
                f,
                "relation {} does not exist or is not visible to role {role}",
                invented(name)
            )?,
            ViolationKind::UnknownColumn {
                qualifier: Some(q),
                column,
            } => write!(
                f,
                "column {}.{} does not exist or is not visible to role {role}",
                invented(q),
                invented(column)
            )?,
            ViolationKind::UnknownColumn {
                qualifier: None,
                column,
            } => write!(
                f,
                "column {} is not a column of any table in scope visible to role {role}",
                invented(column)
            )?,
            ViolationKind::AmbiguousColumn { column, tables } => write!(
                f,
                "column reference {column} is ambiguous (in {}); qualify it",
                tables.join(", ")
            )?,
            ViolationKind::ColumnPrivilege {
                table,
                column,
                privilege,
            } => write!(
                f,
                "column {table}.{column} is not {} by role {role}",
                adjective(*privilege)
            )?,
            ViolationKind::TablePrivilege { table, privilege } => write!(
                f,
                "table {table} is not {} by role {role}",
                adjective(*privilege)
            )?,
            ViolationKind::Wildcard { table } => write!(
                f,
                "{table}.* is not allowed: role {role} may not read every column of {table}; \
                 name the columns"
            )?,
        }
        if !self.fragment.is_empty() {
            let names: Vec<&str> = match &self.kind {
                ViolationKind::UnknownRelation { name } => vec![name],
                ViolationKind::UnknownColumn { qualifier, column } => qualifier
                    .iter()
                    .map(String::as_str)
                    .chain([column.as_str()])
                    .collect(),
                _ => Vec::new(),
            };
            write!(f, " (at `{}`)", without_invented(&self.fragment, &names))?;
        }
        if let Some(h) = &self.hint {
            write!(f, "; {h}")?;
        }
        Ok(())
    }
}

/// Checks `sql` as `snapshot.role` would run it. Empty means allowed.
pub fn check(sql: &str, snapshot: &CatalogSnapshot) -> Vec<Violation> {
    Checker::new(snapshot).check(sql)
}

/// Whether the checker can read `sql` at all: one statement its parser takes. A statement
/// it cannot read it refuses ([`ViolationKind::Unparsable`],
/// [`ViolationKind::StatementCount`]), so every statement of the language must pass this
/// (the differential test against PostgreSQL's parser checks it).
pub fn parses(sql: &str) -> Result<(), ViolationKind> {
    parse_one(sql).map(|_| ())
}

/// The one statement of `sql`, as the checker's parser reads it (what [`parses`] tells).
pub fn parse_one(sql: &str) -> Result<Statement, ViolationKind> {
    let parse = |tokens: Vec<TokenWithSpan>| {
        Parser::new(&PostgreSqlDialect {})
            .with_tokens_with_locations(tokens)
            .parse_statements()
    };
    let parsed = tokens(sql).map_err(ParserError::from).and_then(|tokens| {
        parse(tokens.clone()).or_else(|e| {
            // The error quotes the word as written: `conflict` in any case.
            e.to_string()
                .to_ascii_lowercase()
                .contains("found: conflict")
                .then(|| insert_source_closed(tokens))
                .flatten()
                .and_then(|tokens| parse(tokens).ok())
                .ok_or(e)
        })
    });
    match parsed {
        Err(e) => Err(ViolationKind::Unparsable {
            message: e.to_string(),
        }),
        Ok(mut stmts) if stmts.len() == 1 => Ok(stmts.remove(0)),
        Ok(stmts) => Err(ViolationKind::StatementCount { count: stmts.len() }),
    }
}

/// The tokens of `sql` as sqlparser's tokenizer reads them (with their places in `sql`),
/// PostgreSQL's postfix `ISNULL` written `IS NULL`.
///
/// sqlparser (0.63) reads the postfix `NOTNULL` (its PostgreSQL dialect's
/// `supports_notnull_operator`) but has no keyword `ISNULL`: it reads `a isnull` as a column
/// and its alias, and fails on it in a WHERE. PostgreSQL's lexer makes an unquoted `isnull`
/// the keyword ISNULL wherever it stands (a type/function-name keyword), which its grammar
/// takes as the operator `a_expr ISNULL` (the same test as `a IS NULL`) or as a name: after
/// `.` (a column or function), after AS or `::` (a label or a type), before `(` (a
/// function). So each unquoted word `isnull` in none of those places becomes the two
/// keywords `IS NULL`, both with the word's span (an error still points into `sql`, and a
/// violation quotes the expression as sqlparser prints it: `a IS NULL`). A name in a rarer
/// place (a typed literal `isnull '...'`, a named argument `isnull => 1`) is rewritten too,
/// and the statement then fails to parse: refused, never read otherwise. A string, a quoted
/// name and a comment are no unquoted word, so nothing in them is touched.
fn tokens(sql: &str) -> Result<Vec<TokenWithSpan>, TokenizerError> {
    let tokens = typed_literals_unquoted(
        Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize_with_location()?,
    );
    let is_isnull = |t: &Token| match t {
        Token::Word(w) => w.quote_style.is_none() && w.value.eq_ignore_ascii_case("isnull"),
        _ => false,
    };
    if !tokens.iter().any(|t| is_isnull(&t.token)) {
        return Ok(tokens);
    }
    let significant = |t: &&TokenWithSpan| !matches!(t.token, Token::Whitespace(_));
    let a_name = |i: usize| {
        let before = tokens[..i].iter().rev().find(significant).map(|t| &t.token);
        let after = tokens[i + 1..].iter().find(significant).map(|t| &t.token);
        // A quoted word has no keyword: `"as"` is a name.
        let as_keyword = matches!(before, Some(Token::Word(w)) if w.keyword == Keyword::AS);
        as_keyword
            || matches!(before, Some(Token::Period | Token::DoubleColon))
            || matches!(after, Some(Token::LParen))
    };
    let mut out = Vec::with_capacity(tokens.len() + 2);
    for (i, t) in tokens.iter().enumerate() {
        if is_isnull(&t.token) && !a_name(i) {
            out.extend([
                TokenWithSpan::new(Token::make_keyword("IS"), t.span),
                TokenWithSpan::new(Token::Whitespace(Whitespace::Space), t.span),
                TokenWithSpan::new(Token::make_keyword("NULL"), t.span),
            ]);
        } else {
            out.push(t.clone());
        }
    }
    Ok(out)
}

/// `tokens` with the type name of a typed literal written unquoted where quoting changes
/// nothing: PostgreSQL reads `"int2" 'a'` (a quoted name, then a string) as the typed
/// literal `int2 'a'`, which sqlparser (0.63) reads, but takes a quoted word before a
/// string for a column and fails. A name is unquoted only when it is what PostgreSQL folds
/// an unquoted word to (lower case ASCII letters, digits, `_` and `$`, not beginning with a
/// digit or `$`): one that is not, or one that is then a reserved word, stays as it was
/// and the statement is refused as before. The type may change (`"char"` is not `char`);
/// the checker reads no type, only the names a statement binds, and a type name binds
/// none of its relations or columns.
fn typed_literals_unquoted(mut tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let folds_to_itself = |v: &str| {
        v.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && v.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '$')
    };
    for i in 0..tokens.len() {
        let Token::Word(w) = &tokens[i].token else {
            continue;
        };
        if w.quote_style != Some('"') || !folds_to_itself(&w.value) {
            continue;
        }
        let next = tokens[i + 1..]
            .iter()
            .find(|t| !matches!(t.token, Token::Whitespace(_)));
        if let Some(TokenWithSpan {
            token: Token::SingleQuotedString(_),
            ..
        }) = next
        {
            let span = tokens[i].span;
            let word = Token::make_word(&w.value, None);
            tokens[i] = TokenWithSpan::new(word, span);
        }
    }
    tokens
}

/// sqlparser (0.63) cannot end an INSERT's source at its target list before `ON CONFLICT`
/// (`INSERT INTO t (a) SELECT 1 ON CONFLICT DO NOTHING`, `... UNION SELECT x.* ON
/// CONFLICT ...`), which PostgreSQL reads and users write. `tokens` (a statement's, from
/// [`tokens`]) with `WHERE TRUE` before its `ON CONFLICT` (outside parentheses), which closes
/// that source as PostgreSQL does and names nothing, so the checker sees the same
/// references; `None` when they are no such statement. Only tried when the statement itself
/// does not parse, at that `CONFLICT`: where a WHERE may not stand, the retry fails too.
fn insert_source_closed(mut tokens: Vec<TokenWithSpan>) -> Option<Vec<TokenWithSpan>> {
    let is = |t: &Token, k: Keyword| matches!(t, Token::Word(w) if w.keyword == k);
    let first = tokens
        .iter()
        .find(|t| !matches!(t.token, Token::Whitespace(_)))?;
    if !is(&first.token, Keyword::INSERT) {
        return None;
    }
    let mut depth = 0i32;
    let mut at = None;
    let words: Vec<usize> = (0..tokens.len())
        .filter(|&i| !matches!(tokens[i].token, Token::Whitespace(_)))
        .collect();
    for (k, &i) in words.iter().enumerate() {
        match &tokens[i].token {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            t if depth == 0
                && is(t, Keyword::ON)
                && words
                    .get(k + 1)
                    .is_some_and(|&j| is(&tokens[j].token, Keyword::CONFLICT)) =>
            {
                at = Some(i);
                break;
            }
            _ => {}
        }
    }
    let at = at?;
    let span = tokens[at].span;
    let word = |w: &str| TokenWithSpan::new(Token::make_keyword(w), span);
    let space = || TokenWithSpan::new(Token::Whitespace(Whitespace::Space), span);
    tokens.splice(at..at, [word("WHERE"), space(), word("TRUE"), space()]);
    Some(tokens)
}

/// A checker for one snapshot, reusable across statements.
pub struct Checker<'a> {
    snapshot: &'a CatalogSnapshot,
    /// The relations a bare name reaches, by name.
    bare: BTreeMap<&'a str, &'a Relation>,
}

impl<'a> Checker<'a> {
    pub fn new(snapshot: &'a CatalogSnapshot) -> Checker<'a> {
        Checker {
            snapshot,
            bare: snapshot
                .visible()
                .0
                .into_iter()
                .filter(|o| !o.qualified)
                .map(|o| (o.relation.name.as_str(), o.relation))
                .collect(),
        }
    }

    /// How violations name a relation: as the model is shown it.
    fn named(&self, rel: &Relation) -> String {
        match self.bare.get(rel.name.as_str()) {
            Some(r) if std::ptr::eq(*r, rel) => rel.name.clone(),
            _ => rel.qualified(),
        }
    }

    pub fn check(&self, sql: &str) -> Vec<Violation> {
        let mut walk = Walk {
            checker: self,
            frames: Vec::new(),
            out: Vec::new(),
        };
        match parse_one(sql) {
            Err(kind) => walk.flag(kind, ""),
            Ok(stmt) => walk.statement(&stmt),
        }
        let mut seen = std::collections::HashSet::new();
        walk.out
            .into_iter()
            .filter(|v| seen.insert((format!("{:?}", v.kind), v.fragment.clone())))
            .collect()
    }

    fn relation(&self, name: &ObjectName) -> Result<&'a Relation, ViolationKind> {
        let parts: Option<Vec<String>> = name.0.iter().map(|p| p.as_ident().map(stored)).collect();
        let unknown = || ViolationKind::UnknownRelation {
            name: name.to_string(),
        };
        // A bare name through the search path, a qualified one to its schema (on the path
        // or not, as PostgreSQL allows); every relation of the snapshot is visible.
        let found = match parts.as_deref() {
            Some([t]) => self.bare.get(t.as_str()).copied(),
            Some([s, t]) => self
                .snapshot
                .relations
                .iter()
                .find(|r| &r.schema == s && &r.name == t),
            _ => None,
        };
        found.ok_or_else(unknown)
    }
}

/// The name PostgreSQL stores for an identifier as written: unquoted names fold to lower
/// case (ASCII only, as in a UTF-8 database), quoted ones are kept.
fn stored(i: &Ident) -> String {
    if i.quote_style.is_some() {
        i.value.clone()
    } else {
        i.value.to_ascii_lowercase()
    }
}

/// The part of the statement a violation quotes: ASCII, shortened with `...`.
fn fragment(node: &dyn fmt::Display) -> String {
    crate::message::ascii_snippet(&node.to_string(), FRAGMENT_MAX)
}

/// A name bound by a FROM item.
#[derive(Clone, Debug)]
struct Binding<'a> {
    /// The alias, else the relation's name; empty for an unnamed derived table.
    name: String,
    /// The catalog relation behind it, when it is one (not a derived table or CTE).
    relation: Option<&'a Relation>,
    /// Visible column names, each with the relation column it reads (renamed by an alias
    /// column list) when `relation` is set.
    columns: Vec<(String, Option<String>)>,
}

impl Binding<'_> {
    fn find(&self, column: &str) -> Option<&(String, Option<String>)> {
        self.columns.iter().find(|(n, _)| n == column)
    }
}

/// One level of name scope: a query's CTEs, or a SELECT's FROM items.
#[derive(Default)]
struct Frame<'a> {
    bindings: Vec<Binding<'a>>,
    /// CTE names with their output columns.
    ctes: Vec<(String, Vec<String>)>,
    /// Column names merged by JOIN USING / NATURAL: an unqualified reference to them is not
    /// ambiguous.
    merged: Vec<String>,
}

struct Walk<'c, 'a> {
    checker: &'c Checker<'a>,
    /// Innermost scope last.
    frames: Vec<Frame<'a>>,
    out: Vec<Violation>,
}

/// Column references and nested queries of an expression tree, not descending into the
/// nested queries (they have scopes of their own).
#[derive(Default)]
struct Refs {
    depth: usize,
    columns: Vec<Vec<Ident>>,
    queries: Vec<Query>,
}

impl Visitor for Refs {
    type Break = ();

    fn pre_visit_query(&mut self, q: &Query) -> ControlFlow<()> {
        if self.depth == 0 {
            self.queries.push(q.clone());
        }
        self.depth += 1;
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _q: &Query) -> ControlFlow<()> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
        if self.depth == 0 {
            match e {
                // The DEFAULT of INSERT VALUES and UPDATE SET: a reserved word, never a
                // column when unquoted.
                Expr::Identifier(i)
                    if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("default") => {}
                Expr::Identifier(i) => self.columns.push(vec![i.clone()]),
                Expr::CompoundIdentifier(is) => self.columns.push(is.clone()),
                _ => {}
            }
        }
        ControlFlow::Continue(())
    }
}

impl<'a> Walk<'_, 'a> {
    fn flag(&mut self, kind: ViolationKind, at: &str) {
        let hint = match &kind {
            ViolationKind::UnknownColumn { qualifier, column } => {
                self.column_hint(qualifier.as_deref(), column)
            }
            ViolationKind::UnknownRelation { name } => self.relation_hint(name),
            _ => None,
        };
        self.out.push(Violation {
            kind,
            role: self.checker.snapshot.role.clone(),
            fragment: at.to_string(),
            hint,
        });
    }

    /// The hint of a column that does not bind ([`Violation::hint`]).
    fn column_hint(&self, qualifier: Option<&str>, column: &str) -> Option<String> {
        let mut parts = Vec::new();
        let in_scope: Vec<&Binding> = self
            .frames
            .iter()
            .rev()
            .flat_map(|f| f.bindings.iter())
            .filter(|b| !b.name.is_empty())
            .collect();
        let shown = |b: &Binding| match b.relation.map(|r| self.checker.named(r)) {
            Some(relation) if relation != b.name => format!("{} ({relation})", b.name),
            _ => b.name.clone(),
        };
        match qualifier {
            Some(q) => {
                if let Some(b) = in_scope.iter().find(|b| b.name == q) {
                    let cols: Vec<&str> = b.columns.iter().map(|c| c.0.as_str()).collect();
                    if !cols.is_empty() {
                        parts.push(format!("{} has {}", shown(b), name_list(&cols)));
                    }
                }
            }
            None if !in_scope.is_empty() => {
                let names: Vec<String> = in_scope.iter().map(|b| shown(b)).collect();
                parts.push(format!("in scope: {}", name_list(&names)));
            }
            None => {}
        }
        let owners: Vec<String> = self
            .checker
            .snapshot
            .visible()
            .0
            .iter()
            .filter(|o| o.relation.column(column).is_some())
            .map(|o| self.checker.named(o.relation))
            .collect();
        if !owners.is_empty() {
            parts.push(format!("{column} is a column of {}", name_list(&owners)));
        } else {
            // An invented name: the columns of the role's relations most like it.
            let like = closest(
                column,
                self.checker.snapshot.visible().0.iter().flat_map(|o| {
                    let rel = self.checker.named(o.relation);
                    o.relation
                        .columns
                        .iter()
                        .filter(|c| crate::catalog::shows_name(&c.name))
                        .map(move |c| (format!("{rel}.{}", c.name), c.name.clone()))
                }),
            );
            if !like.is_empty() {
                parts.push(format!("closest columns: {}", like.join(", ")));
            }
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// The hint of a relation name that names nothing the role may see: the role's
    /// relations most like it (drawn from the snapshot, as [`Violation::hint`]).
    fn relation_hint(&self, name: &str) -> Option<String> {
        let like = closest(
            name,
            self.checker
                .snapshot
                .visible()
                .0
                .iter()
                .map(|o| (self.checker.named(o.relation), o.relation.name.clone())),
        );
        (!like.is_empty()).then(|| format!("closest relations: {}", like.join(", ")))
    }

    fn unsupported(&mut self, what: &str, at: &dyn fmt::Display) {
        let at = fragment(at);
        self.flag(ViolationKind::Unsupported { what: what.into() }, &at);
    }

    fn statement(&mut self, s: &Statement) {
        match s {
            Statement::Query(q) => {
                self.query(q);
            }
            Statement::Insert(i) => self.insert(i),
            Statement::Update(u) => self.update(u),
            Statement::Delete(d) => self.delete(d),
            other => {
                let what = other
                    .to_string()
                    .split_whitespace()
                    .next()
                    .unwrap_or("this")
                    .to_ascii_uppercase();
                let at = fragment(other);
                self.flag(ViolationKind::UnsupportedStatement { what }, &at);
            }
        }
    }

    /// Checks every column reference and nested query in `node` under the current scopes.
    fn refs<V: Visit>(&mut self, node: &V, privilege: Verb) {
        let mut r = Refs::default();
        let _ = node.visit(&mut r);
        for parts in &r.columns {
            self.column(parts, privilege);
        }
        for q in &r.queries {
            self.query(q);
        }
    }

    /// Binds one column reference and checks `privilege` on it.
    fn column(&mut self, parts: &[Ident], privilege: Verb) {
        let at = fragment(&ObjectName::from(parts.to_vec()));
        let names: Vec<String> = parts.iter().map(stored).collect();
        let (column, qualifier) = match names.as_slice() {
            [c] => (c.clone(), None),
            [q, c] => (c.clone(), Some((None, q.clone()))),
            [s, q, c] => (c.clone(), Some((Some(s.clone()), q.clone()))),
            _ => return self.unsupported("a column reference with more than three parts", &at),
        };
        let Some((schema, q)) = qualifier else {
            return self.unqualified(&column, privilege, &at);
        };
        let found = self.frames.iter().rev().find_map(|f| {
            f.bindings.iter().find(|b| match &schema {
                None => b.name == q,
                Some(s) => b
                    .relation
                    .is_some_and(|r| &r.schema == s && r.name == q && b.name == q),
            })
        });
        let Some(b) = found.cloned() else {
            let name = match schema {
                Some(s) => format!("{s}.{q}"),
                None => q,
            };
            return self.flag(ViolationKind::UnknownRelation { name }, &at);
        };
        match b.find(&column).cloned() {
            Some(c) => self.require(&b, &c, privilege, &at),
            None => self.flag(
                ViolationKind::UnknownColumn {
                    qualifier: Some(b.name.clone()),
                    column,
                },
                &at,
            ),
        }
    }

    fn unqualified(&mut self, column: &str, privilege: Verb, at: &str) {
        for depth in (0..self.frames.len()).rev() {
            let f = &self.frames[depth];
            let hits: Vec<(Binding<'a>, (String, Option<String>))> = f
                .bindings
                .iter()
                .filter_map(|b| b.find(column).map(|c| (b.clone(), c.clone())))
                .collect();
            if hits.len() > 1 && !f.merged.iter().any(|m| m == column) {
                let tables = hits.iter().map(|(b, _)| b.name.clone()).collect();
                return self.flag(
                    ViolationKind::AmbiguousColumn {
                        column: column.to_string(),
                        tables,
                    },
                    at,
                );
            }
            if !hits.is_empty() {
                for (b, c) in hits {
                    self.require(&b, &c, privilege, at);
                }
                return;
            }
        }
        self.flag(
            ViolationKind::UnknownColumn {
                qualifier: None,
                column: column.to_string(),
            },
            at,
        );
    }

    /// Checks `privilege` on the relation column behind a bound column, if any (columns of
    /// derived tables and CTEs were checked where they were produced).
    fn require(
        &mut self,
        b: &Binding<'a>,
        c: &(String, Option<String>),
        privilege: Verb,
        at: &str,
    ) {
        let (Some(rel), Some(origin)) = (b.relation, &c.1) else {
            return;
        };
        let ok = rel
            .column(origin)
            .is_some_and(|col| col.privileges.contains(&privilege));
        if !ok {
            self.flag(
                ViolationKind::ColumnPrivilege {
                    table: self.checker.named(rel),
                    column: origin.clone(),
                    privilege,
                },
                at,
            );
        }
    }

    /// Output column names.
    fn query(&mut self, q: &Query) -> Vec<String> {
        self.frames.push(Frame::default());
        if let Some(with) = &q.with {
            for cte in &with.cte_tables {
                let name = stored(&cte.alias.name);
                if with.recursive {
                    // The recursive term sees the CTE with the columns of the first term.
                    let first = match cte.query.body.as_ref() {
                        SetExpr::SetOperation { left, .. } => {
                            let mark = self.out.len();
                            let cols = self.set_expr(left);
                            self.out.truncate(mark);
                            cols
                        }
                        _ => Vec::new(),
                    };
                    let cols = renamed(&cte.alias, first);
                    self.top().ctes.push((name.clone(), cols));
                }
                let cols = self.query(&cte.query);
                let cols = renamed(&cte.alias, cols);
                let top = self.top();
                top.ctes.retain(|(n, _)| *n != name);
                top.ctes.push((name, cols));
            }
        }
        let outputs = match q.body.as_ref() {
            SetExpr::Select(s) => self.select(s, q.order_by.as_ref()),
            body => {
                let outputs = self.set_expr(body);
                if let Some(ob) = &q.order_by {
                    // ORDER BY of a set operation sees only its output columns.
                    self.frames.push(Frame {
                        bindings: vec![Binding {
                            name: String::new(),
                            relation: None,
                            columns: outputs.iter().map(|c| (c.clone(), None)).collect(),
                        }],
                        ..Frame::default()
                    });
                    self.order_by(ob, &outputs);
                    self.frames.pop();
                }
                outputs
            }
        };
        if let Some(l) = &q.limit_clause {
            self.refs(l, Verb::Select);
        }
        if let Some(f) = &q.fetch {
            self.refs(f, Verb::Select);
        }
        if !q.locks.is_empty() {
            self.unsupported("a locking clause (FOR UPDATE/SHARE)", &q.locks[0]);
        }
        self.frames.pop();
        outputs
    }

    fn top(&mut self) -> &mut Frame<'a> {
        if self.frames.is_empty() {
            self.frames.push(Frame::default());
        }
        let last = self.frames.len() - 1;
        &mut self.frames[last]
    }

    fn set_expr(&mut self, s: &SetExpr) -> Vec<String> {
        match s {
            SetExpr::Select(sel) => self.select(sel, None),
            SetExpr::Query(q) => self.query(q),
            SetExpr::SetOperation { left, right, .. } => {
                let cols = self.set_expr(left);
                self.set_expr(right);
                cols
            }
            SetExpr::Values(v) => {
                self.refs(v, Verb::Select);
                let n = v.rows.first().map_or(0, |r| r.content.len());
                (1..=n).map(|i| format!("column{i}")).collect()
            }
            other => {
                self.unsupported("this query form", other);
                Vec::new()
            }
        }
    }

    fn select(&mut self, s: &Select, order_by: Option<&OrderBy>) -> Vec<String> {
        self.frames.push(Frame::default());
        for twj in &s.from {
            self.table_with_joins(twj);
        }
        let mut outputs = Vec::new();
        for item in &s.projection {
            match item {
                SelectItem::UnnamedExpr(e) => {
                    self.refs(e, Verb::Select);
                    outputs.push(output_name(e));
                }
                SelectItem::ExprWithAlias { expr, alias } => {
                    self.refs(expr, Verb::Select);
                    outputs.push(stored(alias));
                }
                SelectItem::Wildcard(opts) => {
                    if opts.to_string().trim().is_empty() {
                        let bindings = self.top().bindings.clone();
                        if s.from.is_empty() {
                            self.unsupported("* without a FROM clause", item);
                        }
                        for b in &bindings {
                            outputs.extend(self.wildcard(b, item));
                        }
                    } else {
                        self.unsupported("wildcard options", item);
                    }
                }
                SelectItem::QualifiedWildcard(
                    SelectItemQualifiedWildcardKind::ObjectName(n),
                    _,
                ) if n.0.len() == 1 => {
                    let q = n.0[0].as_ident().map(stored).unwrap_or_default();
                    let found = self
                        .frames
                        .last()
                        .and_then(|f| f.bindings.iter().find(|b| b.name == q))
                        .cloned();
                    match found {
                        Some(b) => outputs.extend(self.wildcard(&b, item)),
                        None => {
                            let at = fragment(item);
                            self.flag(ViolationKind::UnknownRelation { name: q }, &at)
                        }
                    }
                }
                other => self.unsupported("this select item", other),
            }
        }
        if let Some(Distinct::On(exprs)) = &s.distinct {
            self.refs(exprs, Verb::Select);
        }
        if let Some(w) = &s.selection {
            self.refs(w, Verb::Select);
        }
        match &s.group_by {
            GroupByExpr::Expressions(exprs, mods) => {
                if !mods.is_empty() {
                    self.unsupported("GROUP BY modifiers", &s.group_by);
                }
                for e in exprs {
                    // GROUP BY binds a bare name to an input column first, then to an
                    // output column.
                    if let Expr::Identifier(i) = e {
                        let n = stored(i);
                        if !self.in_scope(&n) && outputs.contains(&n) {
                            continue;
                        }
                    }
                    self.refs(e, Verb::Select);
                }
            }
            GroupByExpr::All(_) => self.unsupported("GROUP BY ALL", &s.group_by),
        }
        if let Some(h) = &s.having {
            self.refs(h, Verb::Select);
        }
        if !s.named_window.is_empty() {
            self.refs(&s.named_window, Verb::Select);
        }
        if s.into.is_some() {
            self.unsupported("SELECT INTO", s);
        }
        if s.top.is_some()
            || !s.lateral_views.is_empty()
            || s.prewhere.is_some()
            || !s.connect_by.is_empty()
            || !s.cluster_by.is_empty()
            || !s.distribute_by.is_empty()
            || !s.sort_by.is_empty()
            || s.qualify.is_some()
            || s.exclude.is_some()
        {
            self.unsupported("a non-PostgreSQL SELECT clause", s);
        }
        if let Some(ob) = order_by {
            self.order_by(ob, &outputs);
        }
        self.frames.pop();
        outputs
    }

    /// ORDER BY binds a bare name to an output column first, then to an input column.
    fn order_by(&mut self, ob: &OrderBy, outputs: &[String]) {
        match &ob.kind {
            OrderByKind::Expressions(items) => {
                for item in items {
                    if let Expr::Identifier(i) = &item.expr {
                        if outputs.contains(&stored(i)) {
                            continue;
                        }
                    }
                    self.refs(&item.expr, Verb::Select);
                }
            }
            OrderByKind::All(_) => self.unsupported("ORDER BY ALL", ob),
        }
    }

    fn in_scope(&self, column: &str) -> bool {
        self.frames
            .iter()
            .any(|f| f.bindings.iter().any(|b| b.find(column).is_some()))
    }

    /// The columns `*` expands to on `b`, flagging a relation the role may not read whole.
    fn wildcard(&mut self, b: &Binding<'a>, at: &dyn fmt::Display) -> Vec<String> {
        if let Some(rel) = b.relation {
            if !rel.privileges.contains(&Verb::Select) {
                let at = fragment(at);
                self.flag(
                    ViolationKind::Wildcard {
                        table: self.checker.named(rel),
                    },
                    &at,
                );
            }
        }
        b.columns.iter().map(|(n, _)| n.clone()).collect()
    }

    fn table_with_joins(&mut self, twj: &TableWithJoins) {
        self.table_factor(&twj.relation);
        for j in &twj.joins {
            let before = self.top().bindings.len();
            self.table_factor(&j.relation);
            let constraint = match &j.join_operator {
                JoinOperator::Join(c)
                | JoinOperator::Inner(c)
                | JoinOperator::Left(c)
                | JoinOperator::LeftOuter(c)
                | JoinOperator::Right(c)
                | JoinOperator::RightOuter(c)
                | JoinOperator::FullOuter(c)
                | JoinOperator::CrossJoin(c) => c,
                other => {
                    self.unsupported("this join", &format!("{other:?}"));
                    continue;
                }
            };
            match constraint {
                JoinConstraint::On(e) => self.refs(e, Verb::Select),
                JoinConstraint::Using(cols) => {
                    let names: Vec<String> = cols
                        .iter()
                        .filter_map(|n| n.0.last().and_then(|p| p.as_ident()).map(stored))
                        .collect();
                    self.merge(before, &names, &j.relation);
                }
                JoinConstraint::Natural => {
                    let f = self.top();
                    let left: Vec<String> = f.bindings[..before]
                        .iter()
                        .flat_map(|b| b.columns.iter().map(|c| c.0.clone()))
                        .collect();
                    let names: Vec<String> = f.bindings[before..]
                        .iter()
                        .flat_map(|b| b.columns.iter().map(|c| c.0.clone()))
                        .filter(|c| left.contains(c))
                        .collect();
                    self.merge(before, &names, &j.relation);
                }
                JoinConstraint::None => {}
            }
        }
    }

    /// JOIN USING / NATURAL: each merged column is read on both sides.
    fn merge(&mut self, split: usize, names: &[String], at: &TableFactor) {
        let at = fragment(at);
        let bindings = self.top().bindings.clone();
        for n in names {
            let left: Vec<&Binding> = bindings[..split]
                .iter()
                .filter(|b| b.find(n).is_some())
                .collect();
            let right: Vec<&Binding> = bindings[split..]
                .iter()
                .filter(|b| b.find(n).is_some())
                .collect();
            if left.is_empty() || right.is_empty() {
                self.flag(
                    ViolationKind::UnknownColumn {
                        qualifier: None,
                        column: n.clone(),
                    },
                    &at,
                );
                continue;
            }
            for b in left.into_iter().chain(right) {
                if let Some(c) = b.find(n) {
                    self.require(b, c, Verb::Select, &at);
                }
            }
            self.top().merged.push(n.clone());
        }
    }

    fn table_factor(&mut self, t: &TableFactor) {
        match t {
            TableFactor::Table {
                name, alias, args, ..
            } => {
                if args.is_some() {
                    return self.unsupported("a function in FROM", t);
                }
                let binding = self.named_table(name, alias);
                if let Some(b) = binding {
                    self.top().bindings.push(b);
                }
            }
            TableFactor::Derived {
                lateral,
                subquery,
                alias,
                ..
            } => {
                // A derived table sees the enclosing scopes, not its siblings (unless
                // LATERAL).
                let cols = if *lateral {
                    self.query(subquery)
                } else {
                    let siblings = self.frames.pop();
                    let cols = self.query(subquery);
                    self.frames.extend(siblings);
                    cols
                };
                let (name, cols) = match alias {
                    Some(a) => (stored(&a.name), renamed(a, cols)),
                    None => (String::new(), cols),
                };
                self.top().bindings.push(Binding {
                    name,
                    relation: None,
                    columns: cols.into_iter().map(|c| (c, None)).collect(),
                });
            }
            TableFactor::NestedJoin {
                table_with_joins,
                alias: None,
            } => self.table_with_joins(table_with_joins),
            other => self.unsupported("this FROM item", other),
        }
    }

    /// A CTE or a relation named in FROM, which the role must be able to read.
    fn named_table(
        &mut self,
        name: &ObjectName,
        alias: &Option<TableAlias>,
    ) -> Option<Binding<'a>> {
        let at = fragment(name);
        if let [part] = name.0.as_slice() {
            let n = part.as_ident().map(stored).unwrap_or_default();
            let cte = self
                .frames
                .iter()
                .rev()
                .find_map(|f| f.ctes.iter().find(|(c, _)| *c == n))
                .cloned();
            if let Some((_, cols)) = cte {
                let (bname, cols) = match alias {
                    Some(a) => (stored(&a.name), renamed(a, cols)),
                    None => (n, cols),
                };
                return Some(Binding {
                    name: bname,
                    relation: None,
                    columns: cols.into_iter().map(|c| (c, None)).collect(),
                });
            }
        }
        let rel = match self.checker.relation(name) {
            Ok(r) => r,
            Err(kind) => {
                self.flag(kind, &at);
                return None;
            }
        };
        if !rel.grants(Verb::Select) {
            self.flag(
                ViolationKind::TablePrivilege {
                    table: self.checker.named(rel),
                    privilege: Verb::Select,
                },
                &at,
            );
        }
        // A column alias list renames columns by position, and the snapshot lists only the
        // columns the role holds a privilege on: without a table-level grant some may be
        // missing, and the positions would bind the wrong ones.
        let complete = [Verb::Select, Verb::Insert, Verb::Update]
            .iter()
            .any(|v| rel.privileges.contains(v));
        if alias.as_ref().is_some_and(|a| !a.columns.is_empty()) && !complete {
            let what = format!(
                "a column alias list on {}, whose columns role {} may not all see",
                self.checker.named(rel),
                self.checker.snapshot.role
            );
            self.unsupported(&what, name);
        }
        Some(relation_binding(rel, alias))
    }

    /// The target of INSERT/UPDATE/DELETE, which must grant `verb`.
    fn target(&mut self, name: &ObjectName, verb: Verb) -> Option<&'a Relation> {
        let at = fragment(name);
        match self.checker.relation(name) {
            Ok(rel) => {
                if !rel.grants(verb) {
                    self.flag(
                        ViolationKind::TablePrivilege {
                            table: self.checker.named(rel),
                            privilege: verb,
                        },
                        &at,
                    );
                }
                Some(rel)
            }
            Err(kind) => {
                self.flag(kind, &at);
                None
            }
        }
    }

    /// A column named as the target of INSERT or UPDATE SET.
    fn target_column(&mut self, rel: &'a Relation, name: &ObjectName, verb: Verb) {
        let at = fragment(name);
        let Some(col) = name.0.last().and_then(|p| p.as_ident()).map(stored) else {
            return self.unsupported("this target column", name);
        };
        if name.0.len() > 1 {
            return self.unsupported("a qualified or subscripted target column", name);
        }
        match rel.column(&col) {
            None => self.flag(
                ViolationKind::UnknownColumn {
                    qualifier: Some(self.checker.named(rel)),
                    column: col,
                },
                &at,
            ),
            Some(c) if !c.privileges.contains(&verb) => self.flag(
                ViolationKind::ColumnPrivilege {
                    table: self.checker.named(rel),
                    column: col,
                    privilege: verb,
                },
                &at,
            ),
            Some(_) => {}
        }
    }

    fn returning(&mut self, items: &Option<Vec<SelectItem>>) {
        for item in items.iter().flatten() {
            match item {
                SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                    self.refs(e, Verb::Select)
                }
                SelectItem::Wildcard(_) => {
                    for b in self.top().bindings.clone() {
                        self.wildcard(&b, item);
                    }
                }
                other => self.unsupported("this RETURNING item", other),
            }
        }
    }

    fn insert(&mut self, i: &Insert) {
        let TableObject::TableName(name) = &i.table else {
            return self.unsupported("INSERT into a table function", &i.table);
        };
        let Some(rel) = self.target(name, Verb::Insert) else {
            return;
        };
        if i.columns.is_empty() {
            // Without a column list the values fill columns the role may not see.
            if !rel.privileges.contains(&Verb::Insert) {
                let at = fragment(name);
                self.flag(
                    ViolationKind::TablePrivilege {
                        table: self.checker.named(rel),
                        privilege: Verb::Insert,
                    },
                    &at,
                );
            }
        }
        for c in &i.columns {
            self.target_column(rel, c, Verb::Insert);
        }
        if let Some(src) = &i.source {
            self.query(src);
        }
        if !i.assignments.is_empty() || i.partitioned.is_some() || !i.after_columns.is_empty() {
            self.unsupported("a non-PostgreSQL INSERT form", i);
        }
        match &i.on {
            None => {}
            Some(OnInsert::OnConflict(oc)) if matches!(oc.action, OnConflictAction::DoNothing) => {}
            Some(other) => self.unsupported("ON CONFLICT DO UPDATE", other),
        }
        if i.returning.is_some() {
            let alias = i.table_alias.as_ref().map(|a| TableAlias {
                explicit: a.explicit,
                name: a.alias.clone(),
                columns: Vec::new(),
                at: None,
            });
            self.frames.push(Frame {
                bindings: vec![relation_binding(rel, &alias)],
                ..Frame::default()
            });
            self.returning(&i.returning);
            self.frames.pop();
        }
    }

    fn update(&mut self, u: &Update) {
        let TableFactor::Table {
            name,
            alias,
            args: None,
            ..
        } = &u.table.relation
        else {
            return self.unsupported("this UPDATE target", &u.table);
        };
        if !u.table.joins.is_empty() {
            return self.unsupported("a join in the UPDATE target", &u.table);
        }
        let Some(rel) = self.target(name, Verb::Update) else {
            return;
        };
        self.frames.push(Frame {
            bindings: vec![relation_binding(rel, alias)],
            ..Frame::default()
        });
        match &u.from {
            None => {}
            Some(UpdateTableFromKind::AfterSet(from)) => {
                for twj in from {
                    self.table_with_joins(twj);
                }
            }
            Some(_) => self.unsupported("UPDATE FROM before SET", &u.table),
        }
        for a in &u.assignments {
            match &a.target {
                AssignmentTarget::ColumnName(n) => self.target_column(rel, n, Verb::Update),
                AssignmentTarget::Tuple(ns) => {
                    for n in ns {
                        self.target_column(rel, n, Verb::Update);
                    }
                }
            }
            self.refs(&a.value, Verb::Select);
        }
        if let Some(w) = &u.selection {
            self.refs(w, Verb::Select);
        }
        self.returning(&u.returning);
        if !u.order_by.is_empty() || u.limit.is_some() || u.or.is_some() || u.output.is_some() {
            self.unsupported("a non-PostgreSQL UPDATE form", u);
        }
        self.frames.pop();
    }

    fn delete(&mut self, d: &Delete) {
        let from = match &d.from {
            FromTable::WithFromKeyword(f) => f,
            FromTable::WithoutKeyword(_) => return self.unsupported("DELETE without FROM", d),
        };
        let target = match from.as_slice() {
            [TableWithJoins {
                relation:
                    TableFactor::Table {
                        name,
                        alias,
                        args: None,
                        ..
                    },
                joins,
            }] if joins.is_empty() && d.tables.is_empty() => (name, alias),
            _ => return self.unsupported("this DELETE target", d),
        };
        let Some(rel) = self.target(target.0, Verb::Delete) else {
            return;
        };
        // Column-level DELETE does not exist: the table-level grant is needed.
        if !rel.privileges.contains(&Verb::Delete) {
            let at = fragment(target.0);
            self.flag(
                ViolationKind::TablePrivilege {
                    table: self.checker.named(rel),
                    privilege: Verb::Delete,
                },
                &at,
            );
        }
        self.frames.push(Frame {
            bindings: vec![relation_binding(rel, target.1)],
            ..Frame::default()
        });
        for twj in d.using.iter().flatten() {
            self.table_with_joins(twj);
        }
        if let Some(w) = &d.selection {
            self.refs(w, Verb::Select);
        }
        self.returning(&d.returning);
        if !d.order_by.is_empty() || d.limit.is_some() || d.output.is_some() {
            self.unsupported("a non-PostgreSQL DELETE form", d);
        }
        self.frames.pop();
    }
}

fn relation_binding<'a>(rel: &'a Relation, alias: &Option<TableAlias>) -> Binding<'a> {
    let mut columns: Vec<(String, Option<String>)> = rel
        .columns
        .iter()
        .map(|c| (c.name.clone(), Some(c.name.clone())))
        .collect();
    let name = match alias {
        Some(a) => {
            for (slot, new) in columns.iter_mut().zip(&a.columns) {
                slot.0 = stored(&new.name);
            }
            stored(&a.name)
        }
        None => rel.name.clone(),
    };
    Binding {
        name,
        relation: Some(rel),
        columns,
    }
}

/// Output columns renamed by an alias column list, `AS t(a, b)`.
fn renamed(alias: &TableAlias, mut cols: Vec<String>) -> Vec<String> {
    for (i, c) in alias.columns.iter().enumerate() {
        match cols.get_mut(i) {
            Some(slot) => *slot = stored(&c.name),
            None => cols.push(stored(&c.name)),
        }
    }
    cols
}

/// The name PostgreSQL gives an unaliased output column (FigureColname, simplified).
fn output_name(e: &Expr) -> String {
    match e {
        Expr::Identifier(i) => stored(i),
        Expr::CompoundIdentifier(is) => is.last().map(stored).unwrap_or_default(),
        Expr::Function(f) => f
            .name
            .0
            .last()
            .and_then(|p| p.as_ident())
            .map(stored)
            .unwrap_or_default(),
        Expr::Cast { expr, .. } | Expr::Nested(expr) => output_name(expr),
        _ => "?column?".into(),
    }
}
