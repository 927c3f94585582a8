//! Stored documents (`index --store`): each document's input line (its JSON object, or its
//! `id<TAB>text` line) kept in `docs.bin`, compressed with zstd in blocks of consecutive documents, and
//! read back by docID. Only the block holding a document is decompressed.
//!
//! Documents are stored in input order as the build reads them; an index renumbered by global score
//! keeps a table from docID to input position, so that the store is written in one pass. The layout
//! (docs/format.md) puts the tables first and the compressed blocks after them:
//!
//! ```text
//! 0   u64  N, documents
//! 8   u64  B, blocks
//! 16  u64  flags: bit 0 = the position table is present
//! 24  u64  D, bytes of compressed blocks
//! 32  u64 × (B + 1)  offset of each block in the data (0 … D)
//!     u64 × B        decompressed length of each block
//!     u32 × (B + 1)  first position of each block (0 … N), strictly increasing; zero-padded to 8 bytes
//!     u32 × N        with flag 0: the input position of each docID; zero-padded to 8 bytes
//!     D bytes        the blocks: each a zstd frame of u64 × (n + 1) offsets into its text, then the text
//! ```

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::container::{ContainerWriter, Payload};
use crate::error::{corrupt, IndexError, IoContext, Result};

/// Raw bytes after which a block closes: larger blocks compress better, smaller ones are faster to read
/// one document from.
pub const BLOCK_BYTES: usize = 32 << 10;
/// zstd's level: its default, fast to write.
const LEVEL: i32 = 3;
const HEADER: usize = 32;

/// Stored documents being written, in input order, into a temporary file of compressed blocks.
pub struct StoreWriter {
    out: BufWriter<File>,
    path: PathBuf,
    offsets: Vec<u64>,
    raw_lens: Vec<u64>,
    firsts: Vec<u32>,
    count: u64,
    len: u64,
}

/// The blocks of a finished [`StoreWriter`], for [`crate::IndexWriter::set_stored_docs`].
pub struct StoredDocs {
    data: PathBuf,
    offsets: Vec<u64>,
    raw_lens: Vec<u64>,
    firsts: Vec<u32>,
    count: u64,
    /// The input position of each docID, where documents were renumbered.
    order: Option<Vec<u32>>,
}

impl StoreWriter {
    /// A store whose blocks go to the new file `path` (a scratch file: the index holds a copy).
    pub fn create(path: &Path) -> Result<StoreWriter> {
        let file = File::create(path).at(path)?;
        Ok(StoreWriter {
            out: BufWriter::with_capacity(1 << 20, file),
            path: path.to_owned(),
            offsets: Vec::new(),
            raw_lens: Vec::new(),
            firsts: Vec::new(),
            count: 0,
            len: 0,
        })
    }

    /// Appends `docs`, the next documents in input order; their blocks are compressed on all cores.
    pub fn add(&mut self, docs: &[&[u8]]) -> Result<()> {
        let mut blocks: Vec<Range<usize>> = Vec::new();
        let (mut start, mut bytes) = (0, 0);
        for (i, d) in docs.iter().enumerate() {
            bytes += d.len();
            if bytes >= BLOCK_BYTES || i + 1 == docs.len() {
                blocks.push(start..i + 1);
                (start, bytes) = (i + 1, 0);
            }
        }
        let compressed: Vec<std::io::Result<(u64, Vec<u8>)>> = blocks
            .par_iter()
            .map(|r| encode_block(&docs[r.clone()]))
            .collect();
        for (r, c) in blocks.into_iter().zip(compressed) {
            let (raw_len, frame) = c.at(&self.path)?;
            let first = u32::try_from(self.count)
                .map_err(|_| IndexError::Invalid("more documents than 32-bit docIDs hold".into()))?;
            self.firsts.push(first);
            self.offsets.push(self.len);
            self.raw_lens.push(raw_len);
            self.out.write_all(&frame).at(&self.path)?;
            self.len += frame.len() as u64;
            self.count += r.len() as u64;
        }
        Ok(())
    }

