//! One ask from its first generation to its answer: the attempts (the first, and at most
//! one repair), the checker's verdict on each, the judge's, and what comes next
//! ([`Next`]). The rules:
//!
//! 1. A generation that fails (endpoint, budget, cancel, ...) ends the ask with its
//!    failure.
//! 2. A statement the checker refuses is repaired once: rewound to the first reference
//!    it refuses, the model's choice there banned ([`crate::rewind`]), or, when no
//!    violation locates a reference, asked again with the violations quoted back; a
//!    repair the checker refuses ends the ask, refused (its statement is never returned).
//! 3. A statement the checker passes goes to the judge; a statement the judge refuses is
//!    repaired once (unless the ask has used its repair), the judge's message quoted back;
//!    the repair goes through the checker and the judge again.
//! 4. With repair switched off (the `no_repair` ablation), rules 2 and 3 end the ask at
//!    the first refusal.
//! 5. A generation that declines (`CANNOT ANSWER 'reason'`,
//!    [`grid_core::statement::decline_of`]) wrote no statement: the ask ends with its
//!    reason ([`FailureKind::Declined`]). The checker and the judge never see it, and it
//!    is not repaired. It is sealed like any generation that stopped on its own.
//!
//! Every attempt that ran is sealed; the seals and the answer are made in
//! [`Flow::finish`], once.

use std::sync::Arc;
use std::time::Instant;

use grid_core::audit::{text_digest, Seal, StepKind, StepRecord, StopReason};
use grid_core::checker::{self, Violation};
use grid_core::decode::{DecodeError, GenerationSpec, Outcome, Rewind};
use grid_core::prompt::{self, Prompt};
use grid_core::statement::{decline_of, Decline};
use grid_endpoint::backend::mock::mix;
use grid_endpoint::ClientError;
use grid_vocab::Vocabulary;

use crate::answer::{explain_rows, Answer, Generated};
use crate::contents::Rendering;
use crate::failure::{Failure, FailureKind};
use crate::job::Job;
use crate::judge::{Candidate, Verdict};
use crate::language::Compiled;
use crate::models::Prompter;
use crate::record::{artifacts, declined, reasons, refusal, seal_meta, with_prompt, SealToWrite};
use crate::sanitize::{sanitize, KnownNames};

/// Bytes of schema DDL a prompt may carry (the mask is never trimmed).
pub const PROMPT_SCHEMA_BYTES: usize = 12_000;

/// One generation to run for an ask.
pub(crate) struct Attempt {
    pub(crate) job: Arc<Job>,
    pub(crate) generation: u64,
    pub(crate) compiled: Arc<Compiled>,
    /// The prompt the model is shown (sealed by its digest), how it became token ids, and
    /// its token ids.
    pub(crate) shown: Prompt,
    pub(crate) rendering: Rendering,
    pub(crate) prompt: Vec<u32>,
    /// Set for a repair: the first attempt's generation.
    pub(crate) repair_of: Option<u64>,
    /// Set for a rewind repair (over the first attempt's prompt).
    pub(crate) rewind: Option<Rewind>,
}

impl Attempt {
    /// The first attempt, or why the question cannot be put to the model (a host refuses
    /// the same questions first; one that does not meets it here, and the question is
    /// never asked without its schema).
    pub(crate) fn first(
        job: Arc<Job>,
        compiled: Arc<Compiled>,
        prompter: &Prompter,
    ) -> Result<Attempt, Failure> {
        let dialect = compiled.language.dialect.clone();
        let reserved = |w: &str| dialect.is_reserved(w);
        let prompt = prompt::question_prompt_in(
            &compiled.snapshot,
            Some(&compiled.schema_index),
            &job.ask.question,
            PROMPT_SCHEMA_BYTES,
            &shown_examples(&job.ask.examples),
            &reserved,
        )
        .map_err(|e| {
            Failure::new(
                FailureKind::InvalidValue,
                format!("the question cannot be asked: {e}"),
            )
        })?;
        let prompt = taught(prompt, &job);
        Ok(Attempt {
            generation: job.ids[0],
            prompt: prompter.tokens(&prompt, &job.render_deadline())?,
            shown: prompt,
            rendering: prompter.rendering(),
            job,
            compiled,
            repair_of: None,
            rewind: None,
        })
    }

