# lockbox container image, Debian 12 by default. Build from the repository
# root (any builder: classic, BuildKit, podman, buildah):
#
#   docker build -t lockbox:0.1.0 .
#   docker build --build-arg DEBIAN_IMAGE=debian:trixie-slim -t lockbox:0.1.0-trixie .
#   docker build --build-arg SHELL_TOOLS=1 -t lockbox:0.1.0-shell .   # shell jobs
#
# The container needs a few capabilities and no seccomp/AppArmor profile of
# Docker's; run it as docs/DEPLOY.md says (or with deploy/docker-compose.yaml),
# never with --privileged and never with --init:
#
#   docker run -d --name lockbox -p 8194:8194 -e API_KEY=... \
#     --cap-drop ALL \
#     --cap-add SYS_ADMIN --cap-add SETUID --cap-add SETGID --cap-add SETPCAP \
#     --cap-add KILL --cap-add CHOWN --cap-add DAC_OVERRIDE --cap-add NET_ADMIN \
#     --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
#     --cgroupns private lockbox:0.1.0
#
# Layout, the same under / here as under /etc/lockbox on a host install
# (deploy/lockboxd.service): conf/config.yaml and
# dependencies/python-requirements.txt relative to the working directory,
# so the paths Dify mounts (/conf, /dependencies) are the defaults.

ARG DEBIAN_IMAGE=debian:bookworm-slim

# ---- build: the packages scripts/install-deps names for `make`, no tests ----
FROM ${DEBIAN_IMAGE} AS build
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
        build-essential pkg-config \
        libmicrohttpd-dev libjansson-dev libyaml-dev libseccomp-dev \
        libmnl-dev libnftables-dev libsqlite3-dev libarchive-dev nettle-dev \
        libcurl4-openssl-dev python3 python3-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Makefile ./
COPY src/ src/
# build/lockboxd, build/lockbox-pyzygote (embeds this stage's
# /usr/bin/python3, the same Debian CPython as the runtime stage's: both
# stages come from one DEBIAN_IMAGE) and build/lockbox. runtime-packages
# lists the Debian packages holding the libraries they link (whatever this
# release names them: libmicrohttpd12 or libmicrohttpd12t64, libpython3.11
# or libpython3.13...), for the runtime stage.
RUN make -j"$(nproc)" \
 && for lib in $(ldd build/lockboxd build/lockbox-pyzygote build/lockbox \
                 | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u); do \
        for p in "$lib" "/usr$lib" "${lib#/usr}" "$(realpath "$lib")"; do \
            dpkg -S "$p" 2>/dev/null && break; \
        done >> build/owners || { echo "no package holds $lib" >&2; exit 1; }; \
    done \
 && cut -d: -f1 build/owners | sort -u > build/runtime-packages \
 && cat build/runtime-packages

# ---- runtime ----------------------------------------------------------------
FROM ${DEBIAN_IMAGE}
ARG DEBIAN_FRONTEND=noninteractive
# Libraries of the three binaries (the build stage's list), the interpreters
# runs use, the modules Dify's runner scripts import (python3-socks and
# python3-socksio let requests and httpx use a SOCKS5_PROXY, as in
# dify-sandbox's image), pip for the dependency layer, CA certificates and
# zone data that runs see read-only, and mount(8) for the entrypoint.
# nodejs is the release's Node.js (nodejs_path /usr/bin/node).
COPY --from=build /src/build/runtime-packages /tmp/runtime-packages
RUN apt-get update \
 && apt-get install -y --no-install-recommends $(cat /tmp/runtime-packages) \
        python3 python3-pip python3-requests python3-httpx python3-jinja2 \
        python3-socks python3-socksio \
        nodejs ca-certificates tzdata mount \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages \
 && ln -s /usr/bin/python3 /usr/local/bin/python3 \
 && ln -s /usr/bin/node /usr/local/bin/node
# The two links above let old Dify config files that name
# python_path: /usr/local/bin/python3 or nodejs_path: /usr/local/bin/node
# start unchanged; both are inside /usr, which every run sees.

