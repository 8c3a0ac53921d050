//! The models an ask can reach and what masks need of their vocabularies: the mocks in
//! process, `grid-endpoint/1` servers (their clients kept, so that a server's mask cache
//! is reused across asks), stock OpenAI-compatible servers in the direct mode (the
//! vocabulary read from the local tokenizer the setting names), the vocabularies with
//! their tries and spellers, and [`Prompter::tokens`], the one place a prompt becomes
//! token ids.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use grid_core::audit::{text_digest, to_hex};
use grid_core::decode::Model;
use grid_core::prompt::Prompt;
use grid_core::reserve::Speller;
use grid_core::trie::TokenTrie;
use grid_endpoint::backend::builtin::builtin_vocabulary;
use grid_endpoint::backend::mock::{AdversarialMock, ScriptedMock};
use grid_endpoint::backend::script::Script;
use grid_endpoint::chat::RenderedBy;
use grid_endpoint::client::ApiKey;
use grid_endpoint::client::{ConstraintStyle, DirectClient, DirectConfig};
use grid_endpoint::model::{Abort, Direct, InProcess, Remote, SamplingPlan};
use grid_endpoint::spec::{DirectSpec, PromptTemplate, ServerKind};
use grid_endpoint::{
    Backend, ChatMessage, ClientConfig, ClientError, EndpointClient, EndpointSpec, HttpConfig,
    Role, SpecError,
};
use grid_vocab::Vocabulary;

use crate::contents::Rendering;
use crate::failure::{Failure, FailureKind};
use crate::request::AskSettings;

/// A vocabulary and what masks and reserves need of it.
pub(crate) struct VocabState {
    pub(crate) vocab: Arc<Vocabulary>,
    pub(crate) trie: Arc<TokenTrie>,
    pub(crate) speller: Speller,
    /// The model the endpoint says it serves.
    pub(crate) model: String,
    /// How prompts become this vocabulary's ids.
    renderer: Renderer,
}

impl VocabState {
    pub(crate) fn new(vocab: Arc<Vocabulary>, model: String) -> Result<VocabState, Failure> {
        let trie = TokenTrie::shared(&vocab).map_err(|e| {
            Failure::internal(format!("the endpoint's vocabulary cannot be used: {e}"))
        })?;
        let speller = Speller::of(&vocab);
        Ok(VocabState {
            vocab,
            trie,
            speller,
            model,
            renderer: Renderer::Flat,
        })
    }

    /// How prompts become this vocabulary's token ids.
    pub(crate) fn prompter(&self) -> Prompter {
        Prompter {
            vocab: self.vocab.clone(),
            renderer: self.renderer.clone(),
        }
    }
}

/// How a prompt becomes token ids.
#[derive(Clone)]
enum Renderer {
    /// [`Prompt::flat`] through the vocabulary's encoder: the mocks, and endpoints whose
    /// model has no chat template (a completion prompt ending in `-- SQL:` suits them).
    Flat,
    /// A `grid-endpoint/1` server: the system and user messages go to `POST /v1/prompt`,
    /// and when its model has a chat template the server renders them with it and its
    /// tokenizer (an instruct model answers the prompt it was trained on, with the special
    /// tokens its tokenizer writes). Its first answer tells whether it has one; without
    /// one, prompts stay [`Renderer::Flat`]. Also a stock server in the direct mode with
    /// `template=server`: its own chat template and tokenizer render the messages.
    Endpoint(Arc<ChatRenderer>),
}

/// What [`ChatRenderer`] knows of its endpoint's model.
const UNKNOWN: u8 = 0;
const TEMPLATE: u8 = 1;
const NO_TEMPLATE: u8 = 2;

/// Who renders a conversation for [`ChatRenderer`].
enum RenderClient {
    /// A `grid-endpoint/1` server, by `POST /v1/prompt`.
    Protocol(EndpointClient),
    /// A stock server, by its own chat template ([`DirectClient::render_chat`]).
    Direct(DirectClient, ServerKind),
}

/// An endpoint's client kept for rendering prompts.
struct ChatRenderer {
    client: RenderClient,
    /// The endpoint, for messages.
    url: String,
    /// The client is async; a prompt is rendered between ticks, on any worker thread.
    rt: Mutex<tokio::runtime::Runtime>,
    /// [`UNKNOWN`] until the endpoint first answers, then [`TEMPLATE`] or [`NO_TEMPLATE`].
    template: AtomicU8,
}

