#!/usr/bin/env bash
# Checks the installed package as its users meet it, from a configured and
# built BUILD_DIR (default build/):
#   1. `cmake --install` installs exactly include/varstate/ as headers, and the
#      CMake package asks for no private dependency of the shared library;
#   2. the consumer and the README's examples build with find_package(varstate)
#      while every private dependency is hidden from CMake, and run (CTest);
#   3. a plain compiler line with `pkg-config --cflags --libs varstate` builds
#      and runs the consumer;
#   4. cpack makes a .deb and a .tar.gz; the .deb unpacked with `dpkg -x` into
#      a scratch folder holds the library, the CLI, the headers and both
#      package files, declares its dependencies, and the consumer builds
#      against it through pkg-config and runs; the tarball holds the same tree.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "package: $*" >&2; exit 1; }

echo "-- install"
prefix=$work/install
cmake --install "$build" --prefix "$prefix" >/dev/null
installed=$(cd "$prefix/include" && find . -type f | sed 's|^\./||' | sort)
expected=$(cd "$root/include" && find varstate -name '*.h' | sort)
if [ ! -d "$build/CMakeFiles/varstate.dir/distributed" ]; then  # built without MPI
  expected=$(grep -v -e '/cluster\.h$' -e '/distributed_saver\.h$' <<<"$expected")
fi
[ "$installed" = "$expected" ] ||
  fail "installed headers differ from include/varstate/: $(diff <(echo "$expected") <(echo "$installed") | grep '^[<>]' | tr '\n' ' ')"
private_deps="Eigen3 fmt spdlog leveldb Protobuf CUDAToolkit"
config=$(find "$prefix" -name varstateConfig.cmake)
if grep -Ein "find_(dependency|package)\(($(tr ' ' '|' <<<"$private_deps"))" "$config"; then
  fail "$config asks for a private dependency of libvarstate"
fi
echo "   $(wc -l <<<"$installed") headers, all from include/varstate/"

echo "-- find_package consumer and README examples"
cmake -S "$root/examples/consumer" -B "$work/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  --no-warn-unused-cli $(for d in $private_deps; do echo "-DCMAKE_DISABLE_FIND_PACKAGE_$d=ON"; done) >/dev/null
cmake --build "$work/consumer" >/dev/null
ctest --test-dir "$work/consumer" --output-on-failure | tail -n 3

# The consumer built by a plain compiler line through pkg-config.
build_with_pkg_config() {  # PKG_CONFIG_PATH OUTPUT
  local flags libs libdir
  flags=$(PKG_CONFIG_PATH=$1 pkg-config --cflags varstate)
  libs=$(PKG_CONFIG_PATH=$1 pkg-config --libs varstate)
  libdir=$(PKG_CONFIG_PATH=$1 pkg-config --variable=libdir varstate)
  c++ $flags "$root/examples/consumer/main.cc" -o "$2" $libs -Wl,-rpath,"$libdir"
  "$2" >/dev/null || fail "$2 (built with pkg-config from $1) failed"
}
echo "-- pkg-config consumer"
pc_dir=$(dirname "$(find "$prefix" -name varstate.pc)")
build_with_pkg_config "$pc_dir" "$work/pc_consumer"
echo "   c++ \$(pkg-config --cflags varstate) main.cc \$(pkg-config --libs varstate): ok"

echo "-- cpack: .deb and .tar.gz"
(cd "$work" && cpack --config "$build/CPackConfig.cmake" -G "DEB;TGZ" >/dev/null)
deb=$(ls "$work"/varstate_*.deb)
tgz=$(ls "$work"/varstate-*.tar.gz)
depends=$(dpkg-deb -f "$deb" Depends)
for dep in libc6 libprotobuf libleveldb; do
  grep -q "$dep" <<<"$depends" || fail "$(basename "$deb") does not declare $dep (Depends: $depends)"
done
unpacked=$work/deb
dpkg -x "$deb" "$unpacked"
for f in bin/varstate include/varstate/varstate.h varstateConfig.cmake varstate.pc 'libvarstate.so.*'; do
  [ -n "$(find "$unpacked/usr" -path "*/$f" -print -quit)" ] || fail "$(basename "$deb") has no $f under usr/"
done
build_with_pkg_config "$(dirname "$(find "$unpacked" -name varstate.pc)")" "$work/deb_consumer"
"$unpacked/usr/bin/varstate" --version >/dev/null || fail "the .deb's varstate CLI does not run"
deb_files=$(cd "$unpacked" && find . -type f -o -type l | sed 's|^\./||' | sort)
tgz_files=$(tar -tzf "$tgz" | grep -v '/$' | sed 's|^\./||' | sort)
[ "$deb_files" = "$tgz_files" ] ||
  fail "$(basename "$tgz") and $(basename "$deb") hold different files: $(diff <(echo "$deb_files") <(echo "$tgz_files") | grep '^[<>]' | head -5 | tr '\n' ' ')"
echo "   $(basename "$deb") (Depends: $depends) and $(basename "$tgz"): $(wc -l <<<"$deb_files") files;"
echo "   dpkg -x + pkg-config consumer: ok"
