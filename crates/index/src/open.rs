//! [`Index::open`]: an index directory as one index, or as a sharded index's head with its shards,
//! each opened and checked to belong to it ([`crate::shards`]); the reader opens one directory.

use std::path::Path;

use crate::error::{IndexError, Result};
use crate::reader::Index;

impl Index {
    /// Opens and checks the index in `dir`.
    ///
    /// Every file is opened relative to one handle on the directory and must carry the build identity
    /// of `meta.json`, so an open racing a replacement (`index --force`) sees the old or the new index,
    /// never a mix: when it notices the race it starts over, a few times. A directory missing because a
    /// replacement was killed half-way is first recovered ([`crate::replace::recover`]).
    ///
    /// A sharded index's directory (`index --shards N`) opens as its head, with every shard opened and
    /// checked to belong to it ([`Index::shards`]); a shard's directory alone is refused, since its
    /// postings mean nothing without the collection's statistics.
    pub fn open(dir: impl AsRef<Path>) -> Result<Index> {
        let dir = dir.as_ref();
        let index = Index::open_member(dir)?;
        if let Some(s) = &index.meta().shard {
            return Err(IndexError::Invalid(format!(
                "{} is shard {} of {} of a sharded index: open the sharded index's directory (the one \
                 that holds it{}) instead",
                dir.display(),
                s.shard,
                s.shards,
                dir.parent()
                    .map(|p| format!(", {}", p.display()))
                    .unwrap_or_default()
            )));
        }
        if index.meta().shards.is_none() {
            return Ok(index);
        }
        crate::shards::check_head(&index)?;
        let shards = crate::shards::open_shards(&index)?;
        Ok(index.with_shards(shards))
    }
}
