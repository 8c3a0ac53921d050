//! The decode loop's [`Model`] over this crate's endpoints (feature `decode`): the
//! reference mocks called in process, a `grid-endpoint/1` server reached with
//! [`EndpointClient`], and a stock OpenAI-compatible server in the direct mode
//! ([`DirectClient`]). Each gives one token per ready generation per tick, under the
//! exact mask the loop computed; EOS travels as the mask's separate bit (the direct mode
//! puts it in the set it sends, as stock servers know no other way).

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use grid_core::decode::{Choice, Model, ModelError, ModelStep};
use grid_vocab::Vocabulary;

use crate::chat::{render_plain_with, RenderedBy, RenderedPrompt};
use crate::client::direct::Lookahead;
use crate::client::{DirectClient, EndpointClient, Mask as WireMask, StepInput};
use crate::{
    Allowed, Backend, ChatMessage, ClientError, EntryId, SampleContext, Sampling, TokenSet,
};

/// How every generation samples: temperature and top-k; the seed is the generation's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplingPlan {
    pub temperature: f64,
    pub top_k: Option<u32>,
}

impl SamplingPlan {
    fn for_seed(self, seed: u64) -> Sampling {
        Sampling {
            temperature: self.temperature,
            top_k: self.top_k,
            seed,
        }
    }
}

/// The token set the endpoint samples from: the mask's ids, EOS excluded (EOS is a
/// separate bit of the step).
fn wire_set(
    step: &ModelStep<'_>,
    universe: usize,
    eos: Option<u32>,
) -> Result<TokenSet, ModelError> {
    TokenSet::from_ids(universe, step.mask.ids().filter(|&i| Some(i) != eos))
        .map_err(|e| ModelError(format!("mask: {e}")))
}

fn choice(token: u32, eos: Option<u32>) -> Choice {
    if Some(token) == eos {
        Choice::Eos
    } else {
        Choice::Token(token)
    }
}

/// Per-generation samples (or failures) as the loop's choices.
fn choices<T, E: std::fmt::Display>(
    out: Vec<Result<T, E>>,
    token: impl Fn(&T) -> u32,
    eos: Option<u32>,
) -> Vec<Result<Choice, ModelError>> {
    out.into_iter()
        .map(|r| {
            r.map(|s| choice(token(&s), eos))
                .map_err(|e| ModelError(e.to_string()))
        })
        .collect()
}

/// A backend called in process (the mocks), one batch call per tick.
pub struct InProcess {
    backend: Arc<dyn Backend>,
    vocab: Arc<Vocabulary>,
    plan: SamplingPlan,
    rt: tokio::runtime::Runtime,
    calls: u64,
}

impl InProcess {
    pub fn new(
        backend: Arc<dyn Backend>,
        vocab: Arc<Vocabulary>,
        plan: SamplingPlan,
    ) -> std::io::Result<InProcess> {
        Ok(InProcess {
            backend,
            vocab,
            plan,
            rt: current_thread()?,
            calls: 0,
        })
    }
}

impl InProcess {
    /// `messages` as the backend's model expects them: its chat template and tokenizer
    /// when it has one, otherwise the plain join encoded with the vocabulary (what a
    /// server with this backend answers to `POST /v1/prompt`).
    pub fn render(
        &self,
        messages: &[ChatMessage],
    ) -> Result<(RenderedPrompt, RenderedBy), ModelError> {
        let Some(fut) = self.backend.render_chat(messages) else {
            return Ok((render_plain_with(&self.vocab, messages), RenderedBy::Plain));
        };
        let rendered = self
            .rt
            .block_on(fut)
            .map_err(|e| ModelError(format!("rendering the prompt: {e}")))?;
        let n = self.vocab.len();
        if let Some(bad) = rendered.tokens.iter().find(|&&t| t as usize >= n) {
            return Err(ModelError(format!(
                "the backend's tokenizer wrote id {bad}, outside the vocabulary of {n}"
            )));
        }
        let by = if self.backend.chat_template() {
            RenderedBy::Template
        } else {
            RenderedBy::Plain
        };
        Ok((rendered, by))
    }

