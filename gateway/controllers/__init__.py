"""Background loops that keep objects in the state the API promises (kube's controllers)."""
