//! The audit chain: round trips, tamper detection at the right record, truncation against
//! an external head, incomplete generations, malformed JSONL, the replay hook, the writer.
//!
//! Where a mutation must be detected ("the right record"), by class:
//! - a field edit of a record or seal (hash fields included): that entry;
//! - an edit with the hash recomputed: the next entry of the same generation (a step:
//!   broken link; its seal: last-hash mismatch); for a seal, the next seal (chain break),
//!   or, for the last seal, the seal itself against the exported head;
//! - a deleted step: the next entry of its generation (a step: missing step; its seal:
//!   step-count mismatch); a deleted seal: the next seal (missing seal), or the end of the
//!   log against the exported head (truncated);
//! - an inserted copy of a step or seal: the copy (duplicate, or step after seal);
//! - a forged, correctly chained extra step before a seal: that seal (step count), or the
//!   forged step itself when it follows an Eos or a budget completion (kind rules);
//! - a forged, correctly chained new generation: the end of the log (unsealed).

use std::io::Cursor;
use std::sync::{Arc, Mutex};

use grid_core::audit::{
    generation_genesis, jsonl, read_jsonl, replay, text_digest, verify, write_jsonl, AuditLog,
    AuditSink, ChainWriter, DecodeMode, Difference, Entry, Fingerprints, Head, JsonlSink,
    LineError, MaskCommit, Mode, Reason, RecomputeError, ReplayError, Seal, SealInput, SealMeta,
    Site, StepContext, StepInput, StepKind, StepRecord, StepRule, StopReason, StopRule, Token,
    VerifyError, VerifyOptions, WriteError,
};

// ---------------------------------------------------------------------------------------
// Deterministic randomness and a stand-in for the decode loop.

/// xorshift64: deterministic, seedable, no dependency.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn index(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

fn mix(mut h: u64, v: u64) -> u64 {
    h ^= v.wrapping_add(0x9E37_79B9_7F4A_7C15);
    h = (h ^ (h >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    h ^ (h >> 31)
}

/// The fake "mask" of a step: a deterministic function of the artifacts and the output so
/// far, as the real one is of the grammar, lexicons, vocabulary and tokens.
fn fake_commit(fp: &Fingerprints, prefix: &[Token]) -> MaskCommit {
    let mut h = 0u64;
    for b in fp.grammar.iter().chain(&fp.lexicons).chain(&fp.vocabulary) {
        h = mix(h, u64::from(*b));
    }
    for t in prefix {
        h = mix(
            h,
            match t {
                Token::Id(x) => u64::from(*x),
                Token::Eos => u64::MAX,
            },
        );
    }
    let (a, b) = (mix(h, 1), mix(h, 2));
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&a.to_le_bytes());
    id[8..].copy_from_slice(&b.to_le_bytes());
    MaskCommit {
        config_hash: h,
        mask_entry_id: id,
        blocked_count: (mix(h, 3) % 150_000) as u32,
        token_allowed: true,
    }
}

fn fingerprints(rng: &mut XorShift) -> Fingerprints {
    let mut f = || {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&rng.next().to_le_bytes());
        b[8..].copy_from_slice(&rng.next().to_le_bytes());
        b
    };
    Fingerprints {
        grammar: f(),
        lexicons: f(),
        policy: f(),
        vocabulary: f(),
    }
}

/// One generation as the driver plays it.
struct Plan {
    generation: u64,
    /// Sampled/forced steps before the ending.
    len: u32,
    stop: StopReason,
    seal: SealInput,
    prefix: Vec<Token>,
    /// In flight forever: never sealed.
    keep_open: bool,
}

