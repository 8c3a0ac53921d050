//! Where a name may begin inside the tokens of a vocabulary: the index the mask uses to find
//! the few tokens whose verdict the statement's own names can change (see
//! [`crate::mask`] and [`crate::scope`]).
//!
//! A name is an identifier, so a lexeme spelling it starts where a lexeme may start inside
//! a token's bytes: at the token's first byte, after a byte that is not a word byte, or at
//! a double quote (the scanner never ends a lexeme between two word bytes). The index
//! lists every such position of every token, ordered by the bytes from there to the end,
//! folded to lower case (a superset for quoted names, which match exactly).

use std::cmp::Ordering;

use smallvec::SmallVec;

use super::pure::ByteSet;
use super::TokenTrie;
use crate::lexer::is_word_byte;

/// One position where a lexeme may start inside a token.
#[derive(Clone, Copy, Debug)]
struct Start {
    /// The token's trie node.
    node: u32,
    /// The token's spelling in [`TokenStarts::bytes`].
    at: u32,
    len: u16,
    /// Where in the spelling the lexeme would start.
    offset: u16,
}

/// The lexeme starts of every token of one trie, built once per trie.
#[derive(Debug, Default)]
pub(crate) struct TokenStarts {
    /// Every token's spelling, back to back.
    bytes: Vec<u8>,
    /// Ordered by the folded bytes from the start to the end of the token.
    starts: Vec<Start>,
    /// Per id: its node and the first byte of its spelling (`u32::MAX` for an id no node
    /// spells: a special one).
    node_of: Vec<u32>,
    first_byte: Vec<u8>,
    /// Tokens in which two names may start (one could introduce what the other uses): a
    /// name introduced and used within one token is in no list the stacks hold.
    multi: Vec<u32>,
    /// Those of `multi` in which a name may use one an earlier lexeme of the token itself
    /// introduces ([`uses_own_name`] of the spelling alone): the ones to check after an
    /// empty remainder.
    multi_own: Vec<u32>,
    /// Per token of `multi`: whether it is in `multi_own`, and the first bytes (folded) of
    /// the names that may begin in it, or `None` when one of them has no byte yet (a quote
    /// at the end): a name the lexeme in progress introduces is used in the token only by
    /// one of them.
    multi_uses: Vec<(bool, Option<ByteSet>)>,
    /// Per token node, ascending: where its spelling is in `bytes`.
    spelled: Vec<(u32, u32, u16)>,
    /// Where a name may begin in a token right after the end of a comment (`*/`, or a line
    /// end that ends a `--` comment) and blanks, a dot among them or not: by node and
    /// offset. `closing` has every such place, `closed` those whose comment also opens in
    /// the token.
    closing: Vec<(u32, u16)>,
    closed: Vec<(u32, u16)>,
}

fn fold_cmp(a: &[u8], b: &[u8]) -> Ordering {
    a.iter()
        .map(u8::to_ascii_lowercase)
        .cmp(b.iter().map(u8::to_ascii_lowercase))
}

/// Whether a lexeme may start at `i` of `t`.
pub(crate) fn starts_at(t: &[u8], i: usize) -> bool {
    i == 0 || !is_word_byte(t[i - 1]) || t[i] == b'"'
}

/// Whether a name may begin at `i` of `t`: a word byte or a quote where a lexeme may
/// start.
fn name_at(t: &[u8], i: usize) -> bool {
    starts_at(t, i) && (is_word_byte(t[i]) || t[i] == b'"')
}

