//! [`LlamaBackend`]: loads a GGUF model, starts its model thread (a
//! [`crate::backend::pipeline`]), and implements [`Backend`] over it.

use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use grid_vocab::Vocabulary;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend as LlamaRuntime;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token_type::LlamaTokenAttr;

use crate::backend::llama::engine::{Engine, EngineConfig, EngineStats};
use crate::backend::llama::template::ChatTemplate;
use crate::backend::llama::vocab::{served_vocabulary, TokenKind};
use crate::backend::pipeline::{self, Pipeline, PipelineConfig};
use crate::backend::{Backend, BoxFuture, Sample, SampleContext};
use crate::chat::{render_plain, RenderError, RenderedPrompt};
use crate::error::BackendError;
use crate::protocol::ChatMessage;

/// Settings of a [`LlamaBackend`].
#[derive(Debug, Clone)]
pub struct LlamaConfig {
    /// The GGUF file.
    pub(crate) model: PathBuf,
    /// CPU threads for decoding. One by default: on a 2-core machine whose other core is
    /// busy, two threads make generation collapse (measured: 18 → 0.4 tok/s).
    pub threads: usize,
    /// KV cache cells shared by every generation and kept prompt; `None`: the model's
    /// training context, at most 16,384.
    pub ctx: Option<u32>,
    /// Generations holding a KV sequence at once.
    pub max_generations: usize,
    /// Evaluated prompts kept for reuse.
    pub prefix_cache: usize,
    /// Most tokens per `llama_decode` call.
    pub(crate) batch: u32,
    /// Decode each sampled token right after the reply (see
    /// [`crate::backend::pipeline`]).
    pub overlap: bool,
    /// Print one line per step on stderr (its times on the model thread; bench/).
    pub trace: bool,
    /// Use this id as EOS instead of the model's end of turn.
    pub eos: Option<u32>,
    /// Layers offloaded to a GPU (CUDA builds).
    pub gpu_layers: u32,
}

impl LlamaConfig {
    /// The defaults for `model`.
    pub fn new(model: impl Into<PathBuf>) -> Self {
        LlamaConfig {
            model: model.into(),
            threads: 1,
            ctx: None,
            max_generations: 64,
            prefix_cache: 16,
            batch: 2048,
            overlap: true,
            trace: false,
            eos: None,
            gpu_layers: if cfg!(feature = "cuda") { u32::MAX } else { 0 },
        }
    }
}

/// llama.cpp's global state, initialised once per process (by the first backend, or by
/// a caller that loads models of its own, such as a test's reference).
pub fn runtime() -> Result<&'static LlamaRuntime, String> {
    static RUNTIME: OnceLock<Result<LlamaRuntime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            let mut rt = LlamaRuntime::init().map_err(|e| format!("llama.cpp: {e}"))?;
            // llama.cpp logs every load and context to stderr; GRID_LLAMA_LOG keeps it.
            if std::env::var_os("GRID_LLAMA_LOG").is_none() {
                rt.void_logs();
            }
            Ok(rt)
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// What rendering a chat prompt needs: the model (its tokenizer) and its template.
struct Renderer {
    model: Arc<LlamaModel>,
    template: Option<ChatTemplate>,
    /// Texts llama's tokenizer turns into control tokens: a message holding one is
    /// refused, so no message can open or close a turn.
    control_texts: Vec<String>,
    /// Prepend BOS (the model's tokenizer adds it and the template did not write it).
    bos: Option<u32>,
}

impl Renderer {
    fn render(&self, messages: &[ChatMessage]) -> Result<RenderedPrompt, RenderError> {
        let Some(template) = &self.template else {
            let text = render_plain(messages);
            return Ok(RenderedPrompt {
                tokens: self.tokenize(&text, false),
                text,
            });
        };
        for m in messages {
            if let Some(t) = self.control_texts.iter().find(|t| m.content.contains(*t)) {
                return Err(RenderError::Refused(format!(
                    "a {} message contains {t:?}, a control token of the model",
                    m.role.as_str()
                )));
            }
        }
        let text = template.render(messages).map_err(RenderError::Refused)?;
        Ok(RenderedPrompt {
            tokens: self.tokenize(&text, true),
            text,
        })
    }

