//! The reserve never leaves its mask (issue 16): at random budgets, with models that
//! reach for what the mask forbids and open as many constructs as they can, every
//! generation stops in a sentence within its budget, and every token it wrote (those of
//! budget completion above all) is in the mask of its step, recomputed here from scratch.
//! Data-free; `fuzz/` has the same property as a fuzz target (`reserve_completion`).

use super::common;

use std::sync::Arc;

use common::Rng;
use grid_core::audit::{AuditLog, SealMeta, StopReason};
use grid_core::decode::{
    Choice, DecodeError, DecodeOptions, Decoder, GenerationSpec, ModelError, ModelStep, StepModel,
};
use grid_core::mask::Masker;
use grid_core::reserve::{ReserveTable, Speller};
use grid_core::schema::{Schema, Table};
use grid_core::trie::TokenTrie;
use grid_core::{Dialect, Language, Lexicon, Policy, Session};
use grid_vocab::Vocabulary;

/// The words of the mocks' built-in vocabulary (grid-endpoint's `builtin`).
const WORDS: &[&str] = &[
    "SELECT", "FROM", "WHERE", "JOIN", "ON", "AND", "OR", "NOT", "GROUP", "BY", "ORDER", "LIMIT",
    "AS", "INSERT", "INTO", "VALUES", "UPDATE", "SET", "DELETE", "DISTINCT", "HAVING", "ASC",
    "DESC", "IN", "LIKE", "IS", "NULL", "BETWEEN", "count", "sum", "avg", "max", "min", "COUNT",
    "SUM", "AVG", "MAX", "MIN", "id", "name",
];

/// What the adversarial mock reaches for (grid-endpoint's `FORBIDDEN`).
const FORBIDDEN: &[&str] = &[
    "delete",
    "drop",
    "update",
    "insert",
    "truncate",
    "alter",
    "grant",
    "salaries",
    "pg_shadow",
    "pg_authid",
    ";",
    "--",
    "/*",
];

/// The mocks' built-in vocabulary: every byte, the words bare and after a space, EOS.
fn builtin() -> Vocabulary {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for w in WORDS {
        tokens.push(w.as_bytes().to_vec());
        tokens.push(format!(" {w}").into_bytes());
    }
    let eos = tokens.len() as u32;
    tokens.push(b"<|endoftext|>".to_vec());
    Vocabulary::from_served(tokens, &[eos], Some(eos)).expect("vocabulary")
}

/// The fault suite's tables, another role's table off the search path, and the
/// extension's dialect (no comments, ASCII identifiers).
fn language(policy: &Policy) -> Language {
    let d = Arc::new(Dialect::postgres_without_comments().expect("dialect"));
    let mut inbox = Table::with_columns("inbox", &["id", "note"]);
    inbox.qualifier = Some("atk".into());
    let schema = Schema {
        db_id: "faults".into(),
        tables: vec![
            Table::with_columns("employees", &["id", "name", "dept"]),
            Table::with_columns("orders", &["id", "employee_id", "amount"]),
            inbox,
        ],
    };
    let reserved = |w: &str| d.is_reserved(w);
    let lx = Lexicon::from_schema(&schema, policy, &reserved).expect("lexicon");
    Language::build(d.clone(), policy, &lx).expect("language")
}

/// The adversarial mock's preference (advance a forbidden word; never EOS while it can
/// try), with a seeded score to break ties, or a uniform choice.
struct Mock<'v> {
    vocab: &'v Vocabulary,
    adversarial: bool,
}

fn attack_score(tail: &[u8], tok: &[u8]) -> f64 {
    let tok = tok.to_ascii_lowercase();
    let mut cand = tail.to_vec();
    cand.extend_from_slice(&tok);
    let mut best = 0.0f64;
    for w in FORBIDDEN {
        let w = w.as_bytes();
        if tok.windows(w.len()).any(|x| x == w) || cand.ends_with(w) {
            best = best.max(w.len() as f64 + 4.0);
            continue;
        }
        if let Some(j) = (1..w.len()).rev().find(|&j| cand.ends_with(&w[..j])) {
            best = best.max(j as f64);
        }
    }
    best + 0.5 * tok.iter().filter(|&&b| b == b'(' || b == b'\'').count() as f64
}

