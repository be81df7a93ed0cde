# tests/hosts/lib.sh: a multi-host test bed on one machine, for bash scripts
# that source it (tests/hosts/*.sh). A "host" is a network namespace with a
# veth ("eth0" inside) on a bridge of the root namespace, its own address on
# a private subnet, its own hostname (a persistent UTS namespace, entered with
# nsenter) and its name in /etc/hosts. Hosts share the file system, /tmp,
# /dev/shm and the pid space: only the network and the hostname differ.
#
# Jobs run under Open MPI's mpirun (tb_mpirun: an rsh agent instead of ssh)
# or Slurm (tb_slurm_up, tb_srun: munged and slurmctld in the root
# namespace, one slurmd per host). Every run takes a slot K (1..60) and with
# it the subnet 10.213.K.0/24, the bridge ctbK, the hosts ctbK-n1..n3, so that
# several runs at once do not meet. Everything is undone at exit, also on a
# failure or a signal (tb_down, from the EXIT trap); a slot whose owner died
# without that (SIGKILL) is cleaned by the next run that finds it.
#
# Needs root, iproute2 and util-linux; where namespaces cannot be made,
# tb_init exits 77 with "SKIP: why" (the hosts suite reports it skipped).

TB_LOCK=/run/cadre-testbed.lock
TB_SLOTS=/run/cadre-testbed
TB_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

tb_say() { printf 'testbed: %s\n' "$*" >&2; }
tb_skip() {
    printf 'testbed: SKIP: %s\n' "$*" >&2
    exit 77
}
tb_fail() {
    printf 'testbed: FAILED: %s\n' "$*" >&2
    exit 1
}

# Names of slot $1: host I is ctbK-nI at 10.213.K.I; the bridge (the root
# namespace's side, where slurmctld and mpirun live) is 10.213.K.254.
tb_name() { printf 'ctb%s-n%s' "$TB_K" "$1"; }
tb_addr() { printf '10.213.%s.%s' "$TB_K" "$1"; }
tb_gw() { printf '10.213.%s.254' "$TB_K"; }
tb_subnet() { printf '10.213.%s.0/24' "$TB_K"; }

# Runs "$@" with $TB_LOCK held (slot claims, /etc/hosts edits). Inside a
# section that holds it already (TB_LOCK_HELD=1: tb_claim cleaning a dead
# run's slot), runs "$@" as it is: a second flock on a new open of the file
# would wait for the first forever.
tb_locked() {
    if [[ ${TB_LOCK_HELD-} == 1 ]]; then
        "$@"
        return
    fi
    (
        flock 9
        TB_LOCK_HELD=1 "$@"
    ) 9>"$TB_LOCK"
}

# Removes what slot $1 left: processes in its namespaces, its daemons, mounts,
# links, /etc/hosts lines, directory. Safe to run on a half-made slot.
tb_clean_slot() {
    local k=$1 dir="" ns p
    [[ -r $TB_SLOTS/$k/dir ]] && dir=$(cat "$TB_SLOTS/$k/dir")
    # Daemons of the root namespace, by the pid files the slot wrote.
    if [[ -n $dir ]]; then
        for p in "$dir"/slurm/ctld.pid "$dir"/munge/munged.pid; do
            [[ -r $p ]] && kill -TERM "$(cat "$p" 2>/dev/null)" 2>/dev/null
        done
    fi
    # Every process in the slot's hosts is the test's (mpirun's orted,
    # slurmd and its steps, the ranks).
    for ns in $(ip netns list 2>/dev/null | awk -v p="ctb$k-n" 'index($1, p) == 1 { print $1 }'); do
        for p in $(ip netns pids "$ns" 2>/dev/null); do
            kill -KILL "$p" 2>/dev/null
        done
    done
    if [[ -n $dir ]]; then
        for p in "$dir"/slurm/ctld.pid "$dir"/munge/munged.pid; do
            [[ -r $p ]] && kill -KILL "$(cat "$p" 2>/dev/null)" 2>/dev/null
        done
        for p in "$dir"/uts/*; do
            [[ -e $p ]] && umount "$p" 2>/dev/null
        done
        umount "$dir/uts" 2>/dev/null
    fi
    for ns in $(ip netns list 2>/dev/null | awk -v p="ctb$k-n" 'index($1, p) == 1 { print $1 }'); do
        ip netns del "$ns" 2>/dev/null
    done
    # A namespace goes in the background; its veths' root ends may outlive
    # it a while: delete them (and the pair) now.
    for ns in $(ip -o link show 2>/dev/null | awk -F': ' -v p="ctb$k-n" 'index($2, p) == 1 { sub(/@.*/, "", $2); print $2 }'); do
        ip link del "$ns" 2>/dev/null
    done
    ip link del "ctb$k" 2>/dev/null
    tb_locked tb_hosts_remove "$k"
    [[ -n $dir && -d $dir ]] && rm -rf "$dir"
    rm -rf "${TB_SLOTS:?}/$k"
}

