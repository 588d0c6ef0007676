"""Environments as services: `reinagent serve-env`, the HttpEnv client, the conformance checker
and Gymnasium registration. The protocol is written down in docs/env-protocol.md."""
