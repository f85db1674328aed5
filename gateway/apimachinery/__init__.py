"""What every layer uses, as kube keeps it in k8s.io/apimachinery: the bottom of the package
graph. Nothing here imports another gateway package."""
