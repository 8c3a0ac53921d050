//! Statements of the language against PostgreSQL 15's own parser (libpg_query, through
//! grid-pgref): the input chooses a path through the mask, the reserve's shortest
//! completion ends it, and the statement must parse in PostgreSQL and in the checker
//! (the property of `crates/grid-pgref`'s differential test, searched by coverage). A
//! decline (`CANNOT ANSWER 'reason'`) is no statement and is not judged.
//!
//! Input: a role byte, then one byte per step: its low 7 bits pick the `k`-th allowed
//! token (`k` modulo the allowed count); with the high bit set, the statement ends there if
//! EOS is allowed.

use std::sync::{LazyLock, Mutex};

use grid_core::mask::Masker;
use grid_core::reserve::{ReserveMemo, ReserveTable, Speller};
use grid_core::trie::TokenTrie;
use grid_core::Session;
use grid_pgref::{checker_parses, postgres_parses};

use crate::fixtures::{LANGUAGES, VOCAB};

const MAX_STEPS: usize = 48;

struct Fixture {
    masker: Masker,
    speller: Speller,
    reserves: Vec<ReserveTable>,
}

static FIXTURE: LazyLock<Mutex<Fixture>> = LazyLock::new(|| {
    let speller = Speller::of(&VOCAB);
    Mutex::new(Fixture {
        masker: Masker::new(std::sync::Arc::new(TokenTrie::build(&VOCAB).expect("trie"))),
        reserves: LANGUAGES
            .iter()
            .map(|l| ReserveTable::build(l, &speller))
            .collect(),
        speller,
    })
});

pub fn run(data: &[u8]) {
    let Some((&pick, steps)) = data.split_first() else {
        return;
    };
    let k = pick as usize % LANGUAGES.len();
    let lang = &LANGUAGES[k];
    let mut guard = FIXTURE.lock().unwrap_or_else(|p| p.into_inner());
    let f = &mut *guard;
    let mut s = Session::new(lang);
    let mut cfg = s.start();
    let mut text = Vec::new();
    for &b in steps.iter().take(MAX_STEPS) {
        let m = f.masker.mask(&mut s, &cfg);
        if b & 0x80 != 0 && m.eos {
            break;
        }
        let allowed: Vec<u32> = m.ids().filter(|&id| !VOCAB.is_special(id)).collect();
        let Some(&id) = allowed.get(usize::from(b & 0x7f) % allowed.len().max(1)) else {
            break;
        };
        s.feed(&mut cfg, VOCAB.token_bytes(id))
            .expect("an allowed token is accepted");
        text.extend_from_slice(VOCAB.token_bytes(id));
    }
    let mut memo = ReserveMemo::default();
    let tail = f.reserves[k]
        .completion(&mut s, &mut memo, &cfg, &f.speller)
        .expect("every viable configuration has a completion");
    text.extend_from_slice(&tail);
    assert!(
        s.complete(&text),
        "the completion does not end a statement: {:?}",
        String::from_utf8_lossy(&text)
    );
    let sql = String::from_utf8_lossy(&text).into_owned();
    // The model's decline is no SQL: the pipeline shows it to neither PostgreSQL nor the
    // checker, and the language admits no other output starting with its words.
    if grid_core::statement::decline_of(&sql).is_some() {
        return;
    }
    if let Err(e) = postgres_parses(&sql) {
        panic!("admitted, refused by PostgreSQL ({e}): {sql:?}");
    }
    if let Err(e) = checker_parses(&sql) {
        panic!("admitted and parsed by PostgreSQL, refused by the checker ({e}): {sql:?}");
    }
}
