//! The prompt ([`Prompt`]: a system and a user part): compact DDL of what the role may see
//! (column types, keys, COMMENT ON text or the description written for the model in its
//! place, the verbs it holds), then the question; and the
//! repair variant that quotes the rejected statement and the reasons back. A large schema is trimmed here, for the prompt only, by relevance to
//! the question ([`trim_by_relevance`]); the mask always covers the whole role's schema.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::catalog::{shows_name, CatalogSnapshot, Offered, Relation, RelationKind};
use crate::lexicon::written;
use crate::policy::Verb;
use crate::text::prompt_text;

/// Longest question accepted, in bytes.
pub const MAX_QUESTION_BYTES: usize = 8 * 1024;

/// Longest description written for the model (`grid.describe`), in bytes: a note beside
/// one relation or column, not a document.
pub const MAX_DESCRIPTION_BYTES: usize = 1024;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum PromptError {
    #[error("the question is empty")]
    Empty,
    #[error("the question is {len} bytes long; the limit is {MAX_QUESTION_BYTES}")]
    TooLong { len: usize },
    #[error("the question contains control character U+{code:04X} at byte {at}")]
    ControlCharacter { code: u32, at: usize },
}

/// The first control character of `text` other than tab, line feed and carriage return,
/// and its byte offset: text a prompt carries holds none (they could forge prompt
/// structure or break the endpoint's transport).
fn first_control(text: &str) -> Option<(usize, char)> {
    text.char_indices()
        .find(|&(_, c)| c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
}

/// The question, trimmed, if it is one a prompt can carry: not empty, at most
/// [`MAX_QUESTION_BYTES`], and free of control characters other than tab, line feed and
/// carriage return (others could forge prompt structure or break the endpoint's
/// transport). The extension refuses the same questions before it asks the worker.
pub fn clean_question(question: &str) -> Result<&str, PromptError> {
    let q = question.trim();
    if q.is_empty() {
        return Err(PromptError::Empty);
    }
    if q.len() > MAX_QUESTION_BYTES {
        return Err(PromptError::TooLong { len: q.len() });
    }
    if let Some((at, c)) = first_control(q) {
        return Err(PromptError::ControlCharacter {
            code: c as u32,
            at: at + (question.len() - question.trim_start().len()),
        });
    }
    Ok(q)
}

/// Why a description cannot be stored.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum DescriptionError {
    #[error("the description is {len} bytes long; the limit is {MAX_DESCRIPTION_BYTES}")]
    TooLong { len: usize },
    #[error("the description contains control character U+{code:04X} at byte {at}")]
    ControlCharacter { code: u32, at: usize },
}

/// The description to store, trimmed: `None` when it is blank (the description is removed),
/// an error when it is longer than [`MAX_DESCRIPTION_BYTES`] or holds a control character
/// other than tab, line feed and carriage return (the prompt shows it on one line).
pub fn clean_description(text: &str) -> Result<Option<&str>, DescriptionError> {
    let t = text.trim();
    if t.is_empty() {
        return Ok(None);
    }
    if t.len() > MAX_DESCRIPTION_BYTES {
        return Err(DescriptionError::TooLong { len: t.len() });
    }
    if let Some((at, c)) = first_control(t) {
        return Err(DescriptionError::ControlCharacter {
            code: c as u32,
            at: at + (text.len() - text.trim_start().len()),
        });
    }
    Ok(Some(t))
}

/// The note a prompt shows for an object: its description written for the model when it
/// has one, else its catalog comment (the description replaces the comment: whoever
/// describes an object for the model says what of the comment still matters). Blank
/// text counts as none.
fn shown_note<'a>(comment: Option<&'a str>, description: Option<&'a str>) -> Option<&'a str> {
    let said = |t: Option<&'a str>| t.filter(|t| !t.trim().is_empty());
    said(description).or(said(comment))
}

/// How the model must write a stored name: bare when it folds back, quoted otherwise.
fn spell(stored: &str, is_reserved: &dyn Fn(&str) -> bool) -> String {
    written(None, stored, is_reserved)
}

/// The relations a prompt shows, by (schema, name), each with the name the model writes:
/// `schema.name` for a qualified one.
pub type Shown<'a> = BTreeMap<(&'a str, &'a str), String>;

