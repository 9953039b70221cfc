#!/usr/bin/env bash
# Debian's Chromium for the JupyterLab widget test (tests/site/test_browser.py): Playwright drives
# the system chromium, so no browser is downloaded.  Installs it where it can (root + apt-get);
# anywhere else it says so and the browser test is skipped with that reason.  Never fatal.
set -uo pipefail
# where rt_lib.site.pages.chromium() looks: $RT_CHROMIUM, else chromium on the PATH
if { [ -n "${RT_CHROMIUM:-}" ] && [ -x "$RT_CHROMIUM" ]; } || command -v chromium >/dev/null; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "setup: installing Debian's chromium for the browser test"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -qq chromium >/tmp/rt-chromium-install.log 2>&1; then
    apt-get update -qq >>/tmp/rt-chromium-install.log 2>&1
    apt-get install -y -qq chromium >>/tmp/rt-chromium-install.log 2>&1 \
      || echo "setup: could not install chromium (see /tmp/rt-chromium-install.log); the browser test will be skipped"
  fi
else
  echo "setup: no chromium on the PATH and no root apt-get: the browser test will be skipped" \
       "(install Debian's chromium package to run it)"
fi
exit 0
