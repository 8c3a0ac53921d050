//! The reserve never leaves its mask: one generation through the decode loop at a budget
//! the input chooses, driven by the input; every token it writes (budget completion
//! included) must be in the mask of its step, recomputed here from a fresh session, and
//! it must stop, without error, in a sentence within its budget.
//!
//! Input: a language byte, a budget byte (the budget is 1 + its value), then one byte per
//! model step: `0xff` asks for EOS when the mask admits it; any other byte picks the
//! `b`-th allowed token. Past the input the model opens what it can: the allowed token
//! with the most `(` and `'`, then the longest, so the reserve grows as fast as it can.

use std::sync::{Arc, LazyLock};

use grid_core::audit::{AuditLog, SealMeta, StopReason};
use grid_core::decode::{
    Choice, DecodeError, DecodeOptions, Decoder, GenerationSpec, ModelError, ModelStep, StepModel,
};
use grid_core::mask::Masker;
use grid_core::reserve::{ReserveTable, Speller};
use grid_core::trie::TokenTrie;
use grid_core::Session;

use crate::fixtures::{LANGUAGES, VOCAB};

static TRIE: LazyLock<Arc<TokenTrie>> =
    LazyLock::new(|| Arc::new(TokenTrie::build(&VOCAB).expect("fixture trie")));
static SPELLER: LazyLock<Speller> = LazyLock::new(|| Speller::of(&VOCAB));
static RESERVES: LazyLock<Vec<ReserveTable>> = LazyLock::new(|| {
    LANGUAGES
        .iter()
        .map(|l| ReserveTable::build(l, &SPELLER))
        .collect()
});

struct InputModel<'a> {
    steps: &'a [u8],
}

impl StepModel for InputModel<'_> {
    fn choose(&mut self, s: &ModelStep<'_>) -> Result<Choice, ModelError> {
        let eos = VOCAB.eos_id();
        let ids: Vec<u32> = s.mask.ids().filter(|&i| Some(i) != eos).collect();
        let choice = match self.steps.get(s.generated.len()) {
            Some(0xff) if s.mask.eos => Choice::Eos,
            Some(&b) if !ids.is_empty() => Choice::Token(ids[usize::from(b) % ids.len()]),
            _ => ids
                .iter()
                .max_by_key(|&&i| {
                    let t = VOCAB.token_bytes(i);
                    let opens = t.iter().filter(|&&c| c == b'(' || c == b'\'').count();
                    (opens, t.len(), std::cmp::Reverse(i))
                })
                .map_or(Choice::Eos, |&i| Choice::Token(i)),
        };
        Ok(choice)
    }
}

/// Builds the shared tables (languages, trie, reserve tables): libFuzzer's init, so that
/// the first input is not charged with them.
pub fn init() {
    LazyLock::force(&RESERVES);
    LazyLock::force(&TRIE);
}

pub fn run(data: &[u8]) {
    let [pick, budget, steps @ ..] = data else {
        return;
    };
    let k = usize::from(*pick) % LANGUAGES.len();
    let lang = &LANGUAGES[k];
    let max_tokens = 1 + u32::from(*budget);
    let spec = GenerationSpec {
        id: 1,
        language: lang,
        reserve: &RESERVES[k],
        prompt: vec![],
        max_tokens,
        seed: 0,
        unconstrained: false,
        rewind: None,
        meta: SealMeta::default(),
    };
    let mut dec = Decoder::new(
        &VOCAB,
        Masker::new(TRIE.clone()),
        &SPELLER,
        DecodeOptions::default(),
    );
    let mut log = AuditLog::in_memory();
    let out = dec
        .run(
            std::slice::from_ref(&spec),
            &mut InputModel { steps },
            &mut log,
            &mut |_, _| false,
        )
        .expect("in-memory audit writes");
    let o = &out[0];
    let text = String::from_utf8_lossy(&o.text);
    match &o.error {
        None => {}
        // A budget below the shortest statement is refused before any step.
        Some(DecodeError::BudgetBelowReserve { .. }) if o.tokens.is_empty() => return,
        Some(e) => panic!("budget {max_tokens}: {e} after {text:?}"),
    }
    assert!(
        matches!(o.stop, StopReason::Eos | StopReason::BudgetCompleted),
        "stopped {:?}",
        o.stop
    );
    assert!(o.tokens.len() as u32 <= max_tokens, "over budget: {text:?}");
    let mut masker = Masker::new(TRIE.clone());
    let mut s = Session::new(lang);
    let mut cfg = s.start();
    for (step, &t) in o.tokens.iter().enumerate() {
        let m = masker.mask_once(&mut s, &cfg);
        assert!(
            m.contains(t),
            "budget {max_tokens}: step {step}: token {t} {:?} not in its mask after {:?}",
            String::from_utf8_lossy(VOCAB.token_bytes(t)),
            String::from_utf8_lossy(&o.text)
        );
        s.feed(&mut cfg, VOCAB.token_bytes(t))
            .expect("an allowed token is accepted");
    }
    assert!(s.is_complete(&cfg), "not a sentence: {text:?}");
}
