#!/usr/bin/env bash
# System packages the tests need (Chromium for browser tests, PHP + WordPress for the real
# WordPress site). Installed only when missing; needs root (CI runs as root).
set -euo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium fonts-noto-color-emoji)
command -v php >/dev/null 2>&1 || need+=(php-cli php-mysql php-xml php-mbstring)
[ -d /usr/share/wordpress ] || need+=(wordpress)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "missing system packages: ${need[*]} (run as root to install them)" >&2
    exit 0
  fi
  export DEBIAN_FRONTEND=noninteractive
  # an install cut off earlier (a killed CI run) leaves dpkg half-configured, and apt refuses
  # every install until it is finished
  dpkg --configure -a >/dev/null 2>&1 || true
  apt-get install -y -q "${need[@]}" >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q "${need[@]}" >/dev/null; }
fi
