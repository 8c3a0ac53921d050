//! SentencePiece `.model` files (protobuf `ModelProto`), e.g. Llama-2 and Mistral.
//!
//! Token bytes: `▁` (U+2581) becomes a space, BYTE pieces `<0xNN>` become the byte,
//! UNKNOWN and CONTROL pieces are special (bytes = their literal text).

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::path::Path;

use rustc_hash::FxHashMap;

use crate::error::{Result, VocabError};
use crate::protobuf::{FieldReader, WireValue};
use crate::vocab::{Encode, Encoder, Parts, VocabKind, Vocabulary};

/// SentencePiece's whitespace stand-in.
const SPACE: char = '\u{2581}';

/// `ModelProto.SentencePiece.Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PieceType {
    /// Ordinary piece (1, the default).
    Normal,
    /// The unknown piece (2).
    Unknown,
    /// Control symbol such as `<s>`, `</s>`, `[INST]` (3).
    Control,
    /// User-defined symbol, always matched whole in the input (4).
    UserDefined,
    /// Unused piece: never emitted by the encoder (5).
    Unused,
    /// Byte-fallback piece `<0xNN>` (6).
    Byte,
}

impl PieceType {
    fn from_proto(v: u64) -> Option<Self> {
        Some(match v {
            1 => PieceType::Normal,
            2 => PieceType::Unknown,
            3 => PieceType::Control,
            4 => PieceType::UserDefined,
            5 => PieceType::Unused,
            6 => PieceType::Byte,
            _ => return None,
        })
    }
}

/// One piece of a model: its text, score and type.
#[derive(Debug, Clone, PartialEq)]
pub struct Piece {
    /// The piece text, with `▁` for spaces.
    pub piece: String,
    /// Its score (BPE: merge priority, higher first; unigram: log probability).
    pub score: f32,
    /// Its type.
    pub kind: PieceType,
}

/// The parts of a `ModelProto` this crate uses (proto2 defaults applied).
#[derive(Debug, Clone, PartialEq)]
pub struct SpModel {
    /// `pieces`, in id order.
    pub pieces: Vec<Piece>,
    /// `trainer_spec.model_type`: 1 unigram (default), 2 BPE, 3 word, 4 char.
    pub model_type: u64,
    /// `trainer_spec.byte_fallback`.
    pub byte_fallback: bool,
    /// `trainer_spec.treat_whitespace_as_suffix`.
    pub whitespace_as_suffix: bool,
    /// `trainer_spec.eos_piece` (default `</s>`).
    pub eos_piece: String,
    /// `trainer_spec.eos_id` (default 2; −1 disables).
    pub eos_id: i64,
    /// `normalizer_spec.name` (e.g. `identity`, `nmt_nfkc`).
    pub normalizer_name: String,
    /// Whether `normalizer_spec.precompiled_charsmap` is non-empty.
    pub has_charsmap: bool,
    /// `normalizer_spec.add_dummy_prefix` (default true).
    pub add_dummy_prefix: bool,
    /// `normalizer_spec.remove_extra_whitespaces` (default true).
    pub remove_extra_whitespaces: bool,
    /// `normalizer_spec.escape_whitespaces` (default true).
    pub escape_whitespaces: bool,
}

fn fields<'a>(buf: &'a [u8], what: &str) -> Result<Vec<(u32, WireValue<'a>)>> {
    FieldReader::new(buf)
        .collect::<std::result::Result<Vec<_>, String>>()
        .map_err(|d| VocabError::malformed(what, format!("protobuf: {d}")))
}

fn utf8(b: &[u8], what: &str, field: &str) -> Result<String> {
    String::from_utf8(b.to_vec())
        .map_err(|_| VocabError::malformed(what, format!("{field} is not UTF-8")))
}

