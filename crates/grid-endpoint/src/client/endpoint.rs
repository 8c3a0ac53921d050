//! The `grid-endpoint/1` client: fetches the served vocabulary and runs batched steps,
//! resending mask payloads and histories only when the server lacks them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use grid_vocab::Vocabulary;

use crate::chat::{render_plain_with, RenderedBy, RenderedPrompt};
use crate::client::http::{Http, HttpConfig};
use crate::error::{ClientError, GenerationError};
use crate::lru::Lru;
use crate::protocol::{
    ChatMessage, ErrorCode, GenerationStep, MaskRef, Outcome, PromptRequest, PromptResponse,
    Sampling, StepRequest, StepResponse, VocabularyHeader, PROMPT_PATH, PROTOCOL, STEP_PATH,
    VOCABULARY_PATH,
};
use crate::tokenset::{EntryId, TokenSet};

/// A mask as the client holds it: its content-addressed id and its set.
/// The set is shared, so a mask used by many generations is held once.
#[derive(Debug, Clone)]
pub struct Mask {
    /// The entry id. The extension's is `grid_core::decode::mask_entry_id`, a hash of the
    /// whole mask's bits (the id its audit log records); others may use
    /// [`EntryId::of_set`].
    pub entry_id: EntryId,
    /// The allowed ids of the entry (never special ids, never EOS).
    pub set: Arc<TokenSet>,
}

impl Mask {
    /// A mask whose id is derived from the set alone ([`EntryId::of_set`]).
    pub fn content_addressed(set: TokenSet) -> Self {
        Mask {
            entry_id: EntryId::of_set(&set),
            set: Arc::new(set),
        }
    }
}

/// One generation's step, as the decode loop hands it to [`EndpointClient::step`].
#[derive(Debug, Clone)]
pub struct StepInput<'a> {
    /// The generation's id.
    pub id: &'a str,
    /// The whole token history: prompt, then every token since (sampled or forced).
    /// The client sends only what the server does not hold yet.
    pub history: &'a [u32],
    /// How many leading tokens of `history` are the prompt.
    pub prompt_len: usize,
    /// The mask entry of this step.
    pub mask: &'a Mask,
    /// Ids allowed on top of the entry this step. The extension sends the whole mask as
    /// the entry, so its `cd_pass` is always empty.
    pub cd_pass: &'a [u32],
    /// Whether EOS may be sampled.
    pub eos_allowed: bool,
    /// Sampling parameters.
    pub sampling: Sampling,
}

/// A sampled token.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampled {
    /// The token id.
    pub token: u32,
    /// Its log-probability, when the backend reports one.
    pub logprob: Option<f64>,
}

/// The served vocabulary and the endpoint's metadata.
#[derive(Debug)]
pub struct ServedVocabulary {
    /// The metadata fields of the reply.
    pub header: VocabularyHeader,
    /// The vocabulary, rebuilt from the served bytes (its fingerprint was checked
    /// against `header.fingerprint`).
    pub vocabulary: Vocabulary,
}

/// Settings of an [`EndpointClient`].
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Transport settings.
    pub http: HttpConfig,
    /// How many entry ids the client remembers having sent; it sends a payload only for
    /// ids not remembered. Best set to the server's `mask_cache_capacity` (a mismatch
    /// costs at most one extra round trip per miss, never a wrong mask).
    pub sent_masks_capacity: usize,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            http: HttpConfig::default(),
            sent_masks_capacity: 4096,
        }
    }
}

/// Counters of a client, for benchmarks and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// HTTP requests made (including connection retries).
    pub round_trips: u64,
    /// Mask payloads sent.
    pub payloads_sent: u64,
    /// Generations resent because the server lacked a mask or a history.
    pub resends: u64,
}

/// What the client believes the server holds for one generation.
#[derive(Debug, Clone, Copy)]
struct Known {
    /// The server's history length.
    len: usize,
    /// The last token of that history.
    last: Option<u32>,
}

