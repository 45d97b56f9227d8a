"""scikit-learn's callbacks (``sklearn.callback``, 1.9+) around a CV estimator's search.

The fit is the root task with two subtasks: the search, whose subtasks are
the scored (kernel, width) candidates, and the refit,
to which the callbacks propagate, so that a ``ProgressBar`` shows the
widths as they are scored and then the refit's solver iterations.
"""

import threading


class SearchProgress:
    """The callback tasks of one search; ``start`` returns None when no callbacks are set."""

    def __init__(self, estimator, data):
        self.estimator, self.data = estimator, data
        self.root = estimator._init_callback_context(max_subtasks=2)
        self.root.call_on_fit_task_begin(estimator=estimator, **data)
        # widths may be scored in threads: explicit task ids, unordered
        self.search = self.root.subcontext(task_name="search", max_subtasks=None, sequential_subtasks=False)
        self.search.call_on_fit_task_begin(estimator=estimator)
        self.lock, self.count = threading.Lock(), 0

    @classmethod
    def start(cls, estimator, X, y, sample_weight):
        if not getattr(estimator, "_skl_callbacks", None) and not hasattr(estimator, "_parent_callback_ctx"):
            return None
        metadata = None if sample_weight is None else {"sample_weight": sample_weight}
        return cls(estimator, {"X": X, "y": y, "metadata": metadata})

    def candidate(self, name, score):
        """Run ``score()`` as the search's subtask ``name``; returns its result."""
        with self.lock:
            task_id, self.count = self.count, self.count + 1
        task = self.search.subcontext(task_name=name, task_id=task_id)
        task.call_on_fit_task_begin(estimator=self.estimator)
        result = score()
        task.call_on_fit_task_end(estimator=self.estimator)
        return result

    def refit(self, model, fit):
        """Run ``fit()`` (which fits ``model``) as the refit task, the callbacks propagated to model."""
        self.search.call_on_fit_task_end(estimator=self.estimator)
        task = self.root.subcontext(task_name="refit")
        with task.propagate_callback_context(model):
            task.call_on_fit_task_begin(estimator=self.estimator, **self.data)
            fit()
            task.call_on_fit_task_end(estimator=self.estimator, **self.data)

    def end(self):
        self.root.call_on_fit_task_end(estimator=self.estimator, **self.data)