    fn tokenize(&self, text: &str, parse_special: bool) -> Vec<u32> {
        let vocab = self.model.vocab();
        let mut tokens: Vec<u32> = vocab
            .tokenize(text.as_bytes(), false, parse_special)
            .into_iter()
            .map(|t| t.0 as u32)
            .collect();
        if let Some(bos) = self.bos {
            if tokens.first() != Some(&bos) {
                tokens.insert(0, bos);
            }
        }
        tokens
    }
}

/// A real model served through llama.cpp (see the [module documentation](super)).
pub struct LlamaBackend {
    name: String,
    vocab: Arc<Vocabulary>,
    pipeline: Pipeline<EngineStats>,
    renderer: Arc<Renderer>,
}

impl std::fmt::Debug for LlamaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlamaBackend")
            .field("model", &self.name)
            .finish_non_exhaustive()
    }
}

impl LlamaBackend {
    /// Loads the model, reads its vocabulary and template, and starts the model
    /// thread. Blocks for the load (seconds).
    pub fn load(config: &LlamaConfig) -> Result<LlamaBackend, String> {
        let path = &config.model;
        if !path.is_file() {
            return Err(format!("model {}: no such file", path.display()));
        }
        let rt = runtime()?;
        let params = LlamaModelParams::default().with_n_gpu_layers(config.gpu_layers);
        let model = LlamaModel::load_from_file(rt, path, &params)
            .map_err(|e| format!("model {}: {e}", path.display()))?;
        let model = Arc::new(model);
        let declared = super::gguf::token_types(path)
            .map_err(|e| format!("model {}: reading its token types: {e}", path.display()))?;
        let vocab = Arc::new(read_vocabulary(&model, declared, config.eos)?);
        let renderer = Arc::new(read_renderer(&model)?);
        let name = model
            .meta_val_str("general.name")
            .ok()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| {
                path.file_stem()
                    .map_or_else(|| "gguf".into(), |s| s.to_string_lossy().into_owned())
            });

        let train = model.n_ctx_train().max(1);
        let n_ctx = config.ctx.unwrap_or(train.min(16_384)).max(64);
        let sequences = config.max_generations.max(1) + config.prefix_cache;
        if sequences > 256 {
            return Err(format!(
                "--max-generations + --prefix-cache is {sequences}; llama.cpp allows 256 sequences"
            ));
        }
        let batch = config.batch.clamp(1, n_ctx);
        let threads = i32::try_from(config.threads.max(1)).unwrap_or(1);
        let ctx_params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(n_ctx))
            .with_n_batch(batch)
            .with_n_ubatch(batch.min(512))
            .with_n_seq_max(sequences as u32)
            .with_n_threads(threads)
            .with_n_threads_batch(threads)
            .with_kv_unified(true);
        let thread_model = model.clone();
        let max_generations = config.max_generations.max(1);
        let max_prefixes = config.prefix_cache;
        let pipeline_config = PipelineConfig {
            overlap: config.overlap,
            eos: vocab.eos_id(),
            trace: config.trace,
        };
        let pipeline = pipeline::spawn("grid-llama", move |start| {
            let ctx = match thread_model.new_context(rt, ctx_params) {
                Ok(ctx) => ctx,
                Err(e) => return start.fail(format!("llama context: {e}")),
            };
            let n_ctx = ctx.n_ctx() as usize;
            let engine = Engine::new(
                ctx,
                EngineConfig {
                    max_generations,
                    max_prefixes,
                    n_ctx,
                    n_batch: batch as usize,
                },
            );
            start.run(engine, pipeline_config);
        })?;
        Ok(LlamaBackend {
            name,
            vocab,
            pipeline,
            renderer,
        })
    }

    /// The served vocabulary (the model's own).
    pub fn vocabulary(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// The model thread's counters.
    pub async fn stats(&self) -> Result<EngineStats, BackendError> {
        self.pipeline.stats().await
    }
}

