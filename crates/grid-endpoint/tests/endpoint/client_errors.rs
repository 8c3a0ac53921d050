//! Every transport failure is a distinct `ClientError` variant, never a panic; only
//! connection failures are retried, and boundedly (and a stateless request, once, whose
//! connection closed before any reply); the API key never shows.

use std::sync::Arc;
use std::time::Duration;

use crate::common::raw::{self, Act};
use crate::common::{bounded, dead_port, spawn_server, sql_vocab};
use grid_endpoint::backend::mock::ScriptedMock;
use grid_endpoint::backend::script::Script;
use grid_endpoint::chat::RenderedBy;
use grid_endpoint::client::{ApiKey, ClientConfig, EndpointClient, HttpConfig, Mask, StepInput};

use grid_endpoint::{ChatMessage, ClientError, Role, Sampling, ServerConfig};
use grid_vocab::Vocabulary;

fn config(timeout_ms: u64, retries: u32) -> ClientConfig {
    ClientConfig {
        http: HttpConfig {
            connect_timeout: Duration::from_millis(timeout_ms),
            request_timeout: Duration::from_millis(timeout_ms),
            retries,
            retry_backoff: Duration::from_millis(10),
            api_key: None,
            max_reply_bytes: 1 << 20,
            reuse_idle_for: Duration::from_secs(2),
        },
        ..ClientConfig::default()
    }
}

/// One step of one generation (any valid input; the servers here never sample).
async fn one_step(client: &EndpointClient, vocab: &Vocabulary) -> Result<(), ClientError> {
    let mask = Mask::content_addressed(crate::common::all_plain(vocab));
    let history = vocab.encode("question: how many employees?");
    let input = StepInput {
        id: "g",
        history: &history,
        prompt_len: history.len(),
        mask: &mask,
        cd_pass: &[],
        eos_allowed: false,
        sampling: Sampling::greedy(),
    };
    client.step(&[input]).await.map(|_| ())
}

#[tokio::test]
async fn refused_connection_is_retried_boundedly() {
    bounded(async {
        let vocab = sql_vocab();
        let addr = dead_port().await;
        let client = EndpointClient::new(
            &format!("http://{addr}"),
            vocab.fingerprint(),
            config(2000, 2),
        )
        .unwrap();
        let err = one_step(&client, &vocab).await.unwrap_err();
        assert!(
            matches!(err, ClientError::ConnectionRefused { attempts: 3, .. }),
            "{err:?}"
        );
        assert_eq!(err.kind(), "connection_refused");
        let err = client.fetch_vocabulary().await.unwrap_err();
        assert!(
            matches!(err, ClientError::ConnectionRefused { .. }),
            "{err:?}"
        );
    })
    .await;
}

#[tokio::test]
async fn timeout_against_a_hanging_server() {
    bounded(async {
        let vocab = sql_vocab();
        let server = raw::spawn(vec![Act::Hang(Duration::from_secs(5))]).await;
        let client =
            EndpointClient::new(&server.url(), vocab.fingerprint(), config(200, 3)).unwrap();
        let err = one_step(&client, &vocab).await.unwrap_err();
        assert!(matches!(err, ClientError::Timeout { .. }), "{err:?}");
        // A timeout is not retried: the server may have acted on the request.
        assert_eq!(server.connections(), 1);
    })
    .await;
}

