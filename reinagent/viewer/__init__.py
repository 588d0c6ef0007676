"""`reinagent view`: a local web viewer of run directories (FastAPI + Jinja2, no internet assets).

    app.py       the web application: pages from templates/, JSON endpoints the pages poll; read-only
    static/      its stylesheet and script, served locally

Import `reinagent.viewer.app` only when serving: it loads the web stack.
"""
