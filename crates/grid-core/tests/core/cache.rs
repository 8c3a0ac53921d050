//! The mask cache: cache on ≡ cache off, bit for bit (every `Mask` field but `visited`),
//! over randomised replays that include cross-role hits, namespace rollover and racing
//! publishes; the identifier rule on lookups; miss walks in parallel and through the tail
//! memo equal serial plain ones.

use crate::common;

use std::collections::HashSet;
use std::sync::{Arc, Barrier};

use common::fixtures::{hr_schema, language, shop_schema};
use common::{gold, spider_or_skip, Langs, Rng};
use grid_core::cache::key::scope_of;
use grid_core::cache::walk::{self, TailMemo, WalkStart};
use grid_core::cache::{CacheError, CacheKey, GenericKey, MaskCache, Position};
use grid_core::mask::{Mask, Masker};
use grid_core::schema::Schema;
use grid_core::trie::TokenTrie;
use grid_core::{Config, Dialect, Language, Lexicon, Policy, Session};
use grid_vocab::Vocabulary;

// ---------------------------------------------------------------------------------------
// Fixtures

/// Two roles (every verb, SELECT only) over one lexicon.
fn two_roles(dialect: Arc<Dialect>, schema: &Schema) -> (Arc<Language>, Arc<Language>) {
    let reserved = |w: &str| dialect.is_reserved(w);
    let lx = Lexicon::from_schema(schema, &Policy::default(), &reserved).expect("lexicon");
    let all = Language::build(dialect.clone(), &Policy::default(), &lx).expect("language");
    let select = Language::build(dialect, &Policy::select_only(), &lx).expect("language");
    (Arc::new(all), Arc::new(select))
}

#[rustfmt::skip]
const FRAGMENTS: &[&str] = &[
    "SELECT", " SELECT", "select", "sel", "ect", " FROM", " from", " WHERE", " name", "name",
    " *", "*", " emplo", "emplo", "loyees", "yees", "y", "yees;", "_public", " employees",
    "employees", " orders", "orders", " customers", "cust", "omers", "'),", "),", "')", "1;",
    ";", " 1", "1", " =", " = ", " (", "(", ")", "(*)", " count", "count(", "'it", "''", "s'",
    "' ", "'a", "\"", " \"", "\"employees\"", "/*", "*/", " --", "\n", "1.5", "e3", "1e", "e+",
    " AS", " T1", ".name", "T1.", " UNION", " INSERT", " INTO", " VALUES", " (1)", " x", "ex",
    "id", " id", " total", " 'x'", "::", "text", " <", " <=", "||", " AND", " OR", " IN",
    " NOT", " NULL", " IS", " JOIN", " ON", " GROUP", " BY", " ORDER", " LIMIT", " 2", "0",
    ".5", "e", "E", " AS uu", " email", " customer", ",", ", ", " ,",
];

/// EOS, a special, every byte, [`FRAGMENTS`] and `more`, then two more ids (aliases) for
/// each spelling of `aliased`.
fn vocab_with(more: &[&str], aliased: &[&str]) -> Vocabulary {
    let mut fragments: Vec<&str> = FRAGMENTS.iter().chain(more).copied().collect();
    fragments.extend(aliased.iter().flat_map(|&d| [d, d]));
    common::masker::vocab_with(&fragments)
}

fn synthetic_vocab() -> Vocabulary {
    vocab_with(&[], &["yees", " FROM", "'),", "("])
}

const STATEMENTS: &[&str] = &[
    "SELECT name FROM employees",
    "SELECT T1.name FROM employees AS T1 WHERE T1.id = 1",
    "SELECT count(*) FROM orders WHERE total > 1.5e3",
    "SELECT name FROM customers WHERE email = 'it''s'",
    "SELECT /* c */ name -- x\nFROM employees;",
    "SELECT id FROM orders UNION SELECT id FROM employees_public",
    "INSERT INTO orders VALUES (1, 2, 3)",
    "SELECT (1 + (2 * 3)) :: text, 'a' || 'b' FROM orders",
];

/// Everything but `visited` (the walk's cost, which a hit does not pay).
fn assert_same(on: &Mask, off: &Mask, what: &str) {
    let mut on = on.clone();
    on.visited = off.visited;
    if on != *off {
        let (only_on, only_off) = on.diff(off);
        panic!(
            "{what}: cache on and off differ: ids only on {only_on:?}, only off {only_off:?}, \
             eos {} vs {}, ci {} vs {}, cd {} vs {}, classes {} vs {}, forced {:?} vs {:?}",
            on.eos,
            off.eos,
            on.ci,
            off.ci,
            on.cd,
            off.cd,
            on.cd_classes.len(),
            off.cd_classes.len(),
            on.forced,
            off.forced
        );
    }
}

