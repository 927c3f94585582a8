//! A ranked list as JSON: `[{"docid": …, "score": …, "rank": 1}, …]`, the server's and the CLI's; with
//! stored documents, each hit has its `"doc"` too.

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
    /// The stored input line, where asked for (absent otherwise: the plain list is unchanged).
    #[serde(skip_serializing_if = "Option::is_none")]
    doc: Option<&'a str>,
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
        write_hits(self.index, self.hits, None, serializer)
    }
}

/// [`JsonHits`] with each hit's stored document (`docs[i]` is hit `i`'s input line, a JSON string).
pub struct JsonHitsWithDocs<'a> {
    /// The index whose document ids the hits name.
    pub index: &'a Index,
    /// The ranked documents, best first.
    pub hits: &'a [Scored],
    /// Hit `i`'s stored input line at `i`.
    pub docs: &'a [String],
}

impl serde::Serialize for JsonHitsWithDocs<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        write_hits(self.index, self.hits, Some(self.docs), serializer)
    }
}

/// The hits, each with its document where `docs` (one a hit) is given.
fn write_hits<S: serde::Serializer>(
    index: &Index,
    hits: &[Scored],
    docs: Option<&[String]>,
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = serializer.serialize_seq(Some(hits.len()))?;
    // Ids looked up a few at a time, their cache misses overlapped ([`Index::try_for_each_doc_id`]).
    let mut each = hits.iter().zip(1..);
    let numbers = hits.iter().map(|h| h.doc);
    index.try_for_each_doc_id(numbers, |docid| {
        let (h, rank) = each.next().expect("an id per hit");
        seq.serialize_element(&Hit {
            docid,
            score: h.score,
            rank,
            doc: docs.and_then(|d| d.get(rank - 1)).map(String::as_str),
        })
    })?;
    seq.end()
}
