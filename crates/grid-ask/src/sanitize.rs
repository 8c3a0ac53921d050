//! The judge's message made fit for a prompt: PostgreSQL's errors can name objects the
//! asking role may not see (`permission denied for table salaries`, a hint `Perhaps you
//! meant to reference the column "s.salary"`), and no such name may reach the model.
//!
//! # The rule
//!
//! The message is cut into quoted segments (`"…"`), words (letters, digits, `_`, `$`,
//! joined by `.` into a dotted name) and everything else (kept as it is). A segment or
//! word is kept only if it is *known*, and replaced by `<hidden>` otherwise:
//!
//! - **known names** are the role's language and what the statement itself says: every
//!   schema, relation and column name of the role's catalog snapshot (what its prompt
//!   shows), the words of its column types, the function allow-list minus the functions
//!   the role may not execute, and every identifier, quoted identifier and string literal
//!   of the judged statement (which the model wrote and the repair prompt quotes anyway).
//!   Compared without regard to case.
//! - In a **name position** only a known name is kept: a quoted segment (each of its
//!   dotted parts known, or the whole of it), a dotted name (each part known), a word
//!   directly followed by `(` (a function, as in `function sum(text) does not exist`),
//!   and the word after `for <kind>` or `of <kind>` where `<kind>` is an object kind
//!   (`permission denied for table salaries`, `must be owner of view v`).
//! - Anywhere else a word is kept if it is a known name, a number, or a word of
//!   PostgreSQL's message vocabulary ([`MESSAGE_WORDS`]: the English of its error
//!   templates and the built-in type names). So a hidden table named like an English
//!   word (`user`) is still hidden where PostgreSQL names it.
//!
//! Whatever the rule does not recognise is hidden: it fails closed, at the cost of a less
//! helpful message.

use std::collections::HashSet;

use grid_core::catalog::CatalogSnapshot;

/// What a hidden name is replaced with.
pub(crate) const HIDDEN: &str = "<hidden>";

/// Longest sanitized message, in characters (a prompt line).
pub(crate) const MAX_CHARS: usize = 400;

/// Object kinds after which (preceded by `for` or `of`) PostgreSQL writes a bare name.
const KINDS: &[&str] = &[
    "table",
    "relation",
    "view",
    "sequence",
    "function",
    "procedure",
    "routine",
    "aggregate",
    "schema",
    "column",
    "type",
    "domain",
    "database",
    "language",
    "index",
    "operator",
    "collation",
    "conversion",
    "extension",
    "server",
    "role",
    "tablespace",
];

