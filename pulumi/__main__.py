"""railforge Kubernetes stack: RDMA networking and topology-aware scheduling for the cluster in `plan`."""

from railforge_k8s.program import main

main()