    /// The generation to run, over `compiled` (this attempt's language, as kept for the
    /// decode loop's life).
    pub(crate) fn spec<'l>(&self, compiled: &'l Compiled) -> GenerationSpec<'l> {
        GenerationSpec {
            id: self.generation,
            language: &compiled.language,
            reserve: &compiled.reserve,
            prompt: self.prompt.clone(),
            max_tokens: self.job.ask.settings.max_tokens,
            seed: mix(self.job.seed, self.generation),
            meta: seal_meta(&self.job),
            unconstrained: self.job.ask.settings.ablation.unconstrained,
            rewind: self.rewind.clone(),
        }
    }

    /// The attempt ended without a generation's outcome (it could not start, or the loop
    /// failed under it).
    pub(crate) fn failed(self, f: Failure) -> Attempted {
        Attempted {
            job: self.job,
            generation: self.generation,
            compiled: self.compiled,
            shown: self.shown,
            rendering: self.rendering,
            prompt: self.prompt,
            seal: None,
            steps: Vec::new(),
            output: Vec::new(),
            sql: None,
            stop: None,
            violations: Vec::new(),
            declined: None,
            verdict: None,
            failure: Some(f),
            decode_error: None,
            repair_of: self.repair_of,
            tokens: 0,
            completed_tokens: 0,
        }
    }
}

/// A generation that ran, checked.
pub(crate) struct Attempted {
    pub(crate) job: Arc<Job>,
    pub(crate) generation: u64,
    pub(crate) compiled: Arc<Compiled>,
    /// The prompt the model was shown, and how it became token ids.
    pub(crate) shown: Prompt,
    pub(crate) rendering: Rendering,
    /// The prompt's token ids.
    pub(crate) prompt: Vec<u32>,
    pub(crate) seal: Option<Seal>,
    pub(crate) steps: Vec<StepRecord>,
    /// The output's token ids.
    pub(crate) output: Vec<u32>,
    pub(crate) sql: Option<String>,
    pub(crate) stop: Option<StopReason>,
    /// What the checker found in `sql`.
    pub(crate) violations: Vec<Violation>,
    /// The decline `sql` is, when the model declined (the checker was not asked).
    pub(crate) declined: Option<Decline>,
    /// The judge's verdict on `sql`, once it gave one.
    pub(crate) verdict: Option<Verdict>,
    /// Why the generation gives no statement.
    pub(crate) failure: Option<Failure>,
    /// The decode loop's own error, when it stopped with one.
    pub(crate) decode_error: Option<DecodeError>,
    pub(crate) repair_of: Option<u64>,
    /// Output tokens, and how many of them budget completion wrote.
    pub(crate) tokens: usize,
    pub(crate) completed_tokens: u32,
}

