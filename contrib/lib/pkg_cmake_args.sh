# shellcheck shell=bash
# Sourced by contrib/package.sh and contrib/test.sh: the configuration of a tree
# that packages are made from (test.sh configures build-13 so, and package.sh
# then packs that tree instead of building another). CUDA off: no Debian
# package provides the CUDA runtime. Prefix /usr: where a .deb installs, and
# what the component's RUNPATH names.
# shellcheck disable=SC2034
pkg_cmake_args=(-DCMAKE_INSTALL_PREFIX=/usr -DDUALRAIL_CUDA=OFF -DDUALRAIL_WERROR=ON
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON)
