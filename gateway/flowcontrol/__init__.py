"""API Priority and Fairness (kube's k8s.io/apiserver pkg/util/flowcontrol): classification of
requests by FlowSchema, priority levels sharing the server's seats, fair queuing within each
level, and the seat cost of each request. The handler chain's filter
(gateway/server/filters/priority.py) is its only user."""
