#!/bin/sh
# Installs (Debian 12, apt) what building and testing fish needs, when missing.
# Usage: cmake/install-deps.sh [--tests]   (--tests adds Catch2, Mesa's lavapipe
# Vulkan driver, SPIRV-Tools, and clang 14 with its sanitizer and libFuzzer
# runtimes and ccache for the fuzz build). Needs root or sudo only when something is missing.
set -e
pkgs="cmake ninja-build g++ pkg-config libvulkan-dev glslc"
[ "${1:-}" = "--tests" ] && pkgs="$pkgs catch2 spirv-tools mesa-vulkan-drivers vulkan-tools clang-14 libclang-rt-14-dev ccache"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "installing:$missing"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
