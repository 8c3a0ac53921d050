//! The dynamic lexicon: names the statement itself introduces (select-list aliases,
//! derived-table and CTE output columns, column alias lists), as words of its language
//! where PostgreSQL resolves them.
//!
//! The words come from the output so far, not from the schema, so they are kept on the
//! parser stacks: every stack entry carries a [`Value`], a synthesized attribute of its
//! grammar symbol (the identifier a terminal spelled, the output names of a query, the
//! range variables of a FROM list, ...), computed when the terminal is shifted or the
//! production reduced ([`Semantics`]). Five terminals read them:
//!
//! * `ALIAS_REF` ([`DynKind::OutputAlias`]), a whole ORDER BY or GROUP BY item: the output
//!   names of the SELECT whose clause it is (PostgreSQL's SQL92 rule; in GROUP BY an input
//!   column of the same name wins, which only the checker and the server can see).
//! * `DERIVED_COL` ([`DynKind::DerivedColumn`]), a column reference, bare or after an
//!   `IDENT` qualifier (where a FROM is still to come, [`crate::qualifier`]): the columns
//!   the statement named of the range variables in scope there — derived tables, CTE
//!   references, relations renamed by a column alias list — of the current SELECT (once
//!   its FROM item is complete) and of the enclosing ones, except that a subquery in FROM
//!   that is not LATERAL does not see its siblings, and a JOIN's ON sees its join's two
//!   sides, not the other FROM items of its SELECT; and the columns of the CTEs of every
//!   WITH that reaches the position. After `q.`, only the innermost range variable (or
//!   CTE) named `q` counts (a relation of that name shadows). A query's own FROM items stay
//!   in scope through its ORDER BY (and what that nests), not in a set operation's right
//!   operand.
//! * `QUALIFIER` ([`DynKind::Qualifier`]) and `QUAL_COL` ([`DynKind::QualifiedColumn`]), a
//!   qualified column reference where every FROM clause it could name is written (the
//!   stack is not pending, [`crate::qualifier`]): the qualifier is the name of a range
//!   variable in scope there (its alias, or a relation's, CTE's or derived table's name
//!   when it has none), by the visibility rules above (a CTE no FROM item names is none);
//!   the column is one of the innermost range variable of that name: for a relation, its
//!   columns in the role's lexicon ([`crate::lexicon::Lexicon::columns_of`], renamed by
//!   position by a column alias list), for a derived table or a CTE, its named outputs (a
//!   `*` over a relation brings that relation's columns). A range variable with no such
//!   column is no qualifier, so a stack that took one can always go on.
//! * `SCOPED_COL` ([`DynKind::ScopedColumn`]), a bare column reference where every FROM
//!   clause it could name is written (where `COLUMN_NAME` and a bare `DERIVED_COL` do not
//!   stand, [`crate::qualifier`]): a column of any range variable in scope there, by the
//!   rules above. A name several range variables of one level have is one of them too:
//!   PostgreSQL refuses it as ambiguous, and so does the checker, which the mask leaves it
//!   to. Whether PostgreSQL finds it ambiguous depends on what the values here do not hold
//!   exactly (columns the role may not read, which the lexicon does not list but which make
//!   a name ambiguous all the same; the columns a USING list or a NATURAL join merges into
//!   one; a join alias's), and a wrong exclusion would make a statement PostgreSQL runs
//!   unwritable, where an admission is refused with a message that says to qualify, with
//!   the qualified form open at the same place.
//!
//! Soundness (what the words can reach): a dynamic terminal appears in the grammar only
//! where a column reference may stand, so a dynamic word is never a relation, function or
//! type name. Its words are names the statement gave to output columns earlier in the text,
//! range variables of its FROM items, or columns of the lexicon of the relations in scope;
//! every FROM item of the statement is still a relation of the role's lexicon or a query
//! the mask admitted. PostgreSQL binds such a word to the introduced column, or (a bare
//! word in GROUP BY, or one that several FROM items provide) to a column of one of those
//! relations, which the checker binds and the server's column privileges guard, as for
//! any column word. The words are the statement's own text: a replay recomputes them from
//! the output, so it stays deterministic.
//!
//! A CTE's columns are words wherever its WITH reaches, before a FROM item names the CTE:
//! `WITH s AS (SELECT COUNT(*) AS n ...) SELECT AVG(n) FROM s` is the way to use a computed
//! column in a select list. A derived table's are not words in the select list of the
//! SELECT whose FROM holds it (`SELECT AVG(s.n) FROM (...) s`): the select list precedes
//! FROM, no left-to-right mask can know them there, and admitting every name there would
//! take the column lexicon away exactly where models invent columns.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::grammar::spec::DynKind;
use crate::grammar::table::{LrTable, Sym};
use crate::grammar::Terminals;
use crate::lexicon::{spells_unquoted, Lexicon};
use crate::qualifier::ContextRule;
use crate::termset::TermSet;

/// A name as PostgreSQL stores it (unquoted identifiers folded to lower case).
pub type Name = Arc<str>;

/// One output column of a query, as a later reference may name it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Output {
    Named(Name),
    /// PostgreSQL names it `?column?` (or a name no word of the statement spells).
    Unnamed,
    /// Columns not known here, in a number not known here (a `*` over a qualifier that
    /// names nothing): no later reference may name them.
    Unknown,
    /// The columns of the relation of this key ([`crate::schema::Table::key`]) as the
    /// role's lexicon lists them, from position `from` on (a column alias list renamed
    /// those before). The lexicon lists the columns the role may touch, in the catalog's
    /// order: all of them, and so their positions, when the role may read the relation
    /// whole (the checker refuses an alias list on one it may not).
    Relation {
        key: Name,
        from: u32,
    },
}

/// A select-list item.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    Named(Name),
    Unnamed,
    Star,
    QualifiedStar(Name),
}

/// A FROM item as a column reference sees it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RangeVar {
    /// The name a qualifier uses: the alias, else the relation's or CTE's name; `None` for a
    /// subquery without an alias.
    pub name: Option<Name>,
    /// Its columns as far as the statement names them.
    pub columns: Arc<[Output]>,
}

/// What a query gives a reference after it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Query {
    pub outputs: Arc<[Output]>,
    /// The FROM items of its one SELECT (not for a set operation): its ORDER BY may name
    /// their columns.
    pub ranges: Option<Arc<[RangeVar]>>,
}

/// A CTE of a WITH clause.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Cte {
    pub name: Name,
    pub columns: Arc<[Output]>,
}

/// An identifier lexeme as a stack entry keeps it: its stored name, and for a relation word
/// its key ([`crate::schema::Table::key`]: `schema.name` when written qualified, else the
/// name).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Word {
    pub name: Name,
    pub key: Name,
}

