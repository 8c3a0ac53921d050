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
use crate::trie::pure::{clear_byte, has_byte, ByteSet};

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
    pub(crate) start: usize,
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

/// A run of bytes the lexeme in progress absorbs, found by [`absorbing_run`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Absorbing {
    /// The bytes the run's first may be ([`crate::trie::pure::ByteSet`]).
    pub(crate) lead: ByteSet,
    /// The bytes each later one may be.
    pub(crate) bytes: ByteSet,
    /// The longest run: every spelling of `1..=len` bytes, the first of `lead` and the
    /// others of `bytes`, qualifies.
    pub(crate) len: usize,
}

/// Byte classes of the automaton: (class, one byte of it, its number of bytes).
type Classes = SmallVec<[(u8, u8, u16); 64]>;

/// The automaton's byte classes, each with one byte of it and its number of bytes.
fn byte_classes(dfa: &crate::lexer::dfa::LexDfa) -> Classes {
    let mut size = [0u16; 256];
    let mut classes: Classes = SmallVec::new();
    for b in 0..=255u8 {
        let c = dfa.class(b);
        if size[usize::from(c)] == 0 {
            classes.push((c, b, 0));
        }
        size[usize::from(c)] += 1;
    }
    for (c, _, n) in &mut classes {
        *n = size[usize::from(*c)];
    }
    classes
}

/// The automaton states a run may be in after some number of its bytes.
type States = SmallVec<[u32; 4]>;

/// From the states `start`, the classes that all keep going to states that `ok` takes, step
/// after step, and for how many steps (at most `max`; `max` when the run has no end), and
/// the states the run may end in: each step keeps those of the classes so far that go
/// where most of their bytes go, of the states `ok` takes, or to a state alike to that
/// one.
///
/// Alike: a state whose live terminals differ from its own only in `shadow` (terminals
/// each lexeme of which is another's, none of them wanted here: `%within`), and that `ok`
/// takes or refuses after each of the classes just as it does. Inside a string literal
/// that may still be the decline's reason (`'no table`) a byte outside the reason's
/// characters leaves a state where it may not; where no reason is wanted the two are one
/// to the run, and the run is every byte of a string, as without the decline. Every state
/// a kept class leads to is still checked by `ok`, so a state taken for alike never makes
/// the run admit what it should not.
fn narrow(
    dfa: &crate::lexer::dfa::LexDfa,
    start: States,
    mut classes: Classes,
    max: usize,
    ok: impl Fn(u32) -> bool,
    shadow: &TermSet,
) -> (Classes, usize, States) {
    let mut states = start;
    let mut len = 0;
    let mut tally: SmallVec<[(u32, u32); 16]> = SmallVec::new();
    while len < max {
        // The live state most bytes of the run lead to: in text that must stay valid UTF-8
        // most bytes kill a lexeme at a character's start (every continuation byte), and
        // the run is the bytes that do not.
        tally.clear();
        for &(_, b, n) in &classes {
            for &q in &states {
                let to = dfa.next(q, b);
                match tally.iter_mut().find(|(s, _)| *s == to) {
                    Some((_, k)) => *k += u32::from(n),
                    None => tally.push((to, u32::from(n))),
                }
            }
        }
        let Some(&(to, _)) = tally
            .iter()
            .filter(|&&(s, _)| ok(s))
            .max_by_key(|&&(s, n)| (n, std::cmp::Reverse(s)))
        else {
            break;
        };
        let alike = |s: u32| {
            s == to
                || (!shadow.is_empty()
                    && ok(s)
                    && dfa.live(s) != dfa.live(to)
                    && dfa.live(s).minus(shadow) == dfa.live(to).minus(shadow)
                    && classes
                        .iter()
                        .all(|&(_, b, _)| ok(dfa.next(s, b)) == ok(dfa.next(to, b))))
        };
        let targets: SmallVec<[u32; 4]> = tally
            .iter()
            .map(|&(s, _)| s)
            .filter(|&s| alike(s))
            .collect();
        let before = classes.len();
        classes.retain(|&mut (_, b, _)| states.iter().all(|&q| targets.contains(&dfa.next(q, b))));
        let mut next: States = SmallVec::new();
        for &(_, b, _) in &classes {
            for &q in &states {
                let to = dfa.next(q, b);
                if !next.contains(&to) {
                    next.push(to);
                }
            }
        }
        next.sort_unstable();
        let fixed = next == states && classes.len() == before;
        states = next;
        len += 1;
        if fixed {
            // The same states on the same bytes: the run never ends.
            len = max;
        }
    }
    (classes, len, states)
}