fn plan(generation: u64, rng: &mut XorShift, keep_open: bool) -> Plan {
    let stop = StopReason::ALL[rng.index(StopReason::ALL.len())];
    let decode = match stop {
        StopReason::BudgetCompleted => DecodeMode::Mode1,
        StopReason::BudgetTruncated => DecodeMode::Mode2,
        _ if rng.chance(70) => DecodeMode::Mode1,
        _ => DecodeMode::Mode2,
    };
    let meta = if rng.chance(50) {
        SealMeta {
            role: Some(format!("analyst_{}", rng.below(5))),
            question_digest: Some(text_digest("which employees joined after 2024?")),
            sql_digest: rng
                .chance(50)
                .then(|| text_digest("SELECT name FROM employees")),
            verdict: rng
                .chance(50)
                .then(|| r#"{"verdict":"fail","code":"42501","message":"m"}"#.to_string()),
            prompt_digest: rng.chance(50).then(|| text_digest("the prompt artifact")),
        }
    } else {
        SealMeta::default()
    };
    Plan {
        generation,
        len: rng.below(10) as u32,
        stop,
        seal: SealInput {
            stop,
            fingerprints: fingerprints(rng),
            mode: Mode {
                decode,
                cache: rng.chance(50),
            },
            meta,
        },
        prefix: Vec::new(),
        keep_open,
    }
}

fn emit<S: AuditSink>(w: &mut ChainWriter<S>, p: &mut Plan, token: Token, kind: StepKind) {
    let c = fake_commit(&p.seal.fingerprints, &p.prefix);
    w.step(
        p.generation,
        StepInput {
            config_hash: c.config_hash,
            mask_entry_id: c.mask_entry_id,
            token,
            blocked_count: c.blocked_count,
            kind,
        },
    )
    .expect("the driver only writes legal steps");
    p.prefix.push(token);
}

/// One tick of one generation; true when it is finished (sealed, or left open).
fn tick<S: AuditSink>(w: &mut ChainWriter<S>, p: &mut Plan, rng: &mut XorShift) -> bool {
    let done = p.prefix.len() as u32;
    if done < p.len {
        if rng.chance(25) {
            // A forced span: every token, interior ones included, is its own record.
            let span = 1 + rng.below(3) as u32;
            for _ in 0..span.min(p.len - done) {
                let t = Token::Id(rng.below(50_000) as u32);
                emit(w, p, t, StepKind::Forced);
            }
        } else {
            let t = Token::Id(rng.below(50_000) as u32);
            emit(w, p, t, StepKind::Sampled);
        }
        return false;
    }
    if p.keep_open {
        return true;
    }
    match p.stop {
        StopReason::Eos => emit(w, p, Token::Eos, StepKind::Eos),
        StopReason::BudgetCompleted => {
            for _ in 0..rng.below(3) {
                let t = Token::Id(rng.below(50_000) as u32);
                emit(w, p, t, StepKind::BudgetCompleted);
            }
            emit(w, p, Token::Eos, StepKind::Eos);
        }
        _ => {}
    }
    w.seal(p.generation, p.seal.clone())
        .expect("the driver only seals legally");
    true
}

/// Runs `n` generations with ids `first..first + n`, up to 4 at a time, ticking a random
/// live one each round, so records of different generations interleave. Generations in
/// `keep_open` are never sealed.
fn drive<S: AuditSink>(
    w: &mut ChainWriter<S>,
    rng: &mut XorShift,
    first: u64,
    n: u64,
    keep_open: &[u64],
) {
    let mut live: Vec<Plan> = Vec::new();
    let mut next = first;
    loop {
        while live.len() < 4 && next < first + n {
            w.begin(next).expect("fresh generation id");
            live.push(plan(next, rng, keep_open.contains(&next)));
            next += 1;
        }
        if live.is_empty() {
            break;
        }
        let k = rng.index(live.len());
        if tick(w, &mut live[k], rng) {
            live.swap_remove(k);
        }
    }
}

fn build(seed: u64, n: u64) -> AuditLog {
    let mut rng = XorShift::new(seed);
    let mut log = AuditLog::in_memory();
    drive(&mut log, &mut rng, 1, n, &[]);
    log
}

fn strict(head: Option<Head>) -> VerifyOptions {
    VerifyOptions {
        allow_incomplete: false,
        expected_head: head,
    }
}

fn to_bytes(entries: &[Entry]) -> Vec<u8> {
    let mut out = Vec::new();
    write_jsonl(&mut out, entries).expect("writing to memory");
    out
}

fn seal_at(entries: &[Entry], i: usize) -> &Seal {
    match &entries[i] {
        Entry::Seal(s) => s,
        Entry::Step(_) => panic!("entry {i} is not a seal"),
    }
}

fn step_at(entries: &[Entry], i: usize) -> &StepRecord {
    match &entries[i] {
        Entry::Step(r) => r,
        Entry::Seal(_) => panic!("entry {i} is not a step"),
    }
}

fn indices(entries: &[Entry], want_seal: bool) -> Vec<usize> {
    (0..entries.len())
        .filter(|&i| matches!(entries[i], Entry::Seal(_)) == want_seal)
        .collect()
}

// ---------------------------------------------------------------------------------------
// Round trip

#[test]
fn round_trip_interleaved_generations_with_forced_spans() {
    let log = build(7, 60);
    let entries = log.entries();
    let steps = indices(entries, false).len() as u64;

    // The log exercises what it claims to.
    let forced = entries
        .iter()
        .filter(|e| matches!(e, Entry::Step(r) if r.kind == StepKind::Forced))
        .count();
    assert!(forced > 20, "forced records: {forced}");
    let interleaved = (1..entries.len())
        .filter(|&i| entries[i].generation() != entries[i - 1].generation())
        .count();
    assert!(
        interleaved > entries.len() / 4,
        "interleavings: {interleaved}"
    );
    let empty_generations = entries
        .iter()
        .filter(|e| matches!(e, Entry::Seal(s) if s.steps == 0))
        .count();
    assert!(
        empty_generations > 0,
        "a generation without steps is sealed"
    );
    for stop in StopReason::ALL {
        assert!(
            entries
                .iter()
                .any(|e| matches!(e, Entry::Seal(s) if s.stop == stop)),
            "{stop:?} occurs"
        );
    }

    let bytes = to_bytes(entries);
    let text = String::from_utf8(bytes.clone()).expect("JSONL is UTF-8");
    assert_eq!(text.lines().count(), entries.len());
    assert!(text
        .lines()
        .all(|l| l.starts_with("{\"type\":\"step\"") || l.starts_with("{\"type\":\"seal\"")));
    let back = read_jsonl(Cursor::new(&bytes)).expect("reads back");
    assert_eq!(back, entries);
    assert_eq!(to_bytes(&back), bytes, "serialisation is canonical");

    let summary = verify(&back, &strict(Some(log.head()))).expect("verifies");
    assert_eq!(summary.generations, 60);
    assert_eq!(summary.seals, 60);
    assert_eq!(summary.steps, steps);
    assert_eq!(summary.entries, entries.len());
    assert_eq!(summary.head, log.head());
    assert!(summary.incomplete.is_empty());
}

#[test]
fn jsonl_sink_writes_the_same_file_as_the_memory_log() {
    let log = build(11, 20);
    let mut file = ChainWriter::new(JsonlSink::new(Vec::new()));
    drive(&mut file, &mut XorShift::new(11), 1, 20, &[]);
    assert_eq!(file.head(), log.head());
    assert_eq!(file.into_sink().into_inner(), to_bytes(log.entries()));
}

#[test]
fn concurrent_writers_share_one_log() {
    let log = Arc::new(Mutex::new(AuditLog::in_memory()));
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                let mut rng = XorShift::new(100 + t);
                let mut live: Vec<Plan> = (0..25)
                    .map(|k| plan(1000 * (t + 1) + k, &mut rng, false))
                    .collect();
                for p in &live {
                    log.lock()
                        .expect("lock")
                        .begin(p.generation)
                        .expect("begin");
                }
                while !live.is_empty() {
                    let k = rng.index(live.len());
                    let mut guard = log.lock().expect("lock");
                    let finished = tick(&mut *guard, &mut live[k], &mut rng);
                    drop(guard);
                    if finished {
                        live.swap_remove(k);
                    }
                    std::thread::yield_now();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("writer thread");
    }
    let log = log.lock().expect("lock");
    let summary = verify(log.entries(), &strict(Some(log.head()))).expect("verifies");
    assert_eq!(summary.generations, 100);
    assert_eq!(summary.head.seals, 100);
}

// ---------------------------------------------------------------------------------------
// Tamper detection

const CLASSES: usize = 10;
const CLASS_NAMES: [&str; CLASSES] = [
    "edit step field",
    "edit seal field",
    "edit step + rehash",
    "edit seal + rehash",
    "delete step",
    "delete seal",
    "insert copy of a step",
    "insert copy of a seal",
    "insert forged chained step",
    "insert forged generation",
];

fn flip(bytes: &mut [u8], rng: &mut XorShift) {
    let i = rng.index(bytes.len());
    bytes[i] ^= 1 << rng.below(8);
}

/// Applies one mutation of class `class` to `e` and returns the error the verifier must
/// report (with the original head as the external anchor).
fn mutate(e: &mut Vec<Entry>, head: Head, class: usize, rng: &mut XorShift) -> VerifyError {
    let steps = indices(e, false);
    let seals = indices(e, true);
    let at = |entry: usize, site: Site, reason: Reason| VerifyError {
        entry: Some(entry),
        site,
        reason,
    };
    // The entry of generation `g` after `i` (its next record, or its seal).
    let next_of = |e: &[Entry], g: u64, i: usize| {
        (i + 1..e.len())
            .find(|&j| e[j].generation() == g)
            .expect("every generation is sealed")
    };
    let site_of = |entry: &Entry| match entry {
        Entry::Step(r) => Site::Step {
            generation: r.generation,
            step: r.step,
        },
        Entry::Seal(s) => Site::Seal {
            index: s.index,
            generation: s.generation,
        },
    };
    match class {
        0 => {
            let i = steps[rng.index(steps.len())];
            let mut r = step_at(e, i).clone();
            let field = rng.below(9);
            match field {
                0 => {
                    // Move the record to another generation: existing or fresh.
                    let g = if rng.chance(60) {
                        let other = e[rng.index(e.len())].generation();
                        if other == r.generation {
                            r.generation ^ 1
                        } else {
                            other
                        }
                    } else {
                        r.generation ^ (1 << rng.below(64))
                    };
                    r.generation = g;
                    let before = &e[..i];
                    let seal = before.iter().find_map(|x| match x {
                        Entry::Seal(s) if s.generation == g => Some(s.index),
                        _ => None,
                    });
                    let count = before
                        .iter()
                        .filter(|x| matches!(x, Entry::Step(s) if s.generation == g))
                        .count() as u64;
                    let reason = if let Some(seal) = seal {
                        Reason::StepAfterSeal { seal }
                    } else if u64::from(r.step) > count {
                        Reason::MissingSteps { expected: count }
                    } else if u64::from(r.step) < count {
                        Reason::DuplicateStep { expected: count }
                    } else {
                        Reason::StepHashMismatch {
                            recomputed: r.compute_hash(),
                        }
                    };
                    let site = site_of(&Entry::Step(r.clone()));
                    e[i] = Entry::Step(r);
                    return at(i, site, reason);
                }
                1 => {
                    let old = r.step;
                    r.step ^= 1 << rng.below(32);
                    let expected = u64::from(old);
                    let reason = if r.step > old {
                        Reason::MissingSteps { expected }
                    } else {
                        Reason::DuplicateStep { expected }
                    };
                    let site = site_of(&Entry::Step(r.clone()));
                    e[i] = Entry::Step(r);
                    return at(i, site, reason);
                }
                2 => r.config_hash ^= 1 << rng.below(64),
                3 => flip(&mut r.mask_entry_id, rng),
                4 => {
                    r.token = match r.token {
                        Token::Id(_) if rng.chance(30) => Token::Eos,
                        Token::Id(x) => Token::Id(x ^ (1 << rng.below(32))),
                        Token::Eos => Token::Id(rng.below(50_000) as u32),
                    }
                }
                5 => r.blocked_count ^= 1 << rng.below(32),
                6 => {
                    let others: Vec<StepKind> =
                        StepKind::ALL.into_iter().filter(|k| *k != r.kind).collect();
                    r.kind = others[rng.index(others.len())];
                }
                7 => flip(&mut r.prev_hash, rng),
                _ => flip(&mut r.hash, rng),
            }
            let reason = Reason::StepHashMismatch {
                recomputed: r.compute_hash(),
            };
            let site = site_of(&Entry::Step(r.clone()));
            e[i] = Entry::Step(r);
            at(i, site, reason)
        }
        1 => {
            let i = seals[rng.index(seals.len())];
            let mut s = seal_at(e, i).clone();
            match rng.below(16) {
                0 => s.index ^= 1 << rng.below(64),
                1 => s.generation ^= 1 << rng.below(64),
                2 => {
                    let others: Vec<StopReason> = StopReason::ALL
                        .into_iter()
                        .filter(|x| *x != s.stop)
                        .collect();
                    s.stop = others[rng.index(others.len())];
                }
                3 => s.steps ^= 1 << rng.below(32),
                4 => flip(&mut s.last_step_hash, rng),
                5 => flip(&mut s.fingerprints.grammar, rng),
                6 => flip(&mut s.fingerprints.lexicons, rng),
                7 => flip(&mut s.fingerprints.policy, rng),
                8 => flip(&mut s.fingerprints.vocabulary, rng),
                9 => {
                    let others: Vec<DecodeMode> = DecodeMode::ALL
                        .into_iter()
                        .filter(|x| *x != s.mode.decode)
                        .collect();
                    s.mode.decode = others[rng.index(others.len())];
                }
                10 => s.mode.cache = !s.mode.cache,
                11 => {
                    s.meta.role = match s.meta.role.take() {
                        None => Some("superuser".into()),
                        Some(r) if rng.chance(50) => Some(format!("{r}x")),
                        Some(_) => None,
                    }
                }
                12 => {
                    s.meta.question_digest = match s.meta.question_digest {
                        None => Some(text_digest("drop everything")),
                        Some(_) => None,
                    }
                }
                13 => flip(&mut s.prev_seal_hash, rng),
                14 => {
                    // Added, removed or changed: the prompt the seal binds.
                    s.meta.prompt_digest = match s.meta.prompt_digest {
                        None => Some(text_digest("another prompt")),
                        Some(mut d) if rng.chance(50) => {
                            flip(&mut d, rng);
                            Some(d)
                        }
                        Some(_) => None,
                    }
                }
                _ => flip(&mut s.hash, rng),
            }
            let reason = Reason::SealHashMismatch {
                recomputed: s.compute_hash(),
            };
            let site = site_of(&Entry::Seal(s.clone()));
            e[i] = Entry::Seal(s);
            at(i, site, reason)
        }
        2 => {
            let i = steps[rng.index(steps.len())];
            let mut r = step_at(e, i).clone();
            match rng.below(3) {
                0 => r.config_hash ^= 1 << rng.below(64),
                1 => flip(&mut r.mask_entry_id, rng),
                _ => r.blocked_count ^= 1 << rng.below(32),
            }
            r.hash = r.compute_hash();
            let g = r.generation;
            e[i] = Entry::Step(r);
            let j = next_of(e, g, i);
            let reason = match &e[j] {
                Entry::Step(_) => Reason::BrokenLink,
                Entry::Seal(_) => Reason::SealLastHash,
            };
            at(j, site_of(&e[j]), reason)
        }
        3 => {
            let i = seals[rng.index(seals.len())];
            let mut s = seal_at(e, i).clone();
            flip(&mut s.fingerprints.policy, rng);
            s.hash = s.compute_hash();
            let k = s.index;
            e[i] = Entry::Seal(s);
            match seals.iter().find(|&&j| j > i) {
                Some(&j) => at(j, site_of(&e[j]), Reason::SealChainBreak),
                // The last seal: only the external head can tell.
                None => at(
                    i,
                    site_of(&e[i]),
                    Reason::HeadMismatch {
                        seals: k + 1,
                        expected: head.hash,
                    },
                ),
            }
        }
        4 => {
            let i = steps[rng.index(steps.len())];
            let r = step_at(e, i).clone();
            let j = next_of(e, r.generation, i);
            let reason = match &e[j] {
                Entry::Step(_) => Reason::MissingSteps {
                    expected: u64::from(r.step),
                },
                Entry::Seal(s) => Reason::SealStepCount {
                    sealed: s.steps,
                    found: u64::from(s.steps) - 1,
                },
            };
            let site = site_of(&e[j]);
            e.remove(i);
            at(j - 1, site, reason)
        }
        5 => {
            let n = seals.len();
            let pick = rng.index(n);
            let i = seals[pick];
            let k = seal_at(e, i).index;
            e.remove(i);
            if pick + 1 < n {
                let j = seals[pick + 1] - 1;
                at(j, site_of(&e[j]), Reason::MissingSeals { expected: k })
            } else {
                VerifyError {
                    entry: None,
                    site: Site::End,
                    reason: Reason::Truncated {
                        expected: head.seals,
                        found: head.seals - 1,
                    },
                }
            }
        }
        6 => {
            let i = steps[rng.index(steps.len())];
            let r = step_at(e, i).clone();
            let j = i + 1 + rng.index(e.len() - i);
            let before = &e[..j];
            let seal = before.iter().find_map(|x| match x {
                Entry::Seal(s) if s.generation == r.generation => Some(s.index),
                _ => None,
            });
            let reason = match seal {
                Some(seal) => Reason::StepAfterSeal { seal },
                None => Reason::DuplicateStep {
                    expected: before
                        .iter()
                        .filter(|x| matches!(x, Entry::Step(s) if s.generation == r.generation))
                        .count() as u64,
                },
            };
            let site = site_of(&Entry::Step(r.clone()));
            e.insert(j, Entry::Step(r));
            at(j, site, reason)
        }
        7 => {
            let i = seals[rng.index(seals.len())];
            let s = seal_at(e, i).clone();
            let j = i + 1 + rng.index(e.len() - i);
            let expected = e[..j]
                .iter()
                .filter(|x| matches!(x, Entry::Seal(_)))
                .count() as u64;
            let site = site_of(&Entry::Seal(s.clone()));
            e.insert(j, Entry::Seal(s));
            at(j, site, Reason::DuplicateSealIndex { expected })
        }
        8 => {
            let q = seals[rng.index(seals.len())];
            let s = seal_at(e, q).clone();
            let kinds: Vec<StepKind> = e[..q]
                .iter()
                .filter_map(|x| match x {
                    Entry::Step(r) if r.generation == s.generation => Some(r.kind),
                    _ => None,
                })
                .collect();
            let mut forged = StepRecord {
                generation: s.generation,
                step: s.steps,
                config_hash: rng.next(),
                mask_entry_id: [7; 16],
                token: Token::Id(rng.below(50_000) as u32),
                blocked_count: 1,
                kind: StepKind::Sampled,
                prev_hash: s.last_step_hash,
                hash: [0; 32],
            };
            forged.hash = forged.compute_hash();
            let site = site_of(&Entry::Step(forged.clone()));
            e.insert(q, Entry::Step(forged));
            if kinds.contains(&StepKind::Eos) {
                at(q, site, Reason::Step(StepRule::AfterEos))
            } else if kinds.contains(&StepKind::BudgetCompleted) {
                at(
                    q,
                    site,
                    Reason::Step(StepRule::AfterCompletion {
                        kind: StepKind::Sampled,
                    }),
                )
            } else {
                at(
                    q + 1,
                    site_of(&e[q + 1]),
                    Reason::SealStepCount {
                        sealed: s.steps,
                        found: u64::from(s.steps) + 1,
                    },
                )
            }
        }
        _ => {
            let max = e.iter().map(Entry::generation).max().unwrap_or(0);
            let g = max + 1 + rng.below(1000);
            let mut forged = StepRecord {
                generation: g,
                step: 0,
                config_hash: 0,
                mask_entry_id: [1; 16],
                token: Token::Id(17),
                blocked_count: 0,
                kind: StepKind::Sampled,
                prev_hash: generation_genesis(g),
                hash: [0; 32],
            };
            forged.hash = forged.compute_hash();
            let j = rng.index(e.len() + 1);
            e.insert(j, Entry::Step(forged));
            VerifyError {
                entry: None,
                site: Site::Generation { generation: g },
                reason: Reason::Unsealed { steps: 1 },
            }
        }
    }
}

#[test]
fn every_random_mutation_is_detected_at_the_right_record() {
    let mut per_class = [0usize; CLASSES];
    let mut hash_field_edits = 0;
    for case in 0..1000u64 {
        let mut rng = XorShift::new(0xA0D1_7000 + case);
        let log = build(case, 8 + rng.below(8));
        let head = log.head();
        let opts = strict(Some(head));
        verify(log.entries(), &opts).expect("the unmutated log verifies");

        let class = rng.index(CLASSES);
        let mut e = log.entries().to_vec();
        let before = e.clone();
        let expected = mutate(&mut e, head, class, &mut rng);
        assert_ne!(e, before, "case {case}: the mutation changed the log");
        per_class[class] += 1;
        if matches!(
            expected.reason,
            Reason::StepHashMismatch { .. } | Reason::SealHashMismatch { .. }
        ) {
            hash_field_edits += 1;
        }

        let got = verify(&e, &opts).expect_err("a mutated log must not verify");
        assert_eq!(
            got, expected,
            "case {case}, class {:?}: got `{got}`, expected `{expected}`",
            CLASS_NAMES[class]
        );
        assert_eq!(
            got.reason.is_tampering(),
            class != 9,
            "only a forged unsealed generation reads as incomplete"
        );
        // The same finding after a JSONL round trip of the mutated log.
        let back = read_jsonl(Cursor::new(to_bytes(&e))).expect("mutated log still parses");
        assert_eq!(verify(&back, &opts).expect_err("still detected"), expected);
    }
    for (c, n) in per_class.iter().enumerate() {
        assert!(*n >= 60, "class {:?} ran {n} times", CLASS_NAMES[c]);
    }
    assert!(hash_field_edits > 150);
}

#[test]
fn edits_of_the_hash_fields_themselves_are_caught() {
    let log = build(3, 6);
    for i in 0..log.entries().len() {
        let mut e = log.entries().to_vec();
        match &mut e[i] {
            Entry::Step(r) => r.hash[31] ^= 0x80,
            Entry::Seal(s) => s.hash[0] ^= 1,
        }
        let err = verify(&e, &strict(None)).expect_err("detected");
        assert_eq!(err.entry, Some(i));
        assert!(matches!(
            err.reason,
            Reason::StepHashMismatch { .. } | Reason::SealHashMismatch { .. }
        ));
    }
}

// ---------------------------------------------------------------------------------------
// Truncation and the external head

/// Drops the last `k` seals and every record of their generations.
fn drop_tail(entries: &[Entry], k: usize) -> Vec<Entry> {
    let seals = indices(entries, true);
    let gone: Vec<u64> = seals[seals.len() - k..]
        .iter()
        .map(|&i| entries[i].generation())
        .collect();
    entries
        .iter()
        .filter(|x| !gone.contains(&x.generation()))
        .cloned()
        .collect()
}

#[test]
fn tail_truncation_is_detected_only_against_the_exported_head() {
    let log = build(21, 20);
    let head = log.head();
    assert_eq!(head.seals, 20);
    for k in 1..=5 {
        let cut = drop_tail(log.entries(), k);
        assert!(cut.len() < log.entries().len());
        // Without the anchor the shorter log is a perfectly valid log: every step chain
        // and the seal chain are intact, just shorter. Nothing inside a log can prove
        // that more of it once existed, hence the head kept outside the database.
        let alone = verify(&cut, &strict(None)).expect("undetectable without the head");
        assert_eq!(alone.seals, 20 - k as u64);
        assert_ne!(alone.head, head);
        // Against the head exported before the cut, the loss is plain.
        let err = verify(&cut, &strict(Some(head))).expect_err("detected with the head");
        assert_eq!(
            err,
            VerifyError {
                entry: None,
                site: Site::End,
                reason: Reason::Truncated {
                    expected: 20,
                    found: 20 - k as u64
                },
            }
        );
        assert!(err.reason.is_tampering());
    }
    // Dropping everything: still a valid (empty) log alone, truncated against the head.
    assert!(verify(&[], &strict(None)).is_ok());
    assert!(verify(&[], &strict(Some(head))).is_err());
    // An anchor of zero seals is the seal genesis constant, nothing else.
    let zero = Head {
        seals: 0,
        hash: [0; 32],
    };
    assert_eq!(
        verify(log.entries(), &strict(Some(zero)))
            .expect_err("bad genesis anchor")
            .reason,
        Reason::HeadMismatch {
            seals: 0,
            expected: [0; 32]
        }
    );
    assert!(verify(log.entries(), &strict(Some(Head::genesis()))).is_ok());
}

#[test]
fn the_head_accepts_growth_and_rejects_rewritten_history() {
    let mut rng = XorShift::new(5);
    let mut log = AuditLog::in_memory();
    drive(&mut log, &mut rng, 1, 10, &[]);
    let anchor = log.head();
    // Text form, as an auditor would keep it.
    let kept: Head = anchor.to_string().parse().expect("head text");
    assert_eq!(kept, anchor);
    drive(&mut log, &mut rng, 11, 10, &[]);
    let s = verify(log.entries(), &strict(Some(kept))).expect("growth after the anchor is fine");
    assert_eq!(s.seals, 20);

    // Another history with as many seals (everything recomputed by the forger).
    let forged = build(6, 20);
    let err = verify(forged.entries(), &strict(Some(kept))).expect_err("rewritten");
    assert_eq!(
        err.reason,
        Reason::HeadMismatch {
            seals: 10,
            expected: kept.hash
        }
    );
    assert!(matches!(err.site, Site::Seal { index: 9, .. }));
}

// ---------------------------------------------------------------------------------------
// Incomplete generations

#[test]
fn unsealed_generations_are_incomplete_not_tampered() {
    let mut rng = XorShift::new(31);
    let mut log = AuditLog::in_memory();
    // Generations 3 and 7 are in flight while the others start, interleave and seal.
    drive(&mut log, &mut rng, 1, 12, &[3, 7]);
    let mut open: Vec<u64> = log.open_generations().collect();
    open.sort_unstable();
    assert_eq!(open, vec![3, 7]);
    let steps_of = |g: u64| {
        log.entries()
            .iter()
            .filter(|x| matches!(x, Entry::Step(r) if r.generation == g))
            .count() as u64
    };
    let first_of = |g: u64| {
        log.entries()
            .iter()
            .position(|x| x.generation() == g)
            .unwrap_or(usize::MAX)
    };

    let err = verify(log.entries(), &strict(Some(log.head()))).expect_err("strict");
    assert!(!err.reason.is_tampering(), "{err}");
    assert!(err.to_string().contains("incomplete, not tampering"));
    let first = if first_of(3) < first_of(7) { 3 } else { 7 };
    if steps_of(first) > 0 {
        assert_eq!(err.site, Site::Generation { generation: first });
    }

    let lenient = VerifyOptions {
        allow_incomplete: true,
        expected_head: Some(log.head()),
    };
    let s = verify(log.entries(), &lenient).expect("sealed ones verify");
    assert_eq!(s.generations, 10);
    let mut listed: Vec<(u64, u64)> = s
        .incomplete
        .iter()
        .map(|i| (i.generation, i.steps))
        .collect();
    listed.sort_unstable();
    let mut want: Vec<(u64, u64)> = [3, 7]
        .into_iter()
        .filter(|&g| steps_of(g) > 0)
        .map(|g| (g, steps_of(g)))
        .collect();
    want.sort_unstable();
    assert_eq!(want.len(), 2, "both in-flight generations have records");
    assert_eq!(listed, want);

    // Records of an in-flight generation are still checked.
    let i = log
        .entries()
        .iter()
        .position(|x| matches!(x, Entry::Step(r) if r.generation == 3 || r.generation == 7))
        .expect("an in-flight record");
    let mut e = log.entries().to_vec();
    if let Entry::Step(r) = &mut e[i] {
        r.blocked_count ^= 1;
    }
    let err = verify(&e, &lenient).expect_err("tampering inside an in-flight generation");
    assert_eq!(err.entry, Some(i));
    assert!(err.reason.is_tampering());

    // After a "crash" a new writer resumes the seal chain; the old in-flight generations
    // stay incomplete and everything else verifies.
    let head = log.head();
    let entries = log.into_sink();
    let mut resumed = ChainWriter::resume(entries, head);
    drive(&mut resumed, &mut rng, 100, 5, &[]);
    let s = verify(resumed.sink(), &lenient).expect("resumed log verifies");
    assert_eq!(s.generations, 15);
    assert_eq!(s.incomplete.len(), want.len());
}

// ---------------------------------------------------------------------------------------
// Malformed JSONL

fn line_error(bytes: &[u8]) -> (usize, LineError) {
    match read_jsonl(Cursor::new(bytes)) {
        Ok(e) => panic!("malformed input read as {} entries", e.len()),
        Err(e) => (e.line, e.error),
    }
}

/// The line with `key` set to the JSON value `value`.
fn edit(line: &str, key: &str, value: &str) -> Vec<u8> {
    let mut v: serde_json::Value = serde_json::from_str(line).expect("json");
    v[key] = serde_json::from_str(value).expect("value json");
    v.to_string().into_bytes()
}

#[test]
fn malformed_lines_are_typed_errors_with_line_numbers() {
    let log = build(41, 3);
    let good: Vec<String> = log
        .entries()
        .iter()
        .map(|e| jsonl::to_line(e).expect("serialises"))
        .collect();
    let step_line = good
        .iter()
        .find(|l| l.contains("\"type\":\"step\""))
        .expect("a step")
        .clone();
    let seal_line = good
        .iter()
        .find(|l| l.contains("\"type\":\"seal\""))
        .expect("a seal")
        .clone();
    let hash = |l: &str| {
        let v: serde_json::Value = serde_json::from_str(l).expect("json");
        v["hash"].as_str().expect("hash").to_string()
    };
    let step_hash = hash(&step_line);
    let seal_hash = hash(&seal_line);

    type Check = fn(&LineError) -> bool;
    let is_json: Check = |e| matches!(e, LineError::Json(_));
    let cases: Vec<(Vec<u8>, Check)> = vec![
        (b"{".to_vec(), is_json),
        (b"[1,2,3]".to_vec(), is_json),
        (b"{\"generation\":1}".to_vec(), is_json),
        (b"{\"type\":\"stop\"}".to_vec(), is_json),
        (b"not json at all".to_vec(), is_json),
        (b"".to_vec(), |e| matches!(e, LineError::Empty)),
        (b"   ".to_vec(), |e| matches!(e, LineError::Empty)),
        (vec![b'{', 0xff, 0xfe, b'}'], |e| {
            matches!(e, LineError::NotUtf8)
        }),
        (
            step_line
                .replace("\"blocked_count\"", "\"blocked\"")
                .into_bytes(),
            is_json,
        ),
        (
            step_line
                .replace("\"type\":\"step\",", "\"type\":\"step\",\"extra\":1,")
                .into_bytes(),
            is_json,
        ),
        (
            step_line
                .replace("\"kind\":\"", "\"kind\":\"x")
                .into_bytes(),
            is_json,
        ),
        (edit(&step_line, "step", "4294967296"), is_json),
        (edit(&step_line, "generation", "-1"), is_json),
        (edit(&step_line, "config_hash", "12"), is_json),
        (
            step_line.replace(&step_hash, &step_hash[1..]).into_bytes(),
            |e| matches!(e, LineError::Hex { field: "hash", .. }),
        ),
        (
            step_line
                .replace(&step_hash, &format!("g{}", &step_hash[1..]))
                .into_bytes(),
            |e| matches!(e, LineError::Hex { field: "hash", .. }),
        ),
        (seal_line.replace(&seal_hash, "").into_bytes(), |e| {
            matches!(e, LineError::Hex { field: "hash", .. })
        }),
        (
            seal_line
                .replace("\"mode1\"", "\"mode3\"")
                .replace("\"mode2\"", "\"mode3\"")
                .into_bytes(),
            is_json,
        ),
        (
            seal_line
                .replace("\"grammar\":\"", "\"grammar\":\"00")
                .into_bytes(),
            |e| {
                matches!(
                    e,
                    LineError::Hex {
                        field: "fingerprints.grammar",
                        ..
                    }
                )
            },
        ),
        (edit(&seal_line, "steps", "\"three\""), is_json),
        (edit(&seal_line, "role", "7"), is_json),
        (edit(&seal_line, "mode", "{\"decode\":\"mode1\"}"), is_json),
    ];
    let token_cases = ["\"EOS\"", "-1", "4294967296", "1.5", "null", "[1]"];
    let mut all = cases;
    for t in token_cases {
        all.push((edit(&step_line, "token", t), |e| {
            matches!(e, LineError::TokenValue)
        }));
    }

    let mut checked = 0;
    for (bad, check) in &all {
        for pos in [0, 1, good.len()] {
            if bad.is_empty() && pos == good.len() {
                continue; // an empty last "line" is just the end of the file
            }
            let mut file = Vec::new();
            for (k, l) in good.iter().enumerate() {
                if k == pos {
                    file.extend_from_slice(bad);
                    file.push(b'\n');
                }
                file.extend_from_slice(l.as_bytes());
                file.push(b'\n');
            }
            if pos == good.len() {
                // Last line, without a newline (a crash mid-write).
                file.extend_from_slice(bad);
            }
            let (line, err) = line_error(&file);
            assert_eq!(line, pos + 1, "{:?}", String::from_utf8_lossy(bad));
            assert!(check(&err), "{:?}: {err}", String::from_utf8_lossy(bad));
            assert!(err.to_string().len() > 3);
            checked += 1;
        }
    }
    assert_eq!(checked, all.len() * 3 - 1);

    // CRLF line endings and a missing final newline read fine.
    let crlf: String = good.iter().map(|l| format!("{l}\r\n")).collect();
    assert_eq!(
        read_jsonl(Cursor::new(crlf.trim_end()))
            .expect("crlf")
            .len(),
        good.len()
    );
}

#[test]
fn random_byte_corruption_never_panics() {
    let log = build(43, 6);
    let bytes = to_bytes(log.entries());
    let lines = bytes.iter().filter(|&&b| b == b'\n').count();
    let mut rng = XorShift::new(44);
    let (mut parse_errors, mut verify_errors) = (0, 0);
    for _ in 0..500 {
        let mut b = bytes.clone();
        match rng.below(4) {
            0 => {
                let i = rng.index(b.len());
                b[i] = rng.next() as u8;
            }
            1 => {
                // A digit for another digit: mostly still parses, as a different log.
                let digits: Vec<usize> = (0..b.len()).filter(|&i| b[i].is_ascii_digit()).collect();
                let i = digits[rng.index(digits.len())];
                b[i] = b'0' + ((b[i] - b'0' + 1 + rng.below(9) as u8) % 10);
            }
            2 => b.truncate(rng.index(b.len())),
            _ => {
                let i = rng.index(b.len());
                b.insert(i, b"{}\"\n,:0e"[rng.index(8)]);
            }
        }
        match read_jsonl(Cursor::new(&b)) {
            Err(e) => {
                assert!(e.line >= 1 && e.line <= lines + 2, "line {}", e.line);
                parse_errors += 1;
            }
            Ok(entries) => {
                // Whatever still parses to a different log is caught (the head catches a
                // cut at a line boundary); a change that parses to the same entries (hex
                // case) is not a change of the log.
                if entries != log.entries() {
                    verify(&entries, &strict(Some(log.head())))
                        .expect_err("a changed log does not verify");
                    verify_errors += 1;
                }
            }
        }
    }
    assert!(parse_errors > 100);
    assert!(verify_errors > 50);
}

// ---------------------------------------------------------------------------------------
// Replay

fn honest(ctx: &StepContext<'_>) -> Result<MaskCommit, RecomputeError> {
    Ok(fake_commit(&ctx.seal.fingerprints, ctx.prefix))
}

#[test]
fn replay_reproduces_every_step_and_reports_the_first_difference() {
    let log = build(51, 25);
    let e = log.entries();
    let opts = strict(Some(log.head()));
    let total = indices(e, false).len() as u64;

    let mut calls = 0u64;
    let s = replay(e, &opts, &mut |ctx: &StepContext<'_>| {
        calls += 1;
        assert_eq!(ctx.prefix.len(), ctx.step as usize);
        honest(ctx)
    })
    .expect("an honest recompute replays");
    assert_eq!(s.generations, 25);
    assert_eq!(s.steps, total);
    assert_eq!(calls, total);

    // A recompute from different artifacts at one step: that step is reported.
    let target = step_at(e, indices(e, false)[total as usize / 2]).clone();
    for field in 0..3 {
        let err = replay(e, &opts, &mut |ctx: &StepContext<'_>| {
            let mut c = honest(ctx)?;
            if ctx.generation == target.generation && ctx.step == target.step {
                match field {
                    0 => c.config_hash ^= 1,
                    1 => c.mask_entry_id[5] ^= 4,
                    _ => c.blocked_count += 1,
                }
            }
            Ok(c)
        })
        .expect_err("difference");
        match err {
            ReplayError::Mismatch {
                generation,
                step,
                difference,
            } => {
                assert_eq!((generation, step), (target.generation, target.step));
                match (field, difference) {
                    (
                        0,
                        Difference::ConfigHash {
                            recorded,
                            recomputed,
                        },
                    ) => {
                        assert_eq!(recorded, target.config_hash);
                        assert_eq!(recomputed, target.config_hash ^ 1);
                    }
                    (1, Difference::MaskEntryId { recorded, .. }) => {
                        assert_eq!(recorded, target.mask_entry_id)
                    }
                    (
                        2,
                        Difference::BlockedCount {
                            recorded,
                            recomputed,
                        },
                    ) => {
                        assert_eq!(recomputed, recorded + 1)
                    }
                    other => panic!("wrong difference {other:?}"),
                }
            }
            other => panic!("wrong error {other}"),
        }
    }

    // A recorded token outside the recomputed mask.
    let err = replay(e, &opts, &mut |ctx: &StepContext<'_>| {
        let mut c = honest(ctx)?;
        c.token_allowed = !(ctx.generation == target.generation && ctx.step == target.step);
        Ok(c)
    })
    .expect_err("token not allowed");
    assert!(matches!(
        err,
        ReplayError::TokenNotAllowed { generation, step, .. }
            if (generation, step) == (target.generation, target.step)
    ));

    // A missing artifact.
    let err = replay(e, &opts, &mut |ctx: &StepContext<'_>| {
        if ctx.generation == target.generation {
            return Err("grammar artifact not archived".into());
        }
        honest(ctx)
    })
    .expect_err("recompute fails");
    assert!(matches!(
        err,
        ReplayError::Recompute { generation, step: 0, .. } if generation == target.generation
    ));

    // A tampered record: the honest recompute would even match the recorded mask; the
    // chain check refuses the log first.
    let mut t = e.to_vec();
    let i = indices(&t, false)[3];
    if let Entry::Step(r) = &mut t[i] {
        r.token = Token::Id(12345);
        r.hash = r.compute_hash();
    }
    let err = replay(&t, &opts, &mut honest).expect_err("chain first");
    assert!(matches!(err, ReplayError::Chain(VerifyError { .. })));
}

