#!/bin/sh
# Installs (Debian 12, apt) what building and testing fish needs, when missing.
# Usage: cmake/install-deps.sh [--tests]   (--tests adds Catch2, Mesa's lavapipe
# Vulkan driver, SPIRV-Tools, clang 14 with its sanitizer and libFuzzer
# runtimes and ccache for the fuzz build, Node.js with npm for fish serve's
# tests with the openai package, and python3-venv/-setuptools/-pytest/-numpy
# for the Python package's). Needs root or sudo only when something is missing.
set -e
pkgs="cmake ninja-build g++ pkg-config libvulkan-dev glslc libcpp-httplib-dev nlohmann-json3-dev"
[ "${1:-}" = "--tests" ] && pkgs="$pkgs catch2 spirv-tools mesa-vulkan-drivers vulkan-tools clang-14 libclang-rt-14-dev ccache python3-venv python3-setuptools python3-pytest python3-numpy"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# node and npm: any install will do (Debian's packages, or a nodejs that bundles npm).
if [ "${1:-}" = "--tests" ]; then
  command -v node >/dev/null || missing="$missing nodejs"
  command -v npm >/dev/null || missing="$missing npm"
fi
[ -z "$missing" ] && exit 0
echo "installing:$missing"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
