//! Pipelining (`grid_endpoint::backend::pipeline`) through the protocol, on the forward
//! mock: the forward pass of a sampled token runs while the client computes the next
//! mask (shown by a rendezvous, not by wall time), and it changes no token, no error and
//! no state that outlives a generation.

use std::collections::HashSet;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::common::{all_plain, bounded, spawn_server, sql_vocab};
use grid_endpoint::backend::forward::{Forward, ForwardConfig, ForwardMock, HashedForward};
use grid_endpoint::backend::mock::mix;
use grid_endpoint::backend::sample::sample_row;
use grid_endpoint::backend::Allowed;
use grid_endpoint::client::{ClientConfig, EndpointClient, Mask, StepInput};
use grid_endpoint::protocol::ErrorCode;
use grid_endpoint::server::RunningServer;
use grid_endpoint::{Sampling, ServerConfig, TokenSet};
use grid_vocab::Vocabulary;

/// Who has reached which position: the forward pass that computes the logits after a
/// history of length `p` (`started`), and the client's mask for the step at `p`
/// (`masked`).
#[derive(Default)]
struct Meeting {
    state: Mutex<Met>,
    changed: Condvar,
}

#[derive(Default)]
struct Met {
    started: HashSet<usize>,
    masked: HashSet<usize>,
    /// Positions whose forward pass started before their mask was delivered, and then
    /// waited for it.
    forward_waited_for_mask: HashSet<usize>,
}

impl Meeting {
    /// Applies `mark` and waits (at most `limit`) until `other` holds; whether it did.
    fn meet(
        &self,
        limit: Duration,
        mark: impl FnOnce(&mut Met),
        other: impl Fn(&Met) -> bool,
    ) -> bool {
        let mut st = self.state.lock().unwrap();
        mark(&mut st);
        self.changed.notify_all();
        let (st, _) = self
            .changed
            .wait_timeout_while(st, limit, |st| !other(st))
            .unwrap();
        other(&st)
    }
}

/// A forward pass that, once started, waits for the client's mask of the same position.
struct WaitsForMask {
    inner: HashedForward,
    meeting: Arc<Meeting>,
}

impl Forward for WaitsForMask {
    fn forward(&mut self, histories: &[&[u32]]) -> Result<Vec<Vec<f32>>, String> {
        for h in histories {
            let p = h.len();
            let mut before = false;
            let met = self.meeting.meet(
                Duration::from_secs(20),
                |st| {
                    before = !st.masked.contains(&p);
                    st.started.insert(p);
                },
                |st| st.masked.contains(&p),
            );
            if met && before {
                let mut st = self.meeting.state.lock().unwrap();
                st.forward_waited_for_mask.insert(p);
            }
        }
        self.inner.forward(histories)
    }
}

async fn serve(vocab: &Arc<Vocabulary>, mock: Arc<ForwardMock>) -> (RunningServer, EndpointClient) {
    let server = spawn_server(vocab.clone(), mock, ServerConfig::default()).await;
    let client =
        EndpointClient::new(&server.url(), vocab.fingerprint(), ClientConfig::default()).unwrap();
    (server, client)
}

/// A greedy step under `mask`, EOS shut, after a prompt of 3 tokens.
fn greedy<'a>(id: &'a str, history: &'a [u32], mask: &'a Mask) -> StepInput<'a> {
    StepInput {
        id,
        history,
        prompt_len: 3,
        mask,
        cd_pass: &[],
        eos_allowed: false,
        sampling: Sampling::greedy(),
    }
}

fn hashed(vocab: &Vocabulary) -> HashedForward {
    HashedForward {
        vocab_size: vocab.len(),
        delay: Duration::ZERO,
        seed: 7,
    }
}

fn config(overlap: bool) -> ForwardConfig {
    ForwardConfig {
        overlap,
        ..ForwardConfig::default()
    }
}

/// Runs `steps` greedy steps of one generation; before each step after the first, the
/// client "computes the mask": it waits (at most `limit`) for the forward pass of that
/// position to have started. Returns the positions where it had.
async fn drive(overlap: bool, steps: usize, limit: Duration) -> (HashSet<usize>, Met, u64) {
    let vocab = sql_vocab();
    let meeting = Arc::new(Meeting::default());
    let forward = WaitsForMask {
        inner: hashed(&vocab),
        meeting: meeting.clone(),
    };
    let mock = Arc::new(ForwardMock::new(&vocab, forward, config(overlap)).unwrap());
    let (server, client) = serve(&vocab, mock.clone()).await;
    let mask = Mask::content_addressed(all_plain(&vocab));
    let mut history: Vec<u32> = vec![10, 11, 12];
    let mut client_met = HashSet::new();
    for t in 0..steps {
        let p = history.len();
        let m = meeting.clone();
        let met = tokio::task::spawn_blocking(move || {
            let wait = if t == 0 { Duration::ZERO } else { limit };
            m.meet(wait, |_| (), |st| st.started.contains(&p))
        })
        .await
        .unwrap();
        if met && t > 0 {
            client_met.insert(p);
        }
        {
            let mut st = meeting.state.lock().unwrap();
            st.masked.insert(p);
            meeting.changed.notify_all();
        }
        let input = greedy("g", &history, &mask);
        let out = client.step(&[input]).await.unwrap();
        history.push(out[0].as_ref().unwrap().token);
    }
    // The pass ahead of the last token waits for a mask that no step will send.
    {
        let mut st = meeting.state.lock().unwrap();
        st.masked.insert(history.len());
        meeting.changed.notify_all();
    }
    let hits = mock.stats().await.unwrap().ready_hits;
    server.stop().await;
    let met = std::mem::take(&mut *meeting.state.lock().unwrap());
    (client_met, met, hits)
}