/// Both maskers at `cfg`, asserted equal; the uncached mask.
fn both(on: &mut Masker, off: &mut Masker, s: &mut Session<'_>, cfg: &Config, what: &str) -> Mask {
    thread_local! {
        // One buffer for every cached step of a test: `mask_into` must leave nothing of the
        // mask before (classes, forced run, counts) in the next.
        static REUSED: std::cell::RefCell<Mask> = std::cell::RefCell::new(Mask::empty(0, 0));
    }
    let b = off.mask(s, cfg);
    REUSED.with(|m| {
        let mut m = m.borrow_mut();
        on.mask_into(s, cfg, &mut m);
        assert_same(&m, &b, what);
    });
    b
}

/// Replays every statement byte by byte, then random walks from its prefixes through
/// allowed tokens; returns the steps compared.
fn replay(
    lang: &Language,
    on: &mut Masker,
    off: &mut Masker,
    vocab: &Vocabulary,
    rng: &mut Rng,
) -> usize {
    replay_over(lang, on, off, vocab, rng, STATEMENTS)
}

/// [`replay`] over `statements`.
fn replay_over(
    lang: &Language,
    on: &mut Masker,
    off: &mut Masker,
    vocab: &Vocabulary,
    rng: &mut Rng,
    statements: &[&str],
) -> usize {
    let mut s = Session::new(lang);
    let mut steps = 0;
    for text in statements {
        let mut cfg = s.start();
        let mut prefixes = vec![cfg.clone()];
        for (i, &b) in text.as_bytes().iter().enumerate() {
            both(on, off, &mut s, &cfg, &format!("{:?}", &text[..i]));
            steps += 1;
            if s.feed(&mut cfg, &[b]).is_err() {
                // The role or schema refuses the statement here: the walks start before.
                break;
            }
            prefixes.push(cfg.clone());
        }
        for _ in 0..4 {
            let mut cfg = prefixes[rng.below(prefixes.len())].clone();
            for k in 0..24 {
                let m = both(on, off, &mut s, &cfg, &format!("{text:?} walk step {k}"));
                steps += 1;
                let ids: Vec<u32> = m.ids().filter(|&id| !vocab.is_special(id)).collect();
                if ids.is_empty() {
                    break;
                }
                let id = ids[rng.below(ids.len())];
                s.feed(&mut cfg, vocab.token_bytes(id))
                    .expect("an allowed token is accepted");
            }
        }
    }
    steps
}

fn fresh(trie: &Arc<TokenTrie>, cache: &Arc<MaskCache>) -> (Masker, Masker) {
    (
        Masker::with_cache(trie.clone(), cache.clone()),
        Masker::new(trie.clone()),
    )
}

// ---------------------------------------------------------------------------------------
// Cache on ≡ cache off

#[test]
fn cache_on_equals_cache_off_over_random_replays() {
    let vocab = synthetic_vocab();
    let trie = Arc::new(TokenTrie::build(&vocab).expect("trie"));
    let cache = Arc::new(MaskCache::new(8));
    let lang = language(&common::dialect(), &hr_schema(), &Policy::default());
    let (mut on, mut off) = fresh(&trie, &cache);
    let mut rng = Rng(11);
    let steps = replay(&lang, &mut on, &mut off, &vocab, &mut rng);
    assert!(steps > 500, "only {steps} steps");
    // A second pass over the same configurations is all hits, and still equal.
    let first = on.cache_stats().expect("cached");
    assert!(first.hits > 0 && first.misses > 0, "{first:?}");
    let mut rng = Rng(11);
    replay(&lang, &mut on, &mut off, &vocab, &mut rng);
    let second = on.cache_stats().expect("cached");
    assert_eq!(second.misses, first.misses, "a repeated replay missed");
}

