//! The envelope of every index file: a versioned header and a checksummed footer.
//!
//! ```text
//! 0   8  magic "WARPSRCH"
//! 8   8  kind, e.g. "POSTINGS" (which file this is)
//! 16  4  format version (u32 LE): this build writes 2 and reads 1 and 2 (which differ in `meta.json`
//!        only, plain JSON since 2: `crate::meta`)
//! 20  8  build identity (u64 LE): one random value shared by every file of one build, 0 in files
//!        written before it existed; `Index::open` refuses files of different builds
//! 28  4  reserved, zero
//! 32  …  payload (starts 32-byte aligned, so u32/u64 arrays can be read in place)
//! end-24 8  payload length in bytes (u64 LE)
//! end-16 4  CRC-32 (IEEE) of header and payload (u32 LE)
//! end-12 4  reserved, zero
//! end-8  8  magic "WSFOOTER"
//! ```
//!
//! Readers check both magics, the kind, the version, the length and the checksum before using a file.
//! The build identity lets a reader tell a whole index from a mix of two builds' files (a copy between
//! indexes, or a replacement racing the open), which checksums alone cannot.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::Mmap;

use crate::error::{corrupt, IndexError, IoContext, Result};

/// Version of the on-disk format this build writes; it reads this one and [`ENVELOPED_VERSION`],
/// whose binary files are the same.
pub const FORMAT_VERSION: u32 = 2;
/// The format version whose `meta.json` sits in the binary envelope; every later one writes it plain
/// (`crate::meta`).
pub const ENVELOPED_VERSION: u32 = 1;
/// The first bytes of every enveloped file.
pub const MAGIC: &[u8; 8] = b"WARPSRCH";
const FOOTER_MAGIC: &[u8; 8] = b"WSFOOTER";
/// Header length in bytes.
pub const HEADER_LEN: usize = 32;
/// Footer length in bytes.
pub const FOOTER_LEN: usize = 24;

/// Payload bytes after which a file's written pages are sent to disk while it is written, so that the
/// sync at its end waits for the last of them only.
const WRITEBACK: u64 = 64 << 20;

/// Streams one file: header, payload (written piecewise), footer.
pub struct ContainerWriter {
    out: BufWriter<File>,
    crc: crc32fast::Hasher,
    len: u64,
    /// Payload bytes whose pages were sent to disk ([`WRITEBACK`]).
    sent: u64,
    path: PathBuf,
}

impl ContainerWriter {
    /// Creates `path` and writes the header for a file of `kind` belonging to build `build_id`.
    pub fn create(path: &Path, kind: &[u8; 8], build_id: u64) -> Result<Self> {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        // Read-only for everyone once written (the handle opened here still writes): an index file
        // changed in place under a reader that maps it gives wrong answers or kills it (SIGBUS).
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o444);
        let file = options.open(path).at(path)?;
        let mut header = [0u8; HEADER_LEN];
        header[..8].copy_from_slice(MAGIC);
        header[8..16].copy_from_slice(kind);
        header[16..20].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        header[20..28].copy_from_slice(&build_id.to_le_bytes());
        let mut w = ContainerWriter {
            out: BufWriter::with_capacity(1 << 20, file),
            crc: Default::default(),
            len: 0,
            sent: 0,
            path: path.to_owned(),
        };
        w.out.write_all(&header).at(path)?;
        w.crc.update(&header);
        Ok(w)
    }

    /// Appends payload bytes.
    pub fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.append(bytes).at(&self.path)
    }

    fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.crc.update(bytes);
        self.len += bytes.len() as u64;
        self.out.write_all(bytes)?;
        if self.len - self.sent >= WRITEBACK {
            self.out.flush()?;
            let from = (HEADER_LEN as u64 + self.sent, self.len - self.sent);
            start_writeback(self.out.get_ref(), from.0, from.1);
            self.sent = self.len;
        }
        Ok(())
    }

    /// Payload bytes written so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether no payload was written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Writes the footer, flushes and syncs the file to disk.
    pub fn finish(mut self) -> Result<()> {
        let mut footer = [0u8; FOOTER_LEN];
        footer[..8].copy_from_slice(&self.len.to_le_bytes());
        footer[8..12].copy_from_slice(&self.crc.clone().finalize().to_le_bytes());
        footer[16..].copy_from_slice(FOOTER_MAGIC);
        self.out.write_all(&footer).at(&self.path)?;
        let file = self.out.into_inner().map_err(|e| e.into_error()).at(&self.path)?;
        file.sync_all().at(&self.path)
    }
}

