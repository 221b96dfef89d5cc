//! A header map copied out of a host.

use smallvec::SmallVec;

use super::HeaderPair;

/// The headers a list about one map holds on the stack: more than a request, an answer or
/// trailers usually carry, so that the lists of a call make no allocation.
const INLINE_HEADERS: usize = 16;

/// A short list about the headers of one map.
pub type HeaderList<T> = SmallVec<[T; INLINE_HEADERS]>;

/// A header map as a host copies it out: the names in one string and the values in one
/// buffer, and where each ends in place for up to [`INLINE_HEADERS`] headers, so that a copy
/// costs two allocations, not two per header (a routed call copies the request's headers, the
/// upstream's and its trailers), and the names are checked as UTF-8 once. One that is not
/// UTF-8 is kept with replacement characters, and so matches no name the core looks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeaderCopy {
    names: String,
    values: Vec<u8>,
    /// Where each header's name ends in `names`, and its value in `values`.
    ends: HeaderList<(usize, usize)>,
}

impl HeaderCopy {
    /// A copy of headers a host lends, its buffers sized once: `headers` is read twice, to
    /// measure and then to copy (collecting grows the buffers as they fill, a reallocation
    /// each time).
    pub fn sized_from<N, V, I>(headers: I) -> Self
    where
        N: AsRef<[u8]>,
        V: AsRef<[u8]>,
        I: IntoIterator<Item = (N, V)>,
        I::IntoIter: Clone,
    {
        let headers = headers.into_iter();
        let (count, name_bytes, value_bytes) = headers.clone().fold(
            (0, 0, 0),
            |(count, names, values): (usize, usize, usize), (name, value)| {
                (
                    count + 1,
                    names.saturating_add(name.as_ref().len()),
                    values.saturating_add(value.as_ref().len()),
                )
            },
        );
        let mut names = Vec::with_capacity(name_bytes);
        let mut values = Vec::with_capacity(value_bytes);
        let mut ends = HeaderList::with_capacity(count);
        for (name, value) in headers.clone() {
            names.extend_from_slice(name.as_ref());
            values.extend_from_slice(value.as_ref());
            ends.push((names.len(), values.len()));
        }
        // The names checked as UTF-8 in one piece, not one by one: a call each costs more than
        // the bytes. Each is valid if the whole is and every name starts on a character.
        match String::from_utf8(names) {
            Ok(names) if ends.iter().all(|&(end, _)| names.is_char_boundary(end)) => HeaderCopy { names, values, ends },
            // Rare: name by name, each with replacement characters where it is not UTF-8.
            _ => headers.collect(),
        }
    }

    /// Adds a header after the others.
    pub fn push(&mut self, name: &[u8], value: &[u8]) {
        match std::str::from_utf8(name) {
            Ok(name) => self.names.push_str(name),
            Err(_) => self.names.push_str(&String::from_utf8_lossy(name)),
        }
        self.values.extend_from_slice(value);
        self.ends.push((self.names.len(), self.values.len()));
    }

    /// The header at `index` (`index < self.len()`).
    fn header(&self, index: usize) -> HeaderPair<'_> {
        let (name_start, value_start) = match index.checked_sub(1) {
            Some(before) => self.ends.get(before).copied().unwrap_or_default(),
            None => (0, 0),
        };
        let (name_end, value_end) = self.ends.get(index).copied().unwrap_or_default();
        (
            self.names.get(name_start..name_end).unwrap_or_default(),
            self.values.get(value_start..value_end).unwrap_or_default(),
        )
    }

    /// The headers in order.
    pub fn iter(&self) -> impl Iterator<Item = HeaderPair<'_>> {
        (0..self.len()).map(|index| self.header(index))
    }

    /// What makes a host's map this copy was taken from hold `wanted` and nothing else, in the
    /// fewest calls into the host: each name to remove (once: a removal takes every value of a
    /// name), which of `wanted` to write, by index (each write is a call that copies the name
    /// and the value, and leaves the name with that one value), and which to append (a name
    /// wanted with more than one value, such as a forwarded header the client sent twice: a
    /// write would keep only the last). A header the map holds once with the wanted value is
    /// not written; one it holds more than once is removed, then written (a write replaces
    /// one value in some Envoy versions, all of them in others); a name wanted more than once
    /// is removed if held, then each value appended in order. One pass over the map, each
    /// header compared with each wanted one.
    pub fn changes_to<'a, V: AsRef<[u8]>>(&'a self, wanted: &[(&'a str, V)]) -> HeaderChanges<'a> {
        // Per wanted header: how often the map holds its name, and whether with its value.
        let mut held: HeaderList<(usize, bool)> = smallvec::smallvec![(0, false); wanted.len()];
        let mut removals: HeaderList<&str> = HeaderList::with_capacity(self.len());
        for (name, value) in self.iter() {
            let mut is_wanted = false;
            for ((wanted_name, wanted_value), (count, same)) in wanted.iter().zip(held.iter_mut()) {
                if *wanted_name == name {
                    is_wanted = true;
                    *count += 1;
                    *same = wanted_value.as_ref() == value;
                }
            }
            if !is_wanted && !removals.contains(&name) {
                removals.push(name);
            }
        }
        let mut writes = HeaderList::with_capacity(wanted.len());
        let mut appends = HeaderList::new();
        for (index, ((name, _), held)) in wanted.iter().zip(&held).enumerate() {
            let wanted_once = wanted.iter().filter(|(other, _)| other == name).count() == 1;
            let (count, _) = *held;
            if (count > 1 || (count == 1 && !wanted_once)) && !removals.contains(name) {
                removals.push(name);
            }
            if !wanted_once {
                appends.push(index);
            } else if *held != (1, true) {
                writes.push(index);
            }
        }
        HeaderChanges {
            removals,
            writes,
            appends,
        }
    }

    /// The headers in order, as the pairs the core reads.
    pub fn pairs(&self) -> HeaderList<HeaderPair<'_>> {
        self.iter().collect()
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
}

/// The calls that turn a host's header map into another: see [`HeaderCopy::changes_to`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderChanges<'m> {
    /// The names to remove, each once, in the map's order.
    pub removals: HeaderList<&'m str>,
    /// The wanted headers to write, as indices into them, in their order.
    pub writes: HeaderList<usize>,
    /// The wanted headers to append, after the removals, as indices into them, in their order:
    /// every value of a name wanted more than once.
    pub appends: HeaderList<usize>,
}

