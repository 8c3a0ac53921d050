//! What the pipeline's decode loops answer and park asks through ([`Hands`]): the host's
//! outbox, the jobs in the loops, the judge, and the asks parked for its verdict.

use std::collections::HashMap;
use std::sync::Arc;

use grid_core::Dialect;

use crate::answer::Answer;
use crate::failure::Failure;
use crate::flow::{Attempt, Finished, Flow, Next, Parked};
use crate::host::{Outbox, Output};
use crate::judge::{Judge, Ruling};
use crate::models::VocabState;
use crate::queue::{Entry, InLoop, Repair};
use crate::record::unreached;

/// An ask parked for the judge, with the vocabulary of the loop that wrote it.
pub(crate) struct Waiting {
    pub(crate) parked: Box<Parked>,
    pub(crate) vocab: Arc<VocabState>,
}

/// The asks parked for the judge, by id.
pub(crate) type Parking = HashMap<u64, Waiting>;

/// What the pipeline's loops answer and park through.
pub(crate) struct Hands<'h> {
    pub(crate) outbox: &'h dyn Outbox,
    pub(crate) in_loop: &'h InLoop,
    pub(crate) judge: &'h mut dyn Judge,
    pub(crate) parked: &'h mut Parking,
}

impl Hands<'_> {
    /// Follows `next` through the judge's immediate verdicts: the attempt to run next,
    /// or `None` when the ask has been answered or parked.
    pub(crate) fn follow(
        &mut self,
        mut next: Next,
        vocab: &Arc<VocabState>,
    ) -> Option<(Attempt, Flow)> {
        loop {
            match next {
                Next::Run(a, f) => return Some((a, f)),
                Next::Done(fin) => {
                    self.finish(*fin);
                    return None;
                }
                Next::Judge(candidate, parked) => match self.judge.judge(&candidate) {
                    Ruling::Now(v) => next = parked.judged(v, &vocab.prompter(), &vocab.vocab),
                    Ruling::Later => {
                        self.in_loop.leave(parked.ask());
                        self.parked.insert(
                            parked.ask(),
                            Waiting {
                                parked,
                                vocab: vocab.clone(),
                            },
                        );
                        return None;
                    }
                },
            }
        }
    }

    /// Sends an ask's seals and answer; the ask leaves the loop.
    pub(crate) fn finish(&mut self, fin: Finished) {
        self.in_loop.leave(fin.ask);
        self.outbox.send(Output::Finish(Box::new(fin)));
    }

    /// Answers an ask that cannot be asked: sealed as unreached, with the failure.
    pub(crate) fn refuse(&mut self, entry: Entry, f: &Failure, dialect: &Dialect) {
        match entry {
            Entry::Ask(job) => self.finish(Finished {
                ask: job.id(),
                session_user: job.ask.session_user.clone(),
                seals: unreached(&job, f, dialect).into_iter().collect(),
                answer: Answer::Failed(f.clone()),
                generations: Vec::new(),
            }),
            Entry::Repair(r) => {
                let Repair {
                    attempt: a,
                    flow,
                    vocab,
                } = *r;
                // The repair never ran: the ask ends with the failure, the first
                // attempt's seal kept.
                let next = flow.after(a.failed(f.clone()), &vocab.prompter(), &vocab.vocab);
                self.follow(next, &vocab);
            }
        }
    }
}
