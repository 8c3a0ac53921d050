//! The byte scanner: the lexeme in progress ([`Scan`]) and the one step that pushes a byte
//! on it ([`scan_byte`]), maximal munch with requeueing, handing every finished lexeme to a
//! [`ScanHost`]. It reads the language's automata and no parser state: the host answers
//! its one question (is a relation expected at a `schema.table` dot). The recognizer
//! ([`crate::recognizer`]) hosts it with the parser stacks, the cache's stack-free walk
//! ([`crate::cache`]) with a log of emissions; the CD class keys read a scan through
//! [`TrailKey`].

use smallvec::{smallvec, SmallVec};

use crate::language::Language;
use crate::lexer::dfa::DEAD;
use crate::lexer::words::{WordTrie, OFF};
use crate::lexer::{is_ident_start, is_word_byte};
use crate::termset::TermSet;

/// The lexeme in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Scan {
    /// Automaton state after `rem`.
    pub q: u32,
    /// Word-trie node after `rem` (or off the trie).
    pub w: u32,
    /// The bytes of the lexeme so far.
    pub rem: SmallVec<[u8; 24]>,
    /// The longest prefix of `rem` that is a lexeme, with its candidate terminals.
    pub last: Option<(u32, TermSet)>,
    /// Input offset of `rem[0]`.
    pub start: usize,
}

impl Scan {
    /// No lexeme in progress; the next one starts at input offset `start`.
    pub(crate) fn fresh(lang: &Language, start: usize) -> Scan {
        Scan {
            q: lang.dfa().start,
            w: WordTrie::ROOT,
            rem: SmallVec::new(),
            last: None,
            start,
        }
    }
}

/// Why [`scan_byte`] stopped.
pub(crate) enum ScanStop<E> {
    /// The scanner itself refused, at input offset `at`: no parser is involved.
    Scan { at: usize, kind: StopKind },
    /// The lexeme starting at `at` was refused by the host's [`ScanHost::lexeme`].
    Lexeme { at: usize, refused: E },
    /// The dot of a `schema.table` word was read and the host could not say whether a
    /// relation is expected.
    Undecided,
}

/// What [`scan_byte`] needs from its caller: where its lexemes go, and the one question the
/// scanner asks of the parser.
pub(crate) trait ScanHost {
    type Refused;

    /// A finished lexeme (ignored ones included) with its candidates, start offset and
    /// bytes; `Err` refuses it.
    fn lexeme(&mut self, cands: TermSet, at: usize, bytes: &[u8]) -> Result<(), Self::Refused>;

    /// Whether the parser expects a relation where the lexeme in progress started, asked at
    /// the dot of a `schema.table` word; `None` when the host cannot tell.
    fn relation_expected(&mut self) -> Option<bool>;
}

/// The scanner alone: pushes one byte on `scan` (maximal munch, requeueing what follows the
/// longest lexeme) and hands every finished lexeme, ignored ones included, to the host with
/// its candidates and start offset. It reads no parser state but the host's answer at the
/// dot of a `schema.table` word, so the mask walk and the cache's stack-free walk share it.
/// On failure `scan` is half-updated and must be dropped.
pub(crate) fn scan_byte<H: ScanHost>(
    lang: &Language,
    scan: &mut Scan,
    offset: &mut usize,
    byte: u8,
    host: &mut H,
) -> Result<(), ScanStop<H::Refused>> {
    let mut queue: SmallVec<[u8; 32]> = smallvec![byte];
    // Input offset of queue[0].
    let mut base = *offset;
    *offset += 1;
    let mut i = 0;
    while i < queue.len() {
        let b = queue[i];
        let q = if scan.q == DEAD {
            DEAD
        } else {
            lang.dfa().next(scan.q, b)
        };
        let w = if lang.words.is_separator(scan.w, b) {
            match host.relation_expected() {
                Some(true) => lang.words.step(scan.w, b),
                Some(false) => OFF,
                None => return Err(ScanStop::Undecided),
            }
        } else {
            lang.words.step(scan.w, b)
        };
        if !lang.live(q, w).is_empty() {
            if scan.rem.is_empty() {
                scan.start = base + i;
            }
            scan.q = q;
            scan.w = w;
            scan.rem.push(b);
            let c = lang.candidates(q, w);
            if !c.is_empty() {
                scan.last = Some((scan.rem.len() as u32, c));
            }
            i += 1;
            continue;
        }
        if scan.rem.is_empty() {
            return Err(ScanStop::Scan {
                at: base + i,
                kind: StopKind::NoLexeme,
            });
        }
        let start = scan.start;
        let Some((len, cands)) = scan.last else {
            return Err(ScanStop::Scan {
                at: start,
                kind: StopKind::NoLexeme,
            });
        };
        let len = len as usize;
        let next = scan.rem.get(len).copied().unwrap_or(b);
        if splits(lang, &cands, scan.rem[len - 1], next) {
            return Err(ScanStop::Scan {
                at: start,
                kind: StopKind::SplitWord,
            });
        }
        host.lexeme(cands, start, &scan.rem[..len])
            .map_err(|refused| ScanStop::Lexeme { at: start, refused })?;
        let mut requeued: SmallVec<[u8; 32]> = SmallVec::from_slice(&scan.rem[len..]);
        requeued.extend_from_slice(&queue[i..]);
        base = start + len;
        queue = requeued;
        i = 0;
        *scan = Scan::fresh(lang, base);
    }
    Ok(())
}

/// Why recognition stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopKind {
    /// No terminal's lexeme starts with these bytes.
    NoLexeme,
    /// A lexeme would end between two word characters.
    SplitWord,
    /// A lexeme no stack can take; its candidate terminals.
    Unexpected(TermSet),
    /// End of input where the statement is not complete.
    Incomplete,
}

/// Whether ending a lexeme whose candidates are `cands` and last byte `last` before the byte
/// `next` splits what PostgreSQL reads as one token or refuses: two word bytes (`1ex`,
/// `salariesx`), or a numeric literal and an identifier's start (`98.n`: "trailing junk
/// after numeric literal").
pub(crate) fn splits(lang: &Language, cands: &TermSet, last: u8, next: u8) -> bool {
    (is_word_byte(last) && is_word_byte(next))
        || (cands.intersects(&lang.terms().numeric) && is_ident_start(next))
}

/// The trailing lexeme in progress as the viability check reads it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TrailKey {
    /// No lexeme in progress (then the rest is irrelevant: the prefix is viable).
    pub idle: bool,
    /// Automaton state and word-trie node of the lexeme so far: they give the terminals it
    /// can still become.
    pub q: u32,
    pub w: u32,
    /// When the lexeme has an accepting prefix shorter than itself, the check may cut it back
    /// there: the prefix's candidates, whether the prefix ends in a word character, and the
    /// bytes after it (they are scanned again).
    pub cutback: Option<(TermSet, bool, SmallVec<[u8; 8]>)>,
}

impl TrailKey {
    pub(crate) fn of(s: &Scan) -> TrailKey {
        let cutback = s.last.as_ref().and_then(|(len, c)| {
            let len = *len as usize;
            (len < s.rem.len() && len > 0)
                .then(|| (*c, is_word_byte(s.rem[len - 1]), s.rem[len..].into()))
        });
        TrailKey {
            idle: s.rem.is_empty(),
            q: s.q,
            w: s.w,
            cutback,
        }
    }
}