/// When an asker no longer waits for a prompt's render: it went away, or its deadline
/// passed (the same failures a step meets: cancelled, or the endpoint's timeout).
pub(crate) struct Gone<'a> {
    pub(crate) cancel: &'a AtomicBool,
    pub(crate) deadline: Instant,
}

impl Gone<'_> {
    fn now(&self) -> bool {
        self.cancel.load(Ordering::Relaxed) || Instant::now() > self.deadline
    }

    fn failure(&self, endpoint: &str) -> Failure {
        if self.cancel.load(Ordering::Relaxed) {
            Failure::new(
                FailureKind::Cancelled,
                "the asker went away while the endpoint rendered the prompt",
            )
        } else {
            Failure::endpoint(&ClientError::Timeout {
                endpoint: endpoint.to_string(),
                detail: "grid.timeout elapsed while it rendered the prompt".into(),
            })
        }
    }
}

/// How often a render waiting on its endpoint checks that its asker still waits.
const RENDER_POLL: Duration = Duration::from_millis(50);

impl ChatRenderer {
    fn new(url: &str, vocab: &Vocabulary, http: &HttpConfig) -> Result<Self, Failure> {
        let client = EndpointClient::new(
            url,
            vocab.fingerprint(),
            ClientConfig {
                http: http.clone(),
                ..ClientConfig::default()
            },
        )
        .map_err(|e| Failure::endpoint(&e))?;
        Ok(ChatRenderer {
            client: RenderClient::Protocol(client),
            url: url.to_string(),
            rt: Mutex::new(runtime()?),
            template: AtomicU8::new(UNKNOWN),
        })
    }

    /// The renderer of a stock server whose setting says `template=server`.
    fn direct(d: &DirectSpec, vocab: &Arc<Vocabulary>, http: &HttpConfig) -> Result<Self, Failure> {
        let client = direct_client(d, http.clone(), vocab)?;
        Ok(ChatRenderer {
            url: client.endpoint().to_string(),
            client: RenderClient::Direct(client, d.server),
            rt: Mutex::new(runtime()?),
            template: AtomicU8::new(UNKNOWN),
        })
    }

    /// The ids of `prompt` by the endpoint's template, or `None` when its model has none.
    /// Abandoned (a cancelled failure) as soon as `gone` says the asker no longer waits:
    /// a hung endpoint must not hold the pipeline, as it does not in a step.
    fn render(
        &self,
        prompt: &Prompt,
        vocab: &Vocabulary,
        gone: &Gone<'_>,
    ) -> Result<Option<Vec<u32>>, Failure> {
        if self.template.load(Ordering::Relaxed) == NO_TEMPLATE {
            return Ok(None);
        }
        let messages = [
            ChatMessage::new(Role::System, prompt.system.clone()),
            ChatMessage::new(Role::User, prompt.user.clone()),
        ];
        let rt = self
            .rt
            .lock()
            .map_err(|_| Failure::internal("the prompt renderer's runtime was poisoned"))?;
        let rendered = rt.block_on(async {
            let render = async {
                match &self.client {
                    RenderClient::Protocol(c) => c.render(&messages, vocab).await,
                    RenderClient::Direct(c, server) => c
                        .render_chat(&messages, *server)
                        .await
                        .map(|r| (r, RenderedBy::Template)),
                }
            };
            tokio::pin!(render);
            loop {
                tokio::select! {
                    r = &mut render => return Some(r),
                    _ = tokio::time::sleep(RENDER_POLL) => {
                        if gone.now() {
                            return None;
                        }
                    }
                }
            }
        });
        let Some(rendered) = rendered else {
            return Err(gone.failure(&self.url));
        };
        let (prompt, by) = rendered.map_err(|e| Failure::endpoint(&e))?;
        if by == RenderedBy::Template {
            self.template.store(TEMPLATE, Ordering::Relaxed);
            Ok(Some(prompt.tokens))
        } else {
            self.template.store(NO_TEMPLATE, Ordering::Relaxed);
            Ok(None)
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::internal(e.to_string()))
}

/// Turns a prompt into the token ids the model continues from: the one place that
/// decides how a prompt is encoded (see [`Renderer`]).
pub(crate) struct Prompter {
    vocab: Arc<Vocabulary>,
    renderer: Renderer,
}

impl Prompter {
    /// How [`Prompter::tokens`] rendered its last prompt.
    pub(crate) fn rendering(&self) -> Rendering {
        match &self.renderer {
            Renderer::Endpoint(r) if r.template.load(Ordering::Relaxed) == TEMPLATE => {
                Rendering::ChatTemplate
            }
            _ => Rendering::Flat,
        }
    }