# /etc/hosts may be a bind mount (containers): write it in place, never
# replace the file. Our lines end with "# cadre-testbed K". When nothing else
# changed it meanwhile, the copy taken before is written back byte for byte;
# otherwise (another run's lines came and went) only our lines are removed.
tb_hosts_remove() {
    local k=$1 dir rest
    grep -q " # cadre-testbed $k\$" /etc/hosts 2>/dev/null || return 0
    dir=$(cat "$TB_SLOTS/$k/dir" 2>/dev/null)
    if [[ -n $dir && -f $dir/hosts.orig && -f $dir/hosts.expect ]] &&
        cmp -s "$dir/hosts.expect" /etc/hosts; then
        cat "$dir/hosts.orig" >/etc/hosts
        return 0
    fi
    rest=$(grep -v " # cadre-testbed $k\$" /etc/hosts)
    printf '%s\n' "$rest" >/etc/hosts
}
tb_hosts_add() {
    local i add=""
    cp /etc/hosts "$TB_DIR/hosts.orig"
    # A last line without its newline would run into ours.
    [[ -s /etc/hosts && -n $(tail -c1 /etc/hosts) ]] && add=$'\n'
    for ((i = 1; i <= TB_N; i++)); do
        add+="$(tb_addr "$i") $(tb_name "$i") # cadre-testbed $TB_K"$'\n'
    done
    add+="$(tb_gw) ctb$TB_K-ctl # cadre-testbed $TB_K"$'\n'
    printf '%s' "$add" >>/etc/hosts
    { cat "$TB_DIR/hosts.orig"; printf '%s' "$add"; } >"$TB_DIR/hosts.expect"
}

# Claims the first free slot (or one whose owner is gone, after cleaning it).
tb_claim() {
    local k owner
    mkdir -p "$TB_SLOTS"
    for ((k = 1; k <= 60; k++)); do
        if [[ -d $TB_SLOTS/$k ]]; then
            owner=$(cat "$TB_SLOTS/$k/pid" 2>/dev/null)
            [[ -n $owner ]] && kill -0 "$owner" 2>/dev/null && continue
            tb_say "slot $k: its run (pid ${owner:-?}) is gone; cleaning what it left"
            tb_clean_slot "$k"
        fi
        # Nothing else of this machine may use the subnet.
        # Nor links of a slot whose namespaces are still going away.
        if ip -4 addr | grep -q "inet 10\.213\.$k\." ||
            ip -o link show | grep -q ": ctb$k[-:@]" ||
            ip -4 route | grep -q "^10\.213\.$k\."; then
            continue
        fi
        mkdir "$TB_SLOTS/$k" || continue
        echo "$$" >"$TB_SLOTS/$k/pid"
        echo "$k"
        return 0
    done
    return 1
}