    /// The documents written; `order` gives each final docID's input position where the build
    /// renumbered them (`order[doc] = position`).
    pub fn finish(mut self, order: Option<Vec<u32>>) -> Result<StoredDocs> {
        self.out.flush().at(&self.path)?;
        self.offsets.push(self.len);
        self.firsts.push(self.count as u32);
        Ok(StoredDocs {
            data: self.path,
            offsets: self.offsets,
            raw_lens: self.raw_lens,
            firsts: self.firsts,
            count: self.count,
            order,
        })
    }
}

/// One block: `u64 × (n + 1)` offsets into the text, the text, compressed; with its raw length.
fn encode_block(docs: &[&[u8]]) -> std::io::Result<(u64, Vec<u8>)> {
    let text: usize = docs.iter().map(|d| d.len()).sum();
    let mut raw = Vec::with_capacity(8 * (docs.len() + 1) + text);
    let mut at = 0u64;
    raw.extend_from_slice(&at.to_le_bytes());
    for d in docs {
        at += d.len() as u64;
        raw.extend_from_slice(&at.to_le_bytes());
    }
    for d in docs {
        raw.extend_from_slice(d);
    }
    Ok((raw.len() as u64, zstd::bulk::compress(&raw, LEVEL)?))
}

impl StoredDocs {
    /// Number of documents stored.
    pub fn len(&self) -> u64 {
        self.count
    }

    /// Whether none are.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Writes the store's payload into `out` (the tables, then the blocks copied from the scratch file),
    /// for `num_docs` documents.
    pub(crate) fn write(&self, out: &mut ContainerWriter, num_docs: u64) -> Result<()> {
        if self.count != num_docs || self.order.as_ref().is_some_and(|o| o.len() as u64 != num_docs) {
            return Err(IndexError::Invalid(format!(
                "{} stored documents for an index of {num_docs}",
                self.count
            )));
        }
        let blocks = self.raw_lens.len() as u64;
        let data_len = *self.offsets.last().expect("one offset at least");
        for v in [num_docs, blocks, self.order.is_some() as u64, data_len] {
            out.write(&v.to_le_bytes())?;
        }
        out.write(bytemuck::cast_slice(&self.offsets))?;
        out.write(bytemuck::cast_slice(&self.raw_lens))?;
        write_padded(out, bytemuck::cast_slice(&self.firsts))?;
        if let Some(order) = &self.order {
            write_padded(out, bytemuck::cast_slice(order))?;
        }
        let mut data = File::open(&self.data).at(&self.data)?;
        let mut buf = vec![0u8; 1 << 20];
        let mut copied = 0u64;
        loop {
            let n = data.read(&mut buf).at(&self.data)?;
            if n == 0 {
                break;
            }
            out.write(&buf[..n])?;
            copied += n as u64;
        }
        if copied != data_len {
            return Err(IndexError::Invalid(format!(
                "{}: {copied} bytes of stored documents, {data_len} written",
                self.data.display()
            )));
        }
        Ok(())
    }
}

fn write_padded(out: &mut ContainerWriter, bytes: &[u8]) -> Result<()> {
    out.write(bytes)?;
    out.write(&[0u8; 8][..bytes.len().next_multiple_of(8) - bytes.len()])
}

/// The stored documents of an open index: the tables checked and held in memory, the blocks in the
/// file's mapping, decoded defensively (a damaged block is an error naming the file, never a panic).
pub struct Store {
    payload: Payload,
    path: PathBuf,
    /// Where the blocks start in the payload.
    data: usize,
    offsets: Vec<u64>,
    raw_lens: Vec<u64>,
    firsts: Vec<u32>,
    order: Option<Vec<u32>>,
}

