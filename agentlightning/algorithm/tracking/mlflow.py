"""MLflow: one MLflow run per algorithm run, written through `MlflowClient` (no global active run is touched, so
a user's own `mlflow.start_run()` around the training is left alone).

The default tracking URI is a local file store (`file:<dir>/mlruns`); `mlflow ui --backend-store-uri <that>` shows
it. MLflow 3 keeps its file store in maintenance mode and refuses it unless `MLFLOW_ALLOW_FILE_STORE=true`: for
a folder given here that variable is set (unless the user set it), since a local folder is what a run without a
server needs. Any tracking URI MLflow accepts (a server, `sqlite:///mlflow.db` with SQLAlchemy installed) can be
given instead.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional, Union

from .base import Tracker, flatten_params

__all__ = ["MLflowTracker"]

_MAX_PARAM_LENGTH = 6000  # MLflow refuses longer parameter values
_BATCH = 1000  # MLflow's limit of metrics per log_batch call


class MLflowTracker(Tracker):
    """Log the run to MLflow (experiment `experiment`, run name `run_name`)."""

    name = "mlflow"

    def __init__(
        self,
        tracking_uri: Union[str, Path],
        *,
        experiment: str = "agentlightning",
        run_name: Optional[str] = None,
    ) -> None:
        try:
            from mlflow.tracking import MlflowClient
        except ImportError as exc:
            raise ImportError(
                f"tracking='mlflow' needs MLflow: pip install 'agentlightning[tracking]' (or mlflow-skinny) ({exc})"
            ) from exc
        uri = str(tracking_uri)
        if "://" not in uri and not uri.startswith("file:"):
            uri = Path(uri).resolve().as_uri()  # a folder: MLflow's local file store
        if uri.startswith("file:"):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.tracking_uri = uri
        self.client: Any = MlflowClient(tracking_uri=uri)
        found = self.client.get_experiment_by_name(experiment)
        experiment_id = found.experiment_id if found is not None else self.client.create_experiment(experiment)
        self.run_id: str = self.client.create_run(experiment_id, run_name=run_name).info.run_id
        self._closed = False

    def log_params(self, params: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        items = [Param(key, str(value)[:_MAX_PARAM_LENGTH]) for key, value in flatten_params(params).items()]
        for start in range(0, len(items), 100):  # MLflow takes at most 100 parameters per call
            self.client.log_batch(self.run_id, params=items[start : start + 100])

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(name, float(value), now, step) for name, value in metrics.items()]
        for start in range(0, len(items), _BATCH):
            self.client.log_batch(self.run_id, metrics=items[start : start + _BATCH])

    def log_text(self, name: str, text: str, step: int) -> None:
        self.client.log_text(self.run_id, text, f"{name}/step-{step:06d}.txt")

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.client.set_terminated(self.run_id)
