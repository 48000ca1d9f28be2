#!/usr/bin/env bash
# Emulated hosts on one machine, for running cdp across hosts without a
# cluster: each host is a network namespace (its own network stack and
# address), a UTS namespace (its own hostname) and a mount namespace (its
# own node-local directory and /etc/hosts), all joined by a bridge that
# lives in a switch namespace of its own.  Open MPI launches on them through
# an rsh agent that stands in for ssh.  Addresses come from 198.18.0.0/15
# (RFC 2544, reserved for network tests); nothing of the machine's own
# interfaces, routes or files is touched, and everything is removed on exit,
# also after a failure or a signal.
#
# As a command:
#   tests/lib/hosts.sh [--hosts K] [--slots S] [--rate R] [--delay D] [--loss L]
#                  [--env HOST=VAR=VALUE]... [--] COMMAND [ARGS...]
# runs COMMAND on host 1 (where mpirun then starts), with Open MPI pointed at
# the K hosts by environment (OMPI_MCA_*: hostfile, rsh agent, TCP on the
# bridge only), so that `tests/lib/hosts.sh --hosts 2 -- mpirun -np 4 ./cdp_run`
# runs 2 ranks on each of two hosts.  Exit status: COMMAND's; 77 (skip) with
# the reason on stderr where namespaces cannot be made (no CAP_NET_ADMIN).
#   --hosts K     hosts node1..nodeK, 198.18.0.1..K (default 2, at most 200)
#   --slots S     ranks a host takes before mpirun fills the next (default 2)
#   --rate R      each host's link shaped to R both ways (tc tbf), e.g. 1gbit
#   --delay D     one-way delay added on each host's link (tc netem), e.g. 0.5ms
#   --loss L      packet loss on each host's link (tc netem), e.g. 0.1%
#   --env HOST=VAR=VALUE  VAR=VALUE in every process started on HOST (a host
#                 configured differently; ranks on other hosts do not see it)
# COMMAND sees CDP_HOSTS_DIR (the harness's directory), CDP_HOSTS (the host
# names), CDP_NODE_LOCAL (a directory that each host sees with its own
# content, as a node-local disk) and CDP_HOSTS_SH (this script).
#
# As a library (`. tests/lib/hosts.sh`): hosts_up K (after setting the HOSTS_*
# variables below), hosts_exec I CMD... (CMD on host I, with the variables
# above; this shell's own environment keeps Open MPI on this machine, and
# CDP_NODE_LOCAL names the node-local directory), hosts_link I up|down,
# hosts_pids I, hosts_down; hosts_up installs the trap that removes it all.

HOSTS_SLOTS=${HOSTS_SLOTS:-2}
HOSTS_RATE=${HOSTS_RATE:-}
HOSTS_DELAY=${HOSTS_DELAY:-}
HOSTS_LOSS=${HOSTS_LOSS:-}
HOSTS_ENV=${HOSTS_ENV:-}       # "HOST=VAR=VALUE ..." (no spaces in a value)
HOSTS_DIR=
HOSTS_ENV_VARS=()
HOSTS_K=0
HOSTS_PREFIX=
HOSTS_NET=198.18.0              # the bridge's /24; host i is .i

# hosts_ns I: the network namespace of host I
hosts_ns() {
    echo "${HOSTS_PREFIX}h$1"
}

# hosts_index HOST: I of nodeI (also for its address), empty when unknown
hosts_index() {
    local h=$1 i
    for i in $(seq "$HOSTS_K"); do
        if [ "$h" = "node$i" ] || [ "$h" = "$HOSTS_NET.$i" ]; then
            echo "$i"
            return 0
        fi
    done
    return 1
}

# hosts_skip REASON: the harness cannot run here (exit 77 as a command)
hosts_skip() {
    echo "SKIP: emulated hosts: $*" >&2
    return 77
}

# hosts_burst RATE: tbf's bucket for RATE (tc's units: bit, kbit, mbit,
# gbit), in bytes: 1 ms at the rate, at least 8192.  A physical link sends
# no faster than its rate after an idle moment; a bucket of 256 KB let a
# ping-pong's messages of up to 256 KB go at twice the rate at 100 Mbit/s
# (refilled while the reply came back) and none of an exchange's.
hosts_burst() {
    local r=${1,,} mult=1
    case $r in
        *gbit) mult=1000000000; r=${r%gbit} ;;
        *mbit) mult=1000000; r=${r%mbit} ;;
        *kbit) mult=1000; r=${r%kbit} ;;
        *bit) r=${r%bit} ;;
        *) echo 262144; return ;;   # a unit this does not know: tc's own parse, the old bucket
    esac
    awk -v r="$r" -v m="$mult" 'BEGIN { b = r * m / 8 / 1000; if (b < 8192) b = 8192; printf "%d\n", b }'
}

