//! The decode loop: termination by the token reserve (tiny budgets, random and adversarial
//! models, the reserve against a brute-force search over masks), EOS only at ACCEPT, the
//! audit log of every run verified and replayed bit for bit, deferral equivalence,
//! cancellation and model failures. Data-free.

mod common;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use common::{dialect, Rng};
use grid_core::audit::{
    replay, verify, AuditLog, Entry, SealMeta, StepKind, StopReason, VerifyOptions,
};
use grid_core::decode::{
    Choice, DecodeError, DecodeOptions, Decoder, GenerationSpec, Model, ModelError, ModelStep,
    Outcome, Recomputer,
};
use grid_core::mask::Masker;
use grid_core::reserve::{ReserveMemo, ReserveTable, Speller, UNREACHABLE};
use grid_core::schema::{Schema, Table};
use grid_core::trie::TokenTrie;
use grid_core::{Config, Language, Lexicon, Policy, Session};
use grid_vocab::Vocabulary;

const EOS: u32 = 0;

#[rustfmt::skip]
const FRAGMENTS: &[&str] = &[
    "SELECT", " SELECT", " FROM", " WHERE", " name", " *", " emplo", "yees", " employees",
    " orders", " id", " total", " =", " (", "(", ")", " )", " count", " 1", "1", " 'x'", "'",
    " AND", " OR", " NOT", " IN", " GROUP", " BY", " ORDER", " LIMIT", " AS", " T1", ".",
    " ,", ",", " <", " >", " +", " -", "((", "(((", " ((((", " JOIN", " ON", " UNION", " 2",
    " IS", " NULL", " LIKE", " DESC", " DISTINCT", " max", " min", "_", " e", " x", " delete",
    " drop", ";", " --", " /*", "*/", "\n", " salaries", " CASE", " WHEN", " THEN", " END",
];

/// Every printable byte, the fragments above, and EOS.
fn vocab() -> Vocabulary {
    let mut toks: Vec<Vec<u8>> = vec![b"<eos>".to_vec()];
    toks.extend((0x20..=0x7eu8).map(|b| vec![b]));
    toks.extend(FRAGMENTS.iter().map(|f| f.as_bytes().to_vec()));
    Vocabulary::from_served(toks, &[EOS], Some(EOS)).expect("vocabulary")
}

fn hr_language(policy: &Policy) -> Language {
    let d = dialect();
    let schema = Schema {
        db_id: "hr".into(),
        tables: vec![
            Table::with_columns("employees", &["id", "name", "salary"]),
            Table::with_columns("orders", &["id", "total", "employee_id"]),
        ],
    };
    let reserved = |w: &str| d.is_reserved(w);
    let lx = Lexicon::from_schema(&schema, policy, &reserved).expect("lexicon");
    Language::build(d.clone(), policy, &lx).expect("language")
}