impl<N: AsRef<[u8]>, V: AsRef<[u8]>> FromIterator<(N, V)> for HeaderCopy {
    fn from_iter<I: IntoIterator<Item = (N, V)>>(headers: I) -> Self {
        let mut copy = HeaderCopy::default();
        for (name, value) in headers {
            copy.push(name.as_ref(), value.as_ref());
        }
        copy
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::HeaderCopy;

    #[test]
    fn headers_come_back_in_order_with_repeats_and_empty_values() {
        let copy: HeaderCopy = [(":status", "200"), ("x-a", ""), ("", "v"), ("x-a", "2")]
            .into_iter()
            .collect();
        let expected: Vec<(&str, &[u8])> = vec![(":status", b"200"), ("x-a", b""), ("", b"v"), ("x-a", b"2")];
        assert_eq!(copy.pairs().as_slice(), expected);
        assert_eq!(copy.len(), 4);
        assert!(HeaderCopy::default().is_empty());
        assert_eq!(HeaderCopy::default().pairs().as_slice(), Vec::<(&str, &[u8])>::new());
        let held = [(":status".to_owned(), b"200".to_vec()), ("x-a".to_owned(), Vec::new())];
        let sized = HeaderCopy::sized_from(held.iter().map(|(name, value)| (name, value)));
        assert_eq!(sized, held.iter().map(|(name, value)| (name, value)).collect());
        assert_eq!(sized.names.capacity(), ":status".len() + "x-a".len());
        assert_eq!(sized.values.capacity(), "200".len());
        assert!(!sized.ends.spilled());
    }

    #[test]
    fn a_copy_sized_at_once_checks_each_name_not_only_the_whole() {
        // "é" split over two names: the names together are UTF-8, neither is on its own.
        let split = [(vec![0xc3], b"1".to_vec()), (vec![0xa9], b"2".to_vec())];
        let copy = HeaderCopy::sized_from(split.iter().map(|(name, value)| (name, value)));
        let expected: Vec<(&str, &[u8])> = vec![("\u{fffd}", b"1"), ("\u{fffd}", b"2")];
        assert_eq!(copy.pairs().as_slice(), expected);
    }

    #[test]
    fn the_changes_remove_each_unwanted_name_once_and_write_only_what_the_map_lacks() {
        let copy: HeaderCopy = [
            (":status", "200"),
            ("x-a", "1"),
            ("x-gone", ""),
            ("x-a", "2"),
            ("x-gone", "v"),
        ]
        .into_iter()
        .collect();
        let wanted = [
            (":status", "200"), // held once with this value: not written
            ("x-a", "1"),       // held twice: removed, then written
            ("x-new", ""),      // not held
            ("content-type", "application/json"),
        ];
        let changes = copy.changes_to(&wanted);
        assert_eq!(changes.removals.as_slice(), ["x-gone", "x-a"]);
        assert_eq!(changes.writes.as_slice(), [1, 2, 3]);
        assert!(changes.appends.is_empty());
        let other_status = copy.changes_to(&[(":status", "204")]);
        assert_eq!(other_status.removals.as_slice(), ["x-a", "x-gone"]);
        assert_eq!(other_status.writes.as_slice(), [0]);
        // Nothing wanted: every name goes, each once.
        let none: [(&str, &[u8]); 0] = [];
        assert_eq!(copy.changes_to(&none).removals.as_slice(), [":status", "x-a", "x-gone"]);
        assert!(HeaderCopy::default().changes_to(&none).removals.is_empty());
    }

    #[test]
    fn a_name_wanted_with_two_values_is_removed_if_held_and_both_values_appended_in_order() {
        let copy: HeaderCopy = [(":path", "/mcp"), ("x-tenant", "a")].into_iter().collect();
        let wanted = [(":path", "/mcp"), ("x-tenant", "a"), ("x-user", "1"), ("x-tenant", "b")];
        let changes = copy.changes_to(&wanted);
        assert_eq!(changes.removals.as_slice(), ["x-tenant"]);
        assert_eq!(changes.writes.as_slice(), [2]);
        assert_eq!(changes.appends.as_slice(), [1, 3]);
        // Not held at all: nothing to remove, both values appended.
        let empty = HeaderCopy::default();
        let changes = empty.changes_to(&wanted);
        assert!(changes.removals.is_empty());
        assert_eq!(changes.writes.as_slice(), [0, 2]);
        assert_eq!(changes.appends.as_slice(), [1, 3]);
    }

    #[test]
    fn a_name_that_is_not_utf8_is_kept_with_replacement_characters_and_values_as_bytes() {
        let mut copy = HeaderCopy::default();
        copy.push(b"x-\xff", b"\xfe\x00");
        copy.push(b"x-b", b"ok");
        let expected: Vec<(&str, &[u8])> = vec![("x-\u{fffd}", b"\xfe\x00"), ("x-b", b"ok")];
        assert_eq!(copy.pairs().as_slice(), expected);
    }

    /// A host's header map, as Envoy keeps one: `(name, value)` in order.
    type Map = Vec<(String, String)>;

    /// How a write of one value treats the values a name has: Envoy's replaces all of them in
    /// some versions, one in others. The changes must work under both.
    #[derive(Debug, Clone, Copy)]
    enum Write {
        ReplacesAll,
        ReplacesFirst,
    }

    /// `map` after `changes` to `wanted`, made the way the module makes them: removals, then
    /// writes, then appends.
    fn applied(mut map: Map, wanted: &[(&str, &str)], write: Write) -> Map {
        let copy: HeaderCopy = map.iter().map(|(name, value)| (name, value)).collect();
        let changes = copy.changes_to(wanted);
        for name in &changes.removals {
            map.retain(|(held, _)| held != name);
        }
        for &index in &changes.writes {
            let (name, value) = wanted[index];
            match (write, map.iter().position(|(held, _)| held == name)) {
                (Write::ReplacesAll, Some(_)) => {
                    map.retain(|(held, _)| held != name);
                    map.push((name.to_owned(), value.to_owned()));
                }
                (Write::ReplacesFirst, Some(first)) => map[first].1 = value.to_owned(),
                (_, None) => map.push((name.to_owned(), value.to_owned())),
            }
        }
        for &index in &changes.appends {
            let (name, value) = wanted[index];
            map.push((name.to_owned(), value.to_owned()));
        }
        map
    }

    /// Each name's values, in order, sorted by name.
    fn by_name<'a>(headers: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<(&'a str, Vec<&'a str>)> {
        let mut names: Vec<(&str, Vec<&str>)> = Vec::new();
        for (name, value) in headers {
            match names.iter_mut().find(|(known, _)| *known == name) {
                Some((_, values)) => values.push(value),
                None => names.push((name, vec![value])),
            }
        }
        names.sort();
        names
    }

