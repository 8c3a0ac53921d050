//! The KV-cache bookkeeping of the llama backend, in llama.cpp's terms but without it:
//! which sequence holds which tokens, what a step must compute, and what to share.
//!
//! The cache is llama.cpp's unified KV cache: every cell holds one position of one or
//! more sequences, and copying a range of positions from one sequence to another
//! (`seq_cp`) only adds the destination to those cells. So a prompt evaluated once can
//! start any number of generations at no cost in memory or time.
//!
//! * **Generations.** Each live generation owns one sequence ([`Held`]) holding exactly
//!   `tokens` (positions `0..tokens.len()`), and possibly the logits row after its last
//!   token. A step gives the generation's whole history; the book keeps the longest
//!   common prefix of what the sequence holds and the history (at most all but the
//!   history's last token, unless the row after the whole history is held), drops the
//!   rest, and schedules the remainder. A restart, a resync or a retried step therefore
//!   costs recomputation, never a wrong context.
//! * **Prompt prefixes.** Evaluated prompts are kept in sequences of their own (an LRU of
//!   at most `max_prefixes`). A generation whose held prefix is shorter than some kept
//!   prompt's common prefix with its history starts from a copy of that prompt's cells.
//! * **One batch per step.** All the tokens a step needs go into one list of
//!   [`Entry`]s (split into decode calls only when longer than llama's batch), with the
//!   logits requested for each generation's last token. Generations of the same step
//!   that start at the same position with the same history share the entries of their
//!   common part (a token with several sequence ids), so a schema prompt sent by many
//!   asks at once is evaluated once.
//! * **Eviction.** At most `max_generations` generations hold a sequence; a new one
//!   takes the least recently used idle generation's. When llama.cpp runs out of cells,
//!   [`KvBook::evict_for_space`] frees the least recently used prefix or idle generation.
//!
//! The book changes only through [`KvBook::plan`], then [`KvBook::commit`] (the decode
//! succeeded) or [`KvBook::abort`] (it failed: the generations of the step are reset,
//! since a failed decode may leave their sequences partly written), and
//! [`KvBook::release`]. Every [`KvOp`] it returns must be applied in order.

use std::collections::{HashMap, HashSet};

/// A llama.cpp sequence id.
pub type SeqId = i32;

/// An operation on the KV cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KvOp {
    /// Drop every position of `seq` (`seq_rm(seq, 0, -1)`).
    Clear { seq: SeqId },
    /// Drop the positions `from..` of `seq` (`seq_rm(seq, from, -1)`).
    Truncate { seq: SeqId, from: usize },
    /// Give `dst`, which holds nothing, the cells of positions `0..len` of `src`
    /// (`seq_cp(src, dst, 0, len)`).
    Share { src: SeqId, dst: SeqId, len: usize },
}

/// One token to decode, at `pos`, into every sequence of `seqs`. All of them hold the
/// same tokens at the positions before `pos` (the first one's cells are the ones
/// attended to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub token: u32,
    pub pos: usize,
    pub seqs: Vec<SeqId>,
    /// Whether the logits after this token are wanted.
    pub output: bool,
}

/// Where a generation's logits for this step come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logits {
    /// The row the book holds (nothing to decode).
    Held,
    /// The output of entry `i` of the plan.
    Entry(usize),
}

/// A generation's part of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slot {
    /// Its logits will be in `logits`; the step decodes its positions `from..`.
    Ready {
        seq: SeqId,
        logits: Logits,
        from: usize,
    },
    /// It cannot be served; the message says why.
    Failed(String),
}

/// One generation of a step: its id, whole history, and how much of it is the prompt.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub id: &'a str,
    pub history: &'a [u32],
    pub prompt_len: usize,
}

/// What a step must do: cache operations, then the tokens to decode.
#[derive(Debug, Default)]
pub struct Plan {
    /// Applied before decoding.
    pub before: Vec<KvOp>,
    /// Decoded in order.
    pub entries: Vec<Entry>,
    /// One per request, in order.
    pub slots: Vec<Slot>,
}