fn select_only() -> Policy {
    Policy::from_json(r#"{"verbs":["select"]}"#).expect("policy")
}

/// Chooses uniformly among the allowed ids (EOS with probability 1/8 when allowed).
struct RandomModel {
    calls: u64,
}

/// Never ends on its own; prefers the longest tokens, and among those the ones that open
/// parentheses or begin forbidden words, so that reserves grow as fast as they can.
struct AdversarialModel {
    vocab: Vocabulary,
}

fn mix(a: u64, b: u64) -> u64 {
    let mut r = Rng(a ^ b.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    r.next();
    r.next()
}

impl Model for RandomModel {
    fn step(
        &mut self,
        batch: &[ModelStep<'_>],
    ) -> Result<Vec<Result<Choice, ModelError>>, ModelError> {
        self.calls += 1;
        Ok(batch
            .iter()
            .map(|s| {
                let h = mix(s.seed, s.generated.len() as u64);
                if s.mask.eos && h.is_multiple_of(8) {
                    return Ok(Choice::Eos);
                }
                let ids: Vec<u32> = s.mask.ids().filter(|&i| i != EOS).collect();
                if ids.is_empty() {
                    return Ok(Choice::Eos);
                }
                Ok(Choice::Token(ids[(h >> 8) as usize % ids.len()]))
            })
            .collect())
    }

    fn round_trips(&self) -> u64 {
        self.calls
    }
}

impl Model for AdversarialModel {
    fn step(
        &mut self,
        batch: &[ModelStep<'_>],
    ) -> Result<Vec<Result<Choice, ModelError>>, ModelError> {
        Ok(batch
            .iter()
            .map(|s| {
                let score = |id: u32| {
                    let b = self.vocab.token_bytes(id);
                    let opens = b.iter().filter(|&&c| c == b'(').count() as u64;
                    let bad = [&b"delete"[..], b"drop", b";", b"--", b"/*", b"salaries"]
                        .iter()
                        .any(|w| b.windows(w.len()).any(|x| x == *w));
                    (opens * 100 + u64::from(bad) * 50 + b.len() as u64) * 1000
                        + mix(s.seed ^ u64::from(id), s.generated.len() as u64) % 1000
                };
                let best = s.mask.ids().filter(|&i| i != EOS).max_by_key(|&i| score(i));
                Ok(best.map_or(Choice::Eos, Choice::Token))
            })
            .collect())
    }
}

/// A model that fails: the whole batch on call `fail_call`, and generation 3 always.
struct FlakyModel {
    calls: u64,
    fail_call: u64,
}

impl Model for FlakyModel {
    fn step(
        &mut self,
        batch: &[ModelStep<'_>],
    ) -> Result<Vec<Result<Choice, ModelError>>, ModelError> {
        self.calls += 1;
        if self.calls == self.fail_call {
            return Err(ModelError("connection reset".into()));
        }
        Ok(batch
            .iter()
            .map(|s| {
                if s.generation == 3 {
                    Err(ModelError("bad reply".into()))
                } else {
                    Ok(Choice::Token(
                        s.mask.ids().find(|&i| i != EOS).unwrap_or(EOS),
                    ))
                }
            })
            .collect())
    }
}

/// Writes `script[k]` at output position `k` when allowed, then ends as soon as EOS is.
struct ScriptModel(Vec<u32>);

impl Model for ScriptModel {
    fn step(
        &mut self,
        batch: &[ModelStep<'_>],
    ) -> Result<Vec<Result<Choice, ModelError>>, ModelError> {
        Ok(batch
            .iter()
            .map(|s| match self.0.get(s.generated.len()) {
                Some(&t) if s.mask.contains(t) => Ok(Choice::Token(t)),
                _ if s.mask.eos => Ok(Choice::Eos),
                _ => Ok(Choice::Token(
                    s.mask.ids().find(|&i| i != EOS).unwrap_or(EOS),
                )),
            })
            .collect())
    }
}

/// Shared set-up of a run over one language.
struct Bench {
    vocab: Vocabulary,
    trie: Arc<TokenTrie>,
    speller: Speller,
    lang: Language,
    table: ReserveTable,
}

impl Bench {
    fn new(policy: &Policy) -> Bench {
        Bench::with_vocab(policy, vocab())
    }

    fn with_vocab(policy: &Policy, vocab: Vocabulary) -> Bench {
        let trie = TokenTrie::shared(&vocab).expect("trie");
        let speller = Speller::of(&vocab);
        let lang = hr_language(policy);
        let table = ReserveTable::build(&lang, &speller);
        Bench {
            vocab,
            trie,
            speller,
            lang,
            table,
        }
    }

    fn specs(&self, n: u64, budget: impl Fn(u64) -> u32) -> Vec<GenerationSpec<'_>> {
        (0..n)
            .map(|i| GenerationSpec {
                id: i,
                language: &self.lang,
                reserve: &self.table,
                prompt: vec![],
                max_tokens: budget(i),
                seed: 1000 + i,
                meta: SealMeta::default(),
            })
            .collect()
    }

    fn run(
        &self,
        specs: &[GenerationSpec<'_>],
        model: &mut dyn Model,
        options: DecodeOptions,
    ) -> (Vec<Outcome>, AuditLog) {
        let mut log = AuditLog::in_memory();
        let mut dec = Decoder::new(
            &self.vocab,
            Masker::new(self.trie.clone()),
            &self.speller,
            options,
        );
        let out = dec
            .run(specs, model, &mut log, &mut |_, _| false)
            .expect("audit writes");
        (out, log)
    }

    /// Verifies the log and replays every mask from the language and vocabulary.
    fn replay(&self, log: &AuditLog) -> u64 {
        let mut rc = Recomputer::new(self.trie.clone(), &self.vocab);
        let lang = &self.lang;
        let s = replay(log.entries(), &VerifyOptions::default(), &mut |ctx| {
            rc.recompute(lang, ctx)
        })
        .expect("the log replays bit for bit");
        s.steps
    }
}

/// Every non-error stop is a parseable statement within budget; EOS records only at ACCEPT.
fn check_outcomes(b: &Bench, specs: &[GenerationSpec<'_>], out: &[Outcome]) {
    let mut s = Session::new(&b.lang);
    for (o, spec) in out.iter().zip(specs) {
        assert!(
            o.error.is_none(),
            "generation {}: {:?}",
            o.generation,
            o.error
        );
        assert!(
            matches!(o.stop, StopReason::Eos | StopReason::BudgetCompleted),
            "generation {} stopped {:?}",
            o.generation,
            o.stop
        );
        assert!(
            o.tokens.len() as u32 <= spec.max_tokens,
            "generation {}: {} tokens over a budget of {}",
            o.generation,
            o.tokens.len(),
            spec.max_tokens
        );
        assert!(
            s.complete(&o.text),
            "generation {} does not parse: {:?}",
            o.generation,
            String::from_utf8_lossy(&o.text)
        );
    }
}

#[test]
fn tiny_budgets_always_end_in_a_statement() {
    let b = Bench::new(&select_only());
    let specs = b.specs(120, |i| 8 + (i % 17) as u32);
    let mut random = RandomModel { calls: 0 };
    let (out, log) = b.run(&specs, &mut random, DecodeOptions::default());
    check_outcomes(&b, &specs, &out);
    assert!(random.round_trips() > 0);
    let completed = out
        .iter()
        .filter(|o| o.stop == StopReason::BudgetCompleted)
        .count();
    assert!(completed > 0, "tiny budgets must trigger completions");
    assert!(b.replay(&log) > 0);

    let mut adv = AdversarialModel { vocab: vocab() };
    let (out, log) = b.run(&specs, &mut adv, DecodeOptions::default());
    check_outcomes(&b, &specs, &out);
    assert!(out.iter().all(|o| o.stop == StopReason::BudgetCompleted));
    for o in &out {
        let t = String::from_utf8_lossy(&o.text).to_ascii_lowercase();
        assert!(
            !t.contains("delete") && !t.contains("drop") && !t.contains("salaries"),
            "{t}"
        );
    }
    b.replay(&log);
}

/// Configurations the brute-force search may visit before it gives up.
const BFS_CONFIGS: usize = 300_000;

/// The fewest tokens from `cfg` to a complete statement, by breadth-first search over the
/// masks themselves (`None` beyond `limit` tokens or [`BFS_CONFIGS`] configurations).
fn bfs_minimum(b: &Bench, s: &mut Session<'_>, cfg: &Config, limit: u32) -> Option<u32> {
    let mut m = Masker::new(b.trie.clone());
    let mut frontier: VecDeque<(Config, u32)> = VecDeque::from([(cfg.clone(), 0)]);
    let mut seen: HashSet<Config> = HashSet::new();
    while let Some((c, d)) = frontier.pop_front() {
        let mask = m.mask_once(s, &c);
        if mask.eos {
            return Some(d);
        }
        if d == limit {
            continue;
        }
        for id in mask.ids() {
            let mut n = c.clone();
            if seen.len() > BFS_CONFIGS {
                return None;
            }
            if s.feed(&mut n, b.vocab.token_bytes(id)).is_ok() && seen.insert(n.clone()) {
                frontier.push_back((n, d + 1));
            }
        }
    }
    None
}

#[test]
fn reserve_is_never_below_the_true_minimum() {
    // Fragments and a few single bytes: few enough ids for an exhaustive search.
    let mut toks: Vec<Vec<u8>> = vec![b"<eos>".to_vec()];
    toks.extend(FRAGMENTS.iter().map(|f| f.as_bytes().to_vec()));
    toks.extend(
        ["a", "x", "e", " ", "2", "T", "*"]
            .iter()
            .map(|f| f.as_bytes().to_vec()),
    );
    let v = Vocabulary::from_served(toks, &[EOS], Some(EOS)).expect("vocabulary");
    let b = Bench::with_vocab(&select_only(), v);
    let prefixes = [
        "",
        "SELECT",
        "SELECT name",
        "SELECT name FROM",
        "SELECT name FROM emplo",
        "SELECT count(",
        "SELECT (((",
        "SELECT name FROM employees WHERE",
        "SELECT name FROM employees WHERE id =",
        "SELECT name FROM employees WHERE id = 'x",
        "SELECT 1 /* c",
        "SELECT name AS",
        "SELECT max(id) FROM orders GROUP BY",
        "SELECT CASE WHEN",
        "SELECT name FROM employees T1 JOIN orders ON",
        "SELECT 1 UNION",
    ];
    let mut checked = 0;
    for p in prefixes {
        let mut s = Session::new(&b.lang);
        let mut cfg = s.start();
        s.feed(&mut cfg, p.as_bytes())
            .unwrap_or_else(|e| panic!("{p:?}: {e:?}"));
        let mut memo = ReserveMemo::default();
        let r = b.table.reserve(&mut s, &mut memo, &cfg, &b.speller);
        assert_ne!(r, UNREACHABLE, "{p:?}: no completion");
        let completion = b
            .table
            .completion(&mut s, &mut memo, &cfg, &b.speller)
            .expect("completion");
        let toks = b.speller.segment(&completion).expect("spelled");
        assert!(
            toks.len() as u32 <= r,
            "{p:?}: completion longer than its reserve"
        );
        let mut text = p.as_bytes().to_vec();
        text.extend_from_slice(&completion);
        assert!(
            s.complete(&text),
            "{p:?} + {:?} does not parse",
            String::from_utf8_lossy(&completion)
        );
        // Exhaustive search is affordable up to a few tokens.
        if r <= 4 {
            if let Some(min) = bfs_minimum(&b, &mut s, &cfg, r) {
                assert!(r >= min, "{p:?}: reserve {r} below the minimum {min}");
                checked += 1;
            }
        }
    }
    assert!(
        checked >= 5,
        "only {checked} prefixes were small enough to search"
    );
}

#[test]
fn deferred_masks_change_nothing_but_the_schedule() {
    let b = Bench::new(&select_only());
    let specs = b.specs(12, |i| 10 + i as u32);
    let (a, _) = b.run(
        &specs,
        &mut RandomModel { calls: 0 },
        DecodeOptions::default(),
    );
    let one = DecodeOptions {
        masks_per_tick: Some(1),
        cache: false,
    };
    let (d, log) = b.run(&specs, &mut RandomModel { calls: 0 }, one);
    assert!(
        d.iter().map(|o| o.deferred).sum::<u32>() > 0,
        "nothing waited"
    );
    for (x, y) in a.iter().zip(&d) {
        assert_eq!(
            (&x.tokens, x.stop),
            (&y.tokens, y.stop),
            "generation {}",
            x.generation
        );
    }
    b.replay(&log);
}

#[test]
fn failures_and_cancellation_are_sealed() {
    let b = Bench::new(&select_only());
    let specs = b.specs(6, |_| 40);
    let mut log = AuditLog::in_memory();
    let mut dec = Decoder::new(
        &b.vocab,
        Masker::new(b.trie.clone()),
        &b.speller,
        DecodeOptions::default(),
    );
    let mut flaky = FlakyModel {
        calls: 0,
        fail_call: 6,
    };
    let out = dec
        .run(&specs, &mut flaky, &mut log, &mut |g, n| g == 5 && n >= 1)
        .expect("audit");
    let by: HashMap<u64, &Outcome> = out.iter().map(|o| (o.generation, o)).collect();
    assert!(matches!(by[&3].error, Some(DecodeError::Model(_))));
    assert_eq!(by[&5].stop, StopReason::Cancelled);
    assert!(
        out.iter()
            .any(|o| o.stop == StopReason::Error && o.generation != 3),
        "the failed call stops its batch"
    );
    let summary = verify(log.entries(), &VerifyOptions::default()).expect("verifies");
    assert_eq!(summary.generations, 6);
    b.replay(&log);
    // Budget below the empty statement's reserve: an error before any step.
    let short = b.specs(1, |_| 1);
    let (o, _) = b.run(
        &short,
        &mut RandomModel { calls: 0 },
        DecodeOptions::default(),
    );
    assert!(
        matches!(o[0].error, Some(DecodeError::BudgetBelowReserve { .. })),
        "{:?}",
        o[0].error
    );
}

#[test]
fn forced_spans_record_every_token() {
    // After ` FROM` the only table token is ` employees`: a forced step.
    let toks = [
        "<eos>",
        " SELECT",
        " name",
        " FROM",
        " employees",
        " WHERE",
        " id",
        " =",
        " 1",
    ];
    let v = Vocabulary::from_served(
        toks.iter().map(|t| t.as_bytes().to_vec()).collect(),
        &[EOS],
        Some(EOS),
    )
    .expect("vocabulary");
    let b = Bench::with_vocab(&select_only(), v);
    let specs = b.specs(2, |_| 30);
    // ` name`, ` FROM` sampled; ` SELECT` and ` employees` are forced.
    let mut model = ScriptModel(vec![1, 2, 3]);
    let (out, log) = b.run(&specs, &mut model, DecodeOptions::default());
    check_outcomes(&b, &specs, &out);
    let texts: Vec<String> = out
        .iter()
        .map(|o| String::from_utf8_lossy(&o.text).into_owned())
        .collect();
    let forced = log
        .entries()
        .iter()
        .filter(|e| matches!(e, Entry::Step(r) if r.kind == StepKind::Forced))
        .count();
    assert_eq!(texts, vec![" SELECT name FROM employees"; 2]);
    // ` SELECT` (the only start) and ` employees` (the only table), per generation.
    assert_eq!(forced, 4);
    b.replay(&log);
}

/// The decode loop keeps one reserve memo per generation for its whole life: the reserve
/// at every step must be the one a fresh memo gives (a cost cut short at a cycle while
/// an earlier step was computed must not be remembered as final).
#[test]
fn a_memo_kept_across_steps_gives_the_fresh_reserve() {
    let b = Bench::new(&Policy::default());
    let statements = [
        "SELECT name FROM orders JOIN employees ON orders.employee_id = employees.id",
        "SELECT T2.name, T1.total FROM orders AS T1 JOIN employees AS T2 ON T1.employee_id = T2.id ORDER BY T1.total DESC LIMIT 3",
        "SELECT salary, count(*) FROM employees GROUP BY salary HAVING count(*) > 1",
        "SELECT name FROM employees WHERE id IN (SELECT employee_id FROM orders) UNION SELECT name FROM employees",
        "INSERT INTO orders (id, employee_id, total) VALUES (1, 2, 3)",
    ];
    let mut compared = 0;
    for text in statements {
        let mut s = Session::new(&b.lang);
        let mut cfg = s.start();
        let mut kept = ReserveMemo::default();
        for (i, byte) in text.bytes().enumerate() {
            s.feed(&mut cfg, &[byte])
                .unwrap_or_else(|e| panic!("{:?}: {e:?}", &text[..=i]));
            let with_kept = b.table.reserve(&mut s, &mut kept, &cfg, &b.speller);
            let fresh = b
                .table
                .reserve(&mut s, &mut ReserveMemo::default(), &cfg, &b.speller);
            assert_eq!(with_kept, fresh, "{:?}", &text[..=i]);
            compared += 1;
        }
    }
    assert!(compared > 300);
}
