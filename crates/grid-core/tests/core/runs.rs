//! Absorbing runs: where the lexeme in progress takes any run of some bytes (inside a quoted
//! name where a free name is viable, inside a string literal or a comment), or where a word
//! starts a fresh lexeme after a blank and stays viable whatever its letters, a miss walk
//! takes the tokens spelled with them as a block instead of visiting them. The block must
//! be exactly what the walk would have found: checked against the walk that visits every
//! node, against cache off, and against the brute-force oracle, at every byte offset of
//! statements that stand inside quoted names and literals, with a vocabulary whose tokens
//! hold the run's stop bytes (`"`, `'`, `\`, `.`, control bytes) at every position and are
//! longer than a quoted name may still grow.

use crate::common;

use std::sync::Arc;

use common::fixtures::{assert_same_mask, hr_schema, language};
use grid_core::cache::key::scope_of;
use grid_core::cache::walk::{self, WalkStart};
use grid_core::cache::{CacheKey, MaskCache};
use grid_core::mask::Masker;
use grid_core::oracle::oracle_mask;
use grid_core::trie::pure::has_byte;
use grid_core::trie::TokenTrie;
use grid_core::Policy;
use grid_vocab::Vocabulary;

/// Every byte, tokens holding each stop byte first, inside and last, runs of plain bytes
/// of many lengths around 63 (the longest quoted name), and SQL fragments.
fn run_vocab() -> Vocabulary {
    let mut toks: Vec<Vec<u8>> = vec![b"<eos>".to_vec(), b"<pad>".to_vec()];
    toks.extend((0..=255u8).map(|b| vec![b]));
    for stop in [
        b"\"".as_slice(),
        b"'",
        b"\\",
        b".",
        b"\x01",
        b"\n",
        b"*/",
        b"\xff",
    ] {
        for (pre, post) in [
            ("", ""),
            ("a", ""),
            ("", "b"),
            ("Zip ", " Code"),
            ("x", "y"),
            ("", " FROM"),
            (" ", ","),
            ("", ")"),
        ] {
            let mut t = pre.as_bytes().to_vec();
            t.extend_from_slice(stop);
            t.extend_from_slice(post.as_bytes());
            toks.push(t.clone());
            // The stop byte twice: `""` and `''` go on a name and a literal.
            let mut twice = pre.as_bytes().to_vec();
            twice.extend_from_slice(stop);
            twice.extend_from_slice(stop);
            twice.extend_from_slice(post.as_bytes());
            toks.push(twice);
        }
    }
    for n in [2, 5, 9, 17, 30, 40, 50, 55, 58, 60, 61, 62, 63, 64, 65, 70] {
        toks.push(vec![b'a'; n]);
        toks.push([vec![b' '], vec![b'Z'; n - 1]].concat());
        let mut q = vec![b'q'; n];
        q.push(b'"');
        toks.push(q);
    }
    for f in [
        "SELECT",
        " FROM",
        " WHERE",
        " name",
        " employees",
        "employees",
        " AS",
        " =",
        " AND",
        " \"",
        "\" FROM",
        "\",",
        "Rating",
        "_(millions",
        ")\"",
        " 'it",
        "s'",
        " E'",
        "E'",
        "\\t",
        "\\\\",
        "/*",
        " /*",
        " --",
        "--",
        " Customer",
        " Zip",
        " Code",
        "(in",
        " thousands)",
        "é",
        "\u{00e9}t\u{00e9}",
        " x.y",
        "a.b",
        "\t",
        "\0",
        "id",
        " id",
        ";",
        // Words after a blank the token begins with, and their stops.
        "  name",
        "\nFROM",
        "\tid",
        " na",
        " employees,",
        " na1",
        " \u{00e9}",
        " emp_",
        // Words with bytes >= 0x80 (letters to PostgreSQL's scanner, not in ASCII-only
        // identifiers), whole characters and cut ones, and their stops.
        " \u{4e2d}\u{6587}",
        "\u{4e2d}\u{6587}",
        " na\u{00ef}ve",
        "\u{00fc}ber",
        "\n\u{00e9}t\u{00e9}",
        " caf\u{00e9}",
        " \u{00e9}1",
        " \u{00e9}.x",
        " \u{00e9}\"",
        // A word's first byte that goes on a word of the lexicon, and others.
        "ame",
        "mployees",
        "ployees",
        "z_q",
        "xyz",
    ] {
        toks.push(f.as_bytes().to_vec());
    }
    toks.push(b" \xe4\xb8".to_vec());
    toks.push(b"\xb8\xad\xe6".to_vec());
    toks.push(b"  \xc3".to_vec());
    // Aliases: one spelling with three ids, inside and outside every run.
    for t in ["Zip", "a\"", "'"] {
        toks.push(t.as_bytes().to_vec());
        toks.push(t.as_bytes().to_vec());
    }
    Vocabulary::from_served(toks, &[1], Some(0)).expect("vocabulary")
}

