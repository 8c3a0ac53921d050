//! The HTTP layer shared by the protocol client, the direct OpenAI-compatible client and
//! the vLLM backend: timeouts, bounded retries on connection errors, no reuse of a
//! connection that idled long enough for the server to close it (and one resend of a
//! stateless request whose connection closed anyway), a reply-size cap, and the mapping of
//! every transport failure to a distinct [`ClientError`].

use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use reqwest::{Method, StatusCode, Url};
use serde::Serialize;

use crate::error::ClientError;
use crate::protocol::{request_codes, ErrorBody};

/// An API key, sent as `Authorization: Bearer …`. Its `Debug` and `Display` never show
/// it, and no error message contains it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key; `None` for an empty one.
    pub fn new(key: impl Into<String>) -> Option<Self> {
        let key = key.into();
        (!key.is_empty()).then_some(ApiKey(key))
    }

    /// The key from environment variable `var`, when set and non-empty.
    pub fn from_env(var: &str) -> Option<Self> {
        std::env::var(var).ok().and_then(ApiKey::new)
    }

    /// The key itself (to send it, never to show it).
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Transport settings of a client.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Limit on establishing a connection.
    pub connect_timeout: Duration,
    /// Limit on a whole request: connect, send, wait, read the reply.
    pub request_timeout: Duration,
    /// How many times a request that could not *connect* is tried again (so at most
    /// `retries + 1` attempts). Besides, a request the server keeps nothing of (a GET,
    /// rendering or tokenizing a prompt, a stock server's completion) is sent once more
    /// when its connection closed before any reply, the sign of a kept-alive connection
    /// the server closed while it idled. Nothing else is retried: not timeouts, not HTTP
    /// errors, not bad replies, and never a step, since the server may have acted on it.
    pub retries: u32,
    /// Wait before the first retry; doubled before each further one.
    pub retry_backoff: Duration,
    /// Sent as a bearer token when set.
    pub api_key: Option<ApiKey>,
    /// Replies longer than this are refused as malformed.
    pub max_reply_bytes: usize,
    /// A kept-alive connection idle longer than this is not used again. Servers close
    /// idle connections (llama.cpp's server and uvicorn after 5 s), and the client's
    /// runtime, polled only while a request is out, does not notice: a request sent on
    /// such a connection fails, a step included.
    pub reuse_idle_for: Duration,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(60),
            retries: 2,
            retry_backoff: Duration::from_millis(100),
            api_key: None,
            max_reply_bytes: 256 << 20,
            reuse_idle_for: Duration::from_secs(2),
        }
    }
}

/// A successful (2xx) reply.
#[derive(Debug)]
pub(crate) struct Reply {
    /// The whole body.
    pub(crate) body: Bytes,
}

