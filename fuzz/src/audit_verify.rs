//! The audit verifier on tampered logs. A valid log (interleaved generations, every step
//! kind and stop reason, an exported head) is built once; the input is a list of edits of
//! its JSONL text: byte overwrites, line deletions, duplications, swaps, insertions of raw
//! bytes, tail cuts. Then:
//! - the reader and the verifier never panic;
//! - a text that reads back as the original entries verifies against the head;
//! - a text that reads back as any other entries fails verification against the head.
//!
//! "The original entries" is up to how lines of different generations interleave: the
//! chain binds each generation's records in order and the seals in order, not the order of
//! records of unrelated generations, and no information changes with it.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use grid_core::audit::{
    read_jsonl, text_digest, verify, write_jsonl, AuditLog, DecodeMode, Entry, Fingerprints, Head,
    Mode, SealInput, SealMeta, StepInput, StepKind, StopReason, Token, VerifyOptions,
};

struct Original {
    entries: Vec<Entry>,
    lines: Vec<Vec<u8>>,
    head: Head,
}

fn step(log: &mut AuditLog, generation: u64, n: u64, token: Token, kind: StepKind) {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&(generation * 1000 + n).to_le_bytes());
    log.step(
        generation,
        StepInput {
            config_hash: generation.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ n,
            mask_entry_id: id,
            token,
            blocked_count: (n * 37 % 5000) as u32,
            kind,
        },
    )
    .expect("a legal step");
}

fn seal(log: &mut AuditLog, generation: u64, stop: StopReason, decode: DecodeMode) {
    let fp = |k: u8| [k.wrapping_add(generation as u8); 16];
    log.seal(
        generation,
        SealInput {
            stop,
            fingerprints: Fingerprints {
                grammar: fp(1),
                lexicons: fp(2),
                policy: fp(3),
                vocabulary: fp(4),
            },
            mode: Mode {
                decode,
                cache: generation.is_multiple_of(2),
            },
            meta: SealMeta {
                role: Some(format!("[\"analyst\",\"role_{generation}\"]")),
                question_digest: Some(text_digest("how many orders?")),
                sql_digest: (stop == StopReason::Eos)
                    .then(|| text_digest("SELECT count(*) FROM orders")),
                verdict: None,
                // Seals written before prompts were sealed have none: both kinds.
                prompt_digest: generation
                    .is_multiple_of(3)
                    .then(|| text_digest("the prompt artifact")),
            },
        },
    )
    .expect("a legal seal");
}

static ORIGINAL: LazyLock<Original> = LazyLock::new(|| {
    let mut log = AuditLog::in_memory();
    for g in 1..=5 {
        log.begin(g).expect("fresh generation");
    }
    // Interleaved: 1 sampled/forced then EOS, 2 budget-completed, 3 truncated,
    // 4 an error with no step, 5 cancelled mid-way.
    step(&mut log, 1, 0, Token::Id(17), StepKind::Sampled);
    step(&mut log, 2, 0, Token::Id(4), StepKind::Sampled);
    step(&mut log, 1, 1, Token::Id(99), StepKind::Forced);
    step(&mut log, 5, 0, Token::Id(3), StepKind::Sampled);
    step(&mut log, 1, 2, Token::Id(100), StepKind::Forced);
    step(&mut log, 2, 1, Token::Id(12), StepKind::BudgetCompleted);
    step(&mut log, 3, 0, Token::Id(8), StepKind::Sampled);
    step(&mut log, 1, 3, Token::Eos, StepKind::Eos);
    seal(&mut log, 1, StopReason::Eos, DecodeMode::Mode1);
    seal(&mut log, 4, StopReason::Error, DecodeMode::Mode1);
    step(&mut log, 2, 2, Token::Eos, StepKind::Eos);
    seal(&mut log, 2, StopReason::BudgetCompleted, DecodeMode::Mode1);
    step(&mut log, 3, 1, Token::Id(9), StepKind::Sampled);
    seal(&mut log, 3, StopReason::BudgetTruncated, DecodeMode::Mode2);
    step(&mut log, 5, 1, Token::Id(5), StepKind::Sampled);
    seal(&mut log, 5, StopReason::Cancelled, DecodeMode::Mode1);
    let entries = log.entries().to_vec();
    let mut text = Vec::new();
    write_jsonl(&mut text, &entries).expect("writing to memory");
    let lines = text
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect();
    Original {
        entries,
        lines,
        head: log.head(),
    }
});

/// Each generation's entries in order, and the seals in order.
fn canonical(entries: &[Entry]) -> (BTreeMap<u64, Vec<&Entry>>, Vec<&Entry>) {
    let mut by_generation: BTreeMap<u64, Vec<&Entry>> = BTreeMap::new();
    for e in entries {
        by_generation.entry(e.generation()).or_default().push(e);
    }
    let seals = entries
        .iter()
        .filter(|e| matches!(e, Entry::Seal(_)))
        .collect();
    (by_generation, seals)
}

fn apply(lines: &mut Vec<Vec<u8>>, ops: &[u8]) {
    let mut i = 0;
    while i + 2 < ops.len() {
        let (op, a, b) = (ops[i], usize::from(ops[i + 1]), ops[i + 2]);
        i += 3;
        if lines.is_empty() {
            lines.push(Vec::new());
        }
        let n = lines.len();
        match op % 7 {
            0 | 1 => {
                // Overwrite one byte of a line: most edits are field edits.
                let line = &mut lines[a % n];
                if !line.is_empty() {
                    let at = usize::from(b) * line.len() / 256;
                    line[at] = ops.get(i).copied().unwrap_or(b'0');
                    i += 1;
                }
            }
            2 => {
                lines.remove(a % n);
            }
            3 => {
                let copy = lines[a % n].clone();
                lines.insert(usize::from(b) % (n + 1), copy);
            }
            4 => lines.swap(a % n, usize::from(b) % n),
            5 => {
                // Insert raw bytes into a line.
                let len = usize::from(b % 8);
                let raw: Vec<u8> = ops.iter().skip(i).take(len).copied().collect();
                i += raw.len();
                let line = &mut lines[a % n];
                let at = line.len().min(usize::from(b));
                line.splice(at..at, raw);
            }
            _ => lines.truncate(a % (n + 1)),
        }
    }
}

pub fn run(data: &[u8]) {
    let original = &*ORIGINAL;
    let strict = VerifyOptions {
        allow_incomplete: false,
        expected_head: Some(original.head),
    };
    let text = match data.split_first() {
        // Arbitrary text: only the absence of panics is asserted.
        Some((&0xff, raw)) => {
            if let Ok(entries) = read_jsonl(raw) {
                let _ = verify(&entries, &VerifyOptions::default());
                let _ = verify(&entries, &strict);
            }
            return;
        }
        _ => {
            let mut lines = original.lines.clone();
            apply(&mut lines, data);
            lines.join(&b'\n')
        }
    };
    let Ok(entries) = read_jsonl(&text[..]) else {
        return;
    };
    let verdict = verify(&entries, &strict);
    if canonical(&entries) == canonical(&original.entries) {
        assert!(verdict.is_ok(), "the original entries fail: {verdict:?}");
    } else {
        assert!(
            verdict.is_err(),
            "tampered log verifies: {:?}",
            String::from_utf8_lossy(&text)
        );
    }
    // Lenient verification must not panic either.
    let _ = verify(
        &entries,
        &VerifyOptions {
            allow_incomplete: true,
            expected_head: None,
        },
    );
}
