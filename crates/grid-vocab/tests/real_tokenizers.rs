//! Checks against the five real vocabularies in `shared/data/tokenizers/`.
//!
//! The data folder is found at `$GRID_DATA_DIR` or `<repo>/../shared/data`; when it is
//! absent every test here prints why and passes without checking (the synthetic tests
//! cover the same features on small built-in vocabularies).
//!
//! Expected ids come from the reference tokenizers, hard-coded in `real/expected.rs`;
//! whole corpora (Spider gold SQL, Spider questions, a PostgreSQL dump with non-ASCII
//! names) are checked through a hash of all their ids. To locate a mismatch, set
//! `GRID_VOCAB_EXPECTED_DIR` to a folder of `<vocab>_<corpus>.jsonl` files (one id list
//! per line) and the first differing line is reported.

#[path = "real/expected.rs"]
mod expected;

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Instant;

use blake2::digest::consts::U16;
use blake2::{Blake2b, Digest};
use grid_vocab::{VocabKind, Vocabulary};

fn data_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("GRID_DATA_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"),
    };
    if dir.join("tokenizers").is_dir() {
        Some(dir)
    } else {
        println!(
            "SKIP: tokenizer data not found at {} (set GRID_DATA_DIR); real-vocabulary checks not run",
            dir.display()
        );
        None
    }
}

const NAMES: [&str; 5] = ["gpt2", "qwen2_5", "llama3", "llama2_sp", "mistral_sp_v3"];

/// Each vocabulary is loaded once per test binary.
fn vocab(name: &str) -> Option<&'static Vocabulary> {
    static CELLS: [OnceLock<Option<Vocabulary>>; 5] = [const { OnceLock::new() }; 5];
    let i = NAMES.iter().position(|n| *n == name).expect("known name");
    CELLS[i]
        .get_or_init(|| {
            let dir = data_dir()?;
            let t = Instant::now();
            let v = Vocabulary::load(dir.join("tokenizers").join(name))
                .unwrap_or_else(|e| panic!("loading {name}: {e}"));
            println!("loaded {name} in {:?}", t.elapsed());
            Some(v)
        })
        .as_ref()
}

fn cases(name: &str) -> &'static [(&'static str, &'static [u32])] {
    match name {
        "gpt2" => expected::GPT2_CASES,
        "qwen2_5" => expected::QWEN2_5_CASES,
        "llama3" => expected::LLAMA3_CASES,
        "llama2_sp" => expected::LLAMA2_SP_CASES,
        _ => expected::MISTRAL_SP_V3_CASES,
    }
}

/// What decode(encode(s)) must give: the text as the tokenizer sees it (NFC for Qwen,
/// SentencePiece's dummy-prefix space).
fn expected_roundtrip(v: &Vocabulary, s: &str) -> Vec<u8> {
    v.normalize(s).into_owned().into_bytes()
}