impl Attempted {
    /// The attempt `a` ran to `o` (sealed with `seal`, its records `steps`; the endpoint
    /// client's error behind a model failure, if any): its failure, or its statement and
    /// the checker's verdict on it.
    pub(crate) fn new(
        a: Attempt,
        o: Outcome,
        seal: Option<Seal>,
        steps: Vec<StepRecord>,
        client_error: Option<&ClientError>,
    ) -> Attempted {
        let a_deadline = a.job.deadline;
        let a_gone = a.job.cancelled();
        let timeout_ms = a.job.ask.settings.timeout_ms;
        let unconstrained = a.job.ask.settings.ablation.unconstrained;
        let mut done = a.failed(Failure::internal(""));
        // Strictly: the statement returned is the bytes the mask admitted, never a
        // replacement character in place of a byte the checks saw.
        let text = grid_core::text::statement_text(&o.text);
        let sql = text.as_ref().ok().cloned();
        let mut seal = seal;
        if let Some(s) = seal.as_mut() {
            s.meta.sql_digest = sql.as_deref().map(text_digest);
        }
        done.seal = seal;
        done.steps = steps;
        done.stop = Some(o.stop);
        done.tokens = o.tokens.len();
        done.output = o.tokens;
        done.completed_tokens = o.completed_tokens;
        done.decode_error = o.error.clone();
        done.failure = match (o.stop, &o.error) {
            // A truncated output (unconstrained) is a statement to check like any other.
            (StopReason::Eos | StopReason::BudgetCompleted | StopReason::BudgetTruncated, _) => {
                None
            }
            (_, Some(DecodeError::Model(_))) if !a_gone && Instant::now() > a_deadline => {
                Some(Failure::new(
                    FailureKind::EndpointTimeout,
                    format!(
                        "model endpoint (timeout): no answer within grid.timeout ({timeout_ms} ms)"
                    ),
                ))
            }
            (StopReason::Cancelled, _) if Instant::now() > a_deadline => Some(Failure::new(
                FailureKind::Cancelled,
                format!(
                    "the generation took longer than grid.timeout ({timeout_ms} ms) and was stopped"
                ),
            )),
            (StopReason::Cancelled, _) | (_, Some(DecodeError::Model(_))) if a_gone => {
                Some(Failure::new(
                    FailureKind::Cancelled,
                    "the generation was cancelled (the asking session went away)",
                ))
            }
            (_, Some(DecodeError::Model(m))) => Some(match client_error {
                Some(e) => Failure::endpoint(e),
                None => Failure::new(FailureKind::EndpointFailed, format!("model endpoint: {m}")),
            }),
            (
                _,
                Some(DecodeError::BudgetBelowReserve {
                    max_tokens,
                    reserve,
                }),
            ) => Some(Failure::new(
                FailureKind::BudgetTooSmall,
                format!(
                    "grid.max_tokens is {max_tokens}, below the {reserve} tokens of the \
                     shortest statement this role can write: raise grid.max_tokens"
                ),
            )),
            (_, e) => Some(Failure::internal(format!(
                "the decode loop stopped with an error: {}",
                e.as_ref()
                    .map_or("unknown".to_string(), ToString::to_string)
            ))),
        };
        if let (None, Err(e)) = (&done.failure, &text) {
            // Without a mask the model may write anything: its text is refused. Under a
            // mask this cannot happen (the generated dialect admits no such byte).
            done.failure = Some(match unconstrained {
                true => Failure::new(
                    FailureKind::Refused,
                    format!("the model's output is not a statement PostgreSQL may be shown: {e}"),
                ),
                false => Failure::internal(format!(
                    "the mask admitted an output that is not a statement's text: {e}"
                )),
            });
        }
        if let (None, Some(sql)) = (&done.failure, &sql) {
            match decline_of(sql) {
                // No statement: nothing for the checker (which would refuse it as one) or
                // the judge to see, and nothing to repair.
                Some(d) => {
                    done.failure = Some(Failure::declined(&d));
                    done.declined = Some(d);
                }
                None => done.violations = checker::check(sql, &done.compiled.snapshot),
            }
        }
        done.sql = sql;
        done
    }

    /// The rewind repair of this attempt, when a violation of `violations` locates a
    /// reference in its statement: over the same prompt, its own output up to there.
    fn rewind(&self, violations: &[Violation], vocab: &Vocabulary) -> Option<Attempt> {
        let ablation = self.job.ask.settings.ablation;
        if ablation.unconstrained || ablation.prompt_repair {
            return None;
        }
        let sql = self.sql.as_deref()?;
        let rewind =
            crate::rewind::rewind_point(sql, &self.output, |t| vocab.token_bytes(t), violations)?;
        Some(Attempt {
            job: self.job.clone(),
            generation: self.job.ids[1],
            compiled: self.compiled.clone(),
            shown: self.shown.clone(),
            rendering: self.rendering,
            prompt: self.prompt.clone(),
            repair_of: Some(self.generation),
            rewind: Some(rewind),
        })
    }