/// The attribute a stack entry carries. Most entries carry [`Value::None`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum Value {
    #[default]
    None,
    /// The stored name an identifier terminal spelled.
    Word(Name),
    /// A relation of the lexicon as a FROM item names it: its stored name and key.
    Relation {
        name: Name,
        key: Name,
    },
    /// The name PostgreSQL gives an expression as an output column (FigureColname).
    Expr(Name),
    Target(Target),
    Targets(Arc<[Target]>),
    Names(Arc<[Name]>),
    Alias {
        name: Name,
        columns: Option<Arc<[Name]>>,
    },
    Range(Arc<[RangeVar]>),
    Query(Arc<Query>),
    Ctes(Arc<[Cte]>),
}

impl Value {
    fn name(&self) -> Option<&Name> {
        match self {
            Value::Word(n) | Value::Expr(n) | Value::Relation { name: n, .. } => Some(n),
            _ => None,
        }
    }

    fn range(&self) -> &[RangeVar] {
        match self {
            Value::Range(r) => r,
            _ => &[],
        }
    }

    /// Every name the value holds as a column or an output column (for the words a token
    /// could use, see [`crate::mask`]); not a relation's columns, which
    /// [`Semantics::held_names`] adds.
    pub fn names(&self, out: &mut Vec<Name>) {
        let outputs = |o: &[Output], out: &mut Vec<Name>| {
            out.extend(o.iter().filter_map(|x| match x {
                Output::Named(n) => Some(n.clone()),
                _ => None,
            }))
        };
        match self {
            Value::None => {}
            Value::Word(n) | Value::Expr(n) | Value::Relation { name: n, .. } => {
                out.push(n.clone())
            }
            Value::Target(t) => target_names(t, out),
            Value::Targets(ts) => ts.iter().for_each(|t| target_names(t, out)),
            Value::Names(ns) => out.extend(ns.iter().cloned()),
            Value::Alias { name, columns } => {
                out.push(name.clone());
                out.extend(columns.iter().flat_map(|c| c.iter().cloned()));
            }
            Value::Range(rs) => rs.iter().for_each(|r| outputs(&r.columns, out)),
            Value::Query(q) => {
                outputs(&q.outputs, out);
                for r in q.ranges.iter().flat_map(|r| r.iter()) {
                    outputs(&r.columns, out);
                }
            }
            Value::Ctes(cs) => cs.iter().for_each(|c| outputs(&c.columns, out)),
        }
    }
}

impl Value {
    /// The names of the range variables the value holds: what a qualifier may spell.
    pub fn range_names(&self, out: &mut Vec<Name>) {
        let ranges: &[RangeVar] = match self {
            Value::Range(rs) => rs,
            Value::Query(q) => q.ranges.as_deref().unwrap_or(&[]),
            _ => &[],
        };
        out.extend(ranges.iter().filter_map(|r| r.name.clone()));
    }
}

fn target_names(t: &Target, out: &mut Vec<Name>) {
    if let Target::Named(n) | Target::QualifiedStar(n) = t {
        out.push(n.clone());
    }
}

/// The values of one session's stacks, interned: a node refers to its value by id, and
/// equal values have equal ids. Id 0 is [`Value::None`].
#[derive(Debug)]
pub struct Values {
    list: Vec<Value>,
    ids: FxHashMap<Value, u32>,
}

impl Default for Values {
    fn default() -> Values {
        let mut ids = FxHashMap::default();
        ids.insert(Value::None, 0);
        Values {
            list: vec![Value::None],
            ids,
        }
    }
}

impl Values {
    pub const NONE: u32 = 0;

    pub fn intern(&mut self, v: Value) -> u32 {
        if v == Value::None {
            return Self::NONE;
        }
        if let Some(&id) = self.ids.get(&v) {
            return id;
        }
        let id = self.list.len() as u32;
        self.list.push(v.clone());
        self.ids.insert(v, id);
        id
    }

    pub fn get(&self, id: u32) -> &Value {
        &self.list[id as usize]
    }
}

/// No entry: the parent of a stack's bottom entry (and of the root).
pub const NIL: u32 = u32::MAX;

/// What the scope queries need of a stack arena (the parser's, [`crate::parser::Stacks`]).
pub trait StackView {
    /// The entry below `node`, or [`NIL`].
    fn parent(&self, node: u32) -> u32;
    fn state(&self, node: u32) -> u32;
    fn value(&self, node: u32) -> &Value;
}

/// How a production's value is made from its right-hand side's (by position).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Action {
    None,
    /// The value of one symbol, as it is.
    Keep(usize),
    /// An expression named by the word (or expression name) of one symbol.
    Named(usize),
    /// An expression PostgreSQL names by a keyword.
    Const(&'static str),
    TargetAlias(usize),
    TargetExpr(usize),
    TargetStar,
    TargetQualifiedStar(usize),
    TargetsStart(usize),
    TargetsAppend(usize, usize),
    NamesStart(usize),
    NamesAppend(usize, usize),
    Alias(usize, Option<usize>),
    RangeTable(usize, usize),
    RangeCte(usize, usize),
    RangeQuery(usize, usize),
    RangeJoinAlias(usize, usize),
    /// The range variables of every symbol, in order.
    Ranges,
    Core {
        targets: usize,
        from: Option<usize>,
    },
    /// A set operation: the output names of its left operand.
    SetOp(usize),
    Cte {
        name: usize,
        columns: usize,
        body: usize,
    },
    CtesAppend(usize, usize),
}

/// State properties the scope walks read.
const ENTERED_BY_LPAREN: u16 = 1;
const ENTERED_BY_SELECT: u16 = 2;
/// A FROM item may start here (the state has a goto on `table_ref`).
const FROM_ITEM: u16 = 4;
/// `common_table_expr: IDENT opt_name_list . AS ...`: a CTE whose body is being read.
const CTE_HEADER: u16 = 8;
/// `columnref: IDENT DOT . DERIVED_COL`: a qualified column.
const QUALIFIED_COLUMN: u16 = 16;
/// `columnref: QUALIFIER . DOT QUAL_COL`: a qualifier, its column to come.
const AFTER_QUALIFIER: u16 = 32;
/// `columnref: QUALIFIER DOT . QUAL_COL`: the column of a qualifier.
const QUALIFIER_COLUMN: u16 = 64;
/// `join_qual: ON . a_expr`: a join's ON condition begins.
const JOIN_ON: u16 = 128;
/// Entered by UNION, INTERSECT or EXCEPT: the right operand of a set operation.
const SET_OP: u16 = 256;

