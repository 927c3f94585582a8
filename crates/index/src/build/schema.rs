//! What a collection's lines hold: a JSON object a line (Pyserini's JsonCollection `{"id", "contents"}`,
//! BEIR's `{"_id", "title", "text"}`, `{"id", "text"}`, or any fields named by the caller) or
//! `id<TAB>text` lines (MS MARCO's `collection.tsv`). The format is detected once, from the first line
//! of a collection, and every line is then read by it: a line of another shape is an error naming it,
//! never a document made of the wrong fields.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Error as _, IgnoredAny, MapAccess, Visitor};

use super::input::check_doc_id;

/// Id fields recognised in a JSON line when none is named, in the order they are tried.
pub const ID_FIELDS: [&str; 4] = ["id", "_id", "docno", "docid"];
/// Text fields recognised in a JSON line when none is named.
pub const TEXT_FIELDS: [&str; 2] = ["contents", "text"];

/// What the caller asked for (`index --id-field`, `--fields`, `--title`); the rest is detected.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldChoice {
    /// The field holding each document's id; detected among [`ID_FIELDS`] when `None`.
    pub id_field: Option<String>,
    /// The fields whose texts are indexed, joined in this order; the one of [`TEXT_FIELDS`] a line
    /// holds when `None`.
    pub fields: Option<Vec<String>>,
    /// Index a `title` field (where a line has one) before the detected text field.
    pub title: bool,
}

/// How every line of a collection is read.
#[derive(Debug, Clone, PartialEq)]
pub enum Schema {
    /// One JSON object a line: the id in field `id`, the text the texts of `fields` in order.
    Json {
        /// The id field.
        id: String,
        /// The text fields, in the order they are indexed.
        fields: Vec<String>,
        /// Fields a line may lack (or hold null), read as empty: a title added by `--title`, or any of
        /// `--fields` (where a line must hold one of them at least).
        optional: Vec<bool>,
    },
    /// `id<TAB>text` lines.
    Tsv,
}

/// A document of a line: its id and its texts (borrowed from the line where they need no unescaping).
#[derive(Debug)]
pub struct Doc<'a> {
    /// The external id.
    pub id: String,
    /// The texts to index, in order.
    pub texts: Vec<Cow<'a, str>>,
}

impl Schema {
    /// Pyserini's JsonCollection: `id` and `contents`, with `title` before them if `title`.
    pub fn json_collection(title: bool) -> Schema {
        let mut fields = vec!["contents".to_owned()];
        let mut optional = vec![false];
        if title {
            fields.insert(0, "title".into());
            optional.insert(0, true);
        }
        Schema::Json {
            id: "id".into(),
            fields,
            optional,
        }
    }

    /// The schema of a collection whose first non-blank line is `first` (byte-order mark removed), as
    /// `choice` asks; `None` (no line at all) reads JSON lines of `id` and `contents`. The error says
    /// what the line is and what to do.
    pub fn detect(first: Option<&[u8]>, choice: &FieldChoice) -> Result<Schema, String> {
        let named = choice.id_field.is_some() || choice.fields.is_some();
        if let Some(fields) = &choice.fields {
            if fields.is_empty() || fields.iter().any(|f| f.is_empty()) {
                return Err("--fields names no field: give the text fields, e.g. --fields title,text".into());
            }
            if choice.title {
                return Err(
                    "--title adds the title field to the detected one; with --fields name it there, e.g. \
                     --fields title,text"
                        .into(),
                );
            }
        }
        let Some(first) = first else {
            return Ok(Schema::json_collection(choice.title));
        };
        let text = std::str::from_utf8(first).map_err(|e| {
            format!(
                "invalid UTF-8 at byte {} of the line: re-encode the file as UTF-8",
                e.valid_up_to()
            )
        })?;
        let trimmed = text.trim_start();
        if trimmed.starts_with('{') {
            return detect_json(text, choice);
        }
        let unknown = |what: &str| {
            Err(format!(
                "{what}: not a collection format warpsearch reads. Each line must be one JSON object \
                 (JsonCollection {{\"id\": …, \"contents\": …}}, BEIR {{\"_id\": …, \"title\": …, \"text\": …}}, \
                 or other fields named with --id-field and --fields) or `id<TAB>text` (MS MARCO's \
                 collection.tsv)"
            ))
        };
        if trimmed.starts_with('[') {
            return unknown("the line starts a JSON array; write one object a line (JSON Lines)");
        }
        if trimmed.to_ascii_uppercase().starts_with("<DOC") {
            return unknown("a TREC SGML document (<DOC>); convert it to one JSON object a line");
        }
        if text.contains('\t') {
            if named || choice.title {
                return Err(
                    "the collection is `id<TAB>text` lines (tab-separated, as MS MARCO's collection.tsv), \
                     which have no named fields: leave out --id-field, --fields and --title"
                        .into(),
                );
            }
            return Ok(Schema::Tsv);
        }
        unknown("the first line is neither a JSON object nor tab-separated")
    }