    /// The repair of this attempt, the reasons it was rejected quoted back; or why no
    /// repair prompt can be made (the answer says it, rather than claim a repair ran).
    fn repair<R: std::fmt::Display>(
        &self,
        reasons: &[R],
        prompter: &Prompter,
    ) -> Result<Attempt, String> {
        let sql = self
            .sql
            .as_deref()
            .ok_or_else(|| "the attempt wrote no statement".to_string())?;
        let dialect = self.compiled.language.dialect.clone();
        let reserved = |w: &str| dialect.is_reserved(w);
        let prompt = prompt::repair_prompt_in(
            &self.compiled.snapshot,
            Some(&self.compiled.schema_index),
            &self.job.ask.question,
            PROMPT_SCHEMA_BYTES,
            &shown_examples(&self.job.ask.examples),
            &prompt::Rejected { sql, reasons },
            &reserved,
        )
        .map_err(|e| e.to_string())?;
        let prompt = taught(prompt, &self.job);
        let ids = prompter
            .tokens(&prompt, &self.job.render_deadline())
            .map_err(|f| f.message)?;
        Ok(Attempt {
            job: self.job.clone(),
            generation: self.job.ids[1],
            compiled: self.compiled.clone(),
            prompt: ids,
            shown: prompt,
            rendering: prompter.rendering(),
            repair_of: Some(self.generation),
            rewind: None,
        })
    }

    /// The seal and artifacts to store: the seal binds the prompt the model was shown,
    /// and through it the contents of the artifacts ([`crate::contents`]).
    fn seal_to_write(&self, vocab: &Vocabulary) -> Option<SealToWrite> {
        if !self.job.ask.settings.audit.records() {
            return None;
        }
        let mut seal = self.seal.clone()?;
        seal.meta.verdict = self.verdict.as_ref().map(Verdict::record);
        let (artifacts, prompt_digest) = with_prompt(
            artifacts(&self.compiled, vocab),
            Some((&self.shown, PROMPT_SCHEMA_BYTES)),
            self.rendering,
            &self.job.ask.examples,
            self.job.ask.settings.decline,
        );
        seal.meta.prompt_digest = Some(prompt_digest);
        Some(SealToWrite {
            seal,
            question: self.job.ask.question.clone(),
            current_user: self.job.ask.current_user.clone(),
            final_sql: self.sql.clone(),
            refused: match &self.declined {
                Some(d) => Some(declined(d)),
                None => refusal(&self.violations),
            },
            repair_of: self.repair_of,
            artifacts,
            started_at: self.job.started_at,
        })
    }

    fn report(&self) -> GenerationReport {
        GenerationReport {
            generation: self.generation,
            stop: self.stop,
            sql: self.sql.clone(),
            tokens: self.tokens,
            completed_tokens: self.completed_tokens,
            steps: self.steps.len(),
            forced_steps: self
                .steps
                .iter()
                .filter(|r| r.kind == StepKind::Forced)
                .count(),
            violations: reasons(&self.violations),
            verdict: self.verdict.clone(),
            failure: self.failure.clone(),
            decode_error: self.decode_error.clone(),
        }
    }
}

/// What one generation of an ask came to (for a host's report; the seals are the
/// record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenerationReport {
    pub generation: u64,
    /// `None` when the generation never ran.
    pub stop: Option<StopReason>,
    pub sql: Option<String>,
    /// Output tokens, and how many of them budget completion wrote.
    pub tokens: usize,
    pub completed_tokens: u32,
    /// Step records, and how many were forced.
    pub(crate) steps: usize,
    pub(crate) forced_steps: usize,
    /// The checker's violations, as displayed.
    pub violations: Vec<String>,
    pub(crate) verdict: Option<Verdict>,
    pub failure: Option<Failure>,
    /// The decode loop's own error, when it stopped with one (a dead end, ...).
    pub decode_error: Option<DecodeError>,
}

/// An ask's seals and answer.
#[derive(Debug, Clone)]
pub struct Finished {
    /// The ask (its first generation's id).
    pub ask: u64,
    /// Who asked (recorded beside the seals).
    pub session_user: String,
    pub seals: Vec<SealToWrite>,
    pub answer: Answer,
    /// Each generation that ran, in order.
    pub generations: Vec<GenerationReport>,
}

/// What an ask needs next.
pub(crate) enum Next {
    /// Run this attempt (a repair), the flow going with it.
    Run(Attempt, Flow),
    /// The judge's verdict on this candidate.
    Judge(Candidate, Box<Parked>),
    /// Answered.
    Done(Box<Finished>),
}

/// An ask between its attempts.
#[derive(Default)]
pub(crate) struct Flow {
    /// The first attempt, while its repair runs.
    first: Option<Box<Attempted>>,
    /// Why the first attempt was sent to repair, as displayed.
    reasons: Vec<String>,
    /// Why the repair that was due could not be made (its prompt could not be rendered,
    /// e.g. the endpoint failed), when it could not.
    unrepaired: Option<String>,
}