/// The dynamic lexicon's rules for one LR table: per production, how its value is made;
/// per state, what the scope walks need to know. Empty (and every value `None`) for a
/// grammar without dynamic terminals.
#[derive(Clone, Debug, Default)]
pub struct Semantics {
    actions: Vec<Action>,
    /// Terminals whose lexeme a stack entry keeps.
    words: TermSet,
    /// Terminals whose words are relations: their entries keep the relation's key too.
    relations: TermSet,
    flags: Vec<u16>,
    alias_ref: Option<u16>,
    derived_col: Option<u16>,
    qualifier: Option<u16>,
    qual_col: Option<u16>,
    scoped_col: Option<u16>,
    /// The columns of each relation of the lexicon, by key ([`Lexicon::columns_of`]).
    columns: Arc<FxHashMap<Name, Arc<[Name]>>>,
    /// Whether the lexicon has column words.
    column_words: bool,
    /// Which qualifier form stands where ([`crate::qualifier`]).
    rule: Option<Arc<ContextRule>>,
}

impl Semantics {
    /// The rules of `table` over `terms`, by the grammar's symbol names (a `_w` template
    /// copy is read as its plain rule), with the relations' columns of `lexicon`.
    pub fn build(table: &LrTable, terms: &Terminals, lexicon: &Lexicon) -> Semantics {
        let term = |k: DynKind| terms.dynamic.get(&k).and_then(|s| s.iter().next());
        let (alias_ref, derived_col) = (term(DynKind::OutputAlias), term(DynKind::DerivedColumn));
        let (qualifier, qual_col) = (term(DynKind::Qualifier), term(DynKind::QualifiedColumn));
        let scoped_col = term(DynKind::ScopedColumn);
        if [alias_ref, derived_col, qualifier, qual_col, scoped_col]
            .iter()
            .all(Option::is_none)
        {
            return Semantics::default();
        }
        // Names without the `_w` of template copies, once per rule.
        let rule_base: Vec<&str> = table
            .rule_names
            .iter()
            .map(|r| r.strip_suffix("_w").unwrap_or(r))
            .collect();
        let sym_name = |s: &Sym| -> &str {
            match *s {
                Sym::Term(t) => terms.name(t),
                Sym::Rule(r) => rule_base[r as usize],
            }
        };
        let actions = (0..table.prod_rhs.len())
            .map(|p| {
                let lhs = rule_base[table.prod_lhs[p] as usize];
                let rhs: Vec<&str> = table.prod_rhs[p].iter().map(sym_name).collect();
                action(lhs, &rhs)
            })
            .collect();
        let mut words = TermSet::EMPTY;
        for name in [
            "IDENT",
            "BARE_LABEL",
            "TABLE_NAME",
            "CTE_REF",
            "COLUMN_NAME",
            "DERIVED_COL",
            "ALIAS_REF",
            "FUNC_NAME",
            "QUALIFIER",
            "QUAL_COL",
            "SCOPED_COL",
        ] {
            if let Some(t) = terms.names.iter().position(|n| n == name) {
                words.insert(t as u16);
            }
        }
        let rule = |n: &str| table.rule_names.iter().position(|r| r == n);
        let from_rules: Vec<u32> = ["table_ref", "table_ref_w"]
            .iter()
            .filter_map(|n| rule(n).map(|r| r as u32))
            .collect();
        let flags = (0..table.n_states as u32)
            .map(|s| {
                let mut f = 0;
                let kernel = &table.kernels[s as usize];
                let before_dot = |&(p, dot): &(u32, u16)| -> Option<&str> {
                    let rhs = &table.prod_rhs[p as usize];
                    (dot > 0).then(|| sym_name(&rhs[usize::from(dot) - 1]))
                };
                let all_after = |name: &str| {
                    !kernel.is_empty() && kernel.iter().all(|k| before_dot(k) == Some(name))
                };
                if all_after("LPAREN") {
                    f |= ENTERED_BY_LPAREN;
                }
                if all_after("SELECT") {
                    f |= ENTERED_BY_SELECT;
                }
                if ["UNION", "INTERSECT", "EXCEPT"].into_iter().any(all_after) {
                    f |= SET_OP;
                }
                if from_rules.iter().any(|&r| table.goto(s, r).is_some()) {
                    f |= FROM_ITEM;
                }
                for &(p, dot) in kernel {
                    let lhs = rule_base[table.prod_lhs[p as usize] as usize];
                    let rhs = &table.prod_rhs[p as usize];
                    if lhs == "common_table_expr" && dot == 2 {
                        f |= CTE_HEADER;
                    }
                    if lhs == "columnref"
                        && dot == 2
                        && rhs.get(2).map(sym_name) == Some("DERIVED_COL")
                    {
                        f |= QUALIFIED_COLUMN;
                    }
                    if lhs == "columnref" && rhs.first().map(sym_name) == Some("QUALIFIER") {
                        f |= [0, AFTER_QUALIFIER, QUALIFIER_COLUMN, 0][usize::from(dot.min(3))];
                    }
                    if lhs == "join_qual" && dot == 1 && rhs.first().map(sym_name) == Some("ON") {
                        f |= JOIN_ON;
                    }
                }
                f
            })
            .collect();
        let columns = lexicon
            .columns
            .iter()
            .map(|(k, cs)| {
                (
                    Name::from(k.as_str()),
                    cs.iter().map(|c| Name::from(c.as_str())).collect(),
                )
            })
            .collect();
        Semantics {
            actions,
            words,
            relations: terms.relation,
            flags,
            alias_ref,
            derived_col,
            qualifier,
            qual_col,
            scoped_col,
            columns: Arc::new(columns),
            column_words: !lexicon.is_empty(crate::grammar::spec::LexiconKind::Column),
            rule: ContextRule::build(table, terms).map(Arc::new),
        }
    }

    /// The rule that says which qualifier form stands on a stack ([`crate::qualifier`]),
    /// when the grammar has both.
    pub fn rule(&self) -> Option<Arc<ContextRule>> {
        self.rule.clone()
    }

    /// The value of an entry that shifted terminal `t` spelling `w` (when it keeps words).
    pub fn word(&self, t: u16, w: &Word) -> Value {
        if self.relations.contains(t) {
            Value::Relation {
                name: w.name.clone(),
                key: w.key.clone(),
            }
        } else {
            Value::Word(w.name.clone())
        }
    }

    /// Whether the grammar has dynamic terminals at all.
    pub fn enabled(&self) -> bool {
        !self.actions.is_empty()
    }

    /// Whether a stack entry keeps the lexeme of terminal `t`.
    #[inline]
    pub fn keeps_word(&self, t: u16) -> bool {
        self.enabled() && self.words.contains(t)
    }

    fn flag(&self, state: u32, f: u16) -> bool {
        self.flags.get(state as usize).is_some_and(|x| x & f != 0)
    }

    /// Whether a qualified column is being written on a stack whose top is in `state`: a
    /// qualifier is on top, or a qualifier and its dot.
    pub fn in_qualified_column(&self, state: u32) -> bool {
        self.flag(state, AFTER_QUALIFIER | QUALIFIER_COLUMN)
    }

