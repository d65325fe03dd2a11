#!/usr/bin/env bash
# Installs headless Chromium (Debian's chromium package) for the picture
# tests in trace/browser_test.go. Does nothing when it is already there.
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
	echo "chromium: $(/usr/bin/chromium --version 2>/dev/null | head -n 1)"
	exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
	if ! command -v sudo >/dev/null; then
		echo "install-chromium: not root and no sudo; install Debian's chromium package by hand" >&2
		exit 1
	fi
	sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends chromium fonts-liberation fonts-dejavu-core >/dev/null
echo "chromium: $(/usr/bin/chromium --version 2>/dev/null | head -n 1)"
