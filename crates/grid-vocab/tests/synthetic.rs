//! Every adapter and property on small vocabularies built here, so these run without
//! the shared data. Expected ids were produced once by the reference tokenizers
//! (HF tokenizers, tiktoken, sentencepiece) on identical vocabularies.

use std::path::{Path, PathBuf};

use grid_vocab::{ByteLevelConfig, VocabError, VocabKind, Vocabulary};
use serde_json::json;

// ---------------------------------------------------------------- helpers

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!("grid-vocab-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }
    fn write(&self, name: &str, data: impl AsRef<[u8]>) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, data).expect("write temp file");
        p
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// GPT-2's byte → stand-in character table.
fn b2u() -> Vec<char> {
    let mut bs: Vec<u32> = (b'!' as u32..=b'~' as u32)
        .chain(0xA1..=0xAC)
        .chain(0xAE..=0xFF)
        .collect();
    let mut cs = bs.clone();
    let mut n = 0;
    for b in 0..256u32 {
        if !bs.contains(&b) {
            bs.push(b);
            cs.push(256 + n);
            n += 1;
        }
    }
    let mut table = vec!['\0'; 256];
    for (b, c) in bs.iter().zip(&cs) {
        table[*b as usize] = char::from_u32(*c).unwrap();
    }
    table
}

const MERGES: &[(&str, &str)] = &[
    ("Ġ", "t"),
    ("h", "e"),
    ("Ġt", "he"),
    ("S", "E"),
    ("L", "E"),
    ("SE", "LE"),
    ("C", "T"),
    ("SELE", "CT"),
    ("Ġ", "Ġ"),
    ("i", "n"),
    ("Ġ", "in"),
    ("1", "2"),
    ("12", "3"),
    ("'", "s"),
    ("Ã", "©"),
    ("t", "he"),
    ("ĠĠ", "ĠĠ"),
    ("Ċ", "Ċ"),
];

/// Byte `b` is id `b` (spelled by its stand-in); merge results follow from 256.
fn bpe_vocab() -> Vec<(String, u32)> {
    let t = b2u();
    let mut v: Vec<(String, u32)> = (0..256).map(|b| (t[b].to_string(), b as u32)).collect();
    for (a, b) in MERGES {
        let id = v.len() as u32;
        v.push((format!("{a}{b}"), id));
    }
    v
}

fn vocab_json(extra: &[(&str, u32)]) -> String {
    let mut m = serde_json::Map::new();
    for (s, id) in bpe_vocab() {
        m.insert(s, json!(id));
    }
    for (s, id) in extra {
        m.insert((*s).to_string(), json!(id));
    }
    serde_json::Value::Object(m).to_string()
}

fn merges_txt() -> String {
    let mut s = String::from("#version: 0.2\n");
    for (a, b) in MERGES {
        s += &format!("{a} {b}\n");
    }
    s
}

const TEXTS: [&str; 7] = [
    "SELECT the thin 123 it's",
    "  the\n\nthe",
    "cafe\u{301} caf\u{e9} 12345",
    "SELECT  x",
    "IT'S     in",
    "",
    "the",
];

const GPT2_IDS: [&[u32]; 7] = [
    &[263, 258, 256, 104, 265, 32, 268, 32, 105, 116, 269],
    &[32, 258, 10, 10, 271],
    &[
        99, 97, 102, 101, 204, 129, 32, 99, 97, 102, 270, 32, 268, 52, 53,
    ],
    &[263, 32, 32, 120],
    &[73, 84, 39, 83, 272, 266],
    &[],
    &[271],
];

const QWEN_IDS: [&[u32]; 7] = [
    &[263, 258, 256, 104, 265, 32, 49, 50, 51, 32, 105, 116, 269],
    &[32, 258, 273, 271],
    &[
        99, 97, 102, 270, 32, 99, 97, 102, 270, 32, 49, 50, 51, 52, 53,
    ],
    &[263, 32, 32, 120],
    &[73, 84, 39, 83, 272, 266],
    &[],
    &[271],
];

