# Every write of every output fails in turn (tests/lib/fail_write.c, loaded
# with LD_PRELOAD, fails the Nth open, write, fsync, close, rename, fopen,
# fflush or fclose on the outputs' paths): each run exits non-zero with one
# error line naming the file; the checkpoint or weight file whose write
# failed is byte for byte the one it was to replace, every other one is
# either that or the new one of a run without faults (same options, same
# bits), and no temporary file is left.  N goes up until a run meets no
# fault: then every write point has failed once.  On 1 rank (ENOSPC,
# --checkpoint, --save-weights, --metrics, --trace) and 2 ranks (EIO).
. "$(dirname "$0")/../lib/lib.sh"
SHIM="$top_builddir/tests/lib/.libs/libfailwrite.so"
[ -f "$SHIM" ] || { echo "FAIL: $SHIM not built (make check builds it)"; exit 1; }
opts="--data synthetic:n=256:test=32 --model mlp:784-16-10 --workers 2 --batch 8 --quiet --eval-every 1 --steps 2"

# faults NP ERRNO OUTPUTS...: OUTPUTS are option=name pairs, the files in
# $TMP/out
faults() {
    local np=$1 err=$2 n=0 rc line path bad names outs= o f ops= hit= before=$failures launch
    shift 2
    for o in "$@"; do outs="$outs --${o%%=*} $TMP/out/${o#*=}"; done
    names=$(for o in "$@"; do echo "${o#*=}"; done)
    rm -rf "$TMP/out" "$TMP/ref" "$TMP/old"
    mkdir -p "$TMP/out" "$TMP/ref" "$TMP/old"
    # the files a fault must not lose: an earlier run's (other --steps)
    run "$np" $opts --steps 1 $outs >/dev/null || { fail "$np ranks: the earlier run"; return; }
    cp "$TMP"/out/* "$TMP/old/"
    run "$np" $opts $outs >/dev/null || { fail "$np ranks: the run without faults"; return; }
    cp "$TMP"/out/* "$TMP/ref/"
    while :; do
        n=$((n + 1))
        rm -f "$TMP/out"/* "$TMP/log"
        cp "$TMP"/old/* "$TMP/out/"
        # one rank: a singleton, without mpirun's second of start
        launch="timeout 300"
        [ "$np" -eq 1 ] || launch="$launch $MPIRUN --oversubscribe -np $np -x LD_PRELOAD -x CDP_FAIL_PATH -x CDP_FAIL_AT -x CDP_FAIL_ERRNO -x CDP_FAIL_LOG"
        LD_PRELOAD="$SHIM" CDP_FAIL_PATH="$TMP/out/*" CDP_FAIL_AT=$n CDP_FAIL_ERRNO=$err \
            CDP_FAIL_LOG="$TMP/log" $launch "$CDP" $opts $outs >/dev/null 2>"$TMP/err"
        rc=$?
        line=$(grep -E "^[0-9]+ $n " "$TMP/log" 2>/dev/null)
        if [ -z "$line" ]; then   # past the last write: no fault met
            [ $rc -eq 0 ] || fail "$np ranks: no fault injected at $n, yet exit $rc: $(cat "$TMP/err")"
            for f in $names; do   # the JSON streams hold times: only their presence
                case $f in
                    *.st) cmp -s "$TMP/out/$f" "$TMP/ref/$f" || fail "$np ranks, no fault: $f is not the run's" ;;
                    *) [ -s "$TMP/out/$f" ] || fail "$np ranks, no fault: $f is empty" ;;
                esac
            done
            break
        fi
        set -- $line
        ops="$ops $3"
        path=$4
        f=${path#"$TMP/out/"}
        f=${f%%.tmp.*}   # a temporary file's fault is its output's
        hit="$hit $f"
        bad=
        [ $rc -ne 0 ] || bad="$bad exit 0;"
        [ "$(grep -c '^cdp_run: error:' "$TMP/err")" -eq 1 ] || bad="$bad not one error line;"
        grep '^cdp_run: error:' "$TMP/err" | grep -qF "$TMP/out/$f" || bad="$bad the error does not name $f;"
        grep '^cdp_run:' "$TMP/err" | grep -v '^cdp_run: error:' | grep -q . && bad="$bad other lines of cdp_run;"
        for o in $names; do
            case $o in *.st) ;; *) continue ;; esac
            if [ "$o" = "$f" ]; then
                cmp -s "$TMP/out/$o" "$TMP/old/$o" || bad="$bad $o is not the one it was to replace;"
            elif ! cmp -s "$TMP/out/$o" "$TMP/old/$o" && ! cmp -s "$TMP/out/$o" "$TMP/ref/$o"; then
                bad="$bad $o is neither the earlier nor the new one;"
            fi
        done
        ls "$TMP/out" | grep -q '\.tmp\.' && bad="$bad left $(ls "$TMP/out" | grep '\.tmp\.');"
        [ -z "$bad" ] || fail "$np ranks, fault $n ($3 $f, $err):$bad $(cat "$TMP/err")"
        [ $n -lt 200 ] || { fail "$np ranks: more than 200 write points"; break; }
    done
    # every kind of write was failed, on every output
    for o in $names open write fsync close rename fopen fflush fclose; do
        case " $ops $hit " in *" $o "*) ;; *) fail "$np ranks: no fault met $o" ;; esac
    done
    [ $failures -eq $before ] && pass "$np rank(s), $err: $((n - 1)) write points failed one by one (${ops# }), each one error line, nothing lost, no temporary file"
}

faults 1 ENOSPC checkpoint=c.st save-weights=w.st metrics=m.json trace=t.json
faults 2 EIO checkpoint=c.st save-weights=w.st metrics=m.json
finish