/// [`Shown`] for `offered`.
pub fn written_names<'a>(offered: &[Offered<'a>], is_reserved: &dyn Fn(&str) -> bool) -> Shown<'a> {
    offered
        .iter()
        .map(|o| {
            let r = o.relation;
            (
                (r.schema.as_str(), r.name.as_str()),
                written(o.qualifier(), &r.name, is_reserved),
            )
        })
        .collect()
}

/// Free text (a comment, a description, a reason, a statement quoted back) on one line,
/// escaped: a line break would start a line of its own, which could pass for a trusted
/// comment; a control or format character or a control token's spelling is written so
/// that it shows and ends no turn ([`prompt_text`]).
fn one_line(s: &str) -> String {
    prompt_text(&s.split_whitespace().collect::<Vec<_>>().join(" "), true)
}

/// Values as the SQL string literals the model would write for them, escaped as
/// [`one_line`] escapes (a line break would end the `--` note they stand in; a value
/// holding a hidden character is one the model could not write anyway).
fn literals(values: &[String]) -> String {
    let quoted: Vec<String> = values
        .iter()
        .map(|v| format!("'{}'", prompt_text(&v.replace('\'', "''"), true)))
        .collect();
    quoted.join(", ")
}

/// The question as the prompt shows it: its own lines kept (they are the asker's, whom its
/// own prompt trusts), a carriage return read as a line break, escaped otherwise as
/// [`prompt_text`] escapes.
fn question_text(q: &str) -> String {
    prompt_text(&q.replace("\r\n", "\n").replace('\r', "\n"), false)
}

/// One relation as compact DDL, named as `shown` writes it. `shown` is the relations in the
/// prompt: foreign keys to relations outside it are left out.
pub fn relation_ddl(r: &Relation, shown: &Shown<'_>, is_reserved: &dyn Fn(&str) -> bool) -> String {
    let name_of = |schema: &str, name: &str| shown.get(&(schema, name)).cloned();
    let mut s = String::new();
    if let Some(c) = shown_note(r.comment.as_deref(), r.description.as_deref()) {
        s.push_str(&format!("-- {}\n", one_line(c)));
    }
    let verbs: Vec<&str> = Verb::ALL
        .iter()
        .filter(|&&v| r.grants(v))
        .map(|v| match v {
            Verb::Select => "SELECT",
            Verb::Insert => "INSERT",
            Verb::Update => "UPDATE",
            Verb::Delete => "DELETE",
        })
        .collect();
    if verbs != ["SELECT"] {
        s.push_str(&format!("-- you may: {}\n", verbs.join(", ")));
    }
    let keyword = match r.kind {
        RelationKind::View | RelationKind::MaterializedView => "VIEW",
        _ => "TABLE",
    };
    let name = name_of(&r.schema, &r.name).unwrap_or_else(|| spell(&r.name, is_reserved));
    s.push_str(&format!("CREATE {keyword} {name} (\n"));
    let mut lines: Vec<(String, Option<String>)> = Vec::new();
    // A column whose name is not shown is in no lexicon either (the catalog's schema).
    for c in r.columns.iter().filter(|c| shows_name(&c.name)) {
        let mut line = format!("  {} {}", spell(&c.name, is_reserved), c.ty);
        if c.not_null {
            line.push_str(" NOT NULL");
        }
        if r.primary_key.len() == 1 && r.primary_key[0] == c.name {
            line.push_str(" PRIMARY KEY");
        }
        for fk in &r.foreign_keys {
            if fk.columns.len() != 1 || fk.columns[0] != c.name || !shows_name(&fk.ref_columns[0]) {
                continue;
            }
            if let Some(target) = name_of(&fk.ref_schema, &fk.ref_table) {
                line.push_str(&format!(
                    " REFERENCES {target}({})",
                    spell(&fk.ref_columns[0], is_reserved)
                ));
            }
        }
        let mut note = shown_note(c.comment.as_deref(), c.description.as_deref()).map(one_line);
        if !c.privileges.contains(&Verb::Select) {
            let n = "not readable".to_string();
            note = Some(note.map_or(n.clone(), |c| format!("{c} ({n})")));
        }
        if let Some(h) = &c.value_hint {
            let n = match h.complete {
                true => format!("values: {}", literals(&h.values)),
                false => format!("values include: {}", literals(&h.values)),
            };
            note = Some(note.map_or(n.clone(), |c| format!("{c}; {n}")));
        }
        lines.push((line, note));
    }
    let in_list = |cols: &[String]| cols.iter().all(|c| r.column(c).is_some() && shows_name(c));
    if r.primary_key.len() > 1 && in_list(&r.primary_key) {
        let cols: Vec<String> = r
            .primary_key
            .iter()
            .map(|c| spell(c, is_reserved))
            .collect();
        lines.push((format!("  PRIMARY KEY ({})", cols.join(", ")), None));
    }
    for fk in &r.foreign_keys {
        let target = name_of(&fk.ref_schema, &fk.ref_table);
        let refs_shown = fk.ref_columns.iter().all(|c| shows_name(c));
        if let (true, Some(target)) = (
            fk.columns.len() > 1 && in_list(&fk.columns) && refs_shown,
            target,
        ) {
            let cols: Vec<String> = fk.columns.iter().map(|c| spell(c, is_reserved)).collect();
            let refs: Vec<String> = fk
                .ref_columns
                .iter()
                .map(|c| spell(c, is_reserved))
                .collect();
            lines.push((
                format!(
                    "  FOREIGN KEY ({}) REFERENCES {target}({})",
                    cols.join(", "),
                    refs.join(", ")
                ),
                None,
            ));
        }
    }
    let n = lines.len();
    for (i, (line, note)) in lines.into_iter().enumerate() {
        s.push_str(&line);
        if i + 1 < n {
            s.push(',');
        }
        if let Some(note) = note {
            s.push_str(&format!(" -- {note}"));
        }
        s.push('\n');
    }
    s.push_str(");\n");
    s
}

