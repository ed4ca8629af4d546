"""Which measure predicts downstream instability, and which dimension/precision to ship.

The analyses of a study's results table (one row per embedding pair and task, see
:mod:`embstab.selection.results`), ported from the reference scripts of Leszczynski et al.,
"Understanding the Downstream Instability of Word Embeddings" (MLSys 2020):

- :func:`spearman_table`: Spearman ρ between each measure and the disagreement, and with
  ``control="memory"`` what each adds beyond memory (:func:`partial_spearman`);
- :func:`selection_error`: how often a measure orders two configurations wrongly (and how badly);
- :func:`oracle_gap`: the cost of choosing dimension and precision by a measure under a memory
  budget, against the oracle and the highest-/lowest-precision baselines;
- :func:`recommendation_gap`: the measured disagreement of what :func:`recommend` ships under a
  budget against the best configuration under the same budget;
- :func:`fit_trend`: the linear-log stability–memory trend;
- :func:`fit_predictor`: a calibrated prediction of the disagreement (with an interval) from a
  pair's measures, dimension and bit width, per algorithm and task; :func:`validate_predictor`
  checks it on seeds or dimensions it never saw, :func:`predict_pair` applies it to two
  embeddings, and :func:`prediction_gap` scores choosing by it under a budget.

:func:`recommend` ranks the configurations that fit a budget by their downstream disagreement
(measured, else predicted), never by raw measure values, which are not comparable across
dimensions or algorithms.

:func:`from_published_csv` imports the published results CSVs; :func:`read_results` reads either
format from CSV or Parquet, and a study's ``results.sqlite``; :func:`wide` lays a tidy table out
as measure × task.

Every analysis reads its table through :func:`as_results`, which leaves out the rows whose
downstream model is within :data:`NEAR_CHANCE_MARGIN` points of its task's chance level (their
disagreement is mostly noise); ``analysis(as_results(table, keep_near_chance=True))`` keeps them,
:func:`near_chance_left_out` says how many were left out and :func:`chance_table` summarises each
task's quality against its chance level.

A study's rows also record each measure's null (its value for an unrelated partner) and whether
the pair shows signal against it: :func:`signal_table` and :func:`without_signal` summarise them,
and :func:`recommend` never ranks configurations by a measure at its null.
"""

from __future__ import annotations

from embstab.selection.calibration import GroupCalibration
from embstab.selection.correlation import (
                                     CorrelationTable,
                                     best_measures,
                                     bootstrap_interval,
                                     partial_spearman,
                                     spearman_table,
                                     with_intervals,
)
from embstab.selection.errors import BudgetError, ResultsError
from embstab.selection.oracle import (
                                     BASELINES,
                                     oracle_decisions,
                                     oracle_gap,
                                     prediction_gap,
                                     recommendation_gap,
                                     recommendation_gap_of,
)
from embstab.selection.pairwise import pairwise_votes, selection_error
from embstab.selection.predict import (
                                     DisagreementPredictor,
                                     fit_predictor,
                                     load_predictor,
)
from embstab.selection.predict_pair import PairPrediction, predict_pair
from embstab.selection.recommend import Recommendation, recommend
from embstab.selection.results import (
                                     KIND_LABELS,
                                     NEAR_CHANCE_MARGIN,
                                     as_results,
                                     chance_table,
                                     from_published_csv,
                                     kind_label,
                                     kinds_of,
                                     measure_columns,
                                     measure_distance,
                                     near_chance,
                                     near_chance_left_out,
                                     read_results,
                                     validate_results,
                                     wide,
)
from embstab.selection.signal import (
                                     FALLBACK_ORDER,
                                     signal_summary,
                                     signal_table,
                                     without_signal,
)
from embstab.selection.trend import TrendFit, fit_trend
from embstab.selection.validation import (
                                     PredictorValidation,
                                     fit_validated_predictor,
                                     validate_predictor,
)

__all__ = [
    "BASELINES",
    "NEAR_CHANCE_MARGIN",
    "chance_table",
    "near_chance",
    "near_chance_left_out",
    "KIND_LABELS",
    "kind_label",
    "kinds_of",
    "Recommendation",
    "recommend",
    "FALLBACK_ORDER",
    "signal_summary",
    "signal_table",
    "without_signal",
    "BudgetError",
    "ResultsError",
    "TrendFit",
    "as_results",
    "fit_trend",
    "from_published_csv",
    "measure_columns",
    "measure_distance",
    "oracle_decisions",
    "oracle_gap",
    "prediction_gap",
    "DisagreementPredictor",
    "GroupCalibration",
    "PairPrediction",
    "PredictorValidation",
    "fit_predictor",
    "load_predictor",
    "predict_pair",
    "validate_predictor",
    "fit_validated_predictor",
    "recommendation_gap",
    "recommendation_gap_of",
    "pairwise_votes",
    "read_results",
    "selection_error",
    "spearman_table",
    "CorrelationTable",
    "best_measures",
    "bootstrap_interval",
    "partial_spearman",
    "with_intervals",
    "validate_results",
    "wide",
]
