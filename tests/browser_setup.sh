#!/usr/bin/env bash
# Installs what the report's tests need from Debian when it is missing, as root: chromium (driven by
# playwright through executable_path; playwright's own browser download is never used) for
# tests/test_report_browser.py, and npm (to install speedscope from tests/speedscope/package-lock.json)
# for the speedscope checks. Usage: tests/browser_setup.sh [chromium] [npm]   (default: both)
set -euo pipefail
wanted=("$@")
[ ${#wanted[@]} -eq 0 ] && wanted=(chromium npm)
missing=()
for tool in "${wanted[@]}"; do
  case "$tool" in
    chromium) [ -x /usr/bin/chromium ] || missing+=(chromium) ;;
    npm) command -v npm >/dev/null 2>&1 || missing+=(npm) ;;
    *) echo "unknown tool $tool (chromium, npm)" >&2; exit 2 ;;
  esac
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "the report's tests need ${missing[*]}: run 'apt-get install ${missing[*]}' as root" >&2
  exit 1
fi
echo "installing ${missing[*]} with apt-get ..."
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
