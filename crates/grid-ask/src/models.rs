//! The models an ask can reach and what masks need of their vocabularies: the mocks in
//! process, `grid-endpoint/1` servers (their clients kept, so that a server's mask cache
//! is reused across asks), the vocabularies with their tries and spellers, and
//! [`Prompter::tokens`], the one place a prompt becomes token ids.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
use grid_endpoint::model::{InProcess, Remote, SamplingPlan};
use grid_endpoint::{
    Backend, ChatMessage, ClientConfig, EndpointClient, EndpointSpec, HttpConfig, Role, SpecError,
};
use grid_vocab::Vocabulary;

use crate::failure::{Failure, FailureKind};
use crate::request::AskSettings;

/// A vocabulary and what masks and reserves need of it.
pub struct VocabState {
    pub vocab: Arc<Vocabulary>,
    pub trie: Arc<TokenTrie>,
    pub speller: Speller,
    /// The model the endpoint says it serves.
    pub model: String,
    /// How prompts become this vocabulary's ids.
    rendering: Rendering,
}

impl VocabState {
    pub fn new(vocab: Arc<Vocabulary>, model: String) -> Result<VocabState, Failure> {
        let trie = TokenTrie::shared(&vocab).map_err(|e| {
            Failure::internal(format!("the endpoint's vocabulary cannot be used: {e}"))
        })?;
        let speller = Speller::of(&vocab);
        Ok(VocabState {
            vocab,
            trie,
            speller,
            model,
            rendering: Rendering::Flat,
        })
    }

    /// How prompts become this vocabulary's token ids.
    pub fn prompter(&self) -> Prompter {
        Prompter {
            vocab: self.vocab.clone(),
            rendering: self.rendering.clone(),
        }
    }

    /// Whether the endpoint renders prompts with its model's chat template.
    pub fn chat_template(&self) -> bool {
        matches!(self.rendering, Rendering::Template(_))
    }
}

/// How a prompt becomes token ids.
#[derive(Clone)]
enum Rendering {
    /// [`Prompt::flat`] through the vocabulary's encoder: the mocks, and endpoints whose
    /// model has no chat template (a completion prompt ending in `-- SQL:` suits them).
    Flat,
    /// The endpoint renders the system and user messages with its model's chat template
    /// and tokenizer (`POST /v1/prompt`): an instruct model answers the prompt it was
    /// trained on, with the special tokens its tokenizer writes.
    Template(Arc<ChatRenderer>),
}

/// An endpoint's client kept for `POST /v1/prompt`.
struct ChatRenderer {
    client: EndpointClient,
    /// The client is async; a prompt is rendered between ticks, on any worker thread.
    rt: Mutex<tokio::runtime::Runtime>,
}

impl ChatRenderer {
    /// The renderer of the endpoint at `url`, if its model has a chat template (one
    /// rendering of a short conversation tells).
    fn probe(url: &str, vocab: &Vocabulary, http: &HttpConfig) -> Result<Option<Self>, Failure> {
        let client = EndpointClient::new(
            url,
            vocab.fingerprint(),
            ClientConfig {
                http: http.clone(),
                ..ClientConfig::default()
            },
        )
        .map_err(|e| Failure::endpoint(&e))?;
        let rt = runtime()?;
        let probe = [
            ChatMessage::new(Role::System, "s"),
            ChatMessage::new(Role::User, "u"),
        ];
        let (_, by) = rt
            .block_on(client.render(&probe, vocab))
            .map_err(|e| Failure::endpoint(&e))?;
        Ok((by == RenderedBy::Template).then(|| ChatRenderer {
            client,
            rt: Mutex::new(rt),
        }))
    }

    fn render(&self, prompt: &Prompt, vocab: &Vocabulary) -> Result<Vec<u32>, Failure> {
        let messages = [
            ChatMessage::new(Role::System, prompt.system.clone()),
            ChatMessage::new(Role::User, prompt.user.clone()),
        ];
        let rt = self
            .rt
            .lock()
            .map_err(|_| Failure::internal("the prompt renderer's runtime was poisoned"))?;
        rt.block_on(self.client.render_prompt(&messages, vocab))
            .map_err(|e| Failure::endpoint(&e))
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::internal(e.to_string()))
}

/// Turns a prompt into the token ids the model continues from: the one place that
/// decides how a prompt is encoded (see [`Rendering`]).
pub struct Prompter {
    vocab: Arc<Vocabulary>,
    rendering: Rendering,
}

impl Prompter {
    /// A prompter that encodes [`Prompt::flat`] with `vocab`.
    pub fn new(vocab: Arc<Vocabulary>) -> Prompter {
        Prompter {
            vocab,
            rendering: Rendering::Flat,
        }
    }

