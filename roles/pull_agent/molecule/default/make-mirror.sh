#!/usr/bin/env bash
# The site mirror a pull node reads: a bare git copy of this repository's playbooks, roles and ansible.cfg,
# and the generated inventory of the roce-a800-4nic example, packed as one tarball.
#   make-mirror.sh PROJECT_ROOT PYTHON DEST.tar.gz
set -euo pipefail
root=$1 python=$2 dest=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src" "$work/mirror/git" "$work/mirror/http/reports"
# site.yml names its roles railforge.cluster.*: the collection layout (.collections, plugins, meta) resolves them
cp -r "$root/ansible.cfg" "$root/galaxy.yml" "$root/playbooks" "$root/roles" "$root/plugins" "$root/meta" \
  "$root/.collections" "$work/src/"
git -C "$work/src" init -q -b main
git -C "$work/src" add -A
git -C "$work/src" -c user.name=railforge -c user.email=railforge@localhost commit -qm mirror
git clone -q --bare "$work/src" "$work/mirror/git/railforge.git"
mkdir "$work/spec"
cp "$root/inventory/roce-a800-4nic/cluster.yaml" "$work/spec/"
(cd "$root" && "$python" -m railforge build "$work/spec/cluster.yaml" --only inventory --out "$work/out" >/dev/null 2>&1)
mv "$work/out/ansible" "$work/mirror/http/inventory"
tar -C "$work/mirror" -czf "$dest" .