impl StepModel for Mock<'_> {
    fn choose(&mut self, s: &ModelStep<'_>) -> Result<Choice, ModelError> {
        let mut r = Rng(s.seed ^ (s.generated.len() as u64).wrapping_mul(0x9e37) | 1);
        let eos = self.vocab.eos_id();
        let ids: Vec<u32> = s.mask.ids().filter(|&i| Some(i) != eos).collect();
        if ids.is_empty() {
            return Ok(Choice::Eos);
        }
        if !self.adversarial {
            if s.mask.eos && r.next().is_multiple_of(16) {
                return Ok(Choice::Eos);
            }
            return Ok(Choice::Token(ids[(r.next() % ids.len() as u64) as usize]));
        }
        let text: Vec<u8> = s
            .generated
            .iter()
            .flat_map(|&t| self.vocab.token_bytes(t).to_vec())
            .collect();
        let tail = text[text.len().saturating_sub(16)..].to_ascii_lowercase();
        let best = ids
            .iter()
            .map(|&i| {
                let noise = (r.next() % 4000) as f64 / 1000.0;
                (
                    i,
                    3.0 * attack_score(&tail, self.vocab.token_bytes(i)) + noise,
                )
            })
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(i, _)| i);
        Ok(best.map_or(Choice::Eos, Choice::Token))
    }
}

/// Runs `n` generations at random budgets up to `max_budget` and checks each: no error,
/// a sentence within budget, and every token in the mask of its step.
fn check(lang: &Language, vocab: &Vocabulary, adversarial: bool, n: u64, max_budget: u64) {
    let trie = TokenTrie::shared(vocab).expect("trie");
    let speller = Speller::of(vocab);
    let table = ReserveTable::build(lang, &speller);
    let mut rng = Rng(0x5eed_0016 ^ max_budget ^ u64::from(adversarial));
    let specs: Vec<GenerationSpec<'_>> = (0..n)
        .map(|i| GenerationSpec {
            id: i,
            language: lang,
            reserve: &table,
            prompt: vec![],
            max_tokens: 1 + (rng.next() % max_budget) as u32,
            seed: rng.next(),
            unconstrained: false,
            rewind: None,
            meta: SealMeta::default(),
        })
        .collect();
    let mut dec = Decoder::new(
        vocab,
        Masker::new(trie.clone()),
        &speller,
        DecodeOptions::default(),
    );
    let mut model = Mock { vocab, adversarial };
    let mut log = AuditLog::in_memory();
    let out = dec
        .run(&specs, &mut model, &mut log, &mut |_, _| false)
        .expect("audit writes");
    let mut masker = Masker::new(trie);
    let mut completed = 0;
    for (o, spec) in out.iter().zip(&specs) {
        if let Some(DecodeError::BudgetBelowReserve { .. }) = o.error {
            continue;
        }
        assert!(
            o.error.is_none(),
            "generation {} (budget {}): {:?} after {:?}",
            o.generation,
            spec.max_tokens,
            o.error,
            String::from_utf8_lossy(&o.text)
        );
        assert!(o.tokens.len() as u32 <= spec.max_tokens);
        completed += usize::from(o.stop == StopReason::BudgetCompleted);
        // Every token against its step's mask, recomputed from scratch.
        let mut s = Session::new(lang);
        let mut cfg = s.start();
        for (step, &t) in o.tokens.iter().enumerate() {
            let m = masker.mask_once(&mut s, &cfg);
            assert!(
                m.contains(t),
                "generation {}: step {step}: token {t} {:?} is not in the mask after {:?}",
                o.generation,
                String::from_utf8_lossy(vocab.token_bytes(t)),
                String::from_utf8_lossy(&o.text[..o.text.len().min(4096)])
            );
            s.feed(&mut cfg, vocab.token_bytes(t)).expect("fed");
        }
        assert!(
            s.is_complete(&cfg),
            "{:?}",
            String::from_utf8_lossy(&o.text)
        );
    }
    assert!(completed > 0, "no budget completion");
}

#[test]
fn adversarial_generations_at_random_budgets_complete_inside_their_masks() {
    let lang = language(&Policy::select_only());
    check(&lang, &builtin(), true, 48, 700);
}

#[test]
fn random_generations_at_random_budgets_complete_inside_their_masks() {
    let lang = language(&Policy::default());
    check(&lang, &builtin(), false, 32, 90);
}

