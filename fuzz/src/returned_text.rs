//! The statement returned is the bytes the mask admitted, and they show what they do: one
//! generation of the extension's dialect through the decode loop, the input choosing among
//! the allowed tokens (often those above ASCII, and a vocabulary that offers the attacks'
//! characters: ESC, CR, NUL, C1, U+202E, U+200B, U+2028, halves of characters); the text
//! must be the concatenation of tokens each in the mask of its step, decode strictly
//! ([`grid_core::text::statement_text`], as grid-ask decodes it) to the same bytes, and
//! hold no control, format or separator character; and it is read as the model's decline
//! exactly when it begins with the decline's word.
//!
//! Input: a language byte, a budget byte (the budget is 1 + its value), then one byte per
//! model step: `0xff` asks for EOS when the mask admits it; with the high bit set, the
//! `b & 0x7f`-th allowed token that holds a byte above ASCII (any allowed one when none
//! does); otherwise the `b`-th allowed token. Past the input, EOS when admitted, else the
//! first allowed token.

use std::sync::{Arc, LazyLock};

use grid_core::audit::{AuditLog, SealMeta, StopReason};
use grid_core::decode::{
    Choice, DecodeError, DecodeOptions, Decoder, GenerationSpec, ModelError, ModelStep, StepModel,
};
use grid_core::mask::Masker;
use grid_core::reserve::{ReserveTable, Speller};
use grid_core::text::{is_hidden, statement_text};
use grid_core::trie::TokenTrie;
use grid_core::{Language, Session};
use grid_vocab::Vocabulary;

use crate::fixtures::LANGUAGES;

/// The extension's dialect's roles of [`LANGUAGES`]: the generated SQL's.
const GENERATED: [usize; 2] = [2, 3];

/// Characters the attacks used, each whole and at the edges of quotes.
const HOSTILE: &[&str] = &[
    "\x1b",
    "\r",
    "\0",
    "\x7f",
    "\u{85}",
    "\u{202e}",
    "\u{200b}",
    "\u{2028}",
    "\u{2029}",
    "\u{feff}",
    "\u{ad}",
    "\u{2066}",
    "\x1b[2K",
    "\r\x1b[2KSELECT",
    "\x1b[8m\"",
];
/// Characters above ASCII a literal or a quoted name may hold.
const FINE: &[&str] = &[
    "\u{e9}",
    "\u{4e2d}",
    "\u{1f600}",
    "\u{a0}",
    "\u{2026}",
    "caf\u{e9}",
];

#[rustfmt::skip]
const SQL: &[&str] = &[
    "SELECT", " SELECT", " FROM", " WHERE", " name", " *", " customers", " orders", " id",
    " AS", " AS \"", " '", "'", "\"", " E'", " =", ";", " 1", "(", ")", ",", " count(*)",
    "\t", "\n", " || ", " LIMIT",
];

/// Every byte, SQL fragments, and the characters above, alone and beside a quote.
pub static VOCAB: LazyLock<Vocabulary> = LazyLock::new(|| {
    let mut toks: Vec<Vec<u8>> = vec![b"<eos>".to_vec()];
    toks.extend((0..=255u8).map(|b| vec![b]));
    toks.extend(SQL.iter().map(|s| s.as_bytes().to_vec()));
    for s in HOSTILE.iter().chain(FINE) {
        for (pre, post) in [("", ""), ("'", ""), ("\"", ""), ("", "'"), ("", "\"")] {
            toks.push(format!("{pre}{s}{post}").into_bytes());
        }
    }
    for b in [
        &b"\xe2\x80"[..],
        b"\xe2\x80\xae",
        b"\xc2",
        b"\xf0\x9f\x98",
        b"\xed\xa0\x80",
    ] {
        toks.push(b.to_vec());
    }
    Vocabulary::from_served(toks, &[], Some(0)).expect("returned_text vocabulary")
});

static TRIE: LazyLock<Arc<TokenTrie>> =
    LazyLock::new(|| Arc::new(TokenTrie::build(&VOCAB).expect("returned_text trie")));