/// The words of a text that relevance compares: lower-case alphanumeric runs, split at
/// underscores, of two letters or more, not stop words, with a plural `s` dropped.
pub fn terms(text: &str) -> BTreeSet<String> {
    const STOP: &[&str] = &[
        "the", "of", "and", "or", "in", "on", "for", "to", "is", "are", "was", "were", "what",
        "which", "who", "whom", "how", "many", "much", "with", "by", "an", "as", "at", "from",
        "that", "this", "these", "those", "all", "each", "every", "any", "their", "its", "it",
        "do", "does", "did", "have", "has", "had", "be", "been", "me", "list", "show", "give",
        "find", "return", "number", "count", "name", "names", "id",
    ];
    let mut out = BTreeSet::new();
    let mut word = String::new();
    let mut flush = |w: &mut String| {
        let lw = w.to_lowercase();
        w.clear();
        if lw.chars().count() < 2 || STOP.contains(&lw.as_str()) {
            return;
        }
        let stem = if lw.len() > 3 && lw.ends_with('s') && !lw.ends_with("ss") {
            lw[..lw.len() - 1].to_string()
        } else {
            lw
        };
        out.insert(stem);
    };
    for ch in text.chars() {
        if ch.is_alphanumeric() {
            // camelCase boundaries split too.
            if ch.is_uppercase() && word.chars().last().is_some_and(|p| p.is_lowercase()) {
                flush(&mut word);
            }
            word.push(ch);
        } else {
            flush(&mut word);
        }
    }
    flush(&mut word);
    out
}

/// How well `r` matches the question's terms: name hits weigh most, then column names,
/// then the notes shown (comments, or descriptions in their place).
fn relevance(r: &Relation, question: &BTreeSet<String>) -> usize {
    RelationTerms::of(r).relevance(question)
}

/// The terms relevance compares of one relation: its name's, its columns', and its notes'.
#[derive(Clone, Debug)]
struct RelationTerms {
    name: BTreeSet<String>,
    columns: BTreeSet<String>,
    notes: BTreeSet<String>,
}

impl RelationTerms {
    fn of(r: &Relation) -> RelationTerms {
        let mut columns = BTreeSet::new();
        let mut notes = BTreeSet::new();
        for c in &r.columns {
            columns.extend(terms(&c.name));
            notes.extend(terms(
                shown_note(c.comment.as_deref(), c.description.as_deref()).unwrap_or(""),
            ));
        }
        notes.extend(terms(
            shown_note(r.comment.as_deref(), r.description.as_deref()).unwrap_or(""),
        ));
        RelationTerms {
            name: terms(&r.name),
            columns,
            notes,
        }
    }

    fn relevance(&self, question: &BTreeSet<String>) -> usize {
        let hits = |t: &BTreeSet<String>| t.intersection(question).count();
        4 * hits(&self.name) + 2 * hits(&self.columns) + hits(&self.notes)
    }
}

