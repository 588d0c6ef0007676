"""`reinagent view`: a local web viewer of run directories (FastAPI + Jinja2, no internet assets).

Import `reinagent.viewer.app` only when serving: it loads the web stack.
"""
