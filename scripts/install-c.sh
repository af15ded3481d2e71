#!/usr/bin/env bash
# Installs the C library: librmqha.so and librmqha.a, include/rmqha.h, and a pkg-config file
# (rmqha.pc), so a C program elsewhere builds with `cc app.c $(pkg-config --cflags --libs rmqha)`.
#
# Usage: scripts/install-c.sh BUILD_DIR
#   BUILD_DIR   where cargo left librmqha.so and librmqha.a (target/release after
#               `cargo build --release -p rmqha-ffi`; `make install-c` does both steps)
# Environment (GNU conventions):
#   PREFIX      default /usr/local
#   LIBDIR      default $PREFIX/lib
#   INCLUDEDIR  default $PREFIX/include
#   DESTDIR     staging root prepended to every path written (packagers); the .pc file still
#               names the final paths
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 BUILD_DIR (the directory holding librmqha.so and librmqha.a)" >&2
  exit 2
fi
build="$1"
root="$(cd "$(dirname "$0")/.." && pwd)"
prefix="${PREFIX:-/usr/local}"
libdir="${LIBDIR:-$prefix/lib}"
includedir="${INCLUDEDIR:-$prefix/include}"
destdir="${DESTDIR:-}"

for f in librmqha.so librmqha.a; do
  if [ ! -f "$build/$f" ]; then
    echo "$0: no $f in $build: build it first (cargo build --release -p rmqha-ffi)" >&2
    exit 1
  fi
done
for d in "$prefix" "$libdir" "$includedir"; do
  case "$d" in
    /*) ;;
    *) echo "$0: $d is not an absolute path (PREFIX, LIBDIR and INCLUDEDIR must be)" >&2; exit 2 ;;
  esac
done

# The version the header and library carry (the workspace's).
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n 1)"
if [ -z "$version" ]; then
  echo "$0: no version in $root/Cargo.toml" >&2
  exit 1
fi

install -d "$destdir$libdir/pkgconfig" "$destdir$includedir"
install -m 0755 "$build/librmqha.so" "$destdir$libdir/librmqha.so"
install -m 0644 "$build/librmqha.a" "$destdir$libdir/librmqha.a"
install -m 0644 "$root/include/rmqha.h" "$destdir$includedir/rmqha.h"

# What Rust's std needs from the system when the static library is linked
# (`rustc --print native-static-libs`); a shared link needs none of them.
pc="$destdir$libdir/pkgconfig/rmqha.pc"
cat > "$pc.tmp" <<EOF
prefix=$prefix
libdir=$libdir
includedir=$includedir

Name: rmqha
Description: RocketMQ-compatible commit log with master/slave replication (C ABI)
Version: $version
Libs: -L\${libdir} -lrmqha
Libs.private: -lgcc_s -lutil -lrt -lpthread -lm -ldl
Cflags: -I\${includedir}
EOF
mv "$pc.tmp" "$pc"
chmod 0644 "$pc"

echo "installed rmqha $version:"
echo "  $destdir$libdir/librmqha.so"
echo "  $destdir$libdir/librmqha.a"
echo "  $destdir$includedir/rmqha.h"
echo "  $pc"
