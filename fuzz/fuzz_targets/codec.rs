//! The body shared by the three block-codec targets: arbitrary words through the decoders (an error or
//! a value, never a panic), and an arbitrary valid block through encode then decode (the same block).

use warpsearch_codec::{Codec, ListParams, BLOCK_LEN};

fn u32_at(data: &[u8], i: usize) -> u32 {
    let mut b = [0u8; 4];
    for (j, x) in b.iter_mut().enumerate() {
        *x = data.get(i + j).copied().unwrap_or(0);
    }
    u32::from_le_bytes(b)
}

pub fn run(codec: Codec, data: &[u8]) {
    if data.len() < 16 {
        return;
    }
    // Damaged words: header bytes give the parameters and the skip entry, the rest is the block.
    let p = ListParams {
        doc: data[0],
        freq: data[1],
    };
    let n = 1 + data[2] as usize % BLOCK_LEN;
    let freq_off = data[3] as usize;
    let (first, last) = (u32_at(data, 4), u32_at(data, 8));
    let words: Vec<u32> = data[12..].chunks(4).map(|c| u32_at(c, 0)).collect();
    let mut out = vec![0u32; n];
    let _ = codec.decode_docs(p, &words, freq_off, first, last, &mut out);
    let _ = codec.decode_freqs(p, &words, freq_off, &mut out);

    // A valid block from the same bytes: increasing docIDs, frequencies of at least 1.
    let mut docs = Vec::new();
    let mut freqs = Vec::new();
    let mut doc = u32_at(data, 4) >> (data[0] % 32);
    for c in data[12..].chunks(2).take(BLOCK_LEN) {
        docs.push(doc);
        freqs.push(1 + (c[0] as u32) * (1 + (c.get(1).copied().unwrap_or(0) as u32 % 4) * 300));
        let Some(next) = doc.checked_add(1 + (c[0] as u32).pow(1 + data[1] as u32 % 3)) else {
            break;
        };
        doc = next;
    }
    let p = codec.list_params(&docs, &freqs);
    let mut block = Vec::new();
    let freq_off = codec.encode_block(p, &docs, &freqs, &mut block) as usize;
    let (mut d, mut f) = (vec![0u32; docs.len()], vec![0u32; docs.len()]);
    codec
        .decode_docs(p, &block, freq_off, docs[0], docs[docs.len() - 1], &mut d)
        .expect("a block just encoded decodes");
    codec
        .decode_freqs(p, &block, freq_off, &mut f)
        .expect("frequencies decode");
    assert_eq!((d, f), (docs, freqs));
}