    /// The token ids of [`InProcess::render`].
    pub fn render_prompt(&self, messages: &[ChatMessage]) -> Result<Vec<u32>, ModelError> {
        Ok(self.render(messages)?.0.tokens)
    }
}

fn current_thread() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

impl Model for InProcess {
    fn step(
        &mut self,
        batch: &[ModelStep<'_>],
    ) -> Result<Vec<Result<Choice, ModelError>>, ModelError> {
        self.calls += 1;
        let eos = self.vocab.eos_id();
        let mut allowed = Vec::with_capacity(batch.len());
        for s in batch {
            let set = wire_set(s, self.vocab.len(), eos)?;
            allowed.push(Allowed::new(Arc::new(set), &[], eos.filter(|_| s.mask.eos)));
        }
        let names: Vec<String> = batch.iter().map(|s| s.generation.to_string()).collect();
        let ctxs: Vec<SampleContext<'_>> = batch
            .iter()
            .zip(&allowed)
            .zip(&names)
            .map(|((s, a), name)| SampleContext {
                generation: name,
                prompt: s.prompt,
                generated: s.generated,
                allowed: a,
                sampling: self.plan.for_seed(s.seed),
            })
            .collect();
        let out = self.rt.block_on(self.backend.sample_batch(&ctxs));
        Ok(choices(out, |s| s.token, eos))
    }

    fn round_trips(&self) -> u64 {
        self.calls
    }
}

/// What a model over HTTP keeps beside its client: the runtime its requests run on, the
/// check that abandons a request in flight, and the client error behind the last
/// failure (for the caller to classify).
struct Link {
    rt: tokio::runtime::Runtime,
    last_error: Option<ClientError>,
    /// Asked every 50 ms while a request is out: `true` abandons it (everyone waiting
    /// for the batch has gone), so a hung endpoint does not hold the loop.
    abort: Option<Abort>,
}

impl Link {
    fn new() -> std::io::Result<Link> {
        Ok(Link {
            rt: current_thread()?,
            last_error: None,
            abort: None,
        })
    }

    /// Runs `f`, abandoning it once the abort check says so.
    fn run<F: Future>(&self, f: F) -> Result<F::Output, ModelError> {
        let Some(abort) = &self.abort else {
            return Ok(self.rt.block_on(f));
        };
        self.rt
            .block_on(async {
                tokio::select! {
                    r = f => Some(r),
                    () = async {
                        while !abort() {
                            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        }
                    } => None,
                }
            })
            .ok_or_else(|| {
                ModelError(
                    "the request was abandoned: every session waiting for it has gone".into(),
                )
            })
    }

    /// `e` as the loop's error, kept for [`Link::last_error`]'s reader.
    fn fail(&mut self, e: ClientError, context: &str) -> ModelError {
        let m = ModelError(format!("{context}{e}"));
        self.last_error = Some(e);
        m
    }
}

/// A `grid-endpoint/1` server over HTTP.
pub struct Remote {
    client: EndpointClient,
    vocab: Arc<Vocabulary>,
    plan: SamplingPlan,
    link: Link,
}

/// See [`Remote::set_abort`].
pub type Abort = Arc<dyn Fn() -> bool + Send + Sync>;

impl Remote {
    /// `client`'s masks must be over `vocab` (see [`EndpointClient::check_vocabulary`]).
    pub fn new(
        client: EndpointClient,
        vocab: Arc<Vocabulary>,
        plan: SamplingPlan,
    ) -> std::io::Result<Remote> {
        Ok(Remote {
            client,
            vocab,
            plan,
            link: Link::new()?,
        })
    }

    /// Sets (or clears) the check that abandons a request in flight.
    pub fn set_abort(&mut self, abort: Option<Abort>) {
        self.link.abort = abort;
    }

    /// The client error behind the last failed step, once.
    pub fn take_error(&mut self) -> Option<ClientError> {
        self.link.last_error.take()
    }