impl TokenStarts {
    pub(crate) fn build(trie: &TokenTrie) -> TokenStarts {
        let mut ts = TokenStarts {
            node_of: vec![u32::MAX; trie.n_ids()],
            first_byte: vec![0; trie.n_ids()],
            ..TokenStarts::default()
        };
        // Depth-first over the trie, keeping the path's bytes.
        let mut path: Vec<u8> = Vec::new();
        let mut ends: Vec<usize> = Vec::new();
        for n in 1..trie.len() {
            while ends.last().is_some_and(|&e| n >= e) {
                ends.pop();
                path.pop();
            }
            path.push(trie.byte(n));
            ends.push(n + trie.size(n));
            let ids = trie.ids(n);
            if ids.is_empty() {
                continue;
            }
            for id in ids.iter() {
                ts.node_of[id as usize] = n as u32;
                ts.first_byte[id as usize] = path[0];
            }
            let at = ts.bytes.len() as u32;
            ts.bytes.extend_from_slice(&path);
            let len = path.len().min(u16::MAX as usize) as u16;
            ts.spelled.push((n as u32, at, len));
            let mut names = 0;
            for i in 0..usize::from(len) {
                if name_at(&path, i) {
                    names += 1;
                }
                if starts_at(&path, i) {
                    ts.starts.push(Start {
                        node: n as u32,
                        at,
                        len,
                        offset: i as u16,
                    });
                }
            }
            for (o, opened) in after_comments(&path) {
                ts.closing.push((n as u32, o));
                if opened {
                    ts.closed.push((n as u32, o));
                }
            }
            if names >= 2 {
                ts.multi.push(n as u32);
                let own = uses_own_name(&path, 0);
                if own {
                    ts.multi_own.push(n as u32);
                }
                ts.multi_uses.push((own, use_firsts(&path)));
            }
        }
        let bytes = std::mem::take(&mut ts.bytes);
        ts.starts
            .sort_unstable_by(|a, b| fold_cmp(suffix(&bytes, a), suffix(&bytes, b)));
        ts.bytes = bytes;
        ts
    }

    /// The node of `id`, if a non-special token.
    pub(crate) fn node_of(&self, id: u32) -> Option<usize> {
        match self.node_of.get(id as usize) {
            Some(&n) if n != u32::MAX => Some(n as usize),
            _ => None,
        }
    }

    /// The first byte of `id`'s spelling (0 for a special id).
    pub(crate) fn first_byte(&self, id: u32) -> u8 {
        self.first_byte.get(id as usize).copied().unwrap_or(0)
    }

    /// The spelling of token node `node` (empty for a node without a token).
    pub(crate) fn spelling(&self, node: u32) -> &[u8] {
        match self.spelled.binary_search_by_key(&node, |e| e.0) {
            Ok(k) => {
                let (_, at, len) = self.spelled[k];
                &self.bytes[at as usize..at as usize + usize::from(len)]
            }
            Err(_) => &[],
        }
    }

    /// Where a name may begin in a token right after a comment ends there (and blanks, a
    /// dot among them or not): `(node, offset)`; with `opened`, only where the comment
    /// opens in the token too.
    pub(crate) fn after_comment(&self, opened: bool) -> &[(u32, u16)] {
        if opened {
            &self.closed
        } else {
            &self.closing
        }
    }

    /// Tokens in which two names may start.
    pub(crate) fn multi(&self) -> &[u32] {
        &self.multi
    }

    /// The tokens of [`TokenStarts::multi`] read after the lexeme in progress `rem` in
    /// which a name may use one that `rem`'s lexeme or an earlier one of the token
    /// introduces ([`uses_own_name`] of `rem` and the spelling); `out` gets their nodes.
    /// The others can use only names already introduced, which the stacks hold.
    pub(crate) fn multi_using_own(&self, rem: &[u8], out: &mut Vec<u32>) {
        if rem.is_empty() {
            out.extend_from_slice(&self.multi_own);
            return;
        }
        if !(0..rem.len()).any(|a| name_at(rem, a)) {
            // Only the token's own lexemes introduce a name ([`uses_own_name`] of the
            // spelling alone is a superset then: `rem` only takes starts away).
            out.extend_from_slice(&self.multi_own);
            return;
        }
        // The first bytes of the names that may begin in `rem`, or `None` for any.
        let firsts = use_firsts(rem);
        let mut s: SmallVec<[u8; 96]> = SmallVec::new();
        for (&node, &(own, uses)) in self.multi.iter().zip(&self.multi_uses) {
            let may = own
                || match (uses, firsts) {
                    (Some(u), Some(f)) => u.iter().zip(&f).any(|(x, y)| x & y != 0),
                    _ => true,
                };
            if !may {
                continue;
            }
            s.clear();
            s.extend_from_slice(rem);
            s.extend_from_slice(self.spelling(node));
            if uses_own_name(&s, rem.len()) {
                out.push(node);
            }
        }
    }