hosts_shape() {   # NS DEV: the link's shaping on DEV's way out
    local ns=$1 dev=$2
    if [ -n "$HOSTS_DELAY$HOSTS_LOSS" ]; then
        local args="limit 100000"
        [ -n "$HOSTS_DELAY" ] && args="$args delay $HOSTS_DELAY"
        [ -n "$HOSTS_LOSS" ] && args="$args loss $HOSTS_LOSS"
        [ -n "$HOSTS_RATE" ] && args="$args rate $HOSTS_RATE"
        ip netns exec "$ns" tc qdisc add dev "$dev" root netem $args || {
            echo "hosts.sh: tc netem (for --delay/--loss) is not available in this kernel" >&2
            return 1
        }
    elif [ -n "$HOSTS_RATE" ]; then
        # a burst of 1 ms at the rate, and up to 50 ms of queue
        ip netns exec "$ns" tc qdisc add dev "$dev" root tbf rate "$HOSTS_RATE" \
            burst "$(hosts_burst "$HOSTS_RATE")" latency 50ms || return 1
    fi
    return 0
}

# hosts_alive PID: a process that is not a zombie
hosts_alive() {
    [ -r "/proc/$1/stat" ] || return 1
    local st
    st=$(sed 's/^.*) //' "/proc/$1/stat" | cut -d' ' -f1)
    [ "$st" != Z ]
}

