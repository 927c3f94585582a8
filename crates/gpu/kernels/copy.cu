// A list cache's plan change (residency.rs, DeviceIndex::apply): many short copies between device
// addresses in one launch, where one driver call per copy cost ~7 us each (six per changed list:
// postings words and five skip-data columns). Piece p is len[p] 32-bit words from src[p] to dst[p];
// pieces neither overlap each other nor one another's sources. One CTA copies a piece at a time.
extern "C" __global__ void copy_pieces(const unsigned long long* __restrict__ src,
                                       const unsigned long long* __restrict__ dst,
                                       const unsigned int* __restrict__ len, unsigned int n) {
    for (unsigned int p = blockIdx.x; p < n; p += gridDim.x) {
        const unsigned int* s = reinterpret_cast<const unsigned int*>(src[p]);
        unsigned int* d = reinterpret_cast<unsigned int*>(dst[p]);
        for (unsigned int i = threadIdx.x; i < len[p]; i += blockDim.x) {
            d[i] = s[i];
        }
    }
}