    /// The document of one line; the error says what is wrong and what to do. A leading byte-order mark
    /// (stripped from a file's first line by the reader) is named as such.
    pub fn parse<'a>(&self, bytes: &'a [u8]) -> Result<Doc<'a>, String> {
        if bytes.starts_with(super::input::BOM) {
            return Err("the line starts with a UTF-8 byte-order mark: remove it".into());
        }
        let text = std::str::from_utf8(bytes).map_err(|e| {
            format!(
                "invalid UTF-8 at byte {} of the line: re-encode the file as UTF-8",
                e.valid_up_to()
            )
        })?;
        match self {
            Schema::Tsv => {
                let Some((id, body)) = text.split_once('\t') else {
                    return Err(
                        "no tab: the collection is `id<TAB>text` lines (detected from its first line)".into(),
                    );
                };
                if body.contains('\t') {
                    return Err(format!(
                        "{} tab-separated columns: the collection is `id<TAB>text` lines (detected from its \
                         first line), two columns",
                        text.split('\t').count()
                    ));
                }
                check_doc_id(id)?;
                Ok(Doc {
                    id: id.to_owned(),
                    texts: vec![Cow::Borrowed(body)],
                })
            }
            Schema::Json { id, fields, optional } => parse_json(text, id, fields, optional),
        }
    }

    /// The schema in a few words, e.g. `JSON lines: id "_id", text "title" + "text"`.
    pub fn describe(&self) -> String {
        match self {
            Schema::Tsv => "id<TAB>text lines".into(),
            Schema::Json { id, fields, .. } => {
                let fields: Vec<String> = fields.iter().map(|f| format!("{f:?}")).collect();
                format!("JSON lines: id {id:?}, text {}", fields.join(" + "))
            }
        }
    }
}

/// The JSON schema of a first line, as `choice` asks.
fn detect_json(text: &str, choice: &FieldChoice) -> Result<Schema, String> {
    let object: serde_json::Map<String, serde_json::Value> = serde_json::from_str(text).map_err(|e| {
        format!(
            "invalid JSON ({e}): each line must be one object like {{\"id\": \"d1\", \"contents\": \"...\"}}"
        )
    })?;
    let has = |f: &str| object.contains_key(f);
    let present = || {
        let names: Vec<String> = object.keys().map(|k| format!("{k:?}")).collect();
        if names.is_empty() {
            "no fields".to_owned()
        } else {
            format!("the fields {}", names.join(", "))
        }
    };
    let id = match &choice.id_field {
        Some(f) if has(f) => f.clone(),
        Some(f) => {
            return Err(format!(
                "no field {f:?} (--id-field) in the first line, which has {}",
                present()
            ))
        }
        None => {
            let found: Vec<&str> = ID_FIELDS.iter().copied().filter(|f| has(f)).collect();
            match found[..] {
                [one] => one.to_owned(),
                [] => {
                    return Err(format!(
                        "no id field (one of {}) in the first line, which has {}: name it with --id-field",
                        quoted(&ID_FIELDS),
                        present()
                    ))
                }
                _ => {
                    return Err(format!(
                        "the first line has several id fields ({}): choose one with --id-field",
                        quoted(&found)
                    ))
                }
            }
        }
    };
    let (fields, optional) = match &choice.fields {
        Some(fields) => {
            if let Some(missing) = fields.iter().find(|f| !has(f)) {
                return Err(format!(
                    "no field {missing:?} (--fields) in the first line, which has {}",
                    present()
                ));
            }
            (fields.clone(), vec![true; fields.len()])
        }
        None => {
            let found: Vec<&str> = TEXT_FIELDS.iter().copied().filter(|f| has(f)).collect();
            let text = match found[..] {
                [one] => one.to_owned(),
                [] => {
                    return Err(format!(
                        "no text field (one of {}) in the first line, which has {}: name the fields to \
                         index with --fields",
                        quoted(&TEXT_FIELDS),
                        present()
                    ))
                }
                _ => {
                    return Err(format!(
                        "the first line has several text fields ({}): name the ones to index, in order, \
                         with --fields",
                        quoted(&found)
                    ))
                }
            };
            if choice.title {
                (vec!["title".to_owned(), text], vec![true, false])
            } else {
                (vec![text], vec![false])
            }
        }
    };
    if fields.contains(&id) {
        return Err(format!(
            "{id:?} is both the id field and a text field: name other text fields with --fields"
        ));
    }
    Ok(Schema::Json { id, fields, optional })
}