/// What choosing a prompt's relations reads of a snapshot, whatever the question: per
/// relation [`CatalogSnapshot::visible`] offers, in its order, the size of its DDL and the
/// terms relevance compares. At a thousand tables, or a few of a thousand columns, these
/// cost more than the rest of a prompt, so an ask's first prompt and its repairs (and
/// every later ask of the role) share one, built with its language.
#[derive(Clone, Debug)]
pub struct SchemaIndex {
    sizes: Vec<usize>,
    /// Built at the first question that needs it (the DDL exceeds the budget).
    terms: std::sync::OnceLock<Vec<RelationTerms>>,
}

impl SchemaIndex {
    pub fn of(snapshot: &CatalogSnapshot, is_reserved: &dyn Fn(&str) -> bool) -> SchemaIndex {
        let (offered, _) = snapshot.visible();
        let all = written_names(&offered, is_reserved);
        // Sizes are measured with every relation shown: foreign keys only shrink when
        // neighbours are dropped, so the budget holds.
        let sizes = offered
            .iter()
            .map(|o| relation_ddl(o.relation, &all, is_reserved).len() + 1)
            .collect();
        SchemaIndex {
            sizes,
            terms: std::sync::OnceLock::new(),
        }
    }
}

/// The relations to show in the prompt within `budget` bytes of DDL (as `size` measures
/// each), in their original order. All of them when they fit; otherwise first those that
/// match the question best, then the foreign-key neighbours of those (so joins stay
/// writable), then the rest in order, each taken while it fits.
pub fn trim_by_relevance<'r>(
    relations: &[&'r Relation],
    question: &str,
    budget: usize,
    size: &dyn Fn(&Relation) -> usize,
) -> Vec<&'r Relation> {
    let sizes: Vec<usize> = relations.iter().map(|r| size(r)).collect();
    choose(relations, &sizes, question, budget, &|q| {
        relations.iter().map(|r| relevance(r, q)).collect()
    })
}

/// [`trim_by_relevance`] with the relations' sizes measured, and `scores` giving their
/// relevance to the question's terms (asked only once the sizes exceed the budget).
fn choose<'r>(
    relations: &[&'r Relation],
    sizes: &[usize],
    question: &str,
    budget: usize,
    scores: &dyn Fn(&BTreeSet<String>) -> Vec<usize>,
) -> Vec<&'r Relation> {
    if sizes.iter().sum::<usize>() <= budget {
        return relations.to_vec();
    }
    let scores = scores(&terms(question));
    let mut relevant: Vec<usize> = (0..relations.len()).filter(|&i| scores[i] > 0).collect();
    relevant.sort_by_key(|&i| (std::cmp::Reverse(scores[i]), i));
    let linked = |a: &Relation, b: &Relation| {
        a.foreign_keys
            .iter()
            .any(|fk| fk.ref_table == b.name && fk.ref_schema == b.schema)
            || b.foreign_keys
                .iter()
                .any(|fk| fk.ref_table == a.name && fk.ref_schema == a.schema)
    };
    let mut neighbours: Vec<usize> = (0..relations.len())
        .filter(|&i| scores[i] == 0 && relevant.iter().any(|&j| linked(relations[i], relations[j])))
        .collect();
    neighbours.sort_by_key(|&i| {
        let best = relevant
            .iter()
            .position(|&j| linked(relations[i], relations[j]))
            .unwrap_or(usize::MAX);
        (best, i)
    });
    let rest: Vec<usize> = (0..relations.len())
        .filter(|i| scores[*i] == 0 && !neighbours.contains(i))
        .collect();
    let mut taken = vec![false; relations.len()];
    let mut used = 0;
    for i in relevant.into_iter().chain(neighbours).chain(rest) {
        if used + sizes[i] <= budget {
            used += sizes[i];
            taken[i] = true;
        }
    }
    relations
        .iter()
        .zip(taken)
        .filter(|(_, t)| *t)
        .map(|(r, _)| *r)
        .collect()
}

/// The schema part of the prompt: DDL of the role's visible relations (those off the search
/// path as `schema.name`), trimmed to `budget` bytes by relevance to `question`.
pub fn schema_ddl(
    snapshot: &CatalogSnapshot,
    question: &str,
    budget: usize,
    is_reserved: &dyn Fn(&str) -> bool,
) -> String {
    let index = SchemaIndex::of(snapshot, is_reserved);
    schema_ddl_in(snapshot, &index, question, budget, is_reserved)
}