/// The bytes that, fed in any order and number up to a length at `scan`, keep the lexeme
/// in progress going and able to become a terminal of `allowed` or an ignored one whatever
/// its bytes so far spell: inside a quoted name where a free name is viable, every byte but
/// `"`, up to the name's 63 bytes; inside a string literal, every byte but the quote, the
/// backslash and the control bytes, without end; inside a word, the word bytes, but for
/// the first those that go on a word of the lexicon (after `D`, `I` may spell `DISTINCT`).
/// `None` when there is no such run.
///
/// Exact by construction: for `k < len` every byte the run may have at `k + 1` moves the
/// automaton from each state of the set `Q_k` (`{q}` at first) into the set `Q_(k+1)`,
/// whose every state is alive and can still become a terminal of `allowed ∪ skip` that no
/// lexicon decides (so the word trie's node cannot take it away, [`Language::live`]); the
/// sets hold more than one state only where a string may still be the decline's reason
/// and none is wanted ([`narrow`]); so no lexeme is handed over, and a dot is never the
/// separator of a `schema.table` word (it is in neither set when the trie node could read
/// it as one). So a token spelled with `1..=len` bytes of the run is allowed and
/// context-independent (case (a) of [`crate::mask`]), at any stacks with this `allowed`.
/// The first byte is apart so that the later ones are one set whatever the lexeme so far.
pub(crate) fn absorbing_run(
    lang: &Language,
    scan: &Scan,
    allowed: &TermSet,
    max_len: usize,
) -> Option<Absorbing> {
    if scan.rem.is_empty() || scan.q == DEAD || max_len == 0 {
        return None;
    }
    let dfa = lang.dfa();
    let t = lang.terms();
    let wanted = allowed.union(&t.skip);
    let decided = t.lexicon_all.union(&t.dynamic_all);
    let ok = |to: u32| to != DEAD && dfa.live(to).minus(&decided).intersects(&wanted);
    let shadow = t.within.minus(&wanted);
    let all = byte_classes(dfa);
    let (lead, first, q1) = narrow(dfa, smallvec![scan.q], all.clone(), 1, ok, &shadow);
    if first == 0 {
        return None;
    }
    let (rest, more, _) = narrow(dfa, q1, all, max_len - 1, ok, &shadow);
    let set_of = |classes: &[(u8, u8, u16)]| -> ByteSet {
        let mut bytes: ByteSet = [0; 4];
        for b in 0..=255u8 {
            if classes.iter().any(|&(c, _, _)| c == dfa.class(b)) {
                bytes[usize::from(b / 64)] |= 1 << (b % 64);
            }
        }
        bytes
    };
    let mut lead = set_of(&lead);
    // With no byte after the first, the later ones' set reads no token: the first's serves.
    let mut bytes = if more == 0 { lead } else { set_of(&rest) };
    // A dot after a word-trie node outside quotes may be a `schema.table` separator, which
    // asks the parser; the run's quotes could take an inside node outside.
    if scan.w != OFF
        && (!lang.words.in_quotes(scan.w) || has_byte(&lead, b'"') || has_byte(&bytes, b'"'))
    {
        clear_byte(&mut lead, b'.');
        clear_byte(&mut bytes, b'.');
    }
    Some(Absorbing {
        lead,
        bytes,
        len: 1 + more,
    })
}

/// The word bytes a fresh lexeme may start with and go on with: ASCII letters and `_`, and
/// with `high` the bytes ≥ 0x80, letters to PostgreSQL's scanner (a multi-byte character's
/// bytes each go on an identifier there; a dialect whose identifiers are ASCII ends every
/// word on them). No digit, which cannot start an identifier.
pub(crate) fn word_bytes(high: bool) -> ByteSet {
    let mut bytes: ByteSet = [0; 4];
    for b in (b'a'..=b'z').chain(b'A'..=b'Z').chain([b'_']) {
        bytes[usize::from(b / 64)] |= 1 << (b % 64);
    }
    if high {
        bytes[2] = u64::MAX;
        bytes[3] = u64::MAX;
    }
    bytes
}

/// The run of [`word_bytes`] where they start a fresh lexeme with nothing handed to the
/// parser: no lexeme is in progress, or the one in progress is a whole ignored lexeme (a
/// blank) that each of these bytes ends. Every spelling of `1..=len` of them then stays in
/// one lexeme that can still become a terminal of `allowed` or an ignored one that no
/// lexicon decides, whatever the word-trie node: so such a token is allowed and
/// context-independent (case (a) of [`crate::mask`]), at any stacks with this `allowed`.
/// `None` when there is no such run.
///
/// The run takes the bytes ≥ 0x80 too where that costs it no length (where the automaton
/// keeps them in the identifier: a large vocabulary holds many words of other scripts),
/// and is the ASCII one otherwise.
///
/// Exact by construction: `len` is the largest `k` such that every automaton state reached
/// from the start state on `1..=k` of the bytes is alive with an undecided terminal of
/// `allowed ∪ skip` ([`Language::live`] holds those whatever the word-trie node), found
/// over the states reachable on the bytes (once no new state appears, none ever will, and
/// the run has no end). The blank is handed over as an ignored lexeme, which the walk and
/// the parser skip, and ends in a non-word byte, so ending it splits no word.
pub(crate) fn word_run(
    lang: &Language,
    scan: &Scan,
    allowed: &TermSet,
    max_len: usize,
) -> Option<Absorbing> {
    let wide = word_run_of(lang, scan, allowed, max_len, word_bytes(true));
    if wide.is_some_and(|r| r.len == max_len) {
        return wide;
    }
    let ascii = word_run_of(lang, scan, allowed, max_len, word_bytes(false));
    match (wide, ascii) {
        (Some(w), Some(a)) if w.len >= a.len => Some(w),
        (_, a) => a,
    }
}

