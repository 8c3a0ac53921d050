//! The vLLM backend: each generation's step is one `POST /v1/completions` to a vLLM
//! OpenAI-compatible server with the token-id history as prompt, `max_tokens: 1`,
//! vLLM's `allowed_token_ids` = mask ∪ cd_pass (∪ EOS when allowed), `logprobs: 1` and
//! `return_tokens_as_token_ids: true`. The steps of a batch are sent concurrently (vLLM
//! batches them on the GPU).

use std::sync::Arc;

use grid_vocab::Vocabulary;

use crate::backend::mock::mix;
use crate::backend::{Backend, BoxFuture, Sample, SampleContext};
use crate::client::http::{Http, HttpConfig};
use crate::client::openai::{parse_completion, CompletionRequest, TokenMap, COMPLETIONS_PATH};
use crate::error::BackendError;
use crate::protocol::Sampling;

/// Settings of the vLLM backend.
#[derive(Debug, Clone)]
pub struct VllmConfig {
    /// The vLLM server root, e.g. `http://gpu-host:8000` (a trailing `/v1` is accepted).
    pub url: String,
    /// The served model name.
    pub model: String,
    /// Transport settings (the API key, if any, goes here).
    pub http: HttpConfig,
}

/// What the concurrent per-generation tasks share.
#[derive(Debug)]
struct Inner {
    http: Http,
    model: String,
    vocab: Arc<Vocabulary>,
    map: TokenMap,
}

/// A backend fronting a vLLM server.
#[derive(Debug, Clone)]
pub struct VllmBackend {
    inner: Arc<Inner>,
}

/// One step's request, owned (it moves into a task).
struct Job {
    prompt: Vec<u32>,
    allowed: Vec<u32>,
    eos: Option<u32>,
    sampling: Sampling,
}

impl VllmBackend {
    /// A backend for `config.model` at `config.url`, whose tokenizer is `vocab`.
    pub fn new(config: VllmConfig, vocab: Arc<Vocabulary>) -> Result<Self, BackendError> {
        let http = Http::new(&config.url, config.http)
            .map_err(|e| BackendError::new(format!("vLLM client: {e}")))?;
        Ok(VllmBackend {
            inner: Arc::new(Inner {
                http,
                model: config.model,
                vocab,
                map: TokenMap::new(),
            }),
        })
    }
}

impl Inner {
    async fn sample(&self, job: Job) -> Result<Sample, BackendError> {
        let position = job.prompt.len() as u64;
        let req = CompletionRequest {
            model: &self.model,
            prompt: &job.prompt,
            max_tokens: 1,
            temperature: job.sampling.temperature,
            top_k: job.sampling.top_k,
            // A different draw per position, reproducible from the step's seed.
            seed: Some(mix(job.sampling.seed, position) >> 1),
            logprobs: 1,
            allowed_token_ids: Some(job.allowed),
            logit_bias: None,
            return_tokens_as_token_ids: true,
            skip_special_tokens: Some(false),
        };
        let reply = self
            .http
            .post_json_stateless(COMPLETIONS_PATH, &req)
            .await
            .map_err(|e| BackendError::new(format!("vLLM: {e}")))?;
        let completion = parse_completion(&reply.body, &self.vocab, &self.map)
            .map_err(|e| BackendError::new(format!("vLLM: {e}")))?;
        match completion.tokens.first() {
            Some(t) => Ok(Sample {
                token: t.id,
                logprob: t.logprob.filter(|p| p.is_finite()),
            }),
            // vLLM may leave a stop token (EOS) out of the output.
            None if completion.finish_reason.as_deref() == Some("stop") => match job.eos {
                Some(eos) => Ok(Sample {
                    token: eos,
                    logprob: None,
                }),
                None => Err(BackendError::new(
                    "vLLM stopped (EOS) although EOS was not allowed",
                )),
            },
            None => Err(BackendError::new("vLLM returned no token")),
        }
    }
}

impl Backend for VllmBackend {
    fn model(&self) -> &str {
        &self.inner.model
    }

    fn sample_batch<'a>(
        &'a self,
        batch: &'a [SampleContext<'a>],
    ) -> BoxFuture<'a, Vec<Result<Sample, BackendError>>> {
        let jobs: Vec<Job> = batch
            .iter()
            .map(|c| {
                let mut prompt = Vec::with_capacity(c.position());
                prompt.extend_from_slice(c.prompt);
                prompt.extend_from_slice(c.generated);
                Job {
                    prompt,
                    allowed: c.allowed.ids(),
                    eos: c.allowed.eos(),
                    sampling: c.sampling,
                }
            })
            .collect();
        let inner = self.inner.clone();
        Box::pin(async move {
            let handles: Vec<_> = jobs
                .into_iter()
                .map(|job| {
                    let inner = inner.clone();
                    tokio::spawn(async move { inner.sample(job).await })
                })
                .collect();
            let mut out = Vec::with_capacity(handles.len());
            for h in handles {
                out.push(match h.await {
                    Ok(r) => r,
                    Err(e) => Err(BackendError::new(format!("vLLM task failed: {e}"))),
                });
            }
            out
        })
    }
}