fn check_cases(name: &str) {
    let Some(v) = vocab(name) else { return };
    let mut bad = Vec::new();
    for (text, want) in cases(name) {
        let got = v.encode(text);
        if got != *want {
            bad.push(format!(
                "{name}: {text:?}\n   got  {got:?}\n   want {want:?}"
            ));
        }
        assert_eq!(
            v.decode(&got),
            expected_roundtrip(v, text),
            "{name}: round trip of {text:?}"
        );
    }
    assert!(
        bad.is_empty(),
        "{} mismatches:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

#[test]
fn gpt2_matches_reference_ids() {
    check_cases("gpt2");
}
#[test]
fn qwen2_5_matches_reference_ids() {
    check_cases("qwen2_5");
}
#[test]
fn llama3_matches_reference_ids() {
    check_cases("llama3");
}
#[test]
fn llama2_sp_matches_reference_ids() {
    check_cases("llama2_sp");
}
#[test]
fn mistral_sp_v3_matches_reference_ids() {
    check_cases("mistral_sp_v3");
}

fn corpus(dir: &std::path::Path, name: &str) -> Vec<String> {
    let spider = dir.join("spider");
    match name {
        "dev_gold_pg_sql" => std::fs::read_to_string(spider.join("dev_gold_pg.sql"))
            .expect("dev_gold_pg.sql")
            .lines()
            .map(|l| l.split('\t').next().unwrap_or("").to_string())
            .collect(),
        "dev_questions" => {
            let text = std::fs::read_to_string(spider.join("dev.json")).expect("dev.json");
            let doc: serde_json::Value = serde_json::from_str(&text).expect("dev.json parses");
            doc.as_array()
                .expect("array")
                .iter()
                .map(|q| q["question"].as_str().expect("question").to_string())
                .collect()
        }
        _ => std::fs::read_to_string(spider.join("postgres/world_1.sql"))
            .expect("world_1.sql")
            .split('\n')
            .map(String::from)
            .collect(),
    }
}

#[test]
fn whole_corpora_match_reference_ids_and_round_trip() {
    let Some(dir) = data_dir() else { return };
    let mut failures = Vec::new();
    for &(name, cname, want_hash, want_count) in expected::CORPUS_HASHES {
        let v = vocab(name).expect("data present");
        let lines = corpus(&dir, cname);
        let t = Instant::now();
        let encoded: Vec<Vec<u32>> = lines.iter().map(|l| v.encode(l)).collect();
        let took = t.elapsed();
        let mut h = Blake2b::<U16>::new();
        let mut count = 0;
        for ids in &encoded {
            count += ids.len();
            for id in ids {
                h.update(id.to_le_bytes());
            }
            h.update(u32::MAX.to_le_bytes());
        }
        let got: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        println!(
            "{name} {cname}: {} lines, {count} ids, {took:?}",
            lines.len()
        );
        for (l, ids) in lines.iter().zip(&encoded) {
            assert_eq!(
                v.decode(ids),
                expected_roundtrip(v, l),
                "{name}: round trip of {l:?}"
            );
        }
        if got != want_hash || count != want_count {
            let mut msg = format!(
                "{name} {cname}: hash {got} ids {count}, want {want_hash} ids {want_count}"
            );
            if let Some(exp) = std::env::var_os("GRID_VOCAB_EXPECTED_DIR") {
                let f = PathBuf::from(exp).join(format!("{name}_{cname}.jsonl"));
                if let Ok(text) = std::fs::read_to_string(&f) {
                    for (i, (line, ids)) in text.lines().zip(&encoded).enumerate() {
                        let want: Vec<u32> = serde_json::from_str(line).unwrap_or_default();
                        if &want != ids {
                            msg += &format!(
                                "\n  first diff line {i}: {:?}\n   got  {ids:?}\n   want {want:?}",
                                lines[i]
                            );
                            break;
                        }
                    }
                }
            }
            failures.push(msg);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn encoding_a_thousand_sql_lines_is_fast() {
    let Some(dir) = data_dir() else { return };
    let lines = corpus(&dir, "dev_gold_pg_sql");
    assert!(lines.len() >= 1000);
    for name in NAMES {
        let v = vocab(name).expect("data present");
        // Fresh vocabulary state is not needed: the word cache is part of the design.
        let t = Instant::now();
        let n: usize = lines.iter().map(|l| v.encode(l).len()).sum();
        let took = t.elapsed();
        println!("{name}: {} SQL lines -> {n} ids in {took:?}", lines.len());
        assert!(
            took.as_secs_f64() < 1.0,
            "{name}: {took:?} for {} lines",
            lines.len()
        );
    }
}

struct Facts {
    len: usize,
    eos: u32,
    kind: VocabKind,
    specials: &'static [(&'static str, u32)],
    n_special: usize,
}

fn facts(name: &str) -> Facts {
    match name {
        "gpt2" => Facts {
            len: 50257,
            eos: 50256,
            kind: VocabKind::ByteLevelBpe,
            specials: &[("<|endoftext|>", 50256)],
            n_special: 1,
        },
        "qwen2_5" => Facts {
            len: 151665,
            eos: 151643,
            kind: VocabKind::ByteLevelBpe,
            specials: &[
                ("<|endoftext|>", 151643),
                ("<|im_start|>", 151644),
                ("<|im_end|>", 151645),
            ],
            n_special: 22,
        },
        "llama3" => Facts {
            len: 128256,
            eos: 128001,
            kind: VocabKind::Tiktoken,
            specials: &[
                ("<|begin_of_text|>", 128000),
                ("<|end_of_text|>", 128001),
                ("<|eot_id|>", 128009),
            ],
            n_special: 256,
        },
        "llama2_sp" => Facts {
            len: 32000,
            eos: 2,
            kind: VocabKind::SentencePiece,
            specials: &[("<unk>", 0), ("<s>", 1), ("</s>", 2)],
            n_special: 3,
        },
        _ => Facts {
            len: 32768,
            eos: 2,
            kind: VocabKind::SentencePiece,
            specials: &[
                ("<unk>", 0),
                ("<s>", 1),
                ("</s>", 2),
                ("[INST]", 3),
                ("[/INST]", 4),
            ],
            n_special: 751, // 750 CONTROL + 1 UNKNOWN; the 20 USER_DEFINED [REFERENCE_DOC_n] are ordinary
        },
    }
}

#[test]
fn vocabulary_facts() {
    if data_dir().is_none() {
        return;
    }
    for name in NAMES {
        let v = vocab(name).expect("data present");
        let f = facts(name);
        let biggest = v.alias_classes().iter().map(Vec::len).max().unwrap_or(0);
        println!(
            "{name}: kind {}, {} tokens, {} special, eos {:?}, byte-complete {}, {} alias classes (largest {biggest}), exact encoder {}, fingerprint {}",
            v.kind(),
            v.len(),
            v.special_ids().len(),
            v.eos_id(),
            v.is_byte_complete(),
            v.alias_classes().len(),
            v.encoding_is_exact(),
            v.fingerprint()
        );
        assert_eq!(v.kind(), f.kind, "{name}");
        assert_eq!(v.len(), f.len, "{name}");
        assert_eq!(v.eos_id(), Some(f.eos), "{name}");
        assert_eq!(v.special_ids().len(), f.n_special, "{name}");
        for (text, id) in f.specials {
            assert!(v.is_special(*id), "{name}: {text} special");
            assert_eq!(v.special_id(text), Some(*id), "{name}: {text}");
        }
        assert!(
            v.is_byte_complete(),
            "{name}: missing {:?}",
            v.missing_bytes()
        );
        assert!(v.encoding_is_exact(), "{name}");
        for class in v.alias_classes() {
            assert!(class.len() >= 2);
            assert!(class.iter().all(|&id| !v.is_special(id)));
            assert!(class
                .iter()
                .all(|&id| v.token_bytes(id) == v.token_bytes(class[0])));
        }
    }
}

#[test]
fn specific_token_bytes() {
    let Some(g) = vocab("gpt2") else { return };
    assert_eq!(g.token_bytes(220), b" "); // "Ġ"
    assert_eq!(g.token_bytes(198), b"\n"); // "Ċ"
    assert_eq!(g.token_bytes(46506), b"SELECT");
    assert!(g.alias_classes().is_empty());
    let q = vocab("qwen2_5").expect("present");
    assert!(q.is_special(151657)); // <tool_call>: an added token, special for masking
                                   // The chat EOS can be chosen (shown on a served copy, as the static is shared).
    let chat = Vocabulary::from_served_json(&q.to_served_json())
        .and_then(|s| s.with_eos(151645))
        .expect("with_eos");
    assert_eq!(chat.eos_id(), Some(151645));
    assert_ne!(chat.fingerprint(), q.fingerprint());
    let l = vocab("llama3").expect("present");
    assert_eq!(l.token_bytes(0), b"!");
    assert_eq!(l.token_bytes(128009), b"<|eot_id|>");
    let s = vocab("llama2_sp").expect("present");
    assert_eq!(s.token_bytes(35), b" "); // <0x20>
    assert_eq!(s.token_bytes(29871), b" "); // ▁
    assert_eq!(s.token_bytes(13), b"\n"); // <0x0A>
    assert!(s.alias_classes().iter().any(|c| c == &vec![35, 29871]));
}

#[test]
fn served_round_trip_keeps_fingerprint() {
    if data_dir().is_none() {
        return;
    }
    for name in NAMES {
        let v = vocab(name).expect("data present");
        let json = v.to_served_json();
        let s = Vocabulary::from_served_json(&json).expect("served parses");
        assert_eq!(s.kind(), VocabKind::Served);
        assert_eq!(s.fingerprint(), v.fingerprint(), "{name}");
        assert_eq!(s.len(), v.len());
        assert_eq!(s.special_ids(), v.special_ids());
        assert_eq!(s.eos_id(), v.eos_id());
        assert_eq!(s.alias_classes(), v.alias_classes());
        assert_eq!(s.to_served_json(), json);
        // The greedy encoder of a byte-complete served vocabulary still round-trips.
        let text = "SELECT T1.name FROM singer AS T1 WHERE age  >  20 -- café";
        assert_eq!(s.decode(&s.encode(text)), text.as_bytes());
    }
}

#[test]
fn tokenizer_model_format_is_told_by_content() {
    let Some(dir) = data_dir() else { return };
    let t = dir.join("tokenizers");
    let tik = Vocabulary::load(t.join("llama3/tokenizer.model")).expect("tiktoken");
    assert_eq!(tik.kind(), VocabKind::Tiktoken);
    assert_eq!(tik.len(), 128256);
    let sp = Vocabulary::load(t.join("llama2_sp/tokenizer.model")).expect("sentencepiece");
    assert_eq!(sp.kind(), VocabKind::SentencePiece);
    // Same content under another name.
    let tmp = std::env::temp_dir().join(format!("grid-vocab-sniff-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("tmp");
    let renamed = tmp.join("whatever.bin");
    std::fs::copy(t.join("mistral_sp_v3/tokenizer.model"), &renamed).expect("copy");
    let m = Vocabulary::load(&renamed).expect("sniffed");
    assert_eq!(m.kind(), VocabKind::SentencePiece);
    assert_eq!(m.len(), 32768);
    let vj = Vocabulary::load(t.join("gpt2/vocab.json")).expect("vocab.json file");
    assert_eq!(vj.len(), 50257);
    let _ = std::fs::remove_dir_all(&tmp);
}
