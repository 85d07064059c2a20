#!/bin/sh
# Installs the Debian 12 packages that hmc needs to build, test and benchmark: the toolchain and
# libraries; libtorch and the real data of the training examples (Fashion-MNIST, the fortunes
# corpus) with a serial OpenBLAS (Debian's libtorch otherwise multiplies matrices with the
# reference BLAS, ten times slower); ssh for hmcrun and its tests (the test starts its own sshd on
# a loopback port); the baselines hmc is compared with, Gloo, Open MPI and torch.distributed, and
# matplotlib for plots; clang and its libFuzzer for the fuzz targets.
# Idempotent and non-interactive: it only calls apt-get when something is missing. Run as root (or
# with sudo).
set -eu

PACKAGES="
  build-essential cmake ninja-build pkg-config git ca-certificates
  libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev libhwloc-dev libucx-dev libfabric-dev libssl-dev libfmt-dev zlib1g-dev
  clang-format clang libclang-rt-14-dev iproute2 procps openssl python3
  iperf3 iputils-ping
  libtorch-dev libopenblas0-serial dataset-fashion-mnist fortunes
  openssh-client openssh-server
  libgloo-dev openmpi-bin libopenmpi-dev python3-torch python3-matplotlib
"

missing=""
for p in $PACKAGES; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done

if [ -z "$missing" ]; then
  echo "setup: all packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
echo "setup: installing$missing"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
# shellcheck disable=SC2086
$SUDO apt-get install -y -q --no-install-recommends $missing