/// The served vocabulary of `model` (see [`super::vocab`]): kinds as the file declares
/// them (`declared`), or as llama.cpp reports them when the file has no types.
fn read_vocabulary(
    model: &LlamaModel,
    declared: Option<Vec<i32>>,
    eos_override: Option<u32>,
) -> Result<Vocabulary, String> {
    let v = model.vocab();
    let n = v.n_tokens().max(0);
    let declared = declared.filter(|d| d.len() == n as usize);
    let mut tokens = Vec::with_capacity(n as usize);
    for id in 0..n {
        let t = LlamaToken::new(id);
        let attr = v.attr(t);
        let kind = if let Some(d) = &declared {
            TokenKind::from_gguf(d[id as usize])
        } else if attr.contains(LlamaTokenAttr::Unused) {
            TokenKind::Unused
        } else if attr.intersects(
            LlamaTokenAttr::Control | LlamaTokenAttr::UserDefined | LlamaTokenAttr::Unknown,
        ) {
            TokenKind::Special
        } else {
            TokenKind::Normal
        };
        tokens.push((v.token_to_piece(t, true, None), kind));
    }
    served_vocabulary(
        tokens,
        i64::from(v.eot().0),
        i64::from(v.eos().0),
        eos_override,
    )
    .map_err(|e| format!("the model's vocabulary: {e}"))
}

/// The chat template and tokenizer facts of `model`.
fn read_renderer(model: &Arc<LlamaModel>) -> Result<Renderer, String> {
    let v = model.vocab();
    let text_of = |t: LlamaToken| -> String {
        if t.0 < 0 || t.0 >= v.n_tokens() {
            return String::new();
        }
        String::from_utf8_lossy(&v.token_to_piece(t, true, None)).into_owned()
    };
    let bos = v.bos();
    let template = match model.meta_val_str("tokenizer.chat_template") {
        Ok(source) if !source.is_empty() => {
            Some(ChatTemplate::new(source, text_of(bos), text_of(v.eos()))?)
        }
        _ => None,
    };
    let mut control_texts = Vec::new();
    for id in 0..v.n_tokens() {
        let t = LlamaToken::new(id);
        if v.attr(t)
            .intersects(LlamaTokenAttr::Control | LlamaTokenAttr::UserDefined)
        {
            let text = text_of(t);
            if !text.is_empty() {
                control_texts.push(text);
            }
        }
    }
    let bos = (v.should_add_bos() && bos.0 >= 0).then_some(bos.0 as u32);
    Ok(Renderer {
        model: model.clone(),
        template,
        control_texts,
        bos,
    })
}

impl Backend for LlamaBackend {
    fn model(&self) -> &str {
        &self.name
    }

    fn sample_batch<'a>(
        &'a self,
        batch: &'a [SampleContext<'a>],
    ) -> BoxFuture<'a, Vec<Result<Sample, BackendError>>> {
        self.pipeline.sample_batch(batch)
    }

    fn release(&self, generations: &[String]) {
        self.pipeline.release(generations);
    }

    fn chat_template(&self) -> bool {
        self.renderer.template.is_some()
    }

    fn render_chat<'a>(
        &'a self,
        messages: &'a [ChatMessage],
    ) -> Option<BoxFuture<'a, Result<RenderedPrompt, RenderError>>> {
        let renderer = self.renderer.clone();
        let messages = messages.to_vec();
        Some(Box::pin(async move {
            // Rendering a long prompt and tokenizing it takes milliseconds: off the
            // runtime's threads.
            tokio::task::spawn_blocking(move || renderer.render(&messages))
                .await
                .unwrap_or_else(|e| Err(RenderError::Backend(format!("rendering failed: {e}"))))
        }))
    }
}