/// The client's mutable bookkeeping; never locked across an await.
#[derive(Debug)]
struct ClientState {
    /// Per generation: what the server holds.
    known: HashMap<String, Known>,
    /// Entry ids whose payload the server was sent (and likely still holds).
    sent: Lru<EntryId, ()>,
    /// Generations released since the last request.
    released: Vec<String>,
    payloads_sent: u64,
    resends: u64,
}

/// A client of one `grid-endpoint/1` server, for one vocabulary. Cheap to share
/// (`&self` everywhere); concurrent steps of different generations are fine.
#[derive(Debug)]
pub struct EndpointClient {
    http: Http,
    fingerprint: String,
    state: Mutex<ClientState>,
}

/// How one generation of a request is to be sent.
struct Pending<'a> {
    /// Index in the caller's batch.
    index: usize,
    input: &'a StepInput<'a>,
    /// Send from position 0 with the whole history.
    full_history: bool,
    /// The server's history length, when not `full_history`.
    position: usize,
    /// Include the mask payload.
    with_payload: bool,
}

impl EndpointClient {
    /// A client of the server at `base_url` whose masks are over the vocabulary with
    /// `vocab_fingerprint`. Makes no request.
    pub fn new(
        base_url: &str,
        vocab_fingerprint: impl Into<String>,
        config: ClientConfig,
    ) -> Result<Self, ClientError> {
        Ok(EndpointClient {
            http: Http::new(base_url, config.http)?,
            fingerprint: vocab_fingerprint.into(),
            state: Mutex::new(ClientState {
                known: HashMap::new(),
                sent: Lru::new(config.sent_masks_capacity),
                released: Vec::new(),
                payloads_sent: 0,
                resends: 0,
            }),
        })
    }

    /// The endpoint (without credentials).
    pub fn endpoint(&self) -> &str {
        self.http.endpoint()
    }

