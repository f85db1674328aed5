"""The top of the package graph: the gateway assembled from every layer (stores, servers,
filters, controllers, admission, the aggregator) and run as ``gateway serve``. Nothing imports
this package but the command line."""
