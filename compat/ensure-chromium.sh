#!/usr/bin/env bash
# Install Debian's headless-capable `chromium` where it is missing, for the fault report's
# browser test (compat/test_fault_report.py). Run by `make test` and `make browser`.
#
# Does nothing when `chromium` is on PATH. Otherwise, where apt-get can be run (root, or
# passwordless sudo), installs the package; where it cannot, says why and exits 0: the browser
# test then skips, naming the missing package in its skip reason.
set -uo pipefail

say() { echo "ensure-chromium: $*" >&2; }

if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  say "no apt-get on this machine: install chromium by hand; the report's browser test will skip"
  exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
  run=()
elif sudo -n true >/dev/null 2>&1; then
  run=(sudo -n)
else
  say "not root and no passwordless sudo: cannot install chromium; the report's browser test will skip"
  exit 0
fi
say "installing Debian's chromium (apt-get install -y chromium)"
if ! "${run[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >/dev/null; then
  "${run[@]}" apt-get update -qq >/dev/null 2>&1 || true
  "${run[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >/dev/null \
    || say "apt-get could not install chromium; the report's browser test will skip"
fi
exit 0