    /// Runs a future of the client on this model's runtime (e.g. the vocabulary check).
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.link.rt.block_on(f)
    }

    pub fn client(&self) -> &EndpointClient {
        &self.client
    }

    /// `messages` rendered by the endpoint (`POST /v1/prompt`; plainly and locally when
    /// the endpoint does not serve the call). A failure's client error is kept for
    /// [`Remote::take_error`].
    pub fn render(
        &mut self,
        messages: &[ChatMessage],
    ) -> Result<(RenderedPrompt, RenderedBy), ModelError> {
        let out = self
            .link
            .rt
            .block_on(self.client.render(messages, &self.vocab));
        out.map_err(|e| self.link.fail(e, "rendering the prompt: "))
    }

    /// The token ids of [`Remote::render`].
    pub fn render_prompt(&mut self, messages: &[ChatMessage]) -> Result<Vec<u32>, ModelError> {
        Ok(self.render(messages)?.0.tokens)
    }
}

impl Model for Remote {
    fn step(
        &mut self,
        batch: &[ModelStep<'_>],
    ) -> Result<Vec<Result<Choice, ModelError>>, ModelError> {
        let eos = self.vocab.eos_id();
        let mut masks = Vec::with_capacity(batch.len());
        let mut histories = Vec::with_capacity(batch.len());
        for s in batch {
            masks.push(WireMask {
                entry_id: EntryId(s.mask_entry_id),
                set: Arc::new(wire_set(s, self.vocab.len(), eos)?),
            });
            let mut h = s.prompt.to_vec();
            h.extend_from_slice(s.generated);
            histories.push(h);
        }
        let names: Vec<String> = batch.iter().map(|s| s.generation.to_string()).collect();
        let inputs: Vec<StepInput<'_>> = batch
            .iter()
            .enumerate()
            .map(|(k, s)| StepInput {
                id: &names[k],
                history: &histories[k],
                prompt_len: s.prompt.len(),
                mask: &masks[k],
                cd_pass: &[],
                eos_allowed: s.mask.eos,
                sampling: self.plan.for_seed(s.seed),
            })
            .collect();
        let outcome = self.link.run(self.client.step(&inputs))?;
        let out = outcome.map_err(|e| self.link.fail(e, ""))?;
        Ok(choices(out, |s| s.token, eos))
    }

    fn round_trips(&self) -> u64 {
        self.client.stats().round_trips
    }
}

/// A stock OpenAI-compatible server in the direct mode: exact masked greedy decoding
/// ([`DirectClient::next`]). Each generation keeps the chunk of greedy tokens the server
/// last wrote for it, so a step whose model choice the mask allows costs no request;
/// the steps of a tick that do need the server are sent concurrently. Greedy only: the
/// exact masked choice is recovered from the server's top alternatives, which says
/// nothing about a draw at a temperature.
pub struct Direct {
    client: Arc<DirectClient>,
    vocab: Arc<Vocabulary>,
    /// Per generation, its state between steps (dropped when a tick no longer has it).
    looks: HashMap<u64, Lookahead>,
    /// Requests of generations no longer in `looks`.
    retired: u64,
    link: Link,
}

impl Direct {
    /// `client` must serve the model whose tokenizer is `vocab`.
    pub fn new(client: DirectClient, vocab: Arc<Vocabulary>) -> std::io::Result<Direct> {
        Ok(Direct {
            client: Arc::new(client),
            vocab,
            looks: HashMap::new(),
            retired: 0,
            link: Link::new()?,
        })
    }

    /// Sets (or clears) the check that abandons a request in flight.
    pub fn set_abort(&mut self, abort: Option<Abort>) {
        self.link.abort = abort;
    }