    /// The vocabulary fingerprint the client's masks are over.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Counters so far.
    pub fn stats(&self) -> ClientStats {
        let st = self.lock();
        ClientStats {
            round_trips: self.http.round_trips(),
            payloads_sent: st.payloads_sent,
            resends: st.resends,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ClientState> {
        // The state stays consistent even if a holder panicked: every update is a
        // single insert or remove.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `GET /v1/vocabulary`: the endpoint's vocabulary, checked for consistency
    /// (the declared fingerprint must be the served bytes' fingerprint).
    pub async fn fetch_vocabulary(&self) -> Result<ServedVocabulary, ClientError> {
        let reply = self.http.get(VOCABULARY_PATH).await?;
        parse_vocabulary_reply(&reply.body)
    }

    /// Fetches the endpoint's vocabulary and checks that it is the client's
    /// ([`ClientError::VocabMismatch`] otherwise).
    pub async fn check_vocabulary(&self) -> Result<ServedVocabulary, ClientError> {
        let served = self.fetch_vocabulary().await?;
        if served.vocabulary.fingerprint() != self.fingerprint {
            return Err(ClientError::VocabMismatch {
                client: self.fingerprint.clone(),
                server: served.vocabulary.fingerprint().to_string(),
            });
        }
        Ok(served)
    }

    /// `POST /v1/prompt`: `messages` rendered as the endpoint's model expects (its chat
    /// template and its own tokenizer, the assistant's turn opened), and who rendered
    /// them. `local` is the client's copy of the served vocabulary (the one its masks
    /// are over): the reply's ids are checked against it, and an endpoint that does not
    /// serve the call (404: a server older than the call) gets the plain rendering
    /// ([`crate::chat::render_plain`]) encoded with it instead.
    pub async fn render(
        &self,
        messages: &[ChatMessage],
        local: &Vocabulary,
    ) -> Result<(RenderedPrompt, RenderedBy), ClientError> {
        if local.fingerprint() != self.fingerprint {
            return Err(ClientError::invalid(format!(
                "the local vocabulary {} is not the client's {}",
                local.fingerprint(),
                self.fingerprint
            )));
        }
        let request = PromptRequest {
            protocol: PROTOCOL.into(),
            messages: messages.to_vec(),
        };
        let reply = match self.http.post_json_stateless(PROMPT_PATH, &request).await {
            Ok(r) => r,
            Err(ClientError::Rejected { status: 404, .. }) => {
                return Ok((render_plain_with(local, messages), RenderedBy::LocalPlain))
            }
            Err(e) => return Err(e),
        };
        let reply = parse_prompt_reply(&reply.body, &self.fingerprint, local.len())?;
        let by = if reply.chat_template {
            RenderedBy::Template
        } else {
            RenderedBy::Plain
        };
        Ok((
            RenderedPrompt {
                tokens: reply.tokens,
                text: reply.text,
            },
            by,
        ))
    }

    /// The token ids of [`EndpointClient::render`].
    pub async fn render_prompt(
        &self,
        messages: &[ChatMessage],
        local: &Vocabulary,
    ) -> Result<Vec<u32>, ClientError> {
        Ok(self.render(messages, local).await?.0.tokens)
    }

    /// Forgets generation `id`; the next request tells the server to drop it too.
    pub fn release(&self, id: &str) {
        let mut st = self.lock();
        st.known.remove(id);
        st.released.push(id.to_string());
    }

    /// One tick: samples one token for every generation of `batch` in one request
    /// (plus one more for the generations whose mask payload or history the server
    /// lacked). Per-generation failures are per-generation results; a failure of the
    /// call itself is a [`ClientError`] (and the server's state for the batch is then
    /// unknown, so the next step of each resends its history).
    pub async fn step(
        &self,
        batch: &[StepInput<'_>],
    ) -> Result<Vec<Result<Sampled, GenerationError>>, ClientError> {
        validate_batch(batch)?;
        let mut out: Vec<Option<Result<Sampled, GenerationError>>> = vec![None; batch.len()];
        let first: Vec<Pending> = {
            let st = self.lock();
            // A payload goes once per request: the server caches it at its first use
            // and the later generations of the request find it there.
            let mut in_request = std::collections::HashSet::new();
            batch
                .iter()
                .enumerate()
                .map(|(index, input)| {
                    let id = input.mask.entry_id;
                    let with_payload = !st.sent.contains(&id) && in_request.insert(id);
                    let position = st
                        .known
                        .get(input.id)
                        .filter(|k| continues(k, input.history))
                        .map(|k| k.len);
                    Pending {
                        index,
                        input,
                        full_history: position.is_none(),
                        position: position.unwrap_or(0),
                        with_payload,
                    }
                })
                .collect()
        };
        let need = self.round(&first, &mut out).await?;
        if !need.is_empty() {
            self.lock().resends += need.len() as u64;
            let second: Vec<Pending> = need
                .into_iter()
                .map(|(index, full_history, position)| Pending {
                    index,
                    input: &batch[index],
                    full_history,
                    position,
                    with_payload: true,
                })
                .collect();
            let again = self.round(&second, &mut out).await?;
            for (index, _, _) in again {
                out[index] = Some(Err(GenerationError {
                    code: ErrorCode::ProtocolViolation,
                    message: "the server asked again for state that the resend carried".into(),
                }));
            }
        }
        out.into_iter()
            .map(|r| r.ok_or_else(|| ClientError::malformed("a generation got no result")))
            .collect()
    }

    /// Sends one request for `pending`, records results in `out`, and returns what the
    /// server answered `need` for: (batch index, resend the whole history, position).
    async fn round(
        &self,
        pending: &[Pending<'_>],
        out: &mut [Option<Result<Sampled, GenerationError>>],
    ) -> Result<Vec<(usize, bool, usize)>, ClientError> {
        let release = std::mem::take(&mut self.lock().released);
        let generations: Vec<GenerationStep> = pending.iter().map(wire_step).collect();
        let payloads = pending.iter().filter(|p| p.with_payload).count() as u64;
        let request = StepRequest {
            protocol: PROTOCOL.into(),
            vocab_fingerprint: self.fingerprint.clone(),
            release,
            generations,
        };
        {
            let mut st = self.lock();
            st.payloads_sent += payloads;
            for p in pending.iter().filter(|p| p.with_payload) {
                st.sent.insert(p.input.mask.entry_id, ());
            }
        }
        let reply = match self.http.post_json(STEP_PATH, &request).await {
            Ok(r) => r,
            Err(e) => {
                self.forget(pending, &request.release);
                return Err(match e {
                    ClientError::VocabMismatch { server, .. } => ClientError::VocabMismatch {
                        client: self.fingerprint.clone(),
                        server,
                    },
                    other => other,
                });
            }
        };
        let ids: Vec<&str> = pending.iter().map(|p| p.input.id).collect();
        // Every mask of one client is over the same vocabulary.
        let universe = pending.first().map_or(0, |p| p.input.mask.set.universe());
        let parsed = parse_step_reply(&reply.body, &ids, universe);
        let response = match parsed {
            Ok(r) => r,
            Err(e) => {
                self.forget(pending, &[]);
                return Err(e);
            }
        };
        let mut need = Vec::new();
        let mut st = self.lock();
        for (p, result) in pending.iter().zip(response.results) {
            match result.outcome {
                Outcome::Ok { token, logprob } => {
                    st.known.insert(
                        p.input.id.to_string(),
                        Known {
                            len: p.input.history.len() + 1,
                            last: Some(token),
                        },
                    );
                    out[p.index] = Some(Ok(Sampled { token, logprob }));
                }
                Outcome::Need { mask, history } => {
                    if mask {
                        st.sent.remove(&p.input.mask.entry_id);
                    }
                    if history {
                        st.known.remove(p.input.id);
                    }
                    need.push((p.index, history || p.full_history, p.position));
                }
                Outcome::Error { code, message } => {
                    // The server changed nothing; what it held before still holds,
                    // unless this request asked it to restart from position 0.
                    if p.full_history {
                        st.known.remove(p.input.id);
                    }
                    out[p.index] = Some(Err(GenerationError { code, message }));
                }
            }
        }
        Ok(need)
    }

    /// After a failed call: the server's state of these generations (and whether it
    /// holds the payloads sent) is unknown; releases are re-queued.
    fn forget(&self, pending: &[Pending<'_>], release: &[String]) {
        let mut st = self.lock();
        for p in pending {
            st.known.remove(p.input.id);
            if p.with_payload {
                st.sent.remove(&p.input.mask.entry_id);
            }
        }
        st.released.extend(release.iter().cloned());
    }
}

/// Whether `history` extends what the server is known to hold.
fn continues(k: &Known, history: &[u32]) -> bool {
    k.len <= history.len() && (k.len == 0 || history.get(k.len - 1).copied() == k.last)
}

fn validate_batch(batch: &[StepInput<'_>]) -> Result<(), ClientError> {
    let mut seen = std::collections::HashSet::new();
    for input in batch {
        if !seen.insert(input.id) {
            return Err(ClientError::invalid(format!(
                "generation {:?} appears twice in one batch",
                input.id
            )));
        }
        if input.prompt_len > input.history.len() {
            return Err(ClientError::invalid(format!(
                "generation {:?}: prompt_len {} exceeds the history of {}",
                input.id,
                input.prompt_len,
                input.history.len()
            )));
        }
    }
    Ok(())
}

fn wire_step(p: &Pending<'_>) -> GenerationStep {
    let input = p.input;
    let (position, prompt_tokens) = if p.full_history {
        (0, Some(input.prompt_len as u64))
    } else {
        (p.position, None)
    };
    GenerationStep {
        id: input.id.to_string(),
        position: position as u64,
        tokens_to_append: input.history[position..].to_vec(),
        prompt_tokens,
        mask: MaskRef {
            entry_id: input.mask.entry_id,
            payload: p.with_payload.then(|| input.mask.set.to_base64()),
        },
        cd_pass: input.cd_pass.to_vec(),
        eos_allowed: input.eos_allowed,
        sampling: input.sampling,
    }
}

/// Parses a `GET /v1/vocabulary` reply body and checks it for consistency: the protocol,
/// the declared fingerprint against the served bytes' own, the declared size against the
/// number of tokens served.
pub fn parse_vocabulary_reply(body: &[u8]) -> Result<ServedVocabulary, ClientError> {
    let header: VocabularyHeader = serde_json::from_slice(body)
        .map_err(|e| ClientError::malformed(format!("vocabulary reply: {e}")))?;
    speaks_protocol(&header.protocol)?;
    let text = std::str::from_utf8(body)
        .map_err(|e| ClientError::malformed(format!("vocabulary reply: {e}")))?;
    let vocabulary = Vocabulary::from_served_json(text)
        .map_err(|e| ClientError::malformed(format!("vocabulary reply: {e}")))?;
    if vocabulary.fingerprint() != header.fingerprint {
        return Err(ClientError::malformed(format!(
            "declared fingerprint {} is not the served tokens' fingerprint {}",
            header.fingerprint,
            vocabulary.fingerprint()
        )));
    }
    if vocabulary.len() != header.vocab_size {
        return Err(ClientError::malformed(format!(
            "declared vocab_size {} but {} tokens served",
            header.vocab_size,
            vocabulary.len()
        )));
    }
    Ok(ServedVocabulary { header, vocabulary })
}

/// A reply's `protocol` must be [`PROTOCOL`].
fn speaks_protocol(got: &str) -> Result<(), ClientError> {
    if got == PROTOCOL {
        return Ok(());
    }
    Err(ClientError::ProtocolMismatch {
        expected: PROTOCOL.into(),
        got: got.to_string(),
    })
}

/// Parses a `POST /v1/prompt` reply body for a client whose vocabulary has `fingerprint`
/// and `universe` ids: the protocol, the vocabulary, and every id inside it.
pub(crate) fn parse_prompt_reply(
    body: &[u8],
    fingerprint: &str,
    universe: usize,
) -> Result<PromptResponse, ClientError> {
    let reply: PromptResponse = serde_json::from_slice(body)
        .map_err(|e| ClientError::malformed(format!("prompt reply: {e}")))?;
    speaks_protocol(&reply.protocol)?;
    if reply.vocab_fingerprint != fingerprint {
        return Err(ClientError::VocabMismatch {
            client: fingerprint.to_string(),
            server: reply.vocab_fingerprint,
        });
    }
    if let Some(bad) = reply.tokens.iter().find(|&&t| t as usize >= universe) {
        return Err(ClientError::malformed(format!(
            "prompt reply: token {bad} is out of the vocabulary of {universe}"
        )));
    }
    Ok(reply)
}

/// Parses a `POST /v1/step` reply body for a request that named the generations `ids`, in
/// order, over a vocabulary of `universe` ids: the protocol, one result per generation in
/// request order, and every sampled token inside the vocabulary. Whether the token is in
/// the step's mask is the decode loop's check, not the parser's.
pub fn parse_step_reply(
    body: &[u8],
    ids: &[&str],
    universe: usize,
) -> Result<StepResponse, ClientError> {
    let response: StepResponse = serde_json::from_slice(body)
        .map_err(|e| ClientError::malformed(format!("step reply: {e}")))?;
    speaks_protocol(&response.protocol)?;
    if response.results.len() != ids.len() {
        return Err(ClientError::malformed(format!(
            "step reply has {} results for {} generations",
            response.results.len(),
            ids.len()
        )));
    }
    for (&id, r) in ids.iter().zip(&response.results) {
        if r.id != id {
            return Err(ClientError::malformed(format!(
                "step reply result {:?} where {:?} was expected",
                r.id, id
            )));
        }
        if let Outcome::Ok { token, .. } = r.outcome {
            if token as usize >= universe {
                return Err(ClientError::malformed(format!(
                    "generation {:?}: token {token} is out of the vocabulary",
                    r.id
                )));
            }
        }
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the `endpoint_reply` fuzz target: without serde_json's exact float parsing a
    /// long literal was parsed one unit in the last place off, so the reply did not survive
    /// being written and read back.
    #[test]
    fn a_step_reply_with_a_long_logprob_round_trips() {
        let body = format!(
            r#"{{"protocol":"grid-endpoint/1","results":[{{"id":"g1","status":"ok","token":5,"logprob":-5{}.25}}]}}"#,
            "9".repeat(125)
        );
        let reply = parse_step_reply(body.as_bytes(), &["g1"], 10).expect("a valid reply");
        let again = serde_json::to_vec(&reply).expect("serialises");
        let back = parse_step_reply(&again, &["g1"], 10).expect("re-parses");
        assert_eq!(back, reply);
    }
}
