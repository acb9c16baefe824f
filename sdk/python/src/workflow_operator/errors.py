"""The errors the SDK raises, each saying what to do about it."""

from __future__ import annotations


class WorkflowError(Exception):
    """Base of every error of this package."""


class NotUpstream(WorkflowError):
    """A step refers to another step that does not run before it."""


class ResultNotJSON(WorkflowError):
    """A step's result (its standard output) is not JSON."""


class NoResult(WorkflowError):
    """A step has no result to read: it did not succeed, or kept none."""


class WorkflowTimeout(WorkflowError, TimeoutError):
    """A workflow did not finish in time; the message names the steps still running."""


class DevClusterError(WorkflowError):
    """`workflow-operator dev` could not be found or started."""