fn quoted(names: &[&str]) -> String {
    let names: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    names.join(", ")
}

/// Which wanted field a key is.
enum Slot {
    Id,
    Field(usize),
    Other,
}

/// A map key, matched against the wanted fields without allocating.
struct KeySeed<'s> {
    id: &'s str,
    fields: &'s [String],
}

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = Slot;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Slot, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for KeySeed<'_> {
    type Value = Slot;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_str<E: de::Error>(self, key: &str) -> Result<Slot, E> {
        Ok(if key == self.id {
            Slot::Id
        } else if let Some(i) = self.fields.iter().position(|f| f == key) {
            Slot::Field(i)
        } else {
            Slot::Other
        })
    }
}

/// An id: a string, or an integer kept as written.
struct IdSeed;

impl<'de> DeserializeSeed<'de> for IdSeed {
    type Value = Option<String>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Option<String>, D::Error> {
        d.deserialize_any(self)
    }
}

impl Visitor<'_> for IdSeed {
    type Value = Option<String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string or an integer")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Some(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    // Any other number would be reformatted ("1.5e3" as "1500"): an id must be kept as written.
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Err(E::custom(format!(
            "the numeric id {v} is not an integer: write it as a string so it is kept exactly as written"
        )))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

/// A text field: a string (borrowed from the line where it has no escapes), or null.
struct TextSeed;

impl<'de> DeserializeSeed<'de> for TextSeed {
    type Value = Option<Cow<'de, str>>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TextSeed {
    type Value = Option<Cow<'de, str>>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Some(Cow::Borrowed(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Some(Cow::Owned(v)))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

/// The wanted fields of one JSON object, others skipped unread.
struct LineSeed<'s> {
    id: &'s str,
    fields: &'s [String],
    /// The field whose value is being read, so that an error in it can be named with its category
    /// (syntax or data) kept.
    reading: &'s std::cell::RefCell<Option<String>>,
}

/// What [`LineSeed`] found: the id (None: absent or null) and each field's text.
type Found<'de> = (Option<String>, Vec<Option<Cow<'de, str>>>);

impl<'de> DeserializeSeed<'de> for LineSeed<'_> {
    type Value = Found<'de>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for LineSeed<'_> {
    type Value = Found<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut id, mut seen_id) = (None, false);
        let mut texts: Vec<Option<Cow<'de, str>>> = vec![None; self.fields.len()];
        let mut seen = vec![false; self.fields.len()];
        let twice = |name: &str| A::Error::custom(format!("the field {name:?} appears twice"));
        while let Some(slot) = map.next_key_seed(KeySeed {
            id: self.id,
            fields: self.fields,
        })? {
            match slot {
                Slot::Id => {
                    if std::mem::replace(&mut seen_id, true) {
                        return Err(twice(self.id));
                    }
                    *self.reading.borrow_mut() = Some(format!("the id field {:?}", self.id));
                    id = map.next_value_seed(IdSeed)?;
                    *self.reading.borrow_mut() = None;
                }
                Slot::Field(i) => {
                    if std::mem::replace(&mut seen[i], true) {
                        return Err(twice(&self.fields[i]));
                    }
                    *self.reading.borrow_mut() = Some(format!("the field {:?}", self.fields[i]));
                    texts[i] = map.next_value_seed(TextSeed)?;
                    *self.reading.borrow_mut() = None;
                }
                Slot::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok((id, texts))
    }
}