    fn headers() -> impl Strategy<Value = Vec<(&'static str, &'static str)>> {
        let name = prop::sample::select(vec![":status", "content-type", "x-a", "x-b"]);
        let value = prop::sample::select(vec!["", "1", "2"]);
        prop::collection::vec((name, value), 0..8)
    }

    proptest! {
        #[test]
        fn a_copy_sized_at_once_is_the_copy_made_header_by_header(
            held in prop::collection::vec(
                (prop::collection::vec(any::<u8>(), 0..6), prop::collection::vec(any::<u8>(), 0..4)),
                0..6,
            ),
        ) {
            let sized = HeaderCopy::sized_from(held.iter().map(|(name, value)| (name, value)));
            let pushed: HeaderCopy = held.iter().map(|(name, value)| (name, value)).collect();
            prop_assert_eq!(sized.pairs(), pushed.pairs());
        }

        #[test]
        fn the_changes_leave_exactly_the_wanted_headers_whatever_a_write_replaces(
            held in headers(),
            wanted in headers(),
        ) {
            let map: Map = held.iter().map(|&(name, value)| (name.to_owned(), value.to_owned())).collect();
            for write in [Write::ReplacesAll, Write::ReplacesFirst] {
                let result = applied(map.clone(), &wanted, write);
                let result = by_name(result.iter().map(|(name, value)| (name.as_str(), value.as_str())));
                prop_assert_eq!(&result, &by_name(wanted.iter().copied()), "{:?}", write);
            }
        }
    }
}
