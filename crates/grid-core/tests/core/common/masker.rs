//! The differential fixture of the mask tests: a synthetic vocabulary ([`vocab_with`]) and
//! a plain and a cached masker over one vocabulary ([`MaskFixture`]), every mask of which
//! is checked against the trial-parse oracle, in itself, and cache on against cache off.

use std::sync::Arc;

use grid_core::cache::MaskCache;
use grid_core::cd_class::CdKey;
use grid_core::mask::{Mask, Masker};
use grid_core::oracle::{oracle_mask, static_oracle_mask};
use grid_core::trie::TokenTrie;
use grid_core::{Config, Session};
use grid_vocab::Vocabulary;

use super::fixtures::assert_same_mask;

/// `<eos>` (id 0, EOS and special), `<pad>` (id 1, special), the 256 single bytes (ids 2 to
/// 257), then `fragments` in order: a spelling given more than once (in `fragments` or as a
/// byte) makes an alias class.
pub fn vocab_with(fragments: &[&str]) -> Vocabulary {
    let mut toks: Vec<Vec<u8>> = vec![b"<eos>".to_vec(), b"<pad>".to_vec()];
    toks.extend((0..=255u8).map(|b| vec![b]));
    toks.extend(fragments.iter().map(|f| f.as_bytes().to_vec()));
    Vocabulary::from_served(toks, &[1], Some(0)).expect("vocabulary")
}

/// A plain and a cached masker over one vocabulary; [`MaskFixture::checked`] computes a
/// mask with both and asserts them equal to each other and to the oracle's.
pub struct MaskFixture {
    pub vocab: Vocabulary,
    /// Without a cache: the mask [`MaskFixture::checked`] returns.
    pub plain: Masker,
    /// With a cache of its own (4 namespaces).
    pub cached: Masker,
    /// Whether [`MaskFixture::checked`] also checks the Dynamic class against the oracle of
    /// the language without the statement's names ([`MaskFixture::checking_dynamic_class`]).
    dynamic_class_checked: bool,
    /// Dynamic classes ([`CdKey::Dynamic`]), over every check.
    pub dynamic_classes: usize,
    /// Ids in Dynamic classes (ids only the statement's names allow), over every check.
    pub dynamic_ids: usize,
}

impl MaskFixture {
    pub fn new(vocab: Vocabulary) -> MaskFixture {
        let trie = Arc::new(TokenTrie::build(&vocab).expect("trie"));
        let cache = Arc::new(MaskCache::new(4));
        MaskFixture {
            plain: Masker::new(trie.clone()),
            cached: Masker::with_cache(trie, cache),
            vocab,
            dynamic_class_checked: false,
            dynamic_classes: 0,
            dynamic_ids: 0,
        }
    }

    /// The same fixture whose [`MaskFixture::checked`] also asserts that the mask's Dynamic
    /// class is exactly what the oracle allows and the oracle of the language without the
    /// statement's names ([`static_oracle_mask`]) does not, and that the latter allows
    /// nothing the mask does not.
    pub fn checking_dynamic_class(mut self) -> MaskFixture {
        self.dynamic_class_checked = true;
        self
    }

    /// Up to 12 of `ids`, each with its spelling.
    pub fn spell(&self, ids: &[u32]) -> Vec<String> {
        ids.iter()
            .take(12)
            .map(|&id| {
                format!(
                    "{id}:{:?}",
                    String::from_utf8_lossy(self.vocab.token_bytes(id))
                )
            })
            .collect()
    }