    /// The client error behind the last failed step, once.
    pub fn take_error(&mut self) -> Option<ClientError> {
        self.link.last_error.take()
    }
}

impl Model for Direct {
    fn step(
        &mut self,
        batch: &[ModelStep<'_>],
    ) -> Result<Vec<Result<Choice, ModelError>>, ModelError> {
        let eos = self.vocab.eos_id();
        let mut stale = std::mem::take(&mut self.looks);
        let mut jobs = Vec::with_capacity(batch.len());
        for (k, s) in batch.iter().enumerate() {
            let ids = s.mask.ids().filter(|&i| Some(i) != eos);
            let set = TokenSet::from_ids(self.vocab.len(), ids.chain(eos.filter(|_| s.mask.eos)))
                .map_err(|e| ModelError(format!("mask: {e}")))?;
            let look = stale.remove(&s.generation).unwrap_or_default();
            let (prompt, out) = (s.prompt.to_vec(), s.generated.to_vec());
            jobs.push((k, s.generation, prompt, out, set, look));
        }
        self.retired += stale.values().map(|l| l.n.round_trips).sum::<u64>();
        let client = self.client.clone();
        let all = async move {
            let mut tasks = tokio::task::JoinSet::new();
            for (k, generation, prompt, out, set, mut look) in jobs {
                let client = client.clone();
                tasks.spawn(async move {
                    let r = client
                        .next(&prompt, &out, &set, usize::MAX, &mut look)
                        .await;
                    (k, generation, look, r)
                });
            }
            let mut done = Vec::new();
            while let Some(joined) = tasks.join_next().await {
                done.push(joined);
            }
            done
        };
        let mut out: Vec<Result<Choice, ModelError>> = (0..batch.len())
            .map(|_| Err(ModelError("no answer for this generation".into())))
            .collect();
        for joined in self.link.run(all)? {
            let (k, generation, look, r) =
                joined.map_err(|e| ModelError(format!("a direct-mode request failed: {e}")))?;
            self.looks.insert(generation, look);
            out[k] = match r {
                Ok(id) => Ok(choice(id, eos)),
                Err(e) => Err(self.link.fail(e, "")),
            };
        }
        Ok(out)
    }

    fn round_trips(&self) -> u64 {
        self.retired + self.looks.values().map(|l| l.n.round_trips).sum::<u64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::builtin::builtin_vocabulary;
    use crate::backend::mock::ScriptedMock;
    use crate::backend::script::Script;
    use crate::backend::{BoxFuture, Sample};
    use crate::chat::{render_plain, RenderError};
    use crate::{BackendError, Role};

    /// A backend whose "template" writes one token id far outside any vocabulary.
    struct Broken;

    impl Backend for Broken {
        fn model(&self) -> &str {
            "broken"
        }

        fn sample_batch<'a>(
            &'a self,
            batch: &'a [SampleContext<'a>],
        ) -> BoxFuture<'a, Vec<Result<Sample, BackendError>>> {
            Box::pin(std::future::ready(
                batch.iter().map(|_| Err(BackendError::new("no"))).collect(),
            ))
        }

        fn chat_template(&self) -> bool {
            true
        }

        fn render_chat<'a>(
            &'a self,
            _: &'a [ChatMessage],
        ) -> Option<BoxFuture<'a, Result<RenderedPrompt, RenderError>>> {
            Some(Box::pin(std::future::ready(Ok(RenderedPrompt {
                tokens: vec![u32::MAX],
                text: String::new(),
            }))))
        }
    }

    #[test]
    fn in_process_prompts_render_like_the_server() {
        let vocab = Arc::new(builtin_vocabulary().unwrap());
        let plan = SamplingPlan {
            temperature: 0.0,
            top_k: None,
        };
        let mock = Arc::new(ScriptedMock::new(vocab.clone(), Script::default()));
        let m = InProcess::new(mock, vocab.clone(), plan).unwrap();
        let chat = [
            ChatMessage::new(Role::System, "You write SQL."),
            ChatMessage::new(Role::User, "how many employees?"),
        ];
        let (p, by) = m.render(&chat).unwrap();
        assert_eq!(by, RenderedBy::Plain);
        assert_eq!(p.text, render_plain(&chat));
        assert_eq!(m.render_prompt(&chat).unwrap(), vocab.encode(&p.text));
        let broken = InProcess::new(Arc::new(Broken), vocab, plan).unwrap();
        assert!(broken.render(&chat).is_err());
    }
}
