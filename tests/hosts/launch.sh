# tests/hosts/launch.sh: starting jobs on the test bed's hosts (sourced by
# lib.sh): Open MPI's mpirun with an rsh agent that enters a host instead of
# ssh, and a Slurm cluster (munged, slurmctld, one slurmd per host) for srun.
# Both print the command line they run (README and cadre-nodes(7) show the same).

# Variables the ranks get: mpirun passes only what -x names to remote hosts;
# srun passes the whole environment. UCX_* for the ucx transport (UCX_TLS,
# UCX_NET_DEVICES), as a cluster's mpirun line passes them.
tb_forward_env() {
    local v
    for v in $(compgen -e); do
        case $v in CADRE_* | COLL_* | P2P_* | HOSTS_* | UCX_*) printf '%s\n' "$v" ;; esac
    done
}

# Runs a launcher under timeout (TB_TIMEOUT seconds, default 300), which
# makes its own process group: tb_down stops the group. The script waits
# with the wait builtin, which a signal interrupts (its trap then runs; a
# command in the foreground would hold the trap until it ended), unless
# TB_BACKGROUND=1: then it returns at once, the pid in TB_LAST_PID.
tb_launch() {
    timeout --kill-after=10 "${TB_TIMEOUT:-300}" "$@" &
    TB_LAST_PID=$!
    TB_PIDS+=("$TB_LAST_PID")
    [[ ${TB_BACKGROUND-} == 1 ]] && return 0
    wait "$TB_LAST_PID"
}

# tb_mpirun NHOSTS PPN block|cyclic PROGRAM [ARGS...]: PPN ranks on each of
# hosts 1..NHOSTS, ranks dealt in blocks (mpirun's default, --map-by slot) or
# round-robin (--map-by node). Open MPI's own traffic stays on the test
# subnet; --bind-to none, as its default binds the first rank of every host to
# core 0 of this one machine. TB_LAUNCH_ARGS adds mpirun options; the job is
# stopped after TB_TIMEOUT seconds (default 300).
tb_mpirun() {
    local nh=$1 ppn=$2 place=$3 hosts="" i v
    shift 3
    for ((i = 1; i <= nh; i++)); do
        hosts+="${hosts:+,}$(tb_name "$i"):$ppn"
    done
    local cmd=(mpirun --allow-run-as-root --mca plm_rsh_agent "$TB_HERE/rsh-agent"
        --mca plm_rsh_no_tree_spawn 1
        --mca oob_tcp_if_include "$(tb_subnet)" --mca btl_tcp_if_include "$(tb_subnet)"
        --bind-to none --host "$hosts" -np $((nh * ppn)))
    [[ $place == cyclic ]] && cmd+=(--map-by node)
    for v in $(tb_forward_env); do
        cmd+=(-x "$v")
    done
    # shellcheck disable=SC2206
    cmd+=(${TB_LAUNCH_ARGS-} "$@")
    tb_say "run: ${cmd[*]}"
    tb_launch "${cmd[@]}"
}