/// [`schema_ddl`] with the snapshot's [`SchemaIndex`] (built with the same `is_reserved`).
pub fn schema_ddl_in(
    snapshot: &CatalogSnapshot,
    index: &SchemaIndex,
    question: &str,
    budget: usize,
    is_reserved: &dyn Fn(&str) -> bool,
) -> String {
    let (offered, _) = snapshot.visible();
    let all = written_names(&offered, is_reserved);
    let visible: Vec<&Relation> = offered.iter().map(|o| o.relation).collect();
    let kept = if index.sizes.len() == visible.len() {
        choose(&visible, &index.sizes, question, budget, &|q| {
            index
                .terms
                .get_or_init(|| visible.iter().map(|r| RelationTerms::of(r)).collect())
                .iter()
                .map(|t| t.relevance(q))
                .collect()
        })
    } else {
        // An index of another snapshot: measured afresh.
        let size = |r: &Relation| relation_ddl(r, &all, is_reserved).len() + 1;
        trim_by_relevance(&visible, question, budget, &size)
    };
    let kept_keys: BTreeSet<(&str, &str)> = kept
        .iter()
        .map(|r| (r.schema.as_str(), r.name.as_str()))
        .collect();
    let shown: Shown<'_> = all
        .into_iter()
        .filter(|(k, _)| kept_keys.contains(k))
        .collect();
    kept.iter()
        .map(|r| relation_ddl(r, &shown, is_reserved))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A prompt in its two parts, as a chat template takes them: what the model is told to
/// do (the system message), and the schema, the question and, for a repair, the rejected
/// statement and why (the user message). The user part never carries an instruction of
/// its own beyond the question's data; the system part never carries schema text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    pub system: String,
    pub user: String,
}

/// The instruction of every prompt.
const ANSWER: &str =
    "Answer the question below with one PostgreSQL statement over these tables only.";

/// The instruction a repair adds.
const CORRECT: &str = "Write a corrected statement.";

/// The instruction that teaches the decline (`grammars/postgres.y`, `decline_statement`),
/// shown only when the ask's setting says so ([`Prompt::teaching_decline`]): one line,
/// with the form written out, for a small model to copy.
pub const DECLINE: &str = "If these tables cannot answer it, write only CANNOT ANSWER \
     'reason' instead, the reason in a few plain words (letters, digits, spaces, \
     punctuation; no quotes), e.g. CANNOT ANSWER 'no table holds weather data'.";

impl Prompt {
    /// This prompt teaching the decline too: [`DECLINE`] on the line after the first
    /// line of the system part (the instruction of every prompt), so that a repair's
    /// system part still begins with its first prompt's. The user part is unchanged.
    pub fn teaching_decline(self) -> Prompt {
        let system = match self.system.split_once('\n') {
            Some((first, rest)) => format!("{first}\n{DECLINE}\n{rest}"),
            None => format!("{}\n{DECLINE}", self.system),
        };
        Prompt { system, ..self }
    }

    /// The prompt as one text for a model without a chat template: the system part as an
    /// SQL comment, the user part, and `-- SQL:` for the model to continue.
    pub fn flat(&self) -> String {
        let system: String = self.system.lines().map(|l| format!("-- {l}\n")).collect();
        format!("{system}{}-- SQL:\n", self.user)
    }
}

/// A worked example shown to the model before the question: a question and the statement
/// that answers it. The host chooses them (in the extension: curated examples that lie in
/// the asker's language and pass its judge); the prompt only renders them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Example {
    pub question: String,
    pub sql: String,
}

/// The examples as question/SQL pairs, each question on one line, each statement as
/// written (its line breaks kept: they are part of the SQL).
fn examples_text(examples: &[Example]) -> String {
    let mut s = String::new();
    if examples.is_empty() {
        return s;
    }
    s.push_str("-- Examples of questions answered over these tables:\n");
    for e in examples {
        s.push_str(&format!(
            "-- Example:\n{}\n-- SQL:\n{}\n",
            one_line(&e.question),
            prompt_text(e.sql.trim(), false)
        ));
    }
    s.push('\n');
    s
}

