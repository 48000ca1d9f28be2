# The documentation keeps up with the program: every option `cdp_run
# --help` prints is named in README or doc/reference.md, and every
# environment variable the sources read is a row of the table in
# doc/reference.md section 9 (launcher variables, OMPI_*, excepted), and
# every model of --list-models is in doc/reference.md's table of models.
# Found missing before this test: --quiet, --eval-every, CDP_GEMM_SPLIT,
# CDP_BN_SLICES.
. "$(dirname "$0")/../lib/lib.sh"
src=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
docs="$src/README $src/doc/reference.md"

opts=$("$CDP" --help | grep -oE '^  --[a-z][a-z0-9-]*' | tr -d ' ' | sort -u)
n=$(echo "$opts" | grep -c .)
[ "$n" -ge 40 ] && pass "--help lists $n options" || fail "--help lists only $n options"
missing=""
for o in $opts; do
    grep -qE -- "$o([^a-z0-9-]|\$)" $docs || missing="$missing $o"
done
[ -z "$missing" ] && pass "every option of --help is in README or doc/reference.md" \
    || fail "options documented in neither README nor doc/reference.md:$missing"

models=$("$CDP" --list-models | awk 'NR > 1 { print $1 }')
n=$(echo "$models" | grep -c .)
[ "$n" -ge 14 ] && pass "--list-models lists $n models" || fail "--list-models lists only $n"
missing=""
for mdl in $models; do
    grep -qF -- "\`$mdl\`" "$src/doc/reference.md" || missing="$missing $mdl"
done
[ -z "$missing" ] && pass "every model of --list-models is in doc/reference.md's table" \
    || fail "models missing from doc/reference.md:$missing"
missing=""
for mdl in $models; do
    "$CDP" --help | grep -qF -- "$mdl" || missing="$missing $mdl"
done
[ -z "$missing" ] && pass "--help names every model" || fail "--help lacks:$missing"

vars=$(grep -rhoE 'getenv\("[A-Z_0-9]+"\)' "$src/src" | sed 's/getenv("//; s/")//' |
    grep -v '^OMPI_' | sort -u)
n=$(echo "$vars" | grep -c .)
[ "$n" -ge 10 ] && pass "the sources read $n environment variables" \
    || fail "found only $n getenv calls in $src/src"
table=$(sed -n '/^## 9\./,$p' "$src/doc/reference.md")
missing=""
for v in $vars; do
    echo "$table" | grep -qE "^\| \`$v\`|^\| [^|]*\`$v\`" || missing="$missing $v"
done
[ -z "$missing" ] && pass "every environment variable read is in doc/reference.md section 9" \
    || fail "environment variables missing from doc/reference.md section 9:$missing"

# the MLP's loader is where README tells of weight files, and the
# torchvision loader, which cannot take an MLP, sends the user to it (its
# refusal comes before torch is imported: checked without torch too)
grep -q "examples/load_weights.py" "$src/README" && pass "README names examples/load_weights.py" \
    || fail "README does not name examples/load_weights.py"
if command -v python3 >/dev/null 2>&1; then
    out=$(python3 "$src/examples/load_torchvision.py" "$TMP/w.st" mlp:784-16-10 2>&1)
    rc=$?
    [ $rc -eq 1 ] && [ "$(echo "$out" | grep -c .)" -eq 1 ] && echo "$out" | grep -q "examples/load_weights.py" \
        && pass "load_torchvision.py refuses an MLP naming load_weights.py: $out" \
        || fail "load_torchvision.py with an MLP: exit $rc: $out"
fi

finish
