/*
 * The one table of every CADRE_* tunable: (id, type, default, help).
 * The runtime, cadre-info and the ENVIRONMENT section of cadre-env(7) are all
 * written from this list. Types: STR, INT, DBL, BOOL (0/1, yes/no, on/off).
 * Included with X defined by the includer; no include guard on purpose.
 */
X(DEBUG, STR, "WARN", "log level: WARN, INFO or TRACE (any case); another value warns once and logs at WARN")
X(DEBUG_SUBSYS, STR, "", "comma list of subsystems to log (BOOTSTRAP,RUNTIME,P2P,COLL,DEVICE,LAUNCHER); empty = all; an unknown name warns once")
X(ERRORS, STR, "warn", "what a failing call does besides returning its status: warn (write its cadre_last_error() to stderr, one line with the rank), abort (write it and end the job with cadre_abort, the status as exit code) or return (nothing); cadre_comm_set_errors overrides it per communicator")
X(TIMEOUT, DBL, "600", "seconds an operation may make no progress before it fails with CADRE_ERR_TIMEOUT and a diagnosis of the ranks it waits for (see DIAGNOSTICS in cadre-errors(7)); more than 0, inf for no limit (cadre_init fails with CADRE_ERR_ARG on 0 or less)")
X(STUCK_WARN, DBL, "60", "seconds an operation may make no progress before its rank warns, once per operation, with the same diagnosis as CADRE_TIMEOUT's (the ranks it waits for, a deadlock) while it goes on waiting (see DIAGNOSTICS in cadre-errors(7)); 0 = never")
X(TRANSPORT, STR, "", "comma list restricting the transports used (shm, tcp); empty = all available")
X(GPU, INT, "-1", "CUDA device to bind in cadre_init; -1 = local_rank modulo the visible GPUs (set by cadrerun)")
X(GPU_BUFFERS, BOOL, "1", "look for CUDA device buffers (cudaPointerGetAttributes) when a GPU is bound; 0 treats every buffer as host memory and saves that call")
X(GPU_WAIT, STR, "auto", "how a stream waits for a device-buffer operation: auto (cuStreamWaitValue32 where available) or kernel (a one-thread spin kernel)")
X(GPU_IPC, BOOL, "1", "device buffers to another process of the node go by CUDA IPC (the receiver copies from the sender's buffer) where both GPUs can reach each other; 0 stages them through host memory")
X(GPU_ALGO, STR, "auto", "allreduce, reduce_scatter and allgather on device buffers: auto (one kernel per GPU over every rank's buffers through CUDA IPC, where the communicator's ranks are on one node with GPUs that reach each other, at most 16 ranks; else staged) or staged (through host memory, with the host algorithms); see cadre-device(7); the same on every rank (cadre_init fails where it differs)")
X(GPU_HOST_DONE, INT, "1048576", "largest buffer in bytes of a blocking device-buffer allreduce, reduce_scatter or allgather on the direct path that a rank other than its GPU's leader, with its stream idle, hands over and waits for on the host (at most 0.2 ms, then on its stream) instead of marking it on its stream, which on a GPU shared without MPS costs a switch to its context; 0 = never; see cadre-device(7)")
X(SHM_FRAG, INT, "131072", "bytes per fragment of a large message in shared memory (the pipeline's unit)")
X(TCP_BUFFER, INT, "0", "bytes of each TCP socket's kernel send and receive buffers (SO_SNDBUF, SO_RCVBUF; 4096..1 GiB); 0 = the kernel's defaults, which grow as needed")
X(SHM_NFRAGS, INT, "8", "fragments in flight per pair of ranks in shared memory")
X(LAUNCHER_NGPUS, INT, "-1", "GPUs cadrerun assumes the node has, for the default -n and CADRE_GPU; -1 = count /proc/driver/nvidia/gpus, honouring CUDA_VISIBLE_DEVICES")
X(LAUNCHER_KILL_GRACE, DBL, "2", "seconds cadrerun waits after sending SIGTERM to the ranks of a job it stops, or to what ranks left running when the job ends, before it sends SIGKILL")
X(LAUNCHER_DRAIN, DBL, "1", "seconds cadrerun keeps forwarding output after the last rank exited, while descendants of ranks still hold the output pipes")
X(CHECK, INT, "1", "1: ranks compare their collective calls and fail with CADRE_ERR_MISMATCH when they differ; 0: no check; the same on every rank (cadre_init fails where it differs)")
X(ALGO, STR, "", "collective algorithms to force, e.g. allreduce=ring,bcast=pipeline; see cadre-collectives(7) for the names; the same text on every rank (cadre_init fails where it differs)")
X(HOSTID, STR, "", "this rank's host identity (any string, like NCCL_HOSTID): ranks with the same value are one host (shared memory between them, TCP to the others, one group of the two-level collectives); empty = the launcher's node id, else the hostname")
X(SOCKET_IFNAME, STR, "", "interfaces the TCP transport listens on and offers to other hosts: a comma list of name prefixes, ^ before the list to exclude them, = to match whole names (NCCL_SOCKET_IFNAME's syntax, e.g. eth,ib or ^docker,lo or =eth0); empty = every interface but loopback and bridges or container ends (docker*, virbr*, veth*, br-*, ...), which are used only when no other exists, and loopback for peers on the same host; a set list is obeyed (loopback only when it names lo); see cadre-nodes(7)")
X(TCP_PEER_TIMEOUT, DBL, "6", "seconds without any answer (to a connect, to data sent, to keepalive probes) after which a peer over TCP is unreachable: its host died or its link is cut (1..3600; TCP_USER_TIMEOUT and keepalive)")
X(WAIT, STR, "auto", "what a rank does when other processes want the node's cores (more runnable tasks than cores in /proc/loadavg): auto (short scheduler slices for its threads, and the 2-rank allreduce from 64 KiB lets each rank work at its own pace; waits spin as usual), spin (never asks whether the cores are busy) or sleep (as auto on a busy machine, always, and waits sleep on the doorbell after a few polls, leaving the cores to other work); see cadre-collectives(7)")
X(SHM_CMA_MIN, INT, "65536", "smallest message in bytes that, in shared memory, moves in one copy by cross-memory attach when the sender has another large message to that rank in flight (a window of nonblocking sends): the receiver reads half from the sender's buffer (process_vm_readv) while the sender writes the other half into the receive buffer (process_vm_writev); other large messages go through the pipeline of CADRE_SHM_FRAG fragments; 0 = never")
X(SHM_CMA_MAX, INT, "0", "largest message in bytes that moves in one copy as CADRE_SHM_CMA_MIN says; larger ones take the pipeline; 0 = no limit")
