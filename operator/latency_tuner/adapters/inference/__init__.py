"""Asking a pod for answers: the quality gate's prompts, sent at temperature 0.

The pods are the tenant's: nothing here sends the operator's credentials, follows a redirect,
reads more than a capped number of bytes per answer, or waits past a deadline. It never judges
the answers (``core.quality`` does).
"""

from latency_tuner.adapters.inference.answers import Answers, collect_answers

__all__ = ["Answers", "collect_answers"]