    /// Tokens in which a lexeme may start that is a spelling `name` (folded) cut short by
    /// the token's end, or all of it followed by a byte that is not a word byte (which ends
    /// it); `at_start` keeps only lexemes starting at the token's first byte. `out` gets
    /// their nodes (a superset of the tokens whose scan holds such a lexeme).
    pub(crate) fn matching(&self, name: &[u8], at_start: bool, out: &mut Vec<u32>) {
        self.matching_starts(name, at_start, 1, |node, _| out.push(node))
    }

    /// [`TokenStarts::matching`], calling `f` with each token's node and where in it the
    /// lexeme starts, without the prefixes of `name` shorter than `shortest` bytes (a
    /// token whose lexeme is cut short before is not kept for them).
    pub(crate) fn matching_starts(
        &self,
        name: &[u8],
        at_start: bool,
        shortest: usize,
        mut f: impl FnMut(u32, u16),
    ) {
        if name.is_empty() {
            return;
        }
        let keep = |s: &Start| !at_start || s.offset == 0;
        // A prefix of `name` to the token's end.
        for k in shortest.max(1)..=name.len() {
            self.ending_with(&name[..k], |s| {
                if keep(s) {
                    f(s.node, s.offset)
                }
            });
        }
        // All of `name`, then a byte that ends it.
        let lo = self
            .starts
            .partition_point(|s| fold_cmp(suffix(&self.bytes, s), name) != Ordering::Greater);
        for s in &self.starts[lo..] {
            let u = suffix(&self.bytes, s);
            if u.len() <= name.len() || fold_cmp(&u[..name.len()], name) != Ordering::Equal {
                break;
            }
            if keep(s) && !is_word_byte(u[name.len()]) {
                f(s.node, s.offset);
            }
        }
    }
}

impl TokenStarts {
    /// Calls `f` on every start whose bytes to the token's end are `p` (folded).
    fn ending_with(&self, p: &[u8], mut f: impl FnMut(&Start)) {
        let lo = self
            .starts
            .partition_point(|s| fold_cmp(suffix(&self.bytes, s), p) == Ordering::Less);
        let hi = self
            .starts
            .partition_point(|s| fold_cmp(suffix(&self.bytes, s), p) != Ordering::Greater);
        self.starts[lo..hi].iter().for_each(&mut f);
    }

    /// Tokens ending in a lone double quote (the start of a quoted name, cut short there)
    /// where `before` (the token's bytes before that quote) holds: `f` gets each one's node
    /// and the quote's place in it.
    pub(crate) fn ending_in_quote(
        &self,
        before: impl Fn(&[u8]) -> bool,
        mut f: impl FnMut(u32, u16),
    ) {
        self.ending_with(b"\"", |s| {
            let at = s.at as usize;
            if before(&self.bytes[at..at + usize::from(s.offset)]) {
                f(s.node, s.offset);
            }
        });
    }
}

/// The places of `t` where a name may begin right after a comment ends and blanks (one dot
/// among them or not), each with whether a comment opens before that end in `t`.
fn after_comments(t: &[u8]) -> SmallVec<[(u16, bool); 2]> {
    let mut out = SmallVec::new();
    // Where the last comment end so far is, and whether an opener came before it.
    let mut end: Option<(usize, bool)> = None;
    let mut opener = false;
    for i in 0..t.len() {
        if t[i..].starts_with(b"/*") || t[i..].starts_with(b"--") {
            opener = true;
        }
        if i >= 1 && (t[i - 1] == b'\n' || t[i - 1] == b'\r') || i >= 2 && t[i - 2..i] == *b"*/" {
            end = Some((i, opener));
        }
        if let Some((e, opened)) = end {
            let between = &t[e..i];
            if name_at(t, i)
                && between
                    .iter()
                    .all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | b'.'))
                && between.iter().filter(|&&b| b == b'.').count() <= 1
                && i <= usize::from(u16::MAX)
            {
                out.push((i as u16, opened));
            }
        }
    }
    out
}

/// A name lexeme at `i` of `s` (where [`name_at`] holds): its spelling without an opening
/// quote (escaped quotes left doubled), where it ends, and whether it ends within `s` (a
/// word at a byte that is not a word byte, a quoted name at its closing quote).
fn name_lexeme(s: &[u8], i: usize) -> (&[u8], usize, bool) {
    if s[i] == b'"' {
        let mut k = i + 1;
        while k < s.len() {
            if s[k] == b'"' {
                if s.get(k + 1) == Some(&b'"') {
                    k += 2;
                    continue;
                }
                return (&s[i + 1..k], k + 1, true);
            }
            k += 1;
        }
        return (&s[i + 1..], s.len(), false);
    }
    let e = (i..s.len())
        .find(|&k| !is_word_byte(s[k]))
        .unwrap_or(s.len());
    (&s[i..e], e, e < s.len())
}