#[test]
fn replay_catches_a_forged_log_with_a_fully_recomputed_chain() {
    // A forger who rewrites a token and recomputes every hash downstream produces a
    // valid chain, but not the masks the artifacts give: replay finds the step.
    let log = build(61, 6);
    let mut forged = AuditLog::in_memory();
    // Same plans, different tokens at one generation's step 1.
    let mut e: Vec<Entry> = log.entries().to_vec();
    let victim = e
        .iter()
        .find_map(|x| match x {
            Entry::Seal(s) if s.steps >= 3 => Some(s.generation),
            _ => None,
        })
        .expect("a generation with 3 steps");
    for x in &mut e {
        if let Entry::Step(r) = x {
            if r.generation == victim && r.step == 1 {
                if let Token::Id(id) = r.token {
                    r.token = Token::Id(id ^ 1);
                }
            }
        }
    }
    // Re-chain everything as a forger would.
    let mut gens: Vec<u64> = Vec::new();
    for x in &e {
        match x {
            Entry::Step(r) => {
                if !gens.contains(&r.generation) {
                    forged.begin(r.generation).expect("begin");
                    gens.push(r.generation);
                }
                forged
                    .step(
                        r.generation,
                        StepInput {
                            config_hash: r.config_hash,
                            mask_entry_id: r.mask_entry_id,
                            token: r.token,
                            blocked_count: r.blocked_count,
                            kind: r.kind,
                        },
                    )
                    .expect("step");
            }
            Entry::Seal(s) => {
                if !gens.contains(&s.generation) {
                    forged.begin(s.generation).expect("begin");
                    gens.push(s.generation);
                }
                forged
                    .seal(
                        s.generation,
                        SealInput {
                            stop: s.stop,
                            fingerprints: s.fingerprints,
                            mode: s.mode,
                            meta: s.meta.clone(),
                        },
                    )
                    .expect("seal");
            }
        }
    }
    let opts = strict(None);
    verify(forged.entries(), &opts).expect("the forged chain is internally valid");
    let err = replay(forged.entries(), &opts, &mut honest).expect_err("replay catches it");
    match err {
        ReplayError::Mismatch {
            generation, step, ..
        } => assert_eq!((generation, step), (victim, 2)),
        other => panic!("{other}"),
    }
}