/// The words of PostgreSQL's parse, analysis and planning errors and hints: kept outside
/// name positions (with [`TYPE_NAMES`]).
pub(crate) const MESSAGE_WORDS: &[&str] = &[
    // Templates.
    "a",
    "aggregate",
    "aggregates",
    "all",
    "allowed",
    "ambiguous",
    "an",
    "and",
    "any",
    "are",
    "argument",
    "arguments",
    "as",
    "at",
    "be",
    "because",
    "but",
    "by",
    "call",
    "calls",
    "cannot",
    "cast",
    "casts",
    "clause",
    "column",
    "columns",
    "compare",
    "could",
    "data",
    "denied",
    "does",
    "entry",
    "error",
    "exist",
    "explicit",
    "expression",
    "expressions",
    "for",
    "from",
    "from-clause",
    "function",
    "functions",
    "given",
    "group",
    "have",
    "hint",
    "identify",
    "in",
    "input",
    "invalid",
    "is",
    "it",
    "join",
    "may",
    "meant",
    "might",
    "missing",
    "must",
    "name",
    "named",
    "names",
    "need",
    "nested",
    "no",
    "not",
    "of",
    "on",
    "only",
    "operator",
    "operators",
    "or",
    "order",
    "other",
    "out",
    "over",
    "owner",
    "part",
    "perhaps",
    "permission",
    "query",
    "range",
    "reference",
    "referenced",
    "relation",
    "resolve",
    "result",
    "returns",
    "schema",
    "select",
    "set",
    "should",
    "statement",
    "subquery",
    "such",
    "syntax",
    "table",
    "than",
    "that",
    "the",
    "there",
    "this",
    "to",
    "too",
    "type",
    "types",
    "unique",
    "used",
    "using",
    "value",
    "values",
    "where",
    "which",
    "window",
    "with",
    "within",
    "you",
    "add",
    "match",
    "matches",
    "candidate",
    "choose",
    "best",
    "specified",
    "unknown",
    "view",
    "sequence",
    "procedure",
    "routine",
    "list",
    "distinct",
    "having",
    "limit",
    "offset",
    "number",
    "numbers",
    "division",
    "zero",
    "near",
    "end",
    "at",
    "or",
    "position",
    "character",
    "characters",
    "requires",
    "require",
    "returning",
    "expected",
    "got",
    "found",
    "more",
    "one",
    "row",
    "rows",
    "returned",
    "used",
    "case",
    "when",
    "then",
    "else",
    "like",
    "between",
    "ilike",
    "null",
    "true",
    "false",
    "outer",
    "inner",
    "left",
    "right",
    "full",
    "cross",
    "lateral",
    "union",
    "intersect",
    "except",
    "recursive",
    "alias",
    "aliases",
    "specified",
    "more",
    "than",
    "once",
    "ordered",
    "set",
    "sets",
    "grouping",
    "rollup",
    "cube",
    "boolean",
    "integer",
    "conflict",
    "read-only",
    "transaction",
    "execute",
    "insert",
    "update",
    "delete",
    "into",
    "values",
    "default",
    "target",
    "targets",
    "subscript",
    "subscripts",
    "array",
    "arrays",
    "dimension",
    "dimensions",
    "out",
    "bound",
    "bounds",
    "overflow",
    "underflow",
    "precision",
    "scale",
    "length",
    "string",
    "literal",
    "unterminated",
    "quoted",
    "identifier",
    "trailing",
    "junk",
    "after",
    "before",
    "parameter",
    "parameters",
    "placeholder",
    "operand",
    "operands",
    "left",
    "right",
    "unary",
    "binary",
    "prefix",
    "postfix",
    "infix",
    "implicit",
    "implicitly",
    "coerce",
    "coerced",
    "conversion",
    "convert",
    "converted",
    "format",
    "collation",
    "collations",
    "mismatch",
    "mixed",
    "combination",
    "combine",
    "combined",
    "definition",
    "defined",
    "exists",
    "already",
    "duplicate",
    "key",
    "keys",
    "constraint",
    "violates",
    "null",
    "contains",
    "contain",
    "containing",
    "regular",
    "nondeterministic",
    "deterministic",
    "immutable",
    "stable",
    "volatile",
    "set-returning",
    "returning",
    "ambiguous",
    "correlated",
    "uncorrelated",
    "level",
    "levels",
    "outer-level",
    "inner-level",
    "grouped",
    "ungrouped",
    "was",
    "were",
    "its",
    "their",
    "these",
    "those",
    "both",
    "either",
    "neither",
    "nor",
    "same",
    "different",
    "multiple",
    "single",
    "several",
    "each",
    "every",
    "some",
    "none",
    "first",
    "last",
    "next",
    "previous",
    "limit",
    "exceeded",
    "exceeds",
    "maximum",
    "minimum",
    "many",
    "few",
    "less",
    "greater",
    "equal",
    "equality",
    "ordering",
    "sort",
    "sorting",
    "hash",
    "hashing",
    "merge",
    "nulls",
    "desc",
    "asc",
    "frame",
    "partition",
    "rows",
    "groups",
    "preceding",
    "following",
    "current",
    "unbounded",
    "filter",
    "distinct",
    "only",
    "supported",
    "unsupported",
    "implemented",
    "feature",
    "features",
    "yet",
    "here",
    "instead",
    "try",
    "consider",
    "use",
    "rewrite",
    "add",
    "remove",
    "change",
    "reference",
    "references",
    "referencing",
    "referring",
    "refers",
    "belongs",
    "belong",
    "lacks",
    "lack",
    "privilege",
    "privileges",
    "select",
    "usage",
    "access",
    "superuser",
    "record",
    "returned",
    "type",
    "declared",
    "variadic",
    "appear",
    "appears",
    "mean",
    "means",
    "can",
    "do",
    "did",
    "cast",
    "allow",
    "allows",
    "able",
    "unable",
    "ever",
    // The extension's own refusal of objects the asker does not trust
    // (src/resolution.rs).
    "untrusted",
    "code",
    "asker",
    "runs",
    "objects",
    "authors",
    "trusts",
];

