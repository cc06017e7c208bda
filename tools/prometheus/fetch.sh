#!/usr/bin/env bash
# Debian's `prometheus` package unpacked into DEST (DEST/usr/bin/prometheus and promtool), never
# installed: no root, nothing outside DEST. `make prometheus` runs it; the tests and `make lint` use
# the two binaries (tests/prometheus_fixtures.py).
#
# apt-get download needs a package index that knows the package: the machine's own when it has
# one; otherwise (a fresh machine or container whose index was never fetched) a private index of
# the machine's sources, fetched into DEST.download/apt (removed after), needing no root either.
set -euo pipefail
dest=${1:?usage: fetch.sh DEST}
for tool in apt-get dpkg-deb; do
  command -v "$tool" >/dev/null || {
    echo "fetch.sh: $tool not found: this fetches Debian's prometheus package (Debian or Ubuntu);" \
         "elsewhere put a Prometheus release's prometheus and promtool into $dest/usr/bin" >&2
    exit 1
  }
done
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)  # absolute: the rest runs in the download directory beside it
work="$dest.download"
rm -rf "$work" && mkdir -p "$work" && cd "$work"
if ! apt-get download prometheus; then
  echo "fetch.sh: the machine's package index does not have prometheus; fetching a private one" >&2
  apt="$work/apt"
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
  opts=(-o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o Debug::NoLocking=1)
  apt-get "${opts[@]}" update
  apt-get "${opts[@]}" download prometheus
fi
dpkg-deb -x prometheus_*.deb root
root/usr/bin/prometheus --version
root/usr/bin/promtool --version
rm -rf "$dest" && mv root "$dest"
cd / && rm -rf "$work"