impl Store {
    /// The store in `payload` (the file `path`) of an index of `num_docs` documents, its tables checked.
    pub fn open(payload: Payload, path: &Path, num_docs: u64) -> Result<Store> {
        let bad = |what: &str| corrupt(path, format!("stored documents: {what}"));
        let bytes = payload.bytes();
        let word = |i: usize| -> Option<u64> {
            bytes
                .get(8 * i..8 * i + 8)
                .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        };
        let (Some(n), Some(blocks), Some(flags), Some(data_len)) = (word(0), word(1), word(2), word(3))
        else {
            return Err(bad("shorter than its header"));
        };
        if n != num_docs {
            return Err(bad(&format!("{n} documents, the index has {num_docs}")));
        }
        if flags > 1 || blocks > n {
            return Err(bad("inconsistent header"));
        }
        let (b, n) = (blocks as usize, n as usize);
        let mut at = HEADER;
        let mut take = |len: usize| -> Result<&[u8]> {
            let padded = len.next_multiple_of(8);
            let part = bytes
                .get(at..at + len)
                .ok_or_else(|| bad("shorter than its tables"))?;
            at += padded;
            Ok(part)
        };
        let u64s = |b: &[u8]| -> Vec<u64> {
            b.chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect()
        };
        let u32s = |b: &[u8]| -> Vec<u32> {
            b.chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
                .collect()
        };
        let offsets = u64s(take(8 * (b + 1))?);
        let raw_lens = u64s(take(8 * b)?);
        let firsts = u32s(take(4 * (b + 1))?);
        let order = if flags == 1 {
            Some(u32s(take(4 * n)?))
        } else {
            None
        };
        let data = at;
        if bytes.len().checked_sub(data) != Some(data_len as usize) {
            return Err(bad("the blocks' length differs from the header's"));
        }
        let blocks_ok = offsets.first() == Some(&0)
            && offsets.last() == Some(&data_len)
            && offsets.windows(2).all(|w| w[0] < w[1])
            && firsts.first() == Some(&0)
            && firsts.last().map(|&l| l as usize) == Some(n)
            && firsts.windows(2).all(|w| w[0] < w[1]);
        // No blocks at all only for no documents.
        if !(blocks_ok || (b == 0 && n == 0 && data_len == 0 && firsts == [0] && offsets == [0])) {
            return Err(bad("the block tables are inconsistent"));
        }
        if let Some(order) = &order {
            let mut seen = vec![false; n];
            for &p in order {
                match seen.get_mut(p as usize) {
                    Some(s) if !*s => *s = true,
                    _ => return Err(bad("the docID table is not a permutation")),
                }
            }
        }
        Ok(Store {
            payload,
            path: path.to_owned(),
            data,
            offsets,
            raw_lens,
            firsts,
            order,
        })
    }

    /// The stored line of document `doc` (below the index's number of documents).
    pub fn get(&self, doc: u32) -> Result<String> {
        let mut out = self.get_many(&[doc])?;
        Ok(out.pop().expect("one document asked"))
    }

    /// The stored lines of `docs`, in order; each block they fall in is decompressed once.
    pub fn get_many(&self, docs: &[u32]) -> Result<Vec<String>> {
        let n = self.firsts.last().copied().unwrap_or(0);
        let positions: Vec<u32> = docs
            .iter()
            .map(|&d| {
                if d >= n {
                    return Err(IndexError::Invalid(format!(
                        "document number {d} is out of range: the index has {n} documents"
                    )));
                }
                Ok(self.order.as_ref().map_or(d, |o| o[d as usize]))
            })
            .collect::<Result<_>>()?;
        let mut block: Option<(usize, Vec<u8>)> = None;
        let mut by_block: Vec<usize> = (0..docs.len()).collect();
        by_block.sort_by_key(|&i| positions[i]);
        let mut out = vec![String::new(); docs.len()];
        for i in by_block {
            let p = positions[i];
            let b = self.firsts.partition_point(|&f| f <= p) - 1;
            if block.as_ref().is_none_or(|(held, _)| *held != b) {
                block = Some((b, self.block(b)?));
            }
            let raw = &block.as_ref().expect("decoded above").1;
            out[i] = self.doc_in(raw, b, (p - self.firsts[b]) as usize)?;
        }
        Ok(out)
    }

    fn block(&self, b: usize) -> Result<Vec<u8>> {
        let bytes = self.payload.bytes();
        let range = self.data + self.offsets[b] as usize..self.data + self.offsets[b + 1] as usize;
        let frame = bytes
            .get(range)
            .ok_or_else(|| self.damaged(b, "outside the file"))?;
        let len = usize::try_from(self.raw_lens[b]).map_err(|_| self.damaged(b, "too long"))?;
        let raw = zstd::bulk::decompress(frame, len).map_err(|e| self.damaged(b, &e.to_string()))?;
        if raw.len() != len {
            return Err(self.damaged(b, "its length differs from the table's"));
        }
        Ok(raw)
    }