static SPELLER: LazyLock<Speller> = LazyLock::new(|| Speller::of(&VOCAB));
static RESERVES: LazyLock<Vec<ReserveTable>> = LazyLock::new(|| {
    GENERATED
        .iter()
        .map(|&k| ReserveTable::build(&LANGUAGES[k], &SPELLER))
        .collect()
});

struct InputModel<'a> {
    steps: &'a [u8],
}

impl StepModel for InputModel<'_> {
    fn choose(&mut self, s: &ModelStep<'_>) -> Result<Choice, ModelError> {
        let eos = VOCAB.eos_id();
        let ids: Vec<u32> = s.mask.ids().filter(|&i| Some(i) != eos).collect();
        let high: Vec<u32> = ids
            .iter()
            .copied()
            .filter(|&i| VOCAB.token_bytes(i).iter().any(|&b| b >= 0x80))
            .collect();
        let choice = match self.steps.get(s.generated.len()) {
            Some(0xff) if s.mask.eos => Choice::Eos,
            Some(&b) if b & 0x80 != 0 && !high.is_empty() => {
                Choice::Token(high[usize::from(b & 0x7f) % high.len()])
            }
            Some(&b) if !ids.is_empty() => Choice::Token(ids[usize::from(b) % ids.len()]),
            _ if s.mask.eos => Choice::Eos,
            _ => ids.first().map_or(Choice::Eos, |&i| Choice::Token(i)),
        };
        Ok(choice)
    }
}

/// Builds the shared tables: libFuzzer's init, so that the first input is not charged.
pub fn init() {
    LazyLock::force(&RESERVES);
    LazyLock::force(&TRIE);
}

pub fn run(data: &[u8]) {
    let [pick, budget, steps @ ..] = data else {
        return;
    };
    let k = usize::from(*pick) % GENERATED.len();
    let lang: &Language = &LANGUAGES[GENERATED[k]];
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
    // Lossy for the failure message only.
    let shown = String::from_utf8_lossy(&o.text);
    match &o.error {
        None => {}
        Some(DecodeError::BudgetBelowReserve { .. }) if o.tokens.is_empty() => return,
        Some(e) => panic!("budget {max_tokens}: {e} after {shown:?}"),
    }
    assert!(
        matches!(o.stop, StopReason::Eos | StopReason::BudgetCompleted),
        "stopped {:?}",
        o.stop
    );
    // The bytes the mask admitted, token by token, from a fresh session.
    let mut masker = Masker::new(TRIE.clone());
    let mut s = Session::new(lang);
    let mut cfg = s.start();
    let mut admitted = Vec::new();
    for (step, &t) in o.tokens.iter().enumerate() {
        let m = masker.mask_once(&mut s, &cfg);
        assert!(
            m.contains(t),
            "step {step}: token {t} not in its mask after {shown:?}"
        );
        let bytes = VOCAB.token_bytes(t);
        s.feed(&mut cfg, bytes)
            .expect("an allowed token is accepted");
        admitted.extend_from_slice(bytes);
    }
    assert!(s.is_complete(&cfg), "not a sentence: {shown:?}");
    assert_eq!(admitted, o.text, "the text is not the tokens admitted");
    let statement = match statement_text(&o.text) {
        Ok(t) => t,
        Err(e) => panic!("{e}: {shown:?}"),
    };
    assert_eq!(
        statement.as_bytes(),
        &admitted[..],
        "decoded to other bytes"
    );
    assert!(std::str::from_utf8(&admitted).is_ok());
    // A sentence that begins with the decline's first word is a decline, read with its
    // reason (which the message quotes), and no other sentence is.
    let first = statement
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .find(|w| !w.is_empty());
    assert_eq!(
        grid_core::statement::decline_of(&statement).is_some(),
        first.is_some_and(|w| w.eq_ignore_ascii_case("cannot")),
        "a decline misread: {shown:?}"
    );
    for c in statement.chars() {
        let control = c.is_control() && c != '\t' && c != '\n';
        let listed = matches!(
            c,
            '\u{ad}'
                | '\u{61c}'
                | '\u{180e}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{206f}'
                | '\u{feff}'
                | '\u{fff9}'..='\u{fffb}'
        );
        assert!(
            !control && !listed && !is_hidden(c),
            "U+{:04X} in the statement {shown:?}",
            u32::from(c)
        );
    }
}