const PREFIX_SPACE_IDS: [&[u32]; 7] = [
    &[32, 263, 258, 256, 104, 265, 32, 268, 32, 105, 116, 269],
    &[32, 258, 10, 10, 271],
    &[
        32, 99, 97, 102, 101, 204, 129, 32, 99, 97, 102, 270, 32, 268, 52, 53,
    ],
    &[32, 263, 32, 32, 120],
    &[32, 73, 84, 39, 83, 272, 266],
    &[],
    &[258],
];

const TIKTOKEN_IDS: [&[u32]; 7] = [
    &[264, 259, 32, 256, 268, 32, 266, 32, 105, 116, 39, 115],
    &[32, 259, 10, 10, 257],
    &[
        99, 97, 102, 101, 204, 129, 32, 99, 97, 102, 270, 32, 266, 52, 53,
    ],
    &[264, 32, 32, 120],
    &[73, 84, 39, 83, 267, 267, 269],
    &[],
    &[257],
];

fn check(v: &Vocabulary, want: &[&[u32]]) {
    for (text, ids) in TEXTS.iter().zip(want) {
        let got = v.encode(text);
        assert_eq!(&got, ids, "{:?} on {text:?}", v.kind());
        assert_eq!(
            v.decode(&got),
            v.normalize(text).as_bytes(),
            "round trip of {text:?}"
        );
    }
}

// ---------------------------------------------------------------- byte-level BPE

#[test]
fn vocab_merges_dir_with_qwen_added_tokens() {
    let d = TempDir::new("qwen-dir");
    d.write("vocab.json", vocab_json(&[]));
    d.write("merges.txt", merges_txt());
    d.write(
        "added_tokens.json",
        json!([
            {"id": 274, "content": "<|endoftext|>", "special": true},
            {"id": 275, "content": "<|im_start|>", "special": true},
            {"id": 276, "content": "<|im_end|>", "special": true},
            {"id": 277, "content": "<tool_call>", "special": false},
        ])
        .to_string(),
    );
    let v = Vocabulary::load(d.path()).unwrap();
    assert_eq!(v.kind(), VocabKind::ByteLevelBpe);
    assert_eq!(v.len(), 278);
    assert_eq!(v.special_ids(), &[274, 275, 276, 277]);
    assert_eq!(v.eos_id(), Some(274));
    assert_eq!(v.special_id("<|im_end|>"), Some(276));
    assert_eq!(v.token_bytes(275), b"<|im_start|>");
    assert_eq!(v.token_bytes(32), b" ");
    assert_eq!(v.token_bytes(258), b" the");
    assert!(v.is_byte_complete());
    assert!(v.alias_classes().is_empty());
    assert!(v.encoding_is_exact());
    check(&v, &QWEN_IDS);
    // The chat EOS can be chosen instead.
    let chat = v.with_eos(276).unwrap();
    assert_eq!(chat.eos_id(), Some(276));
}

#[test]
fn vocab_merges_dir_gpt2_style_with_endoftext_in_vocab() {
    let d = TempDir::new("gpt2-dir");
    d.write("vocab.json", vocab_json(&[("<|endoftext|>", 274)]));
    d.write("merges.txt", merges_txt());
    let v = Vocabulary::load(d.path()).unwrap();
    assert_eq!(v.len(), 275);
    assert_eq!(v.special_ids(), &[274]);
    assert_eq!(v.eos_id(), Some(274));
    check(&v, &GPT2_IDS);
    // A vocab.json path with merges.txt beside it loads the same.
    let w = Vocabulary::load(d.path().join("vocab.json")).unwrap();
    assert_eq!(w.fingerprint(), v.fingerprint());
}

fn tokenizer_json(
    pre: serde_json::Value,
    normalizer: serde_json::Value,
    array_merges: bool,
) -> String {
    let vocab: serde_json::Map<_, _> = bpe_vocab()
        .into_iter()
        .map(|(s, id)| (s, json!(id)))
        .collect();
    let merges: Vec<serde_json::Value> = MERGES
        .iter()
        .map(|(a, b)| {
            if array_merges {
                json!([a, b])
            } else {
                json!(format!("{a} {b}"))
            }
        })
        .collect();
    json!({
        "version": "1.0",
        "added_tokens": [{"id": 274, "content": "<|endoftext|>", "special": true}],
        "normalizer": normalizer,
        "pre_tokenizer": pre,
        "model": {"type": "BPE", "vocab": vocab, "merges": merges, "ignore_merges": false},
        "decoder": {"type": "ByteLevel"}
    })
    .to_string()
}