impl SpModel {
    /// Parses `ModelProto` bytes.
    pub fn parse(data: &[u8], what: &str) -> Result<Self> {
        let mut m = SpModel {
            pieces: Vec::new(),
            model_type: 1,
            byte_fallback: false,
            whitespace_as_suffix: false,
            eos_piece: "</s>".into(),
            eos_id: 2,
            normalizer_name: String::new(),
            has_charsmap: false,
            add_dummy_prefix: true,
            remove_extra_whitespaces: true,
            escape_whitespaces: true,
        };
        let wrong = |f: &str| {
            VocabError::malformed(what, format!("protobuf: field {f} has the wrong wire type"))
        };
        for (num, val) in fields(data, what)? {
            match (num, val) {
                (1, WireValue::Bytes(b)) => {
                    let mut p = Piece {
                        piece: String::new(),
                        score: 0.0,
                        kind: PieceType::Normal,
                    };
                    for (n, v) in fields(b, what)? {
                        match (n, v) {
                            (1, WireValue::Bytes(s)) => p.piece = utf8(s, what, "piece")?,
                            (2, WireValue::Fixed32(bits)) => p.score = f32::from_bits(bits),
                            (3, WireValue::Varint(t)) => {
                                p.kind = PieceType::from_proto(t).ok_or_else(|| {
                                    VocabError::malformed(
                                        what,
                                        format!("piece {} has unknown type {t}", m.pieces.len()),
                                    )
                                })?
                            }
                            (1..=3, _) => return Err(wrong("SentencePiece.piece/score/type")),
                            _ => {}
                        }
                    }
                    m.pieces.push(p);
                }
                (2, WireValue::Bytes(b)) => {
                    for (n, v) in fields(b, what)? {
                        match (n, v) {
                            (3, WireValue::Varint(t)) => m.model_type = t,
                            (24, WireValue::Varint(t)) => m.whitespace_as_suffix = t != 0,
                            (35, WireValue::Varint(t)) => m.byte_fallback = t != 0,
                            (42, WireValue::Varint(t)) => m.eos_id = t as i64 as i32 as i64,
                            (47, WireValue::Bytes(s)) => m.eos_piece = utf8(s, what, "eos_piece")?,
                            (3 | 24 | 35 | 42 | 47, _) => return Err(wrong("TrainerSpec")),
                            _ => {}
                        }
                    }
                }
                (3, WireValue::Bytes(b)) => {
                    for (n, v) in fields(b, what)? {
                        match (n, v) {
                            (1, WireValue::Bytes(s)) => {
                                m.normalizer_name = utf8(s, what, "normalizer name")?
                            }
                            (2, WireValue::Bytes(s)) => m.has_charsmap = !s.is_empty(),
                            (3, WireValue::Varint(t)) => m.add_dummy_prefix = t != 0,
                            (4, WireValue::Varint(t)) => m.remove_extra_whitespaces = t != 0,
                            (5, WireValue::Varint(t)) => m.escape_whitespaces = t != 0,
                            (1..=5, _) => return Err(wrong("NormalizerSpec")),
                            _ => {}
                        }
                    }
                }
                (1..=3, _) => return Err(wrong("ModelProto")),
                _ => {}
            }
        }
        if m.pieces.is_empty() {
            return Err(VocabError::malformed(
                what,
                "no pieces (not a SentencePiece model?)",
            ));
        }
        Ok(m)
    }
}

