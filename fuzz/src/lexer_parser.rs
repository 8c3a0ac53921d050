//! The lexer and the LR recognizer on arbitrary bytes, against themselves:
//! - feeding all bytes at once stops where, and as, feeding them one by one does;
//! - viability is monotone: once no continuation is a sentence, none ever is again;
//! - every prefix of an accepted statement is viable.

use std::sync::LazyLock;

use grid_core::Session;

use crate::fixtures::LANGUAGES;

/// Inputs longer than this are cut: viability is checked at every byte.
const MAX_LEN: usize = 512;

/// Builds the languages: libFuzzer's init, so that the first input is not charged with
/// them (about 12 s with debug assertions, of the 20 s a run may take per input).
pub fn init() {
    LazyLock::force(&LANGUAGES);
}

pub fn run(data: &[u8]) {
    let Some((&pick, text)) = data.split_first() else {
        return;
    };
    let text = &text[..text.len().min(MAX_LEN)];
    let lang = &LANGUAGES[pick as usize % LANGUAGES.len()];
    let mut s = Session::new(lang);

    let mut batch = s.start();
    let batch_stop = s.feed(&mut batch, text).err();

    let mut cfg = s.start();
    let mut viable = s.is_viable(&cfg);
    let mut stop = None;
    for (i, &b) in text.iter().enumerate() {
        if let Err(e) = s.feed(&mut cfg, &[b]) {
            assert!(e.offset <= i, "a stop after the byte that failed");
            stop = Some(e);
            break;
        }
        let now = s.is_viable(&cfg);
        assert!(
            viable || !now,
            "viability came back at byte {i} of {:?}",
            String::from_utf8_lossy(&text[..=i])
        );
        viable = now;
    }
    assert_eq!(
        batch_stop,
        stop,
        "batch and byte-wise feeding disagree on {:?}",
        String::from_utf8_lossy(text)
    );
    // Either way, the configuration left behind is the one before the failing byte.
    assert_eq!(batch, cfg, "configurations differ after feeding");

    if s.complete(text) {
        assert!(stop.is_none());
        let mut c = s.start();
        for i in 0..text.len() {
            assert!(
                s.is_viable(&c),
                "prefix of {i} bytes of an accepted statement is not viable: {:?}",
                String::from_utf8_lossy(text)
            );
            s.feed(&mut c, &text[i..=i]).expect("accepted byte");
        }
    }
}
