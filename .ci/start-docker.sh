#!/usr/bin/env bash
# CI helper: a Docker engine and the CPU test image for the docker evaluator's tests.
#
# Installs Debian's docker.io if dockerd is missing, starts dockerd (no bridge, no iptables: the
# tests' containers run with --network none), and builds, with no registry and no network:
#   pikeh-base:local        this host's libraries for python3 and PyTorch (containers/make-local-base.sh)
#   pikeh-worker:cpu-test   containers/Dockerfile.cpu on that base, without PyTorch: the tests mount the
#                           CI venv read-only instead (--docker-host-python)
# Exits non-zero when Docker cannot run here; .ci/run then goes on and the docker tests skip with a message.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
say() { echo "start-docker: $*"; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo -n "$@"; else return 1; fi; }

if ! command -v dockerd >/dev/null 2>&1; then
  say "installing docker.io"
  export DEBIAN_FRONTEND=noninteractive
  if ! as_root timeout 300 apt-get install -y -q --no-install-recommends docker.io >/tmp/pikeh-docker-install.log 2>&1; then
    as_root timeout 300 apt-get update -q >>/tmp/pikeh-docker-install.log 2>&1 || true
    as_root timeout 300 apt-get install -y -q --no-install-recommends docker.io >>/tmp/pikeh-docker-install.log 2>&1 \
      || { say "cannot install docker.io (log: /tmp/pikeh-docker-install.log)"; tail -5 /tmp/pikeh-docker-install.log; exit 1; }
  fi
  say "docker.io installed after $(( $(date +%s) - start )) s"
fi

if ! docker info >/dev/null 2>&1; then
  say "starting dockerd"
  as_root sh -c 'nohup dockerd --iptables=false --ip6tables=false --bridge=none >/tmp/pikeh-dockerd.log 2>&1 &' \
    || { say "cannot start dockerd (not root, no sudo)"; exit 1; }
  for _ in $(seq 1 120); do
    docker info >/dev/null 2>&1 && break
    sleep 0.5
  done
  if ! docker info >/dev/null 2>&1; then
    say "dockerd did not come up in 60 s; its log ends:"
    tail -15 /tmp/pikeh-dockerd.log 2>/dev/null || true
    exit 1
  fi
  say "dockerd up after $(( $(date +%s) - start )) s"
fi

venv=()
[ -d .venv ] && venv=(.venv)
bash containers/make-local-base.sh --tag pikeh-base:local --python python3 "${venv[@]}"
tar -c --exclude=__pycache__ containers/Dockerfile.cpu src/pike_harness/__init__.py src/pike_harness/worker \
  | docker build -q --network none -t pikeh-worker:cpu-test --build-arg BASE=pikeh-base:local \
      --build-arg INSTALL_TORCH=0 -f containers/Dockerfile.cpu - >/dev/null
test "$(docker run --rm --network none --read-only --cap-drop ALL --entrypoint /bin/sh pikeh-worker:cpu-test \
        -c 'echo ok')" = ok || { say "the test image does not run"; exit 1; }
say "images pikeh-base:local and pikeh-worker:cpu-test ready; $(( $(date +%s) - start )) s in all"