/// Statements that stand inside quoted names of free and lexicon positions (one of 63
/// bytes, the longest), string literals and comments.
const STATEMENTS: &[&str] = &[
    "SELECT name AS \"Customer Zip Code (in thousands), \"\"net\"\" of tax.\" FROM employees",
    "SELECT name AS \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\" FROM employees",
    "SELECT \"Rating_(millions)\" FROM employees AS \"E e\"",
    "SELECT \"x y\".id FROM (SELECT id FROM orders) AS \"x y\"",
    "SELECT name FROM employees WHERE name = 'it''s a \"quoted\" name. e\tx' AND id = 1",
    "SELECT E'tab\\t \\\\ ''q'' \"d\"', 'a' FROM employees",
    "SELECT /* a \"comment\" with 'quotes'. */ name -- trailing \"x\" 'y'\nFROM employees",
    "WITH \"my cte\" AS (SELECT id FROM orders) SELECT id FROM \"my cte\";",
    // Blanks before words, where a word starts a fresh lexeme (Spider's double spaces).
    "SELECT  name ,  id FROM  employees WHERE  id  >  1 AND name  =  name",
    "SELECT count(*) ,  max(id) FROM employees GROUP BY  name HAVING  count(*)  >  2",
    // The decline's reason (plain words, a STRING too), and strings that may still be one
    // until a byte outside its characters.
    "CANNOT ANSWER 'no table (it): a_b-c, 2/3 of Zip Code; sorry!? aaaaaaaaaaaaaaaaa'",
    "SELECT name FROM employees WHERE name = 'Zip Code (in thousands) * 2' OR name = 'a'",
];

/// What the blocks of [`check_runs`] held, key by key.
#[derive(Debug, Default)]
struct Taken {
    /// Statements and offsets checked.
    checked: usize,
    /// Keys whose walk took a block, and the nodes the blocks spared.
    blocks: usize,
    in_blocks: u32,
    /// Keys after a blank (or at no lexeme) whose walk took the fresh words as a block.
    blank_blocks: usize,
    /// Keys whose walk took the words after a blank a token begins with as a block.
    blank_led: usize,
    /// Keys inside a word whose first byte is one of fewer bytes than the later ones.
    word_first: usize,
    /// Keys whose fresh words' block went on with the bytes >= 0x80.
    high: usize,
}

#[test]
fn runs_taken_as_a_block_equal_the_walk_cache_off_and_the_oracle() {
    let t = check_runs(&common::dialect(), STATEMENTS);
    assert!(t.checked > 400, "{t:?}");
    // Inside every quoted name, literal and comment above, and after the blanks before
    // words.
    assert!(t.blocks > 200 && t.in_blocks > 50_000, "{t:?}");
    assert!(t.blank_blocks > 20, "{t:?}");
    assert!(t.blank_led > 20, "{t:?}");
    assert!(t.word_first > 20, "{t:?}");
    // PostgreSQL's identifiers take the bytes >= 0x80: the words' blocks do too.
    assert!(t.high > 20, "{t:?}");
}

/// In the dialect of generated statements an unquoted identifier is ASCII: a byte >= 0x80
/// ends a word there, and the words' blocks are the ASCII ones.
#[test]
fn words_blocks_of_ascii_identifiers_leave_the_bytes_above_ascii_to_the_walk() {
    let dialect = Arc::new(grid_core::Dialect::postgres_without_comments().expect("dialect"));
    let without_comments: Vec<&str> = STATEMENTS
        .iter()
        .copied()
        .filter(|s| !s.contains("/*") && !s.contains("--"))
        .collect();
    let t = check_runs(&dialect, &without_comments);
    assert!(t.checked > 300, "{t:?}");
    assert!(t.blank_blocks > 20 && t.blank_led > 20, "{t:?}");
    assert_eq!(t.high, 0, "{t:?}");
}

