# Shared by the scripts/device-*.sh scripts (sourced, from the repository root): where things are on the
# lent GPU machine, logging, and unpacking the Wikipedia passage index that scripts/device-prepare.sh packs
# in two parts (one call carries at most 64 MiB: postings.bin first, the rest with the binaries). xz is
# unpacked with Python's lzma: the machine may lack the xz and zstd tools.
# Expects $log (the log file under $OUT) to be set by the caller after sourcing.
out=${OUT:-device-out}
mkdir -p "$out"
dev=.device
bin=$dev/warpsearch
wiki=${WARPSEARCH_WIKI_INDEX:-/root/wiki-pfor}
say() { echo "$@" | tee -a "$log"; }
unxz() { python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' "$1"; }
if [ -f $dev/wiki-rest.tar.xz ] && [ ! -f "$wiki/meta.json" ]; then
  mkdir -p "$wiki" && unxz $dev/wiki-rest.tar.xz | tar -x -C "$wiki"
fi
for part in $dev/wiki-postings.bin.xz $dev/part1/wiki-postings.bin.xz; do
  if [ -f $part ] && [ ! -f "$wiki/postings.bin" ]; then
    mkdir -p "$wiki" && unxz $part >"$wiki/postings.bin"
  fi
done