/// Starts sending `len` bytes of `file` from `offset` to disk, without waiting. Advisory: where it
/// fails, the sync at the file's end writes them and reports any error.
#[cfg(target_os = "linux")]
fn start_writeback(file: &File, offset: u64, len: u64) {
    use std::os::fd::AsRawFd;
    // SAFETY: `file` is an open descriptor for the call's length; the call reads no memory of ours.
    unsafe {
        libc::sync_file_range(
            file.as_raw_fd(),
            offset as libc::off64_t,
            len as libc::off64_t,
            libc::SYNC_FILE_RANGE_WRITE,
        )
    };
}

#[cfg(not(target_os = "linux"))]
fn start_writeback(_file: &File, _offset: u64, _len: u64) {}

impl Write for ContainerWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.append(buf)?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// Writes a whole file in one call.
pub fn write_file(path: &Path, kind: &[u8; 8], build_id: u64, payload: &[u8]) -> Result<()> {
    let mut w = ContainerWriter::create(path, kind, build_id)?;
    w.write(payload)?;
    w.finish()
}

/// Writes a whole file as [`write_file`] does with another format version in its header: for tests of
/// what older builds wrote.
#[doc(hidden)]
pub fn write_file_of_version(
    path: &Path,
    kind: &[u8; 8],
    version: u32,
    build_id: u64,
    payload: &[u8],
) -> Result<()> {
    write_file(path, kind, build_id, payload)?;
    let mut bytes = std::fs::read(path).at(path)?;
    bytes[16..20].copy_from_slice(&version.to_le_bytes());
    let end = bytes.len() - FOOTER_LEN;
    let crc = crc32fast::hash(&bytes[..end]);
    bytes[end + 8..end + 12].copy_from_slice(&crc.to_le_bytes());
    std::fs::remove_file(path).at(path)?;
    std::fs::write(path, bytes).at(path)
}

/// A fresh build identity: random (std's randomly keyed hasher over the time and process id), never 0.
pub fn new_build_id() -> u64 {
    use std::hash::{BuildHasher, Hash, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    std::time::SystemTime::now().hash(&mut h);
    std::process::id().hash(&mut h);
    h.finish().max(1)
}

/// The checked payload of an index file, memory-mapped or held in memory; cheap to clone, usable as
/// `fst` storage.
#[derive(Clone, Debug)]
pub struct Payload {
    file: Arc<Backing>,
    range: Range<usize>,
}

/// A whole index file.
#[derive(Debug)]
enum Backing {
    /// Mapped, with the open file and what it looked like when mapped ([`Payload::check_unchanged`]).
    Mapped { map: Mmap, file: File, stamp: Stamp },
    /// Read into memory: `len` bytes of `words` (8-byte aligned, as u64 records need).
    Held { words: Box<[u64]>, len: usize },
}

/// What a mapped file's metadata says of its contents: a write or a truncation changes one of them.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Stamp {
    len: u64,
    modified: Option<std::time::SystemTime>,
}

impl Stamp {
    fn of(file: &File, path: &Path) -> Result<Stamp> {
        let meta = file.metadata().at(path)?;
        Ok(Stamp {
            len: meta.len(),
            modified: meta.modified().ok(),
        })
    }
}

impl Backing {
    fn bytes(&self) -> &[u8] {
        match self {
            Backing::Mapped { map, .. } => map,
            Backing::Held { words, len } => &bytemuck::cast_slice(words)[..*len],
        }
    }
}

impl AsRef<[u8]> for Payload {
    fn as_ref(&self) -> &[u8] {
        &self.file.bytes()[self.range.clone()]
    }
}

impl Payload {
    /// The payload bytes.
    pub fn bytes(&self) -> &[u8] {
        self.as_ref()
    }

    /// The build identity in the file's header (0 for files written before identities existed).
    pub fn build_id(&self) -> u64 {
        u64::from_le_bytes(self.file.bytes()[20..28].try_into().expect("8 bytes"))
    }

    /// The format version in the file's header.
    pub fn version(&self) -> u32 {
        u32::from_le_bytes(self.file.bytes()[16..20].try_into().expect("4 bytes"))
    }

    /// Whether the payload is memory-mapped (else it is held in memory).
    pub fn is_mapped(&self) -> bool {
        matches!(*self.file, Backing::Mapped { .. })
    }

