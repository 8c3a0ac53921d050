//! How llama.cpp's logits depend on the shape of the computation (not a check: run with
//! `--ignored --nocapture` to print the table). Each line compares the logits rows of
//! the same tokens at the same positions computed two ways.

use std::num::NonZeroU32;

use grid_endpoint::backend::llama::runtime;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::LlamaToken;

use crate::common::*;

fn ctx<'m>(m: &'m LlamaModel, fa: bool, seqs: u32) -> LlamaContext<'m> {
    let p = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(N_CTX))
        .with_n_batch(2048)
        .with_n_ubatch(512)
        .with_n_threads(1)
        .with_n_threads_batch(1)
        .with_n_seq_max(seqs)
        .with_kv_unified(true)
        .with_flash_attention_policy(if fa {
            llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_ENABLED
        } else {
            llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_DISABLED
        });
    m.new_context(runtime().unwrap(), p).unwrap()
}

/// Decodes `tokens` at positions `from..` of `seq` in chunks of `chunk`; the rows of
/// every token.
fn feed(
    c: &mut LlamaContext<'_>,
    seq: i32,
    from: usize,
    tokens: &[u32],
    chunk: usize,
) -> Vec<Vec<f32>> {
    let mut rows = Vec::new();
    for (k, part) in tokens.chunks(chunk).enumerate() {
        let mut b = LlamaBatch::new(part.len(), 1);
        for (i, &t) in part.iter().enumerate() {
            let pos = from + k * chunk + i;
            b.add(LlamaToken::new(t as i32), pos as i32, &[seq], true)
                .unwrap();
        }
        c.decode(&mut b).unwrap();
        for i in 0..part.len() {
            rows.push(c.get_logits_ith(i as i32).to_vec());
        }
    }
    rows
}

fn max_diff(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    a.iter()
        .zip(b)
        .flat_map(|(x, y)| x.iter().zip(y).map(|(p, q)| (p - q).abs()))
        .fold(0.0, f32::max)
}

#[test]
#[ignore = "prints a table; run with --ignored --nocapture"]
fn logits_by_computation_shape() {
    let Some(path) = model_path() else { return };
    let rt = runtime().unwrap();
    let m = LlamaModel::load_from_file(rt, &path, &LlamaModelParams::default()).unwrap();
    let b = backend(&path, |_| {});
    let rt2 = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let p = rt2.block_on(async {
        let e = endpoint(b).await;
        e.client
            .render_prompt(&chat(QUESTIONS[11]), &e.vocab)
            .await
            .unwrap()
    });
    let n = p.len();
    let tail: Vec<u32> = p[n - 20..].to_vec();
    let head = &p[..n - 20];
    for fa in [false, true] {
        // Reference: the whole prompt in one batch.
        let mut c = ctx(&m, fa, 4);
        let whole = feed(&mut c, 0, 0, &p, 4096);
        let whole_tail = &whole[n - 20..];
        // The head in one batch, the tail in another.
        let mut c = ctx(&m, fa, 4);
        feed(&mut c, 0, 0, head, 4096);
        let split = feed(&mut c, 0, n - 20, &tail, 4096);
        // The head, then the tail one token at a time.
        let mut c = ctx(&m, fa, 4);
        feed(&mut c, 0, 0, head, 4096);
        let single = feed(&mut c, 0, n - 20, &tail, 1);
        // The head computed as part of a longer batch (3 more tokens), cut back, then
        // the tail.
        let mut c = ctx(&m, fa, 4);
        let mut longer = head.to_vec();
        longer.extend_from_slice(&tail[..3]);
        feed(&mut c, 0, 0, &longer, 4096);
        c.clear_kv_cache_seq(Some(0), Some(head.len() as u32), None)
            .unwrap();
        let longer_rows = feed(&mut c, 0, n - 20, &tail, 4096);
        // Another sequence's cells first in the cache, then the same as `split`.
        let mut c = ctx(&m, fa, 4);
        feed(&mut c, 1, 0, &p[..n / 2], 4096);
        feed(&mut c, 0, 0, head, 4096);
        let crowded = feed(&mut c, 0, n - 20, &tail, 4096);
        println!(
            "flash attention {fa}: max |Δlogit| over the last 20 rows vs one batch: \
             split {:.6}, one at a time {:.6}, head from a longer batch {:.6}, other cells in the cache {:.6}",
            max_diff(&split, whole_tail),
            max_diff(&single, whole_tail),
            max_diff(&longer_rows, whole_tail),
            max_diff(&crowded, whole_tail),
        );
    }
}