    /// The ids of `prompt`; `gone` says when the asker no longer waits (a render by the
    /// endpoint is then abandoned).
    pub(crate) fn tokens(&self, prompt: &Prompt, gone: &Gone<'_>) -> Result<Vec<u32>, Failure> {
        if let Renderer::Endpoint(r) = &self.renderer {
            if let Some(ids) = r.render(prompt, &self.vocab, gone)? {
                return Ok(ids);
            }
        }
        Ok(self.vocab.encode(&prompt.flat()))
    }
}

/// What a host puts in place of the built-in mocks' defaults.
#[derive(Default, Clone)]
pub struct MockDefaults {
    /// The mocks' vocabulary (the built-in one without it).
    pub vocabulary: Option<Arc<Vocabulary>>,
    /// The scripted mock's script when the endpoint setting names no file (an empty
    /// script without it).
    pub script: Option<Script>,
}

/// The model of a decode loop: in process, or a key of [`Models`]' servers (borrowed for
/// one tick at a time, since admissions between ticks need the rest of the pipeline).
pub(crate) enum ModelSlot {
    Local(Box<dyn Model>),
    Remote(String),
}

/// A server's kept client: a `grid-endpoint/1` server, or a stock server in the direct
/// mode.
enum Server {
    Endpoint(Box<Remote>),
    Direct(Box<Direct>),
}

impl Server {
    fn model(&mut self) -> &mut dyn Model {
        match self {
            Server::Endpoint(r) => r.as_mut(),
            Server::Direct(d) => d.as_mut(),
        }
    }
}

/// The models and vocabularies in use (see the module documentation).
pub(crate) struct Models {
    vocabularies: HashMap<String, Arc<VocabState>>,
    remotes: HashMap<String, Server>,
    /// The remotes an open loop asks (their abort hook is set): never dropped to make room.
    in_use: HashSet<String>,
    defaults: MockDefaults,
}

/// Servers whose clients are kept (settings that change often would pile them up).
const REMOTES_KEPT: usize = 16;

impl Models {
    pub(crate) fn new(defaults: MockDefaults) -> Models {
        Models {
            vocabularies: HashMap::new(),
            remotes: HashMap::new(),
            in_use: HashSet::new(),
            defaults,
        }
    }

    /// The model `settings.endpoint` names.
    pub(crate) fn spec(settings: &AskSettings) -> Result<EndpointSpec, Failure> {
        Self::spec_of(settings.endpoint.as_deref())
    }

    /// The model a `grid.endpoint` setting names.
    pub(crate) fn spec_of(setting: Option<&str>) -> Result<EndpointSpec, Failure> {
        EndpointSpec::parse(setting).map_err(|e| match e {
            SpecError::Unset => {
                Failure::new(FailureKind::EndpointUnset, format!("grid.endpoint is {e}"))
            }
            SpecError::Invalid(_) | SpecError::Direct { .. } => {
                Failure::new(FailureKind::InvalidValue, format!("grid.endpoint {e}"))
            }
        })
    }

    fn vocabulary_key(spec: &EndpointSpec) -> String {
        match spec {
            EndpointSpec::Scripted(_) | EndpointSpec::Adversarial => "mock".into(),
            EndpointSpec::Http(url) => url.clone(),
            // The vocabulary is the tokenizer's; the server is asked for the model name.
            EndpointSpec::Direct(d) => {
                format!("openai+{}\0{}\0{}", d.url, d.model, d.tokenizer.display())
            }
        }
    }

