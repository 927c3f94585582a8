//! A ranked list as JSON: `[{"docid": …, "score": …, "rank": 1}, …]`, the server's and the CLI's.

use warpsearch_index::Index;
use warpsearch_query::Scored;

/// One ranked document as JSON output prints it: the score as the `f32` it is, in its shortest form
/// (a `serde_json::Value` would widen it to `f64` and print 0.9400072693824768 for 0.94000727).
#[derive(serde::Serialize)]
struct Hit<'a> {
    /// Borrowed from the index's id table (no copy per hit).
    docid: &'a str,
    score: f32,
    rank: usize,
}

/// `hits` as JSON output prints them, ranks from 1: `[{"docid": …, "score": …, "rank": 1}, …]`,
/// written as they are read (the server writes thousands per response; no list of hits is made).
pub struct JsonHits<'a> {
    /// The index whose document ids the hits name.
    pub index: &'a Index,
    /// The ranked documents, best first.
    pub hits: &'a [Scored],
}

impl serde::Serialize for JsonHits<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = serializer.serialize_seq(Some(self.hits.len()))?;
        // Ids looked up a few at a time, their cache misses overlapped ([`Index::try_for_each_doc_id`]).
        let mut hits = self.hits.iter().zip(1..);
        let docs = self.hits.iter().map(|h| h.doc);
        self.index.try_for_each_doc_id(docs, |docid| {
            let (h, rank) = hits.next().expect("an id per hit");
            seq.serialize_element(&Hit {
                docid,
                score: h.score,
                rank,
            })
        })?;
        seq.end()
    }
}