/// The first bytes (folded) of the names that may begin in `t`, or `None` when one of them
/// has none in `t` (a quote at its end).
fn use_firsts(t: &[u8]) -> Option<ByteSet> {
    let mut set: ByteSet = [0; 4];
    for j in (0..t.len()).filter(|&j| name_at(t, j)) {
        let at = if t[j] == b'"' { j + 1 } else { j };
        let b = t.get(at)?.to_ascii_lowercase();
        set[usize::from(b / 64)] |= 1 << (b % 64);
    }
    Some(set)
}

/// Whether a name lexeme of `s` starting at or after `from` may use a name that an earlier
/// name lexeme of `s` introduces: the earlier one ends within `s`, before the later one
/// starts, and the later one spells it (folded, quotes aside), or a prefix of it where `s`
/// cuts it short.
///
/// A superset of the tokens whose verdict such a name changes: a name the statement
/// introduces is the spelling of one of its identifier lexemes ([`crate::scope`]), so a
/// use of one introduced by the lexeme in progress (`s[..from]`) or inside the token
/// spells it after it; any position where a name may begin is tried, whatever the lexemes
/// around it turn out to be.
pub(crate) fn uses_own_name(s: &[u8], from: usize) -> bool {
    let starts: SmallVec<[usize; 16]> = (0..s.len()).filter(|&i| name_at(s, i)).collect();
    for &i in &starts {
        let (intro, end, whole) = name_lexeme(s, i);
        if !whole {
            continue;
        }
        for &j in starts.iter().filter(|&&j| j >= end.max(from)) {
            let (used, _, used_whole) = name_lexeme(s, j);
            let spells = if used_whole {
                used.eq_ignore_ascii_case(intro)
            } else {
                used.len() <= intro.len() && used.eq_ignore_ascii_case(&intro[..used.len()])
            };
            if spells {
                return true;
            }
        }
    }
    false
}

fn suffix<'a>(bytes: &'a [u8], s: &Start) -> &'a [u8] {
    &bytes[(s.at as usize + usize::from(s.offset))..(s.at as usize + usize::from(s.len))]
}

#[cfg(test)]
mod tests {
    use super::*;
    use grid_vocab::Vocabulary;

    #[test]
    fn a_later_name_that_spells_an_earlier_one_uses_it() {
        for (s, from, uses) in [
            ("n ORDER BY n", 0, true),
            (") s WHERE s.n", 0, true),
            ("x ORDER BY \"x\"", 0, true),
            ("\"Total\" ORDER BY \"To", 0, true),
            ("\"Total\" ORDER BY total", 0, true),
            ("\"a\"\"b\" ORDER BY \"a\"\"b\"", 0, true),
            // The lexeme in progress introduces `cnt`; the token uses it, or not.
            ("cnt ORDER BY cnt", 3, true),
            ("cnt ORDER BY c", 3, true),
            ("cnt ORDER BY n", 3, false),
            ("cnt ORDER BY cnts", 3, false),
            // A use starts at or after `from`, after the name it uses.
            ("x x", 2, true),
            ("x x", 3, false),
            ("xx", 0, false),
            // No name ends before the other starts.
            ("\"Tot", 0, false),
            ("\"a b", 0, false),
            ("a b", 0, false),
            ("a, b", 0, false),
            ("", 0, false),
        ] {
            assert_eq!(uses_own_name(s.as_bytes(), from), uses, "{s:?} from {from}");
        }
    }

    /// The vocabulary of `toks` (the first is EOS), its trie and the trie's starts.
    fn starts_of_vocab(toks: &[&str]) -> (Vocabulary, TokenTrie, TokenStarts) {
        let toks = toks.iter().map(|s| s.as_bytes().to_vec()).collect();
        let v = Vocabulary::from_served(toks, &[0], Some(0)).unwrap();
        let trie = TokenTrie::build(&v).unwrap();
        let st = TokenStarts::build(&trie);
        (v, trie, st)
    }