    /// Whether a qualifier is on top of a stack whose top is in `state`, its dot still to
    /// come.
    pub fn dot_to_come(&self, state: u32) -> bool {
        self.flag(state, AFTER_QUALIFIER)
    }

    /// The dynamic terminals a column word of the lexicon stands in for: wherever they may
    /// stand, `COLUMN_NAME` may too, with the same continuations (`DERIVED_COL`,
    /// `ALIAS_REF`). Not the qualifier and its column: `QUALIFIER DOT QUAL_COL` stands where
    /// no column word is a qualifier or follows one.
    pub fn column_like(&self) -> TermSet {
        let mut t = TermSet::EMPTY;
        for x in [self.alias_ref, self.derived_col].into_iter().flatten() {
            t.insert(x);
        }
        t
    }

    /// Whether the lexicon has column words (`COLUMN_NAME` stands in the language).
    pub fn column_words(&self) -> bool {
        self.column_words
    }

    /// The `QUAL_COL` terminal, if the grammar has one.
    pub fn qual_col(&self) -> Option<u16> {
        self.qual_col
    }

    /// Every name `value` holds that a token could spell as a dynamic terminal: its
    /// [`Value::names`], and with `SCOPED_COL` in the grammar, the columns of every relation
    /// it holds (a relation word, a FROM item, a query's FROM items and outputs, a CTE's
    /// outputs), which a bare reference may name once the relation is in scope. A superset
    /// of the names any dynamic terminal may spell on a stack that holds the value, at any
    /// later point of its token.
    pub fn held_names(&self, value: &Value, out: &mut Vec<Name>) {
        value.names(out);
        if self.scoped_col.is_none() {
            return;
        }
        let mut relations = |o: &[Output]| {
            for c in o {
                if let Output::Relation { key, from } = c {
                    out.extend(self.relation_columns(key, *from).iter().cloned());
                }
            }
        };
        match value {
            Value::Relation { key, .. } => {
                relations(&[Output::Relation {
                    key: key.clone(),
                    from: 0,
                }]);
            }
            Value::Range(rs) => rs.iter().for_each(|r| relations(&r.columns)),
            Value::Query(q) => {
                relations(&q.outputs);
                for r in q.ranges.iter().flat_map(|r| r.iter()) {
                    relations(&r.columns);
                }
            }
            Value::Ctes(cs) => cs.iter().for_each(|c| relations(&c.columns)),
            _ => {}
        }
    }