#[test]
fn tokenizer_json_gpt2_qwen_and_prefix_space() {
    let d = TempDir::new("tokjson");
    let gpt2 = tokenizer_json(
        json!({"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}),
        json!(null),
        false,
    );
    let v = Vocabulary::load(d.write("tokenizer.json", gpt2)).unwrap();
    assert_eq!(v.eos_id(), Some(274));
    check(&v, &GPT2_IDS);

    let qwen = tokenizer_json(
        json!({"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": grid_vocab::pretokenize::QWEN2_PATTERN}, "behavior": "Isolated", "invert": false},
            {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]}),
        json!({"type": "NFC"}),
        true,
    );
    let q = Vocabulary::load(d.write("qwen.json", qwen)).unwrap();
    check(&q, &QWEN_IDS);
    assert_eq!(
        q.fingerprint(),
        v.fingerprint(),
        "same bytes, specials, eos"
    );

    let pre = tokenizer_json(
        json!({"type": "ByteLevel", "add_prefix_space": true, "use_regex": true}),
        json!(null),
        false,
    );
    let p = Vocabulary::load(d.write("prefix.json", pre)).unwrap();
    check(&p, &PREFIX_SPACE_IDS);
}

#[test]
fn ignore_merges_emits_whole_words() {
    // "the" is a token (271) but its merges give 't' 'he' -> ... ; with ignore_merges the
    // word maps straight to 271, without it merges decide.
    let mut cfg = ByteLevelConfig::gpt2();
    cfg.ignore_merges = true;
    let merges: Vec<(String, String)> = MERGES
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    // Remove the ("t","he") merge so only ignore_merges can produce 271 for "the".
    let merges_without: Vec<_> = merges
        .iter()
        .filter(|m| m.0 != "t" || m.1 != "he")
        .cloned()
        .collect();
    let mut vocab = bpe_vocab();
    vocab.retain(|(s, _)| s != "the");
    vocab.push(("the".into(), 271));
    let with = grid_vocab::hf::byte_level_from_parts(
        vocab.clone(),
        merges_without.clone(),
        vec![],
        cfg,
        "t",
    )
    .unwrap();
    assert_eq!(with.encode("the"), vec![271]);
    let without = grid_vocab::hf::byte_level_from_parts(
        vocab,
        merges_without,
        vec![],
        ByteLevelConfig::gpt2(),
        "t",
    )
    .unwrap();
    assert_eq!(without.encode("the"), vec![116, 257]);
}

/// GPT-2's original `bpe()`: find the lowest-rank pair, merge all its occurrences left to
/// right, repeat. HF's heap algorithm must agree with it.
fn reference_bpe(word: &str) -> Vec<u32> {
    let t = b2u();
    let vocab: std::collections::HashMap<String, u32> = bpe_vocab().into_iter().collect();
    let mut parts: Vec<String> = word.bytes().map(|b| t[b as usize].to_string()).collect();
    loop {
        let best = (0..parts.len().saturating_sub(1))
            .filter_map(|i| {
                MERGES
                    .iter()
                    .position(|(a, b)| *a == parts[i] && *b == parts[i + 1])
            })
            .min();
        let Some(rank) = best else { break };
        let (a, b) = MERGES[rank];
        let mut out = Vec::new();
        let mut i = 0;
        while i < parts.len() {
            if i + 1 < parts.len() && parts[i] == a && parts[i + 1] == b {
                out.push(format!("{a}{b}"));
                i += 2;
            } else {
                out.push(parts[i].clone());
                i += 1;
            }
        }
        parts = out;
    }
    parts.iter().map(|p| vocab[p]).collect()
}