/// One masker serves the sessions of many generations, stepped in turn (as the decoder
/// does): its memo of cut-back verdicts reads stack ids, which are a session's own, so it
/// is kept per session. Two sessions of two roles, interleaved step by step over random
/// walks, each equal to cache off (a fresh masker per step shares no memo at all).
#[test]
fn interleaved_sessions_on_one_masker_equal_cache_off() {
    let vocab = synthetic_vocab();
    let trie = Arc::new(TokenTrie::build(&vocab).expect("trie"));
    let cache = Arc::new(MaskCache::new(8));
    let (all, select) = two_roles(common::dialect(), &hr_schema());
    let mut on = Masker::with_cache(trie.clone(), cache);
    let mut sessions = [Session::new(&all), Session::new(&select)];
    let mut cfgs = [sessions[0].start(), sessions[1].start()];
    let mut rng = Rng(5);
    for k in 0..400 {
        let i = k % 2;
        let mut off = Masker::new(trie.clone());
        let what = format!("session {i}, step {k}");
        let m = both(&mut on, &mut off, &mut sessions[i], &cfgs[i], &what);
        let ids: Vec<u32> = m.ids().filter(|&id| !vocab.is_special(id)).collect();
        if ids.is_empty() || rng.below(30) == 0 {
            cfgs[i] = sessions[i].start();
            continue;
        }
        let id = ids[rng.below(ids.len())];
        sessions[i]
            .feed(&mut cfgs[i], vocab.token_bytes(id))
            .expect("an allowed token is accepted");
    }
}

/// Two roles over one schema share entries: a role's first visit to a key can be a hit on
/// an entry the other role published. Both stay equal to cache off.
#[test]
fn cross_role_hits_equal_cache_off() {
    let vocab = synthetic_vocab();
    let trie = Arc::new(TokenTrie::build(&vocab).expect("trie"));
    let cache = Arc::new(MaskCache::new(8));
    let (all, select) = two_roles(common::dialect(), &hr_schema());
    let (mut on, mut off) = fresh(&trie, &cache);
    replay(&all, &mut on, &mut off, &vocab, &mut Rng(3));
    let scope = scope_of(&select, trie.fingerprint());
    assert_eq!(
        scope,
        scope_of(&all, trie.fingerprint()),
        "one scope per schema"
    );
    let ns = cache.namespace(scope);
    let (mut on2, mut off2) = fresh(&trie, &cache);
    let mut s = Session::new(&select);
    let mut seen = HashSet::new();
    let mut cross = 0;
    for text in STATEMENTS.iter().filter(|t| t.starts_with("SELECT")) {
        let mut cfg = s.start();
        for (i, &b) in text.as_bytes().iter().enumerate() {
            let a = s.allowed(&cfg);
            let key = CacheKey::of(&select, scope, &cfg.scan, a);
            let at = Position::of(&select, &a);
            if seen.insert(key.clone()) && ns.get(&key, at).expect("kind").is_some() {
                cross += 1;
            }
            both(
                &mut on2,
                &mut off2,
                &mut s,
                &cfg,
                &format!("select-only {:?}", &text[..i]),
            );
            if s.feed(&mut cfg, &[b]).is_err() {
                break;
            }
        }
    }
    assert!(cross >= 20, "only {cross} cross-role hits");
    replay(&select, &mut on2, &mut off2, &vocab, &mut Rng(4));
}

/// With room for one namespace, alternating schemas roll it over at every switch; masks
/// stay equal to cache off and no retired namespace answers.
#[test]
fn namespace_rollover_equals_cache_off() {
    let vocab = synthetic_vocab();
    let trie = Arc::new(TokenTrie::build(&vocab).expect("trie"));
    let cache = Arc::new(MaskCache::new(1));
    let d = common::dialect();
    let hr = language(&d, &hr_schema(), &Policy::default());
    let shop = language(&d, &shop_schema(), &Policy::default());
    let (mut on, mut off) = fresh(&trie, &cache);
    let mut rng = Rng(5);
    let mut generations = Vec::new();
    for round in 0..4 {
        let lang = if round % 2 == 0 { &hr } else { &shop };
        replay(lang, &mut on, &mut off, &vocab, &mut rng);
        let ns = cache.namespace(scope_of(lang, trie.fingerprint()));
        assert!(!ns.is_retired() && !ns.is_empty());
        generations.push(ns.generation);
    }
    assert_eq!(generations, vec![1, 2, 3, 4], "every switch rolls over");
}

