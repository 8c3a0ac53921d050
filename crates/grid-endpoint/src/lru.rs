//! A small least-recently-used map with a fixed capacity in entries.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

/// A map that keeps at most `capacity` entries and, when full, evicts the one used least
/// recently. `get` and `insert` count as uses; each costs O(log n).
#[derive(Debug)]
pub(crate) struct Lru<K, V> {
    capacity: usize,
    /// Key → (value, tick of last use).
    map: HashMap<K, (V, u64)>,
    /// Tick of last use → key; the first entry is the least recently used.
    order: BTreeMap<u64, K>,
    /// Monotone use counter.
    tick: u64,
}

impl<K: Eq + Hash + Clone, V> Lru<K, V> {
    /// An empty map holding at most `capacity` entries (at least one).
    pub(crate) fn new(capacity: usize) -> Self {
        Lru {
            capacity: capacity.max(1),
            map: HashMap::new(),
            order: BTreeMap::new(),
            tick: 0,
        }
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    fn touch(&mut self, key: &K) {
        self.tick += 1;
        let tick = self.tick;
        if let Some((_, t)) = self.map.get_mut(key) {
            self.order.remove(t);
            *t = tick;
            self.order.insert(tick, key.clone());
        }
    }

    /// The value of `key`, marking it used.
    pub(crate) fn get(&mut self, key: &K) -> Option<&mut V> {
        self.touch(key);
        self.map.get_mut(key).map(|(v, _)| v)
    }

    /// The value of `key` without marking it used.
    pub(crate) fn peek(&self, key: &K) -> Option<&V> {
        self.map.get(key).map(|(v, _)| v)
    }

    /// Whether `key` is present (not a use).
    pub(crate) fn contains(&self, key: &K) -> bool {
        self.map.contains_key(key)
    }

    /// Inserts or replaces `key`, marking it used; evicts the least recently used entry
    /// when full. Returns the evicted entry, if any.
    pub(crate) fn insert(&mut self, key: K, value: V) -> Option<(K, V)> {
        self.tick += 1;
        let tick = self.tick;
        if let Some((old, t)) = self.map.insert(key.clone(), (value, tick)) {
            self.order.remove(&t);
            drop(old);
            self.order.insert(tick, key);
            return None;
        }
        self.order.insert(tick, key);
        if self.map.len() > self.capacity {
            if let Some((_, k)) = self.order.pop_first() {
                if let Some((v, _)) = self.map.remove(&k) {
                    return Some((k, v));
                }
            }
        }
        None
    }

    /// Removes `key`, returning its value.
    pub(crate) fn remove(&mut self, key: &K) -> Option<V> {
        let (v, t) = self.map.remove(key)?;
        self.order.remove(&t);
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::Lru;

    #[test]
    fn evicts_least_recently_used() {
        let mut l = Lru::new(2);
        l.insert(1, "a");
        l.insert(2, "b");
        assert!(l.get(&1).is_some());
        assert_eq!(l.insert(3, "c"), Some((2, "b")));
        assert!(l.contains(&1) && l.contains(&3) && !l.contains(&2));
        assert_eq!(l.remove(&1), Some("a"));
        assert_eq!(l.len(), 1);
        assert_eq!(l.insert(3, "d"), None);
        assert_eq!(l.peek(&3), Some(&"d"));
    }
}
