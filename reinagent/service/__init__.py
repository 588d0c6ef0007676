"""Environments as services: `reinagent serve-env`, the HttpEnv client, the conformance checker
and Gymnasium registration. The protocol is written down in docs/env-protocol.md.

    server.py sessions.py protocol.py   the server (Starlette on uvicorn), its env sessions, the messages
    guard.py                 Host, token, content type and body size checks (serve-env and `reinagent view`)
    shutdown.py              a request cut off when the server stops: a JSON 503 (both protocols)
    connections.py           below HTTP: header timeout, connection cap, bounded log (slowloris)
    client.py                the HttpEnv client (the same Env API as an in-process environment)
    served.py remote.py      a benchmark's envs on a server (--env-url); any server as `remote`
    check.py cli.py          `reinagent check-env`; the two verbs
    gym.py                   every benchmark as Gymnasium ids (reinagent/hotpotqa-v1, ...)
    agentgym.py              AgentGym's protocol both ways (serve-env --protocol agentgym; --env-protocol)
"""
