//! The client's parsers of endpoint replies on arbitrary bodies: `grid-endpoint/1` step
//! and vocabulary replies, and OpenAI-compatible completions. A reply is either refused
//! with a typed error or, when accepted, holds what the parser promises:
//! - a step reply has one result per generation, in request order, tokens inside the
//!   vocabulary, and serialises back to itself;
//! - a vocabulary reply's tokens have the declared fingerprint and count;
//! - a completion's ids are in the vocabulary and each position's alternatives are sorted,
//!   most likely first.

use grid_endpoint::client::endpoint::{parse_step_reply, parse_vocabulary_reply};
use grid_endpoint::client::openai::{parse_completion, TokenMap};
use grid_endpoint::protocol::{Outcome, StepResponse};

use crate::fixtures::VOCAB;

/// The generations a step request named, in order.
pub const STEP_IDS: [&str; 3] = ["g1", "g2", "g3"];

/// Input: a selector byte (parser: `b % 3`; generations in a step request: `1 + b / 3 % 3`),
/// then the reply body.
pub fn run(data: &[u8]) {
    let Some((&which, body)) = data.split_first() else {
        return;
    };
    match which % 3 {
        0 => step(body, 1 + usize::from(which / 3 % 3)),
        1 => vocabulary(body),
        _ => completion(body),
    }
}

fn step(body: &[u8], n: usize) {
    let ids = &STEP_IDS[..n];
    let universe = VOCAB.len();
    let Ok(reply) = parse_step_reply(body, ids, universe) else {
        return;
    };
    assert_eq!(reply.results.len(), ids.len());
    for (r, id) in reply.results.iter().zip(ids) {
        assert_eq!(r.id, *id);
        if let Outcome::Ok { token, .. } = r.outcome {
            assert!((token as usize) < universe, "token {token} accepted");
        }
    }
    let again = serde_json::to_vec(&reply).expect("a parsed reply serialises");
    let back: StepResponse = parse_step_reply(&again, ids, universe).expect("re-parses");
    assert_eq!(back, reply, "step reply round trip");
}

fn vocabulary(body: &[u8]) {
    let Ok(served) = parse_vocabulary_reply(body) else {
        return;
    };
    let v = &served.vocabulary;
    assert_eq!(v.fingerprint(), served.header.fingerprint);
    assert_eq!(v.len(), served.header.vocab_size);
    if let Some(eos) = v.eos_id() {
        assert!((eos as usize) < v.len());
    }
}

fn completion(body: &[u8]) {
    let map = TokenMap::new();
    let Ok(c) = parse_completion(body, &VOCAB, &map) else {
        return;
    };
    for t in &c.tokens {
        assert!((t.id as usize) < VOCAB.len());
        for pair in t.top.windows(2) {
            assert!(pair[0].1 >= pair[1].1, "alternatives out of order");
        }
        for (alt, _) in &t.top {
            assert!((*alt as usize) < VOCAB.len());
        }
    }
}
