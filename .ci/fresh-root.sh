#!/bin/sh
# The README's two commands on a fresh Debian 12 root, as a newcomer runs them.
#
# A bare Debian 12 root (debootstrap --variant=minbase, from the Debian mirror
# this machine's apt already uses) gets a copy of the project (tracked and
# untracked, not ignored files); inside it, the README's first command runs
# exactly as the README writes it (parsed from README.md, so the two cannot
# drift) and must end with the benchmark table; then the second command's
# dependency step and configure (`<second command> --configure-only`). The full
# test run stays on the CI machine itself.
#
# The bare root is cached as a tarball (FISH_CI_CACHE, default
# /var/cache/fish-ci) between runs on one machine; installed packages never are.
# Needs root (chroot, mount). Usage: .ci/fresh-root.sh [WORKDIR]
set -eu
cd "$(dirname "$0")/.."
top=$(pwd)
work=${1:-/tmp/fish-fresh-root}
cache=${FISH_CI_CACHE:-/var/cache/fish-ci}
suite=bookworm
t_start=$(date +%s)
step() { echo "== fresh root [$(( $(date +%s) - t_start ))s]: $*"; }

# The README's commands: the first line of the first and of the second ```sh
# block under "## Two commands".
readme_cmd() {
  awk -v want="$1" '
    /^## / { in_sec = ($0 ~ /^## Two commands/) }
    in_sec && /^```sh/ { n++; if (n == want) { getline; print; exit } }' README.md
}
cmd1=$(readme_cmd 1)
cmd2=$(readme_cmd 2)
[ -n "$cmd1" ] && [ -n "$cmd2" ] || { echo "fresh root: README.md has no two \`\`\`sh commands under '## Two commands'" >&2; exit 1; }
echo "first command:  $cmd1"
echo "second command: $cmd2 (dependency step and configure: --configure-only)"

# The Debian mirror apt uses here (deb822 .sources or a one-line sources.list).
mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
  awk '/^URIs:/ { u = $2 } /^Suites:/ && $0 ~ /(^| )'"$suite"'( |$)/ { print u; exit }')
[ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $3 == "'"$suite"'" { print $2; exit }' /etc/apt/sources.list 2>/dev/null)
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian
command -v debootstrap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }

root=$work/root
cleanup() {
  for m in dev/pts dev proc sys; do umount -l "$root/$m" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM
cleanup
rm -rf "$work"
mkdir -p "$root" "$cache"
tarball=$cache/$suite-minbase.tar
if [ ! -s "$tarball" ]; then
  step "debootstrap --variant=minbase $suite from $mirror"
  debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    { tail -20 "$work/debootstrap.log"; exit 1; }
  tar -C "$root" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
else
  step "bare root from the cache $tarball"
  tar -C "$root" -xf "$tarball"
fi
# apt inside the root: the same mirror, the suites a Debian 12 install has.
cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror $suite main
deb $mirror $suite-updates main
EOF
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount -t sysfs sys "$root/sys"

step "copying the project into /root/fish"
mkdir -p "$root/root/fish"
git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -C "$root/root/fish" -xf -

in_root() {
  chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    /bin/sh -c "cd /root/fish && $1"
}

step "the README's first command"
t1=$(date +%s)
# (a pipe into tee hides the exit status: the command leaves it in a file)
# Each line shown with the seconds since the command started (first.log keeps
# the lines as printed), then where its phases ended.
stamp() { while IFS= read -r l; do printf '[%4ss] %s\n' "$(( $(date +%s) - t1 ))" "$l"; done; }
in_root "$cmd1; echo \$? >/tmp/first.rc" 2>&1 | tee "$work/first.log" | stamp | tee "$work/first.stamped"
rc=$(cat "$root/tmp/first.rc")
at() { grep -m1 "$1" "$work/first.stamped" | sed 's/^\[ *\([0-9]*\)s\].*/\1/'; }
last_build=$(grep '^\[ *[0-9]*s\] \[[0-9]*/[0-9]*\]' "$work/first.stamped" | tail -1 | sed 's/^\[ *\([0-9]*\)s\].*/\1/')
echo "phases (seconds from the start): dependencies installed $(at 'The CXX compiler identification'), configured $(at 'Build files have been written'), built ${last_build:-?}, model synthesised $(at 'synthesising done'), table $(at '^\[ *[0-9]*s\] | llama .* | tg128 |')"
[ "$rc" = 0 ] || { echo "fresh root: the README's first command exited $rc" >&2; exit 1; }
grep -q '^| llama .* | pp512 |' "$work/first.log" && grep -q '^| llama .* | tg128 |' "$work/first.log" ||
  { echo "fresh root: the first command did not end with the benchmark table" >&2; exit 1; }
step "first command done in $(( $(date +%s) - t1 ))s"

step "the second command's dependency step and configure"
in_root "$cmd2 --configure-only; echo \$? >/tmp/second.rc" 2>&1 | tail -20
rc=$(cat "$root/tmp/second.rc")
[ "$rc" = 0 ] || { echo "fresh root: '$cmd2 --configure-only' exited $rc" >&2; exit 1; }
cleanup
rm -rf "$work"  # the root holds a build and an 800 MB model: not kept
step "passed in $(( $(date +%s) - t_start ))s"