/// [`word_run`] over the bytes of `bytes`, a set of word bytes.
fn word_run_of(
    lang: &Language,
    scan: &Scan,
    allowed: &TermSet,
    max_len: usize,
    bytes: ByteSet,
) -> Option<Absorbing> {
    let dfa = lang.dfa();
    let t = lang.terms();
    let in_bytes = || (0..=255u8).filter(|&b| has_byte(&bytes, b));
    if let Some(&last) = scan.rem.last() {
        let whole_blank = matches!(scan.last, Some((len, c))
            if len as usize == scan.rem.len() && c.intersects(&t.skip)
                && !splits(lang, &c, last, b'a'));
        let ended = in_bytes().all(|b| {
            let q = if scan.q == DEAD {
                DEAD
            } else {
                dfa.next(scan.q, b)
            };
            lang.live(q, lang.words.step(scan.w, b)).is_empty()
        });
        if !(whole_blank && ended) {
            return None;
        }
    }
    let wanted = allowed.union(&t.skip);
    let decided = t.lexicon_all.union(&t.dynamic_all);
    let ok = |q: u32| q != DEAD && dfa.live(q).minus(&decided).intersects(&wanted);
    // One byte of each of the automaton's classes among the bytes: the others go where it
    // goes.
    let mut classes: SmallVec<[(u8, u8); 8]> = SmallVec::new();
    for b in in_bytes() {
        if !classes.iter().any(|&(c, _)| c == dfa.class(b)) {
            classes.push((dfa.class(b), b));
        }
    }
    let run = |len: usize| {
        (len > 0).then_some(Absorbing {
            lead: bytes,
            bytes,
            len,
        })
    };
    // The states first reached after `k` bytes, and every state reached so far.
    let mut frontier: Vec<u32> = vec![dfa.start];
    let mut seen: rustc_hash::FxHashSet<u32> = rustc_hash::FxHashSet::default();
    let mut len = 0;
    while len < max_len {
        let mut next = Vec::new();
        for &q in &frontier {
            for &(_, b) in &classes {
                let to = dfa.next(q, b);
                if !ok(to) {
                    return run(len);
                }
                if seen.insert(to) {
                    next.push(to);
                }
            }
        }
        len += 1;
        if next.is_empty() {
            // Every state one more byte reaches was met before: the run never ends.
            len = max_len;
            break;
        }
        frontier = next;
    }
    run(len)
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
///
/// Without a cut back, the check reads the lexeme's automaton state and word-trie node only
/// through the terminals they can still become ([`Language::live`]), so the key holds that
/// set rather than the pair: after a `,` in a select list, the tokens spelling the start of
/// any of a wide schema's names end on as many word-trie nodes, but on a handful of live
/// sets, and they form that many classes rather than one per node.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TrailKey {
    /// No lexeme in progress (then the rest is irrelevant: the prefix is viable, and `live`
    /// is empty and `cutback` `None`).
    pub(crate) idle: bool,
    /// The terminals the lexeme so far can still become.
    pub(crate) live: TermSet,
    /// When the lexeme has an accepting prefix shorter than itself, the check may cut it
    /// back there.
    pub(crate) cutback: Option<Cutback>,
}

/// What the check reads when it may cut the trailing lexeme back: the search over the bytes
/// that could follow steps the lexeme's automaton state and word-trie node themselves.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Cutback {
    /// Automaton state and word-trie node of the lexeme so far.
    pub(crate) q: u32,
    pub(crate) w: u32,
    /// The accepting prefix's candidates.
    pub(crate) cands: TermSet,
    /// Whether the prefix ends in a word character.
    pub(crate) word: bool,
    /// The bytes after the prefix (they are scanned again).
    pub(crate) rest: SmallVec<[u8; 8]>,
}

impl TrailKey {
    pub(crate) fn of(lang: &Language, s: &Scan) -> TrailKey {
        if s.rem.is_empty() {
            return TrailKey {
                idle: true,
                live: TermSet::EMPTY,
                cutback: None,
            };
        }
        let cutback = s.last.as_ref().and_then(|&(len, cands)| {
            let len = len as usize;
            (len < s.rem.len() && len > 0).then(|| Cutback {
                q: s.q,
                w: s.w,
                cands,
                word: is_word_byte(s.rem[len - 1]),
                rest: s.rem[len..].into(),
            })
        });
        TrailKey {
            idle: false,
            live: lang.live(s.q, s.w),
            cutback,
        }
    }
}
