# Installs Debian's Chromium for the dashboard's browser tests (tests/dashboard) when it is missing and this machine
# allows it (root or password-less sudo, apt-get, a reachable package mirror). Never fails: without a browser those
# tests skip and say how to enable them. AGL_CHROMIUM names another browser binary; AGL_SKIP_CHROMIUM_INSTALL=1
# skips the attempt.
CHROMIUM="${AGL_CHROMIUM:-/usr/bin/chromium}"
if [ -x "$CHROMIUM" ] || [ -n "${AGL_SKIP_CHROMIUM_INSTALL:-}" ]; then
    return 0 2>/dev/null || exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "note: $CHROMIUM is missing and apt-get is not available: the dashboard browser tests will skip" >&2
elif [ "$(id -u)" != "0" ] && ! sudo -n true 2>/dev/null; then
    echo "note: $CHROMIUM is missing and installing it needs root: the dashboard browser tests will skip" >&2
else
    SUDO=""
    [ "$(id -u)" != "0" ] && SUDO="sudo -n"
    echo "installing Debian's chromium for the dashboard browser tests..." >&2
    # Another apt-get or dpkg (a machine's own provisioning, often installing the same package) holds the dpkg lock:
    # wait for it rather than fail. Whatever apt-get's exit status, what counts is whether the browser is there.
    APT_LOG="$(mktemp)"
    { timeout 300 $SUDO apt-get -o DPkg::Lock::Timeout=240 update -qq \
        && DEBIAN_FRONTEND=noninteractive timeout 600 $SUDO apt-get -o DPkg::Lock::Timeout=240 install -y -qq chromium; } \
        >"$APT_LOG" 2>&1 || true
    if [ ! -x "$CHROMIUM" ]; then
        echo "note: apt-get could not install chromium ($(grep -v '^\s*$' "$APT_LOG" | tail -n 1 || true)): the dashboard browser tests will skip" >&2
    fi
    rm -f "$APT_LOG"
fi
true