impl Plan {
    /// Indices of the entries whose logits are wanted, in order.
    pub fn outputs(&self) -> impl Iterator<Item = usize> + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.output)
            .map(|(i, _)| i)
    }
}

/// A live generation's sequence. Invariant: `seq` holds exactly `tokens` at positions
/// `0..tokens.len()`; `row`, when present, is the logits after `tokens.last()`.
#[derive(Debug)]
struct Held<R> {
    seq: SeqId,
    tokens: Vec<u32>,
    row: Option<R>,
    used: u64,
}

/// A kept prompt. Invariant: `seq` holds exactly `tokens`.
#[derive(Debug)]
struct Prefix {
    seq: SeqId,
    tokens: Vec<u32>,
    used: u64,
}

/// The bookkeeping of one llama context (see the module documentation). `R` is a
/// logits row.
#[derive(Debug)]
pub struct KvBook<R> {
    /// Sequence ids holding nothing. Invariant: every id `0..max_generations +
    /// max_prefixes` is exactly once in `free`, a [`Held`] or a [`Prefix`].
    free: Vec<SeqId>,
    gens: HashMap<String, Held<R>>,
    prefixes: Vec<Prefix>,
    max_generations: usize,
    max_prefixes: usize,
    /// The context size in cells: the longest history one sequence can hold.
    n_ctx: usize,
    /// Use counter (one tick per plan).
    tick: u64,
}

