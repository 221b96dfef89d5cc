//! The ranking: BM25 (Robertson and Zaragoza's probabilistic relevance framework) over each
//! tool's words, each source weighted by what it says of the tool (BM25F's way: a word's
//! count in a tool is the sum of its weighted counts in the tool's sources), and a query's
//! words looked for with their kindred at a lower weight.

use std::collections::HashMap;

use super::words::{Words, KINDRED_WEIGHT};

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

    /// Each document's score for `query`, where `admits` lets it be found; zero scores are
    /// left out. The query's words count once each, however often it repeats them.
    pub fn scores(&self, words: &Words, query: &str, admits: impl Fn(usize) -> bool) -> Vec<(usize, f32)> {
        let mut weights: Vec<(String, f32)> = Vec::new();
        let mut raise = |stem: &str, weight: f32| match weights.iter_mut().find(|(known, _)| known == stem) {
            Some((_, known)) => *known = known.max(weight),
            None => weights.push((stem.to_owned(), weight)),
        };
        for stem in words.stems(query) {
            raise(&stem, 1.0);
            for kindred in words.kindred(&stem) {
                raise(kindred, KINDRED_WEIGHT);
            }
        }
        let documents = self.lengths.len() as f32;
        let mut scores: HashMap<usize, f32> = HashMap::new();
        for (stem, query_weight) in &weights {
            let Some(list) = self.postings.get(stem.as_str()) else {
                continue;
            };
            let found = list.len() as f32;
            let rarity = (1.0 + (documents - found + 0.5) / (found + 0.5)).ln();
            for &(number, count) in list {
                let number = number as usize;
                if !admits(number) {
                    continue;
                }
                let length = self.lengths.get(number).copied().unwrap_or(self.average_length);
                let saturated = count * (K1 + 1.0) / (count + K1 * (1.0 - B + B * length / self.average_length));
                *scores.entry(number).or_default() += query_weight * rarity * saturated;
            }
        }
        let mut ranked: Vec<(usize, f32)> = scores.into_iter().filter(|(_, score)| *score > 0.0).collect();
        // Best first; equal scores in the catalog's order, so that a search answers the same
        // on every worker and every run.
        ranked.sort_by(|(a, a_score), (b, b_score)| b_score.total_cmp(a_score).then(a.cmp(b)));
        ranked
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
        let first = |query: &str| index.scores(&words, query, |_| true).first().map(|(number, _)| *number);
        assert_eq!(first("delete keys in a range"), Some(1));
        assert_eq!(first("remove a key range"), Some(1), "remove is kindred to delete");
        assert_eq!(first("store a key"), Some(2));
        assert_eq!(first("nothing here matches"), None);
        // A document the caller may not see is never found.
        assert!(index
            .scores(&words, "delete", |number| number != 1)
            .iter()
            .all(|(number, _)| *number != 1));
    }

    #[test]
    fn equal_scores_keep_the_catalogs_order() {
        let words = Words::default();
        let twins = || document(&words, &[(Source::Name, "GetThing")]);
        let index = Index::new(vec![twins(), twins(), twins()]);
        let order: Vec<usize> = index
            .scores(&words, "thing", |_| true)
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(order, [0, 1, 2]);
    }
}