    /// An error when the mapped file's length or modification time differ from when it was mapped
    /// (one `fstat`): it was truncated or written in place, and what it maps can be other bytes than
    /// were checked. A payload held in memory cannot change.
    pub fn check_unchanged(&self, path: &Path) -> Result<()> {
        let Backing::Mapped { file, stamp, .. } = &*self.file else {
            return Ok(());
        };
        if Stamp::of(file, path)? != *stamp {
            return Err(corrupt(
                path,
                "changed on disk while the index was open (written in place or truncated), so answers \
                 read from it can be wrong: open the index again. Index files are read-only; replace \
                 an index with `warpsearch index --force`, which leaves open readers the old files",
            ));
        }
        Ok(())
    }
}

/// Maps `path`, checks header, footer and checksum, and returns its payload.
pub fn open(path: &Path, kind: &[u8; 8]) -> Result<Payload> {
    open_file(File::open(path).at(path)?, path, kind)
}

/// Like [`open`] for a file already opened (e.g. relative to a directory handle); `path` names it in
/// errors.
pub fn open_file(file: File, path: &Path, kind: &[u8; 8]) -> Result<Payload> {
    let stamp = Stamp::of(&file, path)?;
    // SAFETY: index files are written read-only and replaced by renaming a new directory into place,
    // which leaves the mapped files as they are. A file truncated in place by someone who overrides its
    // permissions can still raise SIGBUS on access: no mapping can guard against that; a change is
    // detected by `Payload::check_unchanged` and by the checksum at the next open.
    let map = unsafe { Mmap::map(&file) }.at(path)?;
    let payload = check(&map, path, kind)?;
    Ok(Payload {
        file: Arc::new(Backing::Mapped { map, file, stamp }),
        range: payload,
    })
}

/// Reads the whole of `file` into memory (in parallel chunks), checks it as [`open_file`] does and
/// returns its payload, which nothing done to the file afterwards can change.
pub fn read_file(file: File, path: &Path, kind: &[u8; 8]) -> Result<Payload> {
    let len = usize::try_from(file.metadata().at(path)?.len())
        .map_err(|_| corrupt(path, "larger than the address space"))?;
    let mut words = vec![0u64; len.div_ceil(8)].into_boxed_slice();
    let bytes: &mut [u8] = &mut bytemuck::cast_slice_mut(&mut words)[..len];
    read_all(&file, bytes).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => corrupt(
            path,
            "shorter than its length when opened: it changed while it was read",
        ),
        _ => IndexError::Io {
            path: path.to_owned(),
            cause: e,
        },
    })?;
    let payload = check(bytes, path, kind)?;
    Ok(Payload {
        file: Arc::new(Backing::Held { words, len }),
        range: payload,
    })
}

/// Fills `buf` from the start of `file`, in chunks on all cores (the copy and the page faults of a
/// gigabyte of skip data take a second on one).
#[cfg(unix)]
fn read_all(file: &File, buf: &mut [u8]) -> std::io::Result<()> {
    use rayon::prelude::*;
    use std::os::unix::fs::FileExt;
    const CHUNK: usize = 8 << 20;
    buf.par_chunks_mut(CHUNK)
        .enumerate()
        .try_for_each(|(i, chunk)| file.read_exact_at(chunk, (i * CHUNK) as u64))
}

#[cfg(not(unix))]
fn read_all(mut file: &File, buf: &mut [u8]) -> std::io::Result<()> {
    use std::io::Read;
    file.read_exact(buf)
}

/// Checks a whole file's `bytes` as [`read_file`] does: its payload's place, its format version and its
/// build identity.
pub(crate) fn check_bytes(bytes: &[u8], path: &Path, kind: &[u8; 8]) -> Result<(Range<usize>, u32, u64)> {
    let range = check(bytes, path, kind)?;
    let version = u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes"));
    let build_id = u64::from_le_bytes(bytes[20..28].try_into().expect("8 bytes"));
    Ok((range, version, build_id))
}

fn check(bytes: &[u8], path: &Path, kind: &[u8; 8]) -> Result<Range<usize>> {
    let bad = |what: String| Err(corrupt(path, what));
    if bytes.len() < HEADER_LEN + FOOTER_LEN || &bytes[..8] != MAGIC {
        return bad("not a warpsearch index file (bad magic or too short)".into());
    }
    if &bytes[8..16] != kind {
        return bad(format!(
            "expected a {} file, found {}",
            show(kind),
            show(&bytes[8..16])
        ));
    }
    let version = u32::from_le_bytes(bytes[16..20].try_into().unwrap());
    if !(ENVELOPED_VERSION..=FORMAT_VERSION).contains(&version) {
        return bad(format!(
            "format version {version}; this build reads versions {} to {FORMAT_VERSION}: rebuild the index",
            ENVELOPED_VERSION
        ));
    }
    if bytes[28..32] != [0; 4] {
        return bad("reserved header bytes are not zero".into());
    }
    let footer = &bytes[bytes.len() - FOOTER_LEN..];
    if &footer[16..] != FOOTER_MAGIC || footer[12..16] != [0; 4] {
        return bad("missing footer: the file is truncated (was the build interrupted?)".into());
    }
    let len = u64::from_le_bytes(footer[..8].try_into().unwrap());
    if len != (bytes.len() - HEADER_LEN - FOOTER_LEN) as u64 {
        return bad(format!(
            "footer says {len} payload bytes, file holds {}",
            bytes.len() - HEADER_LEN - FOOTER_LEN
        ));
    }
    let stored = u32::from_le_bytes(footer[8..12].try_into().unwrap());
    let end = bytes.len() - FOOTER_LEN;
    if checksum(&bytes[..end]) != stored {
        return bad("checksum mismatch: the file is damaged; rebuild the index".into());
    }
    Ok(HEADER_LEN..end)
}

