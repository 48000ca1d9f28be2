#!/usr/bin/env bash
# Decoding throughput of --data folder against torchvision's ImageFolder +
# DataLoader with PIL on the same cores: a folder of JPEGs written by
# examples/make_image_folder.py (CLASSES x PER images of 200 to 500 pixels a
# side, ImageNet-like), one epoch of RandomResizedCrop(S) + flip, on 1 and
# nproc threads (cdp: decoding threads of io/prefetch.h; torchvision:
# DataLoader worker processes, one torch thread each).
#   bench/run folder-decode [BUILDDIR]
# Knobs: S (224), CLASSES (8), PER (48), B (32), THREADS ("1 nproc").
# Needs /usr/bin/python3 with torchvision and Pillow (python3-torchvision).
set -u
. "$(dirname "$0")/../lib/common.sh"
build=${1:-${top_builddir:-$bench_top}}
CDP=$build/cdp_run
bench_start folder_decode.sh results.txt
bench_header
S=${S:-224}; CLASSES=${CLASSES:-8}; PER=${PER:-48}; B=${B:-32}
THREADS=${THREADS:-"1 $(nproc)"}
PY=/usr/bin/python3
"$PY" -c "import torchvision, PIL" 2>/dev/null || { echo "folder_decode.sh: $PY lacks torchvision or PIL" >&2; exit 77; }
"$PY" "$bench_top/examples/make_image_folder.py" --out "$tmp/imgs" --classes "$CLASSES" --train "$PER" \
    --val 2 --min-side 200 --max-side 500 || exit 2
echo "# folder: $(find "$tmp/imgs/train" -type f | wc -l) training JPEGs, $(du -sh "$tmp/imgs/train" | cut -f1)"
bin=$tmp/folder_decode
mpicc -O2 -std=c11 -D_GNU_SOURCE -I"$bench_top/src" -I"$build" "$bench_dir/data/folder_decode.c" \
    -o "$bin" -L"$build/.libs" -lcdp -Wl,-rpath,"$build/.libs" || exit 2
for t in $THREADS; do
    "$bin" "$tmp/imgs" "$S" "$t" "$B" | tee -a "$res"
    # DataLoader: t worker processes (1: one worker beside the main process)
    "$PY" "$bench_dir/data/torch_folder.py" "$tmp/imgs" "$S" "$t" "$B" | tee -a "$res"
done
grep '^result' "$res" >/dev/null || exit 1