# Tools for shell jobs (shell.enabled, Dify's local_sandbox): only with
# --build-arg SHELL_TOOLS=1, so the code sandbox image does not grow for
# operators who run no shell jobs (the step is then a no-op). The tools a
# job's PATH finds in the reference image: Debian's packages, pip in
# python3-pip above, npm (Debian's, for Node.js 18) and pnpm from npm
# (PNPM_VERSION: 10.x is the last line that runs on Node.js 18),
# btrfs-progs for shell.disk_size (e2fsprogs for an ext4 image an earlier
# version made). uv is not installed: Debian 12 has no package of it
# and it is not on npm (docs/DEPLOY.md). NPM_REGISTRY: a mirror of the npm
# registry; NPM_CA_PEM: PEM certificates npm trusts besides the system's
# for that one install (a TLS-intercepting proxy), not kept in the image.
ARG SHELL_TOOLS=0
ARG PNPM_VERSION=10.34.8
ARG NPM_REGISTRY=https://registry.npmjs.org/
ARG NPM_CA_PEM=
RUN if [ "$SHELL_TOOLS" = 1 ]; then \
        apt-get update \
     && apt-get install -y --no-install-recommends \
            bash ca-certificates curl file git iproute2 jq less openssh-client \
            procps ripgrep unzip xz-utils zip python3-venv npm btrfs-progs e2fsprogs \
     && rm -rf /var/lib/apt/lists/* \
     && cat /etc/ssl/certs/ca-certificates.crt > /tmp/npm-ca.pem \
     && printf '%s\n' "$NPM_CA_PEM" >> /tmp/npm-ca.pem \
     && npm_config_cafile=/tmp/npm-ca.pem npm_config_registry="$NPM_REGISTRY" \
        npm install --global --no-audit --no-fund --no-update-notifier "pnpm@$PNPM_VERSION" \
     && npm cache clean --force \
     && rm -rf /tmp/npm-ca.pem /root/.npm \
     && pnpm --version; \
    fi

# lockbox-pyzygote must sit next to lockboxd (found through /proc/self/exe).
COPY --from=build /src/build/lockboxd /src/build/lockbox-pyzygote /src/build/lockbox \
     /usr/local/bin/
COPY conf/config.yaml /conf/config.yaml
COPY dependencies/ /dependencies/

# Docker mounts the container's cgroup tree read-only unless --privileged;
# with CAP_SYS_ADMIN the container may make its own view of it writable (its
# cgroup namespace shows only the container's own subtree). exec, so that
# lockboxd is PID 1 and the only process in the container's cgroup: on
# cgroup v2 it moves itself into a leaf and enables controllers for its
# runs, which the kernel refuses while another process sits in that group.
# LOCKBOX_REMOUNT_CGROUP=0 skips the remount.
# (A file of its own, copied in plain steps: the image builds with Docker's
# classic builder, BuildKit, podman or buildah alike.)
COPY deploy/lockbox-entrypoint /usr/local/sbin/lockbox-entrypoint
RUN chmod 0755 /usr/local/sbin/lockbox-entrypoint

WORKDIR /
# dependencies.layer_dir: the installed packages survive a restart of the
# container (status.json records what they were built from, so an unchanged
# requirements file is not installed again).
VOLUME ["/var/lib/lockbox/python-deps"]
EXPOSE 8194
STOPSIGNAL SIGTERM
# /health needs no key. no_proxy: HTTP(S)_PROXY in the environment are meant
# for the runs, not for this probe.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD no_proxy='*' lockbox health --server "http://127.0.0.1:${SANDBOX_PORT:-8194}" >/dev/null || exit 1

LABEL org.opencontainers.image.title="lockbox" \
      org.opencontainers.image.description="Code-execution sandbox, drop-in replacement for Dify's sandbox" \
      org.opencontainers.image.version="0.1.0"

ENTRYPOINT ["/usr/local/sbin/lockbox-entrypoint"]
CMD ["--config", "/conf/config.yaml"]