    /// The stored names of the relations whose columns the lexicon lists (each key, and
    /// what follows each dot in it: a key is `schema.name` for a relation written
    /// qualified).
    pub fn relation_names(&self) -> impl Iterator<Item = &str> + '_ {
        self.columns.keys().flat_map(|k| {
            std::iter::once(&k[..]).chain(k.match_indices('.').map(move |(i, _)| &k[i + 1..]))
        })
    }

    /// The `SCOPED_COL` terminal, if the grammar has one.
    pub fn scoped_col(&self) -> Option<u16> {
        self.scoped_col
    }

    /// The value of production `p` reduced over entries with `rhs` values, `below` being
    /// the entry under them (where CTE names are looked up).
    pub fn reduce(&self, p: u32, rhs: &[&Value], below: u32, view: &impl StackView) -> Value {
        let Some(a) = self.actions.get(p as usize) else {
            return Value::None;
        };
        let at = |i: usize| rhs.get(i).copied().unwrap_or(&Value::None);
        let word = |i: usize| at(i).name().cloned();
        let alias = |i: usize| match at(i) {
            Value::Alias { name, columns } => Some((name.clone(), columns.clone())),
            _ => None,
        };
        match a {
            Action::None => Value::None,
            Action::Keep(i) => at(*i).clone(),
            Action::Named(i) => word(*i).map_or(Value::None, Value::Expr),
            Action::Const(n) => Value::Expr(Arc::from(*n)),
            Action::TargetAlias(i) => {
                Value::Target(word(*i).map_or(Target::Unnamed, Target::Named))
            }
            Action::TargetExpr(i) => Value::Target(match at(*i) {
                Value::Expr(n) => Target::Named(n.clone()),
                _ => Target::Unnamed,
            }),
            Action::TargetStar => Value::Target(Target::Star),
            Action::TargetQualifiedStar(i) => {
                Value::Target(word(*i).map_or(Target::Unnamed, Target::QualifiedStar))
            }
            Action::TargetsStart(i) => match at(*i) {
                Value::Target(t) => Value::Targets(Arc::from([t.clone()])),
                _ => Value::None,
            },
            Action::TargetsAppend(l, i) => {
                let mut v: Vec<Target> = match at(*l) {
                    Value::Targets(ts) => ts.to_vec(),
                    _ => Vec::new(),
                };
                if let Value::Target(t) = at(*i) {
                    v.push(t.clone());
                }
                Value::Targets(v.into())
            }
            Action::NamesStart(i) => match word(*i) {
                Some(n) => Value::Names(Arc::from([n])),
                None => Value::None,
            },
            Action::NamesAppend(l, i) => {
                let mut v: Vec<Name> = match at(*l) {
                    Value::Names(ns) => ns.to_vec(),
                    _ => Vec::new(),
                };
                v.extend(word(*i));
                Value::Names(v.into())
            }
            Action::Alias(n, cols) => match word(*n) {
                Some(name) => Value::Alias {
                    name,
                    columns: cols.and_then(|c| match at(c) {
                        Value::Names(ns) => Some(ns.clone()),
                        _ => None,
                    }),
                },
                None => Value::None,
            },
            Action::RangeTable(t, a) => {
                let (name, cols) = match alias(*a) {
                    Some((n, c)) => (Some(n), c),
                    None => (word(*t), None),
                };
                let columns = match at(*t) {
                    Value::Relation { key, .. } => Output::Relation {
                        key: key.clone(),
                        from: 0,
                    },
                    _ => Output::Unknown,
                };
                range_var(name, self.renamed(&[columns], cols.as_deref()))
            }
            Action::RangeCte(t, a) => {
                let cte = word(*t);
                let columns = cte
                    .as_ref()
                    .and_then(|c| self.cte_columns(view, below, c))
                    .unwrap_or_else(|| Arc::from([]));
                let (name, cols) = match alias(*a) {
                    Some((n, c)) => (Some(n), c),
                    None => (cte, None),
                };
                range_var(name, self.renamed(&columns, cols.as_deref()))
            }
            Action::RangeQuery(q, a) => {
                let outputs = match at(*q) {
                    Value::Query(q) => q.outputs.clone(),
                    _ => Arc::from([]),
                };
                let (name, cols) = alias(*a).map_or((None, None), |(n, c)| (Some(n), c));
                range_var(name, self.renamed(&outputs, cols.as_deref()))
            }
            Action::RangeJoinAlias(j, a) => {
                let mut columns: Vec<Output> = vec![Output::Unknown];
                for r in at(*j).range() {
                    columns.extend(r.columns.iter().cloned());
                }
                let (name, cols) = alias(*a).map_or((None, None), |(n, c)| (Some(n), c));
                range_var(name, self.renamed(&columns, cols.as_deref()))
            }
            Action::Ranges => {
                let all: Vec<RangeVar> =
                    rhs.iter().flat_map(|v| v.range().iter().cloned()).collect();
                if all.is_empty() {
                    Value::None
                } else {
                    Value::Range(all.into())
                }
            }
            Action::Core { targets, from } => {
                let ranges: Arc<[RangeVar]> = Arc::from(from.map_or(&[][..], |f| at(f).range()));
                let outputs = match at(*targets) {
                    Value::Targets(ts) => expand(ts, &ranges),
                    _ => Arc::from([]),
                };
                Value::Query(Arc::new(Query {
                    outputs,
                    ranges: Some(ranges),
                }))
            }
            Action::SetOp(l) => match at(*l) {
                Value::Query(q) => Value::Query(Arc::new(Query {
                    outputs: q.outputs.clone(),
                    ranges: None,
                })),
                _ => Value::None,
            },
            Action::Cte {
                name,
                columns,
                body,
            } => {
                let Some(name) = word(*name) else {
                    return Value::None;
                };
                let outputs = match at(*body) {
                    Value::Query(q) => q.outputs.clone(),
                    _ => Arc::from([]),
                };
                let cols = match at(*columns) {
                    Value::Names(ns) => Some(ns.clone()),
                    _ => None,
                };
                Value::Ctes(Arc::from([Cte {
                    name,
                    columns: self.renamed(&outputs, cols.as_deref()),
                }]))
            }
            Action::CtesAppend(l, i) => {
                let mut v: Vec<Cte> = Vec::new();
                for x in [at(*l), at(*i)] {
                    if let Value::Ctes(cs) = x {
                        v.extend(cs.iter().cloned());
                    }
                }
                Value::Ctes(v.into())
            }
        }
    }

    /// The columns of the CTE `name` as a FROM item at `node` sees it: the innermost WITH
    /// that defines it, or the CTE whose body is being read (a recursive reference, by its
    /// column list).
    fn cte_columns(
        &self,
        view: &impl StackView,
        mut node: u32,
        name: &Name,
    ) -> Option<Arc<[Output]>> {
        while node != NIL {
            if let Value::Ctes(cs) = view.value(node) {
                if let Some(c) = cs.iter().rev().find(|c| &c.name == name) {
                    return Some(c.columns.clone());
                }
            }
            let parent = view.parent(node);
            if self.flag(view.state(node), CTE_HEADER)
                && parent != NIL
                && view.value(parent).name() == Some(name)
            {
                return Some(match view.value(node) {
                    Value::Names(ns) => ns.iter().cloned().map(Output::Named).collect(),
                    _ => Arc::from([]),
                });
            }
            node = parent;
        }
        None
    }

    /// The dynamic terminal of `kind`, if the grammar has one.
    pub fn terminal(&self, kind: DynKind) -> Option<u16> {
        match kind {
            DynKind::OutputAlias => self.alias_ref,
            DynKind::DerivedColumn => self.derived_col,
            DynKind::Qualifier => self.qualifier,
            DynKind::QualifiedColumn => self.qual_col,
            DynKind::ScopedColumn => self.scoped_col,
        }
    }

    /// The names terminal `t` may spell on the stack `top` (empty for a terminal that is not
    /// dynamic): see the module documentation for where each kind looks.
    pub fn visible(&self, view: &impl StackView, top: u32, t: u16) -> Vec<Name> {
        if Some(t) == self.alias_ref {
            self.output_aliases(view, top)
        } else if Some(t) == self.derived_col {
            self.derived_columns(view, top)
        } else if Some(t) == self.qualifier {
            self.qualifiers(view, top)
        } else if Some(t) == self.qual_col {
            self.qualified_columns(view, top)
        } else if Some(t) == self.scoped_col {
            self.scoped_columns(view, top)
        } else {
            Vec::new()
        }
    }

    fn output_aliases(&self, view: &impl StackView, mut node: u32) -> Vec<Name> {
        let mut from: Option<&[RangeVar]> = None;
        while node != NIL {
            match view.value(node) {
                Value::Range(r) if from.is_none() => from = Some(r),
                Value::Targets(ts) => return named(&expand(ts, from.unwrap_or(&[]))),
                Value::Query(q) => return named(&q.outputs),
                _ => {}
            }
            let st = view.state(node);
            if self.flag(st, ENTERED_BY_SELECT | ENTERED_BY_LPAREN) {
                break;
            }
            node = view.parent(node);
        }
        Vec::new()
    }

    /// Calls `visit` on what names a column reference on the stack `top` may reach,
    /// innermost first, until it returns true: the range variables in scope (the current
    /// query's FROM items, once complete, then the enclosing queries'; a FROM item that is
    /// not LATERAL does not see its siblings; a JOIN's ON sees the join's two sides, not
    /// the other FROM items of its SELECT), the CTEs of every WITH that reaches the
    /// position, and the CTE whose body is being read.
    fn walk_scope<'v, V: StackView>(
        &self,
        view: &'v V,
        top: u32,
        mut visit: impl FnMut(Seen<'v>) -> bool,
    ) {
        // Skipping the range variables of the current SELECT, down to that SELECT: inside
        // a FROM item that is not LATERAL, or past the two sides of a join whose ON it is.
        let mut hiding = false;
        // Sides of a join still to see, once past its ON.
        let mut join_sides = 0u8;
        // The state of the entry above the one read (none for the top).
        let mut above: Option<u32> = None;
        let mut node = top;
        while node != NIL {
            let st = view.state(node);
            let parent = view.parent(node);
            // Range variables, then (outside them) the CTEs: a FROM item of an inner level
            // named like a CTE shadows it.
            match view.value(node) {
                Value::Range(r) if !hiding => {
                    if r.iter().rev().any(|r| visit(Seen::Range(r))) {
                        return;
                    }
                    if join_sides > 0 {
                        join_sides -= 1;
                        hiding = join_sides == 0;
                    }
                }
                // A query's own FROM items, kept for its ORDER BY (and what that nests), not
                // for the right operand of a set operation.
                Value::Query(q)
                    if above.is_none_or(|a| !self.flag(a, SET_OP))
                        && q.ranges
                            .iter()
                            .flat_map(|r| r.iter().rev())
                            .any(|r| visit(Seen::Range(r))) =>
                {
                    return;
                }
                Value::Ctes(cs) if cs.iter().rev().any(|c| visit(Seen::Cte(c))) => return,
                Value::Names(ns)
                    if self.flag(st, CTE_HEADER)
                        && parent != NIL
                        && visit(Seen::Header(view.value(parent).name(), ns)) =>
                {
                    return;
                }
                _ => {}
            }
            if self.flag(st, JOIN_ON) {
                join_sides = 2;
            }
            if self.flag(st, ENTERED_BY_SELECT) {
                hiding = false;
                join_sides = 0;
            }
            if self.flag(st, ENTERED_BY_LPAREN)
                && parent != NIL
                && self.flag(view.state(parent), FROM_ITEM)
            {
                hiding = true;
            }
            above = Some(st);
            node = parent;
        }
    }

    fn derived_columns(&self, view: &impl StackView, top: u32) -> Vec<Name> {
        let qualifier = if self.flag(view.state(top), QUALIFIED_COLUMN) {
            let q = view.parent(top);
            match (q != NIL).then(|| view.value(q).name()).flatten() {
                Some(n) => Some(n.clone()),
                None => return Vec::new(),
            }
        } else {
            None
        };
        let mut out: Vec<Name> = Vec::new();
        self.walk_scope(view, top, |seen| {
            // A CTE's columns wherever its WITH reaches, before any FROM names it:
            // `WITH c AS (...) SELECT MAX(n) FROM c` (no left-to-right mask could wait for
            // the FROM). A column of a CTE the FROM does not name is refused by PostgreSQL,
            // as a misspelt column is.
            let (name, columns): (Option<&Name>, Vec<Name>) = match seen {
                Seen::Range(r) => (r.name.as_ref(), named(&r.columns)),
                Seen::Cte(c) => (Some(&c.name), named(&c.columns)),
                // The CTE whose body is being read (a recursive one names its columns).
                Seen::Header(n, ns) => (n, ns.to_vec()),
            };
            match &qualifier {
                Some(q) if name == Some(q) => {
                    out = columns;
                    true
                }
                Some(_) => false,
                None => {
                    out.extend(columns);
                    false
                }
            }
        });
        if qualifier.is_none() {
            out.sort_unstable();
            out.dedup();
        }
        out
    }

    /// The names `SCOPED_COL` may spell on `top`: every column of every range variable in
    /// scope there (a relation's in the role's lexicon, renamed by position by a column
    /// alias list; a derived table's or CTE's named outputs), by the visibility rules of
    /// [`Semantics::walk_scope`], sorted and distinct. A name two range variables have is
    /// one of them: PostgreSQL's ambiguity is the checker's to refuse (see the module
    /// documentation).
    fn scoped_columns(&self, view: &impl StackView, top: u32) -> Vec<Name> {
        let mut out = Vec::new();
        self.walk_scope(view, top, |found| {
            if let Seen::Range(r) = found {
                self.column_names(&r.columns, &mut out);
            }
            false
        });
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The names `QUALIFIER` may spell on `top`: the range variables in scope whose
    /// innermost one of that name has a column a qualified reference may name.
    fn qualifiers(&self, view: &impl StackView, top: u32) -> Vec<Name> {
        let mut seen: Vec<&Name> = Vec::new();
        let mut out = Vec::new();
        self.walk_scope(view, top, |found| {
            if let Seen::Range(RangeVar {
                name: Some(n),
                columns,
            }) = found
            {
                if !seen.contains(&n) {
                    seen.push(n);
                    if self.has_columns(columns) {
                        out.push(n.clone());
                    }
                }
            }
            false
        });
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The columns a qualified reference may name on `node`, a stack whose top is a
    /// qualifier or a qualifier and its dot (empty on any other): those of the innermost
    /// range variable the qualifier names, sorted and distinct.
    pub fn qualified_columns(&self, view: &impl StackView, node: u32) -> Vec<Name> {
        let st = view.state(node);
        let entry = if self.flag(st, QUALIFIER_COLUMN) {
            view.parent(node)
        } else if self.flag(st, AFTER_QUALIFIER) {
            node
        } else {
            return Vec::new();
        };
        let Some(q) = (entry != NIL).then(|| view.value(entry).name()).flatten() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        self.walk_scope(view, node, |found| match found {
            Seen::Range(r) if r.name.as_ref() == Some(q) => {
                self.column_names(&r.columns, &mut out);
                true
            }
            _ => false,
        });
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The names of `columns`: the named ones and every column of each relation.
    fn column_names(&self, columns: &[Output], out: &mut Vec<Name>) {
        for c in columns {
            match c {
                Output::Named(n) => out.push(n.clone()),
                Output::Relation { key, from } => {
                    out.extend(self.relation_columns(key, *from).iter().cloned())
                }
                Output::Unnamed | Output::Unknown => {}
            }
        }
    }

    fn has_columns(&self, columns: &[Output]) -> bool {
        columns.iter().any(|c| match c {
            Output::Named(_) => true,
            Output::Relation { key, from } => !self.relation_columns(key, *from).is_empty(),
            Output::Unnamed | Output::Unknown => false,
        })
    }

    /// The lexicon's columns of the relation `key` from position `from` on.
    fn relation_columns(&self, key: &Name, from: u32) -> &[Name] {
        self.columns
            .get(key)
            .and_then(|cs| cs.get(from as usize..))
            .unwrap_or(&[])
    }

    /// Outputs renamed by a column alias list (`AS t(a, b)` renames the first two), by
    /// position; where a position is not known (an unknown column comes first), the new
    /// names are added and the old kept: more names than PostgreSQL has, never fewer.
    fn renamed(&self, outputs: &[Output], alias: Option<&[Name]>) -> Arc<[Output]> {
        let Some(alias) = alias else {
            return outputs.into();
        };
        let mut out: Vec<Output> = alias.iter().cloned().map(Output::Named).collect();
        // Positions still to rename.
        let mut skip = alias.len();
        for (i, o) in outputs.iter().enumerate() {
            if skip == 0 {
                out.extend(outputs[i..].iter().cloned());
                break;
            }
            match o {
                Output::Named(_) | Output::Unnamed => skip -= 1,
                Output::Relation { key, from } => {
                    let n = self.relation_columns(key, *from).len();
                    if n <= skip {
                        skip -= n;
                    } else {
                        out.push(Output::Relation {
                            key: key.clone(),
                            from: from + skip as u32,
                        });
                        skip = 0;
                    }
                }
                Output::Unknown => {
                    out.extend(outputs.iter().cloned());
                    break;
                }
            }
        }
        out.into()
    }
}

/// What a scope walk meets ([`Semantics::walk_scope`]).
enum Seen<'v> {
    /// A range variable in scope.
    Range(&'v RangeVar),
    /// A CTE of a WITH that reaches the position.
    Cte(&'v Cte),
    /// The CTE whose body is being read: its name, and its column list.
    Header(Option<&'v Name>, &'v [Name]),
}

fn range_var(name: Option<Name>, columns: Arc<[Output]>) -> Value {
    Value::Range(Arc::from([RangeVar { name, columns }]))
}

fn named(o: &[Output]) -> Vec<Name> {
    o.iter()
        .filter_map(|x| match x {
            Output::Named(n) => Some(n.clone()),
            _ => None,
        })
        .collect()
}

/// The outputs of a select list over its FROM items (`*` expanded to what is known).
fn expand(targets: &[Target], ranges: &[RangeVar]) -> Arc<[Output]> {
    let mut out = Vec::new();
    for t in targets {
        match t {
            Target::Named(n) => out.push(Output::Named(n.clone())),
            Target::Unnamed => out.push(Output::Unnamed),
            Target::Star => {
                for r in ranges {
                    out.extend(r.columns.iter().cloned());
                }
            }
            Target::QualifiedStar(q) => {
                match ranges.iter().rev().find(|r| r.name.as_ref() == Some(q)) {
                    Some(r) => out.extend(r.columns.iter().cloned()),
                    None => out.push(Output::Unknown),
                }
            }
        }
    }
    out.into()
}

/// The rule for one production (names without the `_w` of template copies).
fn action(lhs: &str, rhs: &[&str]) -> Action {
    use Action as A;
    match (lhs, rhs) {
        ("columnref", [_]) => A::Named(0),
        ("columnref", [_, "DOT", _]) => A::Named(2),
        ("c_expr", ["LPAREN", "a_expr", "RPAREN"]) => A::Keep(1),
        ("c_expr", ["columnref" | "func_expr" | "case_expr"]) => A::Keep(0),
        ("a_expr" | "b_expr", ["c_expr"]) => A::Keep(0),
        ("a_expr" | "b_expr", [_, "TYPECAST", "typename"]) => A::Keep(0),
        ("case_expr", _) => A::Const("case"),
        ("func_application", ["FUNC_NAME", ..]) => A::Named(0),
        ("func_expr", ["func_application", ..] | ["func_expr_common"]) => A::Keep(0),
        ("func_expr_common", [kw, ..]) => match *kw {
            "CAST" => A::Keep(2),
            "COALESCE" => A::Const("coalesce"),
            "NULLIF" => A::Const("nullif"),
            "GREATEST" => A::Const("greatest"),
            "LEAST" => A::Const("least"),
            "EXTRACT" => A::Const("extract"),
            "SUBSTRING" => A::Const("substring"),
            "POSITION" => A::Const("position"),
            "LEFT" => A::Const("left"),
            "RIGHT" => A::Const("right"),
            "CURRENT_DATE" => A::Const("current_date"),
            "CURRENT_TIME" => A::Const("current_time"),
            "CURRENT_TIMESTAMP" => A::Const("current_timestamp"),
            "LOCALTIME" => A::Const("localtime"),
            "LOCALTIMESTAMP" => A::Const("localtimestamp"),
            _ => A::None,
        },
        ("target_el", [_, "AS", "IDENT"]) => A::TargetAlias(2),
        ("target_el", ["a_expr", "IDENT" | "BARE_LABEL"]) => A::TargetAlias(1),
        ("target_el", ["a_expr"]) => A::TargetExpr(0),
        ("target_el", ["STAR"]) => A::TargetStar,
        ("target_el", ["IDENT", "DOT", "STAR"]) => A::TargetQualifiedStar(0),
        ("target_list", ["target_el"]) => A::TargetsStart(0),
        ("target_list", ["target_list", "COMMA", "target_el"]) => A::TargetsAppend(0, 2),
        ("name_list", ["IDENT"]) => A::NamesStart(0),
        ("name_list", ["name_list", "COMMA", "IDENT"]) => A::NamesAppend(0, 2),
        ("opt_name_list", ["LPAREN", "name_list", "RPAREN"]) => A::Keep(1),
        ("alias_clause", ["AS", "IDENT", "LPAREN", "name_list", "RPAREN"]) => A::Alias(1, Some(3)),
        ("alias_clause", ["AS", "IDENT"]) => A::Alias(1, None),
        ("alias_clause", ["IDENT" | "BARE_LABEL", "LPAREN", "name_list", "RPAREN"]) => {
            A::Alias(0, Some(2))
        }
        ("alias_clause", ["IDENT" | "BARE_LABEL"]) => A::Alias(0, None),
        ("opt_alias_clause", ["alias_clause"]) => A::Keep(0),
        ("table_ref", ["TABLE_NAME", "opt_alias_clause"]) => A::RangeTable(0, 1),
        ("table_ref", ["CTE_REF", "opt_alias_clause"]) => A::RangeCte(0, 1),
        ("table_ref", ["subquery", "alias_clause"]) => A::RangeQuery(0, 1),
        ("table_ref", ["LATERAL", "subquery", "alias_clause"]) => A::RangeQuery(1, 2),
        ("table_ref", ["joined_table"]) => A::Keep(0),
        ("table_ref", ["LPAREN", "joined_table", "RPAREN", "alias_clause"]) => {
            A::RangeJoinAlias(1, 3)
        }
        ("joined_table" | "from_list" | "comma_join" | "from_clause" | "using_clause", _) => {
            A::Ranges
        }
        (
            "simple_select" | "insert_select",
            ["SELECT", "opt_distinct", "target_list", "from_clause", ..],
        ) => A::Core {
            targets: 2,
            from: Some(3),
        },
        ("simple_select" | "insert_select", ["SELECT", "opt_distinct", "target_list", ..]) => {
            A::Core {
                targets: 2,
                from: None,
            }
        }
        ("simple_select" | "insert_select", [_, "UNION" | "INTERSECT" | "EXCEPT", ..]) => {
            A::SetOp(0)
        }
        ("select_clause" | "select_clause_plain", [_]) => A::Keep(0),
        ("select_with_parens", [_]) => A::Keep(0),
        ("select_with_parens_plain" | "select_with_parens_opts", ["LPAREN", _, "RPAREN"]) => {
            A::Keep(1)
        }
        ("select_no_parens", [_]) => A::Keep(0),
        ("select_no_parens_opts" | "insert_query", ["with_clause", _, ..]) => A::Keep(1),
        ("select_no_parens_opts" | "insert_query", [_, ..]) => A::Keep(0),
        ("select_stmt", [_]) => A::Keep(0),
        ("subquery", ["select_with_parens"]) => A::Keep(0),
        (
            "common_table_expr",
            ["IDENT", "opt_name_list", "AS", "opt_materialized", "LPAREN", "select_stmt", "RPAREN"],
        ) => A::Cte {
            name: 0,
            columns: 1,
            body: 5,
        },
        ("cte_list", ["common_table_expr"]) => A::Keep(0),
        ("cte_list", ["cte_list", "COMMA", "common_table_expr"]) => A::CtesAppend(0, 2),
        ("with_clause", ["WITH", "cte_list"]) => A::Keep(1),
        ("with_clause", ["WITH", "RECURSIVE", "cte_list"]) => A::Keep(2),
        _ => A::None,
    }
}

/// The stored name of an identifier lexeme (`schema.table`: the table's): an unquoted part
/// folded to lower case (ASCII, as PostgreSQL in UTF-8), a quoted one unquoted.
pub fn stored_of(lexeme: &[u8]) -> Name {
    let at = dot_of(lexeme).map_or(0, |d| d + 1);
    Arc::from(stored_part(&lexeme[at..]))
}

/// The key ([`crate::schema::Table::key`]) of the relation a relation word spells: its
/// stored name, or `schema.name` for a dotted word.
pub fn stored_key(lexeme: &[u8]) -> Name {
    match dot_of(lexeme) {
        None => stored_of(lexeme),
        Some(d) => Arc::from(format!(
            "{}.{}",
            stored_part(&lexeme[..d]),
            stored_part(&lexeme[d + 1..])
        )),
    }
}

/// Where the last dot outside quotes of a lexeme is.
fn dot_of(lexeme: &[u8]) -> Option<usize> {
    let mut at = None;
    let mut in_quotes = false;
    for (i, &b) in lexeme.iter().enumerate() {
        match b {
            b'"' => in_quotes = !in_quotes,
            b'.' if !in_quotes => at = Some(i),
            _ => {}
        }
    }
    at
}

/// The stored name of one part of an identifier lexeme.
fn stored_part(part: &[u8]) -> String {
    if part.first() == Some(&b'"') && part.len() >= 2 {
        String::from_utf8_lossy(&part[1..part.len() - 1]).replace("\"\"", "\"")
    } else {
        String::from_utf8_lossy(part).to_ascii_lowercase()
    }
}

/// Whether `lexeme` spells the stored name `name`. (The bytes are compared before the
/// reserved words are looked up: this runs for every name a stack makes visible.)
pub fn spells(lexeme: &[u8], name: &str, is_reserved: &dyn Fn(&str) -> bool) -> bool {
    if lexeme.first() == Some(&b'"') {
        quoted_bytes(name).eq(lexeme.iter().copied())
    } else {
        lexeme.len() == name.len()
            && lexeme.eq_ignore_ascii_case(name.as_bytes())
            && spells_unquoted(name, is_reserved)
    }
}

/// Whether `prefix` (a lexeme in progress) can still become a spelling of `name`.
pub fn spells_prefix(prefix: &[u8], name: &str, is_reserved: &dyn Fn(&str) -> bool) -> bool {
    if prefix.first() == Some(&b'"') {
        let mut q = quoted_bytes(name);
        prefix.iter().all(|&b| q.next() == Some(b))
    } else {
        prefix.len() <= name.len()
            && prefix.eq_ignore_ascii_case(&name.as_bytes()[..prefix.len()])
            && spells_unquoted(name, is_reserved)
    }
}

/// The bytes of [`crate::lexicon::quoted`]`(name)`, without building it.
fn quoted_bytes(name: &str) -> impl Iterator<Item = u8> + '_ {
    let inner = name
        .bytes()
        .flat_map(|b| std::iter::repeat_n(b, if b == b'"' { 2 } else { 1 }));
    std::iter::once(b'"')
        .chain(inner)
        .chain(std::iter::once(b'"'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reserved(w: &str) -> bool {
        w == "order"
    }

    #[test]
    fn stored_names_and_spellings() {
        assert_eq!(&*stored_of(b"Total"), "total");
        assert_eq!(&*stored_of(b"\"Total \"\"x\"\"\""), "Total \"x\"");
        assert_eq!(&*stored_of(b"hr.\"Staff\""), "Staff");
        assert_eq!(&*stored_key(b"HR.\"Staff\""), "hr.Staff");
        assert_eq!(&*stored_key(b"\"a.b\".c"), "a.b.c");
        assert_eq!(&*stored_key(b"Staff"), "staff");
        assert!(spells(b"TOTAL", "total", &reserved));
        assert!(
            !spells(b"Total", "Total", &reserved),
            "a mixed-case name is quoted"
        );
        assert!(spells(b"\"Total\"", "Total", &reserved));
        assert!(!spells(b"order", "order", &reserved));
        assert!(spells(b"\"order\"", "order", &reserved));
        assert!(spells_prefix(b"TO", "total", &reserved));
        assert!(spells_prefix(b"\"To", "Total", &reserved));
        assert!(!spells_prefix(b"To", "Total", &reserved));
        assert!(!spells_prefix(b"totals", "total", &reserved));
        assert!(spells(b"\"a\"\"b\"", "a\"b", &reserved));
        assert!(!spells(b"\"a\"\"b", "a\"b", &reserved));
        assert!(spells_prefix(b"\"a\"\"", "a\"b", &reserved));
        assert!(!spells_prefix(b"\"a\"b", "a\"b", &reserved));
        assert!(spells_prefix(b"\"ab\"", "ab", &reserved));
        assert!(!spells_prefix(b"\"ab\"x", "ab", &reserved));
    }

    #[test]
    fn alias_lists_rename_by_position() {
        let n = |s: &str| Output::Named(Arc::from(s));
        let a: Vec<Name> = vec![Arc::from("x")];
        let mut sem = Semantics::default();
        let columns: FxHashMap<Name, Arc<[Name]>> =
            [(Arc::from("t"), Arc::from([Arc::from("p"), Arc::from("q")]))]
                .into_iter()
                .collect();
        sem.columns = Arc::new(columns);
        let rel = |from| Output::Relation {
            key: Arc::from("t"),
            from,
        };
        assert_eq!(
            &*sem.renamed(&[n("a"), n("b")], Some(&a)),
            &[n("x"), n("b")]
        );
        assert_eq!(
            &*sem.renamed(&[Output::Unknown, n("b")], Some(&a)),
            &[n("x"), Output::Unknown, n("b")]
        );
        assert_eq!(&*sem.renamed(&[n("a")], None), &[n("a")]);
        assert_eq!(
            &*sem.renamed(&[rel(0), n("b")], Some(&a)),
            &[n("x"), rel(1), n("b")]
        );
        let xyz: Vec<Name> = ["x", "y", "z"].into_iter().map(Arc::from).collect();
        assert_eq!(
            &*sem.renamed(&[rel(0), n("b")], Some(&xyz)),
            &[n("x"), n("y"), n("z")]
        );
        let mut names = Vec::new();
        sem.column_names(&[rel(1)], &mut names);
        assert_eq!(names, vec![Arc::<str>::from("q")]);
    }
}
