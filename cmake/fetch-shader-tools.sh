#!/bin/sh
# Shader tools that know GL_KHR_cooperative_matrix, for rebuilding the SPIR-V
# of fish_vulkan's tensor-core kernels. Debian 12's glslc (glslang 11.13) and
# spirv-tools (2023.1) predate the extension (glslang has it from 13.0,
# SPIRV-Tools from 2023.4), and bookworm-backports has nothing newer. So this
# script takes Debian 13's glslc, libshaderc1 and spirv-tools at pinned
# versions, with the Debian 13 libc and libstdc++ they need, from the Debian
# mirror apt already uses, and unpacks them into a private folder as a build
# tool. Nothing is installed into the system; the binaries run through the
# folder's own dynamic loader. A plain Debian 12 build does not need any of
# this: the committed shaders/prebuilt/ carries every module.
#
# Usage: cmake/fetch-shader-tools.sh [DIR]      (default: .tools/shader-tools)
# Then:  cmake -B build -DFISH_GLSLC=$DIR/bin/glslc   (DIR/bin/spirv-val validates)
set -eu
cd "$(dirname "$0")/.."
dir=${1:-.tools/shader-tools}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
suite=trixie
# Pinned: the versions whose output is committed in shaders/prebuilt/.
pkgs="glslc=2025.2-1 libshaderc1=2025.2-1 spirv-tools=2025.1~rc1-1 libc6=2.41-12+deb13u5 libstdc++6=14.2.0-19 libgcc-s1=14.2.0-19"

mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/ { print $2; exit }')
[ -n "$mirror" ] || mirror=$(awk '$1 == "deb" { print $2; exit }' /etc/apt/sources.list 2>/dev/null)
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian

apt_dir=$dir/apt
mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial"
echo "deb $mirror $suite main" >"$apt_dir/sources.list"
A="-o Dir::Etc::sourcelist=$apt_dir/sources.list -o Dir::Etc::sourceparts=- -o Dir::State::Lists=$apt_dir/lists
   -o Dir::Cache::Archives=$apt_dir/archives -o Dir::State::status=/dev/null -o APT::Sandbox::User=root"
echo "fetch-shader-tools: Debian $suite package lists from $mirror"
# shellcheck disable=SC2086
apt-get -q $A update >/dev/null
cd "$apt_dir/archives"
# shellcheck disable=SC2086
apt-get -q $A download $pkgs >/dev/null
root=$dir/root
rm -rf "$root"
mkdir -p "$root"
for d in *.deb; do dpkg-deb -x "$d" "$root"; done

# Wrappers: each tool through Debian 13's loader and libraries.
mkdir -p "$dir/bin"
for tool in glslc spirv-val spirv-dis spirv-opt; do
  cat >"$dir/bin/$tool" <<EOF
#!/bin/sh
exec "$root/usr/lib64/ld-linux-x86-64.so.2" --library-path "$root/usr/lib/x86_64-linux-gnu:$root/lib/x86_64-linux-gnu" "$root/usr/bin/$tool" "\$@"
EOF
  chmod +x "$dir/bin/$tool"
done
"$dir/bin/glslc" --version | head -3
echo "fetch-shader-tools: configure with -DFISH_GLSLC=$dir/bin/glslc"
