//! The server's state and the semantics of one step request, without HTTP: the mask
//! LRU, the per-generation histories, validation, and the check that every emitted
//! token is allowed.

use std::collections::HashSet;
use std::sync::Arc;

use grid_vocab::Vocabulary;

use crate::backend::{Allowed, Sample};
use crate::error::BackendError;
use crate::lru::Lru;
use crate::protocol::{ErrorCode, GenerationStep, Outcome, Sampling, StepRequest};
use crate::tokenset::{EntryId, TokenSet};

/// Longest accepted generation id, in bytes.
pub(crate) const MAX_ID_BYTES: usize = 256;

/// One generation's server-side state.
#[derive(Debug)]
struct Session {
    /// Prompt, then every token since.
    history: Vec<u32>,
    /// Length of the prompt within `history`.
    prompt_len: usize,
    /// A request is serving this generation (its history is out, in a [`Prepared`]).
    busy: bool,
}

/// The mask cache and the sessions of one server.
#[derive(Debug)]
pub(crate) struct Core {
    vocab: Arc<Vocabulary>,
    /// Mask payloads by entry id.
    masks: Lru<EntryId, Arc<TokenSet>>,
    /// Generation histories by id.
    sessions: Lru<String, Session>,
    /// Generations released while a request was serving them: dropped at commit.
    released_busy: HashSet<String>,
    /// Generations dropped (released or evicted) since the last [`Core::take_dropped`],
    /// for the backend to free what it holds for them.
    dropped: Vec<String>,
}

/// A generation ready for the backend: its history is taken out of the session (which
/// is marked busy) until [`Core::commit`].
#[derive(Debug)]
pub(crate) struct Prepared {
    /// Index in the request.
    pub(crate) index: usize,
    /// The generation id.
    pub(crate) id: String,
    /// The history including this step's `tokens_to_append`.
    pub(crate) history: Vec<u32>,
    /// The prompt length within `history`.
    pub(crate) prompt_len: usize,
    /// What may be sampled.
    pub(crate) allowed: Allowed,
    /// The sampling parameters.
    pub(crate) sampling: Sampling,
    /// How to undo on failure.
    undo: Undo,
}

/// How a failed step restores the session.
#[derive(Debug)]
enum Undo {
    /// Continuing step: put the history back truncated to this length.
    Truncate(usize),
    /// Restart (position 0): the old session, if any, stays as it was (only un-busied).
    Restart { had_old: bool },
}

/// The per-generation verdict of [`Core::prepare`].
#[derive(Debug)]
pub(crate) enum Slot {
    /// Answered without the backend.
    Done(Outcome),
    /// To be sampled.
    Ready(Prepared),
}

fn error(code: ErrorCode, message: impl Into<String>) -> Slot {
    Slot::Done(Outcome::Error {
        code,
        message: message.into(),
    })
}

impl Core {
    /// Empty state over `vocab` with the given capacities.
    pub(crate) fn new(vocab: Arc<Vocabulary>, mask_capacity: usize, max_sessions: usize) -> Self {
        Core {
            vocab,
            masks: Lru::new(mask_capacity),
            sessions: Lru::new(max_sessions),
            released_busy: HashSet::new(),
            dropped: Vec::new(),
        }
    }

    /// The generations dropped (released by the client, or evicted) since the last call.
    pub(crate) fn take_dropped(&mut self) -> Vec<String> {
        std::mem::take(&mut self.dropped)
    }

    /// Inserts a session; one evicted to make room is reported as dropped.
    fn keep(&mut self, id: String, session: Session) {
        if let Some((evicted, _)) = self.sessions.insert(id, session) {
            self.dropped.push(evicted);
        }
    }