/// Parses `<0xNN>`.
fn byte_piece(s: &str) -> Option<u8> {
    let hex = s.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// A merge candidate of SentencePiece's BPE: higher score first, then leftmost.
struct Cand {
    score: f32,
    left: usize,
    right: usize,
    size: usize,
}

impl PartialEq for Cand {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Cand {}
impl PartialOrd for Cand {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Cand {
    fn cmp(&self, o: &Self) -> Ordering {
        self.score
            .total_cmp(&o.score)
            .then_with(|| o.left.cmp(&self.left))
    }
}

/// A symbol of the text being merged: a byte range of the normalized text in a linked
/// list; `len == 0` marks a symbol merged into its left neighbour.
#[derive(Clone, Copy)]
struct Sym {
    start: usize,
    len: usize,
    prev: usize,
    next: usize,
    frozen: bool,
}

const NONE: usize = usize::MAX;

/// Encoder of a SentencePiece model (`SentencePieceProcessor.encode(text)`).
#[derive(Debug)]
pub(crate) struct SpEncoder {
    /// NORMAL, USER_DEFINED and UNUSED pieces (what BPE may merge into).
    pieces: FxHashMap<String, u32>,
    /// UNKNOWN, CONTROL and BYTE pieces (looked up first, as SentencePiece does).
    reserved: FxHashMap<String, u32>,
    scores: Vec<f32>,
    kinds: Vec<PieceType>,
    /// User-defined pieces by first byte, longest first.
    user_defined: Vec<Vec<String>>,
    byte_ids: [Option<u32>; 256],
    unk_id: Option<u32>,
    byte_fallback: bool,
    bpe: bool,
    add_dummy_prefix: bool,
    remove_extra_whitespaces: bool,
    escape_whitespaces: bool,
    whitespace_as_suffix: bool,
    max_piece_len: usize,
}

impl Encode for SpEncoder {
    fn encode(&self, text: &str) -> Vec<u32> {
        let norm = self.normalize_escaped(text);
        if norm.is_empty() {
            return Vec::new();
        }
        let (segments, rev) = if self.bpe {
            self.bpe_segments(&norm)
        } else {
            (self.greedy_segments(&norm), FxHashMap::default())
        };
        let mut out = Vec::with_capacity(segments.len());
        for (start, len) in segments {
            self.emit(&norm[start..start + len], &rev, &mut out);
        }
        out
    }

    /// The normalized text with `▁` shown as a space: what the ids decode to.
    fn normalize<'a>(&self, text: &'a str) -> Cow<'a, str> {
        Cow::Owned(self.normalize_escaped(text).replace(SPACE, " "))
    }
}

impl SpEncoder {
    fn new(m: &SpModel, what: &str) -> Result<Self> {
        let mut pieces = FxHashMap::default();
        let mut reserved = FxHashMap::default();
        let mut user_defined: Vec<Vec<String>> = vec![Vec::new(); 256];
        let mut byte_ids = [None; 256];
        let mut unk_id = None;
        let mut max_piece_len = 1;
        for (id, p) in m.pieces.iter().enumerate() {
            let id = id as u32;
            let normal = matches!(
                p.kind,
                PieceType::Normal | PieceType::UserDefined | PieceType::Unused
            );
            let map = if normal { &mut pieces } else { &mut reserved };
            if map.insert(p.piece.clone(), id).is_some() {
                return Err(VocabError::malformed(
                    what,
                    format!("piece {:?} is defined twice", p.piece),
                ));
            }
            if normal {
                max_piece_len = max_piece_len.max(p.piece.len());
            }
            match p.kind {
                PieceType::UserDefined => {
                    if let Some(&b) = p.piece.as_bytes().first() {
                        user_defined[usize::from(b)].push(p.piece.clone());
                    }
                }
                PieceType::Unknown => unk_id = unk_id.or(Some(id)),
                PieceType::Byte => {
                    let b = byte_piece(&p.piece).ok_or_else(|| {
                        VocabError::malformed(
                            what,
                            format!("BYTE piece {:?} is not <0xNN>", p.piece),
                        )
                    })?;
                    byte_ids[usize::from(b)] = Some(id);
                }
                _ => {}
            }
        }
        for list in &mut user_defined {
            list.sort_by_key(|s| std::cmp::Reverse(s.len()));
        }
        Ok(SpEncoder {
            pieces,
            reserved,
            scores: m.pieces.iter().map(|p| p.score).collect(),
            kinds: m.pieces.iter().map(|p| p.kind).collect(),
            user_defined,
            byte_ids,
            unk_id,
            byte_fallback: m.byte_fallback,
            bpe: m.model_type == 2,
            add_dummy_prefix: m.add_dummy_prefix,
            remove_extra_whitespaces: m.remove_extra_whitespaces,
            escape_whitespaces: m.escape_whitespaces,
            whitespace_as_suffix: m.whitespace_as_suffix,
            max_piece_len,
        })
    }

    /// The normalizer with an identity character map: optional whitespace cleanup,
    /// dummy prefix (or suffix), spaces escaped to `▁`.
    fn normalize_escaped(&self, text: &str) -> String {
        let mut s = String::with_capacity(text.len() + 8);
        let body: String = if self.remove_extra_whitespaces {
            let mut out = String::with_capacity(text.len());
            for (i, w) in text.split(' ').filter(|w| !w.is_empty()).enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(w);
            }
            out
        } else {
            text.to_string()
        };
        if body.is_empty() {
            return s;
        }
        let space = if self.escape_whitespaces { SPACE } else { ' ' };
        if self.add_dummy_prefix && !self.whitespace_as_suffix {
            s.push(space);
        }
        if self.escape_whitespaces {
            s.extend(body.chars().map(|c| if c == ' ' { SPACE } else { c }));
        } else {
            s.push_str(&body);
        }
        if self.add_dummy_prefix && self.whitespace_as_suffix {
            s.push(space);
        }
        s
    }

    fn lookup(&self, piece: &str) -> Option<u32> {
        self.reserved
            .get(piece)
            .or_else(|| self.pieces.get(piece))
            .copied()
    }

    /// Emits one final symbol: its id, re-split when it is an UNUSED piece, or its bytes
    /// as `<0xNN>` pieces when unknown and byte fallback is on.
    fn emit(&self, piece: &str, rev: &FxHashMap<String, (String, String)>, out: &mut Vec<u32>) {
        let id = self.lookup(piece);
        match id {
            Some(id) if self.kinds[id as usize] == PieceType::Unused => {
                if let Some((l, r)) = rev.get(piece) {
                    self.emit(l, rev, out);
                    self.emit(r, rev, out);
                } else {
                    out.push(id);
                }
            }
            Some(id) if self.kinds[id as usize] != PieceType::Unknown => out.push(id),
            _ => {
                if self.byte_fallback {
                    out.extend(piece.bytes().filter_map(|b| self.byte_ids[usize::from(b)]));
                } else if let Some(u) = self.unk_id {
                    out.push(u);
                }
            }
        }
    }

    /// Initial symbols: user-defined pieces (longest match, frozen) or single characters.
    fn initial_symbols(&self, norm: &str) -> Vec<Sym> {
        let bytes = norm.as_bytes();
        let mut syms = Vec::with_capacity(norm.len());
        let mut pos = 0;
        while pos < norm.len() {
            let rest = &norm[pos..];
            let ud = self.user_defined[usize::from(bytes[pos])]
                .iter()
                .find(|u| rest.starts_with(u.as_str()));
            let (len, frozen) = match ud {
                Some(u) => (u.len(), true),
                None => (rest.chars().next().map_or(1, char::len_utf8), false),
            };
            let i = syms.len();
            syms.push(Sym {
                start: pos,
                len,
                prev: if i == 0 { NONE } else { i - 1 },
                next: i + 1,
                frozen,
            });
            pos += len;
        }
        if let Some(last) = syms.last_mut() {
            last.next = NONE;
        }
        syms
    }

    /// SentencePiece's BPE (`bpe_model.cc`): merge the adjacent pair whose concatenation
    /// is a piece with the highest score, leftmost first on ties, until none is left.
    /// Returns the final symbols as byte ranges, and for every UNUSED piece formed the
    /// pair it was formed from (`rev_merge`, for re-splitting it on output).
    #[allow(clippy::type_complexity)]
    fn bpe_segments(
        &self,
        norm: &str,
    ) -> (Vec<(usize, usize)>, FxHashMap<String, (String, String)>) {
        let mut syms = self.initial_symbols(norm);
        let mut heap = BinaryHeap::new();
        let mut rev = FxHashMap::default();
        let mut push = |heap: &mut BinaryHeap<Cand>, syms: &[Sym], l: usize, r: usize| {
            if l == NONE || r == NONE || syms[l].frozen || syms[r].frozen {
                return;
            }
            let size = syms[l].len + syms[r].len;
            let merged = &norm[syms[l].start..syms[l].start + size];
            if let Some(&id) = self.pieces.get(merged) {
                heap.push(Cand {
                    score: self.scores[id as usize],
                    left: l,
                    right: r,
                    size,
                });
                if self.kinds[id as usize] == PieceType::Unused {
                    let left = norm[syms[l].start..syms[l].start + syms[l].len].to_string();
                    let right = norm[syms[r].start..syms[r].start + syms[r].len].to_string();
                    rev.insert(merged.to_string(), (left, right));
                }
            }
        };
        for i in 1..syms.len() {
            push(&mut heap, &syms, i - 1, i);
        }
        while let Some(top) = heap.pop() {
            let (l, r) = (top.left, top.right);
            if syms[l].len == 0 || syms[r].len == 0 || syms[l].len + syms[r].len != top.size {
                continue;
            }
            syms[l].len = top.size;
            syms[l].next = syms[r].next;
            if syms[r].next != NONE {
                let n = syms[r].next;
                syms[n].prev = l;
            }
            syms[r].len = 0;
            push(&mut heap, &syms, syms[l].prev, l);
            push(&mut heap, &syms, l, syms[l].next);
        }
        let mut out = Vec::new();
        let mut i = if syms.is_empty() { NONE } else { 0 };
        while i != NONE {
            out.push((syms[i].start, syms[i].len));
            i = syms[i].next;
        }
        (out, rev)
    }

    /// Non-BPE models (unigram, word, char) are approximated by greedy longest match
    /// over the pieces; `Vocabulary::encoding_is_exact` reports false for them.
    fn greedy_segments(&self, norm: &str) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < norm.len() {
            let rest = &norm[pos..];
            let first = rest.chars().next().map_or(1, char::len_utf8);
            let mut best = first;
            let mut end = first;
            for c in rest[first..].chars() {
                end += c.len_utf8();
                if end > self.max_piece_len {
                    break;
                }
                if self.pieces.contains_key(&rest[..end]) {
                    best = end;
                }
            }
            out.push((pos, best));
            pos += best;
        }
        out
    }
}

