//! The ranking: BM25 (Robertson and Zaragoza's probabilistic relevance framework) over each
//! tool's words, each source weighted by what it says of the tool (BM25F's way: a word's
//! count in a tool is the sum of its weighted counts in the tool's sources), and a query's
//! words looked for with their kindred at a lower weight.

use std::collections::HashMap;

use super::words::Words;

/// BM25's saturation of a word's count, and how much a long document is discounted.
const K1: f32 = 1.2;
const B: f32 = 0.75;

/// What a tool's words are read from, and how much each says of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The method's name (`DeleteRange`), or the tool's own name.
    Name,
    /// The tool's title.
    Title,
    /// The service's name (`KV`, `Snapshots`).
    Service,
    /// The proto package (`etcdserverpb`, `containerd.services.snapshots.v1`).
    Package,
    /// The tool's description: the method's comment.
    Description,
    /// The names of the input's fields, at any depth the schema shows.
    InputField,
    /// The comments of the input's fields, and its enum values.
    InputText,
    /// The names of the output's fields.
    OutputField,
}

impl Source {
    fn weight(self) -> f32 {
        match self {
            Source::Name => 4.0,
            Source::Title => 2.0,
            Source::Service => 2.0,
            Source::Description => 1.5,
            Source::InputField => 1.0,
            Source::Package => 0.5,
            Source::InputText => 0.4,
            Source::OutputField => 0.3,
        }
    }
}

/// The words of every tool, by stem, with their weighted counts.
#[derive(Debug, Default)]
pub struct Index {
    /// Stem → (document, weighted count), documents in ascending order.
    postings: HashMap<Box<str>, Vec<(u32, f32)>>,
    /// Each document's weighted length.
    lengths: Vec<f32>,
    average_length: f32,
}

/// One document as it is written: its stems and their weighted counts.
#[derive(Debug, Default)]
pub struct Document {
    counts: HashMap<String, f32>,
    length: f32,
}

impl Document {
    /// Adds the words of `other`.
    pub fn absorb(&mut self, other: Document) {
        for (stem, count) in other.counts {
            *self.counts.entry(stem).or_default() += count;
        }
        self.length += other.length;
    }

    /// Adds the words of `text`, from `source`.
    pub fn add(&mut self, words: &Words, source: Source, text: &str) {
        let weight = source.weight();
        for stem in words.stems(text) {
            *self.counts.entry(stem).or_default() += weight;
            self.length += weight;
        }
    }
}

impl Index {
    /// The index of `documents`, numbered in order.
    pub fn new(documents: Vec<Document>) -> Self {
        let mut postings: HashMap<Box<str>, Vec<(u32, f32)>> = HashMap::new();
        let mut lengths = Vec::with_capacity(documents.len());
        for (number, document) in documents.into_iter().enumerate() {
            let number = u32::try_from(number).unwrap_or(u32::MAX);
            lengths.push(document.length);
            for (stem, count) in document.counts {
                postings.entry(stem.into_boxed_str()).or_default().push((number, count));
            }
        }
        for list in postings.values_mut() {
            list.sort_unstable_by_key(|(number, _)| *number);
            list.shrink_to_fit();
        }
        let average_length = match lengths.len() {
            0 => 1.0,
            count => (lengths.iter().sum::<f32>() / count as f32).max(1.0),
        };
        Index {
            postings,
            lengths,
            average_length,
        }
    }

    /// The `limit` documents that score best for `query` among those `admits` lets be found,
    /// best first; zero scores are left out. The query's words count once each, however often
    /// it repeats them. Scores accumulate in one slot per document, and `admits` (a caller's
    /// rights, a filter) is asked only of a document that would enter the best `limit`: a
    /// search over ten thousand tools touches each posting once and asks a handful.
    pub fn best(&self, words: &Words, query: &str, limit: usize, admits: impl Fn(usize) -> bool) -> Vec<(usize, f32)> {
        let weights = words.query(query);
        let documents = self.lengths.len() as f32;
        let mut scores = vec![0.0_f32; self.lengths.len()];
        for (stem, query_weight) in &weights {
            let Some(list) = self.postings.get(stem.as_str()) else {
                continue;
            };
            let found = list.len() as f32;
            let rarity = (1.0 + (documents - found + 0.5) / (found + 0.5)).ln();
            for &(number, count) in list {
                let Some(score) = scores.get_mut(number as usize) else {
                    continue;
                };
                let length = self
                    .lengths
                    .get(number as usize)
                    .copied()
                    .unwrap_or(self.average_length);
                let saturated = count * (K1 + 1.0) / (count + K1 * (1.0 - B + B * length / self.average_length));
                *score += query_weight * rarity * saturated;
            }
        }
        // Best first; equal scores in the catalog's order (documents are read in it, and one
        // enters after its equals), so that a search answers the same on every worker and run.
        let mut best: Vec<(usize, f32)> = Vec::with_capacity(limit.min(self.lengths.len()).saturating_add(1));
        for (number, &score) in scores.iter().enumerate() {
            let below_the_last = best.len() == limit && best.last().is_some_and(|&(_, last)| score <= last);
            if score <= 0.0 || below_the_last || !admits(number) {
                continue;
            }
            let at = best.partition_point(|&(_, kept)| kept >= score);
            best.insert(at, (number, score));
            best.truncate(limit);
        }
        best
    }

