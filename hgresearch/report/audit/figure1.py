"""Figure 1's readable labels beside the regenerated value of the point each sits on:
``mislabel`` when the label is the value of another configuration, ``projection`` when the point
is not a measurement (replicas behind a load balancer that were never run) and the projection
rule of :func:`hgresearch.report.paper_tables.project_replicas` gives it."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from hgresearch.data.catalogs import printed_decimals, printed_figure1_labels
from hgresearch.report.audit.common import (
    MISLABEL,
    PROJECTION,
    REPRODUCED,
    UNEXPLAINED,
    fmt_value,
    reproduces,
)
from hgresearch.report.paper_tables import (
    PAPER_MODEL,
    configuration_runs,
    project_replicas,
    scaling_points,
)

FIGURE1_COLUMNS = ["series", "target_qps", "quantity", "printed", "printed_decimals",
                   "regenerated", "difference", "explanation_kind", "explanation"]


def _parse_series(series: str) -> tuple[str, int]:
    """``4 x (2x RTX-4090)`` -> (``2x RTX-4090``, 4); ``2x RTX-4090`` -> (itself, 1)."""
    match = re.fullmatch(r"\s*(\d+)\s*x\s*\((.+)\)\s*", series)
    return (match.group(2).strip(), int(match.group(1))) if match else (series.strip(), 1)


def audit_figure1(runs: pd.DataFrame, model: str = PAPER_MODEL,
                  scenario: str = "alternative", labels: pd.DataFrame | None = None,
                  decimals: pd.DataFrame | None = None) -> pd.DataFrame:
    """Each printed label of Figure 1 beside the regenerated value of the point it sits on
    (:data:`FIGURE1_COLUMNS`): reproduced, ``mislabel`` (naming the configuration whose value
    it is), ``projection`` (a point no run measured, given by the projection rule) or
    ``unexplained``. ``labels`` and their printed ``decimals`` default to the catalog's."""
    printed = printed_figure1_labels() if labels is None else labels
    if decimals is None:
        decimals = printed_decimals("figure1_labels.csv")
    every_run = configuration_runs(runs, model, scenario=scenario, repeat_policy="all")
    points = scaling_points(runs, model, scenario=scenario)
    rows = []
    quantities = {"printed_cost_per_mtok_usd": "cost_usd_per_1m_tok",
                  "printed_achieved_rps": "request_throughput_rps"}
    for index, label in printed.iterrows():
        hardware, replicas = _parse_series(str(label.series))
        qps = float(label.target_qps)
        measured = every_run[(every_run.hardware == hardware) & (every_run.replicas == replicas)
                             & np.isclose(every_run.request_rate_qps, qps)]
        projection = None
        if replicas > 1 and measured.empty:
            projection = project_replicas(points, hardware, replicas, qps)
        for column, run_column in quantities.items():
            if pd.isna(label[column]):
                continue
            value_printed = float(label[column])
            places = int(decimals.loc[index, column])
            if projection is not None:
                value = float(projection[run_column])
                kind = PROJECTION if reproduces(value, value_printed, places) else UNEXPLAINED
                text = (f"no run of {label.series} exists; projection rule: "
                        f"{projection['rule']}")
            elif measured.empty:
                value, kind, text = math.nan, UNEXPLAINED, f"no run of {label.series} at {qps:g}"
            else:
                first = measured.sort_values("repeat_index").iloc[0]
                value = float(first[run_column])
                if reproduces(value, value_printed, places):
                    kind, text = REPRODUCED, ""
                else:
                    owners = every_run[[reproduces(float(v), value_printed, places)
                                        for v in every_run[run_column]]]
                    same_load = owners[np.isclose(owners.request_rate_qps, qps)]
                    owners = same_load if not same_load.empty else owners
                    if owners.empty:
                        kind, text = UNEXPLAINED, "no configuration of the model gives it"
                    else:
                        kind = MISLABEL
                        text = "the value of " + "; ".join(
                            f"{o.hardware} @ {o.request_rate_qps:g} QPS "
                            f"({fmt_value(float(o[run_column]))})"
                            for _, o in owners.drop_duplicates(
                                ["hardware", "request_rate_qps"]).iterrows())
            rows.append({"series": label.series, "target_qps": qps,
                         "quantity": run_column, "printed": value_printed,
                         "printed_decimals": places,
                         "regenerated": value, "difference": value - value_printed,
                         "explanation_kind": kind, "explanation": text})
    return pd.DataFrame(rows, columns=FIGURE1_COLUMNS)