    /// The plain mask at `cfg`, asserted
    /// - equal to the trial-parse oracle's (ids, EOS, counts);
    /// - consistent in itself ([`MaskFixture::consistent`]);
    /// - equal to the cached one in everything but the walk's cost (ids, EOS, counts, CI/CD
    ///   split, CD classes and their keys, forced run);
    /// - with [`MaskFixture::checking_dynamic_class`], its Dynamic class exactly what the
    ///   names add.
    ///
    /// Counts the Dynamic classes and their ids.
    pub fn checked(&mut self, s: &mut Session<'_>, cfg: &Config, what: &str) -> Mask {
        let fast = self.plain.mask(s, cfg);
        let slow = oracle_mask(s, cfg, &self.vocab);
        let vs = format!("{what}: fast vs oracle");
        assert_same_mask(&fast, &slow, &self.vocab, &vs, false);
        self.consistent(&fast, what);
        let mut on = self.cached.mask(s, cfg);
        on.visited = fast.visited;
        let vs = format!("{what}: cache on vs off");
        assert_same_mask(&on, &fast, &self.vocab, &vs, true);
        if on != fast {
            panic!(
                "{what}: cache on and off differ: classes {} vs {}, forced {:?} vs {:?}, keys {:?} vs {:?}",
                on.cd_classes.len(),
                fast.cd_classes.len(),
                on.forced,
                fast.forced,
                on.cd_classes.iter().map(|c| &c.key).collect::<Vec<_>>(),
                fast.cd_classes.iter().map(|c| &c.key).collect::<Vec<_>>(),
            );
        }
        let dynamic: Vec<u32> = fast
            .cd_classes
            .iter()
            .filter(|c| *c.key == CdKey::Dynamic)
            .flat_map(|c| c.ids.iter().copied())
            .collect();
        if self.dynamic_class_checked {
            self.dynamic_class_is_what_the_names_add(s, cfg, &fast, &dynamic, what);
        }
        self.dynamic_classes += fast
            .cd_classes
            .iter()
            .filter(|c| *c.key == CdKey::Dynamic)
            .count();
        self.dynamic_ids += dynamic.len();
        fast
    }

    /// `m` in itself: `ci + cd == allowed`; the CD classes hold `cd` ids; `allowed +
    /// blocked` is the number of non-special ids; no special id is set but EOS when `eos`;
    /// no alias class is split; `allowed` is the number of non-special ids set.
    pub fn consistent(&self, m: &Mask, what: &str) {
        let v = &self.vocab;
        assert_eq!(m.ci + m.cd, m.allowed, "{what}: CI + CD");
        assert_eq!(
            m.allowed + m.blocked,
            (v.len() - v.special_ids().len()) as u32,
            "{what}: allowed + blocked"
        );
        let in_classes: usize = m.cd_classes.iter().map(|c| c.ids.len()).sum();
        assert_eq!(in_classes, m.cd as usize, "{what}: class sizes");
        for &sp in v.special_ids() {
            assert_eq!(
                m.contains(sp),
                Some(sp) == v.eos_id() && m.eos,
                "{what}: special id {sp} set"
            );
        }
        for class in v.alias_classes() {
            let set = class.iter().filter(|&&id| m.contains(id)).count();
            assert!(
                set == 0 || set == class.len(),
                "{what}: alias class {class:?} split"
            );
        }
        let counted = m.ids().filter(|&id| !v.is_special(id)).count();
        assert_eq!(counted, m.allowed as usize, "{what}: popcount");
    }

    /// The ids the oracle allows at `cfg` and the oracle of the language without the
    /// statement's names does not are exactly `dynamic` (the ids of `fast`'s Dynamic
    /// class, checked one by one), and the latter allows nothing `fast` does not.
    fn dynamic_class_is_what_the_names_add(
        &self,
        s: &mut Session<'_>,
        cfg: &Config,
        fast: &Mask,
        dynamic: &[u32],
        what: &str,
    ) {
        let v = &self.vocab;
        let without = static_oracle_mask(s, cfg, v);
        let added: Vec<u32> = fast
            .ids()
            .filter(|&id| !v.is_special(id) && !without.contains(id))
            .collect();
        let mut one_by_one = dynamic.to_vec();
        one_by_one.sort_unstable();
        assert!(
            without
                .ids()
                .all(|id| v.is_special(id) || fast.contains(id)),
            "{what}: the names take a token away"
        );
        assert_eq!(
            one_by_one, added,
            "{what}: checked one by one vs added by the names"
        );
    }
}