// ---------------------------------------------------------------------------------------
// The writer's refusals

struct FailingSink {
    entries: Vec<Entry>,
    fail_next: bool,
}

impl AuditSink for FailingSink {
    fn append(&mut self, entry: &Entry) -> Result<(), grid_core::audit::SinkError> {
        if std::mem::take(&mut self.fail_next) {
            return Err("disk full".into());
        }
        self.entries.push(entry.clone());
        Ok(())
    }
}

fn input(token: Token, kind: StepKind) -> StepInput {
    StepInput {
        config_hash: 1,
        mask_entry_id: [2; 16],
        token,
        blocked_count: 3,
        kind,
    }
}

fn seal_input(stop: StopReason, decode: DecodeMode) -> SealInput {
    SealInput {
        stop,
        fingerprints: fingerprints(&mut XorShift::new(1)),
        mode: Mode {
            decode,
            cache: false,
        },
        meta: SealMeta::default(),
    }
}

#[test]
fn the_writer_refuses_what_the_verifier_would_reject() {
    let mut w = AuditLog::in_memory();
    assert!(matches!(
        w.step(1, input(Token::Id(1), StepKind::Sampled)),
        Err(WriteError::NotOpen(1))
    ));
    w.begin(1).expect("begin");
    assert!(matches!(w.begin(1), Err(WriteError::AlreadyOpen(1))));
    assert!(matches!(
        w.step(1, input(Token::Eos, StepKind::Sampled)),
        Err(WriteError::Step {
            rule: StepRule::KindTokenMismatch { .. },
            ..
        })
    ));
    assert!(matches!(
        w.seal(1, seal_input(StopReason::Eos, DecodeMode::Mode1)),
        Err(WriteError::Stop {
            rule: StopRule::MissingEos { .. },
            ..
        })
    ));
    assert!(matches!(
        w.seal(
            1,
            seal_input(StopReason::BudgetTruncated, DecodeMode::Mode1)
        ),
        Err(WriteError::Stop {
            rule: StopRule::WrongMode { .. },
            ..
        })
    ));
    w.step(1, input(Token::Id(5), StepKind::BudgetCompleted))
        .expect("completion");
    assert!(matches!(
        w.step(1, input(Token::Id(5), StepKind::Sampled)),
        Err(WriteError::Step {
            rule: StepRule::AfterCompletion { .. },
            ..
        })
    ));
    w.step(1, input(Token::Eos, StepKind::Eos)).expect("eos");
    assert!(matches!(
        w.step(1, input(Token::Id(5), StepKind::BudgetCompleted)),
        Err(WriteError::Step {
            rule: StepRule::AfterEos,
            ..
        })
    ));
    assert!(matches!(
        w.seal(1, seal_input(StopReason::Eos, DecodeMode::Mode1)),
        Err(WriteError::Stop {
            rule: StopRule::CompletionStop { .. },
            ..
        })
    ));
    let head = w
        .seal(
            1,
            seal_input(StopReason::BudgetCompleted, DecodeMode::Mode1),
        )
        .expect("seal");
    assert_eq!(head, w.head());
    assert!(matches!(
        w.seal(1, seal_input(StopReason::Error, DecodeMode::Mode1)),
        Err(WriteError::NotOpen(1))
    ));
    // Refusals appended nothing; what was appended verifies.
    assert_eq!(w.entries().len(), 3);
    verify(w.entries(), &strict(Some(head))).expect("verifies");
}

