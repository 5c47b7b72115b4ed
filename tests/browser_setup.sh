#!/usr/bin/env bash
# Installs Debian's chromium for the browser tests (tests/test_report_browser.py) when it is missing.
# playwright drives it through executable_path; playwright's own browser download is never used.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "the browser tests need /usr/bin/chromium: run 'apt-get install chromium' as root" >&2
  exit 1
fi
echo "installing chromium with apt-get ..."
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium >/dev/null