#[test]
fn merge_rank_bpe_agrees_with_gpt2_reference_on_random_words() {
    let v = grid_vocab::hf::byte_level_from_parts(
        bpe_vocab(),
        MERGES
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect(),
        vec![],
        // One pre-token per run of non-space: the pattern keeps whole words.
        ByteLevelConfig {
            patterns: vec![r"[^\n]+".into()],
            ..ByteLevelConfig::gpt2()
        },
        "random",
    )
    .unwrap();
    let alphabet: Vec<char> = "theinSELCT123' ".chars().collect();
    let mut state = 0x9E3779B97F4A7C15u64;
    for _ in 0..3000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let len = (state % 12) as usize;
        let mut s = String::new();
        let mut x = state;
        for _ in 0..len {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            s.push(alphabet[(x >> 33) as usize % alphabet.len()]);
        }
        assert_eq!(v.encode(&s), reference_bpe(&s), "word {s:?}");
    }
}

// ---------------------------------------------------------------- tiktoken

fn tiktoken_file() -> String {
    use base64::Engine as _;
    let mut toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for m in [
        &b"th"[..],
        b"the",
        b" t",
        b" the",
        b"SE",
        b"LE",
        b"SELE",
        b"CT",
        b"SELECT",
        b"12",
        b"123",
        b"  ",
        b"in",
        b" in",
        b"\xc3\xa9",
    ] {
        toks.push(m.to_vec());
    }
    toks.iter()
        .enumerate()
        .map(|(i, t)| {
            format!(
                "{} {i}\n",
                base64::engine::general_purpose::STANDARD.encode(t)
            )
        })
        .collect()
}

#[test]
fn tiktoken_with_specials_and_holes() {
    let d = TempDir::new("tiktoken");
    d.write(
        "special_tokens.json",
        json!({"special_tokens": {"<|end_of_text|>": 275, "<|eot_id|>": 276}}).to_string(),
    );
    // Named like Llama-3's file; told apart from SentencePiece by content.
    let path = d.write("tokenizer.model", tiktoken_file());
    let v = Vocabulary::load(&path).unwrap();
    assert_eq!(v.kind(), VocabKind::Tiktoken);
    assert_eq!(v.len(), 277);
    // 271..=274 are defined by neither file: special, empty.
    assert_eq!(v.special_ids(), &[271, 272, 273, 274, 275, 276]);
    assert_eq!(v.token_bytes(272), b"");
    assert_eq!(v.eos_id(), Some(275));
    assert_eq!(v.token_bytes(276), b"<|eot_id|>");
    assert!(v.is_byte_complete());
    check(&v, &TIKTOKEN_IDS);
    // Without special_tokens.json: no specials, no EOS.
    let bare = TempDir::new("tiktoken-bare");
    let v2 = Vocabulary::load(bare.write("ranks.tiktoken", tiktoken_file())).unwrap();
    assert_eq!(v2.len(), 271);
    assert_eq!(v2.eos_id(), None);
    assert!(v2.special_ids().is_empty());
    check(&v2, &TIKTOKEN_IDS);
}

// ---------------------------------------------------------------- SentencePiece

/// A tiny protobuf writer for building `ModelProto`s.
#[derive(Default)]
struct Pb(Vec<u8>);

impl Pb {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    fn key(&mut self, field: u32, wire: u32) {
        self.varint(u64::from(field << 3 | wire));
    }
    fn uint(&mut self, field: u32, v: u64) -> &mut Self {
        self.key(field, 0);
        self.varint(v);
        self
    }
    fn bytes(&mut self, field: u32, b: &[u8]) -> &mut Self {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }
    fn float(&mut self, field: u32, f: f32) -> &mut Self {
        self.key(field, 5);
        self.0.extend_from_slice(&f.to_le_bytes());
        self
    }
}

#[derive(Clone, Copy, PartialEq)]
enum SpVariant {
    Plain,
    RemoveExtraWhitespace,
    WhitespaceSuffix,
}

