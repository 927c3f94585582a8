//! `meta.json`: an index's metadata as a plain JSON file that `cat` and `jq` read, written last into a
//! build's directory and read first when it is opened. An index of format version 1 wrapped it in the
//! binary envelope of the other files ([`crate::container`]); such a file is still read. This module
//! parses the file and names the field at fault; the checks of its counts against the other files are
//! the reader's.

use std::io::{Read, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

pub use crate::container::ENVELOPED_VERSION;
use crate::container::{self, FORMAT_VERSION};
use crate::error::{corrupt, IoContext, Result};
use crate::format::{files, IndexMeta};

/// The largest `meta.json` read: a head lists its shards in it, some 100 bytes each, so this is millions
/// of shards, and a file past it is not an index's metadata.
const MAX_LEN: u64 = 256 << 20;

/// What `meta.json` holds: the metadata, the build identity every file of the index carries, and the
/// format version of the envelope it came in (`None` when plain JSON).
pub(crate) struct MetaFile {
    pub meta: IndexMeta,
    pub build_id: u64,
    pub envelope: Option<u32>,
}

/// The file as written: the metadata's fields, the build identity, then the checksum of the two.
#[derive(Serialize)]
struct OnDisk<'a> {
    #[serde(flatten)]
    body: Body<'a>,
    /// CRC-32 of [`Body`]'s pretty-printed JSON, as 8 hexadecimal digits: a flipped digit (a k1 of 0.8
    /// for 0.9) would parse and give other scores, so the values are checksummed as every other file's
    /// bytes are. Over the values rather than the file's bytes, so that reformatting the file is no
    /// damage.
    checksum: String,
}

/// What the checksum covers: the metadata and the build identity.
#[derive(Serialize)]
struct Body<'a> {
    #[serde(flatten)]
    meta: &'a IndexMeta,
    #[serde(with = "hex_id")]
    build_id: u64,
}

fn checksum(meta: &IndexMeta, build_id: u64) -> String {
    let body = serde_json::to_vec_pretty(&Body { meta, build_id }).expect("metadata serialises");
    format!("{:08x}", crc32fast::hash(&body))
}

/// `meta` and `build_id` as the bytes of `meta.json`: pretty-printed JSON and a final newline; the same
/// bytes for the same metadata, so two builds of one input differ only in the identity and checksum.
pub fn to_json(meta: &IndexMeta, build_id: u64) -> Vec<u8> {
    let file = OnDisk {
        body: Body { meta, build_id },
        checksum: checksum(meta, build_id),
    };
    let mut out = serde_json::to_vec_pretty(&file).expect("metadata serialises");
    out.push(b'\n');
    out
}

/// Writes `meta.json` at `path`, read-only and synced, as the other files of a build are.
pub(crate) fn write(path: &Path, meta: &IndexMeta, build_id: u64) -> Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    // Read-only as every index file: an index is replaced whole, never edited in place.
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o444);
    let mut file = options.open(path).at(path)?;
    file.write_all(&to_json(meta, build_id)).at(path)?;
    file.sync_all().at(path)
}

/// Reads and parses `meta.json` (`file`, opened from `path`): plain JSON, or version 1's envelope.
pub(crate) fn read(file: std::fs::File, path: &Path) -> Result<MetaFile> {
    let mut bytes = Vec::new();
    file.take(MAX_LEN + 1).read_to_end(&mut bytes).at(path)?;
    if bytes.len() as u64 > MAX_LEN {
        return Err(corrupt(
            path,
            format!("larger than {MAX_LEN} bytes: not an index's metadata"),
        ));
    }
    if bytes.starts_with(container::MAGIC) {
        let (payload, version, build_id) = container::check_bytes(&bytes, path, files::META.1)?;
        let meta = parse(&bytes[payload], path)?;
        return Ok(MetaFile {
            meta,
            build_id,
            envelope: Some(version),
        });
    }
    let mut value: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| corrupt(path, format!("not valid JSON ({e}): rebuild the index")))?;
    let Some(object) = value.as_object_mut() else {
        return Err(corrupt(path, "not a JSON object: rebuild the index"));
    };
    let build_id = match object.remove("build_id") {
        Some(serde_json::Value::String(s)) => hex_id::parse(&s),
        _ => None,
    }
    .ok_or_else(|| {
        corrupt(
            path,
            "field `build_id` must be 16 hexadecimal digits, not 0: rebuild the index",
        )
    })?;
    let stored = object.remove("checksum");
    let meta = parse_value(value, path)?;
    match stored {
        Some(serde_json::Value::String(s)) if s == checksum(&meta, build_id) => {}
        Some(serde_json::Value::String(_)) => {
            return Err(corrupt(
                path,
                "checksum mismatch: a value was damaged or edited after the build; rebuild the index",
            ))
        }
        _ => {
            return Err(corrupt(
                path,
                "field `checksum` must be 8 hexadecimal digits: rebuild the index",
            ))
        }
    }
    Ok(MetaFile {
        meta,
        build_id,
        envelope: None,
    })
}

/// The format version `file` must say it is: 1 in the envelope, this build's in plain JSON.
pub(crate) fn expected_version(file: &MetaFile, path: &Path) -> Result<u32> {
    match file.envelope {
        None => Ok(FORMAT_VERSION),
        Some(ENVELOPED_VERSION) => Ok(ENVELOPED_VERSION),
        Some(v) => Err(corrupt(
            path,
            format!(
                "in the binary envelope of format version {v}, which writes plain JSON: rebuild the index"
            ),
        )),
    }
}

