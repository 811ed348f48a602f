# Input: `kubectl get nodes -o json`; $rails: rails per node. Output: nodes missing an rdma/railN resource.
[.items[]
 | . as $node
 | {name: $node.metadata.name,
    missing: [range(0; $rails) as $r
              | "rdma/rail\($r)"
              | select((($node.status.allocatable // {})[.] // "0") == "0")]}
 | select(.missing | length > 0)]