# hosts_reap: what a run killed by SIGKILL (no trap runs) left: the
# namespaces cdpPID-* and directories /tmp/cdp-hosts.PID.* of a PID that
# is no process any more.  Another live run's are left alone.
hosts_reap() {
    local ns pid d p n=0
    for ns in $(ip netns list 2>/dev/null | awk '{ print $1 }' | grep -E '^cdp[0-9]+-(sw|h[0-9]+)$'); do
        pid=${ns#cdp}
        pid=${pid%%-*}
        hosts_alive "$pid" && continue
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
        ip netns del "$ns" 2>/dev/null && n=$((n + 1))
    done
    for d in /tmp/cdp-hosts.[0-9]*.*; do
        [ -d "$d" ] || continue
        pid=${d#/tmp/cdp-hosts.}
        pid=${pid%%.*}
        case $pid in ''|*[!0-9]*) continue ;; esac
        hosts_alive "$pid" || rm -rf "$d"
    done
    [ "$n" -eq 0 ] || echo "hosts.sh: removed $n namespaces left by a run that was killed" >&2
    return 0
}

# hosts_up K: makes the K hosts, the switch, the agent and the hostfile.
hosts_up() {
    HOSTS_K=$1
    local i ns
    case $HOSTS_K in ''|*[!0-9]*) echo "hosts.sh: --hosts wants a number" >&2; return 2 ;; esac
    [ "$HOSTS_K" -ge 1 ] && [ "$HOSTS_K" -le 200 ] || { echo "hosts.sh: 1 to 200 hosts" >&2; return 2; }
    [ "$(id -u)" -eq 0 ] || { hosts_skip "not root (network namespaces need CAP_NET_ADMIN)"; return; }
    command -v ip >/dev/null && command -v unshare >/dev/null \
        || { hosts_skip "needs ip (iproute2) and unshare (util-linux)"; return; }
    hosts_reap
    HOSTS_PREFIX="cdp$$-"
    HOSTS_DIR=$(mktemp -d "/tmp/cdp-hosts.$$.XXXXXX")
    trap hosts_down EXIT
    trap 'hosts_down; exit 130' INT
    trap 'hosts_down; exit 143' TERM
    trap 'hosts_down; exit 129' HUP
    ip netns add "${HOSTS_PREFIX}sw" 2>"$HOSTS_DIR/err" || {
        hosts_skip "cannot make a network namespace: $(head -n 1 "$HOSTS_DIR/err")"
        return
    }
    ip netns exec "${HOSTS_PREFIX}sw" unshare --uts --mount true 2>"$HOSTS_DIR/err" || {
        hosts_skip "cannot make UTS and mount namespaces: $(head -n 1 "$HOSTS_DIR/err")"
        return
    }
    ip -n "${HOSTS_PREFIX}sw" link add br0 type bridge || return 1
    ip -n "${HOSTS_PREFIX}sw" link set br0 up || return 1
    mkdir -p "$HOSTS_DIR/local"
    {
        echo "127.0.0.1 localhost"
        for i in $(seq "$HOSTS_K"); do echo "$HOSTS_NET.$i node$i"; done
    } >"$HOSTS_DIR/etc_hosts"
    : >"$HOSTS_DIR/hostfile"
    for i in $(seq "$HOSTS_K"); do
        ns=$(hosts_ns "$i")
        ip netns add "$ns" || return 1
        ip -n "${HOSTS_PREFIX}sw" link add "p$i" type veth peer name eth0 netns "$ns" || return 1
        ip -n "${HOSTS_PREFIX}sw" link set "p$i" master br0 up || return 1
        ip -n "$ns" addr add "$HOSTS_NET.$i/24" dev eth0 || return 1
        ip -n "$ns" link set eth0 up || return 1
        ip -n "$ns" link set lo up || return 1
        hosts_shape "$ns" eth0 && hosts_shape "${HOSTS_PREFIX}sw" "p$i" || return 1
        mkdir -p "$HOSTS_DIR/node/node$i"
        echo "node$i slots=$HOSTS_SLOTS" >>"$HOSTS_DIR/hostfile"
    done
    hosts_write_agent
    # what a command on the hosts sees (hosts_exec): not exported here, so
    # that mpirun started outside the hosts stays on this machine
    HOSTS_ENV_VARS=(CDP_HOSTS_DIR="$HOSTS_DIR" CDP_NODE_LOCAL="$HOSTS_DIR/local"
        CDP_HOSTS="$(seq -f 'node%g' -s ' ' "$HOSTS_K")"
        OMPI_MCA_plm_rsh_agent="$HOSTS_DIR/rsh"
        OMPI_MCA_plm_rsh_no_tree_spawn=1       # every daemon started from host 1
        OMPI_MCA_orte_default_hostfile="$HOSTS_DIR/hostfile"
        OMPI_MCA_btl_tcp_if_include="$HOSTS_NET.0/24"
        OMPI_MCA_oob_tcp_if_include="$HOSTS_NET.0/24"
        OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
    CDP_NODE_LOCAL=$HOSTS_DIR/local
    # wait until every host answers on the bridge (the agent's own probe)
    for i in $(seq "$HOSTS_K"); do
        hosts_exec 1 "$HOSTS_DIR/reach" "$HOSTS_NET.$i" 5 \
            || { echo "hosts.sh: host node$i does not answer on the bridge" >&2; return 1; }
    done
    return 0
}

# The agent: ssh HOST COMMAND as Open MPI calls it.  Like ssh it starts
# COMMAND in a login-like environment on HOST: PATH, HOME, the machine's own
# OPENBLAS_*, OMP_* and GOMP_* settings (which a cluster's profile gives
# every node alike: host 1, where mpirun starts, has them from the caller,
# and a host without them would pick other BLAS kernels and be refused as
# of other numerics), and the host's own --env, nothing else of the caller's (mpirun hands its daemons what they
# need on their command line; ranks see what mpirun forwards, as on a real
# cluster).  Open MPI daemonizes its remote daemon, so the agent returns at
# once, as ssh does: a host lost later is noticed by mpirun's own TCP
# connection to that daemon (oob_tcp_keepalive_*), not by the agent.
# reach ADDR SECONDS: ADDR answers TCP within SECONDS (a refused connection
# is an answer).
hosts_write_agent() {
    cat >"$HOSTS_DIR/reach" <<'EOF'
#!/usr/bin/env bash
out=$(timeout "$2" bash -c "exec 3<>/dev/tcp/$1/9" 2>&1)
rc=$?
[ $rc -eq 0 ] || case $out in *refused*) rc=0 ;; esac
exit $rc
EOF
    cat >"$HOSTS_DIR/on_host" <<EOF
#!/usr/bin/env bash
# on_host I COMMAND...: COMMAND in host I's namespaces, with its hostname,
# /etc/hosts and node-local directory
i=\$1; shift
exec ip netns exec "${HOSTS_PREFIX}h\$i" unshare --uts --mount --propagation private \\
    bash -c 'echo node\$0 >/proc/sys/kernel/hostname &&
             mount --bind "$HOSTS_DIR/etc_hosts" /etc/hosts &&
             mount --bind "$HOSTS_DIR/node/node\$0" "$HOSTS_DIR/local" && exec "\$@"' "\$i" "\$@"
EOF
    local machine_env="" v
    for v in $(compgen -e); do
        case $v in OPENBLAS_* | OMP_* | GOMP_*) machine_env="$machine_env $(printf '%q' "$v=${!v}")" ;; esac
    done
    cat >"$HOSTS_DIR/rsh" <<EOF
