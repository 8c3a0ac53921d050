//! Shared test fixtures: synthetic vocabularies, the reference server on loopback, raw
//! TCP fake servers for transport failures, and a fake OpenAI-compatible (vLLM-like)
//! server with a deterministic "model". Every server binds 127.0.0.1 only and serves a
//! bounded number of connections or requests.

#![allow(dead_code)]

pub mod fake_openai;
pub mod raw;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use grid_endpoint::server::RunningServer;
use grid_endpoint::{Backend, Server, ServerConfig};
use grid_vocab::Vocabulary;

/// Loopback, any free port.
pub fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// Every test's overall bound.
pub const TEST_LIMIT: Duration = Duration::from_secs(60);

/// Runs `f` under [`TEST_LIMIT`].
pub async fn bounded<T>(f: impl Future<Output = T>) -> T {
    match tokio::time::timeout(TEST_LIMIT, f).await {
        Ok(v) => v,
        Err(_) => panic!("test exceeded its {TEST_LIMIT:?} bound"),
    }
}

/// The words of the synthetic SQL vocabulary (after the 95 printable ASCII bytes; no
/// word repeats a byte token, so every token's bytes are unique).
pub const WORDS: &[&str] = &[
    "SELECT",
    " FROM",
    " employees",
    " salaries",
    " name",
    " WHERE",
    " id",
    " =",
    " 1",
    "drop",
    " DROP",
    " TABLE",
    " delete",
    "DELETE",
    "--",
    "/*",
    "*/",
    " pg_shadow",
    " update",
    "insert",
    "sal",
    "aries",
    "SEL",
    "ECT",
    "question: ",
    "how many employees?",
    "show salaries",
];

/// A synthetic vocabulary: ids 0..95 are the printable ASCII bytes (so every SQL text is
/// spellable), then [`WORDS`], then `<pad>` (special) and `<eos>` (EOS).
pub fn sql_vocab() -> Arc<Vocabulary> {
    let mut tokens: Vec<Vec<u8>> = (0x20u8..0x7f).map(|b| vec![b]).collect();
    tokens.extend(WORDS.iter().map(|w| w.as_bytes().to_vec()));
    let pad = tokens.len() as u32;
    tokens.push(b"<pad>".to_vec());
    let eos = tokens.len() as u32;
    tokens.push(b"<eos>".to_vec());
    Arc::new(Vocabulary::from_served(tokens, &[pad], Some(eos)).expect("valid vocabulary"))
}

/// The id of a token with exactly these bytes.
pub fn id_of(v: &Vocabulary, text: &str) -> u32 {
    v.iter()
        .find(|(_, b)| *b == text.as_bytes())
        .map(|(id, _)| id)
        .unwrap_or_else(|| panic!("no token {text:?}"))
}

/// Every non-special id.
pub fn all_plain(v: &Vocabulary) -> grid_endpoint::TokenSet {
    grid_endpoint::TokenSet::from_ids(v.len(), (0..v.len() as u32).filter(|&i| !v.is_special(i)))
        .expect("ids in range")
}

/// The reference server on loopback.
pub async fn spawn_server(
    vocab: Arc<Vocabulary>,
    backend: Arc<dyn Backend>,
    config: ServerConfig,
) -> RunningServer {
    Server::new(vocab, backend, config)
        .spawn(loopback())
        .await
        .expect("bind loopback")
}

/// A port on loopback with nothing listening (bound, then released).
pub async fn dead_port() -> SocketAddr {
    let l = tokio::net::TcpListener::bind(loopback())
        .await
        .expect("bind loopback");
    let addr = l.local_addr().expect("local addr");
    drop(l);
    addr
}