/// The user part's schema, examples and question.
fn schema_and_question(
    snapshot: &CatalogSnapshot,
    index: Option<&SchemaIndex>,
    q: &str,
    budget: usize,
    examples: &[Example],
    is_reserved: &dyn Fn(&str) -> bool,
) -> String {
    let ddl = match index {
        Some(index) => schema_ddl_in(snapshot, index, q, budget, is_reserved),
        None => schema_ddl(snapshot, q, budget, is_reserved),
    };
    format!(
        "-- PostgreSQL tables visible to role {role}\n{ddl}\n{examples}-- Question:\n{q}\n",
        role = one_line(&snapshot.role),
        examples = examples_text(examples),
        q = question_text(q),
    )
}

/// The first prompt for `question`.
pub fn question_prompt(
    snapshot: &CatalogSnapshot,
    question: &str,
    budget: usize,
    is_reserved: &dyn Fn(&str) -> bool,
) -> Result<Prompt, PromptError> {
    question_prompt_with(snapshot, question, budget, &[], is_reserved)
}

/// The first prompt for `question`, with `examples` before it.
pub fn question_prompt_with(
    snapshot: &CatalogSnapshot,
    question: &str,
    budget: usize,
    examples: &[Example],
    is_reserved: &dyn Fn(&str) -> bool,
) -> Result<Prompt, PromptError> {
    question_prompt_in(snapshot, None, question, budget, examples, is_reserved)
}

/// [`question_prompt_with`], with the snapshot's [`SchemaIndex`] when one is kept.
pub fn question_prompt_in(
    snapshot: &CatalogSnapshot,
    index: Option<&SchemaIndex>,
    question: &str,
    budget: usize,
    examples: &[Example],
    is_reserved: &dyn Fn(&str) -> bool,
) -> Result<Prompt, PromptError> {
    let q = clean_question(question)?;
    Ok(Prompt {
        system: ANSWER.to_string(),
        user: schema_and_question(snapshot, index, q, budget, examples, is_reserved),
    })
}

/// The repair prompt: the question prompt, the rejected statement and why it was rejected
/// (the checker's violations, or the message of a later judge), each reason on one line.
pub fn repair_prompt<R: std::fmt::Display>(
    snapshot: &CatalogSnapshot,
    question: &str,
    budget: usize,
    rejected_sql: &str,
    reasons: &[R],
    is_reserved: &dyn Fn(&str) -> bool,
) -> Result<Prompt, PromptError> {
    repair_prompt_with(
        snapshot,
        question,
        budget,
        &[],
        rejected_sql,
        reasons,
        is_reserved,
    )
}

/// The repair prompt of a question asked with `examples`.
pub fn repair_prompt_with<R: std::fmt::Display>(
    snapshot: &CatalogSnapshot,
    question: &str,
    budget: usize,
    examples: &[Example],
    rejected_sql: &str,
    reasons: &[R],
    is_reserved: &dyn Fn(&str) -> bool,
) -> Result<Prompt, PromptError> {
    let rejected = Rejected {
        sql: rejected_sql,
        reasons,
    };
    repair_prompt_in(
        snapshot,
        None,
        question,
        budget,
        examples,
        &rejected,
        is_reserved,
    )
}

/// A rejected statement and why, as a repair prompt quotes them.
pub struct Rejected<'a, R> {
    pub sql: &'a str,
    pub reasons: &'a [R],
}

/// [`repair_prompt_with`], with the snapshot's [`SchemaIndex`] when one is kept.
pub fn repair_prompt_in<R: std::fmt::Display>(
    snapshot: &CatalogSnapshot,
    index: Option<&SchemaIndex>,
    question: &str,
    budget: usize,
    examples: &[Example],
    rejected: &Rejected<'_, R>,
    is_reserved: &dyn Fn(&str) -> bool,
) -> Result<Prompt, PromptError> {
    let (rejected_sql, reasons) = (rejected.sql, rejected.reasons);
    let q = clean_question(question)?;
    let mut user = schema_and_question(snapshot, index, q, budget, examples, is_reserved);
    user.push_str(&format!(
        "-- This statement was rejected:\n-- {}\n-- because:\n",
        one_line(rejected_sql)
    ));
    for r in reasons {
        user.push_str(&format!("-- - {}\n", one_line(&r.to_string())));
    }
    Ok(Prompt {
        system: format!("{ANSWER}\n{CORRECT}"),
        user,
    })
}
