//! With the real GPT-2 vocabulary (`../shared/data/tokenizers/gpt2`, skipped with a
//! message when absent): the served vocabulary round-trips with the same fingerprint,
//! and the scripted mock spells its SQL through the protocol.

use std::path::PathBuf;
use std::sync::Arc;

use crate::common::{all_plain, bounded, spawn_server};
use grid_endpoint::backend::mock::{AdversarialMock, ScriptedMock, FORBIDDEN};
use grid_endpoint::backend::script::Script;
use grid_endpoint::client::{ClientConfig, EndpointClient, Mask, StepInput};
use grid_endpoint::{Sampling, ServerConfig, TokenSet};
use grid_vocab::Vocabulary;

fn gpt2() -> Option<Arc<Vocabulary>> {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/tokenizers/gpt2");
    if !dir.exists() {
        println!("SKIPPED: no GPT-2 tokenizer at {}", dir.display());
        return None;
    }
    let v = Vocabulary::load(&dir).expect("GPT-2 loads");
    let v = match (v.eos_id(), v.special_id("<|endoftext|>")) {
        (Some(_), _) => v,
        (None, Some(id)) => v.with_eos(id).expect("eos"),
        (None, None) => panic!("GPT-2 without <|endoftext|>"),
    };
    Some(Arc::new(v))
}

/// Samples until EOS (at most `max` steps) under `mask_for(text so far)`.
async fn generate(
    client: &EndpointClient,
    vocab: &Vocabulary,
    prompt: &str,
    max: usize,
    mask_for: &dyn Fn(&str) -> (Mask, bool),
) -> (String, bool) {
    let eos = vocab.eos_id().unwrap();
    let mut history = vocab.encode(prompt);
    let prompt_len = history.len();
    let text = |h: &[u32]| String::from_utf8_lossy(&vocab.decode(&h[prompt_len..])).into_owned();
    for _ in 0..max {
        let (mask, gate) = mask_for(&text(&history));
        let input = StepInput {
            id: prompt,
            history: &history,
            prompt_len,
            mask: &mask,
            cd_pass: &[],
            eos_allowed: gate,
            sampling: Sampling::greedy(),
        };
        let s = client.step(&[input]).await.unwrap().remove(0).unwrap();
        assert!(mask.set.contains(s.token) || (gate && s.token == eos));
        if s.token == eos {
            return (text(&history), true);
        }
        history.push(s.token);
    }
    (text(&history), false)
}

#[tokio::test]
async fn gpt2_served_vocabulary_and_scripted_sql() {
    let Some(vocab) = gpt2() else { return };
    bounded(async {
        let script = Script::parse(
            r#"[{"match":"highest paid","sql":"SELECT name, salary FROM employees ORDER BY salary DESC LIMIT 1"}]"#,
        )
        .unwrap();
        let server = spawn_server(
            vocab.clone(),
            Arc::new(ScriptedMock::new(vocab.clone(), script)),
            ServerConfig::default(),
        )
        .await;
        let client =
            EndpointClient::new(&server.url(), vocab.fingerprint(), ClientConfig::default())
                .unwrap();
        let served = client.check_vocabulary().await.unwrap();
        assert_eq!(served.vocabulary.fingerprint(), vocab.fingerprint());
        assert_eq!(served.vocabulary.len(), 50257);
        let full = Mask::content_addressed(all_plain(&vocab));
        let (sql, ended) = generate(
            &client,
            &vocab,
            "-- who is the highest paid employee?\n",
            40,
            &|_| (full.clone(), true),
        )
        .await;
        assert!(ended);
        assert_eq!(sql, "SELECT name, salary FROM employees ORDER BY salary DESC LIMIT 1");
        server.stop().await;
    })
    .await;
}

#[tokio::test]
async fn gpt2_adversary_is_contained_by_the_mask() {
    let Some(vocab) = gpt2() else { return };
    bounded(async {
        let server = spawn_server(
            vocab.clone(),
            Arc::new(AdversarialMock::new(vocab.clone())),
            ServerConfig::default(),
        )
        .await;
        let client =
            EndpointClient::new(&server.url(), vocab.fingerprint(), ClientConfig::default())
                .unwrap();
        let full = Mask::content_addressed(all_plain(&vocab));
        let (text, _) = generate(&client, &vocab, "SELECT", 8, &|_| (full.clone(), false)).await;
        let lower = text.to_ascii_lowercase();
        assert!(FORBIDDEN.iter().any(|w| lower.contains(w)), "{text:?}");
        // A mask of letters-and-space-free tokens that spell no forbidden word: digits.
        let digits = TokenSet::from_ids(
            vocab.len(),
            vocab
                .iter()
                .filter(|(id, b)| {
                    !vocab.is_special(*id) && !b.is_empty() && b.iter().all(u8::is_ascii_digit)
                })
                .map(|(id, _)| id),
        )
        .unwrap();
        let digits = Mask::content_addressed(digits);
        let (text, _) = generate(&client, &vocab, "SELECT", 12, &|_| (digits.clone(), false)).await;
        assert!(text.bytes().all(|b| b.is_ascii_digit()), "{text:?}");
        server.stop().await;
    })
    .await;
}
