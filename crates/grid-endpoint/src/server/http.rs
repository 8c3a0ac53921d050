//! The reference server over HTTP/1.1 (hyper): routing, body limits, bearer auth, and
//! the step handler that runs a request's ready generations through the backend as one
//! batch.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use grid_vocab::Vocabulary;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::backend::{Backend, SampleContext};
use crate::chat::{render_plain_with, RenderError};
use crate::client::http::ApiKey;
use crate::protocol::{
    request_codes, ErrorBody, GenerationResult, Outcome, PromptRequest, PromptResponse,
    RequestError, StepRequest, StepResponse, VocabularyHeader, PROMPT_PATH, PROTOCOL, STEP_PATH,
    VOCABULARY_PATH,
};
use crate::server::core::{Core, Slot};

/// Settings of a [`Server`].
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Mask payloads kept (LRU).
    pub mask_cache_capacity: usize,
    /// Generations kept (LRU); an evicted one is resynced with `need`/`history`.
    pub max_sessions: usize,
    /// Most generations per step request.
    pub max_batch: usize,
    /// Largest request body accepted.
    pub max_body_bytes: usize,
    /// When set, every request must carry `Authorization: Bearer <key>`.
    pub api_key: Option<ApiKey>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            mask_cache_capacity: 4096,
            max_sessions: 4096,
            max_batch: 1024,
            max_body_bytes: 64 << 20,
            api_key: None,
        }
    }
}

/// What every connection shares.
struct Shared {
    core: Mutex<Core>,
    backend: Arc<dyn Backend>,
    /// The served vocabulary (the plain prompt rendering encodes with it).
    vocab: Arc<Vocabulary>,
    /// The `GET /v1/vocabulary` reply, built once.
    vocab_reply: Bytes,
    fingerprint: String,
    config: ServerConfig,
}

/// The reference endpoint: a vocabulary, a backend and the protocol state.
#[derive(Clone)]
pub struct Server {
    shared: Arc<Shared>,
}

/// A server running on a spawned task (for tests and embedding).
pub struct RunningServer {
    /// The bound address.
    pub(crate) addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl RunningServer {
    /// `http://<addr>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting connections and waits for the accept loop to end.
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        let _ = (&mut self.task).await;
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}

impl Server {
    /// A server for `vocab` sampling with `backend`.
    pub fn new(vocab: Arc<Vocabulary>, backend: Arc<dyn Backend>, config: ServerConfig) -> Self {
        let header = VocabularyHeader {
            protocol: PROTOCOL.into(),
            model: backend.model().to_string(),
            fingerprint: vocab.fingerprint().to_string(),
            vocab_size: vocab.len(),
            mask_cache_capacity: config.mask_cache_capacity,
            max_batch: config.max_batch,
            chat_template: backend.chat_template(),
        };
        let vocab_reply = vocabulary_reply(&vocab, &header);
        let core = Core::new(
            vocab.clone(),
            config.mask_cache_capacity,
            config.max_sessions,
        );
        Server {
            shared: Arc::new(Shared {
                core: Mutex::new(core),
                backend,
                vocab: vocab.clone(),
                vocab_reply,
                fingerprint: vocab.fingerprint().to_string(),
                config,
            }),
        }
    }

