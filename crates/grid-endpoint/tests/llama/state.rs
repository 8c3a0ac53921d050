//! The backend's state is an optimisation only: a resync that finds the state intact
//! gives exactly the tokens of an uninterrupted run; restarts, evictions and prompt
//! reuse recompute on another schedule and agree with an uninterrupted run except at
//! near ties (see `exact.rs`); releases free the sequences.

use crate::common::*;

/// Runs prompt `i` alone to the end on a fresh backend.
async fn alone(path: &std::path::PathBuf, p: &[u32], i: usize) -> Vec<u32> {
    let e = endpoint(backend(path, |_| {})).await;
    let mut g = vec![Gen::new("g", p.to_vec(), Regime::of(i))];
    run(&e.client, &e.vocab, &mut g).await;
    g[0].generated().to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_client_resyncs_to_the_same_tokens() {
    let Some(path) = model_path() else { return };
    let r = Reference::load(&path);
    let prompts = prompts(&endpoint(backend(&path, |_| {})).await).await;
    for i in [0usize, 1] {
        let want = alone(&path, &prompts[i], i).await;
        let e = endpoint(backend(&path, |_| {})).await;
        // Ten steps with one client, the rest with a new one: it restarts the generation
        // from position 0 with its whole history.
        let mut g = Gen::new(format!("r{i}"), prompts[i].clone(), Regime::of(i));
        for _ in 0..10 {
            if !g.done {
                tick(&e.client, &e.vocab, &mut [&mut g]).await;
            }
        }
        let fresh = client_of(&e.server, &e.vocab);
        while !g.done {
            tick(&fresh, &e.vocab, &mut [&mut g]).await;
        }
        assert_eq!(g.generated(), &want[..], "prompt {i}");
        // A restart from an earlier point of the same generation (a shorter history):
        // the backend drops what it holds beyond it and recomputes from there.
        let cut = g.prompt_len + 3;
        let mut again = Gen::new(format!("r{i}"), g.history[..cut].to_vec(), Regime::of(i));
        again.prompt_len = g.prompt_len;
        let fresh = client_of(&e.server, &e.vocab);
        while !again.done {
            tick(&fresh, &e.vocab, &mut [&mut again]).await;
        }
        compare(&r, &e.vocab, &prompts[i], again.generated(), &want)
            .unwrap_or_else(|m| panic!("prompt {i} restarted at 3: {m}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evicted_generations_are_recomputed_exactly() {
    let Some(path) = model_path() else { return };
    let r = Reference::load(&path);
    // Two sequences for four generations, no kept prompts: every tick evicts.
    let e = endpoint(backend(&path, |c| {
        c.max_generations = 2;
        c.prefix_cache = 0;
    }))
    .await;
    let prompts = prompts(&e).await;
    let picks = [2usize, 3, 4, 5];
    let mut gens: Vec<Gen> = picks
        .iter()
        .map(|&i| Gen::new(format!("e{i}"), prompts[i].clone(), Regime::of(i)))
        .collect();
    // One generation per tick, round robin.
    while gens.iter().any(|g| !g.done) {
        for g in gens.iter_mut().filter(|g| !g.done) {
            tick(&e.client, &e.vocab, &mut [g]).await;
        }
    }
    for (g, &i) in gens.iter().zip(&picks) {
        let want = alone(&path, &prompts[i], i).await;
        let tie = compare(&r, &e.vocab, &prompts[i], g.generated(), &want)
            .unwrap_or_else(|m| panic!("prompt {i}: {m}"));
        println!("evicted and recomputed, prompt {i}: near tie {tie:?}");
    }
    let s = e.backend.stats().await.unwrap();
    assert!(s.generations <= 2, "{s:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_question_on_the_schema_pays_only_for_its_own_tokens() {
    let Some(path) = model_path() else { return };
    let r = Reference::load(&path);
    let e = endpoint(backend(&path, |_| {})).await;
    let prompts = prompts(&e).await;
    let (p1, p2) = (&prompts[6], &prompts[7]);
    let mut a = vec![Gen::new("q1", p1.clone(), Regime::of(6))];
    run(&e.client, &e.vocab, &mut a).await;
    let before = e.backend.stats().await.unwrap();
    assert_eq!(before.prefixes, 1);
    // The first step of the second question decodes only what follows the common part
    // of the two prompts.
    let mut b = Gen::new("q2", p2.clone(), Regime::of(7));
    tick(&e.client, &e.vocab, &mut [&mut b]).await;
    let after = e.backend.stats().await.unwrap();
    let common = p1.iter().zip(p2).take_while(|(x, y)| x == y).count();
    assert!(
        common > 50,
        "the prompts share the system message and schema"
    );
    // (decoded also counts the first step's overlap token.)
    let own = after.decoded - before.decoded - after.speculated + before.speculated;
    assert_eq!(own as usize, p2.len() - common);
    while !b.done {
        tick(&e.client, &e.vocab, &mut [&mut b]).await;
    }
    let tie = compare(&r, &e.vocab, p2, b.generated(), &alone(&path, p2, 7).await)
        .unwrap_or_else(|m| panic!("{m}"));
    println!("second question with the schema reused: near tie {tie:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releases_free_the_sequences() {
    let Some(path) = model_path() else { return };
    let e = endpoint(backend(&path, |_| {})).await;
    let prompts = prompts(&e).await;
    let mut gens: Vec<Gen> = (0..3)
        .map(|i| Gen::new(format!("x{i}"), prompts[i].clone(), Regime::of(i)))
        .collect();
    {
        let mut refs: Vec<&mut Gen> = gens.iter_mut().collect();
        tick(&e.client, &e.vocab, &mut refs).await;
    }
    assert_eq!(e.backend.stats().await.unwrap().generations, 3);
    // Releases ride on the next request.
    e.client.release("x0");
    e.client.release("x1");
    tick(&e.client, &e.vocab, &mut [&mut gens[2]]).await;
    assert_eq!(e.backend.stats().await.unwrap().generations, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeded_sampling_replays_and_stays_in_the_mask() {
    use grid_endpoint::client::{Mask, StepInput};
    use grid_endpoint::Sampling;
    let Some(path) = model_path() else { return };
    let e = endpoint(backend(&path, |_| {})).await;
    let prompt = e
        .client
        .render_prompt(&chat(QUESTIONS[0]), &e.vocab)
        .await
        .unwrap();
    let draw = |id: &'static str| {
        let e = &e;
        let prompt = prompt.clone();
        async move {
            let mut h = prompt.clone();
            for k in 0..12 {
                let (set, _) = mask(&e.vocab, Regime::Sqlish, k);
                let m = Mask::content_addressed(set);
                let input = StepInput {
                    id,
                    history: &h,
                    prompt_len: prompt.len(),
                    mask: &m,
                    cd_pass: &[],
                    eos_allowed: false,
                    sampling: Sampling {
                        temperature: 0.9,
                        top_k: Some(20),
                        seed: 7,
                    },
                };
                let s = e.client.step(&[input]).await.unwrap().remove(0).unwrap();
                assert!(m.set.contains(s.token));
                h.push(s.token);
            }
            h
        }
    };
    assert_eq!(draw("s1").await, draw("s2").await);
}