    /// Document `i` of block `b`'s decompressed bytes `raw`.
    fn doc_in(&self, raw: &[u8], b: usize, i: usize) -> Result<String> {
        let count = (self.firsts[b + 1] - self.firsts[b]) as usize;
        let at = |j: usize| -> Option<usize> {
            let o = raw.get(8 * j..8 * j + 8)?;
            usize::try_from(u64::from_le_bytes(o.try_into().expect("8 bytes"))).ok()
        };
        let text = 8 * (count + 1);
        let span = (at(i), at(i + 1));
        let bytes = match span {
            (Some(s), Some(e)) if s <= e => raw.get(text + s..text + e),
            _ => None,
        }
        .ok_or_else(|| self.damaged(b, "a document's offsets lie outside it"))?;
        String::from_utf8(bytes.to_vec()).map_err(|_| self.damaged(b, "a document is not UTF-8"))
    }

    fn damaged(&self, b: usize, what: &str) -> IndexError {
        corrupt(&self.path, format!("stored documents, block {b}: {what}"))
    }

    /// An error when the file changed since it was opened ([`Payload::check_unchanged`]).
    pub fn check_unchanged(&self, path: &Path) -> Result<()> {
        self.payload.check_unchanged(path)
    }

    /// Compressed bytes of the blocks.
    pub fn compressed_bytes(&self) -> u64 {
        self.offsets.last().copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Documents of every size, some across blocks, written and read back in any order, with and without
    /// a docID table; damage to a block is an error, not a panic.
    #[test]
    fn documents_round_trip_by_docid() {
        let dir = tempfile::tempdir().unwrap();
        let docs: Vec<String> = (0..500)
            .map(|i| {
                format!(
                    "{{\"id\": \"d{i}\", \"contents\": \"{}\"}}",
                    "wörd ".repeat(i * i % 3000)
                )
            })
            .collect();
        for order in [None, Some((0..500u32).rev().collect::<Vec<u32>>())] {
            let mut w = StoreWriter::create(&dir.path().join("scratch")).unwrap();
            let refs: Vec<&[u8]> = docs.iter().map(|d| d.as_bytes()).collect();
            w.add(&refs[..123]).unwrap();
            w.add(&refs[123..]).unwrap();
            w.add(&[]).unwrap();
            let stored = w.finish(order.clone()).unwrap();
            assert!(stored.firsts.len() > 3, "several blocks");
            let path = dir.path().join("docs.bin");
            let _ = std::fs::remove_file(&path);
            let mut out = ContainerWriter::create(&path, b"DOCS\0\0\0\0", 1).unwrap();
            stored.write(&mut out, 500).unwrap();
            out.finish().unwrap();
            let file = File::open(&path).unwrap();
            let payload = crate::container::open_file(file, &path, b"DOCS\0\0\0\0").unwrap();
            let store = Store::open(payload.clone(), &path, 500).unwrap();
            let input = |d: u32| order.as_ref().map_or(d, |o| o[d as usize]) as usize;
            for d in [0u32, 1, 77, 499, 250] {
                assert_eq!(store.get(d).unwrap(), docs[input(d)]);
            }
            let asked = [499u32, 3, 3, 260, 0];
            let got = store.get_many(&asked).unwrap();
            for (d, text) in asked.iter().zip(&got) {
                assert_eq!(text, &docs[input(*d)]);
            }
            assert!(store.get(500).is_err());
            assert!(Store::open(payload, &path, 499).is_err());
        }
    }

    #[test]
    fn an_empty_store_opens() {
        let dir = tempfile::tempdir().unwrap();
        let stored = StoreWriter::create(&dir.path().join("s"))
            .unwrap()
            .finish(None)
            .unwrap();
        let path = dir.path().join("docs.bin");
        let mut out = ContainerWriter::create(&path, b"DOCS\0\0\0\0", 1).unwrap();
        stored.write(&mut out, 0).unwrap();
        out.finish().unwrap();
        let payload =
            crate::container::open_file(File::open(&path).unwrap(), &path, b"DOCS\0\0\0\0").unwrap();
        let store = Store::open(payload, &path, 0).unwrap();
        assert!(store.get(0).is_err());
    }
}