#[tokio::test]
async fn the_next_forward_pass_runs_while_the_mask_is_computed() {
    bounded(async {
        let steps = 6;
        // Pipelined: for every step after the first, the forward pass of the last
        // sampled token had started while the client was computing the step's mask, and
        // that pass could only end once the mask was delivered: the two ran at once.
        let (client_met, met, hits) = drive(true, steps, Duration::from_secs(20)).await;
        let after_first: HashSet<usize> = (4..3 + steps).collect();
        assert_eq!(client_met, after_first);
        assert!(
            after_first.is_subset(&met.forward_waited_for_mask),
            "{:?}",
            met.forward_waited_for_mask
        );
        // ... and each of those steps found its logits computed: no pass of its own.
        assert_eq!(hits, (steps - 1) as u64);

        // Not pipelined: the pass of a position starts only when its step arrives, after
        // its mask; the client never finds it running.
        let (client_met, met, hits) = drive(false, 3, Duration::from_millis(100)).await;
        assert!(client_met.is_empty(), "{client_met:?}");
        assert!(met.forward_waited_for_mask.is_empty());
        assert_eq!(hits, 0);
    })
    .await;
}

/// A pseudo-random nonempty subset of the plain ids, a function of the history.
fn mask_for(vocab: &Vocabulary, history: &[u32]) -> TokenSet {
    let seed = history.iter().fold(0u64, |h, &t| mix(h, u64::from(t)));
    let mut set = TokenSet::from_ids(
        vocab.len(),
        (0..vocab.len() as u32)
            .filter(|&i| !vocab.is_special(i) && mix(seed, u64::from(i)) % 3 == 0),
    )
    .unwrap();
    if set.is_empty() {
        set.insert(0);
    }
    set
}

fn sampling_of(g: usize) -> Sampling {
    if g % 2 == 0 {
        Sampling::greedy()
    } else {
        Sampling {
            temperature: 0.9,
            top_k: Some(5),
            seed: g as u64,
        }
    }
}

/// Three generations a tick (two of them at a time when `rotate`), masks that vary with
/// the history, forced tokens every fifth step, EOS allowed every seventh (a generation
/// that samples it ends and is released), every token checked against the oracle:
/// `sample_row` on `HashedForward::row` of the same history. Returns every generation's
/// tokens.
async fn run_oracle(
    overlap: bool,
    max_generations: usize,
    rotate: bool,
) -> (Vec<Vec<u32>>, u64, usize) {
    let vocab = sql_vocab();
    let eos = vocab.eos_id().unwrap();
    let oracle = hashed(&vocab);
    let config = ForwardConfig {
        overlap,
        max_generations,
        trace: false,
    };
    let mock = Arc::new(ForwardMock::new(&vocab, hashed(&vocab), config).unwrap());
    let (server, client) = serve(&vocab, mock.clone()).await;
    let ids = ["a", "b", "c"];
    let mut hs: Vec<Vec<u32>> = (0..3).map(|g| vec![20 + g as u32, 30, 40]).collect();
    let mut live = [true; 3];
    for t in 0..24usize {
        let chosen: Vec<usize> = (0..3)
            .filter(|&g| live[g] && !(rotate && g == t % 3))
            .collect();
        if chosen.is_empty() {
            break;
        }
        for &g in &chosen {
            if t % 5 == 4 {
                hs[g].push(50 + t as u32 % 7); // a forced span
            }
        }
        let masks: Vec<Mask> = chosen
            .iter()
            .map(|&g| Mask::content_addressed(mask_for(&vocab, &hs[g])))
            .collect();
        let eos_allowed = t % 7 == 6;
        let inputs: Vec<StepInput> = chosen
            .iter()
            .zip(&masks)
            .map(|(&g, m)| StepInput {
                id: ids[g],
                history: &hs[g],
                prompt_len: 3,
                mask: m,
                cd_pass: &[],
                eos_allowed,
                sampling: sampling_of(g),
            })
            .collect();
        let out = client.step(&inputs).await.unwrap();
        drop(inputs);
        for ((&g, m), r) in chosen.iter().zip(&masks).zip(out) {
            let token = r.unwrap().token;
            let allowed = Allowed::new(m.set.clone(), &[], eos_allowed.then_some(eos));
            let want =
                sample_row(&oracle.row(&hs[g]), &allowed, &sampling_of(g), hs[g].len()).unwrap();
            assert_eq!(token, want.token, "generation {g}, step {t}");
            hs[g].push(token);
            if token == eos {
                live[g] = false;
                client.release(ids[g]);
            }
        }
    }
    for (g, id) in ids.iter().enumerate() {
        if live[g] {
            client.release(id);
        }
    }
    // The releases travel with the next request.
    let last = Mask::content_addressed(all_plain(&vocab));
    let probe = vec![1u32, 2, 3];
    let input = greedy("probe", &probe, &last);
    client.step(&[input]).await.unwrap()[0].as_ref().unwrap();
    let stats = mock.stats().await.unwrap();
    server.stop().await;
    (hs, stats.ready_hits, stats.held)
}

