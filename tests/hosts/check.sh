# tests/hosts/check.sh: checks cadre's decisions in a job's CADRE_DEBUG=INFO
# output (sourced by lib.sh). The hosts share /tmp, /dev/shm and pids, so a
# runtime that used shared memory between hosts, or loopback for a remote
# peer, would still get every element right: the log lines agreed for
# issue 15 say what it chose, and these checks hold them to the placement.
#   [rank R INFO P2P] locality: host H of N (NAME), ranks on this host: a,b
#   [rank R INFO P2P] peer W: shm|tcp|ucx
#   [rank R INFO P2P] tcp: listening on IP:PORT (IFNAME)[, IP:PORT (IFNAME)...]
#   [rank R INFO P2P] tcp: rank W reached at IP:PORT
#   [rank R INFO P2P] tcp: rank W reached on its connection from IP:PORT
#                     (W connected first: R writes on W's connection)
#   [rank R INFO P2P] N ranks of the job share this machine's C cores (L on
#                     this host): oversubscribed, waits yield|not oversubscribed
#                     (the hosts are namespaces of one machine: its cores are
#                     shared by every rank of the job)
#   [rank R INFO COLL] <collective>: algorithm <name> (<why>)

# tb_check_decisions LOG NHOSTS PPN block|cyclic: one line per failed check
# ("decision: ..."), then a summary; returns 1 on any failure. Hosts are
# numbered from 0 in the order of their lowest world rank, which for block
# and cyclic placement is the test bed's order. Options (environment):
#   TB_CHECK_FORBID  ERE: no rank listens on an IP that matches it (a rank
#                    may listen on loopback for the peers of its own host; a
#                    remote peer must be reached at its host's address)
#   TB_CHECK_IFNAME  ERE: every listening interface's name matches it
#   TB_CHECK_ALGO=1  rank 0 logs at least one allreduce algorithm
#   TB_CHECK_REMOTE  the transport every peer on another host must take: tcp
#                    (the default) or ucx; with ucx no peer may be reached
#                    over tcp ("tcp: rank W reached at"), and a tcp listener
#                    is allowed (one line at most) but not required
tb_check_decisions() {
    local log=$1 nh=$2 ppn=$3 place=$4
    case ${TB_CHECK_REMOTE:-tcp} in
    tcp | ucx) ;;
    *)
        echo "decision: TB_CHECK_REMOTE=$TB_CHECK_REMOTE: not tcp or ucx"
        return 1
        ;;
    esac
    awk -v nh="$nh" -v ppn="$ppn" -v place="$place" -v k="$TB_K" -v ncores="$(getconf _NPROCESSORS_ONLN)" \
        -v forbid="${TB_CHECK_FORBID:-^$}" \
        -v ifre="${TB_CHECK_IFNAME-}" -v want_algo="${TB_CHECK_ALGO-0}" -v remote="${TB_CHECK_REMOTE:-tcp}" '
    function host_of(r) { return place == "cyclic" ? r % nh : int(r / ppn) }
    function name_of(h) { return "ctb" k "-n" (h + 1) }
    function addr_of(h) { return "10.213." k "." (h + 1) }
    function bad(msg) { nbad++; if (nbad <= 40) print "decision: " msg }
    # A tcp connection of rank r with rank W at ip (what: "reached rank W"
    # or "took rank W\047s connection"): only to another host, at its address.
    function tcp_conn(r, W, ip, what, body) {
        nreach++
        if (remote != "tcp")
            bad("rank " r " " what " over tcp, expected " remote " (" body ")")
        else if (host_of(W) == host_of(r))
            bad("rank " r " " what " on its own host " name_of(host_of(r)) " over tcp (" body ")")
        else if (ip != addr_of(host_of(W)))
            bad("rank " r " " what " (" name_of(host_of(W)) ", " addr_of(host_of(W)) ") at " ip)
    }
    BEGIN {
        np = nh * ppn
        for (r = 0; r < np; r++) {
            h = host_of(r)
            list[h] = list[h] (list[h] == "" ? "" : ",") r
        }
    }
    {
        if (!match($0, /^\[rank [0-9]+ INFO [A-Z0-9]+\] /)) next
        split(substr($0, 7), a, " ")
        r = a[1] + 0
        body = substr($0, RLENGTH + 1)
    }
    body ~ /^locality: host / {
        nloc[r]++
        if (!match(body, /^locality: host [0-9]+ of [0-9]+ \([^)]*\), ranks on this host: [0-9, ]+$/)) {
            bad("rank " r ": unreadable: " body); next
        }
        split(body, w, " ")
        H = w[3] + 0; N = w[5] + 0
        nm = w[6]; gsub(/[(),]/, "", nm)
        rl = body; sub(/.*ranks on this host: /, "", rl); gsub(/ /, "", rl)
        h = host_of(r)
        if (H != h || N != nh || nm != name_of(h) || rl != list[h])
            bad("rank " r ": \"" body "\"; expected host " h " of " nh " (" name_of(h) "), ranks on this host: " list[h])
        next
    }
    body ~ /^peer [0-9]+: / {
        split(body, w, /[ :]+/)
        W = w[2] + 0; how = w[3]
        npeer[r, W]++
        want = host_of(W) == host_of(r) ? "shm" : remote
        if (how != want)
            bad("rank " r " (" name_of(host_of(r)) ") uses " how " to rank " W " (" name_of(host_of(W)) "), expected " want)
        else if (how == "shm") nshm++
        else nremote++
        next
    }
    body ~ /^tcp: listening on / {
        nlisten[r]++
        s = body; sub(/^tcp: listening on /, "", s)
        n = split(s, e, /, /)
        own = 0
        for (i = 1; i <= n; i++) {
            if (!match(e[i], /^[0-9.]+:[0-9]+ \([^)]*\)$/)) { bad("rank " r ": unreadable: " body); break }
            ip = e[i]; sub(/:.*/, "", ip)
            ifn = e[i]; sub(/.*\(/, "", ifn); sub(/\)$/, "", ifn)
            if (ip ~ forbid) bad("rank " r " listens on " e[i] " (forbidden here: " forbid ")")
            if (ifre != "" && ifn !~ ifre) bad("rank " r " listens on " e[i] ": interface not matching " ifre)
            if (ip == addr_of(host_of(r))) own = 1
        }
        if (!own) bad("rank " r " does not listen on its host address " addr_of(host_of(r)) ": " body)
        next
    }
    body ~ /^tcp: rank [0-9]+ reached at / {
        split(body, w, " ")
        ip = w[6]; sub(/:[0-9]+$/, "", ip)
        tcp_conn(r, w[3] + 0, ip, "reached rank " (w[3] + 0), body)
        next
    }
    body ~ /^tcp: rank [0-9]+ reached on its connection from / {
        split(body, w, " ")
        ip = w[9]; sub(/:[0-9]+$/, "", ip)
        tcp_conn(r, w[3] + 0, ip, "took rank " (w[3] + 0) "\047s connection", body)
        next
    }
    body ~ /^[0-9]+ ranks of the job share this machine/ {
        nmach[r]++
        want = np " ranks of the job share this machine\047s " ncores " cores (" ppn " on this host): " \
            (np > ncores ? "oversubscribed, waits yield" : "not oversubscribed")
        if (body != want) bad("rank " r ": \"" body "\"; expected \"" want "\"")
        next
    }
    body ~ /^[a-z_]+: algorithm [^ ]+ \(/ {
        split(body, w, " ")
        c = w[1]; sub(/:$/, "", c)
        why = body; sub(/^[^(]*\(/, "", why)
        if ((c, why) in algo && algo[c, why] != w[3])
            bad(c " (" why ": rank " r " chose " w[3] ", another rank " algo[c, why])
        algo[c, why] = w[3]
        if (!((c ":" w[3]) in seen)) { seen[c ":" w[3]] = 1; names = names " " c "=" w[3] }
        if (r == 0 && c == "allreduce") algo0++
        next
    }
    END {
        for (r = 0; r < np; r++) {
            if (nloc[r] != 1) bad("rank " r ": " (nloc[r] + 0) " locality lines, expected 1")
            far = 0
            for (W = 0; W < np; W++) {
                if (W == r) continue
                if (host_of(W) != host_of(r)) far = 1
                if (npeer[r, W] != 1) bad("rank " r ": " (npeer[r, W] + 0) " \"peer " W ":\" lines, expected 1")
            }
            if (far && nmach[r] != 1) bad("rank " r ": " (nmach[r] + 0) " \"ranks of the job share this machine\" lines, expected 1")
            if (far && remote != "tcp" && nlisten[r] > 1) bad("rank " r ": " nlisten[r] " \"tcp: listening on\" lines, expected 1 at most")
            if (far && remote == "tcp" && nlisten[r] != 1) bad("rank " r ": " (nlisten[r] + 0) " \"tcp: listening on\" lines, expected 1")
        }
        if (nh > 1 && remote == "tcp" && nreach == 0) bad("no \"tcp: rank W reached at\" line: nothing went over tcp")
        if (want_algo && algo0 == 0) bad("rank 0 logged no \"allreduce: algorithm\" line")
        printf "decisions: %d ranks on %d hosts (%s): %d shm and %d %s peers, %d tcp connections checked, %d failed checks; algorithms:%s\n", np, nh, place, nshm, nremote, remote, nreach, nbad, names == "" ? " none logged" : names
        exit nbad > 0
    }' "$log"
}
