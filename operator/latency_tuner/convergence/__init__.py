"""Convergence benchmarks in virtual time: how few rollouts the operator needs to meet its
targets, against a grid sweep, random search, Optuna TPE and an exhaustive oracle.

- ``scenario``: the scenario format (YAML) and its validation;
- ``space``: a scenario's allowed configurations as container configurations;
- ``world``: what each run hides from the planner (efficiencies and workload effects drawn
  within published ranges, per seed) and the load it offers;
- ``measure``: the simulator's metric families sampled into series, and windows turned into
  Observations with the operator's own signal maths (``core.signals.evaluate_on_series``);
- ``virtual``: a virtual Deployment, its node, the LatencyTarget, simulated metrics and a
  virtual clock, as adapters of the reconcile loop's ports (``controller.ports``);
- ``operator_run``: the production ``controller.Reconciler`` run over them in virtual time;
- ``evaluate``, ``baselines``, ``oracle``: one-configuration measurements (cached), the
  baselines and the exhaustive search;
- ``suite`` and ``report``: a whole suite across worker processes, and its statistics.

It never touches a cluster, a network or a real clock, and it never changes the decision code
it measures: it only calls it. Optuna and matplotlib are optional (``bench`` extra).
"""