/// A memory budget far below what one replay publishes: namespaces are retired as they
/// outgrow it, the live ones never hold more than the budget after a step, and the masks
/// stay equal to cache off across the rollovers.
#[test]
fn a_memory_budget_rolls_namespaces_over_and_masks_stay_exact() {
    let vocab = synthetic_vocab();
    let trie = Arc::new(TokenTrie::build(&vocab).expect("trie"));
    let lang = language(&common::dialect(), &hr_schema(), &Policy::default());
    // Unbounded first, to know what a replay holds.
    let unbounded = Arc::new(MaskCache::new(4));
    let (mut on, mut off) = fresh(&trie, &unbounded);
    replay(&lang, &mut on, &mut off, &vocab, &mut Rng(3));
    let whole = unbounded.bytes();
    assert!(whole > 0 && unbounded.retired_over_budget() == 0);

    let cache = Arc::new(MaskCache::new(4));
    let budget = whole / 8;
    cache.set_budget(budget);
    let (mut on, mut off) = fresh(&trie, &cache);
    let mut s = Session::new(&lang);
    let mut steps = 0;
    for text in STATEMENTS {
        let mut cfg = s.start();
        for (i, &b) in text.as_bytes().iter().enumerate() {
            both(
                &mut on,
                &mut off,
                &mut s,
                &cfg,
                &format!("{:?}", &text[..i]),
            );
            assert!(cache.bytes() <= budget, "{} bytes held", cache.bytes());
            steps += 1;
            if s.feed(&mut cfg, &[b]).is_err() {
                break;
            }
        }
    }
    replay(&lang, &mut on, &mut off, &vocab, &mut Rng(3));
    assert!(steps > 100);
    assert!(
        cache.retired_over_budget() > 2,
        "{}",
        cache.retired_over_budget()
    );
    assert!(cache.bytes() <= budget);
}

// ---------------------------------------------------------------------------------------
// Publishing and the identifier rule

/// The configuration after `text`, its key and its position.
fn keyed(s: &mut Session<'_>, trie: &TokenTrie, text: &str) -> (Config, CacheKey, Position) {
    let lang = s.lang;
    let mut c = s.start();
    s.feed(&mut c, text.as_bytes()).expect("prefix");
    let a = s.allowed(&c);
    let key = CacheKey::of(lang, scope_of(lang, trie.fingerprint()), &c.scan, a);
    (c, key, Position::of(lang, &a))
}