/// A reqwest client bound to one base URL.
#[derive(Debug, Clone)]
pub(crate) struct Http {
    client: reqwest::Client,
    /// The server root (no trailing `/`, no trailing `/v1`).
    base: String,
    /// `base` without credentials, for messages.
    shown: String,
    config: HttpConfig,
    /// Round trips made (requests that reached the server or failed trying).
    round_trips: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Http {
    /// A client for the server at `base_url` (e.g. `http://127.0.0.1:8077`; a trailing
    /// `/` or `/v1` is dropped, paths are added as `/v1/...`).
    pub(crate) fn new(base_url: &str, config: HttpConfig) -> Result<Self, ClientError> {
        let mut url = Url::parse(base_url)
            .map_err(|e| ClientError::invalid(format!("bad endpoint URL: {e}")))?;
        if url.scheme() != "http" && url.scheme() != "https" {
            return Err(ClientError::invalid(format!(
                "endpoint URL scheme must be http or https, not {}",
                url.scheme()
            )));
        }
        let mut base = url.as_str().trim_end_matches('/').to_string();
        if let Some(stripped) = base.strip_suffix("/v1") {
            base = stripped.to_string();
        }
        // Credentials in the URL are used but never shown.
        let _ = url.set_username("");
        let _ = url.set_password(None);
        let mut shown = url.as_str().trim_end_matches('/').to_string();
        if let Some(stripped) = shown.strip_suffix("/v1") {
            shown = stripped.to_string();
        }
        let client = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .timeout(config.request_timeout)
            .pool_idle_timeout(config.reuse_idle_for)
            .build()
            .map_err(|e| ClientError::Transport {
                detail: format!("cannot build the HTTP client: {}", e.without_url()),
            })?;
        Ok(Http {
            client,
            base,
            shown,
            config,
            round_trips: Default::default(),
        })
    }

    /// The endpoint as shown in messages (no credentials).
    pub(crate) fn endpoint(&self) -> &str {
        &self.shown
    }

    /// Round trips made so far.
    pub(crate) fn round_trips(&self) -> u64 {
        self.round_trips.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// `GET path`.
    pub(crate) async fn get(&self, path: &str) -> Result<Reply, ClientError> {
        self.send(Method::GET, path, None, Effect::Stateless).await
    }

    /// `POST path` with a JSON body.
    pub(crate) async fn post_json<T: Serialize + ?Sized>(
        &self,
        path: &str,
        body: &T,
    ) -> Result<Reply, ClientError> {
        self.send(Method::POST, path, Some(json_body(body)?), Effect::Acts)
            .await
    }

    /// `POST path` with a JSON body, for a request the server keeps nothing of
    /// (rendering or tokenizing a prompt, a stock server's completion): see
    /// [`HttpConfig::retries`].
    pub(crate) async fn post_json_stateless<T: Serialize + ?Sized>(
        &self,
        path: &str,
        body: &T,
    ) -> Result<Reply, ClientError> {
        self.send(
            Method::POST,
            path,
            Some(json_body(body)?),
            Effect::Stateless,
        )
        .await
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
        effect: Effect,
    ) -> Result<Reply, ClientError> {
        let url = format!("{}{}", self.base, path);
        let mut attempts = 0u32;
        let mut backoff = self.config.retry_backoff;
        loop {
            attempts += 1;
            self.round_trips
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let mut req = self.client.request(method.clone(), &url);
            if let Some(key) = &self.config.api_key {
                req = req.bearer_auth(key.expose());
            }
            if let Some(b) = &body {
                req = req
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(b.clone());
            }
            match req.send().await {
                Ok(resp) => return self.finish(resp).await,
                Err(e) => {
                    let err = self.classify(&e, attempts);
                    let retryable = matches!(
                        err,
                        ClientError::ConnectionRefused { .. } | ClientError::Connect { .. }
                    );
                    if retryable && attempts <= self.config.retries {
                        tokio::time::sleep(backoff).await;
                        backoff = backoff.saturating_mul(2);
                        continue;
                    }
                    // A pooled connection the server closed a moment before its idle
                    // bound ran out here fails the request sent on it; a fresh
                    // connection does not. Once, and only where nothing was kept.
                    if effect == Effect::Stateless
                        && attempts == 1
                        && matches!(err, ClientError::Disconnected { .. })
                    {
                        continue;
                    }
                    return Err(err);
                }
            }
        }
    }

    async fn finish(&self, mut resp: reqwest::Response) -> Result<Reply, ClientError> {
        let status = resp.status();
        let mut buf = BytesMut::new();
        loop {
            match resp.chunk().await {
                Ok(Some(chunk)) => {
                    if buf.len() + chunk.len() > self.config.max_reply_bytes {
                        return Err(ClientError::malformed(format!(
                            "reply longer than {} bytes",
                            self.config.max_reply_bytes
                        )));
                    }
                    buf.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => {
                    return Err(match self.classify(&e, 1) {
                        t @ ClientError::Timeout { .. } => t,
                        _ => ClientError::TruncatedReply {
                            detail: format!("reading the reply body: {}", describe(&e)),
                        },
                    });
                }
            }
        }
        let body = buf.freeze();
        if status.is_success() {
            return Ok(Reply { body });
        }
        Err(self.redacted(status_error(status, &body)))
    }

    /// The error with any echo of the API key (a server may quote request headers)
    /// blotted out of its messages.
    fn redacted(&self, err: ClientError) -> ClientError {
        let Some(key) = &self.config.api_key else {
            return err;
        };
        let clean = |m: String| m.replace(key.expose(), "<redacted>");
        match err {
            ClientError::ServerError { status, message } => ClientError::ServerError {
                status,
                message: clean(message),
            },
            ClientError::Rejected {
                status,
                code,
                message,
            } => ClientError::Rejected {
                status,
                code: clean(code),
                message: clean(message),
            },
            ClientError::VocabMismatch { client, server } => ClientError::VocabMismatch {
                client,
                server: clean(server),
            },
            other => other,
        }
    }

    fn classify(&self, e: &reqwest::Error, attempts: u32) -> ClientError {
        let endpoint = self.shown.clone();
        if e.is_timeout() || has_io_kind(e, std::io::ErrorKind::TimedOut) {
            let phase = if e.is_connect() {
                "connecting"
            } else {
                "waiting for or reading the reply"
            };
            return ClientError::Timeout {
                endpoint,
                detail: phase.to_string(),
            };
        }
        if e.is_connect() {
            if has_io_kind(e, std::io::ErrorKind::ConnectionRefused) {
                return ClientError::ConnectionRefused { endpoint, attempts };
            }
            return ClientError::Connect {
                endpoint,
                attempts,
                detail: describe(e),
            };
        }
        if e.is_body() || e.is_decode() || is_disconnect(e) {
            return ClientError::Disconnected {
                detail: describe(e),
            };
        }
        ClientError::Transport {
            detail: describe(e),
        }
    }
}

/// Whether a request may be sent twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Effect {
    /// The server keeps nothing of it: sending it again changes nothing there.
    Stateless,
    /// The server may act on it (a step of a stateful server).
    Acts,
}

fn json_body<T: Serialize + ?Sized>(body: &T) -> Result<Bytes, ClientError> {
    serde_json::to_vec(body)
        .map(Bytes::from)
        .map_err(|e| ClientError::invalid(format!("cannot serialize the request: {e}")))
}

/// The error of a non-2xx reply.
fn status_error(status: StatusCode, body: &[u8]) -> ClientError {
    let parsed: Option<ErrorBody> = serde_json::from_slice(body).ok();
    let (code, message, server_fp) = match parsed {
        Some(b) => (b.error.code, b.error.message, b.error.server_fingerprint),
        None => ("http".to_string(), snippet(body), None),
    };
    if status.is_server_error() {
        return ClientError::ServerError {
            status: status.as_u16(),
            message,
        };
    }
    if code == request_codes::VOCAB_MISMATCH {
        return ClientError::VocabMismatch {
            client: String::new(),
            server: server_fp.unwrap_or_default(),
        };
    }
    ClientError::Rejected {
        status: status.as_u16(),
        code,
        message,
    }
}

/// The start of a body, as ASCII text, for messages (they reach clients of any
/// `client_encoding`).
pub(crate) fn snippet(body: &[u8]) -> String {
    let text: String = String::from_utf8_lossy(&body[..body.len().min(200)])
        .chars()
        .map(|c| {
            if c.is_ascii() && !c.is_ascii_control() {
                c
            } else {
                '?'
            }
        })
        .collect();
    if body.len() > 200 {
        format!("{text}...")
    } else {
        text
    }
}

/// The error and its sources, without the URL.
fn describe(e: &reqwest::Error) -> String {
    let mut out = String::new();
    let mut cur: Option<&(dyn StdError + 'static)> = e.source();
    out.push_str(&strip_url(e));
    while let Some(s) = cur {
        out.push_str(": ");
        out.push_str(&s.to_string());
        cur = s.source();
    }
    out
}

fn strip_url(e: &reqwest::Error) -> String {
    // `without_url` needs ownership; the display of the kind alone is enough.
    if e.is_connect() {
        "error connecting".into()
    } else if e.is_body() {
        "error reading the body".into()
    } else if e.is_decode() {
        "error decoding the body".into()
    } else if e.is_request() {
        "error sending the request".into()
    } else {
        "HTTP error".into()
    }
}

fn sources(e: &reqwest::Error) -> impl Iterator<Item = &(dyn StdError + 'static)> {
    let mut cur: Option<&(dyn StdError + 'static)> = e.source();
    std::iter::from_fn(move || {
        let s = cur?;
        cur = s.source();
        Some(s)
    })
}

fn has_io_kind(e: &reqwest::Error, kind: std::io::ErrorKind) -> bool {
    sources(e).any(|s| {
        s.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == kind)
    })
}

fn is_disconnect(e: &reqwest::Error) -> bool {
    sources(e).any(|s| {
        if let Some(h) = s.downcast_ref::<hyper::Error>() {
            return h.is_incomplete_message() || h.is_closed() || h.is_canceled();
        }
        s.downcast_ref::<std::io::Error>().is_some_and(|io| {
            matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::ConnectionAborted
                    | std::io::ErrorKind::BrokenPipe
                    | std::io::ErrorKind::UnexpectedEof
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::convert::Infallible;

    use http_body_util::Full;
    use hyper::service::service_fn;
    use hyper_util::rt::{TokioIo, TokioTimer};

    /// A server on its own runtime that answers `{}` to everything and closes a
    /// kept-alive connection once it has idled for `idle_close`.
    fn closing_server(idle_close: Duration) -> (tokio::runtime::Runtime, String) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("server runtime");
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind loopback");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        rt.spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let service = service_fn(|_req| async {
                        Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from("{}"))))
                    });
                    let mut http = hyper::server::conn::http1::Builder::new();
                    http.timer(TokioTimer::new())
                        .header_read_timeout(idle_close);
                    let _ = http.serve_connection(TokioIo::new(stream), service).await;
                });
            }
        });
        (rt, url)
    }

    /// Two requests that the server may act on (never resent), an idle gap between
    /// them in which the client's runtime is not polled, as between two asks.
    fn two_steps_apart(reuse_idle_for: Duration) -> Result<(), ClientError> {
        let (_server, url) = closing_server(Duration::from_millis(100));
        let client_rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("client runtime");
        let config = HttpConfig {
            retries: 0,
            reuse_idle_for,
            ..HttpConfig::default()
        };
        let http = Http::new(&url, config)?;
        client_rt.block_on(http.post_json("/v1/step", &serde_json::json!({})))?;
        std::thread::sleep(Duration::from_millis(400));
        client_rt.block_on(http.post_json("/v1/step", &serde_json::json!({})))?;
        Ok(())
    }

    #[test]
    fn a_connection_idle_past_the_bound_is_not_reused() {
        // Reused, the connection the server closed fails the step.
        let err = two_steps_apart(Duration::from_secs(10)).unwrap_err();
        assert!(matches!(err, ClientError::Disconnected { .. }), "{err:?}");
        // Not reused past the bound: the step goes out on a fresh connection.
        two_steps_apart(Duration::from_millis(50)).unwrap();
    }
}