/// A string literal that may still be the decline's reason (`'Zip`) takes the same block
/// as before the decline where no reason is wanted: every byte a string takes goes on
/// (`*`, `"`, a tab), in both dialects; where a reason is wanted (after `CANNOT ANSWER`),
/// only the reason's characters do.
#[test]
fn a_literal_that_may_be_a_reason_takes_every_string_byte_unless_a_reason_is_wanted() {
    let vocab = run_vocab();
    for dialect in [
        common::dialect(),
        Arc::new(grid_core::Dialect::postgres_without_comments().expect("dialect")),
    ] {
        let trie = Arc::new(TokenTrie::build(&vocab).expect("trie"));
        let lang = language(&dialect, &hr_schema(), &Policy::default());
        let mut s = grid_core::Session::new(&lang);
        let run_at = |s: &mut grid_core::Session<'_>, text: &str| {
            let mut cfg = s.start();
            s.feed(&mut cfg, text.as_bytes()).expect("a viable prefix");
            let start = WalkStart {
                lang: &lang,
                scan: &cfg.scan,
                offset: cfg.offset,
                allowed: s.allowed(&cfg),
            };
            let runs = walk::block_runs(&trie, start);
            assert_eq!(runs.len(), 1, "{text:?}: {runs:?}");
            runs[0]
        };
        for text in [
            "SELECT name FROM employees WHERE name = '",
            "SELECT name FROM employees WHERE name = 'Zip",
            "SELECT name FROM employees WHERE name = 'Zip Code (in thousands) ",
        ] {
            let (lead, bytes, len) = run_at(&mut s, text);
            for b in [b'a', b'Z', b' ', b'(', b'*', b'"', b'%', b'\t', b'\n', b'~'] {
                assert!(
                    has_byte(&lead, b) && has_byte(&bytes, b),
                    "{text:?}: {:?}",
                    b as char
                );
            }
            for b in [b'\'', b'\\', b'\x01'] {
                assert!(!has_byte(&bytes, b), "{text:?}: {:?}", b as char);
            }
            assert!(len >= trie.max_len(), "{text:?}: {len}");
        }
        for text in [
            "CANNOT ANSWER '",
            "CANNOT ANSWER 'Zip",
            "CANNOT ANSWER 'Zip Code ",
        ] {
            let (lead, bytes, _) = run_at(&mut s, text);
            for b in [b'a', b'Z', b' ', b'(', b'-', b'/'] {
                assert!(has_byte(&bytes, b), "{text:?}: {:?}", b as char);
            }
            for b in [b'*', b'"', b'%', b'\t', b'\n', b'\'', b'\\'] {
                assert!(
                    !has_byte(&lead, b) && !has_byte(&bytes, b),
                    "{text:?}: {:?}",
                    b as char
                );
            }
        }
    }
}

