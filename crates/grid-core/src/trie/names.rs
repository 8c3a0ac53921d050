//! Tokens that spell the beginning of a name after a short lead: where a name can begin at
//! one place of a token only (a qualified column, right after its qualifier's dot), the
//! candidates are found by walking the token trie along the names, in time proportional to
//! the tokens that match, rather than by looking each name's prefixes up in
//! [`super::starts::TokenStarts`] (which finds every place in every token, and costs a
//! search per prefix of every name: a wide relation's columns made that the step's cost).

use super::TokenTrie;
use crate::lexer::is_word_byte;

/// What a token spells before the name: blanks, and when `dot`, one dot among them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Lead {
    pub(crate) dot: bool,
}

/// The bytes a lead may hold besides the dot.
fn is_blank(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | b'\x0b' | b'\x0c')
}

/// The token nodes of `trie` whose spelling is a lead (`lead`; none when `lead` is `None`)
/// and then, compared folded to lower case, a prefix of one of `names` (`prefixes` gets
/// those of an unquoted name, `beyond` those of a quoted one, whose case the fold does not
/// decide), or one of them whole and a byte that ends it and anything after (every token
/// below: `beyond`).
///
/// `names` are spellings folded to lower case, sorted and distinct (a quoted one with its
/// quotes; an unquoted one is lower case). A name's first byte is in the token: a token
/// that is only a lead is in neither list. A superset of the tokens whose scan reads such a
/// name there; a token of `prefixes` spells, after its lead, the beginning of an unquoted
/// spelling of a name, exactly.
pub(crate) fn spelling_names(
    trie: &TokenTrie,
    names: &[&[u8]],
    lead: Option<Lead>,
    prefixes: &mut Vec<u32>,
    beyond: &mut Vec<u32>,
) {
    if names.is_empty() {
        return;
    }
    let mut walk = Walk {
        trie,
        names,
        prefixes,
        beyond,
    };
    match lead {
        None => walk.name(0, 0, 0, names.len()),
        Some(l) => walk.lead(0, l.dot),
    }
}

struct Walk<'a> {
    trie: &'a TokenTrie,
    names: &'a [&'a [u8]],
    prefixes: &'a mut Vec<u32>,
    beyond: &'a mut Vec<u32>,
}

impl Walk<'_> {
    /// From `node`, a lead so far (its dot still to come when `dot`): the name may begin
    /// here once the dot is read, or the lead go on.
    fn lead(&mut self, node: usize, dot: bool) {
        if !dot {
            self.name(node, 0, 0, self.names.len());
        }
        for c in self.trie.children(node) {
            match self.trie.byte(c) {
                b if is_blank(b) => self.lead(c, dot),
                b'.' if dot => self.lead(c, false),
                _ => {}
            }
        }
    }

    /// From `node`, where the path's last `d` bytes spell (folded) the first `d` bytes of
    /// each of `names[lo..hi]`.
    fn name(&mut self, node: usize, d: usize, lo: usize, hi: usize) {
        // A name the path spells whole sorts first among those it begins.
        let whole = self.names[lo].len() == d;
        let from = lo + usize::from(whole);
        for c in self.trie.children(node) {
            let b = self.trie.byte(c).to_ascii_lowercase();
            if whole && d > 0 && ends(self.names[lo], b) {
                self.subtree(c);
                continue;
            }
            let l = from + self.names[from..hi].partition_point(|n| n[d] < b);
            let h = l + self.names[l..hi].partition_point(|n| n[d] == b);
            if l < h {
                if self.trie.token(c).is_some() {
                    // Names of one range share their first byte: quoted or not, alike.
                    if self.names[l].first() == Some(&b'"') {
                        self.beyond.push(c as u32);
                    } else {
                        self.prefixes.push(c as u32);
                    }
                }
                self.name(c, d + 1, l, h);
            }
        }
    }

    /// Every token node of the subtree of `node`.
    fn subtree(&mut self, node: usize) {
        for n in node..node + self.trie.size(node) {
            if self.trie.token(n).is_some() {
                self.beyond.push(n as u32);
            }
        }
    }
}

/// Whether byte `b` after all of `name` ends its lexeme: any byte but a word byte after an
/// unquoted name; any but a quote (which would double) after a quoted one.
fn ends(name: &[u8], b: u8) -> bool {
    if name.first() == Some(&b'"') {
        b != b'"'
    } else {
        !is_word_byte(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use grid_vocab::Vocabulary;

    #[test]
    fn finds_the_tokens_that_begin_a_name_after_a_lead() {
        let toks: Vec<Vec<u8>> = [
            "<eos>",
            "a",
            "ag",
            "age",
            "age)",
            "ages",
            " age",
            ". age",
            ".ag",
            "..age",
            "x.age",
            "\"ag",
            "\"age\"",
            "\"age\"\"",
            " ",
            ".",
            "b",
            "AGE,",
            "\tag",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
        let v = Vocabulary::from_served(toks, &[0], Some(0)).unwrap();
        let trie = TokenTrie::build(&v).unwrap();
        let spelled = |lead: Option<Lead>| {
            let (mut prefixes, mut beyond) = (Vec::new(), Vec::new());
            let names: Vec<&[u8]> = vec![b"\"age\"", b"age"];
            spelling_names(&trie, &names, lead, &mut prefixes, &mut beyond);
            let spell = |n: &u32| String::from_utf8_lossy(&trie.spelling(*n as usize)).into_owned();
            assert!(prefixes
                .iter()
                .all(|n| !spell(n).ends_with([')', ',', '"'])));
            let mut s: Vec<String> = prefixes.iter().chain(&beyond).map(spell).collect();
            s.sort();
            s
        };
        assert_eq!(
            spelled(None),
            ["\"ag", "\"age\"", "AGE,", "a", "ag", "age", "age)"]
        );
        assert_eq!(
            spelled(Some(Lead { dot: false })),
            ["\tag", " age", "\"ag", "\"age\"", "AGE,", "a", "ag", "age", "age)"]
        );
        assert_eq!(spelled(Some(Lead { dot: true })), [". age", ".ag"]);
    }
}