#[test]
fn racing_publishes_of_one_payload_agree_and_a_second_payload_trips() {
    let vocab = synthetic_vocab();
    let trie = Arc::new(TokenTrie::build(&vocab).expect("trie"));
    let lang = language(&common::dialect(), &hr_schema(), &Policy::default());
    let cache = MaskCache::new(2);
    let ns = cache.namespace(scope_of(&lang, trie.fingerprint()));
    let mut s = Session::new(&lang);
    let (cfg, key, _) = keyed(&mut s, &trie, "SELECT name FROM emplo");
    let allowed = s.allowed(&cfg);
    let start = WalkStart {
        lang: &lang,
        scan: &cfg.scan,
        offset: cfg.offset,
        allowed,
    };
    let barrier = Barrier::new(6);
    let ids: Vec<[u8; 16]> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..6)
            .map(|i| {
                let (ns, key, barrier, trie) = (&ns, &key, &barrier, &trie);
                sc.spawn(move || {
                    let (entry, _) = walk::build(trie, key, start, i % 2 == 0, None);
                    barrier.wait();
                    ns.publish(key.clone(), entry).expect("same payload").id()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    assert!(ids.windows(2).all(|w| w[0] == w[1]), "{ids:?}");
    assert_eq!(ns.len(), 1);
    // A different payload under the same key: the entry of another remainder.
    let (other_cfg, other_key, _) = keyed(&mut s, &trie, "SELECT name FROM ");
    let other_start = WalkStart {
        lang: &lang,
        scan: &other_cfg.scan,
        offset: other_cfg.offset,
        allowed: s.allowed(&other_cfg),
    };
    let (wrong, _) = walk::build(&trie, &other_key, other_start, false, None);
    let (right, _) = walk::build(&trie, &key, start, false, None);
    assert_ne!(wrong.ci_bits, right.ci_bits, "the payloads differ");
    let forged = grid_core::cache::Entry::new(
        &key,
        wrong.ci_bits.clone(),
        wrong.ci_count,
        wrong.ci_first,
        wrong.classes.clone(),
    );
    match ns.publish(key.clone(), forged) {
        Err(CacheError::Conflict { .. }) => {}
        other => panic!("a second payload was accepted: {other:?}"),
    }
}

#[test]
fn generic_lookup_at_an_identifier_position_is_an_error() {
    let vocab = synthetic_vocab();
    let trie = Arc::new(TokenTrie::build(&vocab).expect("trie"));
    let lang = language(&common::dialect(), &hr_schema(), &Policy::default());
    let cache = MaskCache::new(1);
    let ns = cache.namespace(scope_of(&lang, trie.fingerprint()));
    let mut s = Session::new(&lang);
    let (_, key, at) = keyed(&mut s, &trie, "SELECT name FROM emp");
    assert_eq!(at, Position::Ident, "a table name is being spelled");
    let CacheKey::Ident(ident) = &key else {
        panic!("an identifier position got a generic key");
    };
    // Injected: the same body looked up as a generic key.
    let injected = CacheKey::Generic(GenericKey(ident.0.clone()));
    assert_eq!(ns.get(&injected, at), Err(CacheError::GenericAtIdentifier));
    assert_eq!(ns.get(&key, at), Ok(None), "the right kind is fine");
    // Control: a generic position takes a generic key, and refuses an identifier one.
    let (_, gkey, gat) = keyed(&mut s, &trie, "SELECT count(*)");
    assert_eq!(gat, Position::Generic);
    assert!(matches!(gkey, CacheKey::Generic(_)));
    assert_eq!(ns.get(&gkey, gat), Ok(None));
    assert_eq!(ns.get(&key, gat), Err(CacheError::IdentAtGeneric));
}

#[test]
fn miss_walks_agree_serial_parallel_and_through_the_tail_memo() {
    let vocab = synthetic_vocab();
    let trie = Arc::new(TokenTrie::build(&vocab).expect("trie"));
    let lang = language(&common::dialect(), &hr_schema(), &Policy::default());
    // Every tail goes through the memo, and one memo serves every key: later keys reuse
    // tails that earlier keys' walks kept.
    let memo = TailMemo::with_min_nodes(1);
    let compared = miss_walks_agree(&lang, &trie, STATEMENTS, &memo);
    assert!(compared > 200, "{compared}");
    assert!(
        memo.len() > 10 && memo.hits() > 100,
        "{} tails, {} hits",
        memo.len(),
        memo.hits()
    );
}

/// At every prefix of `statements`: the miss walk's entry serial, parallel and through
/// `memo` (both ways) are equal. Returns the keys compared.
fn miss_walks_agree(
    lang: &Language,
    trie: &TokenTrie,
    statements: &[&str],
    memo: &TailMemo,
) -> usize {
    let mut s = Session::new(lang);
    let mut compared = 0;
    for text in statements {
        let mut cfg = s.start();
        for &b in text.as_bytes() {
            if s.feed(&mut cfg, &[b]).is_err() {
                break;
            }
            let allowed = s.allowed(&cfg);
            let key = CacheKey::of(lang, scope_of(lang, trie.fingerprint()), &cfg.scan, allowed);
            let start = WalkStart {
                lang,
                scan: &cfg.scan,
                offset: cfg.offset,
                allowed,
            };
            let at = format!("{text:?} at {:?}", cfg.scan.rem);
            let serial = walk::build(trie, &key, start, false, None);
            let parallel = walk::build(trie, &key, start, true, None);
            assert_eq!(parallel, serial, "parallel, {at}");
            let (memo_serial, _) = walk::build(trie, &key, start, false, Some(memo));
            let (memo_parallel, _) = walk::build(trie, &key, start, true, Some(memo));
            assert_eq!(memo_serial, serial.0, "through the memo, {at}");
            assert_eq!(
                memo_parallel, serial.0,
                "in parallel through the memo, {at}"
            );
            compared += 1;
        }
    }
    compared
}

// ---------------------------------------------------------------------------------------
// Relations off the search path, written `schema.table`

/// The synthetic vocabulary plus fragments that spell qualified names, some after a lexeme
/// they end (`,hr.`: an exact class, whose verdict the cache cannot hold).
fn qualified_vocab() -> Vocabulary {
    const MORE: &[&str] = &[
        "hr",
        "hr.",
        " hr.",
        ",hr.",
        "(hr.",
        ", hr.",
        ".employees",
        "hr.employees",
        "\"hr\".",
        ".\"employees\"",
        "\"Sales\".\"Leads\"",
        " \"Sales\"",
        ".\"Leads\"",
        "HR.",
        ".sal",
        " hr.orders",
        "s hr.",
        "e,hr.e",
        "es,hr.emp",
    ];
    vocab_with(MORE, &[])
}

const QUALIFIED_STATEMENTS: &[&str] = &[
    "SELECT name FROM hr.employees WHERE id = 1",
    "SELECT hr.employees FROM orders AS hr",
    "SELECT hr.id FROM employees hr,hr.employees",
    "SELECT id FROM \"Sales\".\"Leads\" UNION SELECT id FROM \"hr\".employees",
    "SELECT employees.name FROM employees,hr.employees x",
    "UPDATE hr.salaries SET amount = 1",
    "DELETE FROM hr.employees WHERE id IN (SELECT id FROM hr.salaries)",
];

#[test]
fn qualified_names_cache_on_equals_cache_off() {
    let vocab = qualified_vocab();
    let trie = Arc::new(TokenTrie::build(&vocab).expect("trie"));
    let cache = Arc::new(MaskCache::new(8));
    let lang = language(
        &common::dialect(),
        &common::qualified_schema(),
        &Policy::default(),
    );
    let (mut on, mut off) = fresh(&trie, &cache);
    let mut rng = Rng(17);
    let steps = replay_over(
        &lang,
        &mut on,
        &mut off,
        &vocab,
        &mut rng,
        QUALIFIED_STATEMENTS,
    );
    assert!(steps > 300, "only {steps} steps");
    // Exact classes were served through the cache: `,hr.` after an alias in FROM.
    let mut s = Session::new(&lang);
    let mut cfg = s.start();
    s.feed(&mut cfg, b"SELECT hr.id FROM employees hr")
        .expect("prefix");
    let m = both(&mut on, &mut off, &mut s, &cfg, "after an alias");
    assert!(
        m.cd_classes
            .iter()
            .any(|c| matches!(*c.key, grid_core::cd_class::CdKey::Exact { .. })),
        "no exact class"
    );
    let first = on.cache_stats().expect("cached");
    let mut rng = Rng(17);
    replay_over(
        &lang,
        &mut on,
        &mut off,
        &vocab,
        &mut rng,
        QUALIFIED_STATEMENTS,
    );
    let second = on.cache_stats().expect("cached");
    assert_eq!(second.misses, first.misses, "a repeated replay missed");

    let memo = TailMemo::with_min_nodes(1);
    let compared = miss_walks_agree(&lang, &trie, QUALIFIED_STATEMENTS, &memo);
    assert!(
        compared > 200 && memo.hits() > 50,
        "{compared}, {}",
        memo.hits()
    );
}

// ---------------------------------------------------------------------------------------
// Real data

#[test]
fn spider_gold_cache_on_equals_cache_off_with_gpt2() {
    let Some(dir) = spider_or_skip("spider_gold_cache_on_equals_cache_off_with_gpt2") else {
        return;
    };
    let tok = dir.join("tokenizers/gpt2");
    if !tok.exists() {
        eprintln!(
            "SKIP spider_gold_cache_on_equals_cache_off_with_gpt2: no {}",
            tok.display()
        );
        return;
    }
    let vocab = Vocabulary::load(&tok).expect("gpt2");
    let trie = TokenTrie::shared(&vocab).expect("trie");
    let cache = Arc::new(MaskCache::new(4));
    let (mut on, mut off) = fresh(&trie, &cache);
    let mut langs = Langs::new(&dir, Policy::default());
    let mut rng = Rng(9);
    let mut steps = 0;
    for g in gold(&dir).iter().step_by(61) {
        let lang = langs.get(&g.db);
        let mut s = Session::new(&lang);
        let mut cfg = s.start();
        for (k, &id) in vocab.encode(&g.sql).iter().enumerate() {
            let m = both(
                &mut on,
                &mut off,
                &mut s,
                &cfg,
                &format!("{} at token {k}", g.sql),
            );
            assert!(m.contains(id), "{}: gold token {k} blocked", g.sql);
            steps += 1;
            // Now and then a random allowed token instead, then back to the gold prefix.
            if rng.below(8) == 0 {
                let ids: Vec<u32> = m.ids().filter(|&i| !vocab.is_special(i)).collect();
                let mut side = cfg.clone();
                s.feed(&mut side, vocab.token_bytes(ids[rng.below(ids.len())]))
                    .expect("allowed token");
                both(
                    &mut on,
                    &mut off,
                    &mut s,
                    &side,
                    &format!("{} side step {k}", g.sql),
                );
                steps += 1;
            }
            s.feed(&mut cfg, vocab.token_bytes(id)).expect("gold token");
        }
        let m = both(&mut on, &mut off, &mut s, &cfg, &g.sql);
        assert!(m.eos);
    }
    let st = on.cache_stats().expect("cached");
    assert!(steps > 300 && st.hits > 0, "{steps} steps, {st:?}");
}
