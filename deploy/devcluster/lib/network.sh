# deploy/devcluster/lib/network.sh -- sourced by cluster.sh, not run on its own.
# The nodes' network: every slurmd of this release, and so every job step it starts, runs in
# the network namespace NODE_NETNS, joined to the host by a veth pair:
#   host side  NODE_HOST_IF  NODE_HOST_ADDR/24   (slurmctld is reached here: SlurmctldHost)
#   node side  NODE_IF       NODE_ADDR/24        (slurm.conf's NodeAddr; a session's address)
# A job sees its own loopback and NODE_HOST_ADDR, nothing else: the host's 127.0.0.1 (Redis
# without a password, PostgreSQL with trust auth, the portal, Prometheus) is out of its reach,
# and there is no route beyond the /24. Daemons listening on 0.0.0.0 on the host (slurmctld,
# slurmdbd, the slurmds' own ports: munge-authenticated) stay reachable, as on a real cluster.
# shellcheck shell=bash

# Where the power-saving hook, inside the root, finds the namespace to start a slurmd in.
NODE_NET_DIR=/run/devcluster-net           # inside the root
NODE_NET_FILE="$NODE_NET_DIR/nodes.net"

node_netns() { [[ "$ISOLATE_JOBS" == 1 ]] && echo "$NODE_NETNS"; return 0; }

start_node_network() {
    [[ "$ISOLATE_JOBS" == 1 ]] || return 0
    command -v ip >/dev/null || die "iproute2's ip is needed for the nodes' network namespace (or DEVCLUSTER_ISOLATE_JOBS=0)"
    [[ -e "/run/netns/$NODE_NETNS" ]] || ip netns add "$NODE_NETNS" || die "cannot make network namespace $NODE_NETNS"
    if ! ip link show "$NODE_HOST_IF" >/dev/null 2>&1; then
        ip link add "$NODE_HOST_IF" type veth peer name "$NODE_IF" netns "$NODE_NETNS" ||
            die "cannot make the veth pair $NODE_HOST_IF/$NODE_IF"
    fi
    ip addr replace "$NODE_HOST_ADDR/24" dev "$NODE_HOST_IF"
    ip link set "$NODE_HOST_IF" up
    ip -n "$NODE_NETNS" addr replace "$NODE_ADDR/24" dev "$NODE_IF"
    ip -n "$NODE_NETNS" link set "$NODE_IF" up
    ip -n "$NODE_NETNS" link set lo up
    # The namespace as a file inside the root, for gpupool-node-power (power/): a private
    # folder, so the bind does not spread to other mounts of the root.
    local d="$ROOT$NODE_NET_DIR"
    mkdir -p "$d"
    if ! mountpoint -q "$d"; then
        mount --bind "$d" "$d"
        mount --make-private "$d"
    fi
    # Once bound, the file is the namespace (nsfs): no touching it again.
    if ! mountpoint -q "$ROOT$NODE_NET_FILE"; then
        touch "$ROOT$NODE_NET_FILE"
        mount --bind "/run/netns/$NODE_NETNS" "$ROOT$NODE_NET_FILE"
    fi
    ip netns exec "$NODE_NETNS" true || die "cannot enter network namespace $NODE_NETNS"
    log "nodes and their jobs run in network namespace $NODE_NETNS ($NODE_ADDR; the host is $NODE_HOST_ADDR)"
}

stop_node_network() {
    local d="$ROOT$NODE_NET_DIR"
    if [[ -d "$d" ]]; then
        mountpoint -q "$ROOT$NODE_NET_FILE" && umount "$ROOT$NODE_NET_FILE"
        mountpoint -q "$d" && umount "$d"
    fi
    # Deleting the namespace deletes the veth pair with it.
    [[ -e "/run/netns/$NODE_NETNS" ]] && ip netns delete "$NODE_NETNS"
    return 0
}