fn parse(json: &[u8], path: &Path) -> Result<IndexMeta> {
    let value: serde_json::Value = serde_json::from_slice(json)
        .map_err(|e| corrupt(path, format!("not valid JSON ({e}): rebuild the index")))?;
    parse_value(value, path)
}

/// The metadata in `value`, or an error naming the field (`bm25.k1`) and what is wrong with it.
fn parse_value(value: serde_json::Value, path: &Path) -> Result<IndexMeta> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let field = e.path().to_string();
        let what = if field == "." {
            e.inner().to_string()
        } else {
            format!("field `{field}`: {}", e.inner())
        };
        corrupt(path, format!("{what}: rebuild the index"))
    })
}

/// A build identity in JSON: 16 hexadecimal digits (a JSON number past 2^53 is rounded by many
/// readers); read from a number too, as version 1 wrote a shard's `set`.
pub(crate) mod hex_id {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(id: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{id:016x}"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        #[derive(super::Deserialize)]
        #[serde(untagged)]
        enum Id {
            Number(u64),
            Hex(String),
        }
        match Id::deserialize(d)? {
            Id::Number(n) => Ok(n),
            Id::Hex(s) => {
                parse(&s).ok_or_else(|| serde::de::Error::custom("expected 16 hexadecimal digits, not 0"))
            }
        }
    }

    /// `s` as an identity: exactly 16 lower- or upper-case hexadecimal digits, not all 0.
    pub fn parse(s: &str) -> Option<u64> {
        if s.len() != 16 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u64::from_str_radix(s, 16).ok().filter(|&id| id != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> IndexMeta {
        IndexMeta {
            format_version: FORMAT_VERSION,
            codec: warpsearch_codec::Codec::SimdBp,
            analyzer: crate::AnalyzerConfig::whitespace(),
            bm25: crate::Bm25Params::default(),
            num_docs: 3,
            num_terms: 2,
            num_postings: 4,
            total_doc_len: 10,
            avg_doc_len: 10.0 / 3.0,
            static_scores: None,
            doc_order: crate::DocOrder::Input,
            stored_docs: false,
            shard: None,
            shards: None,
        }
    }

    fn read_bytes(bytes: &[u8]) -> Result<MetaFile> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("meta.json");
        std::fs::write(&path, bytes).unwrap();
        read(std::fs::File::open(&path).unwrap(), &path)
    }

    fn error(bytes: &[u8]) -> String {
        read_bytes(bytes).err().expect("refused").to_string()
    }

    #[test]
    fn round_trips_as_plain_json_with_the_identity_in_hex() {
        let json = to_json(&meta(), 0x00ab_cdef_0123_4567);
        let text = std::str::from_utf8(&json).unwrap();
        assert!(text.starts_with("{\n  \"format_version\": 2,"), "{text}");
        assert!(
            text.contains("\n  \"build_id\": \"00abcdef01234567\",\n  \"checksum\": \""),
            "{text}"
        );
        assert!(text.ends_with("\"\n}\n"), "{text}");
        let back = read_bytes(&json).unwrap();
        assert_eq!(
            (back.meta, back.build_id, back.envelope),
            (meta(), 0x00ab_cdef_0123_4567, None)
        );
        // Reformatted (as `jq .` does) it holds the same values and reads the same.
        let value: serde_json::Value = serde_json::from_slice(&json).unwrap();
        let compact = serde_json::to_vec(&value).unwrap();
        assert_eq!(read_bytes(&compact).unwrap().meta, meta());
    }

    #[test]
    fn a_malformed_file_is_refused_naming_the_field() {
        let good = String::from_utf8(to_json(&meta(), 7)).unwrap();
        let cases = [
            (
                good.replace("\"k1\": 0.9", "\"k1\": \"high\""),
                "field `bm25.k1`: invalid type",
            ),
            (
                good.replace("  \"num_docs\": 3,\n", ""),
                "missing field `num_docs`",
            ),
            (good.replace("0000000000000007", "7"), "field `build_id`"),
            (good.replace("\"build_id\"", "\"build\""), "field `build_id`"),
            (good.replace("\"simdbp\"", "\"zip\""), "field `codec`"),
            (good.replace("\"k1\": 0.9", "\"k1\": 0.8"), "checksum mismatch"),
            (good.replace("\"checksum\"", "\"sum\""), "field `checksum`"),
            (good[..good.len() / 2].to_string(), "not valid JSON"),
            ("[1, 2]".to_string(), "not a JSON object"),
        ];
        for (text, expected) in cases {
            let err = error(text.as_bytes());
            assert!(
                err.contains("meta.json") && err.contains(expected),
                "{expected}: {err}"
            );
        }
    }

    #[test]
    fn version_one_envelope_is_read_with_the_identity_of_its_header() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("meta.json");
        let mut old = meta();
        old.format_version = ENVELOPED_VERSION;
        let json = serde_json::to_vec_pretty(&old).unwrap();
        container::write_file_of_version(&path, files::META.1, ENVELOPED_VERSION, 42, &json).unwrap();
        let back = read(std::fs::File::open(&path).unwrap(), &path).unwrap();
        assert_eq!(expected_version(&back, &path).unwrap(), ENVELOPED_VERSION);
        assert_eq!(
            (back.meta, back.build_id, back.envelope),
            (old, 42, Some(ENVELOPED_VERSION))
        );
    }
}