/// Builds a vocabulary from a parsed model.
pub fn from_sp_model(m: &SpModel, what: &str) -> Result<Vocabulary> {
    let encoder = SpEncoder::new(m, what)?;
    let mut tokens = Vec::with_capacity(m.pieces.len());
    let mut special = Vec::new();
    for (id, p) in m.pieces.iter().enumerate() {
        let bytes = match p.kind {
            PieceType::Byte => vec![byte_piece(&p.piece).unwrap_or(0)],
            PieceType::Unknown | PieceType::Control => {
                special.push(id as u32);
                p.piece.as_bytes().to_vec()
            }
            PieceType::Normal | PieceType::UserDefined | PieceType::Unused => {
                p.piece.replace(SPACE, " ").into_bytes()
            }
        };
        tokens.push(bytes);
    }
    let eos = m
        .pieces
        .iter()
        .position(|p| p.piece == m.eos_piece && p.kind == PieceType::Control)
        .map(|i| i as u32)
        .or_else(|| {
            u32::try_from(m.eos_id)
                .ok()
                .filter(|&i| (i as usize) < m.pieces.len())
        });
    let exact = m.model_type == 2 && (!m.has_charsmap || m.normalizer_name == "identity");
    Vocabulary::assemble(
        Parts {
            kind: VocabKind::SentencePiece,
            tokens,
            special,
            eos,
            encoder: Encoder::Tokenizer(Box::new(encoder)),
            encoding_exact: exact,
            dummy_prefix: m.add_dummy_prefix,
        },
        what,
    )
}

/// Parses SentencePiece `ModelProto` bytes into a vocabulary.
pub fn parse_sentencepiece(data: &[u8], what: &str) -> Result<Vocabulary> {
    from_sp_model(&SpModel::parse(data, what)?, what)
}

/// Loads a SentencePiece `.model` file.
pub fn load_sentencepiece(path: &Path) -> Result<Vocabulary> {
    let data = std::fs::read(path).map_err(|e| VocabError::io(path, e))?;
    parse_sentencepiece(&data, &path.display().to_string())
}
