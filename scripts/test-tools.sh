#!/usr/bin/env bash
# Debian packages some tests need; `make test` runs this first. Installs the missing ones when
# run as root with apt-get (CI, a fresh machine), else says which tests will skip without them.
# Under CI=true a test whose tool is absent fails instead of skipping (tests/conftest.py).
# Debian's kubernetes-client is kubectl 1.20, whose kustomize cannot read deploy/'s labels:;
# the deploy tests then fail with that reason (a newer kubectl on PATH is used as it is).
set -euo pipefail
packages=()
if ! command -v valgrind >/dev/null || ! command -v callgrind_control >/dev/null; then
  packages+=(valgrind)  # benchmarks/cycle_instructions.py, counted instructions
fi
command -v kubectl >/dev/null || packages+=(kubernetes-client)  # the sandbox and deploy/ tests
command -v chromium >/dev/null || packages+=(chromium)  # report.html of `fleetgate simulate`
command -v chromedriver >/dev/null || packages+=(chromium-driver)  # the dashboard's browser tests
command -v promtool >/dev/null || packages+=(prometheus)  # deploy/monitoring/'s alert rules
[ "${#packages[@]}" -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "test tools: installing ${packages[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}"
else
  echo "test tools: ${packages[*]} missing; the tests that need them will skip" \
    "(install with: sudo apt-get install ${packages[*]})" >&2
fi
