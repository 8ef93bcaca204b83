"""The testing kit for plugin authors: with :mod:`xaibench.kit`, all a plugin's tests import.

- :mod:`xaibench.testing.fixtures`: pytest fixtures (``xaibench_registry``, ``register_plugin``,
  ``tiny_track``, ``builtin_registry``, ``installed_registry``, ``default_explainers``,
  ``suite_metrics``, ``xaibench_cli``), loaded automatically through xaibench's ``pytest11``
  entry point;
- :mod:`xaibench.testing.tiny`: the tiny track (a random-weights CNN and synthetic squares) and
  :func:`~xaibench.testing.tiny.assert_saliency`, which checks maps with the runner's own check
  (:func:`xaibench.kit.check_saliency`);
- :mod:`xaibench.testing.contract`: the rest of the explainer contract (the model left untouched,
  determinism, per-sample seeds) and the model contract (one identity and the same weights on
  every build, in a fresh process too);
- :mod:`xaibench.testing.pasta_release`: a synthetic PASTA release whose votes follow known
  properties of the maps, with rater noise (its held-out Spearman is measurable), and
  ``RandomConvFeatures``, an image encoder that needs no weights;
- :mod:`xaibench.testing.scale`: synthetic per-sample records and submission files at any scale
  (tracks, explainers, metrics, samples), seeded, written by the project's own store and
  submission writer (``ScaleSpec``, ``ScaleData``, ``write_scale_records``, ``write_scale_submissions``).
"""