#!/usr/bin/env bash
# stands in for ssh (see tests/lib/hosts.sh): rsh [-options] HOST COMMAND...
while [ \$# -gt 0 ]; do case \$1 in -*) shift ;; *) break ;; esac; done
host=\$1; shift
i=\${host#node}
case \$host in $HOSTS_NET.*) i=\${host##*.} ;; esac
[ -e /run/netns/${HOSTS_PREFIX}h\$i ] || { echo "ssh: Could not resolve hostname \$host" >&2; exit 255; }
envs=
for e in $HOSTS_ENV; do
    case \$e in node\$i=*) envs="\$envs \${e#*=}" ;; esac
done
exec env -i PATH="\$PATH" HOME="\${HOME:-/root}" LANG=C.UTF-8 $machine_env \$envs \\
    "$HOSTS_DIR/on_host" "\$i" bash -c "\$*"
EOF
    chmod +x "$HOSTS_DIR/reach" "$HOSTS_DIR/on_host" "$HOSTS_DIR/rsh"
}

# hosts_exec I COMMAND...: COMMAND on host I (its namespaces), this
# environment kept, with Open MPI pointed at the hosts (OMPI_MCA_*) and
# CDP_HOSTS_DIR, CDP_HOSTS and CDP_NODE_LOCAL set
hosts_exec() {
    env "${HOSTS_ENV_VARS[@]}" "$HOSTS_DIR/on_host" "$@"
}

# hosts_link I up|down: host I's link (its cable pulled or put back)
hosts_link() {
    ip -n "${HOSTS_PREFIX}sw" link set "p$1" "$2"
}

# hosts_pids I: the processes living on host I
hosts_pids() {
    ip netns pids "$(hosts_ns "$1")" 2>/dev/null
}

# hosts_down: every process on the hosts killed, the namespaces and the
# directory removed (idempotent)
hosts_down() {
    local i p
    [ -n "$HOSTS_PREFIX" ] || return 0
    for i in $(seq "$HOSTS_K"); do
        for p in $(hosts_pids "$i"); do kill -KILL "$p" 2>/dev/null; done
    done
    for i in $(seq "$HOSTS_K"); do ip netns del "$(hosts_ns "$i")" 2>/dev/null; done
    ip netns del "${HOSTS_PREFIX}sw" 2>/dev/null
    [ -n "$HOSTS_DIR" ] && rm -rf "$HOSTS_DIR"
    HOSTS_PREFIX=
    return 0
}

hosts_main() {
    local k=2
    while [ $# -gt 0 ]; do
        case $1 in
            --hosts) k=$2; shift 2 ;;
            --slots) HOSTS_SLOTS=$2; shift 2 ;;
            --rate) HOSTS_RATE=$2; shift 2 ;;
            --delay) HOSTS_DELAY=$2; shift 2 ;;
            --loss) HOSTS_LOSS=$2; shift 2 ;;
            --env) HOSTS_ENV="$HOSTS_ENV $2"; shift 2 ;;
            --help|-h) sed -n '/^# As a command/,/^# As a library/p' "$0" | sed 's/^# \{0,1\}//' | head -n -1; return 0 ;;
            --) shift; break ;;
            -*) echo "hosts.sh: unknown option $1 (--help lists them)" >&2; return 2 ;;
            *) break ;;
        esac
    done
    [ $# -gt 0 ] || { echo "hosts.sh: no command to run (--help)" >&2; return 2; }
    local rc=0
    hosts_up "$k" || { rc=$?; hosts_down; return $rc; }
    export CDP_HOSTS_SH
    CDP_HOSTS_SH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/hosts.sh
    hosts_exec 1 "$@" || rc=$?
    hosts_down
    return $rc
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    hosts_main "$@"
    exit $?
fi