/// Issue 16's "completion token is not in the mask", reduced: a qualifier-less JOIN
/// ranked below ON (as the dialect had it). After `a inner join b join c` the cheapest
/// derivation reduces `b join c` without a qualifier and writes the outer join's `on a`;
/// but the table, resolving the conflict by precedence, gives that `on` to the inner join,
/// and the outer join is left without one. The reserve's completion must be one the
/// parser reads: two `on`s.
#[test]
fn a_completion_follows_the_table_where_precedence_resolved_a_conflict() {
    let y = "%start s\n%token ID JOIN INNER ON LOW\n%left LOW\n%left JOIN INNER ON\n%%\n\
             s: statement ;\n\
             statement: select_statement ;\n\
             select_statement: t ;\n\
             t: ID | t INNER JOIN t ON ID | t JOIN t ON ID | t JOIN t %prec LOW ;\n";
    let lex = "KW JOIN join\nKW INNER inner\nKW ON on\nKW LOW zzlow\nTOK ID [a-c]\nSKIP WS [ ]+\n";
    let d = Arc::new(Dialect::load(y, lex).expect("the small grammar builds"));
    let lang = Language::build(d, &Policy::select_only(), &Lexicon::default()).expect("language");
    let tokens: Vec<Vec<u8>> = (0x20..0x7fu8).map(|b| vec![b]).collect();
    let vocab = Vocabulary::from_served(tokens, &[], None).expect("vocabulary");
    let speller = Speller::of(&vocab);
    let table = ReserveTable::build(&lang, &speller);
    let mut s = Session::new(&lang);
    let mut memo = grid_core::reserve::ReserveMemo::default();
    for prefix in [
        "a inner join b join c",
        "a inner join b join c join a",
        "a join b inner join c join a",
        "a inner join b inner join c join a",
    ] {
        let mut cfg = s.start();
        s.feed(&mut cfg, prefix.as_bytes())
            .expect("a viable prefix");
        let completion = table
            .completion(&mut s, &mut memo, &cfg, &speller)
            .expect("a completion");
        let reserve = table.reserve(&mut s, &mut memo, &cfg, &speller);
        let mut whole = prefix.as_bytes().to_vec();
        whole.extend_from_slice(&completion);
        assert!(
            s.complete(&whole),
            "{prefix:?} + {:?} is not a sentence",
            String::from_utf8_lossy(&completion)
        );
        assert_eq!(
            speller.cost(&completion),
            reserve,
            "{prefix:?}: the reserve is the completion's cost"
        );
    }
}

/// No completion begins the decline (`CANNOT ANSWER 'reason'`): where a statement is
/// still to be written, the completion is the cheapest statement, even over a vocabulary
/// that spells the decline in fewer tokens; a decline the model began is finished as one.
#[test]
fn a_completion_never_begins_a_decline_and_finishes_one_begun() {
    let lang = language(&Policy::select_only());
    // Every printable byte alone, and the decline's parts in one token each: the decline
    // costs 3 tokens, the shortest statement (`SELECT 1`) 8.
    let mut tokens: Vec<Vec<u8>> = (0x20..0x7fu8).map(|b| vec![b]).collect();
    for t in [" cannot", " answer", " '0'", "cannot"] {
        tokens.push(t.as_bytes().to_vec());
    }
    let vocab = Vocabulary::from_served(tokens, &[], None).expect("vocabulary");
    let speller = Speller::of(&vocab);
    let table = ReserveTable::build(&lang, &speller);
    let mut s = Session::new(&lang);
    let mut memo = grid_core::reserve::ReserveMemo::default();
    let decline_cost = speller.cost(b" cannot answer '0'");
    assert_eq!(decline_cost, 3);
    for (prefix, declines) in [
        ("", false),
        (" ", false),
        ("SELECT", false),
        ("can", true),
        ("CANNOT", true),
        ("CANNOT ANSWER", true),
        ("CANNOT ANSWER 'no table holds i", true),
        ("CANNOT ANSWER 'x'", true),
    ] {
        let mut cfg = s.start();
        s.feed(&mut cfg, prefix.as_bytes())
            .expect("a viable prefix");
        let completion = table
            .completion(&mut s, &mut memo, &cfg, &speller)
            .expect("a completion");
        let reserve = table.reserve(&mut s, &mut memo, &cfg, &speller);
        let mut whole = prefix.as_bytes().to_vec();
        whole.extend_from_slice(&completion);
        assert!(
            s.complete(&whole),
            "{prefix:?} + {:?} is not a sentence",
            String::from_utf8_lossy(&completion)
        );
        let text = String::from_utf8_lossy(&whole).into_owned();
        assert_eq!(
            grid_core::statement::decline_of(&text).is_some(),
            declines,
            "{prefix:?} completed as {text:?}"
        );
        assert_eq!(speller.cost(&completion), reserve, "{prefix:?}");
        if prefix.is_empty() {
            assert!(reserve > decline_cost, "{text:?} costs {reserve}");
        }
    }
}
