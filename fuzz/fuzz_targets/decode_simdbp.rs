//! The SIMD-BP128 decoder on arbitrary words, and its encoder and decoder on arbitrary valid blocks.
#![no_main]

mod codec;

libfuzzer_sys::fuzz_target!(|data: &[u8]| codec::run(warpsearch_codec::Codec::SimdBp, data));