#[test]
fn a_failed_append_does_not_advance_the_chain() {
    let mut w = ChainWriter::new(FailingSink {
        entries: Vec::new(),
        fail_next: false,
    });
    w.begin(9).expect("begin");
    w.step(9, input(Token::Id(1), StepKind::Sampled))
        .expect("step 0");
    w.sink_mut().fail_next = true;
    assert!(matches!(
        w.step(9, input(Token::Id(2), StepKind::Sampled)),
        Err(WriteError::Sink(_))
    ));
    w.step(9, input(Token::Id(2), StepKind::Sampled))
        .expect("retry");
    w.sink_mut().fail_next = true;
    assert!(w
        .seal(9, seal_input(StopReason::Cancelled, DecodeMode::Mode2))
        .is_err());
    assert_eq!(w.head(), Head::genesis());
    let head = w
        .seal(9, seal_input(StopReason::Cancelled, DecodeMode::Mode2))
        .expect("retry seal");
    let s = verify(&w.sink().entries, &strict(Some(head))).expect("verifies");
    assert_eq!((s.steps, s.seals), (2, 1));
}

#[test]
fn names_are_the_jsonl_spellings() {
    for s in StopReason::ALL {
        assert_eq!(serde_json::to_value(s).expect("json"), s.name());
    }
    for k in StepKind::ALL {
        assert_eq!(serde_json::to_value(k).expect("json"), k.name());
    }
    for d in [DecodeMode::Mode1, DecodeMode::Mode2] {
        assert_eq!(serde_json::to_value(d).expect("json"), d.name());
    }
}