/// Checks every block over every offset of `statements` against the walk that visits every
/// node, cache off and the oracle, and counts the blocks taken.
fn check_runs(dialect: &Arc<grid_core::Dialect>, statements: &[&str]) -> Taken {
    let vocab = run_vocab();
    let trie = Arc::new(TokenTrie::build(&vocab).expect("trie"));
    let lang = language(dialect, &hr_schema(), &Policy::default());
    let scope = scope_of(&lang, trie.fingerprint());
    let cache = Arc::new(MaskCache::new(8));
    let mut on = Masker::with_cache(trie.clone(), cache);
    let mut off = Masker::new(trie.clone());
    let byte_ids = common::byte_ids(&vocab);
    let mut t = Taken::default();
    t.checked = common::over_offsets_by(&lang, &byte_ids, statements, &mut |s, cfg, what| {
        let allowed = s.allowed(cfg);
        let key = CacheKey::of(&lang, scope, &cfg.scan, allowed);
        let start = WalkStart {
            lang: &lang,
            scan: &cfg.scan,
            offset: cfg.offset,
            allowed,
        };
        for (lead, bytes, _) in walk::block_runs(&trie, start) {
            let ones = |s: [u64; 4]| s.iter().map(|w| w.count_ones()).sum::<u32>();
            t.blank_led += usize::from(
                ones(lead) == 1 && [b' ', b'\n', b'\t'].iter().any(|&b| has_byte(&lead, b)),
            );
            t.word_first +=
                usize::from(ones(lead) > 1 && lead != bytes && !cfg.scan.rem.is_empty());
            t.high +=
                usize::from(lead == bytes && has_byte(&bytes, 0xc3) && !has_byte(&bytes, b'0'));
        }
        let (fast, fast_visited) = walk::build(&trie, &key, start, true, None);
        let (every, every_visited) = walk::build_every_node(&trie, &key, start, false, None);
        if fast != every {
            let bits = |e: &grid_core::cache::Entry| -> Vec<u32> {
                (0..vocab.len() as u32)
                    .filter(|&id| e.ci_bits[id as usize / 32] & (1 << (id % 32)) != 0)
                    .collect()
            };
            let (a, b) = (bits(&fast), bits(&every));
            let spell = |ids: Vec<&u32>| -> Vec<String> {
                let t = |&&id: &&u32| String::from_utf8_lossy(vocab.token_bytes(id)).into_owned();
                ids.iter().take(8).map(t).collect()
            };
            panic!(
                "{what}: the block and the walk differ: CI only in the block {:?}, only in the \
                 walk {:?}, ci_first {:?} vs {:?}, classes {} vs {}",
                spell(a.iter().filter(|id| !b.contains(id)).collect()),
                spell(b.iter().filter(|id| !a.contains(id)).collect()),
                fast.ci_first,
                every.ci_first,
                fast.classes.len(),
                every.classes.len()
            );
        }
        if fast_visited < every_visited {
            t.blank_blocks += usize::from(cfg.scan.rem.iter().all(|&b| b == b' '));
            t.blocks += 1;
            t.in_blocks += every_visited - fast_visited;
        }
        let m = on.mask(s, cfg);
        let plain = off.mask(s, cfg);
        assert_same_mask(&m, &plain, &vocab, &format!("{what}: cache on, off"), true);
        assert_eq!(m.forced, plain.forced, "{what}: forced runs");
        let oracle = oracle_mask(s, cfg, &vocab);
        assert_same_mask(&m, &oracle, &vocab, &format!("{what}: oracle"), false);
        plain
    });
    t
}

/// The sets walked ahead when a language is built are the ones the blocks of the first
/// keys read: a fresh word's, and those inside a word, a quoted name and a literal.
#[test]
fn warm_blocks_build_the_sets_the_first_keys_read() {
    let vocab = run_vocab();
    let byte_ids = common::byte_ids(&vocab);
    for dialect in [
        common::dialect(),
        Arc::new(grid_core::Dialect::postgres_without_comments().expect("dialect")),
    ] {
        let trie = Arc::new(TokenTrie::build(&vocab).expect("trie"));
        let lang = language(&dialect, &hr_schema(), &Policy::default());
        let warmed = walk::warm_blocks(&trie, &lang);
        let kept = trie.pure_kept();
        assert!(
            warmed >= 3 && kept.len() >= 3,
            "{warmed} sets warmed, {} kept",
            kept.len()
        );
        // A fresh word's set takes the bytes above ASCII exactly where identifiers do.
        let high_word = kept
            .iter()
            .any(|b| has_byte(b, 0xc3) && !has_byte(b, b'0') && !has_byte(b, b'"'));
        assert_eq!(high_word, Arc::ptr_eq(&dialect, &common::dialect()));
        // Which kinds of key found their block's set already built.
        let (mut word, mut quoted, mut literal, mut inside) = (0, 0, 0, 0);
        let without_comments: Vec<&str> = STATEMENTS
            .iter()
            .copied()
            .filter(|s| !s.contains("/*") && !s.contains("--"))
            .collect();
        common::over_offsets_by(&lang, &byte_ids, &without_comments, &mut |s, cfg, _| {
            let start = WalkStart {
                lang: &lang,
                scan: &cfg.scan,
                offset: cfg.offset,
                allowed: s.allowed(cfg),
            };
            for (_, bytes, _) in walk::block_runs(&trie, start) {
                if !kept.contains(&bytes) {
                    continue;
                }
                match cfg.scan.rem.first() {
                    None | Some(b' ') => word += 1,
                    Some(b'"') => quoted += 1,
                    Some(b'\'') => literal += 1,
                    Some(_) => inside += 1,
                }
            }
            Masker::new(trie.clone()).mask(s, cfg)
        });
        assert!(
            word > 20 && quoted > 20 && literal > 20 && inside > 10,
            "warmed sets read: {word} fresh words, {quoted} quoted names, {literal} literals, \
             {inside} inside words"
        );
    }
}