    pub fn tokens(&self, prompt: &Prompt) -> Result<Vec<u32>, Failure> {
        match &self.rendering {
            Rendering::Flat => Ok(self.vocab.encode(&prompt.flat())),
            Rendering::Template(r) => r.render(prompt, &self.vocab),
        }
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
pub enum ModelSlot {
    Local(Box<dyn Model>),
    Remote(String),
}

/// The models and vocabularies in use (see the module documentation).
pub struct Models {
    vocabularies: HashMap<String, Arc<VocabState>>,
    remotes: HashMap<String, Remote>,
    defaults: MockDefaults,
}

/// Servers whose clients are kept (settings that change often would pile them up).
const REMOTES_KEPT: usize = 16;

impl Models {
    pub fn new(defaults: MockDefaults) -> Models {
        Models {
            vocabularies: HashMap::new(),
            remotes: HashMap::new(),
            defaults,
        }
    }

    /// The model `settings.endpoint` names.
    pub fn spec(settings: &AskSettings) -> Result<EndpointSpec, Failure> {
        EndpointSpec::parse(settings.endpoint.as_deref()).map_err(|e| match e {
            SpecError::Unset => {
                Failure::new(FailureKind::EndpointUnset, format!("grid.endpoint is {e}"))
            }
            SpecError::Invalid(_) => {
                Failure::new(FailureKind::InvalidValue, format!("grid.endpoint {e}"))
            }
        })
    }

    fn vocabulary_key(spec: &EndpointSpec) -> String {
        match spec {
            EndpointSpec::Scripted(_) | EndpointSpec::Adversarial => "mock".into(),
            EndpointSpec::Http(url) => url.clone(),
        }
    }

    /// The vocabulary of the model `spec` names (fetched from a server once, then kept).
    pub fn vocabulary(
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
        };
        let mut state = VocabState::new(vocab, model)?;
        if let EndpointSpec::Http(url) = spec {
            if let Some(r) = ChatRenderer::probe(url, &state.vocab, http)? {
                state.rendering = Rendering::Template(Arc::new(r));
            }
        }
        let state = Arc::new(state);
        self.vocabularies.insert(key, state.clone());
        Ok(state)
    }

    /// The model `spec` names, sampling with `settings`.
    pub fn model(
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
                let key = format!(
                    "{url}\0{}\0{}\0{}",
                    settings.timeout_ms,
                    settings.temperature.to_bits(),
                    api_key.map(|k| to_hex(&text_digest(k))).unwrap_or_default()
                );
                if !self.remotes.contains_key(&key) {
                    let client = EndpointClient::new(
                        url,
                        vocab.vocab.fingerprint(),
                        ClientConfig {
                            http: http_config(settings, api_key),
                            ..ClientConfig::default()
                        },
                    )
                    .map_err(|e| Failure::endpoint(&e))?;
                    let remote =
                        Remote::new(client, vocab.vocab.clone(), plan).map_err(internal)?;
                    if self.remotes.len() >= REMOTES_KEPT {
                        self.remotes.clear();
                    }
                    self.remotes.insert(key.clone(), remote);
                }
                return Ok(ModelSlot::Remote(key));
            }
        };
        Ok(ModelSlot::Local(Box::new(
            InProcess::new(backend, vocab.vocab.clone(), plan).map_err(internal)?,
        )))
    }

    /// The model a tick asks, or `None` when a server's client has been dropped.
    pub fn get<'a>(&'a mut self, slot: &'a mut ModelSlot) -> Option<&'a mut dyn Model> {
        match slot {
            ModelSlot::Local(m) => Some(m.as_mut()),
            ModelSlot::Remote(key) => self
                .remotes
                .get_mut(key.as_str())
                .map(|r| r as &mut dyn Model),
        }
    }

    /// The server behind `slot`, if it is one.
    pub fn remote(&mut self, slot: &ModelSlot) -> Option<&mut Remote> {
        match slot {
            ModelSlot::Remote(key) => self.remotes.get_mut(key.as_str()),
            ModelSlot::Local(_) => None,
        }
    }

    /// The server behind `spec` changed models: its vocabulary is fetched again, and
    /// every client made anew, at the next ask.
    pub fn forget(&mut self, spec: &EndpointSpec) {
        self.vocabularies.remove(&Self::vocabulary_key(spec));
        self.remotes.clear();
    }
}

/// The HTTP settings of a server's client: `settings.timeout_ms` bounds every request
/// (the whole generation has no longer), no retries (a step is not idempotent).
pub fn http_config(settings: &AskSettings, api_key: Option<&str>) -> HttpConfig {
    let timeout = Duration::from_millis(settings.timeout_ms.max(1));
    HttpConfig {
        connect_timeout: timeout.min(Duration::from_secs(5)),
        request_timeout: timeout,
        retries: 0,
        api_key: api_key.and_then(ApiKey::new),
        ..HttpConfig::default()
    }
}
