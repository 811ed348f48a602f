"""railforge Kubernetes stack: RDMA networking and topology-aware scheduling from a railforge plan."""