fn parse_json<'a>(text: &'a str, id: &str, fields: &[String], optional: &[bool]) -> Result<Doc<'a>, String> {
    let mut de = serde_json::Deserializer::from_str(text);
    let reading = std::cell::RefCell::new(None);
    let found = LineSeed {
        id,
        fields,
        reading: &reading,
    }
    .deserialize(&mut de)
    .and_then(|found| de.end().map(|()| found));
    let (doc_id, texts) = found.map_err(|e| {
        if e.is_data() {
            match reading.borrow().as_ref() {
                Some(field) => format!("{field}: {e}"),
                None => e.to_string(),
            }
        } else {
            format!(
                "invalid JSON ({e}): each line must be one object like {{\"{id}\": \"d1\", \"{}\": \"...\"}}",
                fields[fields.len() - 1]
            )
        }
    })?;
    let Some(doc_id) = doc_id else {
        return Err(format!("missing field {id:?}: every document needs a string id"));
    };
    check_doc_id(&doc_id)?;
    if let Some(i) = (0..fields.len()).find(|&i| texts[i].is_none() && !optional[i]) {
        return Err(format!(
            "missing field {:?}: put the document text in {:?}",
            fields[i], fields[i]
        ));
    }
    if texts.iter().all(Option::is_none) {
        return Err(format!(
            "none of the text fields ({}) in this line",
            fields
                .iter()
                .map(|f| format!("{f:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(Doc {
        id: doc_id,
        texts: texts.into_iter().flatten().collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detect(line: &str, choice: &FieldChoice) -> Result<Schema, String> {
        Schema::detect(Some(line.as_bytes()), choice)
    }

    fn doc(schema: &Schema, line: &str) -> (String, Vec<String>) {
        let d = schema.parse(line.as_bytes()).unwrap();
        (d.id, d.texts.into_iter().map(Cow::into_owned).collect())
    }

    #[test]
    fn formats_are_detected_from_the_first_line() {
        let none = FieldChoice::default();
        let title = FieldChoice {
            title: true,
            ..FieldChoice::default()
        };
        // JsonCollection, with and without --title.
        let line = r#"{"id": "d1", "title": "T", "contents": "body"}"#;
        let s = detect(line, &none).unwrap();
        assert_eq!(doc(&s, line), ("d1".into(), vec!["body".into()]));
        let s = detect(line, &title).unwrap();
        assert_eq!(doc(&s, line), ("d1".into(), vec!["T".into(), "body".into()]));
        // BEIR's corpus.jsonl.
        let beir = r#"{"_id": "7", "title": "A title", "text": "the text", "metadata": {"url": "x"}}"#;
        let s = detect(beir, &title).unwrap();
        assert_eq!(s.describe(), r#"JSON lines: id "_id", text "title" + "text""#);
        assert_eq!(
            doc(&s, beir),
            ("7".into(), vec!["A title".into(), "the text".into()])
        );
        // {"id", "text"}, and docno (PyTerrier's name).
        let s = detect(r#"{"id": 3, "text": "x"}"#, &none).unwrap();
        assert_eq!(
            doc(&s, r#"{"text": "y", "id": 4}"#),
            ("4".into(), vec!["y".into()])
        );
        let s = detect(r#"{"docno": "a", "text": "x"}"#, &none).unwrap();
        assert_eq!(doc(&s, r#"{"docno": "b", "text": "y"}"#).0, "b");
        // A field mapping: the texts joined in order; a field a later line lacks is empty.
        let mapped = FieldChoice {
            id_field: Some("pid".into()),
            fields: Some(vec!["body".into(), "head".into()]),
            title: false,
        };
        let s = detect(
            r#"{"pid": "p", "head": "H", "body": "B", "id": "other"}"#,
            &mapped,
        )
        .unwrap();
        assert_eq!(
            doc(&s, r#"{"pid": "q", "head": "H\u00e9", "body": "B"}"#),
            ("q".into(), vec!["B".into(), "Hé".into()])
        );
        assert_eq!(doc(&s, r#"{"pid": "r", "head": null, "body": "B"}"#).1, ["B"]);
        let err = s.parse(br#"{"pid": "s", "other": "x"}"#).unwrap_err();
        assert!(err.contains("none of the text fields"), "{err}");
        // MS MARCO's collection.tsv.
        let s = detect("0\tThe presence of communication", &none).unwrap();
        assert_eq!(s, Schema::Tsv);
        assert_eq!(doc(&s, "12\tsome text"), ("12".into(), vec!["some text".into()]));
        assert!(s.parse(b"no tab here").unwrap_err().contains("no tab"));
        assert!(s
            .parse(b"1\ta\tb")
            .unwrap_err()
            .contains("3 tab-separated columns"));
        assert!(s.parse(b"a b\ttext").unwrap_err().contains("white space"));
    }

    #[test]
    fn unrecognised_or_ambiguous_first_lines_are_refused_with_what_to_do() {
        let none = FieldChoice::default();
        let cases = [
            ("just some words", "neither a JSON object nor tab-separated"),
            ("<DOC>", "TREC SGML"),
            (r#"[{"id": "a"}]"#, "JSON array"),
            (r#"{"name": "a", "contents": "x"}"#, "no id field"),
            (r#"{"id": "a", "_id": "b", "text": "x"}"#, "several id fields"),
            (r#"{"id": "a", "body": "x"}"#, "no text field"),
            (
                r#"{"id": "a", "text": "x", "contents": "y"}"#,
                "several text fields",
            ),
        ];
        for (line, expected) in cases {
            let err = detect(line, &none).unwrap_err();
            assert!(err.contains(expected), "{line}: {err}");
        }
        let missing = FieldChoice {
            fields: Some(vec!["title".into(), "body".into()]),
            ..FieldChoice::default()
        };
        let err = detect(r#"{"id": "a", "title": "t"}"#, &missing).unwrap_err();
        assert!(
            err.contains("no field \"body\" (--fields)") && err.contains("\"title\""),
            "{err}"
        );
        let tsv_with_fields = FieldChoice {
            id_field: Some("id".into()),
            ..FieldChoice::default()
        };
        assert!(detect("1\tx", &tsv_with_fields)
            .unwrap_err()
            .contains("leave out"));
        assert_eq!(
            Schema::detect(None, &none).unwrap(),
            Schema::json_collection(false)
        );
    }

    #[test]
    fn json_lines_parse_or_explain() {
        let s = Schema::json_collection(true);
        assert!(s.parse(b"{\"id\": \"x\"").unwrap_err().contains("invalid JSON"));
        assert!(s
            .parse(br#"{"id": "x"} trailing"#)
            .unwrap_err()
            .contains("invalid JSON"));
        assert!(s
            .parse(br#"{"contents": "x"}"#)
            .unwrap_err()
            .contains("missing field \"id\""));
        assert!(s
            .parse(br#"{"id": "x"}"#)
            .unwrap_err()
            .contains("missing field \"contents\""));
        let err = s.parse(br#"{"id": "x", "contents": 5}"#).unwrap_err();
        assert!(
            err.contains("the field \"contents\"") && err.contains("integer"),
            "{err}"
        );
        let err = s.parse(br#"{"id": "x", "id": "y", "contents": ""}"#).unwrap_err();
        assert!(err.contains("appears twice"), "{err}");
        let err = s.parse(br#"{"id": [1], "contents": ""}"#).unwrap_err();
        assert!(err.contains("the id field"), "{err}");
        // Escaped text is unescaped; plain text is borrowed from the line.
        let line = br#"{"id": "x", "contents": "a\nb", "title": "plain"}"#;
        let d = s.parse(line).unwrap();
        assert_eq!(d.texts, ["plain", "a\nb"]);
        assert!(matches!(d.texts[0], Cow::Borrowed(_)));
    }
}