#[tokio::test]
async fn pipelining_changes_no_token() {
    bounded(async {
        let (on, hits_on, held_on) = run_oracle(true, 64, false).await;
        let (off, hits_off, _) = run_oracle(false, 64, false).await;
        assert_eq!(on, off);
        assert!(hits_on > 0);
        assert_eq!(hits_off, 0);
        // Every generation was released (at EOS or at the end): only the probe that
        // carried the releases is held, not what was computed ahead for a generation
        // that then stopped.
        assert_eq!(held_on, 1);

        // With room for two generations' logits and three taking turns, work ahead is
        // evicted and recomputed: still the oracle's tokens.
        let (rot_on, _, _) = run_oracle(true, 2, true).await;
        let (rot_off, _, _) = run_oracle(false, 2, true).await;
        assert_eq!(rot_on, rot_off);
    })
    .await;
}

/// A forward pass that fails `times` times for histories of length `at`.
struct FailsAt {
    inner: HashedForward,
    at: usize,
    times: usize,
}

impl Forward for FailsAt {
    fn forward(&mut self, histories: &[&[u32]]) -> Result<Vec<Vec<f32>>, String> {
        if self.times > 0 && histories.iter().any(|h| h.len() == self.at) {
            self.times -= 1;
            return Err(format!("no logits after {} tokens", self.at));
        }
        self.inner.forward(histories)
    }
}

/// One generation stepped from a prompt of 3 until a step's history reaches 7 tokens;
/// the forward pass fails `times` times after 6. Each step's outcome: the token, or the
/// error code and message.
async fn run_failing(overlap: bool, times: usize) -> Vec<Result<u32, (ErrorCode, String)>> {
    let vocab = sql_vocab();
    let forward = FailsAt {
        inner: hashed(&vocab),
        at: 6,
        times,
    };
    let mock = Arc::new(ForwardMock::new(&vocab, forward, config(overlap)).unwrap());
    let (server, client) = serve(&vocab, mock).await;
    let mask = Mask::content_addressed(all_plain(&vocab));
    let mut history = vec![10u32, 11, 12];
    let mut outcomes = Vec::new();
    while history.len() < 7 && outcomes.len() < 8 {
        let input = greedy("g", &history, &mask);
        match client.step(&[input]).await.unwrap().remove(0) {
            Ok(s) => {
                history.push(s.token);
                outcomes.push(Ok(s.token));
            }
            Err(e) => {
                outcomes.push(Err((e.code, e.message)));
                // The step changed nothing: the client goes on with a forced token.
                history.push(60);
            }
        }
    }
    server.stop().await;
    outcomes
}

#[tokio::test]
async fn a_failed_forward_pass_is_reported_on_the_step_that_needs_it() {
    bounded(async {
        // A pass that keeps failing: the step at 6 tokens reports it, as without
        // pipelining (where the step's own pass fails), with the same code and message.
        let on = run_failing(true, usize::MAX).await;
        let off = run_failing(false, usize::MAX).await;
        assert_eq!(on, off);
        assert_eq!(on.len(), 4, "{on:?}");
        assert!(on[..3].iter().all(Result::is_ok), "{on:?}");
        assert_eq!(
            on[3],
            Err((ErrorCode::Backend, "no logits after 6 tokens".into()))
        );

        // A pass that fails once: pipelined, only the pass ahead failed, and the step
        // ran it again; unpipelined, the step's own pass failed. Either way the
        // generation goes on with the same tokens once a pass succeeds.
        let on = run_failing(true, 1).await;
        let off = run_failing(false, 1).await;
        assert_eq!(on.len(), 4, "{on:?}");
        assert!(on.iter().all(Result::is_ok), "{on:?}");
        assert!(matches!(off[3], Err((ErrorCode::Backend, _))), "{off:?}");
        assert_eq!(on[..3], off[..3]);
    })
    .await;
}
