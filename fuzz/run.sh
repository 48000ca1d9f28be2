#!/usr/bin/env bash
# Builds the libFuzzer harnesses (fuzz/fuzz_*.c) with clang
# -fsanitize=fuzzer,address,undefined against the in-tree reader sources
# and runs each for SECONDS (default 25) from a copy of its committed seed
# corpus, fuzz/corpus/NAME (the committed corpus does not grow).  Fails
# (exit 1) on any crash, sanitizer report, leak, timeout or out-of-memory;
# the input that caused it is left in $FUZZ_OUT (default fuzz/out) and the
# report printed.  SECONDS = 0 only replays the corpus.
#   fuzz/run.sh [SECONDS] [HARNESS...]      (HARNESS: json safetensors
#                                            checkpoint idx cifar modelfile image)
# Installs clang and libFuzzer (Debian: clang libclang-rt-dev) when missing.
# Environment: FUZZ_BUILD (build directory, default fuzz/build), FUZZ_OUT.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-25}
shift || true
harnesses=${*:-json safetensors checkpoint idx cifar modelfile image}
build=${FUZZ_BUILD:-$src/fuzz/build}
out=${FUZZ_OUT:-$src/fuzz/out}
CC=${FUZZ_CC:-clang}

# the largest input of each harness: a few times its largest seed
max_len() {
    case $1 in
        json) echo 4096 ;;
        modelfile) echo 16384 ;;   # a printed resnet20 is 5.6 KB
        safetensors | checkpoint) echo 8192 ;;
        idx) echo 4096 ;;
        cifar) echo 12800 ;;   # 4 records and the selector byte
        image) echo 16384 ;;
    esac
}

have_libfuzzer() {
    local d
    d=$(mktemp -d)
    printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
        'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }' \
        > "$d/t.c"
    "$CC" -fsanitize=fuzzer,address,undefined "$d/t.c" -o "$d/t" >/dev/null 2>&1
    local rc=$?
    rm -rf "$d"
    return $rc
}
if ! command -v "$CC" >/dev/null 2>&1 || ! have_libfuzzer; then
    echo "fuzz/run.sh: installing clang and libFuzzer (clang libclang-rt-dev)"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q clang libclang-rt-dev
    have_libfuzzer || { echo "fuzz/run.sh: $CC cannot build a libFuzzer harness" >&2; exit 1; }
fi

# the reader sources and what they need to build a model (mlp)
# (whole folders, so a new model or layer file cannot leave the link short)
lib="src/io/json.c src/io/safetensors.c src/io/checkpoint.c src/io/data.c src/io/output.c src/io/stale_tmp.c
src/io/image_decode.c src/io/transforms.c src/io/image_folder.c
src/optim/optim.c $(cd "$src" && ls src/util/*.c src/models/*.c src/nn/*.c)"
flags="-g -O1 -std=c11 -D_GNU_SOURCE -DHAVE_TURBOJPEG -DHAVE_LIBPNG -fno-omit-frame-pointer -fno-sanitize-recover=all"
mkdir -p "$build" "$out"
objs=""
for f in $lib; do
    objs="$objs $build/$(basename "$f" .c).o"
done
for f in $lib; do
    o="$build/$(basename "$f" .c).o"
    echo "$CC $flags -fsanitize=fuzzer-no-link,address,undefined -I$src/include -I$src/src -c $src/$f -o $o"
done | xargs -P "$(nproc)" -I{} sh -c '{}'
for h in $harnesses; do
    "$CC" $flags -fsanitize=fuzzer,address,undefined -I"$src/include" -I"$src/src" "$src/fuzz/fuzz_$h.c" \
        $objs -lturbojpeg -lpng16 -lz -lm -o "$build/fuzz_$h"
done

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
for h in $harnesses; do
    work=$(mktemp -d)
    cp -r "$src/fuzz/corpus/$h" "$work/corpus"
    chmod -R u+w "$work/corpus"
    if [ "$secs" -gt 0 ]; then
        what="-max_total_time=$secs"
    else
        what="-runs=0"
    fi
    echo "fuzz/run.sh: $h: $what, corpus of $(ls "$work/corpus" | wc -l) files"
    if (cd "$work" && "$build/fuzz_$h" "$what" -max_len="$(max_len "$h")" -timeout=10 \
            -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$out/$h-" \
            corpus >"$work/log" 2>&1); then
        grep -E "^(Done|stat::number_of_executed_units|stat::peak_rss_mb)" "$work/log" |
            tr '\n' ' ' | sed "s/^/fuzz\/run.sh: $h: ok: /"
        echo
    else
        echo "fuzz/run.sh: $h: FAILED; the input is in $out/$h-*; the report:"
        tail -n 60 "$work/log"
        status=1
    fi
    rm -rf "$work"
done
exit $status
