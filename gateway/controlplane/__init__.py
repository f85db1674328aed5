"""The gateway's control plane assembled server by server (kube's pkg/controlplane): the
authenticators and authorizer, the admission chain, the kube core server and the controllers
that run beside the servers."""