/// Built-in type names: message words, and names after `for type` / `of type`.
pub(crate) const TYPE_NAMES: &[&str] = &[
    "int",
    "int2",
    "int4",
    "int8",
    "smallint",
    "bigint",
    "numeric",
    "decimal",
    "real",
    "double",
    "float",
    "float4",
    "float8",
    "text",
    "varchar",
    "char",
    "bpchar",
    "varying",
    "bool",
    "date",
    "time",
    "timestamp",
    "timestamptz",
    "timetz",
    "without",
    "zone",
    "interval",
    "json",
    "jsonb",
    "uuid",
    "bytea",
    "money",
    "oid",
    "regclass",
    "anyelement",
    "anyarray",
    "anynonarray",
    "anycompatible",
    "inet",
    "cidr",
    "macaddr",
    "bit",
    "xml",
    "tsvector",
    "tsquery",
    "point",
    "void",
    "cstring",
    "internal",
    "integer",
    "boolean",
    "character",
    "precision",
    "with",
    "time",
    "record",
    "unknown",
    "name",
];

/// The words a judge's message may keep in a name position for one role and statement
/// (see the module documentation), lower-cased.
#[derive(Debug, Clone, Default)]
pub(crate) struct KnownNames {
    names: HashSet<String>,
}

impl KnownNames {
    /// The names of `snapshot` (what the role's prompt shows, its function allow-list)
    /// and of `sql`.
    pub(crate) fn new(snapshot: &CatalogSnapshot, sql: &str) -> KnownNames {
        let mut k = KnownNames::default();
        for r in &snapshot.relations {
            k.add(&r.schema);
            k.add(&r.name);
            for c in &r.columns {
                k.add(&c.name);
                for w in words_of(&c.ty) {
                    k.add(w);
                }
            }
        }
        for f in grid_core::lexicon::DEFAULT_FUNCTIONS {
            if !snapshot.denied_functions.iter().any(|d| d == f) {
                k.add(f);
            }
        }
        k.add_statement(sql);
        k
    }

    fn add(&mut self, name: &str) {
        self.names.insert(name.to_lowercase());
    }

    /// The identifiers, quoted identifiers and string literals of `sql`.
    fn add_statement(&mut self, sql: &str) {
        let mut chars = sql.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '"' || c == '\'' {
                let mut s = String::new();
                while let Some(d) = chars.next() {
                    if d == c {
                        if chars.peek() == Some(&c) {
                            chars.next();
                            s.push(c);
                            continue;
                        }
                        break;
                    }
                    s.push(d);
                }
                self.add(&s);
            } else if is_word_char(c) {
                let mut s = String::from(c);
                while let Some(&d) = chars.peek() {
                    if !is_word_char(d) {
                        break;
                    }
                    s.push(d);
                    chars.next();
                }
                self.add(&s);
            }
        }
    }

    pub(crate) fn knows(&self, word: &str) -> bool {
        self.names.contains(&word.to_lowercase())
    }
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

fn words_of(s: &str) -> impl Iterator<Item = &str> {
    s.split(|c: char| !is_word_char(c))
        .filter(|w| !w.is_empty())
}

fn is_message_word(w: &str) -> bool {
    let w = w.to_lowercase();
    MESSAGE_WORDS.contains(&w.as_str()) || is_type_name(&w)
}