    /// The vocabulary of the model `spec` names (fetched from a server once, then kept).
    pub(crate) fn vocabulary(
        &mut self,
        spec: &EndpointSpec,
        http: &HttpConfig,
    ) -> Result<Arc<VocabState>, Failure> {
        let key = Self::vocabulary_key(spec);
        if let Some(v) = self.vocabularies.get(&key) {
            return Ok(v.clone());
        }
        let (vocab, model) = match spec {
            EndpointSpec::Scripted(_) | EndpointSpec::Adversarial => {
                let v = match &self.defaults.vocabulary {
                    Some(v) => v.clone(),
                    None => Arc::new(
                        builtin_vocabulary()
                            .map_err(|e| Failure::internal(format!("built-in vocabulary: {e}")))?,
                    ),
                };
                (v, spec.mock_model().unwrap_or_default().to_string())
            }
            EndpointSpec::Http(url) => {
                let client = EndpointClient::new(
                    url,
                    String::new(),
                    ClientConfig {
                        http: http.clone(),
                        ..ClientConfig::default()
                    },
                )
                .map_err(|e| Failure::endpoint(&e))?;
                let served = runtime()?
                    .block_on(client.fetch_vocabulary())
                    .map_err(|e| Failure::endpoint(&e))?;
                (Arc::new(served.vocabulary), served.header.model)
            }
            EndpointSpec::Direct(d) => (direct_vocabulary(d, http)?, d.model.clone()),
        };
        let mut state = VocabState::new(vocab, model)?;
        match spec {
            EndpointSpec::Http(url) => {
                let r = ChatRenderer::new(url, &state.vocab, http)?;
                state.renderer = Renderer::Endpoint(Arc::new(r));
            }
            EndpointSpec::Direct(d) if d.template == PromptTemplate::Server => {
                let r = ChatRenderer::direct(d, &state.vocab, http)?;
                state.renderer = Renderer::Endpoint(Arc::new(r));
            }
            _ => {}
        }
        let state = Arc::new(state);
        self.vocabularies.insert(key, state.clone());
        Ok(state)
    }

    /// The model `spec` names, sampling with `settings`.
    pub(crate) fn model(
        &mut self,
        spec: &EndpointSpec,
        settings: &AskSettings,
        api_key: Option<&str>,
        vocab: &VocabState,
    ) -> Result<ModelSlot, Failure> {
        let plan = SamplingPlan {
            temperature: settings.temperature,
            top_k: None,
        };
        let internal = |e: std::io::Error| Failure::internal(e.to_string());
        let backend: Arc<dyn Backend> = match spec {
            EndpointSpec::Adversarial => Arc::new(AdversarialMock::new(vocab.vocab.clone())),
            EndpointSpec::Scripted(path) => {
                let script = match path {
                    None => self.defaults.script.clone().unwrap_or_default(),
                    Some(p) => {
                        let text = std::fs::read_to_string(p).map_err(|e| {
                            Failure::new(
                                FailureKind::UnreadableFile,
                                format!("the mock script {} cannot be read: {e}", p.display()),
                            )
                        })?;
                        Script::parse(&text).map_err(|e| {
                            Failure::new(
                                FailureKind::InvalidValue,
                                format!("the mock script {}: {e}", p.display()),
                            )
                        })?
                    }
                };
                Arc::new(ScriptedMock::new(vocab.vocab.clone(), script))
            }
            EndpointSpec::Http(url) => {
                let key = client_key(settings, api_key);
                if !self.remotes.contains_key(&key) {
                    let client = EndpointClient::new(
                        url,
                        vocab.vocab.fingerprint(),
                        ClientConfig {
                            http: model_http_config(api_key),
                            ..ClientConfig::default()
                        },
                    )
                    .map_err(|e| Failure::endpoint(&e))?;
                    let remote =
                        Remote::new(client, vocab.vocab.clone(), plan).map_err(internal)?;
                    self.keep(key.clone(), Server::Endpoint(Box::new(remote)));
                }
                return Ok(ModelSlot::Remote(key));
            }
            EndpointSpec::Direct(d) => {
                if settings.temperature != 0.0 {
                    return Err(Failure::new(
                        FailureKind::InvalidValue,
                        format!(
                            "grid.temperature is {}, but a stock server (grid.endpoint \
                             'openai+...') is decoded greedily only: set grid.temperature to 0, \
                             or put a grid-endpoint/1 server in front of it to sample",
                            settings.temperature
                        ),
                    ));
                }
                let key = client_key(settings, api_key);
                if !self.remotes.contains_key(&key) {
                    let client = direct_client(d, model_http_config(api_key), &vocab.vocab)?;
                    let direct = Direct::new(client, vocab.vocab.clone()).map_err(internal)?;
                    self.keep(key.clone(), Server::Direct(Box::new(direct)));
                }
                return Ok(ModelSlot::Remote(key));
            }
        };
        Ok(ModelSlot::Local(Box::new(
            InProcess::new(backend, vocab.vocab.clone(), plan).map_err(internal)?,
        )))
    }