/// Length of the longest common prefix.
pub fn lcp(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl<R: Clone> KvBook<R> {
    /// A book for `max_generations` live generations and `max_prefixes` kept prompts
    /// (sequence ids `0..max_generations + max_prefixes`) over `n_ctx` cells.
    pub fn new(max_generations: usize, max_prefixes: usize, n_ctx: usize) -> Self {
        let max_generations = max_generations.max(1);
        let total = (max_generations + max_prefixes) as SeqId;
        KvBook {
            free: (0..total).rev().collect(),
            gens: HashMap::new(),
            prefixes: Vec::new(),
            max_generations,
            max_prefixes,
            n_ctx,
            tick: 0,
        }
    }

    /// How many sequence ids the book uses (llama's `n_seq_max`).
    pub fn sequences(&self) -> usize {
        self.max_generations + self.max_prefixes
    }

    /// Live generations holding a sequence.
    pub fn generations(&self) -> usize {
        self.gens.len()
    }

    /// Kept prompts.
    pub fn prefixes(&self) -> usize {
        self.prefixes.len()
    }

    /// The tokens generation `id`'s sequence holds.
    pub fn held_tokens(&self, id: &str) -> Option<&[u32]> {
        self.gens.get(id).map(|h| h.tokens.as_slice())
    }

    /// The logits row generation `id` holds (after its last held token).
    pub fn row(&self, id: &str) -> Option<&R> {
        self.gens.get(id).and_then(|h| h.row.as_ref())
    }

    /// The kept prompts, least recently used first.
    pub fn prefix_tokens(&self) -> Vec<&[u32]> {
        let mut p: Vec<&Prefix> = self.prefixes.iter().collect();
        p.sort_by_key(|p| p.used);
        p.into_iter().map(|p| p.tokens.as_slice()).collect()
    }

    /// Frees generation `id`'s sequence.
    pub fn release(&mut self, id: &str) -> Option<KvOp> {
        let h = self.gens.remove(id)?;
        self.free.push(h.seq);
        Some(KvOp::Clear { seq: h.seq })
    }

    /// Plans a step for `requests` (ids unique). Allocates and trims sequences; the
    /// returned operations must be applied before decoding `entries`.
    pub fn plan(&mut self, requests: &[Request<'_>]) -> Plan {
        self.tick += 1;
        let in_step: HashSet<&str> = requests.iter().map(|r| r.id).collect();
        let mut plan = Plan::default();
        // Per request served by decoding: its start position and entry per position.
        let mut fed: Vec<Option<(usize, Vec<usize>)>> = Vec::with_capacity(requests.len());
        for (i, r) in requests.iter().enumerate() {
            let (slot, feed) = self.plan_one(i, r, requests, &fed, &in_step, &mut plan);
            plan.slots.push(slot);
            fed.push(feed);
        }
        plan
    }

    fn plan_one(
        &mut self,
        i: usize,
        r: &Request<'_>,
        requests: &[Request<'_>],
        fed: &[Option<(usize, Vec<usize>)>],
        in_step: &HashSet<&str>,
        plan: &mut Plan,
    ) -> (Slot, Option<(usize, Vec<usize>)>) {
        let tick = self.tick;
        let h = r.history;
        let n = h.len();
        if n == 0 {
            return (
                Slot::Failed("nothing to continue: the history is empty".into()),
                None,
            );
        }
        if n > self.n_ctx {
            return (
                Slot::Failed(format!(
                    "the history of {n} tokens does not fit the context of {} (--ctx)",
                    self.n_ctx
                )),
                None,
            );
        }
        if !self.gens.contains_key(r.id) {
            let Some(seq) = self.take_generation_seq(in_step, &mut plan.before) else {
                return (
                    Slot::Failed(format!(
                        "more than {} generations at once (--max-generations)",
                        self.max_generations
                    )),
                    None,
                );
            };
            self.gens.insert(
                r.id.to_string(),
                Held {
                    seq,
                    tokens: Vec::new(),
                    row: None,
                    used: tick,
                },
            );
        }
        // The generation exists now.
        let Some(g) = self.gens.get_mut(r.id) else {
            return (Slot::Failed("internal: lost a generation".into()), None);
        };
        g.used = tick;
        if g.row.is_some() && g.tokens == h {
            return (
                Slot::Ready {
                    seq: g.seq,
                    logits: Logits::Held,
                    from: n,
                },
                None,
            );
        }
        let seq = g.seq;
        let own = lcp(&g.tokens, h).min(n - 1);
        let best = self
            .prefixes
            .iter_mut()
            .map(|p| (lcp(&p.tokens, h).min(n - 1), p))
            .max_by_key(|(len, p)| (*len, p.used));
        g.row = None;
        match best {
            Some((len, p)) if len > own => {
                p.used = tick;
                if !g.tokens.is_empty() {
                    plan.before.push(KvOp::Clear { seq });
                }
                plan.before.push(KvOp::Share {
                    src: p.seq,
                    dst: seq,
                    len,
                });
                g.tokens = h[..len].to_vec();
            }
            _ => {
                if g.tokens.len() > own {
                    plan.before.push(KvOp::Truncate { seq, from: own });
                    g.tokens.truncate(own);
                }
            }
        }
        let start = g.tokens.len();

        // Share the entries of an earlier request of this step that starts at the same
        // position with the same history, for as long as the histories agree.
        let mut shared: Option<(usize, usize)> = None; // (request, shared end)
        for (j, f) in fed.iter().enumerate().take(i) {
            let Some((s, _)) = f else { continue };
            if *s != start {
                continue;
            }
            let m = lcp(requests[j].history, h);
            if m > start && shared.is_none_or(|(_, best)| m > best) {
                shared = Some((j, m));
            }
        }
        let mut mine = Vec::with_capacity(n - start);
        let shared_end = match shared {
            Some((j, m)) => {
                let theirs = fed[j].as_ref().map(|(_, e)| e.as_slice()).unwrap_or(&[]);
                for &e in theirs.iter().take(m - start) {
                    plan.entries[e].seqs.push(seq);
                    mine.push(e);
                }
                start + mine.len()
            }
            None => start,
        };
        for (pos, &token) in h.iter().enumerate().skip(shared_end) {
            mine.push(plan.entries.len());
            plan.entries.push(Entry {
                token,
                pos,
                seqs: vec![seq],
                output: false,
            });
        }
        let last = mine[mine.len() - 1];
        plan.entries[last].output = true;
        (
            Slot::Ready {
                seq,
                logits: Logits::Entry(last),
                from: start,
            },
            Some((start, mine)),
        )
    }

    /// A free sequence for a new generation, evicting the least recently used one that
    /// is not in this step when all are taken.
    fn take_generation_seq(
        &mut self,
        in_step: &HashSet<&str>,
        ops: &mut Vec<KvOp>,
    ) -> Option<SeqId> {
        if self.gens.len() >= self.max_generations {
            let victim = self
                .gens
                .iter()
                .filter(|(id, _)| !in_step.contains(id.as_str()))
                .min_by_key(|(_, h)| h.used)
                .map(|(id, _)| id.clone())?;
            ops.extend(self.release(&victim));
        }
        self.free.pop()
    }

    /// Records a successful decode of `plan`: every served generation holds its whole
    /// history and the row after it (`rows[e]` for output entry `e`). Returns the
    /// operations that keep the prompts evaluated in this step (apply them next).
    pub fn commit(
        &mut self,
        requests: &[Request<'_>],
        plan: &Plan,
        rows: &mut HashMap<usize, R>,
    ) -> Vec<KvOp> {
        // An output row may be shared by several generations with the same history.
        let mut uses: HashMap<usize, usize> = HashMap::new();
        for s in &plan.slots {
            if let Slot::Ready {
                logits: Logits::Entry(e),
                ..
            } = s
            {
                *uses.entry(*e).or_default() += 1;
            }
        }
        let mut ops = Vec::new();
        let mut kept: HashSet<&[u32]> = HashSet::new();
        for (r, slot) in requests.iter().zip(&plan.slots) {
            let Slot::Ready {
                seq,
                logits: Logits::Entry(e),
                from,
            } = slot
            else {
                continue;
            };
            let left = uses.entry(*e).or_default();
            *left = left.saturating_sub(1);
            let row = if *left == 0 {
                rows.remove(e)
            } else {
                rows.get(e).cloned()
            };
            if let Some(g) = self.gens.get_mut(r.id) {
                g.tokens = r.history.to_vec();
                g.row = row;
            }
            // Keep the prompt when this step evaluated its end.
            let p = r.prompt_len;
            if p > 0 && *from < p && p <= r.history.len() {
                let prompt = &r.history[..p];
                if kept.insert(prompt) {
                    ops.extend(self.keep_prefix(*seq, prompt));
                }
            }
        }
        ops
    }

    /// Keeps `prompt`, which `src` holds (at least), as a prefix.
    fn keep_prefix(&mut self, src: SeqId, prompt: &[u32]) -> Vec<KvOp> {
        if self.max_prefixes == 0 {
            return Vec::new();
        }
        if let Some(p) = self.prefixes.iter_mut().find(|p| p.tokens == prompt) {
            p.used = self.tick;
            return Vec::new();
        }
        let mut ops = Vec::new();
        if self.prefixes.len() >= self.max_prefixes {
            if let Some(k) = (0..self.prefixes.len()).min_by_key(|&k| self.prefixes[k].used) {
                let old = self.prefixes.swap_remove(k);
                ops.push(KvOp::Clear { seq: old.seq });
                self.free.push(old.seq);
            }
        }
        let Some(seq) = self.free.pop() else {
            return ops;
        };
        ops.push(KvOp::Share {
            src,
            dst: seq,
            len: prompt.len(),
        });
        self.prefixes.push(Prefix {
            seq,
            tokens: prompt.to_vec(),
            used: self.tick,
        });
        ops
    }

    /// Records a failed decode of `plan`: what the step's generations hold is unknown,
    /// so their sequences are cleared (the next step recomputes them).
    pub fn abort(&mut self, requests: &[Request<'_>], plan: &Plan) -> Vec<KvOp> {
        let mut ops = Vec::new();
        for (r, slot) in requests.iter().zip(&plan.slots) {
            if let Slot::Ready {
                seq,
                logits: Logits::Entry(_),
                ..
            } = slot
            {
                if let Some(g) = self.gens.get_mut(r.id) {
                    g.tokens.clear();
                    g.row = None;
                    ops.push(KvOp::Clear { seq: *seq });
                }
            }
        }
        ops
    }

    /// Frees the least recently used kept prompt or idle generation (not in `in_step`)
    /// to make room in the cache; `None` when there is nothing left to free.
    pub fn evict_for_space(&mut self, in_step: &HashSet<&str>) -> Option<KvOp> {
        let prefix = (0..self.prefixes.len()).min_by_key(|&k| self.prefixes[k].used);
        let idle = self
            .gens
            .iter()
            .filter(|(id, h)| !in_step.contains(id.as_str()) && !h.tokens.is_empty())
            .min_by_key(|(_, h)| h.used)
            .map(|(id, h)| (id.clone(), h.used));
        match (prefix, idle) {
            (Some(k), idle)
                if idle
                    .as_ref()
                    .is_none_or(|(_, u)| self.prefixes[k].used <= *u) =>
            {
                let old = self.prefixes.swap_remove(k);
                self.free.push(old.seq);
                Some(KvOp::Clear { seq: old.seq })
            }
            (_, Some((id, _))) => self.release(&id),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// A model of llama.cpp's unified KV cache: cells of (position, token, sequences).
    /// `decode` checks llama's batch rules and that every entry's sequences hold the
    /// same tokens before it.
    #[derive(Debug, Default)]
    struct FakeKv {
        /// Per sequence: position → token.
        seqs: BTreeMap<SeqId, BTreeMap<usize, u32>>,
        /// Cells in use: distinct (position, token, first holder) computations, for
        /// counting work.
        computed: usize,
    }

    impl FakeKv {
        fn apply(&mut self, ops: &[KvOp]) {
            for op in ops {
                match *op {
                    KvOp::Clear { seq } => {
                        self.seqs.remove(&seq);
                    }
                    KvOp::Truncate { seq, from } => {
                        if let Some(s) = self.seqs.get_mut(&seq) {
                            s.retain(|&p, _| p < from);
                        }
                    }
                    KvOp::Share { src, dst, len } => {
                        assert!(
                            self.seqs.get(&dst).is_none_or(|d| d.is_empty()),
                            "share into a non-empty sequence"
                        );
                        let s: BTreeMap<usize, u32> = self
                            .seqs
                            .get(&src)
                            .map(|s| s.range(..len).map(|(&p, &t)| (p, t)).collect())
                            .unwrap_or_default();
                        assert_eq!(s.len(), len, "share of positions the source lacks");
                        self.seqs.insert(dst, s);
                    }
                }
            }
        }

        fn tokens(&self, seq: SeqId) -> Vec<u32> {
            let s = self.seqs.get(&seq).cloned().unwrap_or_default();
            for (i, &p) in s.keys().enumerate() {
                assert_eq!(i, p, "sequence {seq} has a hole");
            }
            s.values().copied().collect()
        }

        /// Decodes entries as llama would, checking its rules.
        fn decode(&mut self, entries: &[Entry]) {
            // Positions per sequence must continue what it holds, contiguously.
            let mut next: BTreeMap<SeqId, usize> = BTreeMap::new();
            for e in entries {
                let first = &self.tokens(e.seqs[0]);
                for &s in &e.seqs {
                    let held = self.tokens(s);
                    let want = *next.entry(s).or_insert(held.len());
                    assert_eq!(e.pos, want, "sequence {s}: position {} not {want}", e.pos);
                    next.insert(s, want + 1);
                    assert_eq!(
                        &held[..e.pos.min(held.len())],
                        &first[..e.pos.min(first.len())],
                        "entry shared by sequences with different histories"
                    );
                }
                for &s in &e.seqs {
                    self.seqs.entry(s).or_default().insert(e.pos, e.token);
                }
                self.computed += 1;
            }
        }
    }

    /// Runs one step through the book and the fake cache; returns the entries decoded.
    fn step(
        book: &mut KvBook<Vec<u32>>,
        kv: &mut FakeKv,
        requests: &[Request<'_>],
    ) -> (Plan, usize) {
        let plan = book.plan(requests);
        kv.apply(&plan.before);
        let before = kv.computed;
        kv.decode(&plan.entries);
        // The "row" of an output is the history it follows, so a test can see it.
        let mut rows: HashMap<usize, Vec<u32>> = HashMap::new();
        for e in plan.outputs() {
            rows.insert(
                e,
                kv.tokens(plan.entries[e].seqs[0])[..=plan.entries[e].pos].to_vec(),
            );
        }
        let after = book.commit(requests, &plan, &mut rows);
        kv.apply(&after);
        let n = kv.computed - before;
        (plan, n)
    }

    /// Every generation's sequence holds what the book says, every row follows its
    /// tokens, and every kept prompt is held by its sequence.
    fn check(book: &KvBook<Vec<u32>>, kv: &FakeKv) {
        let mut seen = HashSet::new();
        for h in book.gens.values() {
            assert_eq!(kv.tokens(h.seq), h.tokens);
            if let Some(r) = &h.row {
                assert_eq!(r, &h.tokens);
            }
            assert!(seen.insert(h.seq));
        }
        for p in &book.prefixes {
            assert_eq!(kv.tokens(p.seq), p.tokens);
            assert!(seen.insert(p.seq));
        }
        for &f in &book.free {
            assert!(kv.tokens(f).is_empty(), "free sequence {f} holds tokens");
            assert!(seen.insert(f));
        }
        assert_eq!(seen.len(), book.sequences());
    }

    fn req<'a>(id: &'a str, history: &'a [u32], prompt_len: usize) -> Request<'a> {
        Request {
            id,
            history,
            prompt_len,
        }
    }

    #[test]
    fn a_generation_is_evaluated_once_and_continued() {
        let mut book = KvBook::new(4, 2, 1000);
        let mut kv = FakeKv::default();
        let prompt: Vec<u32> = (1..=10).collect();
        let (_, n) = step(&mut book, &mut kv, &[req("g", &prompt, 10)]);
        assert_eq!(n, 10);
        check(&book, &kv);
        // Each next step decodes only the sampled token.
        let mut h = prompt.clone();
        for t in [50, 51, 52] {
            h.push(t);
            let (plan, n) = step(&mut book, &mut kv, &[req("g", &h, 10)]);
            assert_eq!(n, 1);
            assert_eq!(plan.before, vec![]);
            check(&book, &kv);
        }
        // Forced tokens are decoded together.
        h.extend([60, 61, 62]);
        assert_eq!(step(&mut book, &mut kv, &[req("g", &h, 10)]).1, 3);
        // The same history again (a retried step) uses the held row.
        let (plan, n) = step(&mut book, &mut kv, &[req("g", &h, 10)]);
        assert_eq!(n, 0);
        assert!(matches!(
            plan.slots[0],
            Slot::Ready {
                logits: Logits::Held,
                ..
            }
        ));
        check(&book, &kv);
    }

    #[test]
    fn a_changed_history_keeps_only_the_common_prefix() {
        let mut book = KvBook::new(4, 0, 1000);
        let mut kv = FakeKv::default();
        let a: Vec<u32> = (1..=20).collect();
        step(&mut book, &mut kv, &[req("g", &a, 20)]);
        // A resync that diverges at position 12.
        let mut b = a[..12].to_vec();
        b.extend([99, 98, 97]);
        let (plan, n) = step(&mut book, &mut kv, &[req("g", &b, 12)]);
        assert_eq!(plan.before, vec![KvOp::Truncate { seq: 0, from: 12 }]);
        assert_eq!(n, 3);
        check(&book, &kv);
        // A shorter history (a restart from an earlier point): at least its last token
        // is decoded again, for its logits.
        let c = a[..5].to_vec();
        let (plan, n) = step(&mut book, &mut kv, &[req("g", &c, 5)]);
        assert_eq!(plan.before, vec![KvOp::Truncate { seq: 0, from: 4 }]);
        assert_eq!(n, 1);
        check(&book, &kv);
    }

    #[test]
    fn a_second_question_on_the_same_schema_pays_only_for_its_own_tokens() {
        let mut book = KvBook::new(4, 2, 1000);
        let mut kv = FakeKv::default();
        let schema: Vec<u32> = (100..400).collect();
        let mut q1 = schema.clone();
        q1.extend([1, 2, 3, 4]);
        let mut q2 = schema.clone();
        q2.extend([5, 6, 7]);
        assert_eq!(step(&mut book, &mut kv, &[req("a", &q1, q1.len())]).1, 304);
        assert_eq!(book.prefixes(), 1);
        let (plan, n) = step(&mut book, &mut kv, &[req("b", &q2, q2.len())]);
        assert_eq!(n, 3);
        assert!(plan.before.contains(&KvOp::Share {
            src: 1,
            dst: 2,
            len: 300
        }));
        check(&book, &kv);
        // The very same prompt again: only its last token (for the logits).
        assert_eq!(step(&mut book, &mut kv, &[req("c", &q1, q1.len())]).1, 1);
        check(&book, &kv);
        // Releasing frees the sequence; the kept prompts stay.
        assert_eq!(book.release("a"), Some(KvOp::Clear { seq: 0 }));
        kv.apply(&[KvOp::Clear { seq: 0 }]);
        assert_eq!(book.release("a"), None);
        check(&book, &kv);
        assert_eq!(book.generations(), 2);
    }

    #[test]
    fn the_prefix_cache_is_a_bounded_lru() {
        let mut book = KvBook::new(2, 2, 1000);
        let mut kv = FakeKv::default();
        let prompts: Vec<Vec<u32>> = (0..4u32).map(|k| vec![k + 1; 8]).collect();
        for (k, p) in prompts.iter().enumerate() {
            let id = format!("g{k}");
            step(&mut book, &mut kv, &[req(&id, p, 8)]);
            check(&book, &kv);
        }
        assert_eq!(book.prefixes(), 2);
        assert_eq!(book.prefix_tokens(), vec![&prompts[2][..], &prompts[3][..]]);
        // Two generations at most: the oldest idle ones were evicted.
        assert_eq!(book.generations(), 2);
        assert!(book.held_tokens("g0").is_none() && book.held_tokens("g3").is_some());
        // Using prompt 2 makes prompt 3 the least recently used.
        let mut again = prompts[2].clone();
        again.push(9);
        step(&mut book, &mut kv, &[req("x", &again, 9)]);
        let kept = book.prefix_tokens();
        assert!(kept.contains(&&again[..]) && kept.contains(&&prompts[2][..]));
        check(&book, &kv);
    }

    #[test]
    fn generations_of_one_step_share_their_common_prompt() {
        let mut book = KvBook::new(8, 2, 10_000);
        let mut kv = FakeKv::default();
        let schema: Vec<u32> = (1000..1200).collect();
        let asks: Vec<Vec<u32>> = (0..5u32)
            .map(|k| {
                let mut h = schema.clone();
                h.extend([k, k + 1, 7]);
                h
            })
            .collect();
        let ids: Vec<String> = (0..5).map(|k| format!("g{k}")).collect();
        let reqs: Vec<Request<'_>> = ids
            .iter()
            .zip(&asks)
            .map(|(id, h)| req(id, h, h.len()))
            .collect();
        let (plan, n) = step(&mut book, &mut kv, &reqs);
        // The schema once, then three tokens each.
        assert_eq!(n, 200 + 5 * 3);
        assert_eq!(plan.outputs().count(), 5);
        check(&book, &kv);
        // Identical histories share even their output row.
        let same = asks[0].clone();
        let (plan, n) = step(
            &mut book,
            &mut kv,
            &[req("s1", &same, same.len()), req("s2", &same, same.len())],
        );
        // Both start from the kept schema and share their three own tokens, down to the
        // output row.
        assert_eq!(n, 3);
        match (&plan.slots[0], &plan.slots[1]) {
            (Slot::Ready { logits: a, .. }, Slot::Ready { logits: b, .. }) => assert_eq!(a, b),
            other => panic!("not both ready: {other:?}"),
        }
        check(&book, &kv);
        assert_eq!(book.row("s1"), book.row("s2"));
    }

    #[test]
    fn too_many_generations_fail_only_the_extra_ones() {
        let mut book = KvBook::new(2, 0, 1000);
        let mut kv = FakeKv::default();
        let h = [1u32, 2, 3];
        let (plan, _) = step(
            &mut book,
            &mut kv,
            &[req("a", &h, 3), req("b", &h, 3), req("c", &h, 3)],
        );
        assert!(matches!(plan.slots[0], Slot::Ready { .. }));
        assert!(matches!(plan.slots[1], Slot::Ready { .. }));
        assert!(matches!(&plan.slots[2], Slot::Failed(m) if m.contains("--max-generations")));
        check(&book, &kv);
        // Empty and over-long histories are refused.
        let long = vec![1u32; 1001];
        let (plan, _) = step(&mut book, &mut kv, &[req("a", &[], 0), req("b", &long, 1)]);
        assert!(plan.slots.iter().all(|s| matches!(s, Slot::Failed(_))));
    }

    #[test]
    fn abort_and_eviction_leave_a_consistent_book() {
        let mut book: KvBook<Vec<u32>> = KvBook::new(3, 2, 1000);
        let mut kv = FakeKv::default();
        let a: Vec<u32> = (1..50).collect();
        step(&mut book, &mut kv, &[req("a", &a, 40)]);
        let b: Vec<u32> = (1..30).collect();
        // A failed decode: nothing was decoded, and the book forgets what "b" held.
        let plan = book.plan(&[req("b", &b, 29)]);
        kv.apply(&plan.before);
        let ops = book.abort(&[req("b", &b, 29)], &plan);
        kv.apply(&ops);
        check(&book, &kv);
        assert_eq!(book.held_tokens("b"), Some(&[][..]));
        // Evicting for space: the kept prompt first (older), then idle generations.
        let in_step: HashSet<&str> = ["b"].into_iter().collect();
        let mut freed = Vec::new();
        while let Some(op) = book.evict_for_space(&in_step) {
            kv.apply(std::slice::from_ref(&op));
            freed.push(op);
            check(&book, &kv);
        }
        assert_eq!(freed.len(), 2);
        assert_eq!(book.prefixes(), 0);
        assert!(book.held_tokens("a").is_none());
        // The next step recomputes "b" exactly.
        assert_eq!(step(&mut book, &mut kv, &[req("b", &b, 29)]).1, 29);
        check(&book, &kv);
    }

    /// Random steps, releases and evictions against the fake cache: the book's view
    /// always matches it, and every served generation's sequence holds its history.
    #[test]
    fn random_sessions_stay_consistent() {
        let mut rng = 0x1234_5678_9abc_def0u64;
        let mut next = move |n: u64| {
            rng = crate::backend::sample::mix(rng, 17);
            rng % n
        };
        let mut book: KvBook<Vec<u32>> = KvBook::new(4, 3, 400);
        let mut kv = FakeKv::default();
        let schemas: Vec<Vec<u32>> = (0..3u32)
            .map(|s| (0..40).map(|i| s * 100 + i).collect())
            .collect();
        let mut hist: BTreeMap<String, (Vec<u32>, usize)> = BTreeMap::new();
        for _ in 0..2000 {
            match next(10) {
                0 => {
                    let id = format!("g{}", next(8));
                    let mut h = schemas[next(3) as usize].clone();
                    let q = next(5) as u32;
                    h.extend([q, q + 1]);
                    let p = h.len();
                    hist.insert(id, (h, p));
                }
                1 => {
                    let id = format!("g{}", next(8));
                    hist.remove(&id);
                    if let Some(op) = book.release(&id) {
                        kv.apply(&[op]);
                    }
                }
                2 => {
                    // A resync to an earlier point.
                    if let Some((h, p)) = hist.values_mut().next() {
                        let keep = (*p).max(1) + next(4) as usize;
                        h.truncate(keep.min(h.len()));
                    }
                }
                _ => {
                    let ids: Vec<String> = hist.keys().filter(|_| next(3) > 0).cloned().collect();
                    for id in &ids {
                        if let Some((h, _)) = hist.get_mut(id) {
                            for _ in 0..next(3) {
                                h.push(next(500) as u32);
                            }
                        }
                    }
                    let reqs: Vec<Request<'_>> = ids
                        .iter()
                        .map(|id| {
                            let (h, p) = &hist[id];
                            req(id, h, *p)
                        })
                        .collect();
                    let (plan, _) = step(&mut book, &mut kv, &reqs);
                    for (r, s) in reqs.iter().zip(&plan.slots) {
                        if let Slot::Ready { seq, .. } = s {
                            assert_eq!(kv.tokens(*seq), r.history);
                            assert_eq!(book.row(r.id).map(Vec::as_slice), Some(r.history));
                        }
                    }
                }
            }
            check(&book, &kv);
        }
    }
}