/// An ask waiting for the judge: its flow and the attempt judged.
pub(crate) struct Parked {
    flow: Flow,
    last: Attempted,
}

impl Parked {
    /// The ask's id.
    pub(crate) fn ask(&self) -> u64 {
        self.last.job.ids[0]
    }

    pub(crate) fn job(&self) -> &Arc<Job> {
        &self.last.job
    }

    /// The judge's verdict: answered, or repaired with the judge's message.
    pub(crate) fn judged(
        self: Box<Self>,
        verdict: Verdict,
        prompter: &Prompter,
        vocab: &Vocabulary,
    ) -> Next {
        let Parked { flow, mut last } = *self;
        // Only the sanitized message is kept: it is quoted to the model, sealed and
        // returned, and no name the role may not see reaches any of them.
        let verdict = match verdict {
            Verdict::Fail { code, message } => {
                let known =
                    KnownNames::new(&last.compiled.snapshot, last.sql.as_deref().unwrap_or(""));
                Verdict::Fail {
                    code,
                    message: sanitize(&message, &known),
                }
            }
            v => v,
        };
        last.verdict = Some(verdict.clone());
        match verdict {
            Verdict::Fail { code, message } => {
                let why = format!("PostgreSQL refuses it (SQLSTATE {code}): {message}");
                flow.repair_or_finish(last, std::slice::from_ref(&why), &[], prompter, vocab)
            }
            Verdict::Pass | Verdict::Off | Verdict::Unjudged => {
                Next::Done(Box::new(flow.finish(last, vocab)))
            }
        }
    }

    /// The ask can wait no longer (its asker went away): answered as cancelled, its
    /// seals kept.
    pub(crate) fn abandoned(self: Box<Self>, vocab: &Vocabulary) -> Finished {
        let Parked { flow, mut last } = *self;
        last.failure = Some(Failure::new(
            FailureKind::Cancelled,
            "the ask was cancelled while its statement waited for the judge",
        ));
        flow.finish(last, vocab)
    }
}

impl Flow {
    /// An attempt is over (decoded and checked): what follows.
    pub(crate) fn after(self, done: Attempted, prompter: &Prompter, vocab: &Vocabulary) -> Next {
        if done.failure.is_some() {
            return Next::Done(Box::new(self.finish(done, vocab)));
        }
        if !done.violations.is_empty() {
            let violations = done.violations.clone();
            return self.repair_or_finish(done, &violations, &violations, prompter, vocab);
        }
        if !done.job.ask.settings.judge {
            let parked = Box::new(Parked {
                flow: self,
                last: done,
            });
            return parked.judged(Verdict::Off, prompter, vocab);
        }
        let candidate = Candidate {
            ask: done.job.ids[0],
            generation: done.generation,
            sql: done.sql.clone().unwrap_or_default(),
            session_user: done.job.ask.session_user.clone(),
            current_user: done.job.ask.current_user.clone(),
            repairable: self.may_repair(&done),
        };
        Next::Judge(
            candidate,
            Box::new(Parked {
                flow: self,
                last: done,
            }),
        )
    }

    fn may_repair(&self, done: &Attempted) -> bool {
        self.first.is_none() && !done.job.ask.settings.ablation.no_repair
    }

    /// Repairs `done`, refused for `why`: rewound when one of `violations` (the
    /// checker's, if it refused) locates a reference, else by a new prompt; or finishes
    /// the ask when no repair may or can be made.
    fn repair_or_finish<R: std::fmt::Display>(
        mut self,
        done: Attempted,
        why: &[R],
        violations: &[Violation],
        prompter: &Prompter,
        vocab: &Vocabulary,
    ) -> Next {
        if self.may_repair(&done) {
            let repair = done
                .rewind(violations, vocab)
                .map_or_else(|| done.repair(why, prompter), Ok);
            match repair {
                Ok(repair) => {
                    let reasons = why.iter().map(ToString::to_string).collect();
                    return Next::Run(
                        repair,
                        Flow {
                            first: Some(Box::new(done)),
                            reasons,
                            unrepaired: None,
                        },
                    );
                }
                Err(e) => self.unrepaired = Some(e),
            }
        }
        Next::Done(Box::new(self.finish(done, vocab)))
    }