    /// Serves connections from `listener` until `shutdown` completes.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send,
    ) -> std::io::Result<()> {
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                _ = &mut shutdown => return Ok(()),
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        let server = self.clone();
                        tokio::spawn(async move {
                            let service = service_fn(move |req| {
                                let server = server.clone();
                                async move { Ok::<_, Infallible>(server.route(req).await) }
                            });
                            // A connection error concerns that client only.
                            let _ = hyper::server::conn::http1::Builder::new()
                                .serve_connection(TokioIo::new(stream), service)
                                .await;
                        });
                    }
                    Err(e) => {
                        eprintln!("grid-endpoint: accept failed: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    }
                },
            }
        }
    }

    /// Binds `addr` and serves on a spawned task.
    pub async fn spawn(self, addr: SocketAddr) -> std::io::Result<RunningServer> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let stop = async {
                let _ = rx.await;
            };
            if let Err(e) = self.serve(listener, stop).await {
                eprintln!("grid-endpoint: server stopped: {e}");
            }
        });
        Ok(RunningServer {
            addr,
            stop: Some(tx),
            task,
        })
    }

    async fn route(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        if !self.authorized(&req) {
            return error_reply(
                StatusCode::UNAUTHORIZED,
                request_codes::UNAUTHORIZED,
                "a valid bearer token is required",
            );
        }
        let path = req.uri().path().to_string();
        match (req.method(), path.as_str()) {
            (&Method::GET, VOCABULARY_PATH) => {
                json_reply(StatusCode::OK, self.shared.vocab_reply.clone())
            }
            (&Method::POST, STEP_PATH | PROMPT_PATH) => {
                let limit = self.shared.config.max_body_bytes;
                match Limited::new(req.into_body(), limit).collect().await {
                    Ok(body) => {
                        let body = body.to_bytes();
                        let (status, body) = if path == STEP_PATH {
                            self.handle_step(&body).await
                        } else {
                            self.handle_prompt(&body).await
                        };
                        json_reply(status, body)
                    }
                    Err(e) if e.is::<http_body_util::LengthLimitError>() => error_reply(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        request_codes::TOO_LARGE,
                        &format!("request body exceeds {limit} bytes"),
                    ),
                    Err(e) => error_reply(
                        StatusCode::BAD_REQUEST,
                        request_codes::BAD_REQUEST,
                        &format!("cannot read the request body: {e}"),
                    ),
                }
            }
            (_, VOCABULARY_PATH | STEP_PATH | PROMPT_PATH) => error_reply(
                StatusCode::METHOD_NOT_ALLOWED,
                request_codes::METHOD_NOT_ALLOWED,
                ROUTES,
            ),
            _ => error_reply(StatusCode::NOT_FOUND, request_codes::NOT_FOUND, ROUTES),
        }
    }

    fn authorized(&self, req: &Request<Incoming>) -> bool {
        let Some(key) = &self.shared.config.api_key else {
            return true;
        };
        let Some(given) = req
            .headers()
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
        else {
            return false;
        };
        constant_time_eq(given.as_bytes(), key.expose().as_bytes())
    }

    /// Handles a prompt request body: the messages rendered by the backend's chat
    /// template, or plainly joined and encoded with the served vocabulary.
    pub(crate) async fn handle_prompt(&self, body: &[u8]) -> (StatusCode, Bytes) {
        let req: PromptRequest =
            match parse(body, "prompt request", |r: &PromptRequest| &r.protocol) {
                Ok(r) => r,
                Err(reply) => return reply,
            };
        let templated = self.shared.backend.chat_template();
        let rendered = match self.shared.backend.render_chat(&req.messages) {
            Some(fut) => match fut.await {
                Ok(r) => r,
                Err(RenderError::Refused(m)) => {
                    return error_body(
                        StatusCode::BAD_REQUEST,
                        request_codes::INVALID_PROMPT,
                        &format!("the prompt cannot be rendered: {m}"),
                        None,
                    )
                }
                Err(RenderError::Backend(m)) => {
                    return error_body(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        request_codes::BACKEND,
                        &format!("the backend cannot render the prompt: {m}"),
                        None,
                    )
                }
            },
            None => render_plain_with(&self.shared.vocab, &req.messages),
        };
        let n = self.shared.vocab.len();
        if let Some(bad) = rendered.tokens.iter().find(|&&t| t as usize >= n) {
            return error_body(
                StatusCode::INTERNAL_SERVER_ERROR,
                request_codes::BACKEND,
                &format!("the backend's tokenizer wrote id {bad}, outside the vocabulary of {n}"),
                None,
            );
        }
        ok_reply(&PromptResponse {
            protocol: PROTOCOL.into(),
            vocab_fingerprint: self.shared.fingerprint.clone(),
            tokens: rendered.tokens,
            text: rendered.text,
            chat_template: templated,
        })
    }

    /// Handles a step request body: the reply status and JSON body.
    pub(crate) async fn handle_step(&self, body: &[u8]) -> (StatusCode, Bytes) {
        let req: StepRequest = match parse(body, "step request", |r: &StepRequest| &r.protocol) {
            Ok(r) => r,
            Err(reply) => return reply,
        };
        if req.vocab_fingerprint != self.shared.fingerprint {
            return error_body(
                StatusCode::CONFLICT,
                request_codes::VOCAB_MISMATCH,
                &format!(
                    "the request's masks are over vocabulary {}, this endpoint serves {}",
                    req.vocab_fingerprint, self.shared.fingerprint
                ),
                Some(self.shared.fingerprint.clone()),
            );
        }
        if req.generations.len() > self.shared.config.max_batch {
            return error_body(
                StatusCode::PAYLOAD_TOO_LARGE,
                request_codes::TOO_LARGE,
                &format!(
                    "{} generations in one request, at most {}",
                    req.generations.len(),
                    self.shared.config.max_batch
                ),
                None,
            );
        }
        // The step runs to its commit on a task of its own: a client that disconnects
        // mid-step drops this handler, and a step dropped between prepare and commit
        // would leave its sessions busy for good.
        let this = self.clone();
        let response = match tokio::spawn(async move { this.step(&req).await }).await {
            Ok(r) => r,
            Err(e) => {
                return error_body(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    request_codes::INTERNAL,
                    &format!("the step failed: {e}"),
                    None,
                )
            }
        };
        ok_reply(&response)
    }

    /// Tells the backend which generations the core dropped.
    fn release_dropped(&self) {
        let dropped = self.lock().take_dropped();
        if !dropped.is_empty() {
            self.shared.backend.release(&dropped);
        }
    }

    /// Runs one validated step request.
    async fn step(&self, req: &StepRequest) -> StepResponse {
        let slots = self.lock().prepare(req);
        self.release_dropped();
        let mut outcomes: Vec<Option<Outcome>> = Vec::with_capacity(slots.len());
        let mut ready = Vec::new();
        for slot in slots {
            match slot {
                Slot::Done(o) => outcomes.push(Some(o)),
                Slot::Ready(p) => {
                    outcomes.push(None);
                    ready.push(p);
                }
            }
        }
        if !ready.is_empty() {
            let contexts: Vec<SampleContext> = ready
                .iter()
                .map(|p| SampleContext {
                    generation: &p.id,
                    prompt: &p.history[..p.prompt_len.min(p.history.len())],
                    generated: &p.history[p.prompt_len.min(p.history.len())..],
                    allowed: &p.allowed,
                    sampling: p.sampling,
                })
                .collect();
            let mut results = self.shared.backend.sample_batch(&contexts).await;
            drop(contexts);
            results.resize_with(ready.len(), || {
                Err(crate::error::BackendError::new(
                    "the backend returned too few results",
                ))
            });
            {
                let mut core = self.lock();
                for (p, r) in ready.into_iter().zip(results) {
                    let index = p.index;
                    outcomes[index] = Some(core.commit(p, r));
                }
            }
            self.release_dropped();
        }
        StepResponse {
            protocol: PROTOCOL.into(),
            results: req
                .generations
                .iter()
                .zip(outcomes)
                .map(|(g, o)| GenerationResult {
                    id: g.id.clone(),
                    outcome: o.unwrap_or(Outcome::Error {
                        code: crate::protocol::ErrorCode::Backend,
                        message: "no result".into(),
                    }),
                })
                .collect(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Core> {
        // Core's updates are single map operations; a panic elsewhere leaves it usable.
        self.shared.core.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The vocabulary reply: the served-vocabulary document plus the header fields.
fn vocabulary_reply(vocab: &Vocabulary, header: &VocabularyHeader) -> Bytes {
    let mut doc: serde_json::Map<String, Value> =
        serde_json::from_str(&vocab.to_served_json()).unwrap_or_default();
    if let Ok(Value::Object(h)) = serde_json::to_value(header) {
        doc.extend(h);
    }
    Bytes::from(serde_json::to_vec(&doc).unwrap_or_default())
}

/// Every route, for 404 and 405 replies.
const ROUTES: &str = "GET /v1/vocabulary, POST /v1/step, POST /v1/prompt";

/// A request body parsed as `T` (named `what` in messages) and speaking [`PROTOCOL`], or
/// the error reply.
fn parse<T: serde::de::DeserializeOwned>(
    body: &[u8],
    what: &str,
    protocol: impl Fn(&T) -> &String,
) -> Result<T, (StatusCode, Bytes)> {
    let req: T = serde_json::from_slice(body).map_err(|e| not_a(body, what, &e))?;
    if protocol(&req) != PROTOCOL {
        return Err(unsupported(protocol(&req)));
    }
    Ok(req)
}

/// `200 OK` with `reply` as JSON.
fn ok_reply<T: serde::Serialize>(reply: &T) -> (StatusCode, Bytes) {
    match serde_json::to_vec(reply) {
        Ok(b) => (StatusCode::OK, Bytes::from(b)),
        Err(e) => error_body(
            StatusCode::INTERNAL_SERVER_ERROR,
            request_codes::INTERNAL,
            &format!("cannot serialize the reply: {e}"),
            None,
        ),
    }
}

/// The reply to a body that does not parse as `what`: a wrong protocol told apart from a
/// malformed body when possible.
fn not_a(body: &[u8], what: &str, e: &serde_json::Error) -> (StatusCode, Bytes) {
    let protocol = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("protocol").and_then(Value::as_str).map(String::from));
    match protocol {
        Some(p) if p != PROTOCOL => unsupported(&p),
        _ => error_body(
            StatusCode::BAD_REQUEST,
            request_codes::BAD_REQUEST,
            &format!("not a {what}: {e}"),
            None,
        ),
    }
}

fn unsupported(got: &str) -> (StatusCode, Bytes) {
    error_body(
        StatusCode::BAD_REQUEST,
        request_codes::UNSUPPORTED_PROTOCOL,
        &format!("protocol {got:?} is not supported; this endpoint speaks {PROTOCOL}"),
        None,
    )
}

fn error_body(
    status: StatusCode,
    code: &str,
    message: &str,
    server_fingerprint: Option<String>,
) -> (StatusCode, Bytes) {
    let body = ErrorBody {
        error: RequestError {
            code: code.into(),
            message: message.into(),
            server_fingerprint,
        },
    };
    (
        status,
        Bytes::from(serde_json::to_vec(&body).unwrap_or_default()),
    )
}

fn error_reply(status: StatusCode, code: &str, message: &str) -> Response<Full<Bytes>> {
    let (status, body) = error_body(status, code, message, None);
    json_reply(status, body)
}

fn json_reply(status: StatusCode, body: Bytes) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    resp
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