    fn starts_of(toks: &[&str]) -> (TokenTrie, TokenStarts) {
        let (_, trie, st) = starts_of_vocab(toks);
        (trie, st)
    }

    /// The prefilters of `multi_using_own` (no name in the remainder; first bytes) keep
    /// every token the check of the whole spelling keeps.
    #[test]
    fn the_tokens_using_own_names_equal_the_check_of_each() {
        let (_, st) = starts_of(&[
            "<eos>",
            "n ORDER BY n",
            " ORDER BY \"",
            "a b",
            "x x",
            ") s WHERE s.n",
            "\"a\" a",
            "a\"",
            "b, a",
            "\"",
            "\"\"",
            " \"To",
            "tal\" BY \"To",
            "ab cd ab",
            "1 a",
            ".x y",
            "_ _",
            "$a $a",
            "A a",
        ]);
        for rem in [
            "", "n", "x", "\"", "\"a", "\"a\"", "a ", " ", "(", "cnt", "s", "ab", "A", "1", "$",
            "\"To", "To", "b,",
        ] {
            let rem = rem.as_bytes();
            let mut got = Vec::new();
            st.multi_using_own(rem, &mut got);
            got.sort_unstable();
            let mut want: Vec<u32> = st
                .multi()
                .iter()
                .copied()
                .filter(|&n| uses_own_name(&[rem, st.spelling(n)].concat(), rem.len()))
                .collect();
            want.sort_unstable();
            // A superset of the check, and every token the check keeps.
            assert!(
                want.iter().all(|n| got.contains(n)),
                "after {:?}: {got:?} misses some of {want:?}",
                String::from_utf8_lossy(rem)
            );
        }
    }

    #[test]
    fn finds_the_tokens_a_name_may_start_in() {
        let (v, trie, st) = starts_of_vocab(&[
            "<eos>", "t", " t", "To", ".tot", "total", "total,", "totals", " TOTAL)", "xt", "_t",
            "a b", "(\"Tot",
        ]);
        let spell = |nodes: &[u32]| -> Vec<String> {
            let mut v: Vec<String> = nodes
                .iter()
                .map(|&n| String::from_utf8_lossy(&trie.spelling(n as usize)).into_owned())
                .collect();
            v.sort();
            v.dedup();
            v
        };
        let mut out = Vec::new();
        st.matching(b"total", false, &mut out);
        assert_eq!(
            spell(&out),
            vec![" TOTAL)", " t", "(\"Tot", ".tot", "To", "t", "total", "total,"]
        );
        out.clear();
        st.matching(b"\"tot", false, &mut out);
        assert_eq!(spell(&out), vec!["(\"Tot"]);
        out.clear();
        st.matching(b"al", true, &mut out);
        assert!(out.is_empty());
        // A superset: the second start of `("Tot` is inside the quotes.
        assert_eq!(spell(st.multi()), vec!["(\"Tot", "a b"]);
        // Neither uses a name it introduces: the quote of `("Tot` is not closed, `a` is not
        // `b`; nor after a lexeme in progress that `a b` does not spell again.
        let mut own = Vec::new();
        st.multi_using_own(b"", &mut own);
        assert!(own.is_empty(), "{:?}", spell(&own));
        st.multi_using_own(b"x", &mut own);
        assert!(own.is_empty(), "{:?}", spell(&own));
        // `"x` + `a b`: whether `xa` is quoted or follows a closing quote, `b` is not it.
        st.multi_using_own(b"\"x", &mut own);
        assert!(own.is_empty(), "{:?}", spell(&own));
        // `b` + `a b`: the last `b` may begin `ba` again; `b ` + `a b`: it may be `b`.
        st.multi_using_own(b"b", &mut own);
        assert_eq!(spell(&own), vec!["a b"]);
        own.clear();
        st.multi_using_own(b"b ", &mut own);
        assert_eq!(spell(&own), vec!["a b"]);
        let id = v
            .iter()
            .find(|(_, b)| *b == b".tot")
            .map(|(i, _)| i)
            .unwrap();
        assert_eq!(st.first_byte(id), b'.');
        assert_eq!(trie.spelling(st.node_of(id).unwrap()), b".tot".to_vec());
        assert_eq!(st.spelling(st.node_of(id).unwrap() as u32), b".tot");
    }
}
