"""Reports over run directories: JSON summary, markdown tables (and, later, HTML and plots)."""

from reinagent.report.summary import summarize

__all__ = ["summarize"]