# tb_init N: makes hosts 1..N. Exports CADRE_TB_DIR (the rsh agent reads it).
# With TB_EXTRA_IFS=1 every host also gets docker0 (a bridge without ports,
# as docker's is without containers) and eth1 (a veth whose other end, sink1,
# stays in the host), no address yet (tb_add_decoy, tb_add_dead), made
# before eth0 so that they
# come first in the host's interface list, where a runtime that tries
# addresses in that order meets them first.
tb_init() {
    TB_N=$1
    [[ $(id -u) == 0 ]] || tb_skip "the multi-host test bed needs root (network namespaces)"
    local t
    for t in ip nsenter unshare flock; do
        command -v "$t" >/dev/null || tb_skip "$t not found (iproute2, util-linux)"
    done
    local probe=ctb-probe-$$
    if ! ip netns add "$probe" 2>/dev/null; then
        tb_skip "'ip netns add' is not permitted here"
    fi
    ip netns del "$probe"
    TB_K=$(tb_locked tb_claim) || tb_fail "no free test-bed slot (10.213.1-60.0/24 all taken)"
    TB_DIR=$(mktemp -d /tmp/cadre-testbed.XXXXXX)
    echo "$TB_DIR" >"$TB_SLOTS/$TB_K/dir"
    export CADRE_TB_DIR=$TB_DIR
    TB_PIDS=()
    trap 'tb_down' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    trap 'exit 129' HUP

    mkdir -p "$TB_DIR/uts"
    # A private mount point, so nsfs bind mounts may live on it.
    mount --bind "$TB_DIR/uts" "$TB_DIR/uts" && mount --make-private "$TB_DIR/uts" ||
        tb_fail "cannot make $TB_DIR/uts a private mount"
    ip link add "ctb$TB_K" type bridge forward_delay 0 || tb_fail "cannot add bridge ctb$TB_K"
    ip addr add "$(tb_gw)/24" dev "ctb$TB_K"
    ip link set "ctb$TB_K" up
    local i n
    for ((i = 1; i <= TB_N; i++)); do
        n=$(tb_name "$i")
        ip netns add "$n" || tb_fail "ip netns add $n"
        if [[ ${TB_EXTRA_IFS-} == 1 ]]; then
            ip -n "$n" link add docker0 type bridge &&
                ip -n "$n" link add eth1 type veth peer name sink1 ||
                tb_fail "docker0 and eth1 on $n"
        fi
        ip link add "$n" type veth peer name eth0 netns "$n" || tb_fail "veth for $n"
        ip link set "$n" master "ctb$TB_K" up
        ip -n "$n" addr add "$(tb_addr "$i")/24" dev eth0
        ip -n "$n" link set eth0 up
        ip -n "$n" link set lo up
        touch "$TB_DIR/uts/$n"
        unshare --uts="$TB_DIR/uts/$n" hostname "$n" || tb_fail "UTS namespace for $n"
    done
    tb_locked tb_hosts_add
    # The bridge forwards once its ports are (state 3: forwarding).
    for ((i = 1; i <= TB_N; i++)); do
        n=$(tb_name "$i")
        for t in $(seq 50); do
            [[ $(cat "/sys/class/net/$n/brport/state" 2>/dev/null) == 3 ]] && break
            ((t == 50)) && tb_fail "bridge port $n not forwarding after 5 s"
            sleep 0.1
        done
    done
    tb_say "slot $TB_K: $TB_N hosts on $(tb_subnet): $(for ((i = 1; i <= TB_N; i++)); do printf '%s=%s ' "$(tb_name "$i")" "$(tb_addr "$i")"; done)"
}