    /// How the refusal of `last` ended: after its repair, with repair switched off, or
    /// with a repair that could not be made. As a clause after the refusal.
    fn repair_outcome(&self, last: &Attempted) -> String {
        if self.first.is_some() {
            " after one repair".to_string()
        } else if last.job.ask.settings.ablation.no_repair {
            " (repair is switched off)".to_string()
        } else if let Some(why) = &self.unrepaired {
            format!(" (its repair could not be made: {why})")
        } else {
            String::new()
        }
    }

    /// The ask's seals and answer, `last` its last attempt.
    pub(crate) fn finish(self, last: Attempted, vocab: &Vocabulary) -> Finished {
        let job = last.job.clone();
        let outcome = self.repair_outcome(&last);
        let first = self.first;
        let mut seals: Vec<SealToWrite> = Vec::new();
        let mut generations = Vec::new();
        for a in first.iter().map(|b| &**b).chain(std::iter::once(&last)) {
            seals.extend(a.seal_to_write(vocab));
            generations.push(a.report());
        }
        let repaired_from = first.as_ref().map(|f| f.generation);
        let role = &job.ask.current_user;
        let generated = |sql: String, with_tokens: bool, refused: Option<String>| {
            Answer::Generated(Generated {
                generation: last.generation,
                sql,
                stop: last.stop.unwrap_or(StopReason::Error),
                repaired_from,
                repair_reasons: self.reasons.clone(),
                steps: explain_rows(&last.steps, vocab, with_tokens),
                head: String::new(),
                refused,
            })
        };
        let answer = match (&last.failure, last.sql.as_deref(), &last.verdict) {
            // grid.explain shows a decline's steps, its tokens too (the model's own words,
            // which the message quotes anyway), the decline as a NOTICE.
            (Some(f), _, _) if last.declined.is_some() && job.ask.explain => {
                generated(String::new(), true, Some(f.message.clone()))
            }
            (Some(f), _, _) => Answer::Failed(f.clone()),
            (None, Some(_), _) if !last.violations.is_empty() => {
                // Neither the statement nor its tokens leave the pipeline: only the audit
                // keeps them, for the auditor.
                let why = format!(
                    "the model's statement is not allowed for role {role:?} and was not \
                     returned{outcome}: {}",
                    refusal(&last.violations).unwrap_or_default()
                );
                if job.ask.explain {
                    generated(String::new(), false, Some(why))
                } else {
                    Answer::Failed(Failure::new(FailureKind::Refused, why))
                }
            }
            (None, Some(_), Some(Verdict::Fail { code, message })) => {
                let why = format!(
                    "PostgreSQL refuses the model's statement (SQLSTATE {code}){}, so it was \
                     not returned: {message}",
                    if repaired_from.is_some() {
                        ", and its repair too".to_string()
                    } else if self.unrepaired.is_some() {
                        outcome
                    } else {
                        String::new()
                    }
                );
                if job.ask.explain {
                    // grid.explain shows the steps (not the tokens) of a refused statement,
                    // the refusal as a NOTICE.
                    generated(String::new(), false, Some(why))
                } else {
                    Answer::Failed(Failure::new(
                        FailureKind::Judged { code: code.clone() },
                        why,
                    ))
                }
            }
            (None, Some(sql), _) => generated(sql.to_string(), true, None),
            (None, None, _) => {
                Answer::Failed(Failure::internal("the generation produced no statement"))
            }
        };
        Finished {
            ask: job.ids[0],
            session_user: job.ask.session_user.clone(),
            seals,
            answer,
            generations,
        }
    }
}

/// `prompt` as the ask's settings have it shown: teaching the decline when they say so
/// (`AskSettings::decline`).
fn taught(prompt: Prompt, job: &Job) -> Prompt {
    if job.ask.settings.decline {
        prompt.teaching_decline()
    } else {
        prompt
    }
}

/// The examples of an ask as the prompt renders them.
pub fn shown_examples(examples: &[crate::request::Example]) -> Vec<prompt::Example> {
    examples
        .iter()
        .map(crate::request::Example::shown)
        .collect()
}