/// The model of `synth_sp.py`: <unk> <s> </s>, 256 byte pieces (ids 3..=258), then
/// ▁(259) a b c d ▁a ab ▁ab abc cd ▁▁ dd, user-defined [X](271) [XY](272),
/// unused bc(273, high score), ▁abc(274).
fn sp_model(variant: SpVariant) -> Vec<u8> {
    let mut pieces: Vec<(String, f32, u64)> = vec![
        ("<unk>".into(), 0.0, 2),
        ("<s>".into(), 0.0, 3),
        ("</s>".into(), 0.0, 3),
    ];
    for b in 0..256 {
        pieces.push((format!("<0x{b:02X}>"), 0.0, 6));
    }
    for (s, sc) in [
        ("▁", -1.0),
        ("a", -2.0),
        ("b", -3.0),
        ("c", -4.0),
        ("d", -5.0),
        ("▁a", -6.0),
        ("ab", -6.0),
        ("▁ab", -7.0),
        ("abc", -8.0),
        ("cd", -9.0),
        ("▁▁", -10.0),
        ("dd", -11.0),
    ] {
        pieces.push((s.into(), sc, 1));
    }
    pieces.push(("[X]".into(), 0.0, 4));
    pieces.push(("[XY]".into(), 0.0, 4));
    pieces.push(("bc".into(), -1.5, 5));
    pieces.push(("▁abc".into(), -2.5, 1));
    let mut m = Pb::default();
    for (s, sc, t) in &pieces {
        let mut p = Pb::default();
        p.bytes(1, s.as_bytes()).float(2, *sc).uint(3, *t);
        m.bytes(1, &p.0);
    }
    let mut trainer = Pb::default();
    trainer.uint(3, 2).uint(4, pieces.len() as u64).uint(35, 1);
    if variant == SpVariant::WhitespaceSuffix {
        trainer.uint(24, 1);
    }
    m.bytes(2, &trainer.0);
    let mut norm = Pb::default();
    norm.bytes(1, b"identity")
        .uint(3, 1)
        .uint(4, u64::from(variant == SpVariant::RemoveExtraWhitespace))
        .uint(5, 1);
    m.bytes(3, &norm.0);
    m.0
}

const SP_TEXTS: [&str; 12] = [
    "ab c",
    "abc",
    "a bc",
    "a\u{e9}",
    "[X][XY]ab",
    "  dd  ab ",
    "x",
    "",
    " ",
    "ddd abcd",
    "bcbc",
    "a\tb\nc",
];

#[allow(clippy::type_complexity)]
const SP_EXPECTED: [(SpVariant, [&[u32]; 12]); 3] = [
    (
        SpVariant::Plain,
        [
            &[266, 259, 262],
            &[274],
            &[264, 259, 261, 262],
            &[264, 198, 172],
            &[259, 271, 272, 265],
            &[269, 259, 270, 259, 266, 259],
            &[259, 123],
            &[],
            &[269],
            &[259, 270, 263, 274, 263],
            &[259, 261, 262, 261, 262],
            &[264, 12, 261, 13, 262],
        ],
    ),
    (
        SpVariant::RemoveExtraWhitespace,
        [
            &[266, 259, 262],
            &[274],
            &[264, 259, 261, 262],
            &[264, 198, 172],
            &[259, 271, 272, 265],
            &[259, 270, 266],
            &[259, 123],
            &[],
            &[],
            &[259, 270, 263, 274, 263],
            &[259, 261, 262, 261, 262],
            &[264, 12, 261, 13, 262],
        ],
    ),
    (
        SpVariant::WhitespaceSuffix,
        [
            &[265, 259, 262, 259],
            &[267, 259],
            &[260, 259, 261, 262, 259],
            &[260, 198, 172, 259],
            &[271, 272, 265, 259],
            &[269, 270, 259, 266, 269],
            &[123, 259],
            &[],
            &[269],
            &[270, 263, 274, 263, 259],
            &[261, 262, 261, 262, 259],
            &[260, 12, 261, 13, 262, 259],
        ],
    ),
];

