//! The index part's error type.

use std::path::PathBuf;

use warpsearch_codec::CodecError;

/// Everything that can go wrong building, opening or reading an index.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// An operating-system error on a named file.
    ///
    /// The cause is part of the message and deliberately not a `source()`, so that printing the error
    /// chain (`{:#}`) does not say it twice.
    #[error("{path}: {cause}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What the OS said.
        cause: std::io::Error,
    },
    /// A file of the index (or a CIFF file) is damaged or not what it claims to be.
    #[error("{path}: corrupt or incompatible file: {what}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong and, where it helps, what to do.
        what: String,
    },
    /// A bad line of the input collection or of a side file.
    #[error("{path}:{line}: {what}")]
    Input {
        /// The input file.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// What is wrong and what to do.
        what: String,
    },
    /// A request that cannot be carried out as given.
    #[error("{0}")]
    Invalid(String),
    /// A block of a posting list failed to decode (the cause is in the message, not a `source()`).
    #[error("term '{term}', block {block}: {cause}")]
    Codec {
        /// The term whose list is damaged.
        term: String,
        /// The block.
        block: usize,
        /// The decoder's complaint.
        cause: CodecError,
    },
}

/// The index part's result.
pub type Result<T, E = IndexError> = std::result::Result<T, E>;

/// Attaches a path to an I/O error.
pub(crate) trait IoContext<T> {
    fn at(self, path: impl Into<PathBuf>) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn at(self, path: impl Into<PathBuf>) -> Result<T> {
        self.map_err(|cause| IndexError::Io {
            path: path.into(),
            cause,
        })
    }
}

pub(crate) fn corrupt(path: impl Into<PathBuf>, what: impl Into<String>) -> IndexError {
    IndexError::Corrupt {
        path: path.into(),
        what: what.into(),
    }
}
