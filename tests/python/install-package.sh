#!/bin/sh
# pip install ./python, offline (--no-index: nothing from any index), into a
# virtual environment that sees the system's site-packages (pytest, numpy).
# The build runs in a copy of the package, so the source tree stays clean.
# Usage: install-package.sh PYTHON3 VENV PACKAGE_DIR
set -e
py=$1 venv=$2 pkg=$3
[ -x "$venv/bin/pip" ] || "$py" -m venv --system-site-packages "$venv"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$pkg" "$work/python"
"$venv/bin/pip" install --no-index --no-deps --force-reinstall --quiet --disable-pip-version-check "$work/python"
"$venv/bin/python" -c 'import fish, sys; sys.stdout.write("installed the fish package in %s\n" % fish.__file__)'