#[test]
fn sentencepiece_bpe_matches_reference() {
    for (variant, want) in SP_EXPECTED {
        let v = grid_vocab::sentencepiece::parse_sentencepiece(&sp_model(variant), "synthetic")
            .unwrap();
        for (text, ids) in SP_TEXTS.iter().zip(want) {
            let got = v.encode(text);
            assert_eq!(&got, ids, "variant {:?} text {text:?}", variant as u8);
            assert_eq!(
                v.decode(&got),
                v.normalize(text).as_bytes(),
                "round trip {text:?}"
            );
        }
    }
}

#[test]
fn sentencepiece_vocabulary_facts() {
    let d = TempDir::new("sp");
    let v = Vocabulary::load(d.write("tokenizer.model", sp_model(SpVariant::Plain))).unwrap();
    assert_eq!(v.kind(), VocabKind::SentencePiece);
    assert_eq!(v.len(), 275);
    assert_eq!(v.special_ids(), &[0, 1, 2]);
    assert_eq!(v.eos_id(), Some(2));
    assert_eq!(v.token_bytes(2), b"</s>");
    assert_eq!(v.token_bytes(3 + 0x41), b"A"); // <0x41>
    assert_eq!(v.token_bytes(259), b" "); // ▁
    assert_eq!(v.token_bytes(266), b" ab"); // ▁ab
    assert_eq!(v.token_bytes(271), b"[X]"); // user-defined: ordinary
    assert!(!v.is_special(271));
    assert!(v.is_byte_complete(), "through <0xNN> pieces");
    assert!(v.adds_dummy_prefix());
    // Each single-character normal piece aliases its byte piece.
    assert_eq!(
        v.alias_classes(),
        &[
            vec![3 + 0x20, 259],
            vec![3 + 0x61, 260],
            vec![3 + 0x62, 261],
            vec![3 + 0x63, 262],
            vec![3 + 0x64, 263]
        ]
    );
    assert_eq!(v.normalize("a b"), " a b");
}

#[test]
fn directory_prefers_tokenizer_model_over_unsupported_tokenizer_json() {
    let d = TempDir::new("sp-dir");
    d.write(
        "tokenizer.json",
        json!({
            "pre_tokenizer": {"type": "Metaspace", "replacement": "\u{2581}"},
            "model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "byte_fallback": true}
        })
        .to_string(),
    );
    d.write("tokenizer.model", sp_model(SpVariant::Plain));
    let v = Vocabulary::load(d.path()).unwrap();
    assert_eq!(v.kind(), VocabKind::SentencePiece);
    assert_eq!(v.len(), 275);
}

#[test]
fn sentencepiece_truncated_or_garbled_never_panics() {
    let model = sp_model(SpVariant::Plain);
    for cut in 0..model.len() {
        // Either an error or (at a field boundary) a smaller valid model.
        let _ = grid_vocab::sentencepiece::parse_sentencepiece(&model[..cut], "cut");
    }
    assert!(
        grid_vocab::sentencepiece::parse_sentencepiece(&model[..model.len() - 3], "cut").is_err()
    );
    let mut state = 12345u64;
    for _ in 0..200 {
        let mut m = model.clone();
        for _ in 0..4 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
            let i = (state >> 33) as usize % m.len();
            m[i] = (state >> 17) as u8;
        }
        if let Ok(v) = grid_vocab::sentencepiece::parse_sentencepiece(&m, "garbled") {
            let _ = v.encode("ab c é [X]");
        }
    }
    // A BYTE piece that is not <0xNN> is malformed.
    let mut p = Pb::default();
    p.bytes(1, b"<0xZZ>").uint(3, 6);
    let mut m = Pb::default();
    m.bytes(1, &p.0);
    let mut t = Pb::default();
    t.uint(35, 1);
    m.bytes(2, &t.0);
    assert!(matches!(
        grid_vocab::sentencepiece::parse_sentencepiece(&m.0, "bad"),
        Err(VocabError::Malformed { .. })
    ));
}

// ---------------------------------------------------------------- served

