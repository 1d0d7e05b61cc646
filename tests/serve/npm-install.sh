#!/bin/sh
# Installs the npm packages package-lock.json pins (the official `openai`
# client) into DIR/node_modules, from the npm registry with npm's own cache;
# again only when the lock file changed. Usage: npm-install.sh DIR
set -e
cd "$1"
if [ -f node_modules/openai/package.json ] && cmp -s package-lock.json node_modules/.fish-installed-lock; then
  echo "npm packages of package-lock.json already installed in $1"
  exit 0
fi
npm ci --no-audit --no-fund --loglevel=error
cp package-lock.json node_modules/.fish-installed-lock
echo "installed: $(node -p 'require("./node_modules/openai/package.json").version' 2>/dev/null | sed 's/^/openai /')"
