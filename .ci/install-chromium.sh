#!/usr/bin/env bash
# Debian's Chromium for the HTML report test (tests/report/test_html_chromium.py), which opens the report
# headless with the network blocked and checks a screenshot. Does nothing when Chromium is already there;
# without it that test skips with a message naming this script.
set -euo pipefail

if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q chromium fonts-dejavu-core
chromium --version
