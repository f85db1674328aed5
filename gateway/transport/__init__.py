"""Outgoing connections: how a Service reference becomes an address to dial (the resolver
interface), and the HTTPS clients the gateway calls backends and webhooks with. The layers that
call out (admission webhooks, the aggregator's proxy) are given these where the chain is
assembled; nothing here imports them."""