#[tokio::test]
async fn http_5xx_is_a_server_error_and_not_retried() {
    bounded(async {
        let vocab = sql_vocab();
        let server = raw::spawn(vec![
            Act::json(
                "503 Service Unavailable",
                r#"{"error":{"code":"internal","message":"overloaded"}}"#,
            ),
            Act::json("200 OK", "{}"),
        ])
        .await;
        let client =
            EndpointClient::new(&server.url(), vocab.fingerprint(), config(2000, 3)).unwrap();
        let err = one_step(&client, &vocab).await.unwrap_err();
        match &err {
            ClientError::ServerError { status, message } => {
                assert_eq!(*status, 503);
                assert_eq!(message, "overloaded");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(server.connections(), 1);
    })
    .await;
}

#[tokio::test]
async fn malformed_json_is_a_malformed_reply() {
    bounded(async {
        let vocab = sql_vocab();
        let server = raw::spawn(vec![
            Act::json(
                "200 OK",
                "{\"protocol\": \"grid-endpoint/1\", \"results\": [tru",
            ),
            Act::json("200 OK", "not json at all"),
            // Well-formed JSON, wrong count of results.
            Act::json("200 OK", r#"{"protocol":"grid-endpoint/1","results":[]}"#),
        ])
        .await;
        let client =
            EndpointClient::new(&server.url(), vocab.fingerprint(), config(2000, 0)).unwrap();
        for _ in 0..2 {
            let err = one_step(&client, &vocab).await.unwrap_err();
            assert!(matches!(err, ClientError::MalformedReply { .. }), "{err:?}");
        }
        let err = client.fetch_vocabulary().await.unwrap_err();
        assert!(matches!(err, ClientError::MalformedReply { .. }), "{err:?}");
    })
    .await;
}

#[tokio::test]
async fn another_protocol_version_is_a_protocol_mismatch() {
    bounded(async {
        let vocab = sql_vocab();
        let server = raw::spawn(vec![Act::json(
            "200 OK",
            r#"{"protocol":"grid-endpoint/2","results":[]}"#,
        )])
        .await;
        let client =
            EndpointClient::new(&server.url(), vocab.fingerprint(), config(2000, 0)).unwrap();
        let err = one_step(&client, &vocab).await.unwrap_err();
        assert!(
            matches!(err, ClientError::ProtocolMismatch { .. }),
            "{err:?}"
        );
    })
    .await;
}

#[tokio::test]
async fn disconnect_mid_reply() {
    bounded(async {
        let vocab = sql_vocab();
        let server = raw::spawn(vec![
            Act::truncated(1000, r#"{"protocol":"grid-endpoint/1","resu"#),
            Act::Close,
        ])
        .await;
        let client =
            EndpointClient::new(&server.url(), vocab.fingerprint(), config(2000, 0)).unwrap();
        let err = one_step(&client, &vocab).await.unwrap_err();
        assert!(matches!(err, ClientError::TruncatedReply { .. }), "{err:?}");
        assert_eq!(err.kind(), "truncated_reply");
        // Closed before any reply.
        let err = one_step(&client, &vocab).await.unwrap_err();
        assert!(matches!(err, ClientError::Disconnected { .. }), "{err:?}");
        assert_eq!(err.kind(), "disconnected");
    })
    .await;
}

#[tokio::test]
async fn a_stateless_request_is_sent_again_after_a_closed_connection_but_a_step_is_not() {
    bounded(async {
        let vocab = sql_vocab();
        // A kept-alive connection the server closed while it idled looks like this: the
        // request goes out and the connection closes before any reply.
        let server = raw::spawn(vec![Act::Close, Act::json("404 Not Found", "{}")]).await;
        let client =
            EndpointClient::new(&server.url(), vocab.fingerprint(), config(2000, 0)).unwrap();
        let messages = [ChatMessage::new(Role::User, "how many employees?")];
        let (_, by) = client.render(&messages, &vocab).await.unwrap();
        // The second connection answered: 404, a server without /v1/prompt.
        assert_eq!(by, RenderedBy::LocalPlain);
        assert_eq!(server.connections(), 2);

        let server = raw::spawn(vec![Act::Close, Act::Close]).await;
        let client =
            EndpointClient::new(&server.url(), vocab.fingerprint(), config(2000, 0)).unwrap();
        let err = one_step(&client, &vocab).await.unwrap_err();
        assert!(matches!(err, ClientError::Disconnected { .. }), "{err:?}");
        assert_eq!(server.connections(), 1, "a step is never sent twice");
    })
    .await;
}

#[tokio::test]
async fn wrong_vocabulary_fingerprint_is_refused_distinctly() {
    bounded(async {
        let served = sql_vocab();
        let server = spawn_server(
            served.clone(),
            Arc::new(ScriptedMock::new(served.clone(), Script::default())),
            ServerConfig::default(),
        )
        .await;
        // The client's vocabulary differs from the server's by one token.
        let mut tokens: Vec<Vec<u8>> = served.iter().map(|(_, b)| b.to_vec()).collect();
        tokens.push(b"extra".to_vec());
        let mine = Vocabulary::from_served(tokens, served.special_ids(), served.eos_id()).unwrap();
        let client =
            EndpointClient::new(&server.url(), mine.fingerprint(), config(5000, 0)).unwrap();
        let err = client.check_vocabulary().await.unwrap_err();
        match &err {
            ClientError::VocabMismatch {
                client: c,
                server: s,
            } => {
                assert_eq!(c, mine.fingerprint());
                assert_eq!(s, served.fingerprint());
            }
            other => panic!("{other:?}"),
        }
        // The step itself is refused by the server (HTTP 409), as the same variant.
        let err = one_step(&client, &mine).await.unwrap_err();
        match &err {
            ClientError::VocabMismatch {
                client: c,
                server: s,
            } => {
                assert_eq!(c, mine.fingerprint());
                assert_eq!(s, served.fingerprint());
            }
            other => panic!("{other:?}"),
        }
        server.stop().await;
    })
    .await;
}

#[tokio::test]
async fn api_key_is_sent_but_never_shown() {
    bounded(async {
        let vocab = sql_vocab();
        let secret = "sk-test-3f9a1c";
        let server = raw::spawn(vec![Act::EchoHead500]).await;
        let mut cfg = config(2000, 0);
        cfg.http.api_key = ApiKey::new(secret);
        assert!(!format!("{cfg:?}").contains(secret));
        let client = EndpointClient::new(&server.url(), vocab.fingerprint(), cfg).unwrap();
        let err = one_step(&client, &vocab).await.unwrap_err();
        assert!(
            matches!(err, ClientError::ServerError { status: 500, .. }),
            "{err:?}"
        );
        // The server saw the key (it echoed it) but the error does not show it.
        let heads = server.heads.lock().unwrap().clone();
        assert!(heads[0].contains(secret));
        assert!(!err.to_string().contains(secret), "{err}");
        assert!(!format!("{err:?}").contains(secret));
        assert!(!format!("{client:?}").contains(secret));
    })
    .await;
}

#[tokio::test]
async fn credentials_in_the_url_are_not_shown() {
    bounded(async {
        let vocab = sql_vocab();
        let addr = dead_port().await;
        let client = EndpointClient::new(
            &format!("http://user:hunter2@{addr}/v1"),
            vocab.fingerprint(),
            config(2000, 0),
        )
        .unwrap();
        let err = one_step(&client, &vocab).await.unwrap_err();
        assert!(matches!(err, ClientError::ConnectionRefused { .. }));
        assert!(!err.to_string().contains("hunter2"), "{err}");
        assert!(!client.endpoint().contains("hunter2"));
    })
    .await;
}

#[tokio::test]
async fn bad_urls_are_invalid_input() {
    let err = EndpointClient::new("ftp://x", "fp", ClientConfig::default()).unwrap_err();
    assert!(matches!(err, ClientError::InvalidInput { .. }));
    let err = EndpointClient::new("not a url", "fp", ClientConfig::default()).unwrap_err();
    assert!(matches!(err, ClientError::InvalidInput { .. }));
}