    fn keep(&mut self, key: String, server: Server) {
        if self.remotes.len() >= REMOTES_KEPT {
            let in_use = &self.in_use;
            self.remotes.retain(|k, _| in_use.contains(k));
        }
        self.remotes.insert(key, server);
    }

    /// The model a tick asks, or `None` when a server's client has been dropped.
    pub(crate) fn get<'a>(&'a mut self, slot: &'a mut ModelSlot) -> Option<&'a mut dyn Model> {
        match slot {
            ModelSlot::Local(m) => Some(m.as_mut()),
            ModelSlot::Remote(key) => self.remotes.get_mut(key.as_str()).map(Server::model),
        }
    }

    /// The client error behind the last failed step of the server behind `slot`, once.
    pub(crate) fn take_error(&mut self, slot: &ModelSlot) -> Option<ClientError> {
        match self.server(slot)? {
            Server::Endpoint(r) => r.take_error(),
            Server::Direct(d) => d.take_error(),
        }
    }

    /// Sets (or clears) the check that abandons a request in flight to the server behind
    /// `slot`.
    pub(crate) fn set_abort(&mut self, slot: &ModelSlot, abort: Option<Abort>) {
        if let ModelSlot::Remote(key) = slot {
            match abort {
                Some(_) => self.in_use.insert(key.clone()),
                None => self.in_use.remove(key),
            };
        }
        match self.server(slot) {
            Some(Server::Endpoint(r)) => r.set_abort(abort),
            Some(Server::Direct(d)) => d.set_abort(abort),
            None => {}
        }
    }

    fn server(&mut self, slot: &ModelSlot) -> Option<&mut Server> {
        match slot {
            ModelSlot::Remote(key) => self.remotes.get_mut(key.as_str()),
            ModelSlot::Local(_) => None,
        }
    }