# The EXIT trap: stops what the script started, then the slot.
tb_down() {
    local rc=$? p
    trap - EXIT INT TERM HUP
    # A process gone already fails both kills: under set -e (bench/hosts.sh)
    # that ended a complete run with exit 1.
    for p in "${TB_PIDS[@]}"; do
        kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || true
    done
    sleep 0.2
    for p in "${TB_PIDS[@]}"; do
        kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null || true
    done
    [[ -n ${TB_K-} ]] && tb_clean_slot "$TB_K"
    exit "$rc"
}

# tb_exec I cmd...: runs cmd on host I (its network, its hostname; /sys shows
# the host's interfaces, as ip netns exec mounts it).
tb_exec() {
    local n
    n=$(tb_name "$1")
    shift
    ip netns exec "$n" nsenter --uts="$TB_DIR/uts/$n" -- "$@"
}

# A decoy: the same address on every host (docker0, 172.31.255.1), as a
# container bridge has. Needs TB_EXTRA_IFS=1 at tb_init.
tb_add_decoy() {
    local i n
    for ((i = 1; i <= TB_N; i++)); do
        n=$(tb_name "$i")
        ip -n "$n" addr add 172.31.255.1/16 dev docker0 && ip -n "$n" link set docker0 up ||
            tb_fail "docker0 on $n"
    done
}

# An unreachable address per host: 10.214.K.I/24 on eth1, with the other
# hosts' eth1 addresses as permanent neighbours at a MAC address nobody has:
# a connect there goes out to sink1, which drops it, and hears nothing (like a
# firewall that drops, or a dead switch) until the kernel gives up, minutes
# later. Needs TB_EXTRA_IFS=1 at tb_init.
tb_add_dead() {
    local i j n
    for ((i = 1; i <= TB_N; i++)); do
        n=$(tb_name "$i")
        ip -n "$n" addr add "10.214.$TB_K.$i/24" dev eth1 && ip -n "$n" link set sink1 up &&
            ip -n "$n" link set eth1 up || tb_fail "eth1 on $n"
        for ((j = 1; j <= TB_N; j++)); do
            ((j == i)) && continue
            ip -n "$n" neigh replace "10.214.$TB_K.$j" lladdr "02:00:00:00:d6:0$j" dev eth1 nud permanent ||
                tb_fail "neighbour $j on $n's eth1"
        done
    done
}
tb_dead_addr() { printf '10.214.%s.%s' "$TB_K" "$1"; }

# Cuts host I off the bridge (its veth's root side down): packets to and from
# it vanish, nothing tells either side.
tb_cut() { ip link set "$(tb_name "$1")" down; }

# Pids of the processes named $2 (comm) on host I.
tb_pids_of() {
    local p
    for p in $(ip netns pids "$(tb_name "$1")"); do
        [[ $(cat "/proc/$p/comm" 2>/dev/null) == "$2" ]] && echo "$p"
    done
}

# tb_need_ucx BUILDDIR: exits 77 ("SKIP: why") unless cadre-info of that build
# says the ucx transport is built and usable here (libucp loads).
tb_need_ucx() {
    local info row
    info=$("$1/tools/cadre-info" 2>&1) || tb_skip "cadre-info failed: $(tail -1 <<<"$info")"
    row=$(awk '$1 == "ucx"' <<<"$info")
    [[ -n $row ]] || tb_skip "cadre-info has no ucx row: this cadre has no UCX transport"
    read -r _ built usable <<<"$row"
    [[ $built == yes ]] || tb_skip "cadre was built without UCX (cadre-info: $row)"
    [[ $usable == yes* ]] || tb_skip "UCX is not usable here (cadre-info: $row)"
}

# ---- placement --------------------------------------------------------------
# tb_host_of R NHOSTS PPN PLACEMENT: the host (1-based) of world rank R:
# block fills host 1 first, cyclic deals ranks round-robin.
tb_host_of() {
    if [[ $4 == cyclic ]]; then
        echo $(($1 % $2 + 1))
    else
        echo $(($1 / $3 + 1))
    fi
}

source "$TB_HERE/launch.sh"
source "$TB_HERE/check.sh"