    /// The stems held, and the entries of their lists: the index's size.
    pub fn size(&self) -> (usize, usize) {
        (self.postings.len(), self.postings.values().map(Vec::len).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn document(words: &Words, parts: &[(Source, &str)]) -> Document {
        let mut document = Document::default();
        for (source, text) in parts {
            document.add(words, *source, text);
        }
        document
    }

    #[test]
    fn the_tool_whose_name_says_it_ranks_first_and_kindred_words_find_it() {
        let words = Words::default();
        let index = Index::new(vec![
            document(
                &words,
                &[
                    (Source::Name, "Range"),
                    (Source::Description, "Range gets the keys in the range"),
                ],
            ),
            document(
                &words,
                &[
                    (Source::Name, "DeleteRange"),
                    (
                        Source::Description,
                        "DeleteRange deletes the given range from the key-value store",
                    ),
                ],
            ),
            document(
                &words,
                &[
                    (Source::Name, "Put"),
                    (Source::Description, "Put puts the given key into the store"),
                ],
            ),
        ]);
        let first = |query: &str| {
            index
                .best(&words, query, 1, |_| true)
                .first()
                .map(|(number, _)| *number)
        };
        assert_eq!(first("delete keys in a range"), Some(1));
        assert_eq!(first("remove a key range"), Some(1), "remove is kindred to delete");
        assert_eq!(first("store a key"), Some(2));
        assert_eq!(first("nothing here matches"), None);
        // A document the caller may not see is never found.
        assert!(index
            .best(&words, "delete", 3, |number| number != 1)
            .iter()
            .all(|(number, _)| *number != 1));
    }

    #[test]
    fn the_best_few_are_the_head_of_the_whole_ranking() {
        let words = Words::default();
        let vocabulary = [
            "get", "list", "delete", "user", "item", "order", "range", "key", "watch", "lease",
        ];
        // Documents of one to four words, many alike, so that scores tie.
        let documents: Vec<Document> = (0..60_usize)
            .map(|n| {
                let text: Vec<&str> = (0..1 + n % 4)
                    .map(|i| vocabulary[(n * 7 + i * 3) % vocabulary.len()])
                    .collect();
                document(&words, &[(Source::Name, &text.join(" "))])
            })
            .collect();
        let index = Index::new(documents);
        for query in ["get user", "delete key range", "watch", "list item order lease"] {
            let admits = |number: usize| number % 5 != 2;
            let whole = index.best(&words, query, usize::MAX, admits);
            assert!(whole
                .windows(2)
                .all(|pair| pair[0].1 > pair[1].1 || (pair[0].1 == pair[1].1 && pair[0].0 < pair[1].0)));
            for limit in [1, 3, 5, 20] {
                let head: Vec<(usize, f32)> = whole.iter().copied().take(limit).collect();
                assert_eq!(index.best(&words, query, limit, admits), head, "{query} {limit}");
            }
        }
    }

    #[test]
    fn equal_scores_keep_the_catalogs_order() {
        let words = Words::default();
        let twins = || document(&words, &[(Source::Name, "GetThing")]);
        let index = Index::new(vec![twins(), twins(), twins()]);
        let order = |limit: usize| -> Vec<usize> {
            index
                .best(&words, "thing", limit, |_| true)
                .into_iter()
                .map(|(n, _)| n)
                .collect()
        };
        assert_eq!(order(3), [0, 1, 2]);
        assert_eq!(order(2), [0, 1], "a later equal does not push out an earlier one");
    }
}
