//! The backend's masked greedy output against an independent reference (the same
//! model's logits through llama-cpp-2 directly, the mask applied outside the endpoint),
//! on 20 prompts with non-trivial masks. Then the same generations on schedules that
//! differ from the reference's: one backend for all (prompt prefixes reused, a shared
//! cache), and all 20 in one batch per tick.
//!
//! llama.cpp's CPU logits depend on the shape of the computation (how many tokens a
//! decode call holds, where a sequence's cells lie in the cache; `numerics.rs` prints by
//! how much), so only identical schedules can be compared for identity: a fresh backend
//! decodes a prompt in one batch and then one token per step, as the reference does.
//! Other schedules must agree except at near ties ([`NEAR_TIE`]); the test prints how
//! often they differ.

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn masked_greedy_equals_an_independent_reference() {
    let Some(path) = model_path() else { return };
    let r = Reference::load(&path);
    let shared = endpoint(backend(&path, |_| {})).await;
    assert!(
        shared.vocab.len() <= r.n_vocab(),
        "the served vocabulary is never longer than the logits row"
    );
    let prompts = prompts(&shared).await;

    // Each prompt alone on a fresh backend: the reference's schedule.
    let mut fresh = Vec::new();
    let mut overruled = 0;
    for (i, p) in prompts.iter().enumerate() {
        let e = endpoint(backend(&path, |_| {})).await;
        let mut g = vec![Gen::new(format!("alone-{i}"), p.clone(), Regime::of(i))];
        run(&e.client, &e.vocab, &mut g).await;
        let got = g[0].generated().to_vec();
        let (want, o) = r.greedy(&e.vocab, p, Regime::of(i));
        assert_eq!(
            got,
            want,
            "prompt {i}: {:?}",
            compare(&r, &e.vocab, p, &got, &want)
        );
        // The masks are not trivial: the steps where the mask overruled the model.
        overruled += o;
        fresh.push(got);
    }
    println!("20 prompts equal the reference; the mask overruled the model at {overruled} steps");
    assert!(overruled >= 20, "the masks should overrule the model often");

    // One backend for all, one after the other: prompt prefixes reused, other
    // generations' cells in the cache.
    let mut reused = Vec::new();
    for (i, p) in prompts.iter().enumerate() {
        let mut g = vec![Gen::new(format!("seq-{i}"), p.clone(), Regime::of(i))];
        run(&shared.client, &shared.vocab, &mut g).await;
        reused.push(g[0].generated().to_vec());
    }
    // All 20 in one batch per tick.
    let mut gens: Vec<Gen> = prompts
        .iter()
        .enumerate()
        .map(|(i, p)| Gen::new(format!("batched-{i}"), p.clone(), Regime::of(i)))
        .collect();
    run(&shared.client, &shared.vocab, &mut gens).await;
    for (name, outs) in [
        ("prefix reuse", reused),
        (
            "one batch",
            gens.iter().map(|g| g.generated().to_vec()).collect(),
        ),
    ] {
        let mut ties = Vec::new();
        for (i, got) in outs.iter().enumerate() {
            match compare(&r, &shared.vocab, &prompts[i], got, &fresh[i]) {
                Ok(None) => {}
                Ok(Some(gap)) => ties.push(format!("prompt {i} at a gap of {gap:.4}")),
                Err(e) => panic!("{name}, prompt {i}: {e}"),
            }
        }
        println!(
            "{name}: {}/20 identical to the reference's schedule; near ties: {ties:?}",
            20 - ties.len()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_overlap_the_tokens_are_the_same() {
    let Some(path) = model_path() else { return };
    let prompts = prompts(&endpoint(backend(&path, |_| {})).await).await;
    let mut s_on = None;
    let mut s_off = None;
    for (i, p) in prompts.iter().enumerate().take(4) {
        // Fresh backends: the same schedule but for when the sampled token is decoded.
        let on = endpoint(backend(&path, |_| {})).await;
        let off = endpoint(backend(&path, |c| c.overlap = false)).await;
        let mut a = vec![Gen::new("g", p.clone(), Regime::of(i))];
        let mut b = vec![Gen::new("g", p.clone(), Regime::of(i))];
        run(&on.client, &on.vocab, &mut a).await;
        run(&off.client, &off.vocab, &mut b).await;
        assert_eq!(a[0].generated(), b[0].generated(), "prompt {i}");
        s_on = Some(on.backend.stats().await.unwrap());
        s_off = Some(off.backend.stats().await.unwrap());
    }
    let (s_on, s_off) = (s_on.unwrap(), s_off.unwrap());
    // With overlap, the steps after the first found their logits ready.
    assert!(s_on.ready_hits > 0 && s_on.speculated > 0, "{s_on:?}");
    assert_eq!((s_off.ready_hits, s_off.speculated), (0, 0), "{s_off:?}");
}