#[test]
fn served_round_trip_and_properties() {
    let tokens: Vec<Vec<u8>> = vec![
        b"a".to_vec(),
        b"b".to_vec(),
        b"ab".to_vec(),
        b"a".to_vec(),
        b"<eos>".to_vec(),
        vec![0xff],
        b"ab".to_vec(),
    ];
    let v = Vocabulary::from_served(tokens.clone(), &[6], Some(4)).unwrap();
    assert_eq!(v.kind(), VocabKind::Served);
    assert_eq!(v.special_ids(), &[4, 6], "eos is special");
    // 6 ("ab") is special, so only 0 and 3 alias.
    assert_eq!(v.alias_classes(), &[vec![0, 3]]);
    assert!(!v.is_byte_complete());
    assert_eq!(v.missing_bytes().len(), 253);
    assert!(!v.encoding_is_exact());
    assert_eq!(v.encode("abab a"), vec![2, 2, 0]); // ' ' has no token: skipped
    let json = v.to_served_json();
    assert_eq!(
        json,
        r#"{"tokens":["YQ==","Yg==","YWI=","YQ==","PGVvcz4=","/w==","YWI="],"special":[4,6],"eos":4}"#
    );
    assert_eq!(
        json,
        grid_vocab::served_json(tokens.iter().map(Vec::as_slice), &[6, 4, 6], Some(4))
    );
    let w = Vocabulary::from_served_json(&json).unwrap();
    assert_eq!(w.fingerprint(), v.fingerprint());
    assert_eq!(w.to_served_json(), json);
    // Unknown keys are ignored; special and eos are optional.
    let x = Vocabulary::from_served_json(r#"{"tokens":["YQ==",""],"model":"m"}"#).unwrap();
    assert_eq!(x.len(), 2);
    assert_eq!(x.eos_id(), None);
    // Loaded from a file by content.
    let d = TempDir::new("served");
    let l = Vocabulary::load(d.write("vocab-served.json", &json)).unwrap();
    assert_eq!(l.fingerprint(), v.fingerprint());
}

#[test]
fn served_copy_of_a_real_adapter_keeps_fingerprint() {
    let v =
        grid_vocab::sentencepiece::parse_sentencepiece(&sp_model(SpVariant::Plain), "sp").unwrap();
    let s = Vocabulary::from_served_json(&v.to_served_json()).unwrap();
    assert_eq!(s.fingerprint(), v.fingerprint());
    assert_eq!(s.alias_classes(), v.alias_classes());
    assert_eq!(s.special_ids(), v.special_ids());
    assert_eq!(s.eos_id(), v.eos_id());
    assert!(s.is_byte_complete());
}

#[test]
fn fingerprint_covers_bytes_specials_and_eos() {
    let base = || vec![b"a".to_vec(), b"b".to_vec(), b"</s>".to_vec()];
    let f = |t: Vec<Vec<u8>>, s: &[u32], e: Option<u32>| {
        Vocabulary::from_served(t, s, e)
            .unwrap()
            .fingerprint()
            .to_string()
    };
    let a = f(base(), &[2], Some(2));
    assert_eq!(a.len(), 32);
    assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
    assert_eq!(a, f(base(), &[], Some(2)), "eos is special either way");
    let mut changed = base();
    changed[1] = b"c".to_vec();
    assert_ne!(a, f(changed, &[2], Some(2)));
    assert_ne!(a, f(base(), &[1, 2], Some(2)));
    assert_ne!(a, f(base(), &[2], None));
    // Token boundaries matter, not just the concatenation.
    assert_ne!(
        f(vec![b"ab".to_vec(), b"c".to_vec()], &[], None),
        f(vec![b"a".to_vec(), b"bc".to_vec()], &[], None)
    );
}

// ---------------------------------------------------------------- malformed input

#[test]
fn malformed_inputs_are_typed_errors() {
    let d = TempDir::new("bad");
    // Missing path.
    assert!(matches!(
        Vocabulary::load(d.path().join("nope")),
        Err(VocabError::Io { .. })
    ));
    // Empty directory.
    assert!(matches!(
        Vocabulary::load(d.path()),
        Err(VocabError::UnknownFormat { .. })
    ));
    // Garbage.
    assert!(matches!(
        Vocabulary::load(d.write("garbage.bin", [0xde, 0xad, 0xbe, 0xef])),
        Err(VocabError::UnknownFormat { .. })
    ));
    assert!(matches!(
        Vocabulary::load(d.write("empty", "")),
        Err(VocabError::UnknownFormat { .. })
    ));
    // Broken JSON.
    assert!(matches!(
        Vocabulary::load(d.write("broken.json", "{\"model\": ")),
        Err(VocabError::Json { .. })
    ));
    // tiktoken with a bad line.
    let mut tk = tiktoken_file();
    tk.push_str("!!!notbase64 300\n");
    assert!(matches!(
        Vocabulary::load(d.write("bad.tiktoken", tk)),
        Err(VocabError::Malformed { .. })
    ));
    let dup = "YQ== 0\nYg== 0\n";
    assert!(matches!(
        Vocabulary::load(d.write("dup.tiktoken", dup)),
        Err(VocabError::Malformed { .. })
    ));
    // A merge naming a token not in the vocabulary.
    let md = TempDir::new("bad-merges");
    md.write("vocab.json", vocab_json(&[]));
    md.write("merges.txt", "#version: 0.2\nĠ t\nq zzz\n");
    assert!(matches!(
        Vocabulary::load(md.path()),
        Err(VocabError::Malformed { .. })
    ));
    md.write("merges.txt", "#version: 0.2\nĠ t extra\n");
    assert!(matches!(
        Vocabulary::load(md.path()),
        Err(VocabError::Malformed { .. })
    ));
    // Two tokens with one id.
    let dd = TempDir::new("dup-ids");
    dd.write("vocab.json", r#"{"a": 0, "b": 0}"#);
    dd.write("merges.txt", "");
    assert!(matches!(
        Vocabulary::load(dd.path()),
        Err(VocabError::Malformed { .. })
    ));
    // Non-integer id.
    dd.write("vocab.json", r#"{"a": "zero"}"#);
    assert!(matches!(
        Vocabulary::load(dd.path()),
        Err(VocabError::Malformed { .. })
    ));
    // Unsupported tokenizer.json models.
    let wp = json!({"model": {"type": "WordPiece", "vocab": {"a": 0}}}).to_string();
    assert!(matches!(
        Vocabulary::load(d.write("wp.json", wp)),
        Err(VocabError::Unsupported(_))
    ));
    let meta = json!({
        "pre_tokenizer": {"type": "Metaspace", "replacement": "▁"},
        "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}
    })
    .to_string();
    assert!(matches!(
        Vocabulary::load(d.write("meta.json", meta)),
        Err(VocabError::Unsupported(_))
    ));
    // Served: special out of range, bad base64, eos not an id.
    assert!(matches!(
        Vocabulary::from_served_json(r#"{"tokens":["YQ=="],"special":[1]}"#),
        Err(VocabError::IdOutOfRange { id: 1, len: 1, .. })
    ));
    assert!(matches!(
        Vocabulary::from_served_json(r#"{"tokens":["@@"]}"#),
        Err(VocabError::Malformed { .. })
    ));
    assert!(matches!(
        Vocabulary::from_served_json(r#"{"tokens":["YQ=="],"eos":"x"}"#),
        Err(VocabError::Malformed { .. })
    ));
    assert!(matches!(
        Vocabulary::from_served(vec![b"a".to_vec()], &[], Some(5)),
        Err(VocabError::IdOutOfRange { .. })
    ));
    // Errors print usefully.
    let e = Vocabulary::from_served_json(r#"{"tokens":["YQ=="],"special":[7]}"#).unwrap_err();
    assert!(e.to_string().contains("out of range"), "{e}");
}

#[test]
fn vocabulary_is_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Vocabulary>();
    let v = std::sync::Arc::new(
        grid_vocab::sentencepiece::parse_sentencepiece(&sp_model(SpVariant::Plain), "sp").unwrap(),
    );
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let v = v.clone();
            std::thread::spawn(move || v.encode("ab c"))
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), vec![266, 259, 262]);
    }
}
