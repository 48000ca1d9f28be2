# The CUDA backend as a module of its own (libcdp_cuda.so), in a build with
# CUDA; no GPU needed:
#  - a CPU run never loads the CUDA runtime, cuBLAS or cuDNN (they cost
#    every start over a second of CPU time when libcdp linked them);
#  - --backend cuda loads the module, and then either runs or says, in one
#    error line, that there is no device;
#  - CDP_CUDA_MODULE naming a missing file, or a library that is not the
#    module: one error line naming it, a non-zero exit.
# Skipped (77) in a build without CUDA.
. "$(dirname "$0")/../lib/lib.sh"
one="--data synthetic --model mlp:8-4-10 --steps 1 --eval-every 0 --quiet"
out=$(run 1 --backend cuda $one 2>&1)
if echo "$out" | grep -q 'has no CUDA backend'; then
    echo "SKIP: this build has no CUDA backend: $(echo "$out" | grep error)"
    exit 77
fi

# LD_DEBUG=files: the loader names each library it loads ("file=NAME [0];")
loaded() {
    echo "$1" | grep -oE 'file=[^ ]*(libcudart|libcublas|libcublasLt|libcudnn|libcdp_cuda)[^ ]*' | sort -u | tr '\n' ' '
}
cpu=$(LD_DEBUG=files "$CDP" $one 2>&1)
echo "$cpu" | grep -q 'file=.*libcdp\.so' || fail "LD_DEBUG=files shows no libraries here: $(echo "$cpu" | tail -n 3)"
libs=$(loaded "$cpu")
[ -z "$libs" ] && pass "a CPU run loads no CUDA library" || fail "a CPU run loads $libs"

gpu=$(LD_DEBUG=files "$CDP" --backend cuda $one 2>&1)
rc=$?
libs=$(loaded "$gpu")
errs=$(echo "$gpu" | grep '^cdp_run: error:')
if echo "$libs" | grep -q libcdp_cuda && echo "$libs" | grep -q libcublas; then
    pass "--backend cuda loads the module: $libs"
else
    fail "--backend cuda: the module and cuBLAS not loaded: $libs $(echo "$gpu" | grep -v 'file=\|^ *[0-9]*:' | tail -n 3)"
fi
if [ $rc -eq 0 ] || { [ "$(echo "$errs" | grep -c .)" -eq 1 ] && echo "$errs" | grep -q 'no CUDA device found'; }; then
    pass "--backend cuda: exit $rc ${errs:-(a GPU is here)}"
else
    fail "--backend cuda: exit $rc: $(echo "$gpu" | grep -v 'file=\|^ *[0-9]*:' | tail -n 5)"
fi

# CDP_CUDA_MODULE=FILE ERROR: one error line with ERROR, and exit non-zero
module_error() {
    local out rc errs
    out=$(CDP_CUDA_MODULE=$1 run 1 --backend cuda $one 2>&1)
    rc=$?
    errs=$(echo "$out" | grep '^cdp_run: error:')
    if [ $rc -ne 0 ] && [ "$(echo "$errs" | grep -c .)" -eq 1 ] && echo "$errs" | grep -q -- "$2"; then
        pass "CDP_CUDA_MODULE=$1: $errs"
    else
        fail "CDP_CUDA_MODULE=$1: exit $rc: $out"
    fi
}
module_error "$TMP/missing.so" "module could not be loaded: $TMP/missing.so"
printf 'not a library' > "$TMP/garbage.so"
module_error "$TMP/garbage.so" "module could not be loaded: $TMP/garbage.so"
module_error "$top_builddir/.libs/libcdp.so" "libcdp.so is not cdp's CUDA backend module"
finish