fn is_type_name(w: &str) -> bool {
    TYPE_NAMES.contains(&w.to_lowercase().as_str())
}

fn is_number(w: &str) -> bool {
    !w.is_empty() && w.chars().all(|c| c.is_ascii_digit())
}

/// `message` with every name `known` does not hold hidden (the rule of the module
/// documentation), on one line, at most [`MAX_CHARS`] characters.
pub(crate) fn sanitize(message: &str, known: &KnownNames) -> String {
    let chars: Vec<char> = message
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let mut out = String::new();
    // The last two words seen outside quotes, lower-cased: `for table` makes the next
    // word a name.
    let mut last: [String; 2] = [String::new(), String::new()];
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' {
            let mut s = String::new();
            i += 1;
            while i < chars.len() {
                if chars[i] == '"' {
                    if chars.get(i + 1) == Some(&'"') {
                        s.push('"');
                        i += 2;
                        continue;
                    }
                    break;
                }
                s.push(chars[i]);
                i += 1;
            }
            i += 1;
            let kept = known.knows(&s) || s.split('.').all(|p| known.knows(p) || is_number(p));
            out.push('"');
            out.push_str(if kept { &s } else { HIDDEN });
            out.push('"');
            last = [last[1].clone(), String::from("\"")];
        } else if is_word_char(c) {
            let mut parts = vec![String::new()];
            while i < chars.len() {
                let d = chars[i];
                if is_word_char(d) {
                    if let Some(p) = parts.last_mut() {
                        p.push(d);
                    }
                    i += 1;
                } else if d == '.' && chars.get(i + 1).is_some_and(|&e| is_word_char(e)) {
                    parts.push(String::new());
                    i += 1;
                } else {
                    break;
                }
            }
            let word = parts.join(".");
            let after_kind =
                matches!(last[0].as_str(), "for" | "of") && KINDS.contains(&last[1].as_str());
            let name_position = parts.len() > 1 || chars.get(i) == Some(&'(') || after_kind;
            let kept = if name_position {
                known.knows(&word)
                    || parts.iter().all(|p| known.knows(p))
                    || (after_kind && last[1] == "type" && is_type_name(&word))
            } else {
                known.knows(&word) || is_number(&word) || is_message_word(&word)
            };
            out.push_str(if kept { &word } else { HIDDEN });
            last = [last[1].clone(), word.to_lowercase()];
        } else {
            out.push(c);
            i += 1;
        }
    }
    let out = out.split_whitespace().collect::<Vec<_>>().join(" ");
    match out.char_indices().nth(MAX_CHARS) {
        Some((cut, _)) => format!("{}...", &out[..cut]),
        None => out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot() -> CatalogSnapshot {
        serde_json::from_value(serde_json::json!({
            "format": 1,
            "role": "analyst",
            "search_path": ["public"],
            "relations": [{
                "schema": "public", "name": "employees", "privileges": ["SELECT"],
                "columns": [
                    {"name": "id", "type": "integer", "privileges": ["SELECT"]},
                    {"name": "name", "type": "text", "privileges": ["SELECT"]},
                    {"name": "Hired On", "type": "timestamp with time zone", "privileges": ["SELECT"]}
                ]
            }],
            "denied_functions": ["upper"]
        }))
        .unwrap()
    }

    fn clean(message: &str, sql: &str) -> String {
        sanitize(message, &KnownNames::new(&snapshot(), sql))
    }

    #[test]
    fn a_hidden_table_named_by_a_denial_is_hidden() {
        let sql = "SELECT name FROM employees";
        assert_eq!(
            clean("permission denied for table salaries", sql),
            "permission denied for table <hidden>"
        );
        // Named like an English word, it is hidden all the same where a name stands.
        assert_eq!(
            clean("permission denied for table user", sql),
            "permission denied for table <hidden>"
        );
        assert_eq!(
            clean("must be owner of view payroll", sql),
            "must be owner of view <hidden>"
        );
        // A table the role may see stays.
        assert_eq!(
            clean("permission denied for table employees", sql),
            "permission denied for table employees"
        );
    }

    #[test]
    fn hints_keep_the_roles_names_and_hide_the_others() {
        let sql = "SELECT e.nme FROM employees AS e";
        assert_eq!(
            clean(
                "column e.nme does not exist (hint: Perhaps you meant to reference the column \"e.name\".)",
                sql
            ),
            "column e.nme does not exist (hint: Perhaps you meant to reference the column \"e.name\".)"
        );
        assert_eq!(
            clean(
                "column e.salry does not exist (hint: Perhaps you meant to reference the column \"s.salary\".)",
                "SELECT e.salry FROM employees AS e"
            ),
            "column e.salry does not exist (hint: Perhaps you meant to reference the column \"<hidden>\".)"
        );
        assert_eq!(
            clean(
                "There is a column named \"secret\" in table \"payroll\", but it cannot be referenced from this part of the query.",
                sql
            ),
            "There is a column named \"<hidden>\" in table \"<hidden>\", but it cannot be referenced from this part of the query."
        );
        // A dotted name is a name position: each part must be known.
        assert_eq!(
            clean("column hr.pay does not exist", sql),
            "column <hidden> does not exist"
        );
        // A quoted name with its case and spaces, from the snapshot.
        assert_eq!(
            clean(
                "column \"Hired On\" must appear in the GROUP BY clause",
                sql
            ),
            "column \"Hired On\" must appear in the GROUP BY clause"
        );
    }

    #[test]
    fn type_errors_read_as_postgresql_wrote_them() {
        let sql = "SELECT SUM(name) FROM employees WHERE id = 'abc'";
        assert_eq!(
            clean("function sum(text) does not exist (hint: No function matches the given name and argument types. You might need to add explicit type casts.)", sql),
            "function sum(text) does not exist (hint: No function matches the given name and argument types. You might need to add explicit type casts.)"
        );
        assert_eq!(
            clean("invalid input syntax for type integer: \"abc\"", sql),
            "invalid input syntax for type integer: \"abc\""
        );
        assert_eq!(
            clean("operator does not exist: integer = text", sql),
            "operator does not exist: integer = text"
        );
        // A built-in type after `for type`, whatever the snapshot's columns.
        assert_eq!(
            clean("invalid input syntax for type bigint: \"x\"", "SELECT 'x'"),
            "invalid input syntax for type bigint: \"x\""
        );
        assert_eq!(
            clean("invalid input syntax for type mood: \"x\"", "SELECT 'x'"),
            "invalid input syntax for type <hidden>: \"x\""
        );
    }

    #[test]
    fn functions_the_role_may_not_execute_are_hidden_unless_the_statement_wrote_them() {
        assert_eq!(
            clean(
                "permission denied for function upper",
                "SELECT name FROM employees"
            ),
            "permission denied for function <hidden>"
        );
        assert_eq!(
            clean(
                "permission denied for function upper",
                "SELECT upper(name) FROM employees"
            ),
            "permission denied for function upper"
        );
        assert_eq!(
            clean(
                "function secret_fn(integer) does not exist",
                "SELECT id FROM employees"
            ),
            "function <hidden>(integer) does not exist"
        );
    }

    #[test]
    fn unknown_words_fail_closed_and_the_message_stays_one_short_line() {
        assert_eq!(
            clean(
                "relation \"x\" does not exist\nfrobnicated quux",
                "SELECT 1"
            ),
            "relation \"<hidden>\" does not exist <hidden> <hidden>"
        );
        let long = "column ".repeat(200);
        let s = clean(&long, "SELECT 1");
        assert!(s.chars().count() <= MAX_CHARS + 3, "{}", s.len());
        assert!(!s.contains('\n'));
        // An unterminated quote hides what follows it.
        assert_eq!(
            clean("relation \"salaries", "SELECT 1"),
            "relation \"<hidden>\""
        );
    }
}
