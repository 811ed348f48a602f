#!/usr/bin/env bash
# Smoke check: every node labelled by the stack advertises each rdma/rail<N> resource with a non-zero count.
# Usage: pulumi/smoke/check-rdma-resources.sh <cluster-name> <rails-per-node>
set -euo pipefail
here=$(dirname "$0")
missing=$(kubectl get nodes -l "railforge.io/cluster=$1" -o json | jq -c --argjson rails "$2" -f "$here/rdma-allocatable.jq")
if [ "$missing" != "[]" ]; then
  echo "nodes without RDMA resources: $missing" >&2
  exit 1
fi
echo "every node of $1 advertises rdma/rail0..rdma/rail$(($2 - 1))"
