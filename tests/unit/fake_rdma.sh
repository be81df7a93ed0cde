#!/bin/sh
# fake_rdma.sh CMD [ARG...]: runs CMD in a private mount namespace whose
# /sys/class has an RDMA device, infiniband/mlx5_0 (an empty directory),
# beside the real net (for UCX's and cadre's tcp); nothing else of
# /sys/class is there. For the ucx suite (test_ucx.c): cadre's default
# loads UCX only on a node with such a device. Needs root (unshare -m);
# exits 77 when it cannot make the namespace.
set -e
saved=$(mktemp -d "${TMPDIR:-/tmp}/cadre-fake-rdma.XXXXXX")
trap 'rmdir "$saved" 2>/dev/null || true' EXIT
# The inner shell runs CMD (not exec: the trap above removes the directory).
if ! unshare -m --propagation private true 2>/dev/null; then
    echo "fake_rdma.sh: cannot make a mount namespace (root?)" >&2
    exit 77
fi
set +e
unshare -m --propagation private sh -c '
    set -e
    saved=$1; shift
    mount --bind /sys/class "$saved"
    mount -t tmpfs cadre-fake-rdma /sys/class
    mkdir -p /sys/class/net /sys/class/infiniband/mlx5_0
    mount --bind "$saved/net" /sys/class/net
    umount "$saved"
    exec "$@"' sh "$saved" "$@"