# ---- Slurm ------------------------------------------------------------------
# tb_slurm_up: munged with a fresh key and its own socket, slurmctld in the
# root namespace (its own UTS namespace, named ctbK-ctl, at the bridge's
# address), one slurmd per host entered with nsenter (not ip netns exec: its
# fresh /sys has no /sys/fs/cgroup, and slurmd stops). Each node has its own
# slurm.conf only for TmpFS: the hosts share /tmp, where Slurm's PMIx plugin
# makes a directory named after the job only (spmix_appdir_UID_JOB.STEP), so
# the second node of a job would find the first's ("File exists").
tb_slurm_up() {
    local t
    for t in slurmctld slurmd srun sinfo munged; do
        command -v "$t" >/dev/null || tb_skip "$t not found (apt-get install slurm-wlm munge)"
    done
    local d=$TB_DIR i n
    mkdir -p "$d/munge" "$d/slurm/state"
    chmod 700 "$d/munge"
    head -c 1024 /dev/urandom >"$d/munge/munge.key"
    chmod 400 "$d/munge/munge.key"
    munged --force --socket="$d/munge/munge.sock" --key-file="$d/munge/munge.key" \
        --pid-file="$d/munge/munged.pid" --log-file="$d/munge/munged.log" \
        --seed-file="$d/munge/munged.seed" || tb_fail "munged did not start: $(cat "$d/munge/munged.log" 2>/dev/null)"
    local cpus
    cpus=$(nproc --all)
    {
        echo "ClusterName=ctb$TB_K"
        echo "SlurmctldHost=ctb$TB_K-ctl($(tb_gw))"
        echo "SlurmctldPort=$((17000 + TB_K))"
        echo "SlurmdPort=6818"
        echo "SlurmUser=root"
        echo "SlurmdUser=root"
        echo "AuthType=auth/munge"
        echo "CredType=cred/munge"
        echo "AuthInfo=socket=$d/munge/munge.sock"
        echo "StateSaveLocation=$d/slurm/state"
        echo "SlurmdSpoolDir=$d/slurm/%n/spool"
        echo "SlurmctldPidFile=$d/slurm/ctld.pid"
        echo "SlurmdPidFile=$d/slurm/%n/slurmd.pid"
        echo "SlurmctldLogFile=$d/slurm/ctld.log"
        echo "SlurmdLogFile=$d/slurm/%n/slurmd.log"
        echo "MpiDefault=pmix"
        echo "ProctrackType=proctrack/linuxproc"
        echo "TaskPlugin=task/none"
        echo "JobAcctGatherType=jobacct_gather/none"
        echo "AccountingStorageType=accounting_storage/none"
        echo "SchedulerType=sched/builtin"
        echo "SelectType=select/cons_tres"
        echo "SelectTypeParameters=CR_CPU"
        echo "ReturnToService=2"
        echo "SlurmdTimeout=300"
        echo "KillWait=2"
        echo "MinJobAge=2"
        echo "DebugFlags=NO_CONF_HASH"
        for ((i = 1; i <= TB_N; i++)); do
            echo "NodeName=$(tb_name "$i") NodeAddr=$(tb_addr "$i") CPUs=$cpus State=UNKNOWN"
        done
        echo "PartitionName=tb Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
    } >"$d/slurm/slurm.conf"
    export SLURM_CONF=$d/slurm/slurm.conf
    unshare --uts sh -c "hostname ctb$TB_K-ctl && exec slurmctld -c -f '$SLURM_CONF'" ||
        tb_fail "slurmctld did not start: $(tail -5 "$d/slurm/ctld.log" 2>/dev/null)"
    for ((i = 1; i <= TB_N; i++)); do
        n=$(tb_name "$i")
        mkdir -p "$d/slurm/$n/spool" "$d/slurm/$n/tmp"
        sed "\$a TmpFS=$d/slurm/$n/tmp" "$SLURM_CONF" >"$d/slurm/$n.conf"
        nsenter --net="/run/netns/$n" --uts="$d/uts/$n" -- slurmd -f "$d/slurm/$n.conf" -N "$n" ||
            tb_fail "slurmd on $n did not start: $(tail -5 "$d/slurm/$n/slurmd.log" 2>/dev/null)"
    done
    # Up when every node is idle.
    local nodes="ctb$TB_K-n[1-$TB_N]" states
    for ((t = 0; t < 120; t++)); do
        states=$(sinfo -h -N -n "$nodes" -o '%T' 2>/dev/null | sort -u | tr '\n' ' ')
        [[ $states == "idle " ]] && break
        sleep 0.5
    done
    [[ $states == "idle " ]] || tb_fail "Slurm nodes not idle after 60 s: ${states:-no answer}; $(tail -3 "$d/slurm/ctld.log")"
    tb_say "slurm: slurmctld at $(tb_gw):$((17000 + TB_K)), slurmd on $nodes"
}

# tb_srun NHOSTS PPN block|cyclic PROGRAM [ARGS...]: the same shapes as
# tb_mpirun, under srun --mpi=pmix. TB_LAUNCH_ARGS adds srun options.
tb_srun() {
    local nh=$1 ppn=$2 place=$3
    shift 3
    local cmd=(srun --mpi=pmix -N "$nh" -n $((nh * ppn)) --ntasks-per-node="$ppn"
        --distribution="$place" -w "ctb$TB_K-n[1-$nh]")
    # shellcheck disable=SC2206
    cmd+=(${TB_LAUNCH_ARGS-} "$@")
    tb_say "run: SLURM_CONF=$SLURM_CONF ${cmd[*]}"
    tb_launch "${cmd[@]}"
}

# ---- without a launcher -----------------------------------------------------
# tb_rdv NHOSTS PPN block|cyclic PROGRAM [ARGS...]: the same shapes started
# as torchrun or a loop over ssh would, without PMIx: each rank entered on
# its host (rsh-agent) with RANK, WORLD_SIZE, MASTER_ADDR (host 1's name,
# from /etc/hosts) and MASTER_PORT; the environment goes with the ranks.
# Exit status: the first failing rank's, in rank order.
tb_rdv() {
    local nh=$1 ppn=$2 place=$3 n r h cmd="pids="
    shift 3
    n=$((nh * ppn))
    for ((r = 0; r < n; r++)); do
        if [[ $place == cyclic ]]; then h=$((r % nh + 1)); else h=$((r / ppn + 1)); fi
        cmd+="; RANK=$r WORLD_SIZE=$n MASTER_ADDR=$(tb_name 1) MASTER_PORT=29500"
        cmd+=" $(printf '%q ' "$TB_HERE/rsh-agent" "$(tb_name "$h")" "$@") & pids+=\" \$!\""
    done
    cmd+='; rc=0; for p in $pids; do wait $p; s=$?; ((rc == 0)) && rc=$s; done; exit $rc'
    tb_say "run: RANK=r WORLD_SIZE=$n MASTER_ADDR=$(tb_name 1) MASTER_PORT=29500 $* on each rank's host ($place)"
    tb_launch bash -c "$cmd"
}