    /// Applies the releases of `req`, then validates every generation: each is answered
    /// (error, need) or made ready for the backend.
    pub(crate) fn prepare(&mut self, req: &StepRequest) -> Vec<Slot> {
        for id in &req.release {
            match self.sessions.peek(id) {
                Some(s) if s.busy => {
                    self.released_busy.insert(id.clone());
                }
                Some(_) => {
                    self.sessions.remove(id);
                    self.dropped.push(id.clone());
                }
                None => {}
            }
        }
        let mut seen = HashSet::new();
        req.generations
            .iter()
            .enumerate()
            .map(|(index, g)| {
                if !seen.insert(g.id.as_str()) {
                    return error(
                        ErrorCode::DuplicateId,
                        format!("generation {:?} appears twice in the request", g.id),
                    );
                }
                self.prepare_one(index, g)
            })
            .collect()
    }

    fn prepare_one(&mut self, index: usize, g: &GenerationStep) -> Slot {
        let n = self.vocab.len();
        if g.id.is_empty() || g.id.len() > MAX_ID_BYTES {
            return error(
                ErrorCode::InvalidRequest,
                format!("generation id must be 1 to {MAX_ID_BYTES} bytes"),
            );
        }
        let s = &g.sampling;
        if !s.temperature.is_finite() || s.temperature < 0.0 || s.top_k == Some(0) {
            return error(
                ErrorCode::InvalidSampling,
                "temperature must be finite and ≥ 0, top_k ≥ 1",
            );
        }
        if let Some(&bad) = g
            .tokens_to_append
            .iter()
            .chain(&g.cd_pass)
            .find(|&&t| t as usize >= n)
        {
            return error(
                ErrorCode::InvalidRequest,
                format!("token id {bad} is out of the vocabulary of {n}"),
            );
        }
        if let Some(&sp) = g.cd_pass.iter().find(|&&t| self.vocab.is_special(t)) {
            return error(
                ErrorCode::InvalidMask,
                format!("cd_pass admits special id {sp} (EOS enters only through eos_allowed)"),
            );
        }
        if g.position == 0 {
            if g.prompt_tokens
                .is_some_and(|p| p > g.tokens_to_append.len() as u64)
            {
                return error(
                    ErrorCode::InvalidRequest,
                    "prompt_tokens exceeds tokens_to_append",
                );
            }
        } else if g.prompt_tokens.is_some() {
            return error(
                ErrorCode::InvalidRequest,
                "prompt_tokens is only meaningful at position 0",
            );
        }
        let eos = if g.eos_allowed {
            match self.vocab.eos_id() {
                Some(e) => Some(e),
                None => {
                    return error(
                        ErrorCode::InvalidRequest,
                        "eos_allowed, but the vocabulary has no EOS",
                    )
                }
            }
        } else {
            None
        };

        // The mask: from the payload (validated, cached) or the cache.
        let mask = match &g.mask.payload {
            Some(p) => match self.admit_payload(g.mask.entry_id, p) {
                Ok(m) => Some(m),
                Err((code, message)) => return error(code, message),
            },
            None => self.masks.get(&g.mask.entry_id).cloned(),
        };

        // The history.
        let history_ok = if g.position == 0 {
            true
        } else {
            match self.sessions.peek(&g.id) {
                Some(sess) if sess.busy => {
                    return error(
                        ErrorCode::Busy,
                        format!("generation {:?} is being served by another request", g.id),
                    )
                }
                Some(sess) => sess.history.len() as u64 == g.position,
                None => false,
            }
        };
        let Some(mask) = mask.filter(|_| history_ok) else {
            return Slot::Done(Outcome::Need {
                mask: g.mask.payload.is_none() && !self.masks.contains(&g.mask.entry_id),
                history: !history_ok,
            });
        };

        let allowed = Allowed::new(mask, &g.cd_pass, eos);
        if allowed.is_empty() {
            return error(
                ErrorCode::EmptyMask,
                "mask ∪ cd_pass is empty and EOS is not allowed",
            );
        }

        // Take the history out, marking the session busy.
        let (history, prompt_len, undo) = if g.position == 0 {
            let had_old = match self.sessions.get(&g.id) {
                Some(sess) if sess.busy => {
                    return error(
                        ErrorCode::Busy,
                        format!("generation {:?} is being served by another request", g.id),
                    )
                }
                Some(sess) => {
                    sess.busy = true;
                    true
                }
                None => false,
            };
            let prompt_len = g
                .prompt_tokens
                .map_or(g.tokens_to_append.len(), |p| p as usize);
            (
                g.tokens_to_append.clone(),
                prompt_len,
                Undo::Restart { had_old },
            )
        } else {
            let Some(sess) = self.sessions.get(&g.id) else {
                return Slot::Done(Outcome::Need {
                    mask: false,
                    history: true,
                });
            };
            sess.busy = true;
            let mut history = std::mem::take(&mut sess.history);
            let old_len = history.len();
            history.extend_from_slice(&g.tokens_to_append);
            (history, sess.prompt_len, Undo::Truncate(old_len))
        };
        Slot::Ready(Prepared {
            index,
            id: g.id.clone(),
            history,
            prompt_len,
            allowed,
            sampling: g.sampling,
            undo,
        })
    }

