//! A fixed-width set of terminal ids.
//!
//! Terminal ids are the L1 numbering (grammar tokens, then end-of-input, then ignored
//! terminals); the language build refuses more than [`TermSet::CAPACITY`] of them, so every
//! set is four words and copying one is free.

use std::fmt;

/// Bit `i` is set when terminal `i` is a member.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TermSet([u64; 4]);

impl TermSet {
    pub(crate) const CAPACITY: usize = 256;

    pub(crate) const EMPTY: TermSet = TermSet([0; 4]);

    pub fn singleton(t: u16) -> TermSet {
        let mut s = TermSet::EMPTY;
        s.insert(t);
        s
    }

    #[inline]
    pub(crate) fn insert(&mut self, t: u16) {
        self.0[usize::from(t >> 6)] |= 1u64 << (t & 63);
    }

    #[inline]
    pub(crate) fn remove(&mut self, t: u16) {
        self.0[usize::from(t >> 6)] &= !(1u64 << (t & 63));
    }

    #[inline]
    pub fn contains(&self, t: u16) -> bool {
        self.0[usize::from(t >> 6)] & (1u64 << (t & 63)) != 0
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }

    #[inline]
    pub(crate) fn union(&self, o: &TermSet) -> TermSet {
        TermSet(std::array::from_fn(|i| self.0[i] | o.0[i]))
    }

    #[inline]
    pub(crate) fn intersect(&self, o: &TermSet) -> TermSet {
        TermSet(std::array::from_fn(|i| self.0[i] & o.0[i]))
    }

    #[inline]
    pub(crate) fn minus(&self, o: &TermSet) -> TermSet {
        TermSet(std::array::from_fn(|i| self.0[i] & !o.0[i]))
    }

    #[inline]
    pub fn intersects(&self, o: &TermSet) -> bool {
        (0..4).any(|i| self.0[i] & o.0[i] != 0)
    }

    pub fn iter(&self) -> impl Iterator<Item = u16> + '_ {
        (0..4usize).flat_map(move |w| {
            let mut bits = self.0[w];
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let b = bits.trailing_zeros();
                bits &= bits - 1;
                Some((w as u16) * 64 + b as u16)
            })
        })
    }

    /// The raw words, for hashing into keys and fingerprints.
    pub(crate) fn words(&self) -> &[u64; 4] {
        &self.0
    }
}

impl FromIterator<u16> for TermSet {
    fn from_iter<I: IntoIterator<Item = u16>>(iter: I) -> Self {
        let mut s = TermSet::EMPTY;
        for t in iter {
            s.insert(t);
        }
        s
    }
}

impl fmt::Debug for TermSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_operations() {
        let a: TermSet = [1u16, 64, 200].into_iter().collect();
        let b: TermSet = [64u16, 255].into_iter().collect();
        assert_eq!(
            a.union(&b).iter().collect::<Vec<_>>(),
            vec![1, 64, 200, 255]
        );
        assert_eq!(a.intersect(&b).iter().collect::<Vec<_>>(), vec![64]);
        assert_eq!(a.minus(&b).len(), 2);
        assert!(a.intersects(&b));
        assert!(!a.contains(2));
        assert!(TermSet::EMPTY.is_empty());
    }
}
