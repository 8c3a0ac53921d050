//! An ask as the host hands it to the pipeline ([`Job`]): the ask, the generation ids
//! drawn for it, and what the host decides around it (its deadline, its cancel flag, the
//! threads and memory of the mask walks, the sampling seed).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::models::Gone;
use crate::request::Ask;

/// The seed of the extension's sampling (generation `g` samples with `mix(SEED, g)`).
pub const SEED: u64 = 0x6772_6964;

/// An ask handed to the pipeline.
pub struct Job {
    /// Generation ids drawn for it: the first attempt's and the repair's. The first is
    /// the ask's id.
    pub ids: [u64; 2],
    pub ask: Ask,
    /// The endpoint's API key; never logged or echoed.
    pub api_key: Option<String>,
    /// Set by the host when the asker has gone away (cancelled, disconnected).
    pub cancel: Arc<AtomicBool>,
    /// The last moment the asker waits for.
    pub deadline: Instant,
    /// When the ask reached the host (seconds since the Unix epoch).
    pub started_at: f64,
    /// Threads of the pool of cold mask walks (0: one per CPU).
    pub threads: usize,
    /// Memory the mask cache may hold, in bytes.
    pub mask_cache_bytes: usize,
    /// Generation `g` samples with `mix(seed, g)` ([`SEED`] in the extension).
    pub seed: u64,
}

impl Job {
    /// An ask to run now as generations `ids`, with the defaults of a host that has no
    /// settings of its own for the rest: its asker waits `ask.settings.timeout_ms`, one
    /// thread of cold mask walks, a 256 MB mask cache, the extension's [`SEED`].
    pub fn new(ids: [u64; 2], ask: Ask) -> Job {
        let wait = Duration::from_millis(ask.settings.timeout_ms);
        Job {
            ids,
            ask,
            api_key: None,
            cancel: Arc::new(AtomicBool::new(false)),
            deadline: Instant::now() + wait,
            started_at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            threads: 1,
            mask_cache_bytes: 256 << 20,
            seed: SEED,
        }
    }

    /// The ask's id (its first generation's).
    pub(crate) fn id(&self) -> u64 {
        self.ids[0]
    }

    /// Whether the asker went away.
    pub(crate) fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    /// When a render of this job's prompt is abandoned.
    pub(crate) fn render_deadline(&self) -> Gone<'_> {
        Gone {
            cancel: &self.cancel,
            deadline: self.deadline,
        }
    }

    /// Whether the asker no longer waits (cancelled, gone, or past its deadline).
    pub(crate) fn gone(&self) -> bool {
        self.cancelled() || Instant::now() > self.deadline
    }
}