    /// Validates a payload and caches it under `id`; a different payload already held
    /// under the same id is a conflict.
    fn admit_payload(
        &mut self,
        id: EntryId,
        payload: &str,
    ) -> Result<Arc<TokenSet>, (ErrorCode, String)> {
        let set = TokenSet::from_base64(self.vocab.len(), payload)
            .map_err(|e| (ErrorCode::InvalidMask, e.to_string()))?;
        if let Some(&sp) = self
            .vocab
            .special_ids()
            .iter()
            .find(|&&sp| set.contains(sp))
        {
            return Err((
                ErrorCode::InvalidMask,
                format!("mask {id} admits special id {sp} (EOS enters only through eos_allowed)"),
            ));
        }
        if let Some(held) = self.masks.get(&id) {
            if **held != set {
                return Err((
                    ErrorCode::MaskConflict,
                    format!("mask {id} was sent before with a different payload"),
                ));
            }
            return Ok(held.clone());
        }
        let set = Arc::new(set);
        self.masks.insert(id, set.clone());
        Ok(set)
    }

    /// Finishes a prepared generation with the backend's answer: an allowed token is
    /// appended and reported; anything else (an error, or a token outside the allowed
    /// set, which is never emitted) restores the session as it was.
    pub(crate) fn commit(&mut self, p: Prepared, result: Result<Sample, BackendError>) -> Outcome {
        let outcome = match result {
            Ok(s) if p.allowed.contains(s.token) => Outcome::Ok {
                token: s.token,
                logprob: s.logprob.filter(|l| l.is_finite()),
            },
            Ok(s) => {
                eprintln!(
                    "grid-endpoint: backend chose token {} outside the allowed set of \
                     generation {:?}; refused",
                    s.token, p.id
                );
                Outcome::Error {
                    code: ErrorCode::BackendViolation,
                    message: format!(
                        "the backend chose token {} outside the allowed set; not emitted",
                        s.token
                    ),
                }
            }
            Err(e) => Outcome::Error {
                code: ErrorCode::Backend,
                message: e.message,
            },
        };
        let Prepared {
            id,
            mut history,
            prompt_len,
            undo,
            ..
        } = p;
        if self.released_busy.remove(&id) {
            self.sessions.remove(&id);
            self.dropped.push(id);
            return outcome;
        }
        match (&outcome, undo) {
            (Outcome::Ok { token, .. }, _) => {
                history.push(*token);
                self.keep(
                    id,
                    Session {
                        history,
                        prompt_len,
                        busy: false,
                    },
                );
            }
            (_, Undo::Truncate(len)) => {
                history.truncate(len);
                self.keep(
                    id,
                    Session {
                        history,
                        prompt_len,
                        busy: false,
                    },
                );
            }
            (_, Undo::Restart { had_old: true }) => {
                if let Some(sess) = self.sessions.get(&id) {
                    sess.busy = false;
                }
            }
            (_, Undo::Restart { had_old: false }) => {}
        }
        outcome
    }
}