/// CRC-32 of `bytes`, computed in chunks on all cores and combined: every open checks every file, and on
/// one thread that took seconds for a collection of tens of GB. Equal to `crc32fast::hash(bytes)`.
pub(crate) fn checksum(bytes: &[u8]) -> u32 {
    use rayon::prelude::*;
    const CHUNK: usize = 32 << 20;
    if bytes.len() <= CHUNK {
        return crc32fast::hash(bytes);
    }
    bytes
        .par_chunks(CHUNK)
        .map(|c| {
            let mut h = crc32fast::Hasher::new();
            h.update(c);
            h
        })
        .reduce(crc32fast::Hasher::new, |mut a, b| {
            a.combine(&b);
            a
        })
        .finalize()
}

fn show(kind: &[u8]) -> String {
    String::from_utf8_lossy(kind).trim_end_matches('\0').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_in_chunks_equals_the_whole() {
        // Past one chunk and not a multiple of it; and the empty input.
        let bytes: Vec<u8> = (0..(32usize << 20) * 2 + 12_345)
            .map(|i| ((i * 2_654_435_761) >> 7) as u8)
            .collect();
        for len in [0, 1, 4096, 32 << 20, (32 << 20) + 1, bytes.len()] {
            assert_eq!(
                checksum(&bytes[..len]),
                crc32fast::hash(&bytes[..len]),
                "len {len}"
            );
        }
    }

    /// A file written in pieces past [`WRITEBACK`] several times (its pages sent to disk as it is
    /// written), through both of the writer's ways in, reads back whole and checksummed.
    #[test]
    fn a_file_sent_to_disk_as_it_is_written_reads_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        let piece: Vec<u8> = (0..(3usize << 20) + 7).map(|i| (i * 31 % 251) as u8).collect();
        let mut w = ContainerWriter::create(&path, b"TESTFILE", 7).unwrap();
        let mut want = Vec::new();
        for i in 0..50 {
            match i % 2 {
                0 => w.write(&piece).unwrap(),
                _ => w.write_all(&piece[..piece.len() - i]).unwrap(),
            }
            want.extend_from_slice(&piece[..piece.len() - i * (i % 2)]);
        }
        assert!(want.len() as u64 > 2 * WRITEBACK);
        w.finish().unwrap();
        let payload = open(&path, b"TESTFILE").unwrap();
        assert_eq!(payload.bytes().len(), want.len());
        assert!(payload.bytes() == &want[..], "the payload differs");
    }

    #[test]
    fn round_trip_and_every_damage_is_caught() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        write_file(&path, b"TESTFILE", 42, b"hello payload").unwrap();
        let payload = open(&path, b"TESTFILE").unwrap();
        assert_eq!((payload.bytes(), payload.build_id()), (&b"hello payload"[..], 42));
        let held = read_file(File::open(&path).unwrap(), &path, b"TESTFILE").unwrap();
        assert_eq!((held.bytes(), held.build_id()), (&b"hello payload"[..], 42));
        assert!(payload.is_mapped() && !held.is_mapped());
        assert!(open(&path, b"OTHERKND")
            .unwrap_err()
            .to_string()
            .contains("expected a OTHERKND file"));
        let good = std::fs::read(&path).unwrap();
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x20;
            crate::testdata::replace_file(&path, &bad);
            assert!(
                open(&path, b"TESTFILE").is_err(),
                "flipped byte {i} went unnoticed"
            );
            assert!(read_file(File::open(&path).unwrap(), &path, b"TESTFILE").is_err());
        }
        crate::testdata::replace_file(&path, &good[..good.len() - 3]);
        assert!(open(&path, b"TESTFILE")
            .unwrap_err()
            .to_string()
            .contains("truncated"));
    }
}
