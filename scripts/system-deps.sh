#!/usr/bin/env bash
# Installs the Debian packages the test suite needs when they are missing:
# PostgreSQL 15 (server binaries for the tests' own throw-away cluster), Chromium
# (the console's browser tests drive /usr/bin/chromium through Playwright), a font
# with Chinese ideographs (WenQuanYi Micro Hei, 5 MB: Chinese eval-report plots and
# console screenshots; without one the plots fall back to English words) and bubblewrap
# (bwrap: the sandbox of the agent-task evals' commands and verifiers, docs/evals.md).
set -euo pipefail

need=()
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  need+=(postgresql)
fi

if [ ! -x /usr/bin/chromium ]; then
  need+=(chromium)
fi

cjk_font=no
for font in /usr/share/fonts/truetype/wqy/wqy-microhei.ttc \
  /usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc; do
  if [ -e "$font" ]; then cjk_font=yes; fi
done
if [ "$cjk_font" = no ]; then
  need+=(fonts-wqy-microhei)
fi

if ! command -v bwrap >/dev/null 2>&1; then
  need+=(bubblewrap)
fi

if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
  SUDO=""
elif command -v sudo >/dev/null 2>&1; then
  SUDO="sudo"
else
  echo "system-deps: need Debian packages: ${need[*]} (run as root or install them)" >&2
  exit 1
fi

echo "system-deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