    /// The server behind `spec` changed models: its vocabulary is fetched again, and
    /// every client no open loop asks made anew, at the next ask.
    pub(crate) fn forget(&mut self, spec: &EndpointSpec) {
        self.vocabularies.remove(&Self::vocabulary_key(spec));
        let in_use = &self.in_use;
        self.remotes.retain(|k, _| in_use.contains(k));
    }
}

/// The key of a kept model client, and of a group of the queue
/// (`queue::group_key`): the endpoint setting as written (trimmed, as
/// [`EndpointSpec::parse`] reads it), the sampling, the model asked for and the API key's
/// digest. One key for both, so that two open loops never share a client (and its abort
/// hook), and two spellings of one server (a `chunk=` or `server=` apart in the direct
/// mode) never get each other's client.
pub(crate) fn client_key(settings: &AskSettings, api_key: Option<&str>) -> String {
    format!(
        "{}\0{}\0{}\0{}",
        settings.endpoint.as_deref().map(str::trim).unwrap_or(""),
        settings.temperature.to_bits(),
        settings.model.as_deref().unwrap_or(""),
        api_key.map(|k| to_hex(&text_digest(k))).unwrap_or_default()
    )
}

/// The direct mode's client of the stock server `d` names.
fn direct_client(
    d: &DirectSpec,
    http: HttpConfig,
    vocab: &Arc<Vocabulary>,
) -> Result<DirectClient, Failure> {
    let (constraint, vllm_extensions) = match d.server {
        ServerKind::Vllm => (ConstraintStyle::Auto, true),
        // llama-server ignores allowed_token_ids without an error and names tokens by
        // their text.
        ServerKind::LlamaCpp => (ConstraintStyle::LogitBias, false),
    };
    let config = DirectConfig {
        http,
        chunk: d.chunk,
        constraint,
        vllm_extensions,
        ..DirectConfig::default()
    };
    DirectClient::new(&d.url, d.model.clone(), vocab.clone(), config)
        .map_err(|e| Failure::endpoint(&e))
}

/// The vocabulary of a stock server's model: its tokenizer as `d` names it, read here
/// (a stock server serves none). The server is asked once whether it serves `d.model`,
/// so a wrong name fails here with the names it does serve.
fn direct_vocabulary(d: &DirectSpec, http: &HttpConfig) -> Result<Arc<Vocabulary>, Failure> {
    let vocab = Vocabulary::load(&d.tokenizer).map_err(|e| {
        Failure::new(
            FailureKind::UnreadableFile,
            format!(
                "grid.endpoint's tokenizer {} cannot be read: {e}: point tokenizer= at the \
                 served model's tokenizer on this machine (a directory with tokenizer.json, \
                 or vocab.json and merges.txt)",
                d.tokenizer.display()
            ),
        )
    })?;
    let vocab = match &d.eos {
        None => vocab,
        Some(name) => {
            let id = name
                .parse::<u32>()
                .ok()
                .or_else(|| vocab.special_id(name))
                .ok_or_else(|| {
                    Failure::new(
                        FailureKind::InvalidValue,
                        format!(
                            "grid.endpoint's eos={name:?} is no special token of the tokenizer \
                             {}: give the text of the chat template's end of turn (e.g. \
                             <|im_end|>) or its id",
                            d.tokenizer.display()
                        ),
                    )
                })?;
            vocab.with_eos(id).map_err(|e| {
                Failure::new(
                    FailureKind::InvalidValue,
                    format!("grid.endpoint's eos={name:?}: {e}"),
                )
            })?
        }
    };
    let vocab = Arc::new(vocab);
    let client = direct_client(d, http.clone(), &vocab)?;
    let listed = runtime()?
        .block_on(client.served_models())
        .map_err(|e| Failure::endpoint(&e))?;
    if let Some(names) = listed {
        if !names.iter().any(|n| n == &d.model) {
            return Err(Failure::new(
                FailureKind::InvalidValue,
                format!(
                    "the server at {} does not serve the model {:?} (it serves {:?}): set \
                     model= in grid.endpoint to one of those",
                    client.endpoint(),
                    d.model,
                    names
                ),
            ));
        }
    }
    Ok(vocab)
}

/// The most `grid.timeout` may be: what bounds one request of a model's client, which the
/// asks of a loop share whatever their own timeouts; each ask's deadline is kept by the
/// loop (a generation past it is cancelled, a request abandoned once every ask of the loop
/// has gone: [`Models::set_abort`]).
const MODEL_REQUEST_TIMEOUT: Duration = Duration::from_secs(3600);

/// The HTTP settings of a model's client (see [`MODEL_REQUEST_TIMEOUT`]).
fn model_http_config(api_key: Option<&str>) -> HttpConfig {
    bounded_http_config(MODEL_REQUEST_TIMEOUT, api_key)
}

/// Requests bounded by `timeout` (connecting by at most 5 s of it), no retries (a step is
/// not idempotent).
pub(crate) fn bounded_http_config(timeout: Duration, api_key: Option<&str>) -> HttpConfig {
    HttpConfig {
        connect_timeout: timeout.min(Duration::from_secs(5)),
        request_timeout: timeout,
        retries: 0,
        api_key: api_key.and_then(ApiKey::new),
        ..HttpConfig::default()
    }
}

/// The HTTP settings of one ask's own requests (the vocabulary of a server it is the
/// first to use): `settings.timeout_ms` bounds every request (the whole generation has no
/// longer), no retries (a step is not idempotent).
pub(crate) fn http_config(settings: &AskSettings, api_key: Option<&str>) -> HttpConfig {
    bounded_http_config(Duration::from_millis(settings.timeout_ms.max(1)), api_key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{Ablation, AuditLevel};

    fn settings(endpoint: &str) -> AskSettings {
        AskSettings {
            endpoint: Some(endpoint.into()),
            model: None,
            max_tokens: 48,
            temperature: 0.0,
            timeout_ms: 1000,
            audit: AuditLevel::Full,
            ablation: Ablation::default(),
            fault: None,
            judge: true,
            decline: false,
        }
    }

    #[test]
    fn one_client_per_group_and_one_group_per_spelling_of_a_setting() {
        let key = |e: &str| client_key(&settings(e), None);
        // What EndpointSpec::parse reads alike is one group, so one client.
        assert_eq!(key("http://h:1"), key("  http://h:1 "));
        // A stock server asked in chunks of 1 and of 16 needs two clients: each keeps
        // its own configuration (and abort hook).
        let direct = "openai+http://h:1/v1?model=m&tokenizer=/t";
        assert_ne!(key(direct), key(&format!("{direct}&chunk=1")));
        // The API key is told apart by its digest, never written in the key.
        let with_key = client_key(&settings("http://h:1"), Some("s3cret"));
        assert_ne!(with_key, key("http://h:1"));
        assert!(!with_key.contains("s3cret"));
    }
}
