//! The decode loop: termination by the token reserve (tiny budgets, random and adversarial
//! models, the reserve against a brute-force search over masks), EOS only at ACCEPT, the
//! audit log of every run verified and replayed bit for bit, deferral equivalence,
//! cancellation and model failures; generations admitted while the loop runs decode as
//! if alone and are handed back as soon as they stop. Data-free.

use crate::common;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use common::{dialect, Rng};
use grid_core::audit::{
    replay, verify, AuditLog, DecodeMode, Entry, Seal, SealInput, SealMeta, StepInput, StepKind,
    StepRecord, StopReason, Token, VerifyOptions,
};
use grid_core::decode::{
    Batch, Choice, DecodeError, DecodeOptions, Decoder, GenerationSpec, Model, ModelError,
    ModelStep, Outcome, Recomputer, Rewind, StepModel,
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

impl StepModel for AdversarialModel {
    fn choose(&mut self, s: &ModelStep<'_>) -> Result<Choice, ModelError> {
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

impl StepModel for ScriptModel {
    fn choose(&mut self, s: &ModelStep<'_>) -> Result<Choice, ModelError> {
        match self.0.get(s.generated.len()) {
            Some(&t) if s.mask.contains(t) => Ok(Choice::Token(t)),
            _ if s.mask.eos => Ok(Choice::Eos),
            _ => Ok(Choice::Token(
                s.mask.ids().find(|&i| i != EOS).unwrap_or(EOS),
            )),
        }
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
                unconstrained: false,
                rewind: None,
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

/// An unconstrained generation (the ablation): no mask, so the adversary writes what a
/// mask would refuse; the budget cuts it where it stands; it is sealed in decode mode
/// `unconstrained`, its records carry no configuration, and the log verifies and replays.
#[test]
fn an_unconstrained_generation_is_sealed_as_such_and_replays() {
    let b = Bench::new(&select_only());
    let mut specs = b.specs(6, |i| 10 + i as u32);
    for s in &mut specs {
        s.unconstrained = true;
    }
    let mut adv = AdversarialModel { vocab: vocab() };
    let (out, log) = b.run(&specs, &mut adv, DecodeOptions::default());
    let mut s = Session::new(&b.lang);
    let mut unparsable = 0;
    for (o, spec) in out.iter().zip(&specs) {
        assert_eq!(o.stop, StopReason::BudgetTruncated, "{o:?}");
        assert_eq!(o.tokens.len() as u32, spec.max_tokens);
        unparsable += u32::from(!s.complete(&o.text));
        let seal = own_seal(&log, o.generation);
        assert_eq!(seal.mode.decode, DecodeMode::Unconstrained);
        for r in steps_of(&log, o.generation) {
            assert_eq!((r.config_hash, r.blocked_count), (0, 0), "{r:?}");
            assert_eq!(r.kind, StepKind::Sampled);
        }
    }
    assert!(
        unparsable > 0,
        "without a mask the adversary writes non-statements"
    );
    assert_eq!(
        b.replay(&log),
        out.iter().map(|o| o.tokens.len() as u64).sum::<u64>()
    );

    // The random model ends some with EOS, which the full mask always allows.
    let mut random = RandomModel { calls: 0 };
    let (out, log) = b.run(&specs, &mut random, DecodeOptions::default());
    assert!(out.iter().any(|o| o.stop == StopReason::Eos), "{out:?}");
    b.replay(&log);

    // A guarded seal that claimed to be unconstrained (or the reverse) fails the replay.
    let forged: Vec<Entry> = log
        .entries()
        .iter()
        .map(|e| match e {
            Entry::Seal(s) => {
                let mut s = s.clone();
                s.mode.decode = DecodeMode::Mode1;
                s.hash = s.compute_hash();
                Entry::Seal(s)
            }
            other => other.clone(),
        })
        .collect();
    assert!(
        verify(&forged, &VerifyOptions::default()).is_err() || {
            let mut rc = Recomputer::new(b.trie.clone(), &b.vocab);
            replay(&forged, &VerifyOptions::default(), &mut |ctx| {
                rc.recompute(&b.lang, ctx)
            })
            .is_err()
        }
    );
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

/// Every generation of `a` wrote what the one of `b` at its place wrote, and stopped alike.
fn assert_same_writes(a: &[Outcome], b: &[Outcome]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert_eq!(
            (&x.tokens, x.stop),
            (&y.tokens, y.stop),
            "generation {}",
            x.generation
        );
    }
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
        ..DecodeOptions::default()
    };
    let (d, log) = b.run(&specs, &mut RandomModel { calls: 0 }, one);
    assert!(
        d.iter().map(|o| o.deferred).sum::<u32>() > 0,
        "nothing waited"
    );
    assert_same_writes(&a, &d);
    b.replay(&log);
}

/// Holding the most-served generations (a slice of zero: every tick steps only those
/// that have been served least) changes the order of their steps, never what each writes;
/// the log still verifies and replays.
#[test]
fn serving_the_least_served_first_changes_nothing_but_the_schedule() {
    let b = Bench::new(&select_only());
    let specs = b.specs(8, |i| 12 + 3 * i as u32);
    let (a, every) = b.run(
        &specs,
        &mut RandomModel { calls: 0 },
        DecodeOptions::default(),
    );
    let least_first = DecodeOptions {
        slice: Some(std::time::Duration::ZERO),
        ..DecodeOptions::default()
    };
    let (h, log) = b.run(&specs, &mut RandomModel { calls: 0 }, least_first);
    assert_same_writes(&a, &h);
    let order = |log: &AuditLog| -> Vec<u64> {
        log.entries()
            .iter()
            .map(|e| match e {
                grid_core::audit::Entry::Step(r) => r.generation,
                grid_core::audit::Entry::Seal(s) => s.generation,
            })
            .collect()
    };
    assert_ne!(order(&every), order(&log), "no generation was held");
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

/// One generation to admit at a tick of a staggered run.
struct Admission<'l> {
    tick: usize,
    spec: GenerationSpec<'l>,
}

/// What a staggered run hands back: each outcome with the tick that delivered it and the
/// generations still live at that moment.
struct Delivered {
    tick: usize,
    outcome: Outcome,
    still_live: Vec<u64>,
}

impl Bench {
    /// A loop that admits each generation at its tick (before that tick's step).
    fn staggered(
        &self,
        admissions: Vec<Admission<'_>>,
        model: &mut dyn Model,
        cancel: &mut dyn FnMut(u64, usize) -> bool,
    ) -> (Vec<Delivered>, AuditLog) {
        let mut log = AuditLog::in_memory();
        let mut dec = Decoder::new(
            &self.vocab,
            Masker::new(self.trie.clone()),
            &self.speller,
            DecodeOptions::default(),
        );
        let mut batch = Batch::new();
        let mut admissions = admissions;
        admissions.sort_by_key(|a| a.tick);
        let mut waiting: VecDeque<Admission<'_>> = admissions.into();
        let mut delivered = Vec::new();
        let mut tick = 0;
        while !batch.is_empty() || !waiting.is_empty() {
            while waiting.front().is_some_and(|a| a.tick <= tick) {
                let a = waiting.pop_front().expect("front");
                dec.admit(&mut batch, a.spec, &mut log).expect("begin");
            }
            let out = dec
                .tick(&mut batch, model, &mut log, cancel)
                .expect("audit writes");
            let still_live: Vec<u64> = batch.generations().collect();
            delivered.extend(out.into_iter().map(|outcome| Delivered {
                tick,
                outcome,
                still_live: still_live.clone(),
            }));
            tick += 1;
        }
        (delivered, log)
    }

    fn spec(&self, id: u64, max_tokens: u32) -> GenerationSpec<'_> {
        GenerationSpec {
            id,
            language: &self.lang,
            reserve: &self.table,
            prompt: vec![id as u32 % 7],
            max_tokens,
            seed: 7000 + id,
            meta: SealMeta::default(),
            unconstrained: false,
            rewind: None,
        }
    }
}

fn steps_of(log: &AuditLog, generation: u64) -> Vec<StepRecord> {
    log.entries()
        .iter()
        .filter_map(|e| match e {
            Entry::Step(r) if r.generation == generation => Some(r.clone()),
            _ => None,
        })
        .collect()
}

/// A generation's seal without the fields that chain it to the other seals.
fn own_seal(log: &AuditLog, generation: u64) -> Seal {
    let mut seal = log
        .entries()
        .iter()
        .find_map(|e| match e {
            Entry::Seal(s) if s.generation == generation => Some(s.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("generation {generation} is not sealed"));
    seal.index = 0;
    seal.prev_seal_hash = [0; 32];
    seal.hash = [0; 32];
    seal
}

fn outcome_of(delivered: &[Delivered], generation: u64) -> &Delivered {
    delivered
        .iter()
        .find(|d| d.outcome.generation == generation)
        .unwrap_or_else(|| panic!("no outcome for generation {generation}"))
}

/// Neighbours that keep the loop busy: budgets 12 to 40.
fn neighbours(b: &Bench) -> Vec<Admission<'_>> {
    (0..8)
        .map(|i| Admission {
            tick: 0,
            spec: b.spec(100 + i, 12 + 4 * i as u32),
        })
        .collect()
}

#[test]
fn a_generation_admitted_at_any_tick_decodes_as_if_alone() {
    let b = Bench::new(&select_only());
    let mut compared = 0;
    for (name, budget) in [("random", 30), ("adversarial", 14), ("adversarial", 25)] {
        let model = || -> Box<dyn Model> {
            match name {
                "random" => Box::new(RandomModel { calls: 0 }),
                _ => Box::new(AdversarialModel { vocab: vocab() }),
            }
        };
        for id in 0..3u64 {
            let target = b.spec(id, budget);
            let (alone, alone_log) = b.run(
                std::slice::from_ref(&target),
                model().as_mut(),
                DecodeOptions::default(),
            );
            for k in [0, 1, 4, 9] {
                let mut admissions = neighbours(&b);
                admissions.push(Admission {
                    tick: k,
                    spec: target.clone(),
                });
                let (delivered, log) = b.staggered(admissions, model().as_mut(), &mut |_, _| false);
                let got = &outcome_of(&delivered, id).outcome;
                let want = &alone[0];
                let what = format!("{name}, generation {id} admitted at tick {k}");
                assert_eq!(
                    (&got.tokens, &got.text, got.stop, &got.error),
                    (&want.tokens, &want.text, want.stop, &want.error),
                    "{what}"
                );
                assert_eq!(got.completed_tokens, want.completed_tokens, "{what}");
                let steps = steps_of(&log, id);
                assert!(!steps.is_empty(), "{what}: no step recorded");
                assert_eq!(steps, steps_of(&alone_log, id), "{what}: step records");
                assert_eq!(own_seal(&log, id), own_seal(&alone_log, id), "{what}: seal");
                // The neighbours were mid-flight when the target came in (k > 0).
                let first_target_step = log
                    .entries()
                    .iter()
                    .position(|e| matches!(e, Entry::Step(r) if r.generation == id))
                    .unwrap_or(0);
                let before = log.entries()[..first_target_step]
                    .iter()
                    .filter(|e| matches!(e, Entry::Step(r) if r.generation >= 100))
                    .count();
                assert!(before >= k, "{what}: {before} neighbour steps before it");
                compared += 1;
            }
        }
    }
    assert_eq!(compared, 36);
}

#[test]
fn a_short_generation_is_handed_back_before_a_long_one_stops() {
    let b = Bench::new(&select_only());
    // The adversarial model never ends on its own: each runs to its budget.
    let admissions = vec![
        Admission {
            tick: 0,
            spec: b.spec(1, 60),
        },
        Admission {
            tick: 0,
            spec: b.spec(2, 10),
        },
        // Admitted late, short: back before the long one too.
        Admission {
            tick: 5,
            spec: b.spec(3, 9),
        },
    ];
    let mut model = AdversarialModel { vocab: vocab() };
    let (delivered, log) = b.staggered(admissions, &mut model, &mut |_, _| false);
    let long = outcome_of(&delivered, 1);
    assert_eq!(long.outcome.stop, StopReason::BudgetCompleted);
    for short in [2, 3] {
        let d = outcome_of(&delivered, short);
        assert_eq!(d.outcome.stop, StopReason::BudgetCompleted, "{short}");
        assert!(
            d.tick < long.tick,
            "generation {short} handed back at tick {}, the long one at {}",
            d.tick,
            long.tick
        );
        assert!(
            d.still_live.contains(&1),
            "the long generation was still running when {short} came back"
        );
    }
    // Handed back in the order they stopped, each sealed before the next tick.
    let order: Vec<u64> = delivered.iter().map(|d| d.outcome.generation).collect();
    let seals: Vec<u64> = log
        .entries()
        .iter()
        .filter_map(|e| match e {
            Entry::Seal(s) => Some(s.generation),
            Entry::Step(_) => None,
        })
        .collect();
    assert_eq!(order, seals);
    b.replay(&log);
}

#[test]
fn admitted_generations_are_cancelled_and_completed_like_the_first() {
    let b = Bench::new(&select_only());
    let budgets = [8u32, 9, 11, 12, 15, 20];
    let admissions: Vec<Admission<'_>> = budgets
        .iter()
        .enumerate()
        .map(|(i, &budget)| Admission {
            tick: 2 * i,
            spec: b.spec(i as u64, budget),
        })
        .chain([
            // Cancelled once it has two tokens.
            Admission {
                tick: 3,
                spec: b.spec(50, 40),
            },
            // Below the reserve of the empty statement: stopped at admission.
            Admission {
                tick: 4,
                spec: b.spec(51, 1),
            },
        ])
        .collect();
    let mut model = AdversarialModel { vocab: vocab() };
    let (delivered, log) = b.staggered(admissions, &mut model, &mut |g, n| g == 50 && n >= 2);
    let specs: Vec<GenerationSpec<'_>> = budgets
        .iter()
        .enumerate()
        .map(|(i, &budget)| b.spec(i as u64, budget))
        .collect();
    let completed: Vec<Outcome> = specs
        .iter()
        .map(|s| outcome_of(&delivered, s.id).outcome.clone())
        .collect();
    check_outcomes(&b, &specs, &completed);
    assert!(completed
        .iter()
        .all(|o| o.stop == StopReason::BudgetCompleted && o.completed_tokens > 0));

    let cancelled = &outcome_of(&delivered, 50).outcome;
    assert_eq!(cancelled.stop, StopReason::Cancelled);
    assert!(cancelled.tokens.len() >= 2, "{:?}", cancelled.tokens);
    // What it wrote is what it would have written alone.
    let (alone, _) = b.run(
        &[b.spec(50, 40)],
        &mut AdversarialModel { vocab: vocab() },
        DecodeOptions::default(),
    );
    assert!(alone[0].tokens.starts_with(&cancelled.tokens));
    assert!(alone[0].tokens.len() > cancelled.tokens.len());

    let below = outcome_of(&delivered, 51);
    assert!(
        matches!(
            below.outcome.error,
            Some(DecodeError::BudgetBelowReserve { .. })
        ),
        "{:?}",
        below.outcome.error
    );
    assert_eq!(below.tick, 4, "handed back by the tick after its admission");
    assert!(steps_of(&log, 51).is_empty());
    assert_eq!(own_seal(&log, 51).stop, StopReason::Error);
    assert_eq!(own_seal(&log, 50).stop, StopReason::Cancelled);
    b.replay(&log);
}

#[test]
fn a_log_with_admissions_verifies_and_replays() {
    let b = Bench::new(&select_only());
    let n = 30u64;
    let admissions: Vec<Admission<'_>> = (0..n)
        .map(|i| Admission {
            tick: (i as usize * 3) % 17,
            spec: b.spec(i, 8 + (i % 13) as u32 * 3),
        })
        .collect();
    let mut model = RandomModel { calls: 0 };
    let (delivered, log) = b.staggered(admissions, &mut model, &mut |g, n| g % 11 == 4 && n >= 3);
    assert_eq!(delivered.len() as u64, n);
    assert!(delivered
        .iter()
        .any(|d| d.outcome.stop == StopReason::Cancelled));
    let summary = verify(log.entries(), &VerifyOptions::default()).expect("the log verifies");
    assert_eq!(summary.generations, n);
    // The generations ran interleaved: a later one stepped before an earlier one's seal.
    let first_seal = log
        .entries()
        .iter()
        .position(|e| matches!(e, Entry::Seal(_)))
        .expect("a seal");
    let stepped_before: HashSet<u64> = log.entries()[..first_seal]
        .iter()
        .map(Entry::generation)
        .collect();
    assert!(stepped_before.len() > 2, "{stepped_before:?}");
    assert!(b.replay(&log) > 0);
    // A tampered step of an admitted generation is caught.
    let mut entries = log.entries().to_vec();
    let k = entries
        .iter()
        .rposition(|e| matches!(e, Entry::Step(_)))
        .expect("a step");
    if let Entry::Step(r) = &mut entries[k] {
        r.blocked_count ^= 1;
    }
    assert!(verify(&entries, &VerifyOptions::default()).is_err());
}

/// `log` written again through a fresh chain, `edit` applied to every step record first
/// (the hashes are those of the edited records: a forgery the chain cannot tell).
fn rechained(log: &AuditLog, edit: impl Fn(&mut StepRecord)) -> AuditLog {
    let mut out = AuditLog::in_memory();
    let mut begun = HashSet::new();
    for e in log.entries() {
        if begun.insert(e.generation()) {
            out.begin(e.generation()).expect("begin");
        }
        match e {
            Entry::Step(r) => {
                let mut r = r.clone();
                edit(&mut r);
                let input = StepInput {
                    config_hash: r.config_hash,
                    mask_entry_id: r.mask_entry_id,
                    token: r.token,
                    blocked_count: r.blocked_count,
                    kind: r.kind,
                };
                out.step(r.generation, input).expect("step");
            }
            Entry::Seal(s) => {
                let input = SealInput {
                    stop: s.stop,
                    fingerprints: s.fingerprints,
                    mode: s.mode,
                    meta: s.meta.clone(),
                };
                out.seal(s.generation, input).expect("seal");
            }
        }
    }
    out
}

/// Rewinds of the generations `first` of `specs`, at the point `at` picks in each (none
/// where it picks none): the tokens before it replayed, the one there banned; ids from
/// `id_base + i`.
fn rewound_at<'l>(
    specs: &[GenerationSpec<'l>],
    first: &[Outcome],
    id_base: u64,
    at: impl Fn(usize, &Outcome) -> Option<usize>,
) -> Vec<GenerationSpec<'l>> {
    let mut rewinds = Vec::new();
    for (i, o) in first.iter().enumerate() {
        let Some(k) = at(i, o) else { continue };
        let mut spec = specs[i].clone();
        spec.id = id_base + i as u64;
        spec.rewind = Some(Rewind {
            replay: o.tokens[..k].to_vec(),
            ban: o.tokens[k],
        });
        rewinds.push(spec);
    }
    rewinds
}

/// A rewind repair: the generation writes the repaired generation's tokens up to the
/// rewind point (each under its exact mask, recorded `Replayed`), records the ban of the
/// token that generation chose there, and samples on from the exact mask without it. The
/// log verifies and replays bit for bit; a ban altered in the log (the chain rebuilt
/// over the edit) does not replay.
#[test]
fn a_rewind_replays_the_prefix_bans_the_choice_there_and_replays_from_the_log() {
    let b = Bench::new(&select_only());
    let mut random = RandomModel { calls: 0 };
    let specs = b.specs(40, |_| 40);
    let (first, _) = b.run(&specs, &mut random, DecodeOptions::default());
    let rewinds = rewound_at(&specs, &first, 1000, |i, o| {
        // A rewind point among the tokens the model chose (budget completion, which
        // writes the rest, would write them again).
        let chosen = o.tokens.len() - o.completed_tokens as usize;
        (chosen >= 2).then(|| i % chosen)
    });
    assert!(rewinds.len() > 20);
    let (out, log) = b.run(&rewinds, &mut random, DecodeOptions::default());
    check_outcomes(&b, &rewinds, &out);
    let mut bans = 0;
    for (o, spec) in out.iter().zip(&rewinds) {
        let r = spec.rewind.as_ref().expect("a rewind");
        let k = r.replay.len();
        assert_eq!(o.tokens[..k], r.replay[..], "generation {}", o.generation);
        let recs = steps_of(&log, o.generation);
        assert!(recs[..k].iter().all(|x| x.kind == StepKind::Replayed));
        assert!(recs[k..]
            .iter()
            .all(|x| !matches!(x.kind, StepKind::Replayed)));
        if recs[k].kind == StepKind::Banned {
            bans += 1;
            assert_eq!(recs[k].token, Token::Id(r.ban));
            assert_ne!(o.tokens.get(k), Some(&r.ban));
            assert_eq!(recs[k + 1].blocked_count, recs[k].blocked_count + 1);
        } else {
            // No ban where the token was forced, or where the budget completion would
            // write it first: the rewind writes it again.
            assert!(
                matches!(recs[k].kind, StepKind::Forced | StepKind::Sampled),
                "{:?}",
                recs[k]
            );
            assert_eq!(o.tokens.get(k), Some(&r.ban));
        }
    }
    assert!(bans > 10, "{bans} bans");
    assert!(b.replay(&log) > 0);

    // Another token banned in the record: the chain is whole, the masks do not replay.
    let forged = rechained(&log, |r| {
        if r.kind == StepKind::Banned {
            if let Token::Id(t) = r.token {
                r.token = Token::Id(if t == 1 { 2 } else { 1 });
            }
        }
    });
    verify(forged.entries(), &VerifyOptions::default()).expect("the forged chain verifies");
    let mut rc = Recomputer::new(b.trie.clone(), &b.vocab);
    let lang = &b.lang;
    let replayed = replay(forged.entries(), &VerifyOptions::default(), &mut |ctx| {
        rc.recompute(lang, ctx)
    });
    assert!(replayed.is_err(), "a forged ban replays");
}

/// A rewind whose point is where the budget completion began: the token banned would be
/// the completion's first, which a sample that leaves too little budget falls back on. The
/// ban is not made, and the rewind completes as the first generation did (it stopped with
/// "completion token is not in the mask" before).
#[test]
fn a_rewind_never_bans_the_token_the_completion_writes_first() {
    let b = Bench::new(&select_only());
    let mut random = RandomModel { calls: 0 };
    let specs = b.specs(60, |_| 14);
    let (first, _) = b.run(&specs, &mut random, DecodeOptions::default());
    let rewinds = rewound_at(&specs, &first, 2000, |_, o| {
        let c = o.completed_tokens as usize;
        (c > 0).then(|| o.tokens.len() - c)
    });
    assert!(rewinds.len() > 10, "{} completions", rewinds.len());
    let (out, log) = b.run(&rewinds, &mut random, DecodeOptions::default());
    check_outcomes(&b, &rewinds, &out);
    for (o, spec) in out.iter().zip(&rewinds) {
        assert!(
            o.error.is_none(),
            "generation {}: {:?}",
            o.generation,
            o.error
        );
        let k = spec.rewind.as_ref().expect("a rewind").replay.len();
        let recs = steps_of(&log, o.generation);
        assert!(
            recs.iter().all(|x| x.kind != StepKind::Banned),
            "generation {}: a ban of the completion's first token",
            o.generation
        );
        assert_eq!(recs[k].kind, StepKind::BudgetCompleted, "{:?}", recs[k]);
    }
    assert!(b.replay(&log) > 0);
}

/// Replayed records come first, and a rewind is mode 1 only: the chain refuses others.
#[test]
fn replayed_records_only_open_a_generation() {
    let mut log = AuditLog::in_memory();
    log.begin(1).expect("begin");
    let step = |kind, token| StepInput {
        config_hash: 0,
        mask_entry_id: [0; 16],
        token,
        blocked_count: 0,
        kind,
    };
    log.step(1, step(StepKind::Replayed, Token::Id(5)))
        .expect("a replayed first step");
    log.step(1, step(StepKind::Banned, Token::Id(6)))
        .expect("a ban");
    assert!(log.step(1, step(StepKind::Banned, Token::Eos)).is_err());
    log.step(1, step(StepKind::Sampled, Token::Id(7)))
        .expect("a sample");
    assert!(log.step(1, step(StepKind::Replayed, Token::Id(8))).is_err());
}
